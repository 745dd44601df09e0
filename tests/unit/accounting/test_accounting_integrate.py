import numpy as np
import pytest

from tests.fakes.scripted_sensor import Trace, grid
from wattbench.accounting.integrate import power_energy
from wattbench.accounting.sampling import weighted_percentile

S = 1_000_000_000


def ns(x):
    return (np.asarray(x) * 1e9).round().astype(np.int64)


def step_samples():
    t = grid(0, 10, 0.1)
    return t, np.where(t < 5 - 1e-9, 100.0, 300.0)


def test_step_trapezoid_bridges_the_sampled_step():
    t, p = step_samples()
    r = power_energy(ns(t), p, 1 * S, 9 * S, update_period_s=0.1)
    # 4 s at 100 W + 4 s at 300 W, and the 4.9..5.0 interval is bridged at 200 W instead of 100 W
    assert r.energy_j == pytest.approx(400 + 1200 + 0.1 * 100, abs=1e-9)
    assert r.avg_power_w == pytest.approx(1610 / 8)
    assert r.max_power_w == pytest.approx(300.0, rel=1e-9)
    r2 = power_energy(ns(t), p, 1 * S, round(4.5 * S))
    assert r2.energy_j == pytest.approx(350.0, abs=1e-9)


def test_ramp_exact_with_edge_interpolation():
    tr = Trace([(0, 0), (10, 1000)])
    t = grid(0, 10, 0.1)
    p = np.array([tr(x) for x in t])
    r = power_energy(ns(t), p, round(2.05 * S), round(7.05 * S))
    assert r.energy_j == pytest.approx(50 * (7.05**2 - 2.05**2), rel=1e-12)
    assert r.edge_error_j == pytest.approx(0.5 * 10 * 0.05 * 2)  # 10 W step per 0.1 s, 0.05 s inside, 2 edges


def test_edge_error_on_step():
    t, p = step_samples()
    r = power_energy(ns(t), p, 1 * S, round(4.95 * S))
    assert r.edge_error_j == pytest.approx(0.5 * 200 * 0.05)
    r = power_energy(ns(t), p, 1 * S, 9 * S)
    assert r.edge_error_j == pytest.approx(0.0)


def test_gap_bridged_linearly_counted_and_reported():
    t = grid(0, 10, 0.1)
    keep = (t <= 3.0 + 1e-9) | (t >= 5.0 - 1e-9)
    t = t[keep]
    p = np.where(t < 4, 100.0, 300.0)
    r = power_energy(ns(t), p, 1 * S, 9 * S, update_period_s=0.1)
    assert r.energy_j == pytest.approx(2 * 100 + 2 * 200 + 4 * 300, abs=1e-9)
    assert (r.gaps, r.gap_s) == (1, pytest.approx(2.0))
    assert r.coverage == pytest.approx(0.75)
    assert r.largest_gap_s == pytest.approx(2.0)
    assert "gap" in r.notes[0]


def test_percentiles_are_time_weighted():
    t1 = grid(0, 9.6, 0.1)
    t2 = grid(9.7, 10.0, 0.001)
    t = np.concatenate([t1, t2])
    p = np.concatenate([np.full(len(t1), 100.0), np.full(len(t2), 300.0)])
    r = power_energy(ns(t), p, 0, 10 * S)
    # 300 W holds ~3.5% of the time but ~76% of the samples: p95 by time is 100 W
    assert float(np.percentile(p, 95)) == pytest.approx(300.0, rel=1e-9)
    assert r.p95_power_w == pytest.approx(100.0, rel=1e-9)
    assert r.p99_power_w == pytest.approx(300.0, rel=1e-9)
    assert r.max_power_w == pytest.approx(300.0, rel=1e-9)


def test_weighted_percentile_basic():
    assert weighted_percentile(np.array([1.0, 2.0, 3.0]), np.array([1.0, 1.0, 2.0]), 50) == pytest.approx(2.0, rel=1e-9)
    assert weighted_percentile(np.array([1.0, 2.0, 3.0]), np.array([1.0, 1.0, 2.0]), 51) == pytest.approx(3.0, rel=1e-9)


def test_declared_constant_integrates_exactly():
    r = power_energy(ns([0.0]), [700.0], 2 * S, round(12.5 * S), declared=True)
    assert r.energy_j == 700.0 * 10.5
    assert (r.coverage, r.gaps, r.p95_power_w, r.max_power_w) == pytest.approx((1.0, 0, 700.0, 700.0), rel=1e-9)


def test_declared_without_reading():
    r = power_energy([], [], 0, S, declared=True)
    assert r.energy_j is None


def test_window_past_the_data_holds_last_value():
    t = grid(0, 5, 0.1)
    r = power_energy(ns(t), np.full(len(t), 200.0), 1 * S, 6 * S, update_period_s=0.1)
    assert r.energy_j == pytest.approx(1000.0)
    assert r.coverage == pytest.approx(0.8)
