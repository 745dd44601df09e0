"""``wattbench doctor``: environment, server, release checklist and troubleshooting checks.

Thin: parse flags, call ``wattbench.doctor.service.run_doctor``, render a table or ``--json``.
Exit code 0 when no check failed, 1 when one did, 2 on bad input.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import typer

from wattbench.cli.common import handle_errors
from wattbench.cli.options import command_options
from wattbench.config.commands import DoctorOptions

if TYPE_CHECKING:
    from rich.console import Console

    from wattbench.doctor.check import DoctorReport

HELP = """Check the machine, a server and a deployment before (or after) measuring.

Read only: nothing here changes a GPU or server setting (except --restore, which puts back the
settings a killed `wattbench tune` left changed). Exit code 0 when no check fails,
1 when one does, 2 on bad input.

Examples:

\b
  wattbench doctor
  wattbench doctor --target http://127.0.0.1:8000 \\
      --exporter http://127.0.0.1:9400/metrics
  wattbench doctor --target http://127.0.0.1:8000 \\
      --checklist release.yaml --json
  wattbench doctor --run wattbench-results/2026-11-29T10-00-00 --no-env
"""

STYLE = {"pass": "green", "warn": "yellow", "fail": "bold red", "skip": "dim"}


def register(app: typer.Typer) -> None:
    @app.command("doctor", help=HELP)
    @handle_errors
    @command_options("doctor", DoctorOptions)
    def doctor_cmd(o: DoctorOptions) -> None:
        from wattbench.cli.common import read_api_key

        api_key = read_api_key(o.api_key.get_secret_value() if o.api_key is not None else None, o.api_key_file)
        if o.restore:
            from wattbench.tune.gpu import restore_pending, state_path

            done = restore_pending()
            typer.echo("; ".join(done) if done else f"nothing to restore (no {state_path()})")
            raise typer.Exit(0)
        from wattbench.doctor.service import run_doctor

        report = run_doctor(o.target, list(o.sensors), api_key=api_key, run_dir=o.run, checklist=o.checklist,
                            exporters=list(o.exporter), burst=o.burst, environment=o.env)
        if o.as_json:
            typer.echo(json.dumps(report.to_dict(), indent=2, default=str))
        else:
            _render(report)
        raise typer.Exit(report.exit_code)


NARROW_BELOW = 120  # console columns below which doctor prints a list, not a four-column table


def _render(report: DoctorReport, console: Console | None = None) -> None:
    """The checks as a table at 120 columns or more; below, as a list (status, then the check and its
    message wrapped at spaces, the fix on its own line), so no word is cut and the lines stay few."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    con = console or Console()
    if con.width >= NARROW_BELOW:
        t = Table(title="wattbench doctor", title_justify="left", show_lines=False)
        for col in ("status", "check", "message", "fix"):
            t.add_column(col, overflow="fold")
        group = None
        for c in report.checks:
            if c.group != group:
                group = c.group
                t.add_row(Text(""), Text(group, style="bold"), Text(""), Text(""))
            t.add_row(Text(c.status.upper(), style=STYLE[c.status]), Text(c.id), Text(c.message), Text(c.fix))
        con.print(t)
    else:
        con.print(Text("wattbench doctor", style="bold"))
        group = None
        for c in report.checks:
            if c.group != group:
                group = c.group
                con.print(Text(group, style="bold"))
            grid = Table.grid(padding=(0, 1))
            grid.add_column(width=4, no_wrap=True)
            grid.add_column(overflow="fold")
            body = Text.assemble((c.id, "bold"), " ", c.message)
            if c.fix:
                body.append("\nfix: ", style="dim")
                body.append(c.fix)
            grid.add_row(Text(c.status.upper(), style=STYLE[c.status]), body)
            con.print(grid)
    n = report.counts()
    con.print(Text(f"{n['pass']} pass, {n['warn']} warn, {n['fail']} fail, {n['skip']} skip"))
