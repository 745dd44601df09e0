import math

import numpy as np
import pytest

from wattbench.core.errors import UserError
from wattbench.workload.distributions import parse_distribution


def rng():
    return np.random.default_rng(123)


def test_fixed():
    d = parse_distribution("256")
    assert d.sample(rng()) == 256
    assert set(d.sample(rng(), 100).tolist()) == {256}


def test_uniform_inclusive_bounds_and_mean():
    x = parse_distribution("uniform:10:20").sample(rng(), 20000)
    assert x.min() == 10 and x.max() == 20
    assert abs(x.mean() - 15) < 0.1


def test_normal_mean_std():
    x = parse_distribution("normal:500:50").sample(rng(), 20000)
    assert abs(x.mean() - 500) < 2
    assert abs(x.std() - 50) < 2


def test_lognormal_params_are_of_the_underlying_normal():
    d = parse_distribution("lognormal:6:0.5")
    x = d.sample(rng(), 40000)
    assert abs(np.median(x) - math.exp(6)) / math.exp(6) < 0.02
    assert abs(x.mean() - math.exp(6 + 0.125)) / math.exp(6.125) < 0.02
    assert d.describe()["median"] == pytest.approx(math.exp(6))


def test_lognormal_mu_given_as_length_is_refused_with_hint():
    with pytest.raises(UserError, match="lognormal:6.21"):
        parse_distribution("lognormal:500:0.5")


def test_choice():
    x = parse_distribution("choice:8,64,512").sample(rng(), 3000)
    assert set(x.tolist()) == {8, 64, 512}


def test_samples_are_at_least_one_and_clipped():
    x = parse_distribution("normal:5:50", high=40).sample(rng(), 5000)
    assert x.min() >= 1 and x.max() <= 40
    assert (x == 1).sum() > 100 and (x == 40).sum() > 100


def test_seeded_reproducible():
    d = parse_distribution("uniform:1:1000")
    assert (d.sample(np.random.default_rng(7), 50) == d.sample(np.random.default_rng(7), 50)).all()


@pytest.mark.parametrize("bad", ["", "abc", "0", "-5", "12.5", "uniform:5", "uniform:9:3", "normal:10",
                                 "normal:100:-1", "lognormal:x:1", "gamma:2:3", "choice:", "choice:1,,2",
                                 "uniform:a:b", "normal:nan:1"])
def test_bad_strings_name_the_string_and_the_forms(bad):
    with pytest.raises(UserError) as e:
        parse_distribution(bad)
    msg = str(e.value)
    assert repr(bad.strip()) in msg or bad == ""
    assert "uniform:A:B" in msg or "lognormal" in msg
