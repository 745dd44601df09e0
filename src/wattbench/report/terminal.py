"""Terminal renderables (rich): the run summary (the answer, the verdicts and notes, the per-level
tables) and the live progress bar of a run. Nothing here prints: the CLI prints what these return.

Every text that comes from data (labels, reasons, names) goes into ``rich.text.Text`` objects, so
rich markup in a label (``[bold]``) is shown as typed, not interpreted.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from wattbench.core.numbers import MISSING, fmt, fmt_fraction_pct
from wattbench.results.headline import boundary_order
from wattbench.core.safe_text import term
from wattbench.report import summary as S
from wattbench.report.glossary import GLOSSARY_POINTER
from wattbench.report.goodput import slo_text
from wattbench.report.labels import in_load_order, short_label
from wattbench.report.notes import NOTE_MARK, shown_notes, verdict_text
from wattbench.report.tables import (SERVING_STATS, SERVING_STATS_NARROW, Column, level_columns, part_lines,
                                     serving_columns, serving_title, trial_columns)
from wattbench.report.trials import any_trials, last_trial_title, trials_title
from wattbench.core.schema import Result
from wattbench.results.recovery import RecoveredLevel
from wattbench.report.notes import notes_pointer
from wattbench.report.tables import with_target_rows

VERDICT_STYLE = {"valid": "green", "estimate": "cyan", "warn": "yellow", "invalid": "bold red"}
LABEL_STYLE = {"measured": "green", "declared": "cyan", "estimate": "magenta"}


COLUMN_GAP = 2  # one space of left padding and the (blank) divider between columns


def _units(cols: list[Column]) -> list[list[Column]]:
    """Columns in the runs that stay together (``Column.glue``: a CI with its mean, one boundary's
    figures, one latency's statistics)."""
    units: list[list[Column]] = []
    for c in cols:
        if c.glue and units:
            units[-1].append(c)
        else:
            units.append([c])
    return units


def _span(units: list[list[Column]]) -> int:
    return sum(c.width + COLUMN_GAP for u in units for c in u)


def pack(key: Column, cols: list[Column], width: int) -> list[list[Column]]:
    """Columns into as few tables as fit ``width``, in order (the first table holds the first
    figures), each table led by the ``key`` column; columns that belong together (``Column.glue``)
    in one table, and never a last table of one column (the columns before it move along)."""
    groups: list[list[list[Column]]] = []  # tables of units
    for u in _units(cols):
        if groups and key.width + _span(groups[-1]) + _span([u]) <= width:
            groups[-1].append(u)
        else:
            groups.append([u])
    while (len(groups) > 1 and sum(len(u) for u in groups[-1]) == 1 and len(groups[-2]) > 1
           and key.width + _span(groups[-1]) + _span(groups[-2][-1:]) <= width):
        groups[-1].insert(0, groups[-2].pop())
    return [[c for u in g for c in u] for g in groups]


def _text(c: Column, i: int) -> Text:
    style = c.styles[i] if c.styles else ""
    if c.kind == "verdict":
        style = VERDICT_STYLE.get(c.cells[i], "")
    elif c.kind == "slo":
        style = "green" if c.cells[i] == "met" else "yellow"
    elif c.kind == "ci":
        style = "dim"
    elif c.kind.startswith("label:"):
        style = LABEL_STYLE.get(c.kind[6:], "")
    return Text(c.cells[i], style=style)


def _table(key: Column, cols: list[Column], title: str | None) -> Table:
    table = Table(title=Text(title) if title else None, title_justify="left", box=box.SIMPLE_HEAD,
                  header_style="bold", show_edge=False, pad_edge=False, padding=(0, 0, 0, 1))
    for c in [key, *cols]:
        table.add_column(Text(c.header), justify=c.justify, no_wrap=c.max_width is None,
                         max_width=c.max_width, overflow="fold")
    # a label folded over lines is set apart by a blank line on each side, so its second line is
    # never read as a row of its own (``c=128`` over ``re-measured``)
    long = [key.max_width is not None and key.max_width != 0 and len(x) > key.max_width for x in key.cells]
    for i in range(len(key.cells)):
        apart = long[i] or (i + 1 < len(long) and long[i + 1])
        table.add_row(*[_text(c, i) for c in [key, *cols]], end_section=apart)
    return table


def column_tables(key: Column, cols: list[Column], width: int, title: str | None = None) -> list[Table]:
    """``cols`` as tables that fit ``width`` columns, each led by ``key``: one wide table when it
    fits, else as many as it takes (the layout of every wattbench table). A column with no figure
    in any row (``–`` throughout: tok/s per kW of a run without energy) is left out, and with it a
    table that would have nothing else."""
    cols = [c for c in cols if any(x not in (MISSING, "") for x in c.cells)]
    return [_table(key, g, title if i == 0 else None) for i, g in enumerate(pack(key, cols, width))]


LEVEL_LABEL_WIDTH = 16  # the level column's width: a longer label folds, unless it fits LEVEL_LABEL_MAX
LEVEL_LABEL_MAX = 24  # ``c=128 re-measured`` (17) widens the column and stays on one line


def label_width(labels: list[str]) -> int:
    """The level column's width: LEVEL_LABEL_WIDTH, widened to the longest label that fits
    LEVEL_LABEL_MAX (so ``c=128 re-measured`` is one line); a longer label (a custom one) folds."""
    return max([LEVEL_LABEL_WIDTH] + [len(x) for x in labels if len(x) <= LEVEL_LABEL_MAX])


WIDE_FROM = 160  # console columns from which the latency table adds p90 and p95 to mean, p50 and p99


def level_tables(result: Result, width: int) -> list[Table]:
    """The per-level summary as tables that fit ``width`` columns: the efficiency table (verdict,
    requests, throughput, SLO, power and efficiency per boundary), then the requests-and-latency
    table (the window, requests/s, the load achieved, TTFT, TPOT, ITL and E2E: mean, p50 and p99;
    p90 and p95 too from ``WIDE_FROM`` columns), then the trials' means and CIs; each as one wide
    table when it fits, else as many as it takes, each repeating the level column. A level driven
    against several targets has each replica's row under its total."""
    if not result.levels:
        return []
    labels = [short_label(lv) for lv in result.levels]
    key = Column("level", labels, "left", styles=[VERDICT_STYLE.get(lv.validity.verdict, "") for lv in result.levels])
    stats = SERVING_STATS if width >= WIDE_FROM else SERVING_STATS_NARROW
    out: list[Table] = []
    for cols, title in ((level_columns(result, with_latency=False), last_trial_title(result)),
                        (serving_columns(result, stats), serving_title(result))):
        tkey, tcols, _ = with_target_rows(result, key, cols)  # replicas under their total
        tkey = replace(tkey, max_width=label_width(tkey.cells))
        out += column_tables(tkey, tcols, width, title)
    if any_trials(result):
        out += column_tables(replace(key, max_width=label_width(labels)), trial_columns(result), width,
                             trials_title(result))
    return out


def power_split_lines(result: Result) -> list[Text]:
    """Per level with a memory-power reading, where the board's watts went (one line each)."""
    out = []
    for lv in result.levels:
        sp = lv.power_split
        if sp is None:
            continue
        m, r = sp.parts["memory"], sp.parts["rest"]
        line = (f"{short_label(lv)}: memory {fmt(m.avg_power_w)} W ({fmt_fraction_pct(sp.memory_share)} of the board's "
                f"{fmt(sp.board_avg_power_w)} W), rest of board {fmt(r.avg_power_w)} W")
        if m.dynamic_power_w is not None and r.dynamic_power_w is not None:
            line += (f"; idle {fmt(m.idle_power_w)} + {fmt(r.idle_power_w)} W, "
                     f"dynamic {fmt(m.dynamic_power_w)} + {fmt(r.dynamic_power_w)} W (memory + rest)")
        out.append(Text(line, style="dim"))
    return out



def summary_table(result: Result, width: int = 160) -> Group:
    """The per-level tables for a console ``width`` wide."""
    return Group(*level_tables(result, width))


NOTE_STYLE = {"invalid": "bold red", "warn": "yellow", "estimate": "cyan", "note": "dim"}


def _note(text: str, style: str) -> RenderableType:
    """One note, whole: a long one folds onto more lines under its own text (hanging after its
    mark), so the fix at its end is read, never cut."""
    mark, body = text[:2], text[2:]
    if mark not in {*NOTE_MARK.values(), "  "}:
        return Text(text, style=style)
    g = Table.grid(padding=0)
    g.add_column(no_wrap=True, width=2)
    g.add_column(overflow="fold")
    g.add_row(Text(mark, style=style), Text(body, style=style))
    return g


def verdict_line(result: Result) -> Text:
    """``verdict: warn at c=4 (efficiency) · latency warn``: the run's two verdicts."""
    return Text.assemble(("verdict: ", "bold"),
                         (verdict_text(result), VERDICT_STYLE.get(result.validity.verdict, "")))


def note_renderables(result: Result, width: int | None = None, run_dir: str | None = None) -> list[RenderableType]:
    """At most ``summary.MAX_NOTE_LINES`` notes, each whole (folded at the width): one per distinct
    finding, its levels in numeric order, the worst first; then, when one was left out or said in
    part, how many notes there are and ``wattbench report --notes`` (every note is in
    ``result.json`` and there)."""
    shown, more = shown_notes(result, width)
    out: list[RenderableType] = [_note(n.text, NOTE_STYLE.get(n.severity, "")) for n in shown]
    pointer = notes_pointer(result, more, run_dir)
    if pointer:  # indented as a note's second line, folded the same way
        out.append(_note(pointer, "dim"))
    return out


def validity_lines(result: Result, width: int | None = None, run_dir: str | None = None) -> list[RenderableType]:
    """The run's two verdicts (``verdict_line``), then its notes (``note_renderables``)."""
    return [verdict_line(result), *note_renderables(result, width, run_dir)]


def title_line(result: Result, width: int | None = None) -> Text:
    """``wattbench RUN_ID · model · engine version · label L · SLO S``; at ``width`` columns,
    folded at its `` · `` separators (a part longer than the width stays whole, for the console
    to fold), so ``SLO`` is never split from its objectives."""
    parts = title_parts(result)
    if width is None:
        return Text(" · ".join(parts), style="bold")
    lines: list[str] = []
    for part in parts:
        if lines and len(lines[-1]) + 3 + len(part) <= width:
            lines[-1] += " · " + part
        else:
            lines.append(part if not lines else "  " + part)
    return Text("\n".join(lines), style="bold")


def title_parts(result: Result) -> list[str]:
    # the run id, model and engine version come from a server or a result file: escaped and capped
    parts = [f"wattbench {term(result.run_id)}"]
    if result.server.model:
        parts.append(term(result.server.model))
    eng = " ".join(term(x) for x in (result.server.engine, result.server.version) if x)
    if eng:
        parts.append(eng)
    if result.config_label:  # the user's name for what wattbench cannot see (--config-label)
        parts.append(f"label {result.config_label}")
    slo = slo_text(result)
    if slo:
        parts.append(f"SLO {slo}")
    return parts


class RunSummary:
    """The run summary, laid out for the console's width when printed: the title, the answer (the
    level it quotes with its headline figure, what a search chose and why), the run's verdicts, then
    the figures (``level_tables``: efficiency, then requests and latency), then the words behind
    them: the notes, how the run was taken (primed, history check, prompts), energy per tenant,
    parts, and where the terms are defined (``report.glossary``)."""

    def __init__(self, result: Result, run_dir: str | None = None):
        self.result = in_load_order(result)  # levels by load, whatever order a search measured them in
        self.run_dir = run_dir

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        r = self.result
        yield title_line(r, options.max_width)
        for line in S.lead_lines(r):  # the answer first
            yield Text(line)
        yield verdict_line(r)
        for i, t in enumerate(level_tables(r, options.max_width)):
            yield Text("")
            yield t
        yield Text("")
        yield from note_renderables(r, options.max_width, self.run_dir)
        for line in S.context_lines(r):  # primed, history check, prompts: how the run was taken
            yield Text(line)
        from wattbench.report.attribution import summary_lines  # energy per tenant and carbon

        for line in summary_lines(r):
            yield Text(line)
        yield from power_split_lines(r)  # where the board's watts went
        for line in part_lines(r):  # boundaries without per-token figures, as parts
            yield Text(line, style="dim")
        if r.levels:
            yield Text(GLOSSARY_POINTER, style="dim")


def recovered_lines(recovered: list[RecoveredLevel], how: str) -> list[Text]:
    """A crashed run's recovered records (``results.recovery.RecoveredLevel``), each level one line
    in the warning colour: labelled as recovered, not accounted (no figure computed here)."""
    return [Text(r.text(how), style="yellow") for r in recovered]


def run_summary(result: Result, run_dir: str | os.PathLike[str] | None = None) -> RenderableType:
    """Title, the answer and the verdicts first, then the tables, then the notes and the rest in
    words (``RunSummary``); ``run_dir`` (where the run is) goes into the ``wattbench report --notes``
    pointer."""
    return RunSummary(result, None if run_dir is None else str(run_dir))


# ---------------------------------------------------------------- live progress


def make_progress(**kwargs: Any) -> Progress:
    """A progress bar for a run: ``level ━━━ 120/500 requests · 1,234 out tok/s · 412 W (accelerator)``.

    Add one task per level with ``progress.add_task(label, total=N, **progress_fields())`` and update
    it with ``progress.update(task, completed=done, **progress_fields(tok_s, power))``.
    """
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("requests"),
        TextColumn("· {task.fields[tok_s]}"),
        TextColumn("· {task.fields[watts]}"),
        TimeElapsedColumn(),
        **kwargs,
    )


def progress_fields(output_tokens_per_s: float | None = None,
                    power_w: dict[str, float] | None = None) -> dict[str, str]:
    """Task fields for ``make_progress``: live tokens/s and watts per boundary (inner first)."""
    tok = f"{fmt(output_tokens_per_s)} out tok/s"
    if power_w:
        watts = ", ".join(f"{fmt(power_w[b])} W ({b})" for b in boundary_order(power_w))
    else:
        watts = "no power reading"
    return {"tok_s": tok, "watts": watts}
