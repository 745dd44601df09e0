"""``wattbench plan``: roofline, rack density, power-first design and TCO from measured runs.

Thin: one function per command parses its flags, calls ``wattbench.planning.*`` and prints what
``report.plan`` renders (or ``--json``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Callable, List, Optional

import typer

if TYPE_CHECKING:
    from rich.console import RenderableType

from wattbench.cli.common import handle_errors

HELP = """Plan from measurements: decode roofline, rack density, power-first design, TCO.

Examples:

\b
  wattbench plan roofline --model llama-8b --gpu H200 --dtype bf16 \\
      --batch 1 --context 1024
  wattbench plan rack --rack-kw 15 --node runs/h200 \\
      --node name=L40S-box,gpu=L40S,gpus=4,host_overhead_w=600
  wattbench plan power-first --site-kw 1000 \\
      --candidates runs/h200 runs/mi300x --slo ttft_p95=500ms
  wattbench plan tco --it-kw 10000 --load 0.7 --price-per-kwh 0.6 \\
      --pue 1 --json
"""

# the wording each planning command gives its shared options (one home per option's help)
BOUNDARY_HELP = ("Power boundary: accelerator, node or wall (default: the run's headline boundary among those, "
                 "the one rule of run, compare, tune and plan).")
PERCENTILE_HELP = "p95 or p99 (also max, avg)."


def _echo_json(obj: dict[str, Any]) -> None:
    typer.echo(json.dumps(obj, indent=2, default=str))


def _print(renderables: list[RenderableType]) -> None:
    """Tables as they are; plain strings printed literally (no rich markup in names or paths)."""
    from rich.console import Console
    from rich.text import Text

    con = Console()
    for r in renderables:
        con.print(Text(r) if isinstance(r, str) else r)


def roofline_cmd(
    model: str = typer.Option(..., "--model", help="Preset (llama-1b, llama-8b, qwen-7b, llama-70b) or an HF config.json / model directory."),
    gpu: Optional[str] = typer.Option(None, "--gpu", help="GPU name from the hardware table (H200, h100-sxm, MI300X …). Default with --result: the run's GPU."),
    dtype: str = typer.Option("bf16", "--dtype", help="Weight dtype: bf16, fp16, fp8, int8, int4 (int8/int4 weight-only)."),
    kv_dtype: Optional[str] = typer.Option(None, "--kv-dtype", help="KV-cache dtype (default: the weight dtype; bf16 for int8/int4)."),
    batch: Optional[int] = typer.Option(None, "--batch", help="Sequences decoded together (default 1; with --result the level's concurrency)."),
    context: Optional[int] = typer.Option(None, "--context", help="Tokens in each sequence's KV cache (default 0; with --result mean input + half mean output)."),
    gpus: int = typer.Option(1, "--gpus", help="GPUs the model is split over (tensor parallel; bandwidth and FLOP/s add up)."),
    result: Optional[str] = typer.Option(None, "--result", help="A run directory: report measured output tokens/s vs the bound."),
    level: int = typer.Option(0, "--level", help="Level index in --result."),
    strict_embedding: bool = typer.Option(False, "--strict-embedding", help="Count only the input-embedding rows a step reads (default: all stored weights, the usual convention)."),
    hardware: Optional[List[str]] = typer.Option(None, "--hardware", help="Extra hardware table file(s) merged over the shipped one."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Memory- and compute-bound decode tokens/s, KV bytes per token, measured vs bound."""
    from wattbench.planning.hardware import load_hardware_table
    from wattbench.planning.roofline import roofline, roofline_for_result

    table = load_hardware_table(extra_files=hardware or ())
    if result is not None:
        from wattbench.planning.measured import load_result

        r = roofline_for_result(
            load_result(result), level, model, gpu=gpu, dtype=dtype, batch=batch, context=context,
            kv_dtype=kv_dtype, gpus=gpus, count_input_embedding=not strict_embedding, hardware=table,
        )
    else:
        if gpu is None:
            from wattbench.core.errors import UserError

            raise UserError("give --gpu (e.g. --gpu H200), or --result RUN to take it from a run")
        r = roofline(model, gpu, dtype=dtype, batch=batch or 1, context=context or 0, kv_dtype=kv_dtype,
                     gpus=gpus, count_input_embedding=not strict_embedding, hardware=table)
    if as_json:
        _echo_json(r.to_dict())
        return
    from wattbench.report.plan import roofline_view

    _print(roofline_view(r))


def rack_cmd(
    rack_kw: float = typer.Option(..., "--rack-kw", help="Power budget of one rack in kW."),
    node: Optional[List[str]] = typer.Option(None, "--node", help="A run directory, run=DIR,level=I,gpus=N,name=X, or a spec name=X,power_w=W | accelerator_w=W,gpus=N | gpu=H200,gpus=N [,host_overhead_w=W,tokens_per_s=T,goodput_tokens_per_s=G]. Repeatable."),
    more: Optional[List[str]] = typer.Argument(None, metavar="NODE", help="More --node values."),
    boundary: Optional[str] = typer.Option(None, "--boundary", help=BOUNDARY_HELP),
    percentile: str = typer.Option("p95", "--percentile", help=PERCENTILE_HELP),
    host_overhead_w: Optional[float] = typer.Option(None, "--host-overhead-w", help="Declared host power per node (CPU, memory, fans, NICs) added to accelerator power."),
    headroom_pct: float = typer.Option(0.0, "--headroom-pct", help="Percent of the rack budget kept free."),
    air_max_rack_kw: float = typer.Option(20.0, "--air-max-rack-kw", help="Above this populated rack power: liquid cooling."),
    air_max_accelerator_w: float = typer.Option(1000.0, "--air-max-accelerator-w", help="Above this power per accelerator: liquid cooling."),
    hardware: Optional[List[str]] = typer.Option(None, "--hardware", help="Extra hardware table file(s)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Nodes per rack, cooling class, rack throughput and goodput, platforms side by side."""
    from wattbench.planning.hardware import load_hardware_table
    from wattbench.planning.rack import CoolingThresholds, parse_node_arg, plan_rack

    nodes = [parse_node_arg(x) for x in [*(node or []), *(more or [])]]
    plan = plan_rack(
        rack_kw, nodes, boundary=boundary, percentile=percentile, host_overhead_w=host_overhead_w,
        thresholds=CoolingThresholds(air_max_rack_kw, air_max_accelerator_w), headroom_pct=headroom_pct,
        hardware=load_hardware_table(extra_files=hardware or ()),
    )
    if as_json:
        _echo_json(plan.to_dict())
        return
    from wattbench.report.plan import rack_view

    _print(rack_view(plan))


def power_first_cmd(
    site_kw: float = typer.Option(..., "--site-kw", help="Site (or hall) IT power cap in kW."),
    candidates: Optional[List[str]] = typer.Option(None, "--candidates", help="A run directory or run=DIR,boundary=B,name=X,gpus=N. Repeatable."),
    more: Optional[List[str]] = typer.Argument(None, metavar="RUN", help="More candidate run directories."),
    slo: Optional[str] = typer.Option(None, "--slo", help="Latency limits, as for run: ttft_p95=500ms,tpot_p95=50ms."),
    headroom_pct: float = typer.Option(10.0, "--headroom-pct", help="Percent of site power kept unallocated."),
    boundary: Optional[str] = typer.Option(None, "--boundary", help=BOUNDARY_HELP),
    percentile: str = typer.Option("p95", "--percentile", help=PERCENTILE_HELP),
    host_overhead_w: Optional[float] = typer.Option(None, "--host-overhead-w", help="Declared host power per node."),
    resolution_w: Optional[float] = typer.Option(None, "--resolution-w", help="DP power step in W (default: 1 W, coarser above 200 kW)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """The mix of platforms and load levels that maximizes goodput under the power cap."""
    from wattbench.planning.power_first import parse_candidate_arg, parse_slo, power_first

    cands = [parse_candidate_arg(x, boundary) for x in [*(candidates or []), *(more or [])]]
    plan = power_first(site_kw, cands, slo=parse_slo(slo), headroom_pct=headroom_pct, percentile=percentile,
                       host_overhead_w=host_overhead_w, resolution_w=resolution_w)
    if as_json:
        _echo_json(plan.to_dict())
        return
    from wattbench.report.plan import power_first_view

    _print(power_first_view(plan))


def tco_cmd(
    it_kw: float = typer.Option(..., "--it-kw", help="IT power in kW (nameplate or planned)."),
    price_per_kwh: float = typer.Option(..., "--price-per-kwh", help="Electricity price per kWh."),
    load: float = typer.Option(1.0, "--load", help="Average fraction of IT power drawn (0-1]."),
    hours: float = typer.Option(8760.0, "--hours", help="Operating hours per year."),
    pue: float = typer.Option(1.0, "--pue", help="Facility power / IT power (includes cooling energy)."),
    rack_rent_per_month: float = typer.Option(0.0, "--rack-rent-per-month", help="Rent per rack per month."),
    racks: int = typer.Option(0, "--racks", help="Number of racks rented."),
    cooling_cost_per_kwh: float = typer.Option(0.0, "--cooling-cost-per-kwh", help="Cooling billed per IT kWh, only if NOT in the PUE."),
    maintenance_pct_per_year: float = typer.Option(0.0, "--maintenance-pct-per-year", help="Maintenance per year, % of hardware cost."),
    hardware_cost: float = typer.Option(0.0, "--hardware-cost", help="Purchase cost of the hardware."),
    amortization_years: Optional[float] = typer.Option(None, "--amortization-years", help="Straight-line amortization period."),
    currency: str = typer.Option("USD", "--currency", help="Currency label."),
    period: str = typer.Option("year", "--period", help="year or month."),
    tokens_per_s: Optional[float] = typer.Option(None, "--tokens-per-s", help="Fleet output tokens/s at full load (for cost per million tokens)."),
    tokens_per_kwh: Optional[float] = typer.Option(None, "--tokens-per-kwh", help="Output tokens per IT kWh (measured efficiency)."),
    result: Optional[str] = typer.Option(None, "--result", help="Take tokens per kWh from a run directory."),
    level: Optional[int] = typer.Option(None, "--level", help="Level in --result (default: most efficient valid level)."),
    boundary: Optional[str] = typer.Option(None, "--boundary", help=BOUNDARY_HELP),
    carbon_intensity: Optional[str] = typer.Option(None, "--carbon-intensity", help="Grid gCO2e/kWh, or a CSV/JSON series (its time-weighted mean): annual tonnes beside the cost."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Electricity, rent, cooling, maintenance, amortization and cost per million tokens."""
    from wattbench.metrics.carbon_series import parse_carbon_intensity

    series = parse_carbon_intensity(carbon_intensity)
    from wattbench.core.errors import UserError
    from wattbench.planning.tco import tco, tokens_per_kwh_from_result

    extra_warnings: list[str] = []
    notes: list[str] = []
    if result is not None:
        if tokens_per_kwh is not None or tokens_per_s is not None:
            raise UserError("--result gives tokens per kWh; do not also give --tokens-per-kwh or --tokens-per-s")
        from wattbench.planning.measured import default_boundary, load_result

        res = load_result(result)
        boundary = boundary or default_boundary(res)
        from wattbench.planning.measured import choice_is_warning

        tokens_per_kwh, said = tokens_per_kwh_from_result(res, level, boundary)
        why, extra_warnings = said[0], said[1:]  # the first names the level read and why
        notes = [f"tokens per kWh from run {res.run_id} at the {boundary} boundary"]
        (extra_warnings.insert(0, why) if choice_is_warning(why) else notes.append(why))
    r = tco(it_kw, price_per_kwh, load=load, hours=hours, pue=pue, rack_rent_per_month=rack_rent_per_month,
            racks=racks, cooling_cost_per_kwh=cooling_cost_per_kwh,
            maintenance_pct_per_year=maintenance_pct_per_year, hardware_cost=hardware_cost,
            amortization_years=amortization_years, currency=currency, period=period,  # type: ignore[arg-type]
            tokens_per_kwh=tokens_per_kwh, tokens_per_s=tokens_per_s,
            carbon_intensity=series.mean_g_per_kwh() if series is not None else None)
    r.warnings = extra_warnings + r.warnings
    if as_json:
        _echo_json(r.to_dict())
        return
    from wattbench.report.plan import tco_view

    _print(tco_view(r, notes))


# (name, function) in the order `wattbench plan --help` lists them; each command's help is its docstring
COMMANDS: list[tuple[str, Callable[..., None]]] = [("roofline", roofline_cmd), ("rack", rack_cmd), ("power-first", power_first_cmd), ("tco", tco_cmd)]


def register(app: typer.Typer) -> None:
    plan_app = typer.Typer(help=HELP, no_args_is_help=True, add_completion=False, rich_markup_mode=None)
    app.add_typer(plan_app, name="plan")
    for name, fn in COMMANDS:
        plan_app.command(name)(handle_errors(fn))
