import numpy as np
import pytest

from wattbench.core.errors import UserError
from wattbench.workload.presets import PRESETS, load_workload
from wattbench.workload.tokenizer import ApproxTokenizer

# expected means of the documented distributions (docs/workloads.md)
EXPECTED = {
    "summarize": ((1500 + 4000) / 2, (100 + 250) / 2),
    "generate": ((16 + 128) / 2, (500 + 1000) / 2),
    "code": (600, 400),
}


@pytest.mark.parametrize("name", ["summarize", "generate", "code"])
def test_preset_length_means(name):
    p = PRESETS[name]
    rng = np.random.default_rng(0)
    x = p.input_tokens.sample(rng, 20000)
    y = p.output_tokens.sample(rng, 20000)
    ei, eo = EXPECTED[name]
    assert abs(x.mean() - ei) / ei < 0.02
    assert abs(y.mean() - eo) / eo < 0.02


def test_preset_ranges():
    rng = np.random.default_rng(1)
    s = PRESETS["summarize"].input_tokens.sample(rng, 5000)
    assert s.min() >= 1500 and s.max() <= 4000
    g = PRESETS["generate"].output_tokens.sample(rng, 5000)
    assert g.min() >= 500 and g.max() <= 1000
    c = PRESETS["code"].input_tokens.sample(rng, 5000)
    assert c.min() >= 100 and c.max() <= 1500


def test_chat_turn_lengths_and_medians():
    rng = np.random.default_rng(2)
    u = PRESETS["chat"].input_tokens.sample(rng, 40000)
    o = PRESETS["chat"].output_tokens.sample(rng, 40000)
    assert abs(np.median(u) - np.exp(4.1)) / np.exp(4.1) < 0.05
    assert abs(np.median(o) - np.exp(5.0)) / np.exp(5.0) < 0.05
    assert u.max() <= 1024 and o.min() >= 16


def test_presets_build_specs_with_documented_shapes(bpe):
    for name in ("summarize", "generate", "code"):
        # the lengths the specs carry follow the preset (many specs, fast approx source) ...
        specs = load_workload(name, ApproxTokenizer(), seed=1).take(400)
        ins = np.array([s.input_tokens for s in specs])
        outs = np.array([s.max_tokens for s in specs])
        ei, eo = EXPECTED[name]
        assert abs(ins.mean() - ei) / ei < 0.06, name
        assert abs(outs.mean() - eo) / eo < 0.06, name
        # ... and with a tokenizer the prompts have exactly those lengths
        w = load_workload(name, bpe, seed=1)
        exact = w.take(6)
        assert all(bpe.count(s.prompt) == s.input_tokens for s in exact)
        assert [s.input_tokens for s in exact] == [s.input_tokens for s in specs[:6]]
        d = w.describe()
        assert d["name"] == name and d["token_source"] == "tokenizer"


def test_rag_preset_shares_its_prefix(bpe):
    w = load_workload("rag", bpe, seed=1)
    specs = w.take(15)
    pref = w.shared
    assert all(s.prompt.startswith(pref) for s in specs)
    q = np.array([s.input_tokens for s in specs]) - w.shared_tokens
    assert q.min() >= 16 and q.max() <= 96
    assert all(bpe.count(s.prompt) == s.input_tokens for s in specs)


def test_chat_preset_sessions(bpe):
    # statistics over many turns with the fast approx source; exactness with the tokenizer below
    w = load_workload("chat", ApproxTokenizer(), seed=4)
    specs = w.take(3000)
    by = {}
    for s in specs:
        by.setdefault(s.session_id, []).append(s)
    turns = [len(v) for k, v in by.items()][:-1]  # last session may be cut
    assert abs(np.mean(turns) - 4.0) < 0.15  # uniform:2:6
    think = [s.think_time_s for s in specs if s.turn > 0]
    assert abs(np.mean(think) - 3.0) < 0.25  # exponential, mean 3 s
    assert all(s.think_time_s == 0 for s in specs if s.turn == 0)
    exact = load_workload("chat", bpe, seed=4).take(20)
    assert all(bpe.count(s.prompt) == s.tags["turn_input_tokens"] for s in exact)


def test_context_cap_applies(bpe):
    w = load_workload("summarize", ApproxTokenizer(), seed=0, max_context_tokens=1024)
    for s in w.take(200):
        assert s.input_tokens + s.max_tokens <= 1024


def test_synthetic_default_and_unknown_name(bpe):
    w = load_workload(None, bpe, input_tokens="uniform:10:20", output_tokens="7")
    s = w.take(5)
    assert all(10 <= x.input_tokens <= 20 and x.max_tokens == 7 for x in s)
    with pytest.raises(UserError, match="not a preset"):
        load_workload("chatty", ApproxTokenizer())


def test_file_resolution(tmp_path, bpe):
    ds = tmp_path / "d.jsonl"
    ds.write_text('{"prompt": "hello there world", "max_tokens": 5}\n')
    tr = tmp_path / "t.jsonl"
    tr.write_text('{"timestamp": 0, "input_length": 20, "output_length": 3}\n'
                  '{"timestamp": 500, "input_length": 30, "output_length": 4}\n')
    dw = load_workload(str(ds), bpe)
    tw = load_workload(str(tr), bpe, speedup=2.0)
    assert dw.describe()["kind"] == "dataset" and len(dw.describe()["sha256"]) == 64
    assert tw.describe()["kind"] == "trace"
    assert [s.arrival_s for s in tw.specs()] == pytest.approx([0.0, 0.25], rel=1e-9)
