"""``wattbench sensors``: list the power meters this machine has, read each once, measure how
often each updates. Rendering only; ``wattbench.telemetry.detect.inventory`` does the work."""

from __future__ import annotations

import json
from typing import Any

import typer

from wattbench.cli.common import handle_errors
from wattbench.cli.options import command_options
from wattbench.config.commands import SensorsOptions
from wattbench.core.numbers import fmt


def _fmt(v: float | None, unit: str) -> str:
    if v is None:
        return "-"
    if unit == "bitmask":
        return hex(int(v))
    if unit == "B":
        return f"{fmt(v / 2**30)} GiB"
    return fmt(v, unit)  # the one number format (core/numbers.py)


def _period(d: dict[str, Any]) -> str:
    p = d.get("measured_update_s")
    if p is None:
        return f"no change in {d.get('measure_s', 0):g} s" if d.get("reads") else "not read"
    return fmt(p * 1000, "ms") if p < 10 else fmt(p, "s")


def register(app: typer.Typer) -> None:
    @app.command("sensors")
    @handle_errors
    @command_options("sensors", SensorsOptions)
    def sensors(o: SensorsOptions) -> None:
        """List each power meter and channel with boundary, kind, unit, method, a value and its update period."""
        from wattbench.core.errors import SensorError
        from wattbench.telemetry.detect import inventory

        sensor = o.sensors
        kw = {} if sensor else {"estimate_cpu": o.estimate_cpu}
        rows = inventory(list(sensor), measure_s=o.measure_s, **kw)
        # the meters asked for by name gave nothing to read: say why and exit non-zero
        nothing = bool(sensor) and not any(r["type"] == "channel" for r in rows)
        if o.as_json:
            typer.echo(json.dumps(rows, indent=2))
            if nothing:
                raise typer.Exit(SensorError.exit_code)
            return
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text

        console = Console()
        chans = [r for r in rows if r["type"] == "channel"]
        problems = [r["problem"] for r in rows if r["type"] == "problem"]
        if chans:
            wide = console.width >= 140
            t = Table(title="Power meters on this machine", show_lines=False)
            for col in ("channel", "boundary", "kind", "method", "value", "update", "read") + (("source",) if wide else ()):
                t.add_column(col, overflow="fold")
            for r in chans:
                primary = " *" if r.get("primary") else ""
                t.add_row(
                    r["id"] + primary, r.get("boundary") or "-", r["kind"], r["method"], _fmt(r.get("value"), r["unit"]),
                    _period(r), fmt(r.get("read_ms"), "ms"),
                    *((r.get("source", ""),) if wide else ()),
                )
            console.print(t)
            console.print("* primary channel for its boundary and device")
        elif not nothing:
            console.print("No power meter could be read on this machine.")
        if not nothing:  # else the error line on stderr says them: each problem once
            for p in problems:
                console.print(Text.assemble(("problem: ", "yellow"), p), highlight=False)  # p shown as typed
        if nothing:
            why = "; ".join(problems) or "no channel answered"
            typer.echo(f"wattbench: error: --sensor {', '.join(sensor or [])}: nothing readable ({why})", err=True)
            raise typer.Exit(SensorError.exit_code)
