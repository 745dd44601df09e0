"""The actor classes without Ray: the node sensor's drains and clock skew."""

from __future__ import annotations

import time

import pytest

from tests.fakes.scripted_sensor import ScriptedSensor
from wattbench.core.clock import now_ns
from wattbench.distributed.actors import NodeSensor


def _until(cond, hang_s: float = 60.0) -> None:
    """Wait for a condition the test needs (not a timing claim: the deadline only ends a hang)."""
    deadline = time.monotonic() + hang_s
    while not cond():
        assert time.monotonic() < deadline, "condition never held"
        time.sleep(0.005)


def test_node_sensor_drains_in_pieces_with_its_clock():
    skew = 4_000_000_000
    made = []

    def factory():
        made.append(ScriptedSensor(power_w=200.0, poll_interval_s=0.02, fail_on={3}))
        return made[-1:]

    s = NodeSensor("n1", sensor_factory=factory, clock_skew_ns=skew)
    a = now_ns()
    r = s.open()
    assert r["status"] == "ok"
    assert {c.id for c in r["channels"]} == {"scripted.energy", "scripted.power"}
    _until(lambda: made[0].reads >= 5)  # past the failing 3rd read (waited for, not slept)
    first = s.drain()
    n = made[0].reads
    _until(lambda: made[0].reads >= n + 2)  # and read again after the drain
    last = s.stop()
    b = now_ns()
    rs = first["readings"] + last["readings"]
    assert first["readings"] and last["readings"]
    # every reading exactly once, in order, on the skewed clock
    ts = [t for t, cid, _ in rs if cid == "scripted.energy"]
    assert ts == sorted(set(ts))
    assert all(a + skew <= t <= b + skew for t, _, _ in rs)
    assert [f[0] for f in first["failures"] + last["failures"]] == ["scripted"]
    # counter = 200 W × time: slope between the first and last reading
    e = [(t, v) for t, cid, v in rs if cid == "scripted.energy"]
    (t0, e0), (t1, e1) = e[0], e[-1]
    assert (e1 - e0) / ((t1 - t0) / 1e9) == pytest.approx(200.0, rel=1e-6)
    assert last["overhead"]["reads"] >= len(e)
    assert s.drain() == {"readings": [], "failures": []}
    a = now_ns()
    c = s.clock()
    b = now_ns()
    assert a + skew <= c <= b + skew  # the node's clock is the driver's plus the skew (exact: causality)


def test_node_sensor_without_meters_and_with_a_bad_spec():
    assert NodeSensor("n", sensor_factory=lambda: []).open()["status"] == "no_meters"
    r = NodeSensor("n", specs=["nosuchkind:1"]).open()
    assert r["status"] == "failed" and "nosuchkind" in r["problems"][0]
