"""Findings as typed data (accounting/findings.py): materiality, the two verdicts, the one grouping
every report renders, and older files' reason strings read as ``legacy`` findings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fakes.results_factory import make_level, make_result
from wattbench.accounting.findings import (
    EFFICIENCY_MATERIAL_PCT,
    LATENCY_MATERIAL_PCT,
    group_findings,
    judged,
    verdicts,
    worst,
)
from wattbench.accounting.level_findings import run_validity
from wattbench.report.notes import notes_full_lines, run_notes
from wattbench.core.schema import Finding, Result, Validity

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "results_v1"


def test_materiality_bounds_make_a_note_or_a_warn():
    assert (EFFICIENCY_MATERIAL_PCT, LATENCY_MATERIAL_PCT) == pytest.approx((1.0, 5.0), rel=1e-9)
    below = judged("loop_lag", "t", ("ttft",), 0.9, LATENCY_MATERIAL_PCT)
    at = judged("loop_lag", "t", ("ttft",), 5.0, LATENCY_MATERIAL_PCT)
    unknown = judged("loop_lag", "t", ("ttft",), None, LATENCY_MATERIAL_PCT)
    assert (below.severity, at.severity, unknown.severity) == ("note", "warn", "warn")
    assert (below.bound_pct, below.effect_pct) == pytest.approx((5.0, 0.9), rel=1e-9)


def test_a_level_has_an_efficiency_and_a_latency_verdict():
    lat = Finding(kind="loop_lag", severity="warn", figures=("ttft", "itl"), text="late stamps")
    eff = Finding(kind="coverage", severity="warn", figures=("energy", "efficiency"), text="gap")
    load = Finding(kind="rate", severity="warn", figures=("load",), text="rate off")
    v = verdicts([lat])
    assert (v.verdict, v.latency) == ("valid", "warn")
    v = verdicts([eff])
    assert (v.verdict, v.latency) == ("warn", "valid")
    v = verdicts([load])  # a level that did not offer its load: every figure describes another load
    assert (v.verdict, v.latency) == ("warn", "warn")
    inv = Finding(kind="no_completed", severity="invalid", figures=("efficiency", "ttft"), text="nothing")
    assert worst(verdicts([lat]), verdicts([inv])).verdict == "invalid"


def _optimize_like_result() -> Result:
    """Levels measured in the order an --optimize search takes them (16, 1, 2), one finding shared."""
    levels = [make_level(i, value=v) for i, v in enumerate((16, 1, 2))]
    for lv, pct in zip(levels, (56.0, 52.0, 55.0)):
        lv.validity = verdicts([Finding(kind="prompt_lengths", severity="warn", figures=("prompt_lengths",),
                                        effect_pct=pct, text=f"input tokens asked 256 ({pct:+.0f}%)",
                                        summary="prompt lengths {effect:+} (no tokenizer)"),
                                Finding(kind="small_sample", severity="note", figures=("ttft",),
                                        text=f"p99 from {lv.index + 30} requests",
                                        summary="p99 from fewer than 100 requests")])
    return make_result("opt", levels=levels)


def test_one_group_per_distinct_finding_levels_in_numeric_order():
    """Notes once, levels in numeric order (``concurrency=16`` sorted before ``concurrency=1`` as
    strings was the defect), worst first."""
    r = _optimize_like_result()
    groups = group_findings(r)
    assert [(g.kind, g.severity) for g in groups] == [("prompt_lengths", "warn"), ("small_sample", "note")]
    assert groups[0].levels == (1, 2, 0)  # c=1, c=2, c=16
    assert run_notes(r) == ["c=1,2,16: prompt lengths +52–56% (no tokenizer)",
                              "c=1,2,16: p99 from fewer than 100 requests"]


def test_a_summary_is_stored_rendered_and_still_groups_the_levels():
    """result.json holds each finding's summary as text (its own effect in place), never the
    template (``prompt lengths {effect:+} …``); the levels still group on the template."""
    r = _optimize_like_result()
    text = r.model_dump_json()
    assert "{effect" not in text
    back = Result.model_validate_json(text)
    shown = sorted(f.summary for lv in back.levels for f in lv.validity.findings if f.kind == "prompt_lengths")
    assert shown == ["prompt lengths +52% (no tokenizer)", "prompt lengths +55% (no tokenizer)",
                     "prompt lengths +56% (no tokenizer)"]
    assert run_notes(back) == ["c=1,2,16: prompt lengths +52–56% (no tokenizer)",
                               "c=1,2,16: p99 from fewer than 100 requests"]
    neg = Finding(kind="load", effect_pct=-3.25, text="t", summary="achieved rate off the target {effect:+}")
    assert neg.summary == "achieved rate off the target −3.2%" and neg.summary_template.endswith("{effect:+}")
    none = Finding(kind="prompt_lengths", text="t", summary="requests failed {effect} here")
    assert none.summary == "requests failed here"


def test_run_validity_keeps_only_the_runs_own_findings():
    r = _optimize_like_result()
    v = run_validity(r)
    assert v.findings == [] and (v.verdict, v.latency) == ("warn", "warn")  # prompt lengths: both
    assert [g.kind for g in group_findings(r.model_copy(update={"validity": v}))] == ["prompt_lengths",
                                                                                      "small_sample"]


def test_an_older_file_loads_with_its_reasons_as_legacy_findings():
    raw = json.loads((FIXTURES / "sweep" / "result.json").read_text())
    old_level_reasons = raw["levels"][0]["validity"]["reasons"]
    r = Result.model_validate(raw)
    lv = r.levels[0]
    assert [f.line for f in lv.validity.findings] == old_level_reasons
    assert {f.kind for f in lv.validity.findings} == {"legacy"} and lv.validity.latency is None
    assert all(f.figures == () for f in lv.validity.findings)  # unknown: they count for both verdicts
    # the run's "concurrency=1: warn: …" lines repeat the levels' own: each note said once
    notes = run_notes(r)
    text = "input tokens asked 16, the server counted 12 on average (-25%)"
    assert sum(text in n for n in notes) == 1 and any(n.startswith("c=1,2,4: input tokens") for n in notes)
    # and it round-trips in the new form
    again = Result.model_validate(json.loads(r.model_dump_json()))
    assert again.levels[0].validity.findings == lv.validity.findings


def test_report_notes_says_each_legacy_finding_once():
    """``wattbench report --notes`` on an older file: a legacy finding has no short form, so its group's
    head is its text; the head was followed by the same text indented (every note twice)."""
    r = Result.model_validate(json.loads((FIXTURES / "sweep" / "result.json").read_text()))
    full = notes_full_lines(r)
    texts = {f.text for lv in r.levels for f in lv.validity.findings}
    assert texts
    for t in texts:
        said = [line for line in full if line.endswith(t)]
        assert len(said) == 1 and said[0].startswith("["), (t, said)
    assert "c=1,2,4: input tokens asked 16, the server counted 12 on average (-25%)" in "\n".join(full)
    # a typed finding keeps its own text under the group's short form
    typed = _optimize_like_result()
    typed_full = notes_full_lines(typed)
    for lv in typed.levels:
        for f in lv.validity.findings:
            assert sum(line.strip().endswith(f.text) for line in typed_full) >= 1


def test_reason_strings_set_the_older_way_become_legacy_findings():
    v = Validity()
    v.reasons = ["invalid: no measured request completed", "warn: x"]
    assert [(f.kind, f.severity) for f in v.findings] == [("legacy", "invalid"), ("legacy", "warn")]
    assert v.reasons == ["invalid: no measured request completed", "warn: x"]
    with pytest.raises(Exception):
        v.findings[0].text = "changed"  # a finding is frozen
