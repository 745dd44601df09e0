"""``wattbench plan``: roofline, rack density, power-first design and TCO from measured runs.

Thin: one function per command parses its flags, calls ``wattbench.planning.*`` and prints what
``report.plan`` renders (or ``--json``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Callable

import typer

if TYPE_CHECKING:
    from rich.console import RenderableType

from wattbench.cli.common import handle_errors
from wattbench.cli.options import command_options
from wattbench.config.plan import (DEFAULT_DECODE_BATCH, DEFAULT_DECODE_CONTEXT, PlanPowerFirstOptions, PlanRackOptions,
                                   PlanRooflineOptions, PlanTcoOptions)

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

def _echo_json(obj: dict[str, Any]) -> None:
    typer.echo(json.dumps(obj, indent=2, default=str))


def _print(renderables: list[RenderableType]) -> None:
    """Tables as they are; plain strings printed literally (no rich markup in names or paths)."""
    from rich.console import Console
    from rich.text import Text

    con = Console()
    for r in renderables:
        con.print(Text(r) if isinstance(r, str) else r)


def roofline_cmd(o: PlanRooflineOptions) -> None:
    """Memory- and compute-bound decode tokens/s, KV bytes per token, measured vs bound."""
    from wattbench.planning.hardware import load_hardware_table
    from wattbench.planning.roofline import roofline, roofline_for_result

    table = load_hardware_table(extra_files=o.hardware or ())
    if o.result is not None:
        from wattbench.planning.measured import load_run_or_tune

        r = roofline_for_result(
            load_run_or_tune(o.result), o.level, o.model, gpu=o.gpu, dtype=o.dtype, batch=o.batch, context=o.context,
            kv_dtype=o.kv_dtype, gpus=o.gpus, count_input_embedding=not o.strict_embedding, hardware=table,
        )
    else:
        if o.gpu is None:
            from wattbench.core.errors import UserError

            raise UserError("give --gpu (e.g. --gpu H200), or --result RUN to take it from a run")
        batch = o.batch if o.batch is not None else DEFAULT_DECODE_BATCH
        context = o.context if o.context is not None else DEFAULT_DECODE_CONTEXT
        r = roofline(o.model, o.gpu, dtype=o.dtype, batch=batch, context=context, kv_dtype=o.kv_dtype,
                     gpus=o.gpus, count_input_embedding=not o.strict_embedding, hardware=table)
    if o.as_json:
        _echo_json(r.to_dict())
        return
    from wattbench.report.plan import roofline_view

    _print(roofline_view(r))


def rack_cmd(o: PlanRackOptions) -> None:
    """Nodes per rack, cooling class, rack throughput and goodput, platforms side by side."""
    from wattbench.planning.hardware import load_hardware_table
    from wattbench.planning.rack import CoolingThresholds, parse_node_arg, plan_rack

    nodes = [parse_node_arg(x) for x in [*(o.node or []), *(o.more or [])]]
    plan = plan_rack(
        o.rack_kw, nodes, boundary=o.boundary, percentile=o.percentile, host_overhead_w=o.host_overhead_w,
        thresholds=CoolingThresholds(o.air_max_rack_kw, o.air_max_accelerator_w), headroom_pct=o.headroom_pct,
        hardware=load_hardware_table(extra_files=o.hardware or ()),
    )
    if o.as_json:
        _echo_json(plan.to_dict())
        return
    from wattbench.report.plan import rack_view

    _print(rack_view(plan))


def power_first_cmd(o: PlanPowerFirstOptions) -> None:
    """The mix of platforms and load levels that maximizes goodput under the power cap."""
    from wattbench.planning.power_first import parse_candidate_arg, parse_slo, power_first

    cands = [parse_candidate_arg(x, o.boundary) for x in [*(o.candidates or []), *(o.more or [])]]
    plan = power_first(o.site_kw, cands, slo=parse_slo(o.slo), headroom_pct=o.headroom_pct, percentile=o.percentile,
                       host_overhead_w=o.host_overhead_w, resolution_w=o.resolution_w)
    if o.as_json:
        _echo_json(plan.to_dict())
        return
    from wattbench.report.plan import power_first_view

    _print(power_first_view(plan))


def tco_cmd(o: PlanTcoOptions) -> None:
    """Electricity, rent, cooling, maintenance, amortization and cost per million tokens."""
    from wattbench.metrics.carbon_series import parse_carbon_intensity

    series = parse_carbon_intensity(o.carbon_intensity)
    from wattbench.core.errors import UserError
    from wattbench.planning.tco import tco, tokens_per_kwh_from_result

    extra_warnings: list[str] = []
    notes: list[str] = []
    inputs = o.inputs()
    if o.result is not None:
        if o.tokens_per_kwh is not None or o.tokens_per_s is not None:
            raise UserError("--result gives tokens per kWh; do not also give --tokens-per-kwh or --tokens-per-s")
        from wattbench.planning.measured import planning_boundary, load_run_or_tune

        res = load_run_or_tune(o.result)
        boundary = o.boundary or planning_boundary(res)
        from wattbench.planning.measured import choice_is_warning

        tokens_per_kwh, said = tokens_per_kwh_from_result(res, o.level, boundary)
        inputs = o.inputs(tokens_per_kwh=tokens_per_kwh)
        why, extra_warnings = said[0], said[1:]  # the first names the level read and why
        notes = [f"tokens per kWh from run {res.run_id} at the {boundary} boundary"]
        (extra_warnings.insert(0, why) if choice_is_warning(why) else notes.append(why))
    r = tco(inputs, carbon_intensity=series.mean_g_per_kwh() if series is not None else None)
    r.warnings = extra_warnings + r.warnings
    if o.as_json:
        _echo_json(r.to_dict())
        return
    from wattbench.report.plan import tco_view

    _print(tco_view(r, notes))


# (name, function) in the order `wattbench plan --help` lists them; each command's help is its docstring
COMMANDS: list[tuple[str, Callable[..., None]]] = [
    ("roofline", command_options("plan roofline", PlanRooflineOptions)(roofline_cmd)),
    ("rack", command_options("plan rack", PlanRackOptions)(rack_cmd)),
    ("power-first", command_options("plan power-first", PlanPowerFirstOptions)(power_first_cmd)),
    ("tco", command_options("plan tco", PlanTcoOptions)(tco_cmd)),
]


def register(app: typer.Typer) -> None:
    plan_app = typer.Typer(help=HELP, no_args_is_help=True, add_completion=False, rich_markup_mode=None)
    app.add_typer(plan_app, name="plan")
    for name, fn in COMMANDS:
        plan_app.command(name)(handle_errors(fn))
