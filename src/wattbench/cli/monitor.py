"""``wattbench monitor``: passive production efficiency of a running server.

Thin: parse flags, build a ``wattbench.monitor.service.Monitor``, show a live table (rich Live) or
nothing, print the final summary (table or ``--json``).
"""

from __future__ import annotations

import json
import signal
from typing import TYPE_CHECKING

import typer

from wattbench.cli.common import handle_errors
from wattbench.cli.options import command_options
from wattbench.config.commands import MonitorOptions
from wattbench.core.errors import UserError
from wattbench.core.interrupt import handler_during

if TYPE_CHECKING:
    from wattbench.monitor.snapshot import MonitorSnapshot
    from rich.table import Table

HELP = """Watch a running server's efficiency: tokens/s, J/token and tokens per kWh per power
boundary, live, over sliding windows, with idle vs loaded segmentation.

Scrapes the server's /metrics token counters and reads the power sensors; serves Prometheus
metrics on --listen and appends a JSONL history. Ctrl-C stops cleanly.

Examples:

\b
  wattbench monitor --target http://127.0.0.1:8000 --sensor nvml
  wattbench monitor --target http://10.0.0.5:8000 \\
      --sensor dcgm:http://10.0.0.5:9400/metrics \\
      --history soak.jsonl --duration 604800 --listen 0.0.0.0:9464
"""


def _fmt(v: float | int | None, kind: str = "figure") -> str:
    """A figure in the one number format (``core/numbers.py``)."""
    from wattbench.core.numbers import fmt

    return fmt(v, kind=kind)


def _table(snap: MonitorSnapshot) -> Table:
    """The live (and final) table of a monitor snapshot: each window's output tokens/s and, per
    boundary, its power, J per output token and tokens per kWh; idle/loaded power and source errors below."""
    from rich.table import Table
    from rich.text import Text

    wins = snap.windows
    bounds = sorted({b for f in wins.values() for b in (f.get("energy_j") or {})})
    t = Table(title=f"wattbench monitor  t={_fmt(snap.t_s, 'count')} s  state={snap.state or '-'}  "
                    f"running={_fmt(snap.running, 'count')}", title_justify="left")
    t.add_column("window")
    t.add_column("out tok/s", justify="right")
    for b in bounds:
        t.add_column(f"{b} W", justify="right")
        t.add_column(f"{b} J/tok", justify="right")
        t.add_column(f"{b} tok/kWh", justify="right")
    for label, f in wins.items():
        row = [Text(label), Text(_fmt(f.get("output_tokens_per_s")))]
        for b in bounds:
            row += [Text(_fmt((f.get("power_w") or {}).get(b))),
                    Text(_fmt((f.get("j_per_output_token") or {}).get(b))),
                    Text(_fmt((f.get("output_tokens_per_kwh") or {}).get(b)))]
        t.add_row(*row)
    idle = snap.idle_power_w
    loaded = snap.loaded_power_w
    if idle or loaded:
        t.caption = "idle W: " + ", ".join(f"{b} {_fmt(v)}" for b, v in idle.items()) + \
                    "   loaded W: " + ", ".join(f"{b} {_fmt(v)}" for b, v in loaded.items())
    errs = [f"{k}: {v['errors']} errors, last: {v['last_error']}" for k, v in snap.sources.items()
            if v.get("errors")]
    if errs:
        t.caption = ((t.caption + "\n") if t.caption else "") + "\n".join(errs)
    return t


def register(app: typer.Typer) -> None:
    @app.command("monitor", help=HELP)
    @handle_errors
    @command_options("monitor", MonitorOptions)
    def monitor_cmd(o: MonitorOptions) -> None:
        from wattbench.cli.common import read_api_key

        api_key = read_api_key(o.api_key.get_secret_value() if o.api_key is not None else None, o.api_key_file)
        listen, history_max_mb = o.listen, o.history_max_mb
        from wattbench.cli.common import stdout_is_tty
        from wattbench.monitor.service import Monitor

        mon = Monitor(o.target, list(o.sensors), interval_s=o.interval_s,
                      listen=None if listen.strip().lower() in ("off", "none", "") else listen,
                      history_path=o.history, idle_threshold_tok_s=o.idle_threshold, api_key=api_key,
                      history_max_bytes=int(history_max_mb * 1e6) if history_max_mb else None)
        said: set[str] = set()

        def say_problems(snap: MonitorSnapshot) -> None:
            """Each problem on stderr as soon as it is known (a server without /metrics: at once)."""
            for p in snap.problems:
                if p not in said:
                    said.add(p)
                    typer.echo(f"wattbench: warning: {p}", err=True)

        # SIGTERM stops the monitor; the caller's handler is back after it is closed, even where closing fails
        with handler_during(signal.SIGTERM, lambda *_: mon.stop()):
            try:
                mon.start()
                say_problems(mon.latest())
                if o.live and not o.quiet and not o.as_json and stdout_is_tty():
                    from rich.live import Live

                    def tick(s: MonitorSnapshot) -> None:
                        say_problems(s)
                        lv.update(_table(s))

                    with Live(_table(mon.latest()), refresh_per_second=2, transient=False) as lv:
                        summary = mon.run(o.duration_s, on_tick=tick)
                else:
                    summary = mon.run(o.duration_s, on_tick=say_problems)
            finally:
                summary = mon.close()
        if o.as_json:
            typer.echo(json.dumps(summary, indent=2, default=str))
        else:
            from rich.console import Console
            from rich.text import Text

            con = Console()
            con.print(_table(mon.latest()))
            for p in summary.get("problems") or []:
                if p not in said:  # each said once
                    con.print(Text.assemble(("warning: ", "yellow"), p))
        if mon.history is not None and mon.history.failed is not None:
            raise typer.Exit(code=UserError.exit_code)  # the history could not be written: said above
