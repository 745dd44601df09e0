"""Ray on a local two-node cluster (head + one worker node, real raylet/GCS processes on this
machine, started and stopped by Ray's own ``ray.cluster_utils.Cluster``) against a scripted
streaming server: the merged distributed level equals a single-process level; injected clock
skews are corrected within the stated uncertainty; a node whose sensor actor dies is reported
and the run goes on.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

ray = pytest.importorskip("ray")

from tests.fakes.distributed_servers import FixedRequests, scripted_server  # noqa: E402
from tests.fakes.distributed_sensors import PowerByNode  # noqa: E402
from wattbench.accounting.boundaries import boundary_totals  # noqa: E402
from wattbench.clock import now_ns  # noqa: E402
from wattbench.distributed.merge import split_by_node  # noqa: E402
from wattbench.distributed.run import RayCluster, run_distributed_level  # noqa: E402
from wattbench.load.level import run_level  # noqa: E402
from wattbench.load.types import LevelSpec, TargetSpec  # noqa: E402
from wattbench.metrics.latency import summarize_level  # noqa: E402

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
TTFT_MS, ITL_MS, OUT = 40.0, 6.0, 6


factory = FixedRequests(max_tokens=OUT)


@pytest.fixture(scope="module")
def cluster():
    from ray.cluster_utils import Cluster

    import ray._private.ray_constants as ray_constants

    keys = ("PYTHONPATH", "RAY_AUTH_MODE", "RAY_USAGE_STATS_ENABLED", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")
    old = {k: os.environ.get(k) for k in keys}
    old_cluster = ray_constants.ENABLE_RAY_CLUSTER
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT)] + ([old["PYTHONPATH"]] if old["PYTHONPATH"] else []))
    os.environ["RAY_AUTH_MODE"] = "disabled"  # a throwaway local cluster
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    # Ray rewrites 127.0.0.1 to the machine's interface address ("remotely reachable") unless it
    # runs as a single-machine cluster, as it does on macOS/Windows: that switch, for this process
    # (already imported) and for the nodes it starts, keeps every address on loopback.
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False
    # every node on loopback: Ray's default node IP is the machine's interface address, and test
    # traffic stays on 127.0.0.1 (tests/unit/reliability/test_loopback_only.py checks this)
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
        ray_constants.ENABLE_RAY_CLUSTER = old_cluster
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="module")
def target():
    with scripted_server("--ttft-ms", str(TTFT_MS), "--itl-ms", str(ITL_MS)) as url:
        yield TargetSpec(base_url=url, model="fake-model")


def _summary(out):
    return summarize_level(out.records, out.start_ns, out.end_ns)


def _close(a, b, rel):
    assert a == pytest.approx(b, rel=rel)


def test_closed_loop_merged_equals_single_process(cluster, target):
    spec = LevelSpec(index=0, mode="concurrency", value=4, num_requests=60)
    single = run_level(spec, target, factory)
    with RayCluster("auto", n_actors=2, actor_cpus=1) as cl:
        dist = cl.run_level(spec, target, factory)
        nodes = {a["node_id"] for a in dist.load.actors}
    assert len(nodes) == 2  # SPREAD put one actor on each node
    (r1, l1, t1), (r2, l2, t2) = _summary(single), _summary(dist)
    assert r1.completed == r2.completed == 60 and r2.failed == 0
    assert sorted(r.id for r in dist.records) == list(range(60))
    assert l2.ttft_ms.mean == pytest.approx(l1.ttft_ms.mean, abs=4.0)
    assert l2.ttft_ms.mean == pytest.approx(TTFT_MS, abs=6.0)
    assert l2.itl_ms.mean == pytest.approx(l1.itl_ms.mean, abs=1.0)
    # each request takes ~40 + 5*6 = 70 ms at 4 streams: ~57 req/s either way
    _close(t2.requests_per_s, t1.requests_per_s, 0.15)
    assert dist.load.target_concurrency == 4 and dist.load.workers == 2
    assert dist.steady_start_ns is not None and dist.start_ns <= dist.steady_start_ns < dist.steady_end_ns


def test_open_loop_with_skewed_clocks(cluster, target):
    skews = {0: 7_000_000_000, 1: -3_000_000_000}
    rate, n = 40.0, 60
    spec = LevelSpec(index=1, mode="rate", value=rate, arrival="constant", num_requests=n)
    single = run_level(spec, target, factory)
    before = now_ns()
    with RayCluster("auto", n_actors=2, actor_cpus=1, clock_skew_ns=lambda kind, i: skews.get(i, 0)) as cl:
        dist = cl.run_level(spec, target, factory)
    after = now_ns()
    acts = {a["index"]: a for a in dist.load.actors}
    for i, skew in skews.items():
        # same host, so the true offset is the injected skew: the estimate lands within its bound
        assert abs(acts[i]["clock_offset_ns"] - skew) <= acts[i]["clock_uncertainty_ns"]
        assert acts[i]["clock_uncertainty_ns"] < 20_000_000
    u = max(a["clock_uncertainty_ns"] for a in acts.values())
    # corrected timestamps are on the driver's timeline …
    assert all(before < r.sent_ns < after for r in dist.records)
    assert all(before < r.last_token_ns < after for r in dist.records)
    # … and the two actors' interleaved arrivals are back on one 25 ms grid (uncorrected they
    # would be 10 s apart): every gap is 1/rate within the two offsets' uncertainties
    sched = np.sort(np.array([r.scheduled_ns for r in dist.records], dtype=np.int64))
    gaps = np.diff(sched)
    assert np.all(np.abs(gaps - 25_000_000) <= 2 * u + 1_000)
    (r1, l1, t1), (r2, l2, t2) = _summary(single), _summary(dist)
    assert r1.completed == r2.completed == n
    assert l2.ttft_ms.mean == pytest.approx(l1.ttft_ms.mean, abs=4.0)
    assert l2.itl_ms.mean == pytest.approx(l1.itl_ms.mean, abs=1.0)
    _close(t2.requests_per_s, t1.requests_per_s, 0.1)
    _close(dist.load.achieved_rate_rps, rate, 0.05)
    assert dist.load.send_lag_ms.p50 < 10


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
    assert out.stopped_early is None and len(out.records) > 40
    assert infos[sa].sensor_status == "ok"
    assert infos[sb].sensor_status == "died"
    assert any(sb in p and "died" in p and "goes on" in p for p in problems)
    per = split_by_node(log)
    # the dead node's readings up to its death were drained and kept; the live node's cover the run
    tb, _ = per[sb].series(f"{sb}/scripted.energy")
    ta, _ = per[sa].series(f"{sa}/scripted.energy")
    assert 3 <= len(tb) < 20 and len(ta) > 40
    # sensor clocks were skewed by +11 s / −5 s: after correction every reading is inside the
    # driver's span of the cluster's life
    assert all(t_open < t < t_close for t in ta + tb)
    # the live node's energy over the level window is its scripted 250 W
    w = boundary_totals(per[sa], out.start_ns, out.end_ns)["accelerator"]
    assert w.energy_j == pytest.approx(250.0 * (out.end_ns - out.start_ns) / 1e9, rel=0.02)
    tot = boundary_totals(log, out.start_ns, out.end_ns)
    assert "cluster" in tot and sa in tot["cluster"].notes[0] and sb in tot["cluster"].notes[0]


def test_several_targets_through_ray(cluster):
    from tests.fakes.distributed_servers import scripted_servers
    from wattbench.load.targets import per_target_summary

    with scripted_servers(["--ttft-ms", "20", "--itl-ms", "3"], ["--ttft-ms", "90", "--itl-ms", "9"]) as urls:
        targets = [TargetSpec(base_url=u, model="fake-model") for u in urls]
        spec = LevelSpec(index=0, mode="rate", value=40.0, arrival="constant", num_requests=40)
        with RayCluster("auto", n_actors=2, actor_cpus=1) as cl:
            out = cl.run_level(spec, targets, factory, weights=[1, 3])
    per = per_target_summary(out.records, out.start_ns, out.end_ns, urls)
    assert (per[urls[0]].requests.completed, per[urls[1]].requests.completed) == (10, 30)
    assert per[urls[0]].latency.ttft_ms.mean == pytest.approx(20, abs=6)
    assert per[urls[1]].latency.ttft_ms.mean == pytest.approx(90, abs=6)
    assert per[urls[1]].latency.itl_ms.mean == pytest.approx(9, abs=1.5)


def test_wattbench_run_on_ray_merges_nodes_into_a_cluster_boundary(cluster, target, tmp_path):
    """The library entry point with --ray: load actors on both nodes, one sensor actor per node
    (a declared 300 W node meter each), per-node energy and a cluster boundary = their sum."""
    from wattbench.config import RunConfig
    from wattbench.results.rundir import load_result
    from wattbench.runner import run_benchmark

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
