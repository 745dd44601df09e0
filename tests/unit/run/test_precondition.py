"""``--precondition`` (``run/prime.precondition`` with ``accounting.thermal.temperature_settle`` and
``metrics.drift.rounds_settle``): against the fake NVML read by the real sampler, a device whose
temperature follows a scripted warming curve is loaded until the curve flattens — not before, not
long after — one that keeps warming stops at the time limit and says so; no power limit or clock is
ever set. The settle bound is pinned at ±1%. Against scripted loads on a scripted clock: a
throughput that ramps then holds is loaded until after the ramp, with the rise in the record; a
steady one settles after the minimum loads; one that keeps climbing reaches the limit and says by
how much; both rules must hold where a temperature is read, the throughput alone decides where none
is; a load that completes nothing stops it."""

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
from wattbench.core.schema import PrimingPhase
from wattbench.metrics.drift import SETTLE_CHANGE_PCT, SETTLE_MIN_ROUNDS
from wattbench.accounting.thermal import Settle
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

    def load_round() -> PrimingPhase:
        t0 = time.perf_counter_ns()
        time.sleep(0.1)  # the device under load, at a steady throughput
        loads.append(time.perf_counter())
        t1 = time.perf_counter_ns()
        return PrimingPhase(mode="concurrency", value=2, requests=4, completed=4, start_ns=t0, end_ns=t1,
                            output_tokens=64, output_tokens_per_s=640.0)

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
    assert pc.reason.startswith("settled after") and " and the temperature " in pc.reason
    assert pc.rules == ["temperature", "throughput"] and pc.temperature_settled and pc.throughput_settled
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


class Scripted:
    """Loads on a scripted clock: each takes ``round_s`` and reads ``speed(t)`` output tokens/s (``t``:
    the clock at its start); ``temperature`` scripts the settle verdict after each (None: no channel)."""

    def __init__(self, speed, round_s: float = 1.0, temperature=None, completed: int = 4):
        self.t, self.speed, self.round_s, self.temperature, self.completed = 0.0, speed, round_s, temperature, completed
        self.loads = 0

    def clock(self) -> float:
        return self.t

    def load(self) -> PrimingPhase:
        t0 = self.t
        self.t += self.round_s
        self.loads += 1
        v = self.speed(t0)
        return PrimingPhase(mode="concurrency", value=2, requests=4, completed=self.completed,
                            start_ns=int(t0 * S), end_ns=int(self.t * S), output_tokens=int(v * self.round_s),
                            output_tokens_per_s=v if self.completed else None)

    def settle(self) -> Settle:
        if self.temperature is None:
            return Settle(False, None, None, 0.0)
        ok = self.temperature(self.t)
        return Settle(ok, 0.2 if ok else 3.0, 60.0, 60.0, 1)


def _ramp(gain: float, ramp_s: float):
    return lambda t: 1000.0 * (1.0 + gain * min(t, ramp_s) / ramp_s)


def test_a_server_that_warms_up_is_loaded_until_after_its_ramp():
    # +30% in tokens/s over its first 40 s of 1 s loads, then steady; a 10 s window
    sc = Scripted(_ramp(0.3, 40.0))
    pc = precondition(sc.load, sc.settle, sc.clock, window_s=10.0, limit_s=600.0)
    assert pc.settled, pc.reason
    # not before the ramp ends, and within the window's length after it (the rule reads the last 10 s)
    assert 40.0 <= pc.duration_s <= 40.0 + 10.0 + 1.0
    # the record holds the rise: every load's tokens/s, in order, first at the ramp's foot, last at its top
    tps = pc.round_output_tokens_per_s
    assert len(tps) == pc.rounds == sc.loads and pc.requests == 4 * pc.rounds
    assert tps[0] == pytest.approx(1000.0) and tps[-1] == pytest.approx(1300.0)
    assert all(b >= a for a, b in zip(tps, tps[1:]))
    assert pc.round_end_s == pytest.approx([float(k + 1) for k in range(pc.rounds)])
    assert abs(pc.throughput_change_pct) <= SETTLE_CHANGE_PCT and pc.throughput_settled
    assert pc.rules == ["throughput"] and pc.temperature_settled is None
    assert pc.reason.startswith(f"settled after {pc.duration_s:.0f} s ({pc.rounds} loads): output tok/s moved")
    assert "the throughput alone decided" in pc.reason


def test_a_steady_server_settles_after_the_minimum_loads():
    # 1 s loads, a 10 s window read when 90% of it is covered: 9 loads
    sc = Scripted(lambda t: 800.0)
    pc = precondition(sc.load, sc.settle, sc.clock, window_s=10.0)
    assert pc.settled and pc.rounds == 9 and pc.throughput_change_pct == pytest.approx(0.0)
    # a window shorter than the minimum loads: the minimum decides
    sc = Scripted(lambda t: 800.0)
    pc = precondition(sc.load, sc.settle, sc.clock, window_s=1.0)
    assert pc.settled and pc.rounds == SETTLE_MIN_ROUNDS


def test_a_server_that_keeps_climbing_reaches_the_limit_and_says_by_how_much():
    sc = Scripted(lambda t: 1000.0 * 1.01 ** t)  # +1% a second, compounding, without end
    pc = precondition(sc.load, sc.settle, sc.clock, window_s=10.0, limit_s=30.0)
    assert not pc.settled and pc.duration_s == pytest.approx(30.0) and pc.rounds == 30
    # truth over the last 10 loads: ln tok/s climbs ln 1.01 a second, so over the 10 s window the
    # change is 1.01^10 − 1 = +10.5%
    assert pc.throughput_change_pct == pytest.approx(100 * (1.01 ** 10 - 1), rel=1e-9)
    c = pc.throughput_change_pct
    assert pc.reason == (f"not settled after 30 s (the limit): output tok/s still rising {c:+.1f}% over the last "
                         f"10 s (99% interval {c:+.1f}% to {c:+.1f}%; 10 rounds; bound ±{SETTLE_CHANGE_PCT:g}%); "
                         "the first levels may drift")
    assert pc.limit_s == pytest.approx(30.0) and pc.throughput_settled is False


def test_both_rules_must_hold_where_a_temperature_is_read():
    # the throughput settles at 9 loads; the temperature only from 20 s on
    sc = Scripted(lambda t: 800.0, temperature=lambda t: t >= 20.0)
    pc = precondition(sc.load, sc.settle, sc.clock, window_s=10.0)
    assert pc.settled and pc.rounds == 20 and pc.rules == ["temperature", "throughput"]
    assert pc.temperature_settled and "and the temperature +0.20 °C/min" in pc.reason
    # the temperature settles at once, the throughput climbs until the limit: not settled, and why
    sc = Scripted(lambda t: 1000.0 * (1.0 + 0.01 * t), temperature=lambda t: True)
    pc = precondition(sc.load, sc.settle, sc.clock, window_s=10.0, limit_s=20.0)
    assert not pc.settled and pc.temperature_settled and "output tok/s still rising" in pc.reason
    assert "temperature still" not in pc.reason
    # the throughput holds, the temperature never settles
    sc = Scripted(lambda t: 800.0, temperature=lambda t: False)
    pc = precondition(sc.load, sc.settle, sc.clock, window_s=10.0, limit_s=20.0)
    assert not pc.settled and pc.throughput_settled and pc.temperature_settled is False
    assert pc.reason == ("not settled after 20 s (the limit): temperature still moving +3.00 °C/min (bound "
                         f"±{PRECONDITION_SLOPE_C_PER_MIN:g} °C/min); the first levels may drift")


def test_a_load_that_completes_nothing_stops_it():
    sc = Scripted(lambda t: 800.0, completed=0)
    pc = precondition(sc.load, sc.settle, sc.clock, window_s=10.0)
    assert sc.loads == 1 and not pc.settled and pc.round_output_tokens_per_s == [None]
    assert pc.reason.startswith("not settled: load 1 completed none of its 4 requests")


def test_the_help_states_the_bounds():
    from wattbench.config.run import RunConfig

    help_text = RunConfig.model_fields["precondition"].metadata[0].help
    assert f"±{PRECONDITION_SLOPE_C_PER_MIN:g} °C/min" in help_text and f"±{SETTLE_CHANGE_PCT:g}%" in help_text
    assert "over the last minute" in help_text and PRECONDITION_WINDOW_S == pytest.approx(60.0, abs=1e-12)
    assert RunConfig().precondition_max_s == PRECONDITION_MAX_S
