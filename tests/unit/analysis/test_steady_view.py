"""``analysis.figures.steady_view`` and goodput per kW, against ground truth: a level accounted from
request records and an energy counter whose every figure is known by hand (``account_level``), read
in its steady-state window. Every window-dependent figure — energy, token rates, goodput — must be
the steady window's, so per kW = throughput ÷ power holds there too; goodput per kW is one rule
(the good share of the output tokens × the window's tokens/s per kW) in every command."""

from __future__ import annotations

import pytest

from tests.fakes.results_factory import make_result
from tests.fakes.scripted_sensor import build_log, counter_channel, grid
from wattbench.accounting.level import LevelContext, account_level
from wattbench.analysis.compare import compare
from wattbench.analysis.regress import regress
from wattbench.analysis.figures import goodput_per_kw, reported_figures, ranked_figures, steady_trials_note, steady_view
from wattbench.core.load_types import LevelOutcome, LevelSpec
from wattbench.core.schema import LoadStats, RequestRecord, TrialsBlock
from wattbench.metrics.slo import good_output_share, goodput, parse_slos
from wattbench.results.headline import trial_ci
from wattbench.run.analyses import trials_block

S = 1_000_000_000
SLO = "ttft_p50=200ms"  # the level meets it (its median TTFT is 100 ms); r2 alone does not
# (sent, first token, end) s and output tokens. The steady window is [2, 4] s: r1..r4 lie inside it
# (80 tokens), r0 and r5 outside (20 tokens); r2's first token comes 300 ms after it was sent, so it
# misses the SLO: the good share of the output tokens is 80 / 100.
REQUESTS = [(1.0, 1.1, 1.9, 10), (2.0, 2.1, 2.45, 20), (2.5, 2.8, 2.95, 20), (3.0, 3.1, 3.45, 20),
            (3.5, 3.6, 3.95, 20), (4.05, 4.15, 4.9, 10)]
SHARE = 0.8


def _records() -> list[RequestRecord]:
    out = []
    for i, (sent, first, end, n) in enumerate(REQUESTS):
        chunks = [int((first + (end - 0.01 - first) * k / (n - 1)) * S) for k in range(n)]
        out.append(RequestRecord(id=i, level=0, sent_ns=int(sent * S), first_token_ns=chunks[0],
                                 last_token_ns=chunks[-1], end_ns=int(end * S), chunk_ns=chunks, output_tokens=n,
                                 input_tokens=20))
    return out


def _counter(outside_w: float, inside_w: float):
    """An exact energy counter: ``outside_w`` before 2 s and after 4 s, ``inside_w`` between."""
    def joules(t: float) -> float:
        if t < 2.0:
            return outside_w * t
        if t < 4.0:
            return outside_w * 2.0 + inside_w * (t - 2.0)
        return outside_w * 2.0 + inside_w * 2.0 + outside_w * (t - 4.0)
    ts = grid(0.0, 6.0, 0.05)
    return build_log((counter_channel("c"), ts, [joules(float(t)) for t in ts]))


def _level(outside_w: float = 300.0, inside_w: float = 500.0):
    out = LevelOutcome(records=_records(), start_ns=1 * S, end_ns=5 * S, steady_start_ns=2 * S, steady_end_ns=4 * S,
                       load=LoadStats(mode="concurrency", target_concurrency=2))
    ctx = LevelContext(log=_counter(outside_w, inside_w), slos=parse_slos(SLO))
    return account_level(0, LevelSpec(index=0, mode="concurrency", value=2, num_requests=6), out, ctx, "usage")


def test_the_accounted_level_is_what_the_hand_says():
    lv = _level()
    e, es = lv.energy["accelerator"], lv.energy_steady["accelerator"]
    assert lv.throughput.output_tokens_per_s == pytest.approx(100 / 4.0)
    assert e.avg_power_w == pytest.approx(400.0) and es.avg_power_w == pytest.approx(500.0)
    assert e.output_tokens_per_s_per_kw == pytest.approx(25.0 / 0.4)
    assert es.output_tokens_per_s_per_kw == pytest.approx(40.0 / 0.5)  # 80 tokens in 2 s at 500 W
    assert lv.goodput.good_output_share == pytest.approx(SHARE)
    assert good_output_share(lv.goodput, lv.throughput) == pytest.approx(SHARE)
    # the stored full-window goodput per kW is the rule: the share of the window's tokens/s per kW
    assert lv.goodput.per_kw_at("accelerator") == pytest.approx(SHARE * e.output_tokens_per_s_per_kw, rel=1e-6)


def test_the_steady_view_reads_every_window_figure_in_the_steady_window():
    lv = _level()
    v = steady_view(lv)
    assert v is not None and lv.energy["accelerator"].avg_power_w == pytest.approx(400.0)  # the input unchanged
    h = reported_figures(v, "accelerator")
    assert h["output_tokens_per_s"] == pytest.approx(40.0)  # not the full window's 25
    assert h["avg_power_w"] == pytest.approx(500.0)
    assert h["output_tokens_per_s_per_kw"] == pytest.approx(h["output_tokens_per_s"] / (h["avg_power_w"] / 1000))
    assert h["goodput_per_kw"] == pytest.approx(SHARE * 80.0)  # the old view kept the full window's 50
    assert h["goodput_output_tokens_per_s"] == pytest.approx(SHARE * 40.0)
    assert v.throughput.duration_s == pytest.approx(2.0) and v.throughput.output_tokens == 80
    assert h["ttft_p99_ms"] == reported_figures(lv, "accelerator")["ttft_p99_ms"]  # latencies stay the level's
    assert steady_view(_level().model_copy(update={"energy_steady": {}})) is None


def test_a_steady_comparison_decomposes_exactly_and_at_slo_reads_the_steady_goodput():
    a, b = make_result("a", levels=[_level(300.0, 500.0)]), make_result("b", levels=[_level(200.0, 400.0)])
    a.config.slo = b.config.slo = SLO
    full, steady = compare([a, b]), compare([a, b], window="steady")
    for cmp, power_ratio in ((full, 300.0 / 400.0), (steady, 400.0 / 500.0)):
        d = cmp.levels[0].decompositions[0]
        assert d.power_ratio == pytest.approx(power_ratio)
        assert d.throughput_ratio == pytest.approx(1.0)
        assert d.per_kw_ratio == pytest.approx(d.throughput_ratio / d.power_ratio)
    at = steady.at_slo
    assert at.goodput_per_kw == pytest.approx([SHARE * 80.0, SHARE * 100.0])
    assert at.avg_power_w == pytest.approx([500.0, 400.0])
    assert at.goodput_tokens_per_s == pytest.approx([SHARE * 40.0, SHARE * 40.0])
    assert at.ratio[0] == pytest.approx(at.throughput_ratio[0] / at.power_ratio[0])  # "throughput T× ÷ power P×"


def test_recomputed_goodput_under_another_slo_is_the_same_rule():
    """``--at-slo`` under an SLO the runs did not carry recomputes the share from the requests and
    applies it to the window's figures: the full window's and the steady window's."""
    a, b = make_result("a", levels=[_level(300.0, 500.0)]), make_result("b", levels=[_level(200.0, 400.0)])
    records = {"a": _records(), "b": _records()}
    share = goodput(_records(), parse_slos("ttft_p50=250ms"), 4.0).good_output_share
    assert share == pytest.approx(SHARE)  # r2 (300 ms) still misses
    for window, per_kw in (("full", [62.5, 25.0 / 0.3]), ("steady", [80.0, 100.0])):
        at = compare([a, b], window=window, at_slo="ttft_p50=250ms",
                     records=lambda r, lv: records[r.run_id]).at_slo
        assert at.goodput_per_kw == pytest.approx([SHARE * x for x in per_kw])
    loose = goodput(_records(), parse_slos("ttft_p50=1000ms"), 4.0).good_output_share
    assert loose == pytest.approx(1.0)


def test_goodput_per_kw_applies_the_rule_where_the_block_lacks_the_boundary_and_never_outside_the_work():
    lv = _level()
    del lv.goodput.per_kw["accelerator"]
    assert goodput_per_kw(lv, "accelerator") == pytest.approx(SHARE * 62.5)
    lv.energy["accelerator"].output_tokens_per_s_per_kw = None  # a boundary without per-token figures
    assert goodput_per_kw(lv, "accelerator") is None
    assert ranked_figures(lv, "accelerator", has_slo=True)["goodput_per_kw"] is None


def test_trials_keep_their_steady_figures_and_an_older_file_reads_them_without_a_ci():
    trials = [_level(300.0, 500.0), _level(300.0, 520.0), _level(300.0, 480.0)]
    lv = trials[-1].model_copy(deep=True)
    lv.trials = TrialsBlock.model_validate(trials_block(trials))
    steady_per_kw = [40.0 / (w / 1000.0) for w in (500.0, 520.0, 480.0)]
    fs = lv.trials.figures_steady["output_tokens_per_s_per_kw@accelerator"]
    assert fs.values == pytest.approx(steady_per_kw)
    v = steady_view(lv)
    h = reported_figures(v, "accelerator")
    assert h["output_tokens_per_s_per_kw"] == pytest.approx(sum(steady_per_kw) / 3)
    assert h["goodput_per_kw"] == pytest.approx(SHARE * sum(steady_per_kw) / 3)
    assert trial_ci(v, "output_tokens_per_s_per_kw", "accelerator").mean == pytest.approx(sum(steady_per_kw) / 3)
    assert steady_trials_note(make_result("r", levels=[lv])) is None
    # written before the steady figures were kept: the last trial's steady figure, no CI; the rest as
    # before, and compare --window steady says why its noise is unknown
    lv.trials.figures_steady = {}
    assert "concurrency=2 kept no steady-window figures" in steady_trials_note(make_result("r", levels=[lv]))
    other = make_result("o", levels=[trials[0].model_copy(deep=True)])
    other.levels[0].trials = lv.trials
    cmp = compare([make_result("r", levels=[lv]), other], window="steady")
    assert sum("kept no steady-window figures" in w for w in cmp.warnings) == 2
    rep = regress(make_result("r", levels=[lv]), other, "output_tokens_per_s_per_kw:-1%", window="steady")
    assert rep.todo is not None and rep.todo.startswith("run o: the trials of concurrency=2 kept no steady")  # baseline first
    assert "run r: the trials" in rep.todo
    old = steady_view(lv)
    assert reported_figures(old, "accelerator")["output_tokens_per_s_per_kw"] == pytest.approx(40.0 / 0.48)
    assert trial_ci(old, "output_tokens_per_s_per_kw", "accelerator") is None
    assert trial_ci(old, "ttft_p99_ms", None) is not None


def test_a_steady_comparison_counts_the_historys_run_to_run_noise_too():
    """The history keeps full-window figures; a steady window of the same runs varies at least as
    much from run to run, so a steady comparison counts the history's noise as the wider of its two
    bases (``metrics.figure_noise.combine``), never judging on its trials alone: on the H200 that would have
    read a 1.29x of the engine's defaults as beyond noise where the full window was inconclusive."""
    a, b = make_result("a", levels=[_level(300.0, 500.0)]), make_result("b", levels=[_level(200.0, 400.0)])
    wide = lambda result, level, figure: (0.2, 3)  # ±20% run to run over 3 runs  # noqa: E731
    for window in ("full", "steady"):
        d = compare([a, b], window=window, history=wide).levels[0].decompositions[0]
        assert d.noise.basis == "history" and d.noise.word == "inconclusive"
