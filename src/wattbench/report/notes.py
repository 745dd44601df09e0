"""What a report says about a run's findings, in one set of words: each note once, in reading order
(``accounting.findings.group_findings`` groups them; this module words them), the notes a summary
shows and how many it left out, the run's two verdicts in one line, and ``wattbench report --notes``
(every finding in full)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from wattbench.core.severity import SEVERITY_ORDER
from wattbench.core.numbers import fmt
from wattbench.core.secret_scope import clip
from wattbench.core.safe_text import LINE_CHARS
from wattbench.report.labels import levels_text
from wattbench.core.schema import LevelResult, Result
from wattbench.core.schema.measures import SIGNED_EFFECT_SLOT, effect_pct_text, fill_effect
from wattbench.accounting.findings import FindingGroup, group_findings, level_order, note_counts, note_items


def said(text: str) -> str:
    """A note's text as any report shows it: at most ``LINE_CHARS`` characters (a crafted file's
    megabyte of finding text is not printed whole), scrubbed of the registered secrets, then cut."""
    return clip(text, LINE_CHARS, "…")


def _num(a: float) -> str:
    return fmt(a, kind="effect")


def _pct_text(x: float, signed: bool) -> str:
    return effect_pct_text(x, signed)


def effect_text(effects: Iterable[float], signed: bool) -> str:
    """``+56%``, ``+52–56%``, ``−25% to −20%`` (signed, a range over the levels), ``0.8–1.2%`` (a
    magnitude)."""
    xs = sorted(effects) if signed else sorted(abs(x) for x in effects)
    if not xs:
        return ""
    lo, hi = _pct_text(xs[0], signed), _pct_text(xs[-1], signed)
    if lo == hi:
        return lo
    if not signed:
        return f"{_num(xs[0])}–{hi}"
    if xs[0] >= 0:
        return f"+{_num(xs[0])}–{_num(xs[-1])}%"
    return f"{lo} to {hi}"


def group_text(result: Result, g: FindingGroup) -> str:
    """One group of findings as a line: ``c=1,2,32: prompt lengths +56% (no tokenizer)``. The
    effect goes where the summary says ``{effect}`` (a magnitude) or ``{effect:+}`` (signed), else
    after it."""
    body = fill_effect(g.summary, effect_text(g.effects, SIGNED_EFFECT_SLOT in g.summary))
    where = levels_text(result, g.levels)
    return f"{where}: {body}" if where else body


@dataclass(frozen=True)
class NoteLine:
    severity: str  # note | estimate | warn | invalid
    text: str


def note_lines(result: Result) -> list[NoteLine]:
    """Every note of the run once, in reading order (``accounting.findings.note_items``, the one
    list every count of notes counts): the run's own findings, the warnings and sensor problems the
    run recorded, the levels without energy, then one line per distinct level finding with its
    levels in numeric order, the worst first."""
    out = []
    for n in note_items(result):
        if n.group is not None:
            text = group_text(result, n.group)
        elif n.missing_energy is not None:
            reason, idx = n.missing_energy
            text = f"{levels_text(result, list(idx))}: energy unavailable: {reason}"
        else:
            text = n.text or ""
        out.append(NoteLine(n.severity, said(text)))
    return out


def count_text(result: Result) -> str:
    """``5 notes (4 warn, 1 note)``: how many notes the run has (``accounting.findings.note_counts``,
    the one count of the summary, the HTML report and ``compare``); empty without notes."""
    c = note_counts(result)
    n = sum(c.values())
    if not n:
        return ""
    return f"{n} note{'s' if n != 1 else ''} (" + ", ".join(f"{k} {s}" for s, k in c.items()) + ")"


def said_in_part(result: Result) -> bool:
    """Whether ``wattbench report --notes`` says more than the summary's note lines: a finding
    whose levels' own texts, basis or bound are left out of its short line."""
    for g in group_findings(result):
        if any(f.text != g.summary or f.basis for f in g.findings):
            return True
    return False


def run_notes(result: Result) -> list[str]:
    """Every note of the run once (``note_lines``) as plain lines."""
    return [n.text for n in note_lines(result)]


MAX_NOTE_LINES = 8


def shown_notes(result: Result, width: int | None = None, limit: int = MAX_NOTE_LINES) -> tuple[list[NoteLine], int]:
    """The notes a summary shows: at most ``limit`` notes, the worst first, each whole (a terminal
    folds a long one onto more lines: its fix is at its end); and how many were left out
    (``wattbench report --notes`` lists them all). ``width`` is kept for callers; nothing is cut."""
    lines = note_lines(result)
    worst = {s.value: -i for i, s in enumerate(SEVERITY_ORDER)}  # the one scale, worst first
    order = sorted(range(len(lines)), key=lambda i: (worst.get(lines[i].severity, worst["warn"]), i))
    keep = sorted(order[:limit] if len(lines) <= limit else order[:limit - 1])
    out = []
    for i in keep:
        out.append(NoteLine(lines[i].severity, NOTE_MARK.get(lines[i].severity, "- ") + lines[i].text))
    return out, len(lines) - len(keep)


NOTE_MARK = {"invalid": "✗ ", "warn": "! ", "estimate": "≈ ", "note": "- "}


def more_notes_line(n: int, run_dir: str | None = None, result: Result | None = None) -> str:
    """The line that ends a summary's notes when some were left out or said in part: how many
    notes the run has and the command that lists every one in full."""
    where = run_dir or "RUN_DIR"
    if result is not None:
        left = f", {n} not shown" if n else ""
        return f"  {count_text(result)}{left}, in full: wattbench report --notes {where}"
    return f"  … {n} more note{'s' if n != 1 else ''}: wattbench report --notes {where}"


def notes_pointer(result: Result, more: int, run_dir: str | None = None) -> str | None:
    """``more_notes_line`` when the summary left a note out or said one in part, else None."""
    if not more and not said_in_part(result):
        return None
    return more_notes_line(more, run_dir, result)


def verdict_text(result: Result) -> str:
    """``valid (efficiency) · latency warn at c=32``: the run's headline verdict — the efficiency
    figures' — first, then the latency figures'; each names its levels when only some of them are
    not valid."""
    v = result.validity

    order = {lv.index: level_order(lv) for lv in result.levels}

    def text(run_verdict: str, per_level: Callable[[LevelResult], str | None]) -> str:
        """``valid``; or, when the levels differ, ``invalid at c=16; warn at c=4`` (worst first)."""
        got = {lv.index: per_level(lv) or "valid" for lv in result.levels}
        if len(set(got.values())) <= 1:
            return run_verdict
        parts = []
        for verdict in ("invalid", "warn", "estimate"):
            idx = sorted((i for i, x in got.items() if x == verdict), key=order.__getitem__)
            if idx:
                parts.append(f"{verdict} at {levels_text(result, idx)}")
        return "; ".join(parts) if parts else run_verdict

    out = f"{text(v.verdict, lambda lv: lv.validity.verdict)} (efficiency)"
    if v.latency is not None and result.levels and all(lv.requests.completed == 0 for lv in result.levels):
        out += " · latency not measured (no request completed)"  # no verdict on figures that do not exist
    elif v.latency is not None:
        out += f" · latency {text(v.latency, lambda lv: lv.validity.latency)}"
    if v.energy == "unavailable":
        out += " · energy unavailable"
    return out


def notes_full_lines(result: Result) -> list[str]:
    """Every finding in full (``wattbench report --notes``), each line at most ``LINE_CHARS``
    characters (``said``): per distinct finding its severity,
    levels, the figures it biases, its estimated effect and basis, then each level's own text where
    it says more than the head (an older file's findings, and any without a short form, are their
    head: said once)."""
    out = [said(f"{result.run_id}: {verdict_text(result)}")]
    for g in group_findings(result):
        out.append(said(f"[{g.severity}] {group_text(result, g)}"))
        meta = []
        if g.figures:
            meta.append("biases " + ", ".join(g.figures))
        if g.findings and g.findings[0].bound_pct is not None:
            meta.append(f"material from {g.findings[0].bound_pct:g}%")
        if meta:
            out.append("    " + "; ".join(meta))
        for f in g.findings:
            if f.text != g.summary:  # a finding without a short form (an older file's) is the head itself
                where = levels_text(result, f.levels)
                out.append(said(f"    {where + ': ' if where else ''}{f.text}"))
            if f.basis:
                out.append(said(f"      basis: {f.basis}"))
    for w in result.warnings:
        out.append(said(f"[warn] {w}"))
    for p in result.sensor_problems:
        out.append(said(f"[note] {p}"))
    return out
