"""A drift of one side in ``wattbench ab`` (``analysis/ab.py`` "A drift of one side",
``metrics/paired.py``): the pairs cancel a drift both sides share, so a common drift stays judged;
a drift of one side moves the pairs' ratios, so the answer is inconclusive, names the side, and
``--precision``'s stop rule never counts it as reached. Synthetic pairs give the ground truth; the
committed H100 runs give the case that found it."""

from __future__ import annotations

import math
import random
import tarfile
from pathlib import Path

import pytest

from wattbench.analysis.ab import paired_compare, paired_level
from wattbench.core.schema import PairedLevel, Preconditioning, Result
from wattbench.metrics.precision import REACHED, auto_stop
from wattbench.metrics.paired import BLOCK, paired_ratio, precise_enough, precision

RUNS = Path(__file__).resolve().parents[3] / "docs/validation-data/h100-decisive-defaults-drift-2026-12-07/runs.tgz"
TRUE_RATIO = 1.10
PAIRS = 16
SLOT_S = 20.0  # each trial's slot: pair k's members sit in block k // 2, A B B A


def _pairs(drift_a: float, drift_b: float, sd: float = 0.01, seed: int = 7) -> PairedLevel:
    """16 pairs in A B B A blocks: B = TRUE_RATIO × A's per-kW figure, each side's figure moving
    linearly by ``drift_*`` over the whole run (0.2: +20%), each trial with ``sd`` log noise."""
    rng = random.Random(seed)
    slots = {"A": [], "B": []}  # type: dict[str, list[float]]
    for i, side in enumerate(BLOCK * (PAIRS // 2)):
        slots[side].append(i * SLOT_S)
    end = (len(BLOCK) * PAIRS // 2 - 1) * SLOT_S
    fig = {}
    for side, drift, base in (("A", drift_a, 3300.0), ("B", drift_b, 3300.0 * TRUE_RATIO)):
        fig[side] = [base * (1 + drift * t / end) * math.exp(rng.gauss(0.0, sd)) for t in slots[side]]
    return PairedLevel(key="c=16", label="concurrency=16", index=0, boundary="accelerator",
                       a_tokens_per_s=[x * 0.4 for x in fig["A"]], b_tokens_per_s=[x * 0.4 for x in fig["B"]],
                       a_power_w=[400.0] * PAIRS, b_power_w=[400.0] * PAIRS, a_per_kw=fig["A"], b_per_kw=fig["B"],
                       a_time_s=slots["A"], b_time_s=slots["B"])


def test_a_drift_common_to_both_sides_cancels_and_is_judged():
    lv = _pairs(0.20, 0.20)
    ans = paired_level(lv, precision_pct=2.0)
    assert ans.noise.word == "beyond noise", ans.answer
    assert ans.decomposition.per_kw_ratio == pytest.approx(TRUE_RATIO, rel=0.02)
    k = paired_ratio(lv.a_per_kw, lv.b_per_kw, lv.a_time_s, lv.b_time_s)
    assert k is not None and k.trend is not None and not k.drifts
    assert precise_enough(k, 2.0)  # a common drift leaves a precise ratio: the stop rule may stop


def test_one_side_drifting_is_inconclusive_and_names_the_side():
    lv = _pairs(0.0, 0.20)
    ans = paired_level(lv, precision_pct=2.0)
    assert ans.noise.word == "inconclusive", ans.answer
    why = ans.noise.why
    assert why.startswith("B/A changes +") and "over the 16 pairs" in why
    assert "B drifts +" in why and "A holds" in why and "a drift of one side" in why
    assert "precondition B (--precondition)" in ans.noise.todo
    assert "beyond noise" not in ans.answer and "within noise" not in ans.answer
    # the ratio's own change over the pairs is about B's +20% (less the half slot of the block design)
    change = float(why.split("changes ")[1].split("%")[0])
    assert 12.0 < change < 28.0


def test_the_other_side_drifting_names_a():
    ans = paired_level(_pairs(-0.20, 0.0), precision_pct=None)
    assert ans.noise.word == "inconclusive" and "A drifts -" in ans.noise.why and "B holds" in ans.noise.why
    assert "precondition A" in ans.noise.todo


def test_what_to_do_reads_the_drifting_sides_precondition():
    lv = _pairs(0.0, 0.20)
    unsettled = Preconditioning(settled=False, duration_s=90.0, rounds=30, reason="not settled after 90 s (the limit)")
    settled = Preconditioning(settled=True, duration_s=75.0, rounds=25, reason="settled after 75 s (25 loads)")
    # B preconditioned, its limit reached unsettled: give it longer, not "precondition B"
    ans = paired_level(lv, precision_pct=2.0, preconditioned=(settled, unsettled))
    assert ans.noise.word == "inconclusive" and "B drifts +" in ans.noise.why
    assert ans.noise.todo.startswith("B's --precondition ended unsettled after 90 s: give it longer "
                                     "(--precondition-max), then measure again")
    assert "precondition B (--precondition)" not in ans.noise.todo
    # B settled and drifted anyway: warm it longer or repeat
    ans = paired_level(lv, precision_pct=2.0, preconditioned=(None, settled))
    assert ans.noise.todo.startswith("B drifted after --precondition settled it (75 s): warm it longer")
    # only A preconditioned: B, the drifting side, is told to be
    ans = paired_level(lv, precision_pct=2.0, preconditioned=(unsettled, None))
    assert ans.noise.todo.startswith("precondition B (--precondition)") and "A's" not in ans.noise.todo
    # the answer's words are the pairs' alone: the same with or without the records
    assert ans.answer == paired_level(lv, precision_pct=2.0).answer


def test_a_drifting_ratio_is_never_precise_enough_to_stop():
    lv = _pairs(0.0, 0.20, sd=0.001)  # a narrow interval: the width alone would count as reached
    k = paired_ratio(lv.a_per_kw, lv.b_per_kw, lv.a_time_s, lv.b_time_s)
    assert k is not None and k.drifts and k.rel_half_width is not None and k.rel_half_width < 0.10
    p = precision(k, 10.0)
    assert p.drifting and not p.met and p.needed is None
    # run/ab.py's stop rule: auto_stop over the levels' precision, a block standing for a round
    assert auto_stop([p], 8, max_trials=8) != REACHED
    assert auto_stop([p], 2, max_trials=8) is None  # another block is measured, not "reached"
    ans = paired_level(lv, precision_pct=10.0)
    assert "the ratio drifts" in ans.precision_line and "(asked" not in ans.precision_line


def test_too_few_pairs_for_a_trend_make_no_drift_call():
    lv = _pairs(0.0, 0.60)
    three = lv.model_copy(update={f: getattr(lv, f)[:3] for f in (
        "a_tokens_per_s", "b_tokens_per_s", "a_power_w", "b_power_w", "a_per_kw", "b_per_kw", "a_time_s", "b_time_s")})
    k = paired_ratio(three.a_per_kw, three.b_per_kw, three.a_time_s, three.b_time_s)
    assert k is not None and k.trend is not None and k.trend.low is None and not k.drifts
    assert "changes" not in paired_level(three, None).noise.why


@pytest.mark.skipif(not RUNS.exists(), reason=f"the H100 runs are not in this checkout: {RUNS}")
def test_the_committed_h100_runs_read_inconclusive_naming_bs_drift(tmp_path):
    # B's per-kW series drifts +18.9% (99%: +6.3 to +30.9%) over its 16 trials, A's holds; before,
    # the pairs' interval alone read "B/A per kW 1.06× (1.02–1.10), beyond noise"
    with tarfile.open(RUNS) as tf:
        for side in ("A", "B"):
            tf.extract(f"decisive/tuned-defaults/{side}/result.json", tmp_path)
    a, b = (Result.model_validate_json((tmp_path / f"decisive/tuned-defaults/{s}/result.json").read_text())
            for s in ("A", "B"))
    cmp = paired_compare(a, b)
    (lv,) = cmp.levels
    assert lv.noise.word == "inconclusive", lv.answer
    assert "B drifts +18.9% (+6.3% to +30.9%" in lv.noise.why and "A holds -0.3%" in lv.noise.why
    assert "beyond noise" not in lv.answer and lv.answer.startswith("c=16: B/A per kW 1.06×, inconclusive")
    assert "precondition B" in lv.noise.todo and cmp.todo == lv.noise.todo
