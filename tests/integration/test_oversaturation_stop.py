"""Over-saturation stops an open-loop level early: against a scripted server with a fixed
capacity (2 streams at once, each at least 110 ms: at most ~18 req/s), arrivals at twice that rate
make the backlog grow without bound; the level stops sending, drains, and says why. A server
without a slot limit cannot queue: a level against it runs to its bound.

Nothing here is judged by a wall clock: the schedule is materialised first (``open_arrivals``,
the level's own plan), and the queue is read from the scripted server's own log."""

from __future__ import annotations

import pytest

from tests.fakes.stream_server_proc import stream_server
from wattbench.load.level import run_level
from wattbench.load.plan import open_arrivals
from wattbench.core.load_types import LevelSpec
from wattbench.core.target import TargetSpec
from wattbench.workload.base import RequestSpec

pytestmark = pytest.mark.slow

SERVICE_MS = 20 + 9 * 10  # the server's schedule for a 10-token stream: TTFT 20 ms, 9 gaps of 10 ms


def _requests(i: int) -> RequestSpec:
    return RequestSpec(prompt=f"r{i} hello", max_tokens=10)


def _spec(rate: float, duration_s: float) -> LevelSpec:
    return LevelSpec(index=0, mode="rate", value=rate, arrival="constant", duration_s=duration_s, workers=1)


def _level(base: str, spec: LevelSpec):
    return run_level(spec, TargetSpec(base_url=base + "/v1", model="fake-model"), _requests)


def _scheduled(spec: LevelSpec) -> int:
    parts, _, _ = open_arrivals(spec, _requests, 1)
    return sum(len(p) for p in parts)


def test_open_loop_above_capacity_stops_early_and_drains():
    spec = _spec(36.0, 12.0)
    with stream_server("--ttft-ms", "20", "--itl-ms", "10", "--max-concurrent", "2") as (base, stats):
        out = _level(base, spec)
        served = stats()
        log = stats.per_request()
    assert out.stopped_early and out.stopped_early.startswith("over-saturated")
    sent = len(out.records)
    assert sent < _scheduled(spec)  # it stopped before the schedule ran out
    assert all(r.ok for r in out.records)  # what was sent is drained and complete
    assert served["streams_done"] == sent
    # the queue was real, in the server's own log: it never ran more than its 2 slots, it queued
    # requests, and a queued request waited longer than a whole stream before its first token
    # (the stop needs the backlog to grow by >= 5 requests, 3 of them queued behind 2 slots)
    assert served["max_active"] == 2 and served["queued"] > 0
    waits_ms = [(first - read) / 1e6 for read, first, _ in log.values()]
    assert max(waits_ms) > SERVICE_MS
    # and the client saw at least that wait: its TTFT spans the server's read-to-first-token
    for r in out.records:
        read, first, _ = log[f"r{r.id}"]
        assert r.first_token_ns - r.sent_ns >= first - read


def test_open_loop_without_a_queue_runs_to_its_bound():
    spec = _spec(8.0, 5.0)
    with stream_server("--ttft-ms", "20", "--itl-ms", "10") as (base, stats):
        out = _level(base, spec)
        served = stats()
    assert served["queued"] == 0  # no slot limit: nothing could wait at the server
    assert out.stopped_early is None
    # every arrival of the schedule before the 5 s bound was sent, and no other
    assert len(out.records) == _scheduled(spec) == 40
    assert served["streams_done"] == len(out.records) and all(r.ok for r in out.records)
