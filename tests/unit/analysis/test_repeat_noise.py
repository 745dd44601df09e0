"""An interval stands for the variation a repeat of the run would see. Ground truth: pairs of runs of
ONE configuration drawn from a known process — each run lands in a slow state of the server (a
factor ``exp(N(0, sd_between))`` its trials share), each trial adds its own ``exp(N(0, sd_within))``
— so every "beyond noise" between two runs is false. A 95% interval should err about 1 in 20;
built from the trials alone it errs far more often (they share the run's slow state), counted with
the run-to-run part (the history's spread, or without one the stated floor) it does not. The pairs
go through ``compare`` itself: trials blocks as the run writes them (``metrics.trials.trial_interval``)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.fakes.results_factory import make_level, make_result
from wattbench.analysis.compare import compare
from wattbench.core.schema import TrialsBlock
from wattbench.metrics.figure_noise import RUN_TO_RUN_FLOOR_REL_SD, spread_noise
from wattbench.metrics.trials import trial_interval

KEY = "output_tokens_per_s_per_kw@accelerator"
TRIALS = 5
PAIRS = 400
SD_WITHIN = 0.01  # one trial's own noise


def _run(name: str, rng, sd_between: float):
    """One run: its slow state, shared by its five trials, and the trials block the run writes."""
    state = math.exp(rng.normal(0.0, sd_between))
    values = [1000.0 * state * math.exp(rng.normal(0.0, SD_WITHIN)) for _ in range(TRIALS)]
    c = trial_interval(values)
    block = TrialsBlock.model_validate({"n": TRIALS, "figures": {KEY: {
        "mean": c["mean"], "ci_low": c["ci95_low"], "ci_high": c["ci95_high"], "n": TRIALS, "values": values}}})
    lv = make_level(0, value=8, output_tokens_per_s=c["mean"] * 0.6, power_w=600.0)
    lv.trials = block
    return make_result(name, levels=[lv])


def _false_beyond_rate(rng, sd_between: float, history=None, trials_alone: bool = False) -> float:
    beyond = 0
    for _ in range(PAIRS):
        a, b = _run("a", rng, sd_between), _run("b", rng, sd_between)
        if trials_alone:  # what the rule was: the trials' interval alone (a history narrower than any)
            n = compare([a, b], history=lambda r, lv, f: spread_noise(1e-9, 50)).levels[0].decompositions[0].noise
        else:
            n = compare([a, b], history=history).levels[0].decompositions[0].noise
        beyond += n.word == "beyond noise"
    return beyond / PAIRS


def test_without_history_the_floor_keeps_false_beyond_noise_near_one_in_twenty():
    """A slow state that moves a run by the floor's sd (2.3%): the trials' own interval (±1.2%
    from 5 trials of 1%) calls 60% of the pairs of one configuration different (239 of 400 with this
    seed); with the floor counted, 6.75% (27 of 400; 1 in 20 within the sampling error of 400 pairs)."""
    rng = np.random.default_rng(11)
    alone = _false_beyond_rate(rng, RUN_TO_RUN_FLOOR_REL_SD, trials_alone=True)
    floor = _false_beyond_rate(rng, RUN_TO_RUN_FLOOR_REL_SD)
    assert alone > 0.25, alone
    assert floor <= 0.08, floor  # 95%: 1 in 20, plus two standard errors of a rate from 400 pairs


def test_with_a_history_its_run_to_run_spread_counts_for_a_wider_slow_state():
    """A slow state of 5% (wider than the floor): the history of this configuration (40 earlier runs
    of the same process, their spread measured as the store does: sd of ln figure) counts, and the
    false rate is about 1 in 20 again (5.5%, 22 of 400 with this seed); the floor alone would not
    hold it (37.5%)."""
    rng = np.random.default_rng(12)
    sd_between = 0.05
    earlier = [np.log(_run("h", rng, sd_between).levels[0].trials.figures[KEY].mean) for _ in range(40)]
    s = float(np.std(earlier, ddof=1))
    assert s == pytest.approx(0.05, rel=0.25)  # what the history measured of the process
    with_history = _false_beyond_rate(rng, sd_between, history=lambda r, lv, f: spread_noise(s, 40))
    floor_only = _false_beyond_rate(rng, sd_between)
    assert with_history <= 0.08, with_history
    assert floor_only > with_history and floor_only > 0.10, floor_only
