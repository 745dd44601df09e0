import math

import numpy as np
import pytest
from scipy import stats

from wattbench.metrics.trials import ci95, rel_half_width, t_ppf, trial_interval


@pytest.mark.parametrize("df", [1, 2, 3, 4, 7, 15, 29, 120])
def test_t_quantile_matches_scipy(df):
    assert t_ppf(0.975, df) == pytest.approx(stats.t.ppf(0.975, df), rel=1e-9)
    assert t_ppf(0.01, df) == pytest.approx(stats.t.ppf(0.01, df), rel=1e-8)


def test_ci_arithmetic():
    v = [10.0, 12.0, 11.0, 13.0]
    c = ci95(v)
    mean = 11.5
    s = math.sqrt(((10 - mean) ** 2 + (12 - mean) ** 2 + (11 - mean) ** 2 + (13 - mean) ** 2) / 3)
    hw = 3.182446305284263 * s / 2
    assert c["mean"] == pytest.approx(mean)
    assert c["std"] == pytest.approx(s)
    assert c["ci95_low"] == pytest.approx(mean - hw) and c["ci95_high"] == pytest.approx(mean + hw)
    assert c["n"] == 4 and c["values"] == v


def test_ci_single_and_empty():
    assert ci95([5.0])["ci95_low"] is None and ci95([5.0])["mean"] == pytest.approx(5.0, rel=1e-9)
    assert ci95([])["n"] == 0
    assert ci95([1.0, None, float("nan"), 3.0])["n"] == 2


def test_ci_coverage_is_about_95_percent():
    rng = np.random.default_rng(0)
    hits = 0
    for _ in range(2000):
        c = ci95(rng.normal(3.0, 1.0, 5))
        hits += c["ci95_low"] <= 3.0 <= c["ci95_high"]
    assert 0.93 < hits / 2000 < 0.97




# ---- the trials block's interval: on the log scale for a positive figure (metrics/trials.trial_interval)

T_975_2 = 4.302652729911275  # Student t, 97.5th percentile, 2 degrees of freedom


def test_a_positive_figure_gets_a_log_scale_interval_that_never_crosses_zero():
    # three TTFT p99s: the Student-t interval reads 254 ms, -68 to 576 ms; on the log scale, the mean
    # of the logs ± t · their sd / sqrt(3), exponentiated: 71.0 to 773.2 ms
    v = [160.0, 200.0, 402.0]
    assert ci95(v)["ci95_low"] < 0  # what the table showed
    c = trial_interval(v)
    logs = [math.log(x) for x in v]
    m = sum(logs) / 3
    s = math.sqrt(sum((x - m) ** 2 for x in logs) / 2)
    w = T_975_2 * s / math.sqrt(3)
    assert c["scale"] == "log" and c["half_width"] == pytest.approx(w, rel=1e-9)
    assert c["ci95_low"] == pytest.approx(math.exp(m - w), rel=1e-9) and c["ci95_low"] == pytest.approx(71.0, abs=0.05)
    assert c["ci95_high"] == pytest.approx(math.exp(m + w), rel=1e-9) and c["ci95_high"] == pytest.approx(773.2, abs=0.05)
    assert c["mean"] == pytest.approx(254.0, rel=1e-12) and c["n"] == 3  # the quoted figure: the arithmetic mean
    # the noise every rule reads from it is w itself, the log half-width
    assert rel_half_width(c["mean"], c["ci95_low"], c["ci95_high"]) == pytest.approx(w, rel=1e-9)


def test_a_figure_with_zeros_keeps_the_student_t_interval_held_at_zero():
    c = trial_interval([0.0, 0.0, 6.0])  # a failed share: mean 2, sd 3.464, t · sd / sqrt(3) = 8.605
    assert c["scale"] == "linear" and c["ci95_low"] == pytest.approx(0.0, abs=1e-12)
    assert c["ci95_high"] == pytest.approx(2.0 + T_975_2 * math.sqrt(12.0) / math.sqrt(3), rel=1e-9)
    neg = trial_interval([-1.0, 2.0, 5.0])  # a figure that can be negative: the interval as it is
    assert neg["ci95_low"] == pytest.approx(2.0 - T_975_2 * 3.0 / math.sqrt(3), rel=1e-9) and neg["ci95_low"] < 0
    one = trial_interval([5.0])
    assert one["ci95_low"] is None and one["ci95_high"] is None and one["mean"] == pytest.approx(5.0)


def test_the_noise_of_an_interval_is_read_on_the_log_scale_where_it_can_be():
    assert rel_half_width(100.0, 90.0, 110.0) == pytest.approx(math.log(110 / 90) / 2, rel=1e-12)  # 10.03%
    assert rel_half_width(100.0, -10.0, 210.0) == pytest.approx(1.1, rel=1e-12)  # low end not positive: linear
    assert rel_half_width(100.0, 110.0, 90.0) is None and rel_half_width(None, 1.0, 2.0) == pytest.approx(
        math.log(2) / 2, rel=1e-12)
    assert rel_half_width(0.0, -1.0, 1.0) is None


def test_the_log_scale_interval_covers_a_lognormal_figure_about_95_percent():
    rng = np.random.default_rng(1)
    hits = 0
    for _ in range(2000):  # its median is 3.0 (the geometric mean's target)
        c = trial_interval(np.exp(rng.normal(math.log(3.0), 0.3, 5)))
        hits += c["ci95_low"] <= 3.0 <= c["ci95_high"]
    assert 0.93 < hits / 2000 < 0.97
