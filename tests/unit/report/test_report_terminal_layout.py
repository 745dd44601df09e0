"""The run summary in a terminal: readable at 80 columns (short level labels, one figure
per cell, more tables instead of truncated cells), one wide table at 160, every note said once, the
SLO's goodput, the trials' means and CIs, and what --optimize / --sweep auto chose."""

import re

import pytest
from rich.console import Console

from wattbench.core.numbers import fmt, fmt_fraction_pct
from wattbench.report import summary as S
from wattbench.report.labels import short_label
from wattbench.report.notes import run_notes
from wattbench.report.tables import serving_figures
from wattbench.report.data import RunData
from wattbench.report.markdown import render_markdown
from wattbench.report.terminal import run_summary
from wattbench.core.schema import SearchOutcome, TrialsBlock


def render(renderable, width):
    c = Console(record=True, width=width, color_system=None, file=open("/dev/null", "w"))
    c.print(renderable)
    return c.export_text()


def row(out: str, label: str) -> list[str]:
    """Every table row of a level (one per table), split into cells."""
    return [line.split() for line in out.splitlines() if re.match(rf"^{re.escape(label)}\s", line)]


def cells_of(out: str, label: str) -> list[str]:
    return [c for r in row(out, label) for c in r[1:]]


@pytest.fixture(scope="module")
def result(report_run_dir):
    return RunData(report_run_dir).result


def test_short_level_labels(result):
    assert [short_label(lv) for lv in result.levels][:2] == ["c=1", "c=4"]
    lv = result.levels[0].model_copy(deep=True)
    lv.load.mode, lv.load.target_rate_rps, lv.label = "rate", 4.0, "rate=4 prefill-heavy"
    assert short_label(lv) == "r=4/s prefill-heavy"
    lv.load.target_rate_rps, lv.label = float("inf"), "rate=inf"
    assert short_label(lv) == "r=inf"


@pytest.mark.parametrize("width", [80, 160])
def test_every_figure_in_its_own_cell_without_truncation(result, width):
    out = render(run_summary(result), width)
    assert "…" not in out  # nothing cut short
    assert max(len(line.rstrip()) for line in out.splitlines()) <= width
    for lv in result.levels[:2]:  # (the third level's label is an injection test, folded over lines)
        cells = cells_of(out, short_label(lv))
        assert cells[0] == lv.validity.verdict
        assert f"{lv.requests.completed}/{lv.requests.failed}" in cells
        for v in (lv.throughput.output_tokens_per_s, lv.latency.ttft_ms.p50, lv.latency.ttft_ms.p99,
                  lv.latency.tpot_ms.p50):
            assert fmt(v) in cells
        for b in ("accelerator", "node"):
            e = lv.energy[b]
            for v in (e.avg_power_w, e.output_tokens_per_s_per_kw, e.j_per_output_token):
                assert fmt(v) in cells, (b, v)
        g = lv.goodput
        assert fmt_fraction_pct(g.fraction) in cells
        assert fmt(g.per_kw_at("accelerator")) in cells


def test_narrow_splits_wide_does_not(result):
    r = result.model_copy(deep=True)
    r.levels[2].label = "concurrency=16"  # (the fake's third label is an injection test, 50 characters long)
    narrow, wide = render(run_summary(r), 80), render(run_summary(r), 160)
    assert len(row(narrow, "c=1")) >= 2  # the level column repeated in each narrower table
    # one wide table at 160 (SLO columns and two boundaries), then the requests-and-latency table
    assert len(row(wide, "c=1")) == 2 and row(wide, "c=1")[0][1] == r.levels[0].validity.verdict
    head = [x for x in wide.splitlines() if x.startswith("level")][0]
    assert "verdict" in head and "ok/fail" in head
    assert "accel" in wide and "node" in wide


def test_every_note_said_once(result):
    out = render(run_summary(result), 80)
    flat = " ".join(out.split())
    assert flat.count("node: window not covered by samples 3.0%") == 1
    assert flat.count("server batches stream output") == 1
    assert out.count("verdict: invalid") == 1


def test_run_reason_naming_a_level_is_not_repeated(result):
    r = result.model_copy(deep=True)
    reason = "load generator saturated: client event loop lag p99 9.1 ms > 2 ms"
    r.levels[0].validity.reasons = [reason]
    r.validity.reasons = [f"concurrency=1: warn: {reason}"]
    notes = run_notes(r)
    assert sum(reason in n for n in notes) == 1


def test_slo_shown_in_title_and_cells(result):
    out = render(run_summary(result), 160)
    assert "SLO ttft_p99=120ms,tpot_p99=20ms" in out
    assert "met SLO" in " ".join(out.split()) or "met" in out
    # the level where most requests broke the SLO reads "missed", not just its verdict
    lv = result.levels[2]
    assert lv.goodput.all_met is False and "missed" in out


def test_trials_mean_and_ci(result):
    r = result.model_copy(deep=True)
    lv = r.levels[1]
    lv.trials = TrialsBlock.model_validate({"n": 3, "confidence": 0.95, "figures": {
        "output_tokens_per_s": {"mean": 1000.0, "ci_low": 980.0, "ci_high": 1020.0, "n": 3},
        "output_tokens_per_s_per_kw@node": {"mean": 2500.0, "ci_low": 2400.0, "ci_high": 2600.0, "n": 3},
        "j_per_output_token@node": {"mean": 0.5, "ci_low": 0.45, "ci_high": 0.55, "n": 3},
        "ttft_p99_ms": {"mean": 88.0, "ci_low": 80.0, "ci_high": 96.0, "n": 3},
    }})
    for width in (80, 160):
        out = render(run_summary(r), width)
        assert "mean and 95% CI over 3 trials" in out
        assert "last of 3 trials (means and 95% CIs below)" in out  # the level table says whose figures
        assert "…" not in out
        cells = cells_of(out, "c=4")
        for txt in ("1,000", "980–1,020", "2,500", "2,400–2,600", fmt(0.5), "0.45–0.55", "88", "80–96"):  # ±8: one digit of the half-width
            assert txt in cells, (width, txt)
    md = render_markdown([_Run(r)])
    assert "980–1,020" in md and "2,400–2,600" in md


class _Run:
    """A RunData stand-in holding an in-memory result (Markdown reads only .result and .notes)."""

    def __init__(self, result):
        self.result, self.notes = result, []


def test_optimize_and_sweep_say_what_and_why(result):
    r = result.model_copy(deep=True)
    r.optimize = SearchOutcome.model_validate({"objective": "goodput_per_kw", "best_value": 4, "knee_value": None,
                           "reason": "best of 3 measured levels out of 9 candidates",
                           "measured_values": [1, 4, 16], "scores": [700.0, 1500.0, None], "ladder_size": 9})
    out = " ".join(render(run_summary(r), 80).split())
    assert ("optimize: chose c=4 — highest goodput_per_kw (1,500) meeting ttft_p99=120ms,tpot_p99=20ms; "
            "best of 3 measured levels out of 9 candidates (measured: c=1, c=4, c=16 ") in out
    r.optimize = None
    r.sweep = SearchOutcome.model_validate({"best_value": None, "knee_value": 1, "measured_values": [1, 4],
                        "reason": "throughput grew +3.0% from 1 to 4 (< 10%)"})
    out = " ".join(render(run_summary(r), 80).split())
    assert "sweep auto: stopped at c=4 — throughput grew +3.0% from 1 to 4 (< 10%); knee at c=1" in out


def test_best_level_under_the_slo(result):
    met = [lv for lv in result.levels if lv.goodput.all_met and lv.validity.verdict != "invalid"]
    # the headline boundary (results.headline): node (measured, the outer one) before the accelerator
    want = max(met, key=lambda lv: lv.goodput.per_kw_at("node"))
    lv, line = S.best_under_slo(result)
    assert lv is want and line.startswith(f"best under SLO ttft_p99=120ms,tpot_p99=20ms: {short_label(want)} — ")
    assert fmt(want.goodput.per_kw_at("node")) in line
    assert line in " ".join(render(run_summary(result), 80).split())
    r = result.model_copy(deep=True)
    for x in r.levels:
        x.goodput.all_met = False
    assert S.best_under_slo(r) == (None, "best under SLO ttft_p99=120ms,tpot_p99=20ms: no level met it")
    r.optimize = SearchOutcome.model_validate({"objective": "goodput_per_kw", "best_value": 16, "measured_values": [16], "reason": "x"})
    assert S.best_under_slo(r)[0] is r.levels[2]  # --optimize's choice is the answer when it ran


def test_the_figures_of_other_load_generators_at_80_and_160_columns(result):
    """E2E, ITL, requests/s, the window, the achieved load and each latency's mean, p50 and p99 —
    what users of vllm bench serve, AIPerf and GuideLLM look for — at 80 columns, p90 and p95 too
    at 160; every line fits its width."""
    for width, stats in ((80, ("mean", "p50", "p99")), (160, ("mean", "p50", "p90", "p95", "p99"))):
        out = render(run_summary(result), width)
        assert max(len(line.rstrip()) for line in out.splitlines()) <= width and "…" not in out
        heads = " ".join(out.split())
        for kind in ("TTFT", "TPOT", "ITL", "E2E"):
            assert kind in heads
        for lv in result.levels[:2]:
            cells = cells_of(out, short_label(lv))
            for kind in ("ttft", "tpot", "itl", "e2e"):
                st = getattr(lv.latency, f"{kind}_ms")
                for stat in stats:
                    assert fmt(getattr(st, stat)) in cells, (width, kind, stat)
            assert fmt(lv.throughput.requests_per_s) in cells
            assert fmt(lv.throughput.duration_s) in cells
            assert fmt(lv.load.mean_in_flight, kind="load") in cells
    f = serving_figures(result.levels[1])
    assert f["e2e_p95_ms"] == pytest.approx(result.levels[1].latency.e2e_ms.p95, rel=1e-12)
    assert f["requests_per_s"] == pytest.approx(result.levels[1].throughput.requests_per_s, rel=1e-12)


def test_the_figures_come_before_the_prose(result):
    """The answer and the verdicts, then the tables, then the notes and the glossary's pointer: a
    reader at 80 columns meets the figures right after the answer."""
    r = result.model_copy(deep=True)
    r.levels[2].label = "concurrency=16"
    lines = render(run_summary(r), 80).splitlines()
    at = {name: next(i for i, x in enumerate(lines) if x.startswith(name))
          for name in ("answer: ", "verdict: ", "level ", "! ", "what each term means")}
    assert at["answer: "] < at["verdict: "] < at["level "] < at["! "] < at["what each term means"]
    assert not any(x.startswith(("! ", "- ", "✗ ")) for x in lines[:at["level "]])
    assert lines[-1] == "what each term means: wattbench report --glossary"


def test_the_title_folds_at_its_separators(result):
    """At 80 columns the title folds between its parts, never inside one (``SLO`` beside its
    objectives); at 160 it is one line."""
    narrow = render(run_summary(result), 80).splitlines()
    wide = render(run_summary(result), 160).splitlines()
    assert wide[0].startswith("wattbench run-report-fake · ") and "SLO ttft_p99=120ms,tpot_p99=20ms" in wide[0]
    title = narrow[:narrow.index(next(x for x in narrow if x.startswith("answer: ")))]
    assert len(title) == 2 and title[1].startswith("  ")
    assert " · ".join(x.strip() for x in title) == wide[0].rstrip()
    assert any(x.strip().endswith("SLO ttft_p99=120ms,tpot_p99=20ms") for x in title)
