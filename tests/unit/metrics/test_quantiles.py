"""metrics/quantiles.py: statistics of a stream of blocks equal numpy's on the whole array, bit
for bit (sum, mean, std, min, max, linear percentiles), on random, heavy-tailed, tied, all-equal,
negative and tiny inputs, cut into blocks anywhere, and with narrowing forced over many passes."""

from __future__ import annotations

import numpy as np
import pytest

from wattbench.metrics.quantiles import Blocks, lerp_percentiles, moments, order_statistics, pairwise_sum, percentiles

QS = [50, 90, 95, 99]


def _cut(a: np.ndarray, rng) -> Blocks:
    cuts = np.sort(rng.integers(0, a.size + 1, rng.integers(0, 7)))
    parts = np.split(a, cuts)  # empty blocks included
    return Blocks(lambda: parts)


def _inputs(rng):
    for n in (1, 2, 3, 7, 8, 9, 127, 128, 129, 1000, 70_001, 140_003):
        yield rng.lognormal(0, 3, n)  # heavy-tailed
        yield rng.pareto(1.1, n) * 1e3
        yield np.full(n, 20.0)  # all equal
        yield rng.integers(0, 4, n).astype(float)  # many ties
        yield rng.normal(0, 1, n)  # negatives
        yield np.diff(np.cumsum(rng.integers(0, 50_000_000, n + 1))) / 1e6  # gaps as the latency code makes them


def test_moments_and_percentiles_equal_numpy():
    rng = np.random.default_rng(17)
    for a in _inputs(rng):
        src = _cut(a, rng)
        assert pairwise_sum(src, a.size) == float(np.sum(a))
        assert moments(src) == (a.size, float(a.mean()), float(a.min()), float(a.max()), float(a.std()))
        assert percentiles(src, QS) == np.percentile(a, QS).tolist()
        assert percentiles(src, [99.0]) == [float(np.percentile(a, 99.0))]


def test_narrowing_over_many_passes_and_ranks():
    rng = np.random.default_rng(3)
    a = np.concatenate([rng.lognormal(0, 4, 5_000), np.full(700, 3.25), -rng.pareto(2.0, 300)])
    rng.shuffle(a)
    src = _cut(a, rng)
    s = np.sort(a)
    ranks = [0, 1, 2, 17, 2_500, 2_501, 5_999, a.size - 1]
    assert order_statistics(src, ranks, bins=4, collect=3) == {r: float(s[r]) for r in ranks}
    assert order_statistics(src, ranks, bins=1 << 10, collect=50) == {r: float(s[r]) for r in ranks}


def test_empty_and_single():
    empty = Blocks(lambda: [np.zeros(0)])
    assert moments(empty) == (0, None, None, None, None)
    assert percentiles(empty, QS) is None
    assert pairwise_sum(empty, 0) == pytest.approx(0.0, rel=1e-9)
    one = Blocks.of([4.5])
    assert moments(one) == pytest.approx((1, 4.5, 4.5, 4.5, 0.0), rel=1e-9)
    assert percentiles(one, QS) == [4.5] * 4


def test_lerp_percentiles_is_numpys_rule():
    rng = np.random.default_rng(5)
    for n in (1, 2, 5, 101, 1000):
        s = np.sort(rng.lognormal(0, 2, n))
        assert lerp_percentiles(n, QS, lambda i: float(s[i])) == np.percentile(s, QS).tolist()
    with pytest.raises(ValueError):
        order_statistics(Blocks.of([1.0, 2.0]), [2])
