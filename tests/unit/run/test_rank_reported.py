"""``--optimize`` ranks levels on the figure its answer reports — the trials' mean under
``--trials`` — and recommends one level, the same in ``result.json``, the answer line, the search
line and the HTML's headline; ``tune`` reads a level by the same rule (``analysis.figures
.ranked_figures``). Before, ``run/plan.search_figures`` ranked on the last trial's energy, and with an
SLO the answer line named the search's best level while the text recommended another."""

from __future__ import annotations

import pytest

from tests.fakes.results_factory import make_level, make_result, trials_block
from wattbench.core.schema import Goodput
from wattbench.config.run import RunConfig
from wattbench.report import summary as S
from wattbench.report.labels import short_label
from wattbench.core.schema import TrialsBlock
from wattbench.run import plan
from wattbench.tune import score

KEY = "output_tokens_per_s_per_kw@accelerator"


def _level(value: float, last_per_kw: float, mean_per_kw: float, index: int = 0, slo: bool = False,
           half: float = 0.01):
    """A level of 3 trials at 700 W: its last trial reads ``last_per_kw``, the trials' mean
    ``mean_per_kw`` (± ``half``)."""
    lv = make_level(index=index, value=value, output_tokens_per_s=last_per_kw * 0.7, power_w=700.0,
                    goodput_rps=1.0 if slo else None)
    lv.trials = TrialsBlock.model_validate(trials_block({KEY: (mean_per_kw, half * mean_per_kw)}, n=3))
    if slo:
        e = lv.energy["accelerator"]
        lv.goodput = Goodput.model_validate({
            "requests_per_s": 1.0, "all_met": True, "output_tokens_per_s": e.output_tokens_per_s_per_kw * .7,
            "slos": [{"metric": "ttft", "stat": "p99", "threshold_ms": 10_000.0}],
            "per_kw": {"accelerator": {"output_tokens_per_s_per_kw": last_per_kw}}})
        lv.trials.figures["goodput_per_kw@accelerator"] = lv.trials.figures[KEY]
    return lv


# value -> (last trial, trials' mean): c=8's last trial is its best, its mean the lowest
TRUTH = {4: (1000.0, 1000.0), 8: (3000.0, 1200.0), 16: (1300.0, 2000.0)}


def _measure(result, slo=False, half=0.01):
    def measure(mode, value, *, output_tokens=None, input_tokens=None, label_suffix=""):
        last, mean = TRUTH[int(value)]
        lv = _level(value, last, mean, index=len(result.levels), slo=slo, half=half)
        lv.label += label_suffix
        result.levels.append(lv)
        return lv
    return measure


@pytest.mark.parametrize("objective", ["output_tokens_per_s_per_kw", "goodput_per_kw"])
def test_optimize_with_trials_ranks_and_recommends_on_the_trials_mean(objective):
    cfg = RunConfig(target="http://127.0.0.1:9", optimize=objective, concurrency=[4, 8, 16], trials=3)
    result = make_result(levels=[])
    plan.run_plan(cfg, result, _measure(result), [])
    opt = result.optimize
    assert opt.best_value == 16 and opt.recommended_value == 16, opt  # the last trial would pick 8
    assert opt.best_score == pytest.approx(2000.0, rel=1e-9)
    assert opt.plateau == [16] and set(opt.remeasured) == {16, 8}
    h = S.headline(result)
    assert short_label(h.level) == "c=16" and h.value == pytest.approx(2000.0, rel=1e-9)
    assert S.answer_line(result).startswith("answer: c=16 — 2,000 output tok/s per kW")


def test_the_level_figures_of_a_search_and_of_tune_are_the_trials_means():
    lv = _level(8, 3000.0, 1200.0)
    assert plan.search_figures(lv).output_tokens_per_s_per_kw == pytest.approx(1200.0, rel=1e-9)
    assert plan.search_figures(lv).goodput_per_kw == pytest.approx(1200.0, rel=1e-9)  # no SLO: every token good
    noise = plan.search_figures(lv).objective_noise["output_tokens_per_s_per_kw"]
    assert noise.basis == "trials" and noise.rel_half_width == pytest.approx(0.01, rel=1e-9)
    t = score.trial_figures(lv, None, has_slo=False)
    assert t.output_tokens_per_s_per_kw == pytest.approx(1200.0, rel=1e-9)
    assert t.goodput_per_kw == pytest.approx(1200.0, rel=1e-9)


def test_with_an_slo_the_answer_line_names_the_level_the_search_recommends():
    # c=16 and c=32 within noise of each other: the plateau recommends the lower load, c=16; before,
    # the answer line (and the HTML's headline) named the search's best, c=32
    global TRUTH
    saved = TRUTH
    TRUTH = {4: (1000.0, 1000.0), 16: (2000.0, 2000.0), 32: (2010.0, 2010.0)}
    try:
        cfg = RunConfig(target="http://127.0.0.1:9", optimize="goodput_per_kw", concurrency=[4, 16, 32], trials=3,
                        slo="ttft_p99=10000ms")
        result = make_result(levels=[], slo="ttft_p99=10000ms")
        plan.run_plan(cfg, result, _measure(result, slo=True), [])
    finally:
        TRUTH = saved
    opt = result.optimize
    assert opt.best_value == 32 and opt.plateau == [16, 32] and opt.recommended_value == 16, opt
    lines = S.answer_lines(result)
    assert lines[0].startswith("answer: c=16 — "), lines
    assert any(ln.startswith("optimize: recommends c=16") for ln in lines), lines
    assert S.headline(result).level.load.target_concurrency == 16  # what the HTML's big figure shows
    tr = score.result_figures(result, None, has_slo=True)
    assert tr[0] == "done" and tr[1].load_value == 16  # tune scores the configuration at its answer


def test_an_inconclusive_noise_is_never_a_plateau_the_best_is_recommended_and_it_says_so():
    # c=16 and c=32 0.5% apart, but their trials' CIs are ±40%: the noise cannot place them (a bound
    # over ±25%), so no plateau forms from them; the recommendation is the best score, c=32
    global TRUTH
    saved = TRUTH
    TRUTH = {4: (1000.0, 1000.0), 16: (2000.0, 2000.0), 32: (2010.0, 2010.0)}
    try:
        cfg = RunConfig(target="http://127.0.0.1:9", optimize="output_tokens_per_s_per_kw", concurrency=[4, 16, 32],
                        trials=3)
        result = make_result(levels=[])
        plan.run_plan(cfg, result, _measure(result, half=0.40), [])
    finally:
        TRUTH = saved
    opt = result.optimize
    assert opt.best_value == 32 and opt.recommended_value == 32 and opt.plateau == [32], opt
    assert "inconclusive" in opt.recommend_reason and "16" in opt.recommend_reason
    assert S.answer_line(result).startswith("answer: c=32 — ")
