import math

import numpy as np
import pytest

from tests.fakes.scripted_sensor import Trace, grid, step_trace
from wattbench.accounting.counters import collapse_repeats, counter_energy, counter_power_w

S = 1_000_000_000


def ns(x):
    return (np.asarray(x) * 1e9).round().astype(np.int64)


def cum(trace, ts):
    return np.array([trace.energy(0.0, float(t)) for t in ts])


def test_step_exact_at_and_between_samples():
    tr = step_trace([(0, 100), (5, 300)])
    t = grid(0, 10, 0.1)
    r = counter_energy(ns(t), cum(tr, t), 1 * S, 9 * S, update_period_s=0.1)
    assert r.energy_j == pytest.approx(1600.0, abs=1e-9)
    r2 = counter_energy(ns(t), cum(tr, t), round(1.05 * S), round(8.95 * S), update_period_s=0.1)
    assert r2.energy_j == pytest.approx(3.9 * 100 + 3.95 * 300 + 0.05 * 100, abs=1e-9)
    # edge bound: one update period's energy at each edge (100 W left, 300 W right)
    assert r.edge_error_j == pytest.approx(0.1 * 100 + 0.1 * 300)
    assert (r.coverage, r.gaps, r.resets, r.wraps) == pytest.approx((1.0, 0, 0, 0), rel=1e-9)
    assert r.largest_gap_s == pytest.approx(0.1)


def test_ramp_exact():
    tr = Trace([(0, 0), (10, 1000)])  # P = 100 t, E = 50 t^2
    t = grid(0, 10, 0.1)
    r = counter_energy(ns(t), cum(tr, t), 2 * S, 7 * S)
    assert r.energy_j == pytest.approx(50 * (49 - 4), rel=1e-12)
    # mid-interval edges: linear interpolation of a convex cumulative errs by h^2/8*E'' at each
    # edge, the same at both ends, so the difference is still exact
    r2 = counter_energy(ns(t), cum(tr, t), round(2.05 * S), round(7.05 * S))
    assert r2.energy_j == pytest.approx(50 * (7.05**2 - 2.05**2), rel=1e-9)


def test_wrap_with_max_value():
    t = grid(0, 20, 0.1)
    true = 200.0 * t
    v = np.fmod(true, 1000.0)
    r = counter_energy(ns(t), v, round(0.5 * S), round(19.5 * S), max_value=1000.0)
    assert r.energy_j == pytest.approx(200.0 * 19.0, abs=1e-6)
    assert r.wraps == 3
    assert r.resets == 0


def test_drop_without_max_value_is_reset_filled_by_interpolation():
    t = grid(0, 10, 0.1)
    true = 200.0 * t
    v = np.where(t < 5.05, true, 200.0 * (t - 5.05))  # counter restarts from 0 at 5.05 s
    r = counter_energy(ns(t), v, 1 * S, 9 * S)
    assert r.resets == 1
    assert r.energy_j == pytest.approx(1600.0, abs=1e-6)
    assert r.fill_interp_j == pytest.approx(20.0)
    assert "reset" in r.notes[0]


def test_reset_filled_by_power_channel_callable():
    t = grid(0, 10, 0.1)
    v = np.where(t < 5.05, 200.0 * t, 200.0 * (t - 5.05))
    seen = []

    def fill(a, b):
        seen.append((a, b))
        return 123.0

    r = counter_energy(ns(t), v, 1 * S, 9 * S, fill=fill)
    assert seen == [(5 * S, int(round(5.1 * S)))]
    assert r.energy_j == pytest.approx(1600.0 - 20.0 + 123.0, abs=1e-6)
    assert r.fill_j == pytest.approx(123.0)
    assert r.fill_interp_j == pytest.approx(0.0, rel=1e-9)


def test_implausible_jump_is_a_reset():
    t = grid(0, 10, 0.1)
    v = 200.0 * t
    v[t >= 6.0] += 1e6  # counter re-based upward (driver reload)
    r = counter_energy(ns(t), v, 1 * S, 9 * S)
    assert r.resets == 1
    assert r.energy_j == pytest.approx(1600.0, abs=1e-6)


def test_wrap_corrected_but_implausible_is_reset():
    t = grid(0, 10, 0.1)
    v = 200.0 * t
    v[t >= 6.0] -= 1100.0  # drop (reset to a lower value) on a counter whose range is 1e6 J
    r = counter_energy(ns(t), v, 1 * S, 9 * S, max_value=1e6)
    assert (r.resets, r.wraps) == (1, 0)
    assert r.energy_j == pytest.approx(1600.0, abs=1e-6)


def test_nvml_staircase_repeats_are_not_gaps():
    # counter refreshes every 100 ms, read every 20 ms with a 10 ms phase: each value is seen 5x
    reads = 0.01 + 0.02 * np.arange(500)
    refresh = np.floor(reads / 0.1) * 0.1
    v = 200.0 * refresh
    r = counter_energy(ns(reads), v, 1 * S, 9 * S)
    assert r.energy_j == pytest.approx(1600.0, abs=1e-6)
    assert r.update_period_s == pytest.approx(0.1)
    assert (r.coverage, r.gaps) == pytest.approx((1.0, 0), rel=1e-9)
    assert r.points < 100  # repeats collapsed, only the neighbourhood kept
    # a window ending right on a read: first-seen times keep it exact, while interpolating the
    # repeats literally is biased by most of a period's energy at that edge
    r2 = counter_energy(ns(reads), v, 1 * S, round(9.09 * S))
    assert r2.energy_j == pytest.approx(200.0 * 8.09, abs=1e-6)
    naive = np.interp([1.0, 9.09], reads, v)
    assert (naive[1] - naive[0]) == pytest.approx(1610.0)


def test_collapse_keeps_first_seen():
    t, v = collapse_repeats(np.array([1, 2, 3, 4]), np.array([5.0, 5.0, 6.0, 6.0]))
    assert list(t) == [1, 3] and list(v) == pytest.approx([5.0, 6.0], rel=1e-9)


def test_gap_counter_energy_exact_but_coverage_lower():
    t = grid(0, 10, 0.1)
    keep = (t <= 3.0 + 1e-9) | (t >= 5.0 - 1e-9)
    r = counter_energy(ns(t[keep]), 200.0 * t[keep], 1 * S, 9 * S, update_period_s=0.1)
    assert r.energy_j == pytest.approx(1600.0, abs=1e-6)
    assert r.gaps == 1
    assert r.largest_gap_s == pytest.approx(2.0)
    assert r.coverage == pytest.approx(1 - 2.0 / 8.0)


def test_window_beyond_series_extrapolates_and_loses_coverage():
    t = grid(2, 10, 0.1)
    r = counter_energy(ns(t), 200.0 * t, round(1.5 * S), 9 * S, update_period_s=0.1)
    assert r.energy_j == pytest.approx(200.0 * 7.5, abs=1e-6)
    assert r.coverage == pytest.approx(1 - 0.5 / 7.5)
    assert r.largest_gap_s == pytest.approx(0.5)


def test_too_few_points():
    r = counter_energy(ns([1.0]), [5.0], 0, 2 * S)
    assert r.energy_j is None
    assert math.isclose(r.coverage, 0.0)


def test_rapl_range_wrap():
    # intel-rapl:0 max_energy_range_uj = 262143328850 µJ; counter starts 500 J below the top
    max_j = 262143328850 / 1e6
    t = grid(0, 10, 0.1)
    true = max_j - 500.0 + 150.0 * t  # 150 W package
    v = np.where(true >= max_j, true - max_j, true)
    r = counter_energy(ns(t), v, 1 * S, 9 * S, max_value=max_j)
    assert r.energy_j == pytest.approx(1200.0, abs=1e-6)
    assert (r.wraps, r.resets) == (1, 0)
    # the same drop without the range known is a reset, filled from neighbours
    r = counter_energy(ns(t), v, 1 * S, 9 * S)
    assert (r.wraps, r.resets) == (0, 1)
    assert r.energy_j == pytest.approx(1200.0, abs=1e-6)


def test_seldom_read_counter_edges_follow_the_power_shape():
    """A counter read every 0.9 s (NVML's costs ~3-5 ms of CPU per read on an H200) with a power
    step inside each edge's bracket: linear interpolation misplaces the step's energy, the power
    channel's shape puts it where it was."""
    tr = step_trace([(0, 100), (1.3, 600), (8.35, 150)])
    t = grid(0, 9.9, 0.9)  # counter reads
    a, b = round(1.5 * S), round(8.5 * S)  # edges in [0.9, 1.8] and [8.1, 9.0], past each step
    truth = tr.energy(1.5, 8.5)

    def shape(x, y):  # a fine power channel's integral: exact here
        return tr.energy(x / 1e9, y / 1e9)

    lin = counter_energy(ns(t), cum(tr, t), a, b, update_period_s=0.1)
    shaped = counter_energy(ns(t), cum(tr, t), a, b, update_period_s=0.1, shape=shape)
    assert abs(lin.energy_j - truth) > 50.0  # the linear guess is far off
    assert shaped.energy_j == pytest.approx(truth, rel=1e-12)
    # edge bound: one declared period's energy at each edge (the meters agree: no shape term)
    assert shaped.edge_error_j == pytest.approx(0.1 * lin.power_w[1] + 0.1 * lin.power_w[9])
    assert lin.edge_error_j == pytest.approx(0.9 * lin.power_w[1] + 0.9 * lin.power_w[9])
    assert (shaped.update_period_s, lin.update_period_s) == (pytest.approx(0.1, rel=1e-9), pytest.approx(0.9))


def test_shape_that_disagrees_with_the_counter_widens_the_edge_bound():
    tr = step_trace([(0, 200)])
    t = grid(0, 9.9, 0.9)
    a, b = round(1.2 * S), round(8.4 * S)  # fractions 1/3 and 2/3 of their brackets

    def shape(x, y):  # reads 10% low: the fraction is unchanged, the bound grows
        return 0.9 * tr.energy(x / 1e9, y / 1e9)

    r = counter_energy(ns(t), cum(tr, t), a, b, update_period_s=0.1, shape=shape)
    assert r.energy_j == pytest.approx(200 * 7.2, rel=1e-12)
    mismatch = 200 * 0.9 * 0.1  # |d_k - S_k| over a 0.9 s bracket
    assert r.edge_error_j == pytest.approx(2 * 0.1 * 200 + 2 * (1 / 3) * mismatch)


def test_shape_not_covering_the_bracket_falls_back_to_linear():
    tr = step_trace([(0, 100), (1.3, 600)])
    t = grid(0, 9.9, 0.9)
    r = counter_energy(ns(t), cum(tr, t), round(1.5 * S), round(8.5 * S), update_period_s=0.1,
                       shape=lambda x, y: None)
    lin = counter_energy(ns(t), cum(tr, t), round(1.5 * S), round(8.5 * S), update_period_s=0.1)
    assert r.energy_j == lin.energy_j and r.edge_error_j == lin.edge_error_j


def test_counter_power_skips_resets():
    t = [0, int(1e9), int(2e9), int(3e9), int(3e9)]
    e = [100.0, 400.0, 50.0, 250.0, 260.0]  # reset between 1 s and 2 s; duplicate timestamp at the end
    mid, p = counter_power_w(t, e)
    assert mid.tolist() == [int(0.5e9), int(2.5e9)]
    assert p.tolist() == pytest.approx([300.0, 200.0])
    assert counter_power_w([1], [1.0])[0].size == 0


def test_counter_power_corrects_a_wrap_when_the_range_is_known():
    """RAPL-style counter of range 1000 J: 950 -> 30 is a wrap of +80 J, not a reset."""
    t = [0, int(1e9), int(2e9), int(3e9)]
    e = [900.0, 950.0, 30.0, 100.0]
    mid, p = counter_power_w(t, e, max_value=1000.0)
    assert mid.tolist() == [int(0.5e9), int(1.5e9), int(2.5e9)]
    assert p.tolist() == pytest.approx([50.0, 80.0, 70.0])
    # without the range the same step is a reset and is dropped
    assert counter_power_w(t, e)[1].tolist() == pytest.approx([50.0, 70.0])


def test_counter_power_collapses_repeated_reads_of_one_refresh():
    """A counter read every 100 ms that refreshes every 300 ms: 10 J per refresh is 33.3 W, not
    alternating 0 W and 100 W."""
    t = [int(i * 1e8) for i in range(7)]
    e = [0.0, 0.0, 0.0, 10.0, 10.0, 10.0, 20.0]
    mid, p = counter_power_w(t, e)
    assert mid.tolist() == [int(1.5e8), int(4.5e8)]
    assert p.tolist() == pytest.approx([10 / 0.3, 10 / 0.3])
