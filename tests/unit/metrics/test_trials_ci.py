import math

import numpy as np
import pytest
from scipy import stats

from wattbench.metrics.trials import ci95, t_ppf


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


