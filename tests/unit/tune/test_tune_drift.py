"""Tune's plateau reads a configuration's drift (``tune/score.plateau`` through ``metrics/noise``): a
configuration whose objective drifted over its trials is never within noise of the best one, and
says why; ``trial_figures`` records the drift of each objective."""

from __future__ import annotations

import pytest

from wattbench.core.schema import FigureTrend, LevelResult, Stationarity
from wattbench.results.tune import TrialRecord, TuneResult
from wattbench.tune.score import trial_figures, plateau


def _tune(drift_b: list[str] | None) -> TuneResult:
    fig_b = {"window_s": 20.0, **({"drift": {"goodput_per_kw": drift_b}} if drift_b else {})}
    trials = [TrialRecord(index=0, score=1000.0, figures={"window_s": 20.0}),
              TrialRecord(index=1, score=999.0, figures=fig_b)]
    return TuneResult(tune_id="t", created_at="now", engine="vllm", objective="goodput_per_kw", trials=trials)


def test_a_drifting_configuration_is_not_on_the_plateau():
    pl, _ = plateau(_tune(None))
    assert pl.values == pytest.approx([0.0, 1.0], abs=1e-12)  # 0.1% apart on the single-level bound: within noise
    pl, _ = plateau(_tune(["drifts -9.0% over its 3 trials (GPU temperature 60→80 °C)", "precondition"]))
    assert pl.values == pytest.approx([0.0], abs=1e-12) and pl.inconclusive == pytest.approx([1.0], abs=1e-12)
    assert "drifts -9.0% over its 3 trials" in pl.judgements[1.0].why


def test_level_figures_record_each_objectives_drift():
    lv = LevelResult(index=0, label="concurrency=8")
    lv.stationarity = Stationarity(trials=3, cause="c", todo="t", trends=[FigureTrend(
        figure="output_tokens_per_s_per_kw", boundary="accelerator", change_pct=-9.0, trials_change_pct=-9.0,
        moves=True, drifting=True)])
    f = trial_figures(lv, "accelerator", False)
    assert f.drift["output_tokens_per_s_per_kw"] == ("drifts -9.0% over its 3 trials (c)", "t")
    assert set(f.drift) == {"goodput_per_kw", "output_tokens_per_s_per_kw", "j_per_output_token"}
    lv.stationarity = None
    assert trial_figures(lv, "accelerator", False).drift == {}
