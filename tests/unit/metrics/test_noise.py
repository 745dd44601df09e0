"""``metrics/noise.py``: the one noise rule, checked against hand-derived numbers (every expected
value below was computed by hand from the module docstring's definitions; t quantiles are the
table values t(0.975, 2) = 4.3027, t(0.975, 3) = 3.1824, t(0.975, 4) = 2.7764)."""

from __future__ import annotations

import math

import pytest

from wattbench.metrics.figure_noise import (FigureNoise, prediction_noise, ratio_half_width, ratio_interval,
                                            single_level_noise, spread_noise, trials_noise)
from wattbench.metrics.noise import ratio_noise, repeat_check
from wattbench.metrics.plateau import measured_plateau, plateau, pooled_repeat_sd

T2, T3, T4 = 4.302653, 3.182446, 2.776445


def test_single_level_bound_from_the_h200_trials():
    # one 20 s trial: sd 0.91%, 95% half-width t(0.975, 4) x 0.91% = 2.53%
    assert single_level_noise(20.0).rel_half_width == pytest.approx(0.02527, rel=1e-3)
    assert single_level_noise(60.0).rel_half_width == pytest.approx(0.02527, rel=1e-3)  # never below 20 s's
    # 5 s: sd x sqrt(4) = 1.82% -> 5.05%; a tiny window is capped at 10%
    assert single_level_noise(5.0).rel_half_width == pytest.approx(0.05053, rel=1e-3)
    assert single_level_noise(0.05).rel_half_width == pytest.approx(0.10)
    assert single_level_noise(None).rel_half_width == pytest.approx(0.02527, rel=1e-3)


def test_the_h200_trials_give_back_their_own_sd():
    # 5,378 with a 95% CI of 5,317-5,439 over 5 trials: half-width 61 = 1.134%
    n = trials_noise(5378.0, 5317.0, 5439.0, 5)
    assert n.rel_half_width == pytest.approx(0.011343, rel=1e-3) and n.basis == "trials"
    assert n.rel_half_width / T4 * math.sqrt(5) == pytest.approx(0.0091, rel=0.01)  # the sd the bound uses


def test_ratio_interval_and_within_noise():
    a, b = FigureNoise(0.03, "trials", df=4), FigureNoise(0.04, "trials", df=4)
    r = ratio_noise(1.0, a, b)  # w = sqrt(0.03^2 + 0.04^2) = 0.05
    assert (r.low, r.high) == (pytest.approx(0.951229), pytest.approx(1.051271)) and r.within is True
    r = ratio_noise(1.2, a, b)
    assert (r.low, r.high) == (pytest.approx(1.141475), pytest.approx(1.261525)) and r.within is False
    # one side known: it stands for both, w = sqrt(2) x 0.03 = 0.042426
    r = ratio_noise(1.04, None, a)
    assert r.low == pytest.approx(0.996800, rel=1e-5) and r.within is True
    r = ratio_noise(1.05, None, a)
    assert r.low == pytest.approx(1.006385, rel=1e-5) and r.within is False
    unknown = ratio_noise(1.3, None, None)
    assert unknown.within is None and unknown.basis == "unknown" and "noise unknown" in unknown.text()
    assert unknown.word == "inconclusive"


def test_the_ratio_interval_is_computed_in_one_place_and_every_caller_agrees():
    # w = sqrt(0.03^2 + 0.04^2) = 0.05: 1.2 x e^-0.05 = 1.141475, 1.2 x e^0.05 = 1.261525
    assert ratio_half_width(0.03, 0.04) == pytest.approx(0.05, rel=1e-12)
    assert ratio_interval(1.2, 0.03, 0.04) == (pytest.approx(1.141475, rel=1e-6), pytest.approx(1.261525, rel=1e-6))
    assert ratio_interval(2.0, 0.05) == (pytest.approx(2.0 * math.exp(-0.05), rel=1e-12),
                                         pytest.approx(2.0 * math.exp(0.05), rel=1e-12))
    # compare's trial-CI ratio and its product of ratios, and regress's relative change, call it
    from wattbench.analysis.ratios import combine_log_cis, log_ratio_ci
    from wattbench.results.headline import TrialCI

    # log half-widths 0.03 and 0.04 (the trials' intervals of positive figures are log-symmetric)
    ci = log_ratio_ci(1.2, TrialCI(100.0, 100.0 * math.exp(-0.03), 100.0 * math.exp(0.03)),
                      TrialCI(50.0, 50.0 * math.exp(-0.04), 50.0 * math.exp(0.04)))
    assert (ci.low, ci.high) == (pytest.approx(1.141475, rel=1e-6), pytest.approx(1.261525, rel=1e-6))
    prod = combine_log_cis(1.0, [ci, ci])  # each part's log half-width 0.05: w = 0.05 x sqrt(2)
    assert prod.high == pytest.approx(math.exp(0.05 * math.sqrt(2)), rel=1e-9)


def test_history_spread_needs_three_runs():
    assert spread_noise(0.02, 2) is None
    assert spread_noise(0.02, 3).rel_half_width == pytest.approx(T2 * 0.02, rel=1e-5)  # 8.61%
    assert spread_noise(0.02, 3).basis == "history"


def test_prediction_interval_of_a_repeat():
    # 100, 102, 98, 101: mean 100.25, sd sqrt(8.75 / 3) = 1.70783; one repeat:
    # t(0.975, 3) x 1.70783 x sqrt(1/4 + 1) / 100.25 = 6.061%
    n = prediction_noise([100.0, 102.0, 98.0, 101.0])
    assert n.rel_half_width == pytest.approx(0.060614, rel=1e-4)
    assert prediction_noise([100.0]) is None


def test_repeat_check_the_issues_case_and_an_ordinary_one():
    # the H200 report: 5,378 then +16% after the server saw c=128; single 20 s levels: w = sqrt(2) x 2.527%
    c = repeat_check([5378.0], [5378.0 * 1.16], 20.0)
    assert c.beyond_noise and c.ratio == pytest.approx(1.16)
    assert c.low == pytest.approx(1.16 * math.exp(-0.035736), rel=1e-4)
    assert c.bound_pct == pytest.approx(3.638, rel=1e-3)
    assert not repeat_check([5378.0], [5378.0 * 1.02], 20.0).beyond_noise
    # with trials, their prediction interval: 6.06% around 100.25 (above)
    assert not repeat_check([100.0, 102.0, 98.0, 101.0], [105.0], 20.0).beyond_noise  # +4.7%
    assert repeat_check([100.0, 102.0, 98.0, 101.0], [108.0], 20.0).beyond_noise  # +7.7%
    assert repeat_check([], [1.0], 20.0) is None


def test_plateau_is_every_level_within_noise_of_the_best_and_recommends_the_lowest():
    h = FigureNoise(0.03, "bound")  # w = 0.042426 for every ratio
    # best c=8 (200); 200/197 = 1.0152: low 0.9731 -> on; 200/180 = 1.111: low 1.0650 -> off
    pts = [(1, 100.0, h), (2, 180.0, h), (4, 197.0, h), (8, 200.0, h), (16, 150.0, h)]
    pl = plateau(pts)
    assert pl.best == 8 and pl.values == [4, 8] and pl.recommended == 4
    assert "lowest load within noise of the best (8)" in pl.reason
    assert plateau(pts, prefer="best").recommended == 8
    # lower is better (J/token): the smallest is best
    pl = plateau([(1, 2.0, h), (2, 1.02, h), (4, 1.0, h)], higher_is_better=False)
    assert pl.best == 4 and pl.values == [2, 4]


def test_pooled_repeat_spread_and_the_measured_plateau():
    # ln(102/100) = 0.0198026, ln(200/196) = 0.0202027: SS = (0.0198026^2 + 0.0202027^2) / 2, 2 df
    sd, df = pooled_repeat_sd([[100.0, 102.0], [200.0, 196.0], [50.0]])
    assert df == 2 and sd == pytest.approx(0.0141447, rel=1e-4)
    # two levels measured twice (means 101 and 198), one once (150); 20 s windows
    ms = [(4, 100.0, 20.0, None), (4, 102.0, 20.0, None), (8, 200.0, 20.0, None), (8, 196.0, 20.0, None),
          (16, 150.0, 20.0, None)]
    pl, basis = measured_plateau(ms)
    # the repeats' spread: t(0.975, 2) x 1.414% / sqrt(2) = 4.30% (wider than the bound's 2.53%/sqrt(2))
    assert pl.noise[8.0].rel_half_width == pytest.approx(T2 * 0.0141447 / math.sqrt(2), rel=1e-4)
    assert pl.noise[16.0].rel_half_width == pytest.approx(T2 * 0.0141447, rel=1e-4)
    assert pl.best == 8 and pl.values == [8] and pl.scores[8.0] == pytest.approx(198.0)
    assert "re-measured" in basis


# ---------------------------------------------------------------- one judgement, three words


def test_judge_three_words_and_inconclusive_never_within():
    from wattbench.metrics.noise import BEYOND, INCONCLUSIVE, WITHIN, judge

    t4 = trials_noise(100.0, 97.0, 103.0, 5)  # ±3%, 4 df
    assert judge(1.02, t4, t4).word == WITHIN
    assert judge(0.5, t4, t4).word == BEYOND
    assert "within-run trials (5 trials, 4 df)" in judge(0.5, t4, t4).text()
    # two trials: 1 df — whatever the ratio, the noise cannot decide (t(0.975, 1) = 12.7)
    t1 = trials_noise(100.0, 99.0, 101.0, 2)
    for r in (1.0, 1.01, 0.5):
        j = judge(r, t1, t4)
        assert j.word == INCONCLUSIVE and j.df == 1 and "1 degree of freedom" in j.why and "--trials" in j.todo
    # a bound over ±25% (the issue's ±13352%): inconclusive even with df enough
    wide = FigureNoise(0.3, "history", 5, "history", 4)
    assert judge(0.85, wide, wide).word == INCONCLUSIVE and "wider than ±25%" in judge(0.85, wide, wide).why
    # wider than the effect it must resolve: a within-noise answer cannot see a 3% limit with ±4.3%
    assert judge(1.01, t4, t4).word == WITHIN
    assert judge(1.01, t4, t4, effect=0.03).word == INCONCLUSIVE
    assert judge(1.01, t4, t4, effect=0.05).word == WITHIN
    # no noise at all
    assert judge(1.3, None, None).word == INCONCLUSIVE and "noise unknown" in judge(1.3, None, None).why


def test_the_one_df_plateau_of_the_issue_is_no_plateau():
    # --optimize measured c=32 twice and c=108 once; the re-measured spread 10.1% from 1 df made
    # c=32 (4,180 goodput tok/s per kW) "within noise" of c=108 (13,051) — now inconclusive, off the plateau
    ms = [(32, 4180.0, 20.0, None), (32, 4180.0 * math.exp(0.143), 20.0, None), (108, 13051.0, 20.0, None)]
    pl, basis = measured_plateau(ms)
    assert pl.best == 108 and pl.values == [108] and pl.recommended == 108
    assert 32.0 in pl.inconclusive and "inconclusive" in pl.reason and "1 df" in basis


def test_repeat_check_with_two_trials_is_inconclusive_not_within():
    c = repeat_check([100.0, 130.0], [98.0], 20.0)  # prediction interval from 1 df: ±hundreds of %
    assert c.word == "inconclusive" and not c.beyond_noise and c.bound_pct > 25


# ---------------------------------------------------------------- the history: change points


def test_a_configuration_change_is_a_change_point_not_spread():
    from wattbench.metrics.series_noise import series_noise

    # three runs at one speed, then two at half of it (the scripted server's ITL 10 -> 20 ms)
    s = series_noise([100.0, 102.0, 99.0, 50.0, 51.0], ["r1", "r2", "r3", "s1", "s2"])
    assert s.segments == ((0, 1, 2), (3, 4)) and [c.run_id for c in s.change_points] == ["s1"]
    assert s.change_points[0].ratio == pytest.approx(50.0 / 100.0)
    assert "moved -50% at run s1" in s.change_points[0].text("c=16")
    # the spread is pooled within the segments: ln values' deviations only, 2 + 1 df
    logs = [math.log(v) for v in (100.0, 102.0, 99.0)], [math.log(v) for v in (50.0, 51.0)]
    ss = sum(sum((x - sum(g) / len(g)) ** 2 for x in g) for g in logs)
    assert s.df == 3 and s.rel_sd == pytest.approx(math.sqrt(ss / 3), rel=1e-9)
    assert s.rel_sd < 0.02  # the old unsplit spread was 36%
    n = s.noise("k")
    assert n.df == 3 and n.rel_half_width == pytest.approx(T3 * s.rel_sd, rel=1e-6)


def test_an_early_change_and_a_lone_outlier():
    from wattbench.metrics.series_noise import series_noise

    # before the series has 2 df, a move over 25% is a change point
    s = series_noise([100.0, 50.0, 51.0, 50.5])
    assert s.segments == ((0,), (1, 2, 3)) and s.df == 2
    # a lone outlier is a segment of one run: reported, no degree of freedom, not in the spread
    s = series_noise([100.0, 101.0, 99.0, 100.5, 160.0, 100.2, 99.8])
    assert len(s.change_points) == 2 and s.segments[1] == (4,) and s.df == 4
    assert s.rel_sd < 0.01
    # small moves (< 5%) never split: they stay in the spread
    assert series_noise([100.0, 100.1, 99.9, 103.0]).change_points == ()


def test_two_judged_runs_in_one_segment_leave_its_spread():
    from wattbench.metrics.series_noise import series_noise

    # the two runs judged differ by 4% (under the 5% a change point needs): inside the segment their
    # difference would widen the very spread that judges it, so they are left out of it
    vals, ids = [100.0, 100.5, 99.5, 100.2, 104.0], ["a", "b", "c", "d", "e"]
    whole = series_noise(vals, ids)
    judged = series_noise(vals, ids, judged=["d", "e"])
    assert whole.segments == judged.segments == ((0, 1, 2, 3, 4),)
    assert judged.df == 2 and whole.df == 4 and judged.rel_sd < whole.rel_sd
    assert (whole.left_out, judged.left_out) == (0, 2)
    # in separate segments each stays in its own: their difference is the change point, not spread
    s = series_noise([100.0, 101.0, 99.0, 50.0, 50.5], ["a", "b", "c", "d", "e"], judged=["c", "e"])
    assert s.df == 3 and s.left_out == 0


def test_one_count_and_one_sentence_whoever_reads_the_spread():
    from wattbench.metrics.figure_noise import history_text, no_spread, repeat_noise
    from wattbench.metrics.noise import INCONCLUSIVE, judge
    from wattbench.metrics.series_noise import series_noise

    vals, ids = [100.0, 100.5, 99.5, 101.0], ["a", "b", "c", "d"]
    logs = [math.log(v) for v in vals]
    m = sum(logs) / 4
    s = series_noise(vals, ids)
    assert s.df == 3 and s.rel_sd == pytest.approx(math.sqrt(sum((x - m) ** 2 for x in logs) / 3), rel=1e-12)
    sentence = f"history of key k1: 4 runs, sd {s.rel_sd * 100:.1f}%, 3 df"
    assert s.text("k1") == sentence == history_text(4, s.rel_sd, 3, "k1") == s.noise("k1").detail
    assert judge(1.01, s.noise("k1")).basis_text == sentence  # what compare and regress print
    # a comparison of b and c leaves them out: the same 4 runs, and the sentence says what remains
    j = series_noise(vals, ids, judged=["b", "c"])
    rest = [math.log(100.0), math.log(101.0)]
    sd2 = abs(rest[0] - rest[1]) / math.sqrt(2)
    assert j.df == 1 and j.rel_sd == pytest.approx(sd2, rel=1e-12)
    assert j.text("k1") == f"history of key k1: 4 runs, the 2 compared left out: sd {sd2 * 100:.1f}%, 1 df"
    # across a change point the segments are said
    s2 = series_noise([100.0, 101.0, 99.0, 50.0, 50.5], ["a", "b", "c", "d", "e"])
    assert s2.df == 3 and s2.text().startswith("history: 5 runs in 2 segments, sd ")
    # three runs, two of them judged: no spread left — named, with its runs, never "noise unknown"
    t = series_noise([100.0, 99.0, 95.0], ["a", "b", "c"], judged=["a", "c"])
    assert t.df == 0 and t.noise("k") is None
    h = no_spread(t.text("k"), t.runs)
    assert repeat_noise(None, h) is h
    jd = judge(0.95, h, h)
    assert jd.word == INCONCLUSIVE and jd.df == 0
    assert jd.why == ("noise from 0 degrees of freedom (history of key k: 3 runs, the 2 compared left out: sd —, "
                      "0 df), fewer than 2")


def test_a_zero_spread_is_inconclusive_and_says_why():
    from wattbench.metrics.noise import INCONCLUSIVE, judge
    from wattbench.metrics.series_noise import series_noise

    # four runs with one figure (a declared power and a fixed throughput): sd 0%, 3 df — no noise measured
    fn = series_noise([500.0] * 4, ["a", "b", "c", "d"]).noise("k")
    assert fn.rel_half_width < 1e-12 and fn.detail == "history of key k: 4 runs, sd 0%, 3 df"
    for ratio in (1.0, 1.2):  # never "within noise" at 1.0, never "beyond" on a zero-wide interval
        jd = judge(ratio, fn, fn)
        assert jd.word == INCONCLUSIVE, jd
        assert "sd 0%" in jd.why and "measures no noise" in jd.why and "--sensor" in jd.todo
    # three identical figures: their log mean rounds, their spread is zero all the same
    assert judge(1.0, series_noise([1234.567] * 3).noise()).word == INCONCLUSIVE
