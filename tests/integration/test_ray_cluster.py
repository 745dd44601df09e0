"""Ray on a local two-node cluster (head + one worker node, real raylet/GCS processes on this
machine, started and stopped by Ray's own ``ray.cluster_utils.Cluster``) against a scripted
streaming server: the merged distributed level equals a single-process level; injected clock
skews are corrected within the stated uncertainty; a node whose sensor actor dies is reported
and the run goes on.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np
import pytest

ray = pytest.importorskip("ray")

from tests.fakes.distributed_servers import FixedRequests, scripted_server_with_log  # noqa: E402
from tests.fakes.distributed_sensors import BMC_ENV, LeakyMeters, PowerByNode  # noqa: E402
from wattbench.accounting.boundaries import boundary_totals  # noqa: E402
from wattbench.core.clock import now_ns  # noqa: E402
from wattbench.distributed.merge import split_by_node  # noqa: E402
from wattbench.distributed.run import RayCluster, run_distributed_level  # noqa: E402
from wattbench.load.level import run_level  # noqa: E402
from wattbench.core.load_types import LevelSpec  # noqa: E402
from wattbench.core.target import TargetSpec  # noqa: E402
from wattbench.metrics.latency import request_end_ns, summarize_level  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.heavy]

ROOT = Path(__file__).resolve().parents[2]
TTFT_MS, ITL_MS, OUT = 40.0, 6.0, 6
BMC_PASSWORD = "bmc-NODE-pw/7Zq+41xv"


factory = FixedRequests(max_tokens=OUT, tagged=True)


@pytest.fixture(scope="module")
def cluster():
    from ray.cluster_utils import Cluster

    import ray._private.ray_constants as ray_constants

    keys = ("PYTHONPATH", "RAY_AUTH_MODE", "RAY_USAGE_STATS_ENABLED", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", BMC_ENV)
    old = {k: os.environ.get(k) for k in keys}
    old_cluster = ray_constants.ENABLE_RAY_CLUSTER
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT)] + ([old["PYTHONPATH"]] if old["PYTHONPATH"] else []))
    os.environ["RAY_AUTH_MODE"] = "disabled"  # a throwaway local cluster
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    # Ray rewrites 127.0.0.1 to the machine's interface address ("remotely reachable") unless it
    # runs as a single-machine cluster, as it does on macOS/Windows: that switch, for this process
    # (already imported) and for the nodes it starts, keeps every address on loopback.
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    os.environ[BMC_ENV] = BMC_PASSWORD  # the nodes' processes hold a BMC password in their environment
    ray_constants.ENABLE_RAY_CLUSTER = False
    # every node on loopback: Ray's default node IP is the machine's interface address, and test
    # traffic stays on 127.0.0.1 (tests/unit/reliability/test_loopback_only.py checks this)
    sigterm = signal.getsignal(signal.SIGTERM)  # ray.init installs its own for the whole process
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False,
                                                      "node_ip_address": "127.0.0.1"})
    try:
        c.add_node(num_cpus=2, node_ip_address="127.0.0.1")
        ray.init(address=c.address, log_to_driver=False, _node_ip_address="127.0.0.1")
        c.wait_for_nodes()
        yield c
    finally:
        ray.shutdown()
        c.shutdown()
        signal.signal(signal.SIGTERM, sigterm)
        ray_constants.ENABLE_RAY_CLUSTER = old_cluster
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="module")
def served():
    with scripted_server_with_log("--ttft-ms", str(TTFT_MS), "--itl-ms", str(ITL_MS)) as (url, stats):
        yield TargetSpec(base_url=url, model="fake-model"), stats


@pytest.fixture
def target(served):
    return served[0]


def _summary(out):
    return summarize_level(out.records, out.start_ns, out.end_ns)


def _truth(stats) -> dict:
    """The server's per-request log since the last read (and clear it): r{id} -> (read, first, last)."""
    log = stats.per_request()
    stats(reset=True)
    return log


def _check_against_truth(out, truth: dict, ttft_ms: float, before: int, after: int, u_ns: int = 0) -> None:
    """Latency of a level against the scripted server's own log, not against wall-clock
    expectations (a loaded host makes every figure grow, and that is no error of the tool).

    - causality, exact: a client TTFT (one worker's clock, so any offset cancels) is never below
      the server's own read -> first write, which is never below the scripted TTFT;
    - each request reached the server it is recorded against (its tag is in that server's log);
    - the level's mean TTFT/ITL are the records' own;
    - on the driver's timeline (``before``/``after``: its readings around the level), a first/last
      chunk is stamped no earlier than the server wrote it (within the clock offset's uncertainty
      ``u_ns``) and no later than the request ended, which was before the level returned: any
      clock-mapping error larger than the stamping delay shows (the skews injected here are
      seconds); the mean stamping delay is bounded by the client's own loop-lag probe where it
      recorded one (2 ms + its max wait).
    """
    _, lat, _ = _summary(out)
    recs = [r for r in out.records if r.ok and not r.warmup]
    delays = []
    for r in recs:
        read, first_w, last_w = truth[f"r{r.id}"]
        assert r.first_token_ns - r.sent_ns >= first_w - read >= ttft_ms * 1e6
        assert r.first_token_ns - first_w >= -u_ns and r.last_token_ns - last_w >= -u_ns
        assert before < r.sent_ns < r.first_token_ns <= r.last_token_ns <= r.end_ns < after
        delays += [r.first_token_ns - first_w, r.last_token_ns - last_w]
    assert lat.ttft_ms.mean == pytest.approx(np.mean([(r.first_token_ns - r.sent_ns) / 1e6 for r in recs]), rel=1e-9)
    lag = out.load.client_loop_lag_ms
    bound_ms = (2.0 + lag.max) if lag.count else max(delays) / 1e6  # without a probe: the delays seen
    assert np.mean(delays) / 1e6 <= bound_ms + u_ns / 1e6, (np.mean(delays) / 1e6, bound_ms)
    # ITL telescopes: the mean is the records' first->last spans, each within the stamping delays
    true_itl = sum(truth[f"r{r.id}"][2] - truth[f"r{r.id}"][1] for r in recs) / 1e6 / (len(recs) * (OUT - 1))
    assert abs(lat.itl_ms.mean - true_itl) <= (max(bound_ms, max(delays) / 1e6) + 2 * u_ns / 1e6) / (OUT - 1)


def _throughput_is_the_windows(out, t) -> None:
    """requests/s = requests ending inside the level's window / its duration, exactly; and no
    faster than the scripted server allows (each request takes >= TTFT + (OUT-1) x ITL)."""
    ends = [request_end_ns(r) for r in out.records if r.ok and not r.warmup]
    inside = sum(1 for e in ends if out.start_ns <= e <= out.end_ns)
    assert t.requests_per_s == pytest.approx(inside / ((out.end_ns - out.start_ns) / 1e9), rel=1e-9)


def test_closed_loop_merged_equals_single_process(cluster, served):
    target, stats = served
    spec = LevelSpec(index=0, mode="concurrency", value=4, num_requests=60)
    _truth(stats)
    t_a = now_ns()
    single = run_level(spec, target, factory)
    t_b = now_ns()
    truth_single = _truth(stats)
    with RayCluster("auto", n_actors=2, actor_cpus=1) as cl:
        t_c = now_ns()
        dist = cl.run_level(spec, target, factory)
        t_d = now_ns()
        truth_dist = _truth(stats)
        nodes = {a.node_id for a in dist.load.actors}
    assert len(nodes) == 2  # SPREAD put one actor on each node
    (r1, _l1, t1), (r2, _l2, t2) = _summary(single), _summary(dist)
    assert r1.completed == r2.completed == 60 and r2.failed == 0
    assert sorted(r.id for r in dist.records) == list(range(60))
    # both levels measured right against the server's own log (not against each other's timing)
    _check_against_truth(single, truth_single, TTFT_MS, t_a, t_b)
    _check_against_truth(dist, truth_dist, TTFT_MS, t_c, t_d,
                         u_ns=max(a.clock_uncertainty_ns for a in dist.load.actors))
    _throughput_is_the_windows(single, t1)
    _throughput_is_the_windows(dist, t2)
    # 4 streams, each request >= 40 + 5 x 6 = 70 ms at the server: at most 4 / 0.070 requests/s
    assert t2.requests_per_s <= 4 / ((TTFT_MS + (OUT - 1) * ITL_MS) / 1e3) * 1.01
    assert dist.load.target_concurrency == 4 and dist.load.workers == 2
    assert dist.steady_start_ns is not None and dist.start_ns <= dist.steady_start_ns < dist.steady_end_ns


def test_open_loop_with_skewed_clocks(cluster, served):
    target, stats = served
    skews = {0: 7_000_000_000, 1: -3_000_000_000}
    rate, n = 40.0, 60
    spec = LevelSpec(index=1, mode="rate", value=rate, arrival="constant", num_requests=n)
    _truth(stats)
    t_a = now_ns()
    single = run_level(spec, target, factory)
    t_b = now_ns()
    truth_single = _truth(stats)
    before = now_ns()
    with RayCluster("auto", n_actors=2, actor_cpus=1, clock_skew_ns=lambda kind, i: skews.get(i, 0)) as cl:
        dist = cl.run_level(spec, target, factory)
    after = now_ns()
    truth_dist = _truth(stats)
    acts = {a.index: a for a in dist.load.actors}
    for i, skew in skews.items():
        # same host, so the true offset is the injected skew: the estimate lands within its bound
        assert abs(acts[i].clock_offset_ns - skew) <= acts[i].clock_uncertainty_ns
        # the stated bound is the best ping's RTT / 2 (before or after the level, the larger), and
        # every ping ran inside the driver's span of the cluster's life
        assert (acts[i].clock_rtt_ns + 1) // 2 <= acts[i].clock_uncertainty_ns <= (after - before + 1) // 2
    u = max(a.clock_uncertainty_ns for a in acts.values())
    # corrected timestamps are on the driver's timeline …
    assert all(before < r.sent_ns < after for r in dist.records)
    assert all(before < r.last_token_ns < after for r in dist.records)
    # … and the two actors' interleaved arrivals are back on one 25 ms grid (uncorrected they
    # would be 10 s apart): every gap is 1/rate within the two offsets' uncertainties
    sched = np.sort(np.array([r.scheduled_ns for r in dist.records], dtype=np.int64))
    gaps = np.diff(sched)
    assert np.all(np.abs(gaps - 25_000_000) <= 2 * u + 1_000)
    (r1, _l1, t1), (r2, _l2, t2) = _summary(single), _summary(dist)
    assert r1.completed == r2.completed == n
    # the skew-corrected stamps against the server's own log, within the offsets' uncertainty
    _check_against_truth(single, truth_single, TTFT_MS, t_a, t_b)
    _check_against_truth(dist, truth_dist, TTFT_MS, before, after, u_ns=u)
    _throughput_is_the_windows(single, t1)
    _throughput_is_the_windows(dist, t2)
    # the send lag is the records' own (never early), and the guard judges it: a host that
    # delayed the sends is reported, whatever the machine's load was
    lags = np.array([(r.sent_ns - r.scheduled_ns) / 1e6 for r in dist.records])
    assert lags.min() >= -2 * u / 1e6
    assert dist.load.send_lag_ms.count == n
    assert dist.load.send_lag_ms.p50 == pytest.approx(float(np.median(lags)), abs=1e-6)
    # the guard's send-lag reason iff the p99 is over max(5 ms, 10% of the gap): asserted both ways
    flagged = [r for r in dist.load.saturation_reasons if r.startswith("send lag")]
    assert bool(flagged) == (dist.load.send_lag_ms.p99 > max(5.0, 0.1 * 1e3 / rate)), (dist.load.send_lag_ms, flagged)
    assert dist.load.saturated or not flagged


def test_sensor_actor_dies_and_the_run_goes_on(cluster, target):
    node_ids = sorted(n["NodeID"] for n in ray.nodes() if n["Alive"])
    a, b = node_ids
    sensors = PowerByNode(node_ids, [250.0, 100.0], die={b: 20}, poll_interval_s=0.05)
    skews = {0: 11_000_000_000, 1: -5_000_000_000}
    sa, sb = a[:8], b[:8]
    t_open = now_ns()
    out, run = run_distributed_level(
        LevelSpec(index=0, mode="concurrency", value=4, duration_s=2.0), target, factory, "auto", 2,
        actor_cpus=1, sensor_factory=sensors, drain_period_s=0.2,
        clock_skew_ns=lambda kind, i: skews.get(i, 0) if kind == "sensor" else 0,
    )
    t_close = now_ns()
    log, problems = run.telemetry, run.sensor_problems
    infos = {ni.node_id: ni for ni in run.nodes}
    assert infos[sa].channels == [f"{sa}/scripted.energy", f"{sa}/scripted.power"]
    assert all(ni.clock_uncertainty_ns is not None for ni in run.nodes)
    # the level ran its time: not stopped early, and (causality) a closed loop with a request in
    # flight when its 2 s ran out cannot end sooner than 2 s after it was asked to start (was:
    # end - first send >= 1.98 s, which a first send delayed by a loaded host breaks)
    u_load = max(a.clock_uncertainty_ns for a in out.load.actors)
    assert out.stopped_early is None and out.end_ns >= t_open + 2.0e9 - u_load
    assert infos[sa].sensor_status == "ok"
    assert infos[sb].sensor_status == "died"
    assert any(sb in p and "died" in p and "goes on" in p for p in problems)
    per = split_by_node(log)
    # the dead node's readings up to its death were drained and kept; the live node's cover the run
    tb, _ = per[sb].series(f"{sb}/scripted.energy")
    ta, _ = per[sa].series(f"{sa}/scripted.energy")
    assert 3 <= len(tb) < 20  # it dies on its 20th read
    # the run went on after the death (counted against it, not against a wall-clock rate): the
    # live meter kept reading and requests kept being sent after the dead one's last reading
    assert max(ta) > max(tb) and len(ta) > len(tb)
    assert any(r.sent_ns > max(tb) and r.ok for r in out.records)
    # sensor clocks were skewed by +11 s / −5 s: after correction every reading is inside the
    # driver's span of the cluster's life
    assert all(t_open < t < t_close for t in ta + tb)
    # the live node's energy over the level window is its scripted 250 W
    w = boundary_totals(per[sa], out.start_ns, out.end_ns)["accelerator"]
    assert w.energy_j == pytest.approx(250.0 * (out.end_ns - out.start_ns) / 1e9, rel=0.02)
    tot = boundary_totals(log, out.start_ns, out.end_ns)
    assert "cluster" in tot and sa in tot["cluster"].notes[0] and sb in tot["cluster"].notes[0]


def test_several_targets_through_ray(cluster):
    from tests.fakes.distributed_servers import scripted_servers_with_log
    from wattbench.load.targets import per_target_summary

    with scripted_servers_with_log(["--ttft-ms", "20", "--itl-ms", "3"], ["--ttft-ms", "90", "--itl-ms", "9"]) as sv:
        urls = [u for u, _ in sv]
        targets = [TargetSpec(base_url=u, model="fake-model") for u in urls]
        spec = LevelSpec(index=0, mode="rate", value=40.0, arrival="constant", num_requests=40)
        with RayCluster("auto", n_actors=2, actor_cpus=1) as cl:
            out = cl.run_level(spec, targets, factory, weights=[1, 3])
        truth = {u: st.per_request() for u, st in sv}
    per = per_target_summary(out.records, out.start_ns, out.end_ns, urls)
    assert (per[urls[0]].requests.completed, per[urls[1]].requests.completed) == (10, 30)
    u_ns = max(a.clock_uncertainty_ns for a in out.load.actors)
    for url, other, ttft in ((urls[0], urls[1], 20.0), (urls[1], urls[0], 90.0)):
        mine = [r for r in out.records if r.target == url]
        # each request reached the server it is recorded against, and only that one
        assert {f"r{r.id}" for r in mine} == set(truth[url]) and not set(truth[url]) & set(truth[other])
        # its TTFT is that server's (exact causal floor; the split did not mix the targets)
        assert all(r.first_token_ns - r.sent_ns >= ttft * 1e6 for r in mine)
        assert per[url].latency.ttft_ms.mean == pytest.approx(
            np.mean([(r.first_token_ns - r.sent_ns) / 1e6 for r in mine]), rel=1e-9)
        spans = [truth[url][f"r{r.id}"][2] - truth[url][f"r{r.id}"][1] for r in mine]
        true_itl = sum(spans) / 1e6 / (len(mine) * (OUT - 1))
        lag = out.load.client_loop_lag_ms
        bound_ms = (2.0 + lag.max) if lag.count else 1000.0
        assert abs(per[url].latency.itl_ms.mean - true_itl) <= (bound_ms + 2 * u_ns / 1e6) / (OUT - 1)


def test_wattbench_run_on_ray_merges_nodes_into_a_cluster_boundary(cluster, target, tmp_path):
    """The library entry point with --ray: load actors on both nodes, one sensor actor per node
    (a declared 300 W node meter each), per-node energy and a cluster boundary = their sum."""
    from wattbench.config.run import RunConfig
    from wattbench.results.rundir import load_result
    from wattbench.run import run_benchmark

    cfg = RunConfig(target=target.base_url, ray="auto", ray_actors=2, concurrency=[4], num_requests=40,
                    input_tokens="16", output_tokens="6", sensors=["const:node=300"], idle_s=0.5,
                    out=str(tmp_path / "run"), register_run=False, html=False)
    res = run_benchmark(cfg)
    assert res.status == "complete" and len(res.nodes) == 2
    lv = res.levels[0]
    assert lv.requests.completed == 40 and lv.requests.failed == 0
    assert lv.load.workers == 2
    assert len(lv.per_node_energy) == 2
    for energies in lv.per_node_energy.values():
        assert energies["node"].energy_j == pytest.approx(300.0 * lv.window.duration_s, rel=0.02)
    cl = lv.energy["cluster"]
    assert cl.energy_j == pytest.approx(600.0 * lv.window.duration_s, rel=0.02)
    assert cl.output_tokens_per_s_per_kw == pytest.approx(lv.throughput.output_tokens_per_s / 0.6, rel=0.02)
    assert load_result(tmp_path / "run").levels[0].energy["cluster"].energy_j == pytest.approx(cl.energy_j)


def test_closing_reads_bracket_a_window_end_on_every_node(cluster):
    """After a window ends, ``RayCluster.closing_reads`` has every node's sampler read past the end
    (the driver's end mapped to each node's clock, skewed here by +11 s and −5 s) and drains it, so
    the driver's log brackets the end on every node. The periodic drain is an hour: only the closing
    reads can bring a reading after the end to the driver."""
    node_ids = sorted(n["NodeID"] for n in ray.nodes() if n["Alive"])
    skews = {0: 11_000_000_000, 1: -5_000_000_000}
    with RayCluster("auto", n_actors=1, sensor_factory=PowerByNode(node_ids, [250.0, 100.0], poll_interval_s=0.05),
                    drain_period_s=3600.0,
                    clock_skew_ns=lambda kind, i: skews.get(i, 0) if kind == "sensor" else 0) as cl:
        cl.start_sensors()
        end = now_ns()
        # a node whose end was mapped 5 s late would wait out the timeout and answer False
        assert cl.closing_reads(end, timeout_s=4.0) is True
        log = cl.telemetry()
        last = {}
        for cid, (t, _) in ((c, log.series(c)) for c in log.channels):
            last[cid.split("/")[0]] = max([last.get(cid.split("/")[0], 0), *t])
        assert sorted(last) == sorted(n[:8] for n in node_ids)
        assert all(t > end for t in last.values()), (end, last)
        cl.stop_sensors()


QUERY_SECRET = "rY4sEcReTqUeRy7mN3vB"
QUERY = f"api-version=2024-06-01&key={QUERY_SECRET}"


def _query_pieces_in(text: str) -> list[str]:
    low = text.lower()
    return sorted(p for p in {QUERY_SECRET[i:i + 8].lower() for i in range(len(QUERY_SECRET) - 7)} if p in low)


def test_load_actors_send_a_targets_query_with_every_request_and_scrub_it(cluster, tmp_path):
    """``-t 'URL?api-version=…&key=…'`` on Ray: the load actors (processes of both nodes, which have
    nothing of the driver's but their jobs) send the query with every request, exactly as given, to
    the target (a hostile server, ``echo_query``, that logs every request with its query and refuses
    every third with a 401 quoting it back); what they hand back is already scrubbed of it.

    - a closed-loop level on two actors straight from ``RayCluster`` (no scope open in this process:
      the records are as the actors made them): every request with the query, the 401s' quotes
      masked, no 8-character piece of the key in any record;
    - ``run_benchmark`` with ``--rate`` (the actors' open loop) on two actors: every request the
      server received carried the query, and no file of the run, nor any log the cluster's
      processes wrote in its session, holds a piece of the key."""
    from tests.fakes.hostile_server import MODEL
    from tests.fakes.reliability_procs import HOSTILE, server
    from wattbench.config.run import RunConfig
    from wattbench.core.secret_scope import registered
    from wattbench.results.rundir import load_result
    from wattbench.run import run_benchmark

    assert not registered().found_in(QUERY_SECRET)
    with server("--behaviour", "echo_query", script=HOSTILE) as s:
        target = TargetSpec(base_url=s.base + "/v1", model=MODEL, query=QUERY)
        spec = LevelSpec(index=0, mode="concurrency", value=2, num_requests=12)
        with RayCluster("auto", n_actors=2, actor_cpus=1) as cl:
            out = cl.run_level(spec, target, factory)
        closed_log = s.get("/log")
        cfg = RunConfig(target=f"{s.base}/v1?{QUERY}", ray="auto", ray_actors=2, rate=[20.0], num_requests=12,
                        input_tokens="8", output_tokens="4", sensors=["const:node=100"], idle_s=0.2,
                        out=str(tmp_path / "run"), register_run=False, html=False, keep_output_text=True)
        res = run_benchmark(cfg)
        log = s.get("/log")
    # the closed loop: both actors sent, each request with the query
    assert sorted(a.records for a in out.load.actors) == [6, 6]
    posts = [e for e in closed_log if e["method"] == "POST"]
    assert len(posts) == 12 and {e["query"] for e in posts} == {QUERY}, posts[:2]
    details = [r.error_detail for r in out.records if r.error == "http_401"]
    assert len(details) == 4 and all(d.startswith('{"error": {"message": "signature refused for /v1/completions'
                                                  '?api-version=2024-06-01&key=***') for d in details), details
    assert not [r.id for r in out.records if _query_pieces_in(r.model_dump_json())]
    # the run: every request the server received from the driver and the actors carried the query
    lv = res.levels[-1]
    assert lv.load.workers == 2 and all(a.records > 0 for a in lv.load.actors), lv.load.actors
    assert len([e for e in log if e["method"] == "POST"]) >= 12 + 12 and {e["query"] for e in log} == {QUERY}
    assert load_result(tmp_path / "run").config.target.endswith("/v1?api-version=2024-06-01&key=***")
    files = [f for f in tmp_path.rglob("*") if f.is_file()]
    session = Path(ray._private.worker.global_worker.node.get_session_dir_path()) / "logs"
    files += [f for f in session.rglob("*") if f.is_file()]
    assert len(files) > 10
    leaks = {str(f): _query_pieces_in(f.read_bytes().decode("utf-8", "replace")) for f in files}
    assert not {f: p for f, p in leaks.items() if p}


LOUD_SECRET = "rQ5sEcReT/aCt+0rX8kM"


def test_a_load_actor_that_prints_and_fails_with_a_secret_leaves_nothing_of_it(cluster, capfd):
    """A load actor (a process of either node, which gets the secret only in its job's target query)
    writes the secret — every encoding and pieces, ``tests/fakes/loud_requests.py`` — through every
    channel a process has, then fails with it. The level fails naming the actor, its error masked;
    every channel's line reached Ray's log files of the session, masked; and no form or piece of the
    secret is in any file of the session's logs, in the driver's error, or on the driver's stdout or
    stderr (this process never registers the secret: the actor scrubbed it)."""
    from tests.fakes.loud_requests import CHANNELS, MARK, LoudRequests
    from tests.integration.test_process_output import leaks, loud_texts
    from wattbench.core.errors import WattbenchError
    from wattbench.core.secret_scope import registered

    assert not registered().found_in(LOUD_SECRET)
    session = Path(ray._private.worker.global_worker.node.get_session_dir_path()) / "logs"
    with scripted_server_with_log("--ttft-ms", "5", "--itl-ms", "1") as (url, _):
        target = TargetSpec(base_url=url, model="fake-model", query=f"api-version=2024-06-01&key={LOUD_SECRET}")
        spec = LevelSpec(index=0, mode="concurrency", value=2, num_requests=8)
        with pytest.raises(WattbenchError) as e:
            with RayCluster("auto", n_actors=2, actor_cpus=1) as cl:
                cl.run_level(spec, target, LoudRequests(loud_texts(LOUD_SECRET), at=2, shout_here=True))
    said = str(e.value)
    assert said.startswith("load actor 0 on node ") and f"{MARK} raise ***" in said, said[:600]
    files = {str(f): f.read_bytes() for f in session.rglob("*") if f.is_file()}
    logs = b"\n".join(data for name, data in files.items() if Path(name).name.startswith("worker-"))
    # each channel's line (but the asyncio callback's: the actor's requests are drawn off its loop)
    # reached the actor's log files, masked
    missing = [c for c in CHANNELS if c not in ("asyncio", "raise") and f"{MARK} {c} ***".encode() not in logs]
    assert not missing, missing
    out, err = capfd.readouterr()
    files.update({"the error": said.encode(), "driver stdout": out.encode(), "driver stderr": err.encode()})
    assert len(files) > 10
    assert not leaks(files, LOUD_SECRET)


def test_a_sensor_actor_scrubs_its_nodes_credentials_from_what_it_prints_returns_and_logs(cluster):
    """Every node's processes hold a BMC password in their environment (``WB_TEST_BMC_PASSWORD``);
    on each node one meter refuses to open quoting it, another prints it and fails two reads quoting
    it. The sensor actors (which the driver gives no secret) scrub their node's credential variables:
    the problems and read failures the driver gets show it masked, the meters' prints reach the
    session's logs masked, and no form or piece of the password is in any of them."""
    import time as _time

    from tests.integration.test_process_output import leaks

    session = Path(ray._private.worker.global_worker.node.get_session_dir_path()) / "logs"
    with RayCluster("auto", n_actors=1, sensor_factory=LeakyMeters(), sensor_interval_s=0.05) as cl:
        problems = cl.start_sensors()
        deadline = _time.monotonic() + 60  # ends a hang only: the failing reads are waited for
        while len(cl.telemetry().failures) < 2 * len(cl.sensors) and _time.monotonic() < deadline:
            _time.sleep(0.1)
        log = cl.stop_sensors()
    refused = [p for p in problems if "bmc refused the password" in p]
    assert len(refused) == 2 and all(p.endswith("bmc refused the password ***") for p in refused), problems
    assert len(log.failures) >= 4 and all(f.error == "OSError: BMC refused ***" for f in log.failures), log.failures[:3]
    files = {str(f): f.read_bytes() for f in session.rglob("*") if f.is_file()}
    logs = b"\n".join(data for name, data in files.items() if Path(name).name.startswith("worker-"))
    assert b"LEAKY-SENSOR read 2: ***" in logs and b"LEAKY-SENSOR read 3: ***" in logs
    files.update({"problems": "\n".join(problems).encode(), "failures": repr(log.failures).encode()})
    assert not leaks(files, BMC_PASSWORD)
