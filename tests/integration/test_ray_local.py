"""``--ray local``: the one-machine Ray cluster wattbench starts itself is bound to loopback.

Ray rewrites a 127.0.0.1 node address to the machine's interface address on Linux, and its
processes then listen on every interface; ``distributed.run.start_local`` keeps the node on
127.0.0.1. Checked on the started cluster itself: the node's address, the GCS address, what a load
actor on it reports, and every listening socket of every process the start created."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")
psutil = pytest.importorskip("psutil")

from wattbench.core.interrupt import on_sigterm  # noqa: E402
from wattbench.distributed.run import RayCluster  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.heavy]

ROOT = Path(__file__).resolve().parents[2]
LOOPBACK = {"127.0.0.1", "::ffff:127.0.0.1", "::1"}


def _listening(pids: set[int]) -> list[tuple[str, int, str]]:
    out = []
    for c in psutil.net_connections(kind="inet"):
        if c.status == psutil.CONN_LISTEN and c.pid in pids:
            out.append((c.laddr.ip, c.laddr.port, psutil.Process(c.pid).name()))
    return out


def test_local_cluster_binds_loopback(monkeypatch):
    import ray._private.ray_constants as ray_constants

    assert not ray.is_initialized()  # else RayCluster would join that cluster and start nothing
    # the cluster's processes import wattbench from this tree; a throwaway cluster needs no token
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT / "src"), str(ROOT)]))
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    key = ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR
    env_before, flag_before = os.environ.get(key), ray_constants.ENABLE_RAY_CLUSTER
    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}
    # as `wattbench run --ray local` has it: SIGTERM stops the run as Ctrl-C does, which ray.init's
    # own handler (sys.exit, for the whole process) would replace
    callers = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        with RayCluster("local", init_kwargs={"num_cpus": 1, "include_dashboard": False}) as cl:
            assert signal.getsignal(signal.SIGTERM) is on_sigterm
            _check_loopback(cl, me, before)
        assert signal.getsignal(signal.SIGTERM) is on_sigterm
    finally:
        signal.signal(signal.SIGTERM, callers)
    assert not ray.is_initialized()  # we started it, we stopped it
    # the loopback switch was for the cluster's start only
    assert os.environ.get(key) == env_before and ray_constants.ENABLE_RAY_CLUSTER == flag_before


def _check_loopback(cl: RayCluster, me, before: set[int]) -> None:
    """The node, the GCS and a load actor on 127.0.0.1, and no socket of the cluster's processes on another address."""
    assert [n["NodeManagerAddress"] for n in cl.alive_nodes] == ["127.0.0.1"]
    assert ray.get_runtime_context().gcs_address.startswith("127.0.0.1:")
    actor = cl._ensure_loads(1)[0]
    assert actor.ip == "127.0.0.1" and actor.node_id == cl.alive_nodes[0]["NodeID"]
    started = {p.pid for p in me.children(recursive=True)} - before
    socks = _listening(started)
    names = {name for _, _, name in socks}
    assert {"gcs_server", "raylet"} <= names  # the scan sees the cluster's own servers
    assert [s for s in socks if s[0] not in LOOPBACK] == []
