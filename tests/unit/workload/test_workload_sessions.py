from wattbench.workload.sessions import SessionWorkload


def test_sessions_grow_context_in_turn_order(bpe):
    w = SessionWorkload("uniform:3:5", "uniform:10:30", "uniform:20:40", bpe, seed=1, think_time_mean_s=2.0)
    specs = w.take(60)
    sessions = {}
    for s in specs:
        sessions.setdefault(s.session_id, []).append(s)
    for sid, turns in sessions.items():
        assert [t.turn for t in turns] == list(range(len(turns)))
        ctx = 0
        for t in turns:
            u = t.tags["turn_input_tokens"]
            assert bpe.count(t.prompt) == u  # the prompt is the new user turn, token-exact
            assert t.input_tokens == ctx + u == t.tags["expected_context_tokens"]
            ctx = t.input_tokens + t.max_tokens


def test_sessions_respect_context_limit(bpe):
    w = SessionWorkload("10", "uniform:100:200", "uniform:100:200", bpe, seed=2, max_context_tokens=900)
    for s in w.take(40):
        assert s.input_tokens + s.max_tokens <= 900


def test_start_offset_matches(bpe):
    w = SessionWorkload("uniform:2:4", "20", "10", bpe, seed=3)
    a = w.take(20)
    b = w.take(7, start=13)
    assert [(s.session_id, s.turn, s.prompt) for s in a[13:]] == [(s.session_id, s.turn, s.prompt) for s in b]
