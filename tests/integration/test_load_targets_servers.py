"""Several targets against two real scripted servers with different TTFT/ITL (ground truth)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.fakes.distributed_servers import scripted_servers_with_log
from wattbench.load.targets import per_target_summary, run_level_multi
from wattbench.core.load_types import LevelSpec
from wattbench.core.target import TargetSpec
from wattbench.metrics.latency import summarize_level
from wattbench.workload.base import RequestSpec

FAST = ["--ttft-ms", "30", "--itl-ms", "4"]
SLOW = ["--ttft-ms", "120", "--itl-ms", "12"]


OUT = 6


def _req(i: int) -> RequestSpec:
    return RequestSpec(prompt=f"r{i} two three", max_tokens=OUT)  # r{i}: the servers' log key


@pytest.fixture(scope="module")
def served():
    with scripted_servers_with_log(FAST, SLOW) as sv:
        yield [(TargetSpec(base_url=u, model="fake-model"), st) for u, st in sv]


@pytest.fixture
def servers(served):
    for _, st in served:
        st(reset=True)  # each test reads only its own requests from the servers' logs
    return [t for t, _ in served]


def _check_truth(out, targets, served):
    fast, slow = (t.base_url for t in targets)
    per = per_target_summary(out.records, out.start_ns, out.end_ns, [fast, slow])
    logs = {t.base_url: st.per_request() for t, st in served}
    lag = out.load.client_loop_lag_ms
    bound_ms = 2.0 + (lag.max or 0.0)  # the read path plus the longest wait the client's own probe saw
    for url, other, ttft in ((fast, slow, 30.0), (slow, fast, 120.0)):
        mine = [r for r in out.records if r.target == url and r.ok and not r.warmup]
        # each request reached the server it is recorded against (its tag is in that log only) …
        assert {f"r{r.id}" for r in mine} <= set(logs[url]) and not {f"r{r.id}" for r in mine} & set(logs[other])
        truth = [logs[url][f"r{r.id}"] for r in mine]
        # … and its TTFT is that server's, never below its script (exact: causality, one clock)
        assert all(r.first_token_ns - r.sent_ns >= first - read >= ttft * 1e6 for r, (read, first, _) in zip(mine, truth))
        delays = [r.first_token_ns - first for r, (_, first, _) in zip(mine, truth)]
        assert min(delays) >= 0 and np.mean(delays) / 1e6 <= bound_ms, (np.mean(delays) / 1e6, bound_ms)
        true_itl = sum(last - first for _, first, last in truth) / 1e6 / (len(mine) * (OUT - 1))
        assert abs(per[url].latency.itl_ms.mean - true_itl) <= bound_ms / (OUT - 1)
    # the total is the union
    req, lat, thr = summarize_level(out.records, out.start_ns, out.end_ns)
    assert per[fast].requests.completed + per[slow].requests.completed == req.completed
    assert per[fast].throughput.output_tokens + per[slow].throughput.output_tokens == thr.output_tokens
    assert sum(p.throughput.requests_per_s for p in per.values()) == pytest.approx(thr.requests_per_s)
    n_f, n_s = per[fast].latency.ttft_ms.count, per[slow].latency.ttft_ms.count
    mean = (per[fast].latency.ttft_ms.mean * n_f + per[slow].latency.ttft_ms.mean * n_s) / (n_f + n_s)
    assert lat.ttft_ms.mean == pytest.approx(mean)
    return per


def test_closed_loop_splits_streams_over_targets(servers, served):
    out = run_level_multi(LevelSpec(index=0, mode="concurrency", value=4, num_requests=48), servers, _req)
    assert all(r.target in {t.base_url for t in servers} for r in out.records)
    per = _check_truth(out, servers, served)
    fast, slow = (t.base_url for t in servers)
    # two streams each, busy back to back: each replica completes in inverse proportion to how
    # long its requests took *as measured* (~50 vs ~180 ms on a quiet host; both grow on a busy
    # one), give or take the level's last request on each stream
    ratio = per[fast].requests.completed / per[slow].requests.completed
    expected = per[slow].latency.e2e_ms.mean / per[fast].latency.e2e_ms.mean
    assert per[fast].requests.completed > per[slow].requests.completed
    assert expected / 1.5 < ratio < expected * 1.5, (ratio, expected)
    assert per[fast].requests.completed + per[slow].requests.completed == 48


def test_open_loop_weighted_arrivals_two_workers(servers, served):
    spec = LevelSpec(index=0, mode="rate", value=40, arrival="constant", num_requests=40, workers=2)
    out = run_level_multi(spec, servers, _req, weights=[3, 1])
    per = _check_truth(out, servers, served)
    fast, slow = (t.base_url for t in servers)
    assert (per[fast].requests.completed, per[slow].requests.completed) == (30, 10)
    # arrivals kept their absolute schedule: the send lag is the records' own (never early), and
    # a host that delayed the sends is reported by the guard, whatever the machine's load was
    lags = np.array([(r.sent_ns - r.scheduled_ns) / 1e6 for r in out.records])
    assert lags.min() >= 0 and out.load.send_lag_ms.p50 == pytest.approx(float(np.median(lags)), abs=1e-6)
    assert len({r.scheduled_ns for r in out.records}) == 40  # one 25 ms grid slot each
    assert out.load.send_lag_ms.p99 == pytest.approx(float(np.percentile(lags, 99)), abs=1e-6)
    # the guard's send-lag reason iff the p99 is over max(5 ms, 10% of the 25 ms gap): asserted both ways
    limit_ms = max(5.0, 0.1 * 1e3 / 40)
    flagged = [r for r in out.load.saturation_reasons if r.startswith("send lag")]
    assert bool(flagged) == (out.load.send_lag_ms.p99 > limit_ms), (out.load.send_lag_ms.p99, flagged)
    assert out.load.saturated or not flagged


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
