"""Over-saturation stops an open-loop level early: against a scripted server with a fixed
capacity (2 streams at once, ~110 ms each: ~18 req/s), arrivals at twice that rate make the
backlog grow without bound; the level stops sending, drains, and says why. Below capacity it
runs to its bound."""

from __future__ import annotations

import pytest

from tests.fakes.stream_server_proc import stream_server
from wattbench.load.level import run_level
from wattbench.load.types import LevelSpec, TargetSpec
from wattbench.workload.base import RequestSpec

pytestmark = pytest.mark.slow


def _requests(i: int) -> RequestSpec:
    return RequestSpec(prompt=f"r{i} hello", max_tokens=10)


def _level(base: str, rate: float, duration_s: float):
    spec = LevelSpec(index=0, mode="rate", value=rate, arrival="constant", duration_s=duration_s, workers=1)
    target = TargetSpec(base_url=base + "/v1", model="fake-model")
    return run_level(spec, target, _requests)


def test_open_loop_above_capacity_stops_early_and_drains():
    with stream_server("--ttft-ms", "20", "--itl-ms", "10", "--max-concurrent", "2") as (base, stats):
        out = _level(base, rate=36.0, duration_s=12.0)
        served = stats()
    assert out.stopped_early and out.stopped_early.startswith("over-saturated")
    sent = len(out.records)
    assert sent < 36.0 * 12.0 * 0.75  # stopped well before the 12 s schedule ran out
    assert all(r.ok for r in out.records)  # what was sent is drained and complete
    assert served["streams_done"] == sent
    # the queue was real: late requests waited far longer than the first ones
    ttft = sorted((r.first_token_ns - r.sent_ns) / 1e6 for r in out.records)
    assert ttft[-1] > 10 * ttft[0]


def test_open_loop_below_capacity_runs_to_its_bound():
    with stream_server("--ttft-ms", "20", "--itl-ms", "10", "--max-concurrent", "2") as (base, _):
        out = _level(base, rate=8.0, duration_s=5.0)
    assert out.stopped_early is None
    assert len(out.records) == pytest.approx(40, abs=2)
