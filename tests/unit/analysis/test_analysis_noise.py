"""compare and regress against the noise (``metrics/noise.py``): "within noise", the unknown-noise
hint, the history's spread, and ``--strict``; every interval below by hand."""

from __future__ import annotations

import math

import pytest

from tests.fakes.results_factory import make_level, make_result, trials_block
from wattbench.analysis.compare import compare
from wattbench.analysis.regress import regress


def _pair(tput_b, trials_a=None, trials_b=None):
    a = make_result("base", levels=[make_level(0, value=8, output_tokens_per_s=1000.0, power_w=600.0,
                                               trials=trials_a)])
    b = make_result("cand", levels=[make_level(0, value=8, output_tokens_per_s=tput_b, power_w=600.0,
                                               trials=trials_b)])
    return a, b


def _per_kw_trials(tput, hw_pct):
    per_kw = tput / 0.6
    return trials_block({"output_tokens_per_s_per_kw@accelerator": (per_kw, per_kw * hw_pct / 100),
                         "output_tokens_per_s": (tput, tput * hw_pct / 100),
                         "j_per_output_token@accelerator": (600.0 / tput, 600.0 / tput * hw_pct / 100)})


def test_compare_within_noise_from_trials_and_beyond_it():
    # +3% with ±5% on each side (wider than the run-to-run floor): w = 0.05·sqrt(2) = 0.07071,
    # interval 0.9597–1.1055 -> within
    a, b = _pair(1030.0, _per_kw_trials(1000.0, 5), _per_kw_trials(1030.0, 5))
    n = compare([a, b]).levels[0].decompositions[0].noise
    assert n.within is True and n.basis == "trials"
    assert n.low == pytest.approx(1.03 * math.exp(-0.0707107), rel=1e-5)
    assert n.text() == "per kW 1.03×: within noise (noise ±7.3% from within-run trials (5 trials, 4 df))"
    a, b = _pair(1100.0, _per_kw_trials(1000.0, 5), _per_kw_trials(1100.0, 5))
    n = compare([a, b]).levels[0].decompositions[0].noise
    assert n.within is False and n.low == pytest.approx(1.1 * math.exp(-0.0707107), rel=1e-5)


def test_trials_narrower_than_a_repeat_of_the_run_never_count_alone():
    # ±1% trials, no history: the run-to-run floor (z · 2.3% = 4.508% a side) counts, the sentence says
    # so; a 6% change: w = √2 · 0.04508 = 0.06375, interval 0.9945–1.1296 -> within (trials alone: beyond)
    a, b = _pair(1060.0, _per_kw_trials(1000.0, 1), _per_kw_trials(1060.0, 1))
    n = compare([a, b]).levels[0].decompositions[0].noise
    w = math.sqrt(2) * 1.959963984540054 * 0.023
    assert n.within is True and n.basis == "trials+floor"
    assert (n.low, n.high) == (pytest.approx(1.06 * math.exp(-w), rel=1e-5), pytest.approx(1.06 * math.exp(w), rel=1e-5))
    assert "run-to-run floor ±4.5% over the within-run trials' ±1.0%" in n.basis_text
    assert "trials inside one run share its slow state" in n.basis_text
    # 1% past the floor's edge reads beyond noise, 1% inside it within
    for off, word in ((1.01, "beyond noise"), (0.99, "within noise")):
        k = math.exp(w) * off
        a, b = _pair(1000.0 * k, _per_kw_trials(1000.0, 1), _per_kw_trials(1000.0 * k, 1))
        assert compare([a, b]).levels[0].decompositions[0].noise.word == word


def test_compare_takes_the_wider_of_trials_and_the_history_spread():
    # trials ±1% but the configuration's spread over 5 earlier runs is 3%: t(0.975, 4)·3% = 8.33%
    # per side, w = 0.1178; a 6% change is then within noise
    a, b = _pair(1060.0, _per_kw_trials(1000.0, 1), _per_kw_trials(1060.0, 1))
    seen = []

    def history(result, level, figure):
        seen.append((result.run_id, figure))
        return 0.03, 5
    n = compare([a, b], history=history).levels[0].decompositions[0].noise
    assert n.within is True and n.basis == "trials+history"
    assert n.high == pytest.approx(1.06 * math.exp(math.sqrt(2) * 2.776445 * 0.03), rel=1e-5)
    assert "wider than the within-run trials' ±1.0%: the trials share the run's slow state" in n.basis_text
    assert seen == [("base", "output_tokens_per_s_per_kw@accelerator"), ("cand", "output_tokens_per_s_per_kw@accelerator")]


def test_regress_gates_on_the_interval_against_the_limit_unless_strict():
    # J/token +11.1% (1000 -> 900 tok/s at the same power) against +5%, CIs ±3% each (the run-to-run
    # floor, 4.5% a side, counts): interval 1.1111·e^±0.06375 -> [+4.25%, +18.4%]: beyond noise (the
    # word compare says), its nearer end under the 5% limit and its far end over: inconclusive
    a, b = _pair(900.0, _per_kw_trials(1000.0, 3), _per_kw_trials(900.0, 3))
    o = regress(b, a, "j_per_output_token:+5%").outcomes[0]
    assert o.status == "inconclusive" and o.word == "beyond noise" and o.noise_basis == "trials+floor"
    assert o.bound == pytest.approx(1 / 0.9 * math.exp(-math.sqrt(2) * 1.959963984540054 * 0.023) - 1, rel=1e-9)
    assert "is wider than the 5% limit" in o.why  # ±6.6% > 5%
    # at a +20% limit the whole interval lies within it: a pass that says beyond noise
    o = regress(b, a, "j_per_output_token:+20%").outcomes[0]
    assert o.status == "pass" and o.within_noise is False and "beyond noise [+4.25%, +18.4" in o.message
    # a +3% change with ±3% each includes no change: within noise, but its interval reaches +10%:
    # inconclusive at +2%, never "passes within noise"; --strict judges the change itself: +3% fails
    a, b = _pair(1000.0 / 1.03, _per_kw_trials(1000.0, 3), _per_kw_trials(1000.0 / 1.03, 3))
    o = regress(b, a, "j_per_output_token:+2%").outcomes[0]
    assert o.status == "inconclusive" and o.within_noise is True and "within noise" not in o.message
    s = regress(b, a, "j_per_output_token:+2%", strict=True).outcomes[0]
    assert s.status == "fail" and s.miss == pytest.approx(0.01, abs=1e-9)  # the change itself, +3% vs 2%
    # no trials, no history: inconclusive, and the message says how to know the noise
    a, b = _pair(940.0)
    rep = regress(b, a, "j_per_output_token:+5%")
    o = rep.outcomes[0]
    assert o.status == "inconclusive" and o.within_noise is None and o.word == "inconclusive"
    assert "inconclusive: noise unknown" in o.message and "--trials" in rep.todo  # what to do: once, not per check


def _measured_trials(tputs: list[float]) -> dict:
    """The trials block the run builds (``run.analyses.trials_block``) from levels of these tokens/s
    at 600 W: per-kW intervals on the log scale."""
    from wattbench.run.analyses import trials_block as run_trials_block

    return run_trials_block([make_level(0, value=8, output_tokens_per_s=t, power_w=600.0) for t in tputs])


@pytest.mark.parametrize("off, word", [(1.01, "beyond noise"), (0.99, "within noise")])
def test_the_within_beyond_edge_reads_the_trials_log_interval(off, word):
    """B's trials are A's times k, so both per-kW intervals have one log half-width ``w`` (the run's
    own block, on the log scale) and the ratio of their means is k: the edge is k = e^(√2·w), and a
    ratio 1% past it is beyond noise, 1% inside it within: the edge cannot move by 1% unnoticed."""
    base = [1000.0, 1040.0, 1090.0]  # trials wider than the run-to-run floor: theirs is the noise
    logs = [math.log(x / 0.6) for x in base]
    m = sum(logs) / 3
    w = 4.302652729911275 * math.sqrt(sum((x - m) ** 2 for x in logs) / 2) / math.sqrt(3)
    k = math.exp(math.sqrt(2) * w) * off
    ta, tb = _measured_trials(base), _measured_trials([x * k for x in base])
    a, b = _pair(1000.0 * k, ta, tb)
    n = compare([a, b]).levels[0].decompositions[0].noise
    assert n.basis == "trials" and n.word == word
    # (the made levels count whole tokens: their per-kW figures are the tokens/s over 0.6 kW within 1e-5)
    assert n.low == pytest.approx(k * math.exp(-math.sqrt(2) * w), rel=1e-5)
    assert n.high == pytest.approx(k * math.exp(math.sqrt(2) * w), rel=1e-5)


def test_an_inconclusive_regress_check_says_what_would_resolve_its_own_limit():
    # two trials a side (1 df): inconclusive; what settles it is asked for the check's own +5%
    def two(tput):
        per_kw = tput / 0.6
        return trials_block({"output_tokens_per_s_per_kw@accelerator": (per_kw, per_kw * 0.02),
                             "j_per_output_token@accelerator": (600.0 / tput, 600.0 / tput * 0.02)}, n=2)

    a, b = _pair(980.0, two(1000.0), two(980.0))
    rep = regress(b, a, "j_per_output_token:+5%")
    o = rep.outcomes[0]
    assert o.word == "inconclusive" and o.status == "inconclusive"
    # the trials (±2%) are narrower than the run-to-run floor (z · 2.3% = 4.5% a side), which counts:
    # e^(sqrt(2) x 4.508%) - 1 = 6.6%, and what narrows it is runs — a history of 3 — not trials;
    # said on the check's line, at its own limit
    assert "the current noise resolves only effects beyond ±6.6%" in o.settle and o.settle in o.message
    assert "to resolve ±5%:" in o.settle and "2 more runs of the baseline (3 in all)" in o.settle
    assert "1 degree of freedom" in o.why
