import math

import numpy as np
import pytest

from wattbench.core.errors import UserError
from wattbench.metrics.saturation import is_oversaturated
from wattbench.load.search import auto_sweep, ladder, optimize
from wattbench.metrics.level_figures import LevelFigures
from wattbench.metrics.slo import parse_slos

LADDER = sorted({int(round(x)) for x in np.geomspace(1, 1024, 80)})


class SimServer:
    """A simulated server with a known curve: throughput saturates (and, with thrash, falls), power
    rises with throughput, p99 TPOT rises with load. Records which levels were measured."""

    def __init__(self, k=24.0, thrash=None, tpot0=20.0, tpot_slope=0.15, noise=0.0, seed=0):
        self.k, self.thrash, self.tpot0, self.tpot_slope = k, thrash, tpot0, tpot_slope
        self.noise = noise
        self.rng = np.random.default_rng(seed)
        self.calls = []

    def throughput(self, c):
        t = 5000.0 * c / (c + self.k)
        if self.thrash:
            t *= math.exp(-c / self.thrash)
        return t

    def efficiency(self, c):
        power_w = 120.0 + 580.0 * self.throughput(c) / 5000.0
        return self.throughput(c) / (power_w / 1000.0)

    def tpot_p99(self, c):
        return self.tpot0 * (1 + self.tpot_slope * c)

    def __call__(self, c):
        self.calls.append(c)
        eff = self.efficiency(c) * (1 + self.noise * self.rng.standard_normal())
        return LevelFigures(output_tokens_per_s=self.throughput(c), tpot_p99_ms=self.tpot_p99(c), goodput_per_kw=eff)


def best_on_ladder(sim, slos=None):
    vals = []
    for c in LADDER:
        ok = slos is None or sim.tpot_p99(c) <= slos[0].threshold_ms
        vals.append(sim.efficiency(c) if ok else -math.inf)
    return max(vals)


@pytest.mark.parametrize("thrash", [60.0, 150.0, 400.0])
def test_optimize_interior_peak(thrash):
    sim = SimServer(thrash=thrash)
    res = optimize(sim, LADDER)
    truth = best_on_ladder(sim)
    assert sim.efficiency(res.best_value) >= 0.95 * truth
    assert res.n_measured <= len(LADDER) // 2
    assert len(set(sim.calls)) == len(sim.calls)  # no level measured twice


@pytest.mark.parametrize("bound_ms", [30.0, 100.0, 400.0, 3000.0])
def test_optimize_up_to_the_slo_boundary(bound_ms):
    sim = SimServer()
    slos = parse_slos(f"tpot_p99={bound_ms}ms")
    res = optimize(sim, LADDER, slos=slos)
    truth = best_on_ladder(sim, slos)
    assert sim.tpot_p99(res.best_value) <= bound_ms
    assert sim.efficiency(res.best_value) >= 0.95 * truth
    assert res.n_measured <= len(LADDER) // 2


def test_optimize_with_measurement_noise():
    sim = SimServer(thrash=200.0, noise=0.02, seed=3)
    res = optimize(sim, LADDER)
    assert sim.efficiency(res.best_value) >= 0.95 * best_on_ladder(sim)
    assert res.n_measured <= len(LADDER) // 2


def test_optimize_nothing_meets_the_slo():
    sim = SimServer()
    res = optimize(sim, LADDER, slos=parse_slos("tpot_p99=1ms"))
    assert res.best_value is None and "no measured level" in res.reason


def test_auto_sweep_doubles_until_gain_drops():
    sim = SimServer(k=16.0)
    res = auto_sweep(sim, start=1, max_value=4096)
    # T(c) = c/(c+16): gains 88%, 80%, 67%, 50%, 33%, 20%, 11%, 5.9% -> stop at 256, knee 128
    assert [v for v, _ in res.measured] == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    assert res.knee_value == 128
    assert "< 10%" in res.reason


def test_auto_sweep_stops_on_oversaturation_and_max():
    def measure(c):
        return LevelFigures(output_tokens_per_s=100.0 * c, oversaturated=c >= 16)

    res = auto_sweep(measure, max_value=1024)
    assert [v for v, _ in res.measured] == [1, 2, 4, 8, 16] and res.knee_value == 8
    res2 = auto_sweep(lambda c: LevelFigures(output_tokens_per_s=100.0 * c), max_value=20)
    assert [v for v, _ in res2.measured] == [1, 2, 4, 8, 16, 20] and res2.knee_value == 20


def test_ladder():
    assert ladder("concurrency", "1,8,64") == [("concurrency", 1), ("concurrency", 8), ("concurrency", 64)]
    assert ladder("rate", [0.5, 2]) == [("rate", 0.5), ("rate", 2)]
    for kind, vals in [("concurrency", "1,x"), ("concurrency", [0]), ("concurrency", [1.5]), ("qps", [1]),
                       ("rate", [-1.0]), ("rate", [])]:
        with pytest.raises(UserError):
            ladder(kind, vals)


def test_oversaturation_detector():
    rng = np.random.default_rng(0)
    t = np.arange(0, 30, 0.1)
    growing = 3.0 * t + rng.normal(0, 4, t.size)
    v = is_oversaturated(t, np.maximum(growing, 0))
    assert v.oversaturated and v.slope_per_s == pytest.approx(3.0, rel=0.15)
    # a stationary but wandering queue (AR(1)) is not over-saturated
    q = np.zeros(t.size)
    for i in range(1, t.size):
        q[i] = 0.9 * q[i - 1] + rng.normal(0, 2)
    assert not is_oversaturated(t, 20 + q).oversaturated
    # closed loop: in-flight pinned at the concurrency
    assert not is_oversaturated(t, np.full(t.size, 64.0)).oversaturated
    # a slight but significant drift that stays small is not flagged
    assert not is_oversaturated(t, 50 + 0.05 * t).oversaturated
    short = is_oversaturated(t[:10], growing[:10])
    assert not short.oversaturated and "too little" in short.reason


class CapacityServer:
    """Goodput per kW rises with load up to a capacity; past it requests queue and the p99 TTFT
    breaks the SLO (the scripted stream server's --max-concurrent, as a formula)."""

    def __init__(self, capacity):
        self.capacity = capacity
        self.calls = []

    def __call__(self, v):
        self.calls.append(v)
        return LevelFigures(goodput_per_kw=47.5 * min(v, self.capacity),
                            ttft_p99_ms=80.0 if v <= self.capacity else 900.0)


POW2 = [1, 2, 4, 8, 16, 32, 64, 128, 256]


@pytest.mark.parametrize("capacity", [3, 5, 12, 24, 48, 48.5, 90, 200])
def test_optimize_refines_concurrency_to_the_slo_boundary(capacity):
    sim = CapacityServer(capacity)
    res = optimize(sim, POW2, slos=parse_slos("ttft_p99=300ms"))
    truth = int(capacity)  # the largest whole number of streams that fits
    assert truth * 0.95 <= res.best_value <= truth
    assert res.n_measured <= 10, sim.calls
    assert len(set(sim.calls)) == len(sim.calls)


def test_optimize_without_refine_keeps_the_ladder():
    sim = CapacityServer(48)
    res = optimize(sim, POW2, slos=parse_slos("ttft_p99=300ms"), refine=False)
    assert res.best_value == 32 and all(c in POW2 for c in sim.calls)


@pytest.mark.parametrize("capacity", [0.7, 3.3, 17.0, 41.0])
def test_optimize_refines_rates_within_tolerance(capacity):
    sim = CapacityServer(capacity)
    res = optimize(sim, [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0], slos=parse_slos("ttft_p99=300ms"))
    assert capacity * 0.95 <= res.best_value <= capacity
    assert res.n_measured <= 10, sim.calls


def test_optimize_refines_after_an_interior_search():
    # the largest ladder level meets the SLO again (at a low score), so the exponential bracket ends
    # on a feasible drop and the golden-section search runs first; the boundary is refined after it
    def measure(v):
        eff = 10.0 * v if v <= 40 else 1.0
        return LevelFigures(goodput_per_kw=eff, ttft_p99_ms=50.0 if v <= 40 or v >= 100 else 600.0)

    res = optimize(measure, POW2, slos=parse_slos("ttft_p99=300ms"))
    assert 38 <= res.best_value <= 40


def test_refinement_ends_when_no_whole_number_lies_between_off_integer_bounds():
    """``integer=True`` over candidates that are not whole numbers: the best level is 8 and the
    next one up (9.5) is past the knee, so the boundary lies in [8, 9.5); the only whole number
    the bisection can pick there is 8 itself (9 is clamped to 9.5 − 1 → 8), and it used to step
    back to 8 forever. It stops at 8; every level is measured once."""
    calls = []
    goodput = {4: 1.0, 8: 2.0, 9.5: 3.0, 15.2: 0.5}

    def measure(v):
        calls.append(v)
        return LevelFigures(goodput_per_kw=goodput[v], oversaturated=v == 9.5)

    res = optimize(measure, list(goodput), integer=True)
    assert calls == pytest.approx([4, 8, 15.2, 9.5], rel=1e-9) and res.best_value == 8


def test_optimize_reason_counts_add_up():
    """A past defect: "best of 7 measured levels (6 candidates, 2 refined)" did not add up (5 of the 6
    candidates were measured). The parts of the reason sum to the whole."""
    import re

    sim = SimServer()
    res = optimize(sim, LADDER, slos=parse_slos("tpot_p99=100ms"))
    m = re.fullmatch(r"best of (\d+) measured levels?: (\d+) of the (\d+) candidates(?: and (\d+) refined between "
                     r"them)?", res.reason)
    assert m, res.reason
    n, on, cands, off = (int(x) if x else 0 for x in m.groups())
    assert n == len(res.measured) == on + off and cands == len(LADDER)
    assert on == sum(1 for v, _ in res.measured if v in LADDER)
