"""Arrival schedules: rate, variability, reproducibility, parse errors."""

import numpy as np
import pytest

from wattbench.core.errors import UserError
from wattbench.load.schedule import arrival_times, parse_arrival


def gaps(kind, rate=10.0, n=20000, seed=1):
    return np.diff(arrival_times(rate, n=n, kind=kind, seed=seed))


def test_poisson_mean_rate_and_cv():
    g = gaps("poisson")
    assert abs(1 / g.mean() - 10.0) / 10.0 < 0.03
    assert abs(g.std() / g.mean() - 1.0) < 0.04


def test_constant_is_exact():
    t = arrival_times(4.0, n=5, kind="constant")
    assert t == pytest.approx([0.0, 0.25, 0.5, 0.75, 1.0])


@pytest.mark.parametrize("k", [0.25, 4.0])
def test_gamma_shape_sets_cv(k):
    g = gaps(f"gamma:{k}")
    assert abs(1 / g.mean() - 10.0) / 10.0 < 0.04
    assert abs(g.std() / g.mean() - 1 / np.sqrt(k)) < 0.06


def test_seeded_reproducible_and_seed_matters():
    a = arrival_times(5.0, n=100, kind="poisson", seed=42)
    assert a == arrival_times(5.0, n=100, kind="poisson", seed=42)
    assert a != arrival_times(5.0, n=100, kind="poisson", seed=43)
    assert a[0] == pytest.approx(0.0, rel=1e-9) and all(x < y for x, y in zip(a, a[1:]))


def test_duration_bound_and_both_bounds():
    t = arrival_times(100.0, duration_s=2.0, kind="poisson", seed=3)
    assert max(t) < 2.0 and 170 < len(t) < 230
    assert len(arrival_times(100.0, n=10, duration_s=100.0)) == 10
    assert len(arrival_times(1.0, n=1000, duration_s=3.0, kind="constant")) == 3


@pytest.mark.parametrize("bad", ["gamma:", "gamma:-1", "gamma:x", "uniform", "gamma:inf"])
def test_parse_errors_name_the_string(bad):
    with pytest.raises(UserError) as e:
        parse_arrival(bad)
    assert repr(bad) in str(e.value)


@pytest.mark.parametrize("rate", [0, -1.0, float("nan")])
def test_bad_rate(rate):
    with pytest.raises(UserError, match="rate"):
        arrival_times(rate, n=3)


def test_rate_inf_is_all_at_once_and_needs_a_count():
    assert arrival_times(float("inf"), n=4) == pytest.approx([0.0, 0.0, 0.0, 0.0], rel=1e-9)
    with pytest.raises(UserError, match="--num-requests"):
        arrival_times(float("inf"), duration_s=5.0)


def test_needs_a_bound():
    with pytest.raises(UserError, match="bound"):
        arrival_times(1.0)
