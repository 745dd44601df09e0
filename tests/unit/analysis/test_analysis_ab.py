"""``analysis/ab.py``: the paired answer of ``wattbench ab`` from the pairs a run holds, in compare's
words, against figures worked by hand."""

from __future__ import annotations

import math

import pytest

from wattbench.analysis.ab import check_pair, idle_line, paired_compare, paired_level
from wattbench.analysis.ratios import answer_line
from wattbench.core.errors import UserError
from wattbench.core.schema import NoiseInfo, PairedLevel, PairedRun
from tests.fakes.results_factory import make_result


def _level(n: int = 4) -> PairedLevel:
    # A: 1,000 tok/s at 400 W; B: 10% less throughput (±1% per pair) at 5% less power
    tb = [900.0, 909.0, 891.0, 900.0][:n]
    return PairedLevel(key="c=8", label="concurrency=8", index=0, boundary="node",
                       a_tokens_per_s=[1000.0] * n, b_tokens_per_s=tb, a_power_w=[400.0] * n, b_power_w=[380.0] * n,
                       a_per_kw=[2500.0] * n, b_per_kw=[t / 0.38 for t in tb])


def test_answer_line_in_compares_words_with_the_decomposition():
    ans = paired_level(_level(), precision_pct=None)
    d = ans.decomposition
    t = math.exp(sum(math.log(x / 1000.0) for x in [900.0, 909.0, 891.0, 900.0]) / 4)
    assert d.throughput_ratio == pytest.approx(t, rel=1e-12)
    assert d.power_ratio == pytest.approx(380.0 / 400.0, rel=1e-12)  # B power ÷ A power, as compare stores it
    assert d.per_kw_ratio == pytest.approx(t / (380.0 / 400.0), rel=1e-12)
    assert ans.pairs == 4 and ans.noise.word == "beyond noise" and ans.noise.df == 3
    assert ans.answer == answer_line("c=8", "B/A", d, ans.noise)  # compare's words, compare's digits
    assert ans.answer.startswith("c=8: B/A per kW 0.9") and "beyond noise = throughput 0.90× ÷ power 0.95×" in ans.answer
    assert d.per_kw_ci.method.startswith("paired")


def test_precision_line_says_what_was_reached_and_what_more_would_take():
    ans = paired_level(_level(), precision_pct=0.1)
    assert "short of the ±0.1% asked" in ans.precision_line and ans.pairs_needed and ans.pairs_needed > 4
    ok = paired_level(_level(), precision_pct=50.0)
    assert ok.pairs_needed is None and ok.precision_line.endswith("(asked ±50%)")


def test_two_pairs_are_inconclusive_and_say_why():
    ans = paired_level(_level(2), precision_pct=None)
    assert ans.noise.word == "inconclusive" and "2 pairs" in ans.noise.why and "3 or more" in ans.noise.why
    assert "inconclusive" in ans.answer


def _pair():
    a, b = make_result(run_id="run-a"), make_result(run_id="run-b")
    lv = _level()
    a.noise = NoiseInfo(paired=PairedRun(role="A", other_run_id="run-b", levels=[lv], sequence=["A c=8", "B c=8"],
                                         shared_idle_power_w={"node": 100.0}))
    b.noise = NoiseInfo(paired=PairedRun(role="B", other_run_id="run-a", levels=[lv]))
    return a, b


def test_the_shared_meters_idle_share_of_each_side():
    a, b = _pair()
    cmp = paired_compare(a, b)
    assert cmp.run_ids == ["run-a", "run-b"]
    assert cmp.idle_lines == ["c=8: the shared meter's idle 100 W at node (both servers resident, neither loaded) is "
                              "25% of A's and 26% of B's power: each side's figures include the idle side's draw"]


def test_runs_not_of_one_ab_are_refused():
    a, b = _pair()
    with pytest.raises(UserError, match="not the A and B of one"):
        check_pair(b, a)
    with pytest.raises(UserError, match="was not measured by `wattbench ab`"):
        check_pair(a, make_result(run_id="other"))


def _with_series(series: list[tuple[float, float]]):
    a, b = _pair()
    a.noise.paired.idle_series = {"node": series}
    return a, b


def test_the_idle_series_mean_range_and_share_of_each_side():
    # before the first pair, then after each of two blocks; A reads 400 W, B 380 W (``_level``)
    a, b = _with_series([(-2.0, 100.0), (30.0, 120.0), (61.0, 95.0)])
    cmp = paired_compare(a, b)
    d = cmp.idle[0]
    assert (d.key, d.boundary, d.windows) == ("c=8", "node", 3)
    assert d.mean_w == pytest.approx(105.0, rel=1e-12) and (d.low_w, d.high_w) == pytest.approx((95.0, 120.0), rel=1e-12)
    assert d.share_a == pytest.approx(105.0 / 400.0, rel=1e-12) and d.share_b == pytest.approx(105.0 / 380.0, rel=1e-12)
    assert not d.drifts  # three windows: no interval to exclude 0
    assert cmp.idle_lines == ["c=8: the shared meter's idle at node (both servers resident, neither loaded), 3 windows "
                              "before and between the blocks: mean 105 W (95–120 W), 26% of A's and 28% of B's power; "
                              "the ratio includes the idle side's draw at node (each side's power is the whole "
                              "meter's)"]
    assert cmp.model_dump(mode="json")["idle"][0]["mean_w"] == pytest.approx(105.0)  # in --json


def test_an_idle_series_that_moves_more_than_its_noise_is_named_with_its_change():
    # ×1.02 per block, every step the same: the log-scale Theil–Sen slope ln 1.02 per 30 s, the change
    # over 150 s 1.02^5 − 1 = +10.4%, its 99% interval (every pairwise slope alike) clear of 0
    rising = [(30.0 * k, 100.0 * 1.02 ** k) for k in range(6)]
    d = paired_compare(*_with_series(rising)).idle[0]
    assert d.drifts and d.change_pct == pytest.approx(100.0 * (1.02 ** 5 - 1.0), rel=1e-9)
    assert "; the idle draw drifts +10.4% over the pairs, more than its noise;" in idle_line(d)
    # the same six windows in an order with no trend: its interval holds 0, nothing named
    flat = [(30.0 * k, w) for k, w in enumerate([100.0, 110.0, 100.0, 110.0, 100.0, 110.0])]
    f = paired_compare(*_with_series(flat)).idle[0]
    assert not f.drifts and "drifts" not in idle_line(f)
