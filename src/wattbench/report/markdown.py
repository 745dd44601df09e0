"""A Markdown summary fit for a pull request or an issue comment.

Per run: verdict and every note once, what ``--optimize``/``--sweep auto`` chose, one table of the
levels (the terminal's columns, ``report/tables.py``), the trials' means and CIs, then per level its
latency line and a table with the boundaries side by side (each labelled measured / declared /
estimate). Numbers as stored in
``result.json``. Text from labels, reasons and names is escaped for GitHub Markdown (HTML
entities for ``<``, ``>``, ``&``; ``|`` and backticks backslash-escaped).
"""

from __future__ import annotations

import html
import re
from pathlib import Path

from wattbench.core.errors import UserError
from wattbench.core.numbers import MISSING, fmt
from wattbench.results.headline import shown_boundaries
from wattbench.report import summary as S
from wattbench.report.goodput import slo_text
from wattbench.report.labels import cost_currency, short_label
from wattbench.report.notes import run_notes, verdict_text
from wattbench.report.tables import Column, trial_columns
from wattbench.report.trials import any_trials, last_trial_title, trials_title
from wattbench.report.data import RunData
from wattbench.report.format import energy_fmt
from wattbench.core.schema import BoundaryEnergy
from wattbench.report.notes import count_text
from wattbench.report.tables import level_rows

_MD_SPECIAL = re.compile(r"([\\`*_\[\]|#])")
VERDICT_MARK = {"valid": "✅", "estimate": "≈", "warn": "⚠️", "invalid": "❌"}

# (row title, BoundaryEnergy attribute, unit)
ENERGY_ROWS: list[tuple[str, str, str]] = [
    ("avg power", "avg_power_w", "W"),
    ("p99 power", "p99_power_w", "W"),
    ("energy", "energy_j", "J"),
    ("idle power", "idle_power_w", "W"),
    ("dynamic energy", "dynamic_energy_j", "J"),
    ("output tok/s per kW", "output_tokens_per_s_per_kw", ""),
    ("J per output token", "j_per_output_token", "J"),
    ("output tokens per kWh", "output_tokens_per_kwh", ""),
    ("cost per M output tokens", "cost_per_million_output_tokens", ""),
    ("uncertainty", "uncertainty_pct", "%"),
]


def md(text: object) -> str:
    """Escape text for a Markdown table cell or line."""
    s = html.escape("" if text is None else str(text), quote=False)
    s = _MD_SPECIAL.sub(r"\\\1", s)
    return s.replace("\r", " ").replace("\n", " ")


def _energy_table(energy: dict[str, BoundaryEnergy], currency: str) -> list[str]:
    bounds = shown_boundaries(energy)  # a boundary equal to another (host = the cpu estimate) once
    def where(be: BoundaryEnergy) -> str:  # "declared" once, not "(declared, declared)"
        said = [be.label] + ([be.method] if be.method and be.method != be.label else [])
        return ", ".join(md(x) for x in said)

    head = "| | " + " | ".join(f"{md(b)} ({where(energy[b])})" for b in bounds) + " |"
    lines = [head, "|---|" + "---:|" * len(bounds)]
    for title, attr, unit in ENERGY_ROWS:
        if attr == "cost_per_million_output_tokens":
            unit = currency  # the run's --currency, named with every cost
        cells = [fmt(getattr(energy[b], attr), unit) if attr == "uncertainty_pct"  # an estimate's at its ±%'s digits
                 else energy_fmt(energy[b], getattr(energy[b], attr), unit) for b in bounds]
        lines.append(f"| {title} | " + " | ".join(cells) + " |")
    return lines


def _columns_table(key: list[str], cols: list[Column]) -> list[str]:
    """A Markdown table from ``summary.Column``s (header lines joined with spaces)."""
    heads = ["level", *(" ".join(c.header.split("\n")) for c in cols)]
    align = [":---", *(("---:" if c.justify == "right" else ":---") for c in cols)]
    lines = ["| " + " | ".join(md(h) for h in heads) + " |", "|" + "|".join(align) + "|"]
    for i, label in enumerate(key):
        lines.append("| " + " | ".join([md(label), *(md(c.cells[i]) for c in cols)]) + " |")
    return lines


def render_markdown(runs: list[RunData]) -> str:
    """The Markdown text for ``runs``: per run the verdict, every note once, what a search chose,
    one table of the levels (with SLO and goodput columns under ``--slo``), the trials' means and
    95% CIs, then each level's headline and energy table."""
    out: list[str] = []
    for run in runs:
        r = run.result
        v = r.validity
        out.append(f"### wattbench run `{md(r.run_id).replace('`', '')}` — {VERDICT_MARK.get(v.verdict, '')} "
                   f"{md(v.verdict)}")
        meta = [f"server {md(r.server.engine or MISSING)} {md(r.server.version or '')}".rstrip(),
                f"model {md(r.server.model or MISSING)}", f"status {md(r.status)}"]
        slo = slo_text(r)
        if slo:
            meta.append(f"SLO {md(slo)}")
        if r.tags:
            meta.append("tags " + ", ".join(md(t) for t in r.tags))
        out.append(" · ".join(meta))
        out.append("")
        answers = S.answer_lines(r)  # the answer first, as in the terminal and HTML reports
        for line in answers:
            out.append(f"**{md(line)}**" if line == answers[0] else md(line))
            out.append("")
        notes = [*run_notes(r), *(n for n in run.notes if n not in run_notes(r))]

        counted = count_text(r)
        out.append(f"verdict: {md(verdict_text(r))}" + (f" · {md(counted)}" if counted else ""))
        out.append("")
        for note in notes:
            out.append(f"- {md(note)}")
        if notes:
            out.append("")
        if r.levels:
            key = [short_label(lv) for lv in r.levels]
            if any_trials(r):
                out.append(f"Levels, {last_trial_title(r)}:")
                out.append("")

            out.extend(_columns_table(*level_rows(r)))  # each replica's row under its level's total
            out.append("")
            if any_trials(r):
                out.append(trials_title(r).capitalize() + ":")
                out.append("")
                out.extend(_columns_table(key, trial_columns(r)))
                out.append("")
        for lv in r.levels:
            mark = VERDICT_MARK.get(lv.validity.verdict, "")
            out.append(f"**{md(short_label(lv))}** {mark} {md(lv.validity.verdict)}")
            out.append("")
            L = lv.latency
            out.append(f"requests {lv.requests.completed} ok / {lv.requests.failed} failed · "
                       f"TTFT p50 {fmt(L.ttft_ms.p50)} ms, p99 {fmt(L.ttft_ms.p99)} ms · "
                       f"TPOT p50 {fmt(L.tpot_ms.p50)} ms, p99 {fmt(L.tpot_ms.p99)} ms · "
                       f"E2E p99 {fmt(L.e2e_ms.p99)} ms")
            out.append("")
            if lv.energy:
                out.extend(_energy_table(lv.energy, cost_currency(r)))
                out.append("")
    return "\n".join(out).rstrip() + "\n"


def write_markdown(runs: list[RunData], path: str | Path) -> Path:
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render_markdown(runs), encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot write the Markdown report to {path}: {exc.strerror or exc}") from None
    return path
