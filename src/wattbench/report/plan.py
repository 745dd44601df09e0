"""Tables and lines of ``wattbench plan``: the decode roofline, the rack plan, the power-first mix and
the TCO. Renderers only (``planning/`` computes); each ``*_view`` gives what the command prints, in
order: a table that fits any width (``FitTable``), then plain lines (names and paths: shown as
text, never as markup) and warnings."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

from wattbench.core.numbers import fmt, fmt_pct


class FitTable:
    """A table that stays readable at any width: laid out as given where every cell fits on one line,
    else one block per row (each column as a "figure  value" line), or for a two-column list of
    figures one line per figure with a long value wrapped — nothing cut short."""

    def __init__(self, title: str, columns: list[str]):
        self.title, self.columns = title, columns
        self.rows: list[list[str]] = []

    def add_row(self, *cells: object) -> None:
        self.rows.append([str(getattr(c, "plain", c)) for c in cells])

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        widths = [max([len(h)] + [len(r[i]) for r in self.rows if i < len(r)]) for i, h in enumerate(self.columns)]
        if sum(widths) + 3 * len(widths) + 1 <= options.max_width:
            t = Table(title=Text(self.title), title_justify="left", box=box.SIMPLE_HEAD)
            for i, c in enumerate(self.columns):
                t.add_column(Text(c), justify="left" if i == 0 else "right", no_wrap=True)
            for r in self.rows:
                t.add_row(*[Text(x) for x in r])
            yield t
            return
        yield Text(self.title, style="italic")
        if len(self.columns) == 2:  # a list of figures: one line each, a long value wrapped at spaces
            g = Table.grid(padding=(0, 2))
            g.add_column(no_wrap=True)
            g.add_column(overflow="fold")
            for r in self.rows:
                g.add_row(Text(r[0]), Text(r[1] if len(r) > 1 else ""))
            yield g
            return
        for r in self.rows:  # narrow: one block per row, the first cell as its heading
            t = Table(title=Text(r[0], style="bold"), title_justify="left", box=box.SIMPLE, show_header=False)
            t.add_column(no_wrap=True)
            t.add_column(justify="right", overflow="fold")
            for h, v in zip(self.columns[1:], r[1:]):
                if v:
                    t.add_row(Text(h), Text(v))
            yield t


def _num(v: float | None, kind: str = "figure", unit: str = "") -> str:
    """A figure in the one number format (``core/numbers.py``)."""
    return fmt(v, unit, kind)


def warning_lines(ws: list[str]) -> list[Text]:
    """Each warning as a line headed ``warning:`` (in yellow)."""
    return [Text.assemble(("warning: ", "yellow"), w) for w in ws]


def roofline_view(r: Any) -> list[Any]:
    """``plan roofline`` (``planning.roofline.Roofline``): a figure-per-line table — bytes and FLOPs per
    step, the memory- and compute-bound tokens/s, the memory it needs, measured vs bound where a run
    was given — then its warnings."""
    t = FitTable(f"Decode roofline: {r.model} {r.dtype} on {r.gpus} × {r.gpu}", ["figure", "value"])
    rows = [
        ("batch × context", f"{r.batch} × {r.context}"),
        ("parameters", _num(r.params, "count")),
        ("weight bytes read / step", _num(r.weight_bytes / 1e9, unit="GB")),
        ("KV bytes per token", f"{_num(r.kv_bytes_per_token, 'count', 'B')} ({r.kv_dtype})"),
        ("KV bytes read / step", _num(r.kv_bytes_per_step / 1e9, unit="GB")),
        ("FLOPs per token", _num(r.flops_per_token / 1e9, unit="GFLOP")),
        ("memory-bound tokens/s", _num(r.memory_bound_tokens_per_s)),
        ("compute-bound tokens/s", _num(r.compute_bound_tokens_per_s)),
        ("bound tokens/s", f"{_num(r.bound_tokens_per_s)} ({r.limited_by}-bound)"),
        ("compute-bound from", f"batch {_num(r.crossover_batch, 'count')}" if r.crossover_batch
         else "no batch: memory-bound at any batch at this context"),
        ("memory needed / available", f"{_num(r.memory_required_bytes / 1e9)} / {_num(r.memory_capacity_bytes / 1e9, unit='GB')}"),
    ]
    if r.measured_tokens_per_s is not None:
        rows.append(("measured tokens/s", f"{_num(r.measured_tokens_per_s)} ({r.measured_from})"))
        rows.append(("measured / bound", fmt_pct(r.measured_pct_of_bound)))
    for a, b in rows:
        t.add_row(a, b)
    return [t, *warning_lines(r.warnings)]


def rack_view(plan: Any) -> list[Any]:
    """``plan rack`` (``planning.rack.RackPlan``): one row per platform (node power, nodes, rack power,
    GPUs, cooling, throughput, goodput, tokens/s per sized kW), then each platform's power source and
    cooling reasons, what the per-kW column divides by, and the warnings."""
    where = "each run's headline boundary" if plan.boundary == "auto" else plan.boundary
    t = FitTable(
        f"Rack plan: {plan.rack_kw:g} kW rack, {plan.headroom_pct:g}% headroom, {plan.percentile} power at {where}",
        ["platform", "node W", "nodes", "rack kW", "GPUs", "W/GPU", "cooling", "out tok/s", "goodput tok/s",
         f"tok/s per {plan.percentile} kW"],
    )
    notes: list[str] = []
    ws: list[str] = []
    for r in plan.rows:
        # a node without GPUs has none in the rack: "none", never a count of nodes
        t.add_row(Text(r.name), _num(r.node_power_w), _num(r.nodes_per_rack, "count"), _num(r.rack_power_w / 1000),
                  _num(r.gpus_per_rack, "count") if r.gpus_per_rack else "none", _num(r.accelerator_w),
                  r.cooling, _num(r.rack_output_tokens_per_s), _num(r.rack_goodput_output_tokens_per_s),
                  _num(r.output_tokens_per_s_per_kw))
        notes += [f"{r.name}: node power = {r.power_source}; cooling: {'; '.join(r.cooling_reasons)}", *r.notes]
        ws += r.warnings
    notes.append(f"tok/s per {plan.percentile} kW divides rack throughput by the rack's {plan.percentile} power "
                 "(what it is sized for), not the run's average power: it is not the run's headline tok/s/kW")
    return [t, *notes, *warning_lines(ws)]


def power_first_view(plan: Any) -> list[Any]:
    """``plan power-first`` (``planning.power_first.PowerFirstPlan``): one row per allocation
    (platform, level, nodes, power, value) and the total, then the power left unallocated, the
    candidates left out and the warnings."""
    t = FitTable(
        f"Power-first: {plan.site_kw:g} kW site, {plan.headroom_pct:g}% headroom "
        f"(budget {_num(plan.budget_w / 1000)} kW), {plan.percentile} power",
        ["platform", "level", "node W", "nodes", "kW", "value tok/s", "kind"],
    )
    for a in plan.allocations:
        o = a.option
        t.add_row(Text(o.name), Text(o.level_label), _num(o.node_power_w), _num(a.nodes, "count"),
                  _num(a.power_w / 1000), _num(a.value_output_tokens_per_s), o.value_kind)
    t.add_row("total", "", "", "", _num(plan.total_power_w / 1000),
              _num(plan.total_value_output_tokens_per_s), "")
    lines = [f"unallocated: {_num(plan.unallocated_w / 1000)} kW (headroom + remainder)"]
    lines += [f"left out: {e}" for e in plan.excluded]
    return [t, *lines, *warning_lines(plan.warnings)]


def tco_view(r: Any, notes: list[str]) -> list[Any]:
    """``plan tco`` (``planning.tco.TCO``): the cost items per period and their total, then the
    energy per year, the cost per million output tokens and the carbon where known, ``notes`` (where
    the tokens per kWh came from) and the warnings."""
    t = FitTable(f"TCO per {r.period} ({r.currency}): {_num(r.it_kw)} kW IT at load {r.load:g}, PUE {r.pue:g}",
                 ["item", f"per {r.period}"])
    for k, v in r.costs_per_period.items():
        t.add_row(k.replace("_", " "), _num(v, "money"))
    t.add_row("total", _num(r.total_cost_per_period, "money"))
    lines = [f"energy: {fmt(r.it_energy_kwh_per_year)} IT kWh/year, {fmt(r.facility_energy_kwh_per_year)} "
             "facility kWh/year"]
    if r.cost_per_million_tokens is not None:
        lines.append(f"cost per million output tokens: {fmt(r.cost_per_million_tokens)} {r.currency} "
                     f"(electricity only {fmt(r.electricity_cost_per_million_tokens)}); tokens from {r.tokens_source}")
    if r.carbon_tonnes_per_year is not None:
        s = (f"carbon: {fmt(r.carbon_tonnes_per_year)} t CO2e/year at {fmt(r.carbon_intensity_g_per_kwh)} g/kWh "
             f"(beside {fmt(r.total_cost_per_year)} {r.currency}/year)")
        if r.carbon_g_per_million_tokens is not None:
            s += f"; {fmt(r.carbon_g_per_million_tokens)} gCO2e per million output tokens"
        lines.append(s)
    return [t, *lines, *notes, *warning_lines(r.warnings)]
