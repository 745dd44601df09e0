"""Level planning without a server: worker rule, request hand-out, schedules, windows."""

import pytest

from wattbench.core.errors import UserError
from wattbench.load.level import assemble_outcome
from wattbench.load.link import WorkerResult
from wattbench.load.plan import STREAMS_PER_WORKER, Feeder, auto_workers, open_arrivals, validate_spec
from wattbench.core.load_types import LevelSpec
from wattbench.core.schema import RequestRecord
from wattbench.workload.base import RequestSpec

MS = 1_000_000


def spec(**kw):
    base = dict(index=0, mode="concurrency", value=4)
    base.update(kw)
    return LevelSpec(**base)


def test_auto_workers_rule():
    assert auto_workers(spec(value=1), cpu_count=8) == 1
    assert auto_workers(spec(value=STREAMS_PER_WORKER), cpu_count=8) == 1
    assert auto_workers(spec(value=STREAMS_PER_WORKER + 1), cpu_count=8) == 2
    assert auto_workers(spec(value=4096), cpu_count=4) == 4  # never more than the cores
    assert auto_workers(spec(mode="rate", value=250.0), cpu_count=8) == 3
    assert auto_workers(spec(mode="trace", value=0), cpu_count=8) == 1


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(value=0), "concurrency"),
        (dict(value=2.5), "concurrency"),
        (dict(mode="rate", value=-1.0), "rate"),
        (dict(mode="rate", value=2.0, arrival="gamma:0"), "gamma"),
        (dict(num_requests=0), "num-requests"),
        (dict(duration_s=-1.0), "duration"),
        (dict(workers=0), "workers"),
    ],
)
def test_validate(kw, match):
    with pytest.raises(UserError, match=match):
        validate_spec(spec(**kw))


def test_feeder_counts_warmup_and_measured_and_stops():
    f = Feeder(spec(num_requests=5, warmup_requests=2), lambda i: RequestSpec(prompt=str(i)), 1)
    items, end = f.take(0, 4)
    assert [(i, w) for i, _, w in items] == [(0, True), (1, True), (2, False), (3, False)] and not end
    items, end = f.take(0, 10)
    assert [(i, w) for i, _, w in items] == [(4, False), (5, False), (6, False)] and end
    assert f.take(0, 1) == ([], True)


def test_feeder_keeps_a_session_on_one_worker():
    reqs = [RequestSpec(prompt="a", session_id="s", turn=t) for t in range(3)] + [RequestSpec(prompt="b")]
    f = Feeder(spec(value=2), reqs, 2)
    a, _ = f.take(0, 1)  # worker 0 takes turn 0 and owns the session
    b, _ = f.take(1, 3)  # worker 1 skips the session's turns
    assert [s.session_id for _, s, _ in a] == ["s"] and [s.prompt for _, s, _ in b] == ["b"]
    c, end = f.take(0, 5)
    assert [s.turn for _, s, _ in c] == [1, 2] and end


def test_feeder_exhausted_iterable():
    f = Feeder(spec(num_requests=10), [RequestSpec(prompt="x")] * 3, 1)
    items, end = f.take(0, 10)
    assert len(items) == 3 and end and f.exhausted and f.measured == 3


def test_open_arrivals_partition_interleaved_and_bounded():
    s = spec(mode="rate", value=10.0, arrival="constant", num_requests=6, warmup_requests=2)
    parts, rate, exhausted = open_arrivals(s, lambda i: RequestSpec(prompt=str(i)), 2)
    assert rate == pytest.approx(10.0, rel=1e-9) and not exhausted
    assert [a[0] for a in parts[0]] == [0, 2, 4, 6] and [a[0] for a in parts[1]] == [1, 3, 5, 7]
    assert [a[1] for a in parts[0]] == pytest.approx([0.0, 0.2, 0.4, 0.6])
    assert [a[3] for a in parts[0] + parts[1]].count(True) == 2


def test_open_arrivals_duration_counts_after_time_warmup():
    s = spec(mode="rate", value=10.0, arrival="constant", duration_s=1.0, warmup_s=0.5)
    parts, _, _ = open_arrivals(s, lambda i: RequestSpec(prompt=str(i)), 1)
    offs = [(round(a[1], 6), a[3]) for a in parts[0]]
    assert [o for o, w in offs if w] == pytest.approx([0.0, 0.1, 0.2, 0.3, 0.4])
    assert [o for o, w in offs if not w] == pytest.approx([0.5 + 0.1 * k for k in range(10)])


def test_trace_needs_arrivals():
    with pytest.raises(UserError, match="arrival"):
        open_arrivals(spec(mode="trace", value=0), [RequestSpec(prompt="x")], 1)


def rec(i, sent, end, warm=False, sched=None):
    return RequestRecord(id=i, level=0, sent_ns=sent * MS, first_token_ns=(sent + 1) * MS,
                         last_token_ns=end * MS, end_ns=end * MS, chunk_ns=[(sent + 1) * MS, end * MS],
                         output_tokens=2, warmup=warm, scheduled_ns=None if sched is None else sched * MS)


def test_assemble_closed_loop_window():
    # Concurrency 2: reached at t=10; last send at 40; first completion after it at 50.
    records = [rec(0, 0, 30, warm=True), rec(1, 10, 50), rec(2, 30, 60), rec(3, 40, 70)]
    out = assemble_outcome(spec(value=2), [WorkerResult(records, 12.0, 40 * MS, False)], 0, None, 1)
    assert (out.start_ns, out.end_ns) == (10 * MS, 70 * MS)
    assert out.steady_start_ns == 10 * MS and out.steady_end_ns == 50 * MS
    assert out.load.mean_in_flight == pytest.approx((20 + 40 + 30 + 30) / 60)  # warm-up in flight counts
    assert out.load.drain_s == pytest.approx(0.03)
    assert out.load.achieved_rate_rps == pytest.approx(3 / 0.06)
    assert not out.load.saturated


def test_assemble_flags_saturation():
    records = [rec(i, 100 * i + 20, 100 * i + 50, sched=100 * i) for i in range(10)]  # 20 ms late
    out = assemble_outcome(spec(mode="rate", value=10.0), [WorkerResult(records, 95.0, None, False)], 0, 10.0, 1)
    assert out.load.send_lag_ms.p99 == pytest.approx(20.0)
    reasons = " ".join(out.load.saturation_reasons)
    assert out.load.saturated and "send lag" in reasons and "CPU" in reasons
    slow = [rec(i, 200 * i, 200 * i + 10, sched=200 * i) for i in range(10)]
    out = assemble_outcome(spec(mode="rate", value=10.0), [WorkerResult(slow, 5.0, None, False)], 0, 10.0, 1)
    # sent on time by an idle client: a rate below the target is the draw's, not the client's
    assert out.load.achieved_rate_rps == pytest.approx(5.0)
    assert out.load.saturation_reasons == [] and not out.load.saturated


def test_assemble_flags_a_starved_event_loop():
    records = [rec(i, 10 * i, 10 * i + 5) for i in range(4)]
    calm = WorkerResult(records, 20.0, None, False, [300_000] * 50)  # 0.3 ms
    out = assemble_outcome(spec(value=1), [calm], 0, None, 1)
    assert out.load.client_loop_lag_ms.count == 50 and not out.load.saturated
    starved = WorkerResult(records, 20.0, None, False, [300_000] * 40 + [8_000_000] * 10)
    out = assemble_outcome(spec(value=1), [starved], 0, None, 1)
    assert out.load.client_loop_lag_ms.max == pytest.approx(8.0)
    assert out.load.saturated and "loop lag p99 8.0 ms" in out.load.saturation_reasons[0]


def test_sleep_until_never_wakes_early():

    from wattbench.core.clock import now_ns
    from wattbench.load.client import new_event_loop
    from wattbench.load.worker import sleep_until

    async def go():
        early = 0
        for _ in range(30):
            due = now_ns() + 2_400_000  # uvloop alone wakes early from most 2.4 ms sleeps
            await sleep_until(due)
            early += now_ns() < due
        return early

    loop = new_event_loop()
    try:
        assert loop.run_until_complete(go()) == 0
    finally:
        loop.close()


# ------------------------------------------------------------------ capacity

GIB = 2**30


def test_capacity_memory_per_request_in_flight_by_hand():
    """1 GiB available, half of it usable: 512 MiB / 32 KiB = 16,384 requests in flight fit."""
    from wattbench.load.plan import Machine, capacity_problem

    m = Machine(available_bytes=GIB, fd_limit=None)
    assert capacity_problem(spec(value=16_384, workers=1), m) is None
    msg = capacity_problem(spec(value=16_385, workers=1), m)
    assert msg.startswith("the level needs about 0.5 GiB of memory (16,385 requests in flight (--concurrency 16385)")
    assert "this machine has 1.0 GiB available" in msg


def test_capacity_open_files_per_worker_by_hand():
    """ulimit -n 1024, 128 kept for the run: 896 connections per worker."""
    from wattbench.load.plan import Machine, capacity_problem

    m = Machine(available_bytes=None, fd_limit=1024)
    assert capacity_problem(spec(value=896, workers=1), m) is None
    assert capacity_problem(spec(value=1792, workers=2), m) is None
    msg = capacity_problem(spec(value=1793, workers=2), m)
    assert msg.startswith("--concurrency 1793 puts 897 connections on each of 2 load worker(s)")


def test_capacity_workers_and_held_arrivals_by_hand():
    from wattbench.load.plan import Machine, capacity_problem

    m = Machine(available_bytes=GIB, fd_limit=None)
    # 8 spawned workers x 96 MiB = 768 MiB > 512 MiB
    assert "lower --workers" in capacity_problem(spec(value=8, workers=8), m)
    assert capacity_problem(spec(value=5, workers=5), m) is None  # 480 MiB + 5 x 32 KiB
    # open loop: 1000/s x (120 s + 10 s warm-up) = 130,000 arrivals x 4 KiB = 508 MiB: fits; 140 s does not
    assert capacity_problem(spec(mode="rate", value=1000.0, duration_s=120.0, warmup_s=10.0, workers=1), m) is None
    msg = capacity_problem(spec(mode="rate", value=1000.0, duration_s=130.0, warmup_s=10.0, workers=1), m)
    assert "140,000 open-loop arrivals held x 4 KiB" in msg and "lower --rate x --duration" in msg
    # --rate inf: every request is in flight at once
    assert "(--rate inf with --num-requests 20000)" in capacity_problem(
        spec(mode="rate", value=float("inf"), num_requests=20_000, workers=1), m)


def test_capacity_unknown_machine_checks_nothing():
    from wattbench.load.plan import Machine, capacity_problem

    assert capacity_problem(spec(value=10**9, workers=1), Machine(None, None)) is None


def test_validate_spec_refuses_what_the_machine_cannot_hold():
    from wattbench.load.plan import Machine

    with pytest.raises(UserError, match="requests in flight"):
        validate_spec(spec(value=10**6, workers=1), Machine(available_bytes=GIB, fd_limit=None))


def test_a_search_is_checked_at_the_top_of_its_ladder(monkeypatch):
    """--sweep auto climbs to --max-concurrency: a top the machine cannot hold is refused before the
    run, named as the search's top, not found half-way through the sweep."""
    from wattbench.config.run import RunConfig
    from wattbench.load import plan as load_plan
    from wattbench.run.plan import validate_plan

    monkeypatch.setattr(load_plan.Machine, "this", classmethod(lambda cls: load_plan.Machine(GIB, None)))
    validate_plan(RunConfig(target="http://h:1", sweep="auto", max_concurrency=16_384, workers=1))
    with pytest.raises(UserError, match=r"--max-concurrency 16385 \(the top of the search\)"):
        validate_plan(RunConfig(target="http://h:1", sweep="auto", max_concurrency=16_385, workers=1))


def test_a_search_at_its_default_top_names_the_default(monkeypatch):
    """--sweep auto without --max-concurrency climbs to its default top: a top the machine cannot
    hold is named as that default, never as a --max-concurrency the user did not give."""
    from wattbench.config.run import SEARCH_MAX_CONCURRENCY, RunConfig
    from wattbench.load import plan as load_plan
    from wattbench.run.plan import validate_plan

    # room for half the default top's streams (32 KiB each, half the memory wattbench's): 256 do not fit
    room = SEARCH_MAX_CONCURRENCY * load_plan.BYTES_PER_IN_FLIGHT
    monkeypatch.setattr(load_plan.Machine, "this", classmethod(lambda cls: load_plan.Machine(room, None)))
    validate_plan(RunConfig(target="http://h:1", sweep="auto", max_concurrency=SEARCH_MAX_CONCURRENCY // 2,
                            workers=1))
    with pytest.raises(UserError) as e:
        validate_plan(RunConfig(target="http://h:1", sweep="auto", workers=1))
    msg = str(e.value)
    assert f"the search's top, {SEARCH_MAX_CONCURRENCY} (the default when no --max-concurrency is given)" in msg
    assert f"--max-concurrency {SEARCH_MAX_CONCURRENCY}" not in msg


def _recording_source(calls: list, n: int | None = None, fail_at: int | None = None):
    import threading

    def source(i: int):
        if fail_at is not None and i == fail_at:
            raise UserError(f"request {i} is unreadable")
        if n is not None and i >= n:
            return None
        calls.append((i, threading.get_ident()))
        return RequestSpec(prompt=str(i))
    return source


def test_feeder_prefill_draws_a_count_bound_level_before_it_starts():
    """A level of known size is drawn whole by ``prefill`` (before t0): handing it out draws nothing
    more (a workload builds prompts in batches; drawn on the event loop they stalled every stream)."""
    import threading

    calls: list = []
    f = Feeder(spec(value=4, num_requests=10, warmup_requests=2), _recording_source(calls), 1)
    f.prefill()
    drawn = len(calls)
    assert drawn == 10 + 2 + 4 and f._drawer is None  # the level, its warm-up, one round of streams
    got = []
    while True:
        items, end = f.take(0, 3)
        got += [i for i, _, _ in items]
        if end:
            break
    assert got == list(range(12)) and len(calls) == drawn  # nothing drawn while the level ran
    assert {t for _, t in calls} == {threading.get_ident()}
    f.finish()


def test_feeder_prefill_keeps_a_duration_level_drawn_ahead_off_the_callers_thread():
    import threading
    import time

    calls: list = []
    f = Feeder(spec(value=4, duration_s=60.0), _recording_source(calls), 1)
    f.prefill()
    assert len(calls) == f.lookahead and f._drawer is not None
    me = threading.get_ident()
    for _ in range(3):  # hand out more than the prefill drew: the drawing thread tops it up
        items, end = f.take(0, f.lookahead // 2 + 1)
        assert len(items) == f.lookahead // 2 + 1 and not end
        deadline = time.monotonic() + 60  # ends a hang only
        while len(f.drawn) < f.lookahead and time.monotonic() < deadline:
            time.sleep(0.005)
    assert [i for i, _ in calls] == list(range(len(calls)))  # drawn once each, in order
    later = [t for _, t in calls[f.lookahead:]]
    assert later and me not in later  # every draw after the prefill on the drawing thread
    f.finish()
    assert f._drawer is None


def test_feeder_prefill_hands_out_what_was_drawn_then_the_source_error():
    f = Feeder(spec(value=2, duration_s=60.0), _recording_source([], fail_at=5), 1)
    f.prefill()
    items, end = f.take(0, 5)
    assert [i for i, _, _ in items] == [0, 1, 2, 3, 4] and not end
    with pytest.raises(UserError, match="request 5 is unreadable"):
        f.take(0, 1)
    f.finish()


def test_feeder_prefill_source_that_runs_out():
    calls: list = []
    f = Feeder(spec(value=2, duration_s=60.0), _recording_source(calls, n=3), 1)
    f.prefill()
    assert f._drawer is None  # the source ran out during the prefill: nothing left to draw
    items, end = f.take(0, 10)
    assert [i for i, _, _ in items] == [0, 1, 2] and end and f.exhausted
