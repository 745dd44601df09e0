"""Findings: how a check's result becomes a ``note`` or a ``warn``, a level's two verdicts, and the
one grouping of a run's findings that every report renders.

A finding (``core.schema.Finding``) names the figures it can bias and, where it can be
estimated, by how much (``effect_pct``, a percent of the figure its ``basis`` names). A finding
whose estimated effect is below the materiality bound of those figures is a ``note`` (shown, never
a ``warn``); at or above it, a ``warn``. Rules without an estimable effect keep their own fixed
thresholds (``validity.py``, ``level_findings.py``); the rules that make a level ``invalid`` are
unchanged.

Materiality bounds (why these values: docs/accounting.md §9, "Materiality")
--------------------------------------------------------------------------
``EFFICIENCY_MATERIAL_PCT`` = 1 %: an effect on energy, tok/s per kW, J/token or throughput below 1 %
is a fraction of what three starts of the same engine moved those figures by on the H200
(docs/validation.md parts 9-10: out tok/s 2.9 % at c=1 and 5.3 % at c=8, tok/s per kW 10.1 % and
11.2 %), a third of the tightest default regress check (``output_tokens_per_s:-3%``), and above
what wattbench's energy disagreed with an independent read of the counter by (0.19 % on windows of
20 s and more; 0.58 % at p95 on 5 s windows).

``LATENCY_MATERIAL_PCT`` = 5 %: an effect on a latency statistic below 5 % of it is inside what
the same three starts moved TTFT p50 by (c=1 17.6-18.6 ms: 5.8 %; c=8 60.8-65.4 ms: 7.5 %).
Client timing is judged against it with the scripted server's ground truth
(``benches/data/peer_clients``): over 28 wattbench levels the mean TTFT error was at most 1.19 ×
the client's event-loop lag p99.

Verdicts
--------
``verdicts(findings)``: the efficiency verdict (``Validity.verdict``, the headline) is the worst
severity among findings that bias an efficiency figure (``EFFICIENCY_FIGURES``), the latency
verdict (``Validity.latency``) among those that bias a latency figure (``LATENCY_FIGURES``); a
finding with no figures (an older file's reason) counts for both. ``note`` leaves a verdict valid.
An ``estimate`` finding (the energy the headline rests on comes from a model of power, not a meter:
``validity.estimate_findings``) makes it ``estimate`` — the word ``valid`` is kept for figures a
meter (or a declared constant) gave; any ``warn`` or ``invalid`` finding is worse than it. Order:
``valid`` < ``estimate`` < ``warn`` < ``invalid``.

Grouping
--------
``group_findings(result)``: the run's own findings first, then one group per distinct level
finding (same ``kind`` and ``summary``), its levels in numeric order of their load (concurrency,
rate), worst severity first. Terminal, Markdown, HTML, ``compare`` and ``regress`` all render
these groups (``report/notes.py`` words them).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from wattbench.core.severity import SEVERITY_ORDER
from wattbench.core.schema import (
    FindingKind,
    EFFICIENCY_FIGURES,
    LATENCY_FIGURES,
    Finding,
    LevelResult,
    Result,
    Validity,
)

__all__ = ["EFFICIENCY_MATERIAL_PCT", "LATENCY_MATERIAL_PCT", "VERDICT_ORDER", "Finding",
           "FindingGroup",
           "judged", "rule", "verdicts", "worst", "group_findings", "level_order"]

EFFICIENCY_MATERIAL_PCT = 1.0
LATENCY_MATERIAL_PCT = 5.0
_VERDICT = {"note": "valid", "estimate": "estimate", "warn": "warn", "invalid": "invalid"}
VERDICT_ORDER = ("valid", "estimate", "warn", "invalid")
_ORDER = VERDICT_ORDER


def judged(kind: FindingKind, text: str, figures: tuple[str, ...], effect_pct: float | None, bound_pct: float, *,
           basis: str | None = None, summary: str | None = None) -> Finding:
    """A finding whose severity follows from its estimated effect: ``note`` below ``bound_pct``,
    ``warn`` at or above it (and ``warn`` when the effect could not be estimated)."""
    material = effect_pct is None or abs(effect_pct) >= bound_pct
    return Finding(kind=kind, severity="warn" if material else "note", figures=figures,
                   effect_pct=effect_pct, bound_pct=bound_pct, basis=basis, text=text, summary=summary)


def rule(kind: FindingKind, severity: str, text: str, figures: tuple[str, ...], *, effect_pct: float | None = None,
         basis: str | None = None, summary: str | None = None) -> Finding:
    """A finding of a rule with its own fixed threshold (its severity decided by the rule)."""
    return Finding(kind=kind, severity=severity, figures=figures, effect_pct=effect_pct,
                   basis=basis, text=text, summary=summary)


def _worst_of(findings: Iterable[Finding], family: tuple[str, ...]) -> str:
    out = "valid"
    for f in findings:
        if f.figures and not set(f.figures) & set(family):
            continue
        v = _VERDICT.get(f.severity, "warn")
        if _ORDER.index(v) > _ORDER.index(out):
            out = v
    return out


def _dedupe(findings: Iterable[Finding]) -> list[Finding]:
    out: list[Finding] = []
    seen: set[tuple[str, str, str]] = set()
    for f in findings:
        key = (f.kind, f.severity, f.text)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def verdicts(findings: Iterable[Finding]) -> Validity:
    """A level's efficiency and latency verdicts from its findings (duplicates dropped)."""
    fs = _dedupe(findings)
    return Validity(verdict=_worst_of(fs, EFFICIENCY_FIGURES), latency=_worst_of(fs, LATENCY_FIGURES),
                    findings=fs)


def _max_verdict(*vs: str | None) -> str | None:
    present = [v for v in vs if v is not None]
    return max(present, key=_ORDER.index) if present else None


def worst(*validities: Validity) -> Validity:
    """The findings of several validities together, each verdict the worst of theirs and of what the
    findings say (a validity of an older file may carry a verdict its legacy findings do not)."""
    fs = _dedupe(f for v in validities for f in v.findings)
    got = verdicts(fs)
    eff = _max_verdict(got.verdict, *(v.verdict for v in validities)) or "valid"
    lat_given = [v.latency for v in validities]
    lat = _max_verdict(got.latency, *lat_given) if any(x is not None for x in lat_given) or fs else None
    return Validity(verdict=eff, latency=lat, findings=fs)


# ---------------------------------------------------------------- grouping


def level_order(level: LevelResult) -> tuple[int, float, int]:
    """Sort key of a level by its load: concurrency levels, then rate levels, each by value; others
    by their index (a trace replays one load)."""
    ld = level.load
    if ld.mode == "concurrency" and ld.target_concurrency is not None:
        return (0, float(ld.target_concurrency), level.index)
    if ld.mode == "rate" and ld.target_rate_rps is not None:
        return (1, float(ld.target_rate_rps), level.index)
    return (2, float(level.index), level.index)


@dataclass(frozen=True)
class FindingGroup:
    """One distinct finding and the levels it applies to (empty: the run's own)."""

    kind: FindingKind
    severity: str  # the worst of the group
    figures: tuple[str, ...]
    summary: str  # the shared short form (``Finding.summary_template``, else its text)
    levels: tuple[int, ...]  # level indices, in numeric order of their load
    effects: tuple[float, ...]  # the estimated effects present, in level order
    findings: tuple[Finding, ...]  # each level's finding, ``levels`` set to that level


def _legacy_run_duplicate(f: Finding, level_texts: set[str]) -> bool:
    """An older file's run-level reason ``concurrency=8: text`` that repeats a level's own."""
    return f.kind == FindingKind.LEGACY and any(f.text.endswith(t) for t in level_texts)


def group_findings(result: Result) -> list[FindingGroup]:
    """Every finding of the run once: the run's own (``result.validity``) first, then the levels'
    grouped by (kind, summary), ordered by severity (invalid, warn, note), then by the first level's
    load, then kind."""
    levels = sorted(result.levels, key=level_order)
    rank = {lv.index: i for i, lv in enumerate(levels)}
    buckets: dict[tuple[FindingKind, str], list[Finding]] = {}
    level_texts: set[str] = set()
    for lv in levels:
        for f in lv.validity.findings:
            level_texts.add(f.text)
            key = (f.kind, f.summary_template or f.text)
            buckets.setdefault(key, []).append(f.model_copy(update={"levels": (lv.index,)}))
    out: list[FindingGroup] = []
    for f in _dedupe(result.validity.findings):
        if _legacy_run_duplicate(f, level_texts):
            continue
        out.append(FindingGroup(f.kind, f.severity, tuple(f.figures), f.summary_template or f.text, tuple(f.levels),
                                () if f.effect_pct is None else (f.effect_pct,), (f,)))
    groups = []
    for (kind, summary), fs in buckets.items():
        idx: list[int] = []
        for f in fs:
            for i in f.levels:
                if i not in idx:
                    idx.append(i)
        idx.sort(key=lambda i: rank.get(i, len(rank)))
        fs.sort(key=lambda f: rank.get(f.levels[0], len(rank)))
        sev = max((f.severity for f in fs), key=SEVERITY_ORDER.index)
        figures = tuple(dict.fromkeys(x for f in fs for x in f.figures))
        groups.append(FindingGroup(kind, sev, figures, summary, tuple(idx),
                                   tuple(f.effect_pct for f in fs if f.effect_pct is not None), tuple(fs)))
    groups.sort(key=lambda g: (-SEVERITY_ORDER.index(g.severity), rank.get(g.levels[0], 0) if g.levels else -1,
                               g.kind, g.summary))
    return out + groups


# ---------------------------------------------------------------- the run's notes, counted once

NO_SENSOR_REASON = "no sensor covered this level"  # a level without energy and without a recorded reason


@dataclass(frozen=True)
class NoteItem:
    """One note of the run, before it is worded (``report/notes.py`` words it): a group of findings,
    a warning the run recorded, the levels whose energy is missing for one reason, or a sensor
    problem."""

    severity: str  # invalid | warn | note
    group: FindingGroup | None = None
    text: str | None = None  # a recorded warning or sensor problem
    missing_energy: tuple[str, tuple[int, ...]] | None = None  # (reason, level indices)


def note_items(result: Result) -> list[NoteItem]:
    """Every note of the run once, in reading order: the run's own findings, the warnings the run
    recorded, the levels without energy (one item per reason, when the run as a whole has some
    energy), the sensor problems, then the level findings (``group_findings``). The one list that
    every report shows and every count of notes counts (``note_counts``)."""
    groups = group_findings(result)
    out = [NoteItem(g.severity, group=g) for g in groups if not g.levels]
    out += [NoteItem("warn", text=w) for w in result.warnings]
    if result.validity.energy != "unavailable":
        reasons: dict[str, list[int]] = {}
        for lv in result.levels:
            if not lv.energy:
                reasons.setdefault(lv.energy_unavailable_reason or NO_SENSOR_REASON, []).append(lv.index)
        out += [NoteItem("warn", missing_energy=(r, tuple(idx))) for r, idx in sorted(reasons.items())]
    out += [NoteItem("note", text=p) for p in result.sensor_problems]
    out += [NoteItem(g.severity, group=g) for g in groups if g.levels]
    seen: set[tuple[object, object]] = set()
    uniq = []
    for n in out:
        key = (n.group.summary, n.group.levels) if n.group is not None else (n.text, n.missing_energy)
        if key not in seen:
            seen.add(key)
            uniq.append(n)
    return uniq


def note_counts(result: Result) -> dict[str, int]:
    """How many notes the run has by severity (``note_items``), worst first, zeros left out:
    ``{"warn": 4, "note": 1}``. The summary, the HTML report and ``compare`` all say this count."""
    items = note_items(result)
    return {s: n for s in SEVERITY_ORDER[::-1] if (n := sum(1 for x in items if x.severity == s))}
