"""Terminal renderables (rich): the per-level summary table, one headline line per level, and the
live progress bar of a run. Nothing here prints: the CLI prints what these return.

Every text that comes from data (labels, reasons, names) goes into ``rich.text.Text`` objects, so
rich markup in a label (``[bold]``) is shown as typed, not interpreted.
"""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Group, RenderableType
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from wattbench.report import format as F
from wattbench.results.schema import BoundaryEnergy, Result

VERDICT_STYLE = {"valid": "green", "warn": "yellow", "invalid": "bold red"}
LABEL_STYLE = {"measured": "green", "declared": "cyan", "estimate": "magenta"}


def headline_lines(result: Result) -> list[Text]:
    """One line per level: ``label  headline``, the label coloured by the level's verdict."""
    lines = []
    for lv in result.levels:
        t = Text()
        t.append(lv.label, style=VERDICT_STYLE.get(lv.validity.verdict, ""))
        t.append("  ")
        t.append(F.headline(lv))
        lines.append(t)
    return lines


def _boundary_cell(be: BoundaryEnergy | None) -> Text:
    if be is None:
        return Text(F.MISSING, style="dim")
    t = Text()
    t.append(f"{F.fmt(be.avg_power_w)} W\n{F.fmt(be.output_tokens_per_s_per_kw)} tok/s/kW\n"
             f"{F.fmt(be.j_per_output_token)} J/tok\n")
    t.append(be.label, style=LABEL_STYLE.get(be.label, ""))
    return t


def summary_table(result: Result) -> Table:
    """Levels as rows; throughput, latency and every boundary side by side (each with its label)."""
    bounds = F.result_boundaries(result)
    table = Table(title=Text(f"wattbench {result.run_id}"), show_lines=True, header_style="bold",
                  box=box.SIMPLE_HEAD)
    for name, justify in (("level", "left"), ("verdict", "left"), ("ok/fail", "right"), ("out tok/s", "right"),
                          ("TTFT ms p50/p99", "right"), ("TPOT ms p50", "right")):
        table.add_column(name, justify=justify, min_width=7 if name == "level" else None)
    for b in bounds:
        table.add_column(Text(b), justify="left")
    if not bounds:
        table.add_column("energy")
    for lv in result.levels:
        L = lv.latency
        row: list[Any] = [
            Text(lv.label),
            Text(lv.validity.verdict, style=VERDICT_STYLE.get(lv.validity.verdict, "")),
            f"{lv.requests.completed}/{lv.requests.failed}",
            F.fmt(lv.throughput.output_tokens_per_s),
            f"{F.fmt(L.ttft_ms.p50)}/{F.fmt(L.ttft_ms.p99)}",
            F.fmt(L.tpot_ms.p50),
        ]
        if bounds:
            if lv.energy:
                row += [_boundary_cell(lv.energy.get(b)) for b in bounds]
            else:
                row += [Text(f"energy unavailable: {F.energy_unavailable_reason(lv)}", style="dim")] + [""] * (len(bounds) - 1)
        else:
            row.append(Text(f"energy unavailable: {F.energy_unavailable_reason(lv)}", style="dim"))
        table.add_row(*row)
    return table


def validity_lines(result: Result) -> list[Text]:
    """The run's verdict with its reasons, then each non-valid level's reasons."""
    v = result.validity
    out = [Text.assemble(("verdict: ", "bold"), (v.verdict, VERDICT_STYLE.get(v.verdict, "")))]
    for reason in [*v.reasons, *result.warnings, *result.sensor_problems]:
        out.append(Text(f"  - {reason}"))
    for lv in result.levels:
        if lv.validity.verdict != "valid":
            for reason in lv.validity.reasons:
                out.append(Text.assemble(("  " + lv.label, VERDICT_STYLE.get(lv.validity.verdict, "")),
                                         (f": {reason}", "")))
    return out


def power_split_lines(result: Result) -> list[Text]:
    """Per level with a memory-power reading, where the board's watts went (one line each)."""
    out = []
    for lv in result.levels:
        sp = lv.extra.get("power_split")
        if not sp:
            continue
        m, r = sp["parts"]["memory"], sp["parts"]["rest"]
        line = (f"{lv.label}  memory {F.fmt(m['avg_power_w'])} W ({100 * sp['memory_share']:.0f}% of the board's "
                f"{F.fmt(sp['board_avg_power_w'])} W), rest of board {F.fmt(r['avg_power_w'])} W")
        if m.get("dynamic_power_w") is not None and r.get("dynamic_power_w") is not None:
            line += (f"; idle {F.fmt(m['idle_power_w'])} + {F.fmt(r['idle_power_w'])} W, "
                     f"dynamic {F.fmt(m['dynamic_power_w'])} + {F.fmt(r['dynamic_power_w'])} W (memory + rest)")
        out.append(Text(line, style="dim"))
    return out


def run_summary(result: Result) -> RenderableType:
    """Validity first, then the table, then one headline per level (and where the watts went)."""
    return Group(*validity_lines(result), summary_table(result), *headline_lines(result),
                 *power_split_lines(result))


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
    tok = f"{F.fmt(output_tokens_per_s)} out tok/s"
    if power_w:
        watts = ", ".join(f"{F.fmt(power_w[b])} W ({b})" for b in F.boundary_order(power_w))
    else:
        watts = "no power reading"
    return {"tok_s": tok, "watts": watts}
