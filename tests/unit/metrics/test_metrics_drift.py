"""The trend and warm-up rules (``metrics/drift.py``) against series whose truth is known: the
Theil–Sen slope of a line, a relative change on the log scale (a geometric fall's exact −75%, a
rise of +100% as large as a fall of −50%), its robustness to an outlier, Sen's interval at its
exact ranks (a 1% move of its z changes them), the −15% of the H200's three trials, MSER-5's
truncation of a known warm-up, and the false-alarm and detection rates of the move rule over seeded series."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest

from wattbench.metrics import drift
from wattbench.metrics.drift import DRIFT_CONFIDENCE, mser, theil_sen, trend, trials_trend


def test_the_slope_of_a_line_is_exact_and_its_interval_collapses_on_it():
    # a linear fit keeps the series' own unit (the temperature's °C/min) and reads no relative change
    t = np.arange(20.0)
    tr = theil_sen(t, 100.0 - 0.5 * t)
    assert tr.slope == pytest.approx(-0.5)
    assert tr.low == pytest.approx(-0.5) and tr.high == pytest.approx(-0.5)
    assert tr.start == pytest.approx(100.0)
    assert not tr.log and tr.change is None and tr.change_low is None
    assert tr.moves


def test_a_geometric_fall_reads_its_exact_change_on_the_log_scale():
    # y halves every 10 s, exactly: ln y falls ln 2 / 10 a second, so over the 20 s span the change
    # is 2^-2 − 1 = −75% exactly, and Sen's interval (every pairwise log slope the same) collapses on
    # it, inside (−100%, 0)
    t = np.arange(21.0)
    tr = trend(t, 800.0 * 0.5 ** (t / 10.0))
    assert tr.log and tr.slope == pytest.approx(-math.log(2) / 10.0, rel=1e-12)
    assert tr.span == pytest.approx(20.0, rel=1e-12) and tr.start == pytest.approx(800.0, rel=1e-12)
    assert tr.change == pytest.approx(-0.75, rel=1e-12)
    assert -1.0 < tr.change_low <= tr.change <= tr.change_high < 0.0
    assert tr.change_low == pytest.approx(-0.75, rel=1e-12) and tr.moves
    assert tr.relative(tr.slope, 10.0) == pytest.approx(-0.5, rel=1e-12)  # one half-life


def test_a_rise_of_100_percent_and_a_fall_of_50_are_the_same_size():
    # doubling and halving over the same 30 s: slopes ±ln 2 / 30, changes +100% and −50%
    t = np.arange(31.0)
    up = trend(t, 500.0 * 2.0 ** (t / 30.0))
    down = trend(t, 500.0 * 0.5 ** (t / 30.0))
    assert up.slope == pytest.approx(math.log(2) / 30.0, rel=1e-12)
    assert down.slope == pytest.approx(-up.slope, rel=1e-12)
    assert up.change == pytest.approx(1.0, rel=1e-12) and down.change == pytest.approx(-0.5, rel=1e-12)


def test_one_outlier_does_not_move_the_slope():
    t = np.arange(30.0)
    y = 200.0 + 1.0 * t
    y[7] = 10_000.0  # a least-squares slope would follow it
    tr = theil_sen(t, y)
    assert tr.slope == pytest.approx(1.0)
    ols = np.polyfit(t, y, 1)[0]
    assert abs(ols - 1.0) > 5.0


def test_sens_interval_sits_at_its_ranks_and_a_one_percent_move_of_z_changes_them():
    # n = 26: N = 325 slopes, C = z(0.995)·sd(S) = 116.86 → ranks 104 and 222 (1-based). With z
    # 1% larger they are 103 and 223, 1% smaller 105 and 221: the test pins the interval's width.
    n = 26
    rng = np.random.default_rng(5)
    t = np.arange(float(n))
    y = 3.0 * t + rng.normal(0.0, 10.0, n)
    slopes = sorted((y[j] - y[i]) / (t[j] - t[i]) for i in range(n) for j in range(i + 1, n))
    assert len(slopes) == 325
    z = NormalDist().inv_cdf(0.5 + DRIFT_CONFIDENCE / 2)
    c = z * math.sqrt(n * (n - 1) * (2 * n + 5) / 18)
    assert round((325 - c) / 2) == 104 and round((325 + c) / 2) + 1 == 222
    assert round((325 - 1.01 * c) / 2) == 103 and round((325 - 0.99 * c) / 2) == 105
    tr = theil_sen(t, y)
    assert tr.low == pytest.approx(slopes[103]) and tr.high == pytest.approx(slopes[221])
    assert tr.slope == pytest.approx(np.median(slopes))


def test_the_h200_trials_read_minus_15_percent():
    # the pairwise log slopes: ln(3915/4323) = −0.0991, ln(3657/3915) = −0.0682, ln(3657/4323)/2 =
    # −0.0837; their median is the first-to-last one, so the change is exp(2·that) − 1 = 3657/4323 − 1
    tr = trials_trend([4323.0, 3915.0, 3657.0])
    assert tr.slope == pytest.approx(math.log(3657.0 / 4323.0) / 2.0, rel=1e-12)
    assert tr.change == pytest.approx(3657.0 / 4323.0 - 1.0, abs=1e-12)  # −15.4%
    assert f"{100 * tr.change:+.1f}%" == "-15.4%"
    assert tr.low is None and not tr.moves  # three points: no 99% interval on their own


def test_a_missing_trial_keeps_its_index():
    tr = trials_trend([100.0, None, 90.0])
    # one pair of points two trials apart: the log slope ln(0.9) / 2, the change 90/100 − 1
    assert tr.slope == pytest.approx(math.log(0.9) / 2.0, rel=1e-12) and tr.span == pytest.approx(2.0, abs=1e-12)
    assert tr.change == pytest.approx(-0.1, rel=1e-12)


def test_too_few_points_give_no_trend():
    assert theil_sen([1.0], [2.0]) is None
    assert theil_sen([1.0, 1.0], [2.0, 3.0]) is None
    assert trials_trend([None, 5.0]) is None


def test_a_long_series_is_thinned_to_the_cap_and_keeps_its_slope():
    t = np.arange(5000.0)
    tr = theil_sen(t, 50.0 + 0.01 * t)
    assert tr.n == drift.MAX_POINTS
    assert tr.slope == pytest.approx(0.01, rel=1e-9)
    # on the log scale the groups are geometric means; a geometric series keeps its rate exactly when
    # the groups are of one size (5000 points into 500 groups of 10)
    tr = theil_sen(t, 50.0 * np.exp(1e-4 * t), max_points=500, log=True)
    assert tr.n == 500 and tr.slope == pytest.approx(1e-4, rel=1e-9)


def _level_series(rng, change: float, sd: float, trials: int = 3, seconds: int = 20, gap_s: float = 5.0):
    """Per-second tokens/s of ``trials`` trials of ``seconds`` s with ``gap_s`` between them; the
    level's speed changes by ``change`` (a fraction) from its first second to its last."""
    t = np.concatenate([k * (seconds + gap_s) + np.arange(seconds) + 0.5 for k in range(trials)])
    span = t[-1] - t[0]
    y = 1000.0 * (1.0 + change * (t - t[0]) / span) * np.exp(rng.normal(0.0, sd, t.size))
    return t, y


@pytest.mark.parametrize("sd", [0.005, 0.01])
def test_a_steady_level_is_never_said_to_move_and_a_3_percent_drift_always_is(sd):
    # 40 seeded levels each way, per-second noise 0.5% and 1% (one H200 trial's sd is 1.4% over
    # 20 s windows): a 99% interval errs about once in 100 steady levels
    rng = np.random.default_rng(40)
    steady = [trend(*_level_series(rng, 0.0, sd)) for _ in range(40)]
    drifting = [trend(*_level_series(rng, -0.03, sd)) for _ in range(40)]
    assert sum(tr.moves for tr in steady) == 0
    assert all(tr.moves and tr.change < -0.015 for tr in drifting)
    assert np.median([tr.change for tr in drifting]) == pytest.approx(-0.03, abs=0.005)


def test_mser_cuts_a_known_warm_up():
    rng = np.random.default_rng(3)
    warm = np.linspace(0.2, 1.0, 20) * 400.0  # 20 points of ramp
    steady = 400.0 + rng.normal(0.0, 4.0, 80)
    m = mser(np.concatenate([warm, steady]))
    assert m.batches == 20
    assert m.truncate in (15, 20, 25)
    flat = mser(400.0 + rng.normal(0.0, 4.0, 100))
    assert flat.truncate <= 10  # nothing to cut: at most noise's batch or two


def test_mser_needs_four_batches():
    assert mser([1.0] * 19) is None
    assert mser([1.0] * 20) is not None
    assert mser([1.0, float("nan")] * 20) is None
