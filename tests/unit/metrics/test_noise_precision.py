"""``metrics/noise.py``'s precision rules: how many measurements reach a half-width
(``measurements_needed``), ``--trials auto``'s stop rule (``level_precision``, ``auto_stop``) and
what settles an inconclusive judgement (``ratio_needs``, ``settle_text`` through ``judge``).

Every expected count was worked out by hand from the t table (t(0.975, df): 1 12.7062, 2 4.3027,
4 2.7764, 5 2.5706, 6 2.4469, 12 2.1788, 13 2.1604): ``m`` measurements of one spread ``s`` have
a mean of half-width ``t(df_m) · s / sqrt(m)``."""

from __future__ import annotations

import math

import pytest

from wattbench.metrics.figure_noise import FigureNoise, spread_noise, trials_noise
from wattbench.metrics.noise import INCONCLUSIVE, judge
from wattbench.metrics.precision import (AUTO_MIN_TRIALS, MAX_TIME, MAX_TRIALS, REACHED, Need, auto_stop,
                                         level_precision, measurements_needed, ratio_needs)

T = {1: 12.7062, 2: 4.3027, 4: 2.7764, 5: 2.5706, 6: 2.4469, 12: 2.1788, 13: 2.1604}


def test_three_trials_at_5pct_need_seven_for_2pct_with_the_t_at_the_new_df():
    # s = 5% x sqrt(3) / 4.3027 = 2.0127%; m = 6: 2.5706 x s / sqrt(6) = 2.112% > 2%; m = 7: 2.4469 x s / sqrt(7) = 1.861%
    s = 0.05 * math.sqrt(3) / T[2]
    assert T[5] * s / math.sqrt(6) > 0.02 > T[6] * s / math.sqrt(7)
    assert measurements_needed(3, 0.05, 0.02) == 7
    # the naive n (h/target)^2 with the old t would ask for 19: the t at the new df matters
    assert math.ceil(3 * (0.05 / 0.02) ** 2) == 19


def test_a_history_run_needs_runs_at_the_history_df():
    # one run with the history's noise: h = t(4) s = 8% -> s = 2.8814%; m runs: t(4 + m - 1) s / sqrt(m)
    s = 0.08 / T[4]
    assert T[12] * s / 3 > 0.02 > T[13] * s / math.sqrt(10)  # 9 runs: 2.093%; 10 runs: 1.969%
    assert measurements_needed(1, 0.08, 0.02, df=4) == 10


def test_already_within_needs_nothing_more_and_the_edge_is_exact():
    assert measurements_needed(5, 0.02, 0.02) == 5  # at the target: reached
    assert measurements_needed(5, 0.0201, 0.02) == 6  # 0.5% past it: one more


def test_needed_count_moves_when_the_target_moves_by_1pct():
    # a target set exactly at 7 trials' half-width: 7 reach it, 1% tighter needs 8
    s = 0.05 * math.sqrt(3) / T[2]
    at7 = T[6] * s / math.sqrt(7)
    assert measurements_needed(3, 0.05, at7 * 1.0001) == 7
    assert measurements_needed(3, 0.05, at7 * 0.99) == 8


@pytest.mark.parametrize("n, h, target, df", [
    (1, 0.05, 0.02, None),  # one trial: no spread
    (3, float("nan"), 0.02, None),
    (3, 0.05, 0.0, None),
    (3, 0.05, float("inf"), None),
    (1, 0.05, 0.02, 0),
])
def test_no_count_without_a_spread_or_a_target(n, h, target, df):
    assert measurements_needed(n, h, target, df) is None


def test_past_the_cap_is_unknown_not_a_huge_number():
    assert measurements_needed(3, 5.0, 1e-5) is None


def test_the_stop_rule_edge_is_the_asked_precision():
    # 1% inside 2% stops, 1% outside does not (3 trials: 2 df, the least the noise rule accepts)
    assert level_precision(3, 0.0198, 0.02).met
    assert not level_precision(3, 0.0202, 0.02).met
    assert level_precision(3, 0.02, 0.02).met  # at the precision: reached
    assert auto_stop([level_precision(3, 0.0198, 0.02)], 3, max_trials=10) == REACHED
    assert auto_stop([level_precision(3, 0.0202, 0.02)], 3, max_trials=10) is None


def test_fewer_than_three_trials_never_reach_and_drift_never_does():
    assert AUTO_MIN_TRIALS == 3
    two = level_precision(2, 0.001, 0.02)
    assert not two.met and two.more == 1  # two trials (1 df): one more before it can stop
    assert not level_precision(1, None, 0.02).met and level_precision(1, None, 0.02).more is None
    drifting = level_precision(5, 0.01, 0.02, drifting=True)
    assert not drifting.met


def test_every_level_must_reach_it():
    fine, wide = level_precision(4, 0.01, 0.02), level_precision(4, 0.05, 0.02)
    assert auto_stop([fine, wide], 4, max_trials=10) is None
    assert wide.more is not None and wide.more > 0 and fine.more == 0


def test_budgets_end_the_rounds():
    wide = level_precision(4, 0.05, 0.02)
    assert auto_stop([wide], 10, max_trials=10) == MAX_TRIALS
    assert auto_stop([wide], 9, max_trials=10) is None
    # another 30 s round after 80 s would end past 100 s: stop; after 69 s it would end at 99 s: go on
    assert auto_stop([wide], 4, max_trials=10, elapsed_s=80.0, max_time_s=100.0, round_s=30.0) == MAX_TIME
    assert auto_stop([wide], 4, max_trials=10, elapsed_s=69.0, max_time_s=100.0, round_s=30.0) is None
    # a reached precision wins over an ended budget
    assert auto_stop([level_precision(10, 0.01, 0.02)], 10, max_trials=10) == REACHED


def test_level_more_counts_from_the_observed_spread():
    p = level_precision(3, 0.05, 0.02)
    assert p.needed == 7 and p.more == 4 and not p.met


def test_ratio_needs_ask_each_side_for_its_share():
    # two sides of 3 trials at 5%: each must reach ln(1.02)/sqrt(2) = 1.4003%
    per = math.log1p(0.02) / math.sqrt(2)
    s = 0.05 * math.sqrt(3) / T[2]
    a = trials_noise(100.0, 95.0, 105.0, 3)
    needs = ratio_needs(a, a, 0.02)
    assert [n.side for n in needs] == ["A", "B"]
    m = needs[0].needed
    assert m is not None and m > 7
    # the count is the first whose half-width reaches the share (t at the new df, from the table's tail)
    from wattbench.metrics.trials import t_ppf
    assert t_ppf(0.975, m - 1) * s / math.sqrt(m) <= per < t_ppf(0.975, m - 2) * s / math.sqrt(m - 1)
    assert needs[0].text() == f"{m - 3} more trials of A ({m} in all)"


def test_an_inconclusive_judgement_says_what_the_noise_resolves_and_what_would_settle_it():
    # 2 trials each (1 df): inconclusive; the bound printed is the interval's
    a = trials_noise(100.0, 90.0, 110.0, 2)
    jd = judge(1.04, a, a)
    assert jd.word == INCONCLUSIVE
    bound = math.exp(math.sqrt(2) * 0.10) - 1  # 15.2%
    assert f"the current noise resolves only effects beyond ±{bound * 100:.1f}%" in jd.todo
    assert "to resolve ±2%:" in jd.todo and "more trials of A" in jd.todo and "more trials of B" in jd.todo
    assert jd.precision == pytest.approx(0.02) and len(jd.needs) == 2
    # a regress limit is the precision it asks
    h = spread_noise(0.05, 4)
    jr = judge(1.01, h, h, effect=0.03)
    assert jr.word == INCONCLUSIVE and "to resolve ±3%" in jr.todo and "more runs of A" in jr.todo


def test_unknown_noise_gives_no_count():
    jd = judge(1.04, None, None)
    assert jd.word == INCONCLUSIVE and "resolves" not in jd.todo and jd.needs == ()


def test_need_text_units():
    assert Need("B", "runs", 1, 2).text() == "1 more run of B (2 in all)"
    assert Need("", "trials", 3, 7).text() == "4 more trials of each side (7 in all)"
    assert "unknown number" in Need("A", "trials", 2, None).text()


def test_one_noise_standing_for_both_asks_each_side():
    n = FigureNoise(0.03, "history", 5, "history", 4, 1, "runs")
    needs = ratio_needs(n, None, 0.02)
    assert len(needs) == 1 and needs[0].side == "" and needs[0].unit == "runs"


def test_a_side_already_narrow_still_needs_the_degrees_of_freedom_the_rule_asks():
    # two trials at ±0.5% (1 df) are narrow enough for ±2%, but 1 df never decides: one more each
    a = trials_noise(100.0, 99.5, 100.5, 2)
    needs = ratio_needs(a, a, 0.02, ("the baseline", "the run"))
    assert [(n.side, n.more, n.needed) for n in needs] == [("the baseline", 1, 3), ("the run", 1, 3)]
    # a history of 1 df (one more run of each side gives 2): one more run
    h = FigureNoise(0.01, "history", 2, "history", 1, 1, "runs")
    assert ratio_needs(h, None, 0.05)[0].more == 1


def test_a_large_count_is_the_first_that_reaches_it_not_a_step_past():
    # 3 trials at ±29.3% asking ±0.5%: thousands of trials; the answer is the first m that reaches it
    from wattbench.metrics.trials import t_ppf
    s = 0.293 * math.sqrt(3) / T[2]
    m = measurements_needed(3, 0.293, 0.005)
    assert m is not None and m > 1000
    assert t_ppf(0.975, m - 1) * s / math.sqrt(m) <= 0.005 < t_ppf(0.975, m - 2) * s / math.sqrt(m - 1)
