"""``--precondition`` (``run/prime.precondition`` with ``accounting.thermal.temperature_settle``):
against the fake NVML read by the real sampler, a device whose temperature follows a scripted
warming curve is loaded until the curve flattens — not before, not long after — one that keeps
warming stops at the time limit and says so, no temperature channel stops after one load; no
power limit or clock is ever set. The settle bound is pinned at ±1%."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from tests.fakes.fake_nvml import FakeGPU, FakeNvml
from wattbench.accounting.thermal import (
    PRECONDITION_COVER,
    PRECONDITION_MAX_S,
    PRECONDITION_SLOPE_C_PER_MIN,
    PRECONDITION_WINDOW_S,
    temperature_series,
    temperature_settle,
)
from wattbench.core.clock import now_ns
from wattbench.run.prime import precondition
from wattbench.telemetry.nvml import NvmlSensor
from wattbench.telemetry.sampler import Sampler

S = 1_000_000_000


def _line(slope_c_per_min: float, window_s: float = PRECONDITION_WINDOW_S, n: int = 61):
    t = np.linspace(0.0, window_s, n)
    return {"gpu0": ((t * S).astype(np.int64), 50.0 + slope_c_per_min * t / 60.0)}


def test_the_settle_bound_is_pinned():
    b = PRECONDITION_SLOPE_C_PER_MIN
    assert temperature_settle(_line(0.99 * b)).settled
    assert temperature_settle(_line(-0.99 * b)).settled
    assert not temperature_settle(_line(1.01 * b)).settled
    assert not temperature_settle(_line(-1.01 * b)).settled
    st = temperature_settle(_line(0.5 * b))
    assert st.slope_c_per_min == pytest.approx(0.5 * b) and st.temperature_c == pytest.approx(50.0 + 0.5 * b)


def test_a_window_the_readings_do_not_span_is_not_settled():
    w = PRECONDITION_WINDOW_S
    assert temperature_settle(_line(0.0, window_s=1.01 * PRECONDITION_COVER * w)).settled
    assert not temperature_settle(_line(0.0, window_s=0.99 * PRECONDITION_COVER * w)).settled
    assert not temperature_settle({}).settled and temperature_settle({}).devices == 0


def test_every_device_must_settle():
    two = {**_line(0.0), "gpu1": _line(3.0)["gpu0"]}
    st = temperature_settle(two)
    assert not st.settled and st.slope_c_per_min == pytest.approx(3.0) and st.devices == 2


def _run(curve, *, window_s: float, bound: float, limit_s: float):
    nv = FakeNvml(gpus=[FakeGPU(temperature_curve=curve)], unsupported={"nvmlDeviceGetSamples"})
    sm = Sampler([NvmlSensor(nvml=nv, counter_every_s=3600, aux_every_s=0.02)], interval_s=0.02)
    loads: list[float] = []

    def load_round() -> int:
        time.sleep(0.1)  # the device under load
        loads.append(time.perf_counter())
        return 4

    def settle():
        t = now_ns()
        return temperature_settle(temperature_series(sm.log, t - int(window_s * S), t), window_s, bound)

    sm.start()
    try:
        pc = precondition(load_round, settle, time.perf_counter, limit_s=limit_s, window_s=window_s,
                          bound_c_per_min=bound)
    finally:
        sm.stop()
    return pc, nv, loads


@pytest.mark.slow
def test_a_warming_device_is_loaded_until_its_curve_flattens():
    t0 = time.perf_counter()
    tau, amp = 1.0, 400.0  # °C over the curve (scaled: a 1 s window reads many integer steps)

    def curve(t: float) -> float:
        return 500.0 - amp * math.exp(-(t - t0) / tau)

    # settled when the curve's slope over the last second, amp/τ·e^(−x/τ)·(e^(1/τ)−1) per s, is
    # within 60 °C/min (1 °C/s): x = τ·ln(amp·(e−1)/1) ≈ 6.5 s after the start
    bound = 60.0
    x_truth = tau * math.log(amp * (math.e - 1.0) / (bound / 60.0))
    pc, nv, loads = _run(curve, window_s=1.0, bound=bound, limit_s=30.0)
    assert pc.settled, pc.reason
    assert x_truth - 0.6 <= pc.duration_s <= x_truth + 2.0
    assert abs(pc.slope_c_per_min) <= bound and pc.temperature_c > 495.0
    assert pc.rounds == len(loads) and pc.requests == 4 * pc.rounds
    assert "settled: temperature moved" in pc.reason
    assert not [c for c in nv.calls if "Set" in c]  # never a power limit or a clock


@pytest.mark.slow
def test_a_device_that_keeps_warming_stops_at_the_limit_and_says_so():
    t0 = time.perf_counter()
    pc, nv, _ = _run(lambda t: 40.0 + 120.0 * (t - t0), window_s=0.5, bound=60.0, limit_s=1.5)
    assert not pc.settled
    assert 1.5 <= pc.duration_s <= 3.5
    assert pc.slope_c_per_min == pytest.approx(120.0 * 60.0, rel=0.1)
    assert pc.reason.startswith("not settled after") and "the first levels may drift" in pc.reason
    assert not [c for c in nv.calls if "Set" in c]


def test_no_temperature_stops_after_one_load():
    n = []
    pc = precondition(lambda: n.append(1) or 4, lambda: temperature_settle({}), time.perf_counter)
    assert len(n) == 1 and pc.rounds == 1 and not pc.settled and "no GPU temperature was read" in pc.reason
    assert pc.limit_s == PRECONDITION_MAX_S


def test_the_help_states_the_bounds():
    from wattbench.config import RunConfig

    help_text = RunConfig.model_fields["precondition"].metadata[0].help
    assert f"±{PRECONDITION_SLOPE_C_PER_MIN:g} °C/min" in help_text
    assert f"at most {PRECONDITION_MAX_S / 60:g} minutes" in help_text and PRECONDITION_WINDOW_S == pytest.approx(60.0, abs=1e-12)
