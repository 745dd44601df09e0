"""Several targets against two real scripted servers with different TTFT/ITL (ground truth)."""

from __future__ import annotations

import pytest

from tests.fakes.distributed_servers import scripted_servers
from wattbench.load.targets import per_target_summary, run_level_multi
from wattbench.load.types import LevelSpec, TargetSpec
from wattbench.metrics.latency import summarize_level
from wattbench.workload.base import RequestSpec

FAST = ["--ttft-ms", "30", "--itl-ms", "4"]
SLOW = ["--ttft-ms", "120", "--itl-ms", "12"]


def _req(i: int) -> RequestSpec:
    return RequestSpec(prompt="one two three", max_tokens=6)


@pytest.fixture(scope="module")
def servers():
    with scripted_servers(FAST, SLOW) as urls:
        yield [TargetSpec(base_url=u, model="fake-model") for u in urls]


def _check_truth(out, targets):
    fast, slow = (t.base_url for t in targets)
    per = per_target_summary(out.records, out.start_ns, out.end_ns, [fast, slow])
    # each target's figures are its own server's script (client overhead is a few ms at most);
    # medians, so a few requests delayed by new connections or a busy 2-core box do not decide it
    assert per[fast].latency.ttft_ms.p50 == pytest.approx(30, abs=8)
    assert per[slow].latency.ttft_ms.p50 == pytest.approx(120, abs=8)
    assert per[fast].latency.itl_ms.p50 == pytest.approx(4, abs=1.5)
    assert per[slow].latency.itl_ms.p50 == pytest.approx(12, abs=1.5)
    # the total is the union
    req, lat, thr = summarize_level(out.records, out.start_ns, out.end_ns)
    assert per[fast].requests.completed + per[slow].requests.completed == req.completed
    assert per[fast].throughput.output_tokens + per[slow].throughput.output_tokens == thr.output_tokens
    assert sum(p.throughput.requests_per_s for p in per.values()) == pytest.approx(thr.requests_per_s)
    n_f, n_s = per[fast].latency.ttft_ms.count, per[slow].latency.ttft_ms.count
    mean = (per[fast].latency.ttft_ms.mean * n_f + per[slow].latency.ttft_ms.mean * n_s) / (n_f + n_s)
    assert lat.ttft_ms.mean == pytest.approx(mean)
    return per


def test_closed_loop_splits_streams_over_targets(servers):
    out = run_level_multi(LevelSpec(index=0, mode="concurrency", value=4, num_requests=48), servers, _req)
    assert all(r.target in {t.base_url for t in servers} for r in out.records)
    per = _check_truth(out, servers)
    fast, slow = (t.base_url for t in servers)
    # two streams each; a request takes ~30+5*4=50 ms on one and ~120+5*12=180 ms on the other,
    # so the fast replica completes about 180/50 = 3.6 times as many
    ratio = per[fast].requests.completed / per[slow].requests.completed
    assert 2.5 < ratio < 5.0
    assert per[fast].requests.completed + per[slow].requests.completed == 48


def test_open_loop_weighted_arrivals_two_workers(servers):
    spec = LevelSpec(index=0, mode="rate", value=40, arrival="constant", num_requests=40, workers=2)
    out = run_level_multi(spec, servers, _req, weights=[3, 1])
    per = _check_truth(out, servers)
    fast, slow = (t.base_url for t in servers)
    assert (per[fast].requests.completed, per[slow].requests.completed) == (30, 10)
    # arrivals kept their absolute schedule (median send lag; the tail is the shared box's)
    assert out.load.send_lag_ms.p50 < 10


def test_a_session_stays_on_the_target_of_its_first_turn(servers):
    reqs = [RequestSpec(prompt=f"s{s} t{t}", max_tokens=3, session_id=f"s{s}", turn=t)
            for t in range(3) for s in range(3)]
    chat = [TargetSpec(base_url=t.base_url, model="fake-model", api="chat") for t in servers]
    spec = LevelSpec(index=0, mode="rate", value=50, arrival="constant", num_requests=len(reqs))
    out = run_level_multi(spec, chat, reqs)
    by_session: dict[str, set] = {}
    for r in out.records:
        assert r.ok
        by_session.setdefault(r.session_id, set()).add(r.target)
    # with 3 sessions and 2 targets, request k's own route (k mod 2) would move every session
    # between the replicas from turn to turn; sticking to the first turn's target keeps each on one
    assert len(by_session) == 3 and all(len(v) == 1 for v in by_session.values())
    assert by_session["s0"] == by_session["s2"] != by_session["s1"]
