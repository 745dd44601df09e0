"""The paired ratio of ``wattbench ab`` (``metrics/paired.py``) against figures worked by hand."""

from __future__ import annotations

import math

import pytest

from wattbench.metrics.noise import judge
from wattbench.metrics.paired import (MIN_PAIRS, order, pair_sides, paired_ratio, pairs_needed, precise_enough)


def test_order_is_whole_a_b_b_a_blocks():
    assert order(2) == ["A", "B", "B", "A", "A", "B", "B", "A"]
    assert [pair_sides(k) for k in range(4)] == [("A", "B"), ("B", "A"), ("A", "B"), ("B", "A")]


def test_ratio_and_interval_by_hand():
    # pairs' log ratios ln(0.9), ln(0.92), ln(0.88), ln(0.9)
    a = [100.0, 200.0, 50.0, 10.0]
    b = [90.0, 184.0, 44.0, 9.0]
    r = paired_ratio(a, b)
    logs = [math.log(0.9), math.log(0.92), math.log(0.88), math.log(0.9)]
    mean = sum(logs) / 4
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / 3)
    h = 3.182446305284263 * sd / 2.0  # t(0.975, 3) · s / sqrt(4)
    assert r is not None and r.n == 4 and r.df == 3
    assert r.ratio == pytest.approx(math.exp(mean), rel=1e-12)
    assert r.ratio == pytest.approx(0.8998, abs=1e-4)
    assert r.low == pytest.approx(math.exp(mean - h), rel=1e-9)
    assert r.high == pytest.approx(math.exp(mean + h), rel=1e-9)
    assert r.rel_half_width == pytest.approx(math.exp(h) - 1.0, rel=1e-9)


def test_a_drift_common_to_both_cancels_over_a_block():
    # the true ratio 0.8; the figure falls 1% per slot, log-linear: A B B A A B B A
    truth, step = 0.8, 0.99
    slot = {k: step ** k for k in range(8)}
    a = [slot[0], slot[3], slot[4], slot[7]]
    b = [truth * slot[1], truth * slot[2], truth * slot[5], truth * slot[6]]
    r = paired_ratio(a, b)
    assert r is not None and r.ratio == pytest.approx(truth, rel=1e-12)
    # the first pair alone carries one slot's drift
    assert b[0] / a[0] == pytest.approx(truth * step, rel=1e-12)


def test_a_pair_that_measured_nothing_is_left_out():
    r = paired_ratio([100.0, None, 100.0, 0.0, 100.0], [90.0, 95.0, 90.0, 90.0, 90.0])
    assert r is not None and r.n == 3 and r.ratio == pytest.approx(0.9, rel=1e-12)
    assert paired_ratio([None], [1.0]) is None


def test_fewer_than_three_pairs_have_no_interval():
    r = paired_ratio([1.0, 1.0], [0.9, 0.91])
    assert r is not None and r.n == 2 and r.low is None and r.noise() is None
    assert not precise_enough(r, 50.0)
    assert MIN_PAIRS == 3


def test_judge_reads_the_pairs_interval_exactly():
    r = paired_ratio([1.0, 1.0, 1.0, 1.0], [0.90, 0.92, 0.88, 0.90])
    jd = judge(r.ratio, r.noise(), r.noise())
    assert jd.low == pytest.approx(r.low, rel=1e-12) and jd.high == pytest.approx(r.high, rel=1e-12)
    assert jd.df == 3 and jd.word == "beyond noise"


def test_precision_stop_edge_moves_with_one_percent():
    r = paired_ratio([1.0, 1.0, 1.0, 1.0], [0.90, 0.92, 0.88, 0.90])
    reached = r.rel_half_width * 100.0
    assert precise_enough(r, reached * 1.01)
    assert not precise_enough(r, reached * 0.99)


def test_pairs_needed_from_the_spread():
    r = paired_ratio([1.0] * 4, [0.90, 0.92, 0.88, 0.90])
    n = pairs_needed(r, 1.0)
    assert n is not None and n % 2 == 0  # whole blocks
    target = math.log(1.01)
    from wattbench.metrics.trials import t_ppf

    assert t_ppf(0.975, n - 1) * r.sd_log / math.sqrt(n) <= target
    assert t_ppf(0.975, n - 3) * r.sd_log / math.sqrt(n - 2) > target  # a block fewer would not do


def test_uneven_spacing_is_adjusted_with_the_common_drift():
    # truth 0.8, the figure falls 4% per second (log-linear); A's trials take 1 s, B's 1.5 s, so the
    # slots are not evenly spaced: A B B A A B B A at 0, 1, 2, 3.5, 5, 6, 7, 8.5
    truth, rate = 0.8, -0.04
    ta, tb = [0.0, 3.5, 5.0, 8.5], [1.0, 2.0, 6.0, 7.0]
    a = [math.exp(rate * t) for t in ta]
    b = [truth * math.exp(rate * t) for t in tb]
    plain = paired_ratio(a, b)
    adjusted = paired_ratio(a, b, ta, tb)
    # unadjusted, the blocks leave rate · mean(tb − ta) = −0.04 · −0.25 s: +1%
    gaps = [u - v for u, v in zip(tb, ta)]
    assert plain.ratio == pytest.approx(truth * math.exp(rate * sum(gaps) / 4), rel=1e-12)
    assert plain.ratio / truth - 1 > 0.009
    assert adjusted.ratio == pytest.approx(truth, rel=1e-12)
    assert adjusted.df == 2 and adjusted.n == 4
