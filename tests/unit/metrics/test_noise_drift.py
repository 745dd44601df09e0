"""A drifting figure never feeds "within noise" or "beyond noise" (``metrics/noise.judge``): every
caller's noise carries the level's drift (``metrics/drift.figure_drift``) and the judgement says
inconclusive, which side drifts, by how much, why, and what to do."""

from __future__ import annotations

import pytest

from wattbench.core.schema import FigureTrend, Stationarity
from wattbench.metrics.drift import figure_drift
from wattbench.metrics.figure_noise import FigureNoise, combine, spread_noise, trials_noise, with_drift
from wattbench.metrics.noise import INCONCLUSIVE, WITHIN, judge, repeat_check
from wattbench.metrics.plateau import measured_plateau


def _st(drifting: bool = True, boundary: str = "accelerator", trials: int = 3) -> Stationarity:
    return Stationarity(trials=trials, cause="GPU temperature 58→79 °C", todo="precondition the device (--precondition)",
                        trends=[FigureTrend(figure="output_tokens_per_s_per_kw", boundary=boundary, change_pct=-14.0,
                                            ci_low_pct=-17.0, ci_high_pct=-11.0, span_s=60.0, points=60,
                                            trials_change_pct=-15.4, moves=True, drifting=drifting),
                                FigureTrend(figure="output_tokens_per_s", change_pct=-0.2, moves=False)])


def test_figure_drift_reads_the_per_kw_family_at_its_boundary_only():
    st = _st()
    words, todo = figure_drift(st, "output_tokens_per_s_per_kw", "accelerator")
    assert words == "drifts -15.4% over its 3 trials (GPU temperature 58→79 °C)"
    assert todo == "precondition the device (--precondition)"
    assert figure_drift(st, "j_per_output_token@accelerator") is not None  # J/token: per kW's inverse
    assert figure_drift(st, "output_tokens_per_s_per_kw", "node") is None  # another boundary
    assert figure_drift(st, "output_tokens_per_s") is None  # throughput did not move
    assert figure_drift(st, "ttft_p99_ms") is None  # latency has no trend
    assert figure_drift(_st(drifting=False), "output_tokens_per_s_per_kw", "accelerator") is None  # a note
    assert figure_drift(None, "output_tokens_per_s_per_kw") is None
    one = figure_drift(_st(trials=1), "output_tokens_per_s_per_kw", "accelerator")
    assert one[0].startswith("drifts -14.0% over its steady window (60 s)")


def test_a_drifting_side_is_inconclusive_even_where_the_interval_excludes_one():
    a = trials_noise(1000.0, 990.0, 1010.0, 3)
    b = trials_noise(800.0, 790.0, 810.0, 3, drift=figure_drift(_st(), "output_tokens_per_s_per_kw", "accelerator"))
    assert judge(0.8, a, trials_noise(800.0, 790.0, 810.0, 3)).beyond  # without the drift: beyond noise
    jd = judge(0.8, a, b)
    assert jd.word == INCONCLUSIVE and jd.basis == "drift"
    assert jd.why == "B drifts -15.4% over its 3 trials (GPU temperature 58→79 °C)"
    assert jd.todo == "precondition the device (--precondition)"
    assert jd.text().startswith("inconclusive: B drifts -15.4% over its 3 trials")
    both = judge(1.0, with_drift(a, ("drifts +3.0% over its 3 trials", "wait for the server to drain")), b)
    assert both.why.startswith("A drifts +3.0%") and "; B drifts -15.4%" in both.why
    assert both.todo == "wait for the server to drain; precondition the device (--precondition)"


def test_a_drift_survives_the_widest_noise_and_a_missing_ci():
    drift = ("drifts -5.0% over its 3 trials", "do x")
    hist = spread_noise(0.03, 6)
    got = combine(trials_noise(100.0, 99.0, 101.0, 3, drift=drift), hist)
    assert got.drift == drift[0] and got.rel_half_width == pytest.approx(hist.rel_half_width)
    only = trials_noise(None, None, None, None, drift=drift)
    assert only is not None and only.basis == "drift"
    assert combine(only, hist).drift == drift[0] and combine(only, hist).basis == "history"
    assert judge(1.0, None, only).word == INCONCLUSIVE
    assert judge(1.0, hist, hist).word == WITHIN


def test_the_history_check_and_the_plateau_read_the_drift():
    vals = [1000.0, 1002.0, 998.0]
    assert repeat_check(vals, [1001.0], 20.0).word == WITHIN
    chk = repeat_check(vals, [1001.0], 20.0, drift=("drifts -4.0% over its 3 trials", "do y"))
    assert chk.word == INCONCLUSIVE and "drifts -4.0%" in chk.judgement.why and not chk.beyond_noise
    tn = FigureNoise(0.01, "trials", 3, "trials", 2)
    drifting = with_drift(tn, ("drifts -6.0% over its 3 trials", "do z"))
    pl, _ = measured_plateau([(4.0, 1000.0, 20.0, tn), (8.0, 999.0, 20.0, drifting)], prefer="lowest")
    assert 8.0 not in pl.values  # a drifting level is never within noise of the best
    assert 8.0 in pl.inconclusive and "drifts -6.0%" in pl.judgements[8.0].why
