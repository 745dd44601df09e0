"""``wattbench ab A B``: parse the two sides and the run options into an ``AbConfig``, call
``run.ab.run_ab``, render the paired answer (``report/ab.py``)."""

from __future__ import annotations

import os
import sys

import typer

from wattbench.cli.common import handle_errors
from wattbench.cli.options import CommandOptions, Given, borrowed, options, options_in
from wattbench.cli.run import config_from
from wattbench.config.flags import AB, RUN
from wattbench.config.run import RunConfig
from wattbench.config.run_commands import AB_LEAVES_OUT, AbConfig
from wattbench.core.interrupt import sigterm_as_ctrl_c

HELP = """Measure two servers (or two engine starts) in pairs, alternately A B B A …, over the same levels, and
answer whether B gives more tokens per kW than A: the ratio, throughput × power, and its interval from the pairs,
so drift common to both cancels. Both runs are written and registered; `compare` and `report` read them.
One machine's meters read both: their idle power (both servers resident, neither loaded) is measured before the
first pair and again after each block of pairs, for --idle seconds each (the extra time per block; --idle 0 skips
it), and shown with its share of each side's power, which the ratio includes.

Examples:

\b
  wattbench ab http://127.0.0.1:8000 http://127.0.0.1:8001 -c 16 -d 20
  wattbench ab engine engine-defaults -m llama-1b -c 16 -d 15 --precision 2
  wattbench ab "engine:--cb-max-batch-tokens 2048" engine -c 8 -n 64
"""

MODELS = (AbConfig, RunConfig, CommandOptions)
OPTIONS = borrowed(options(AB, AbConfig), RUN, RunConfig, CommandOptions, leave_out=AB_LEAVES_OUT)


def register(app: typer.Typer) -> None:
    @app.command("ab", help=HELP)
    @handle_errors
    @options_in(AB, OPTIONS, MODELS)
    @sigterm_as_ctrl_c()  # SIGTERM stops the comparison as Ctrl-C does
    def ab(given: Given) -> None:
        run_fields = dict(given[RunConfig])
        run_fields["targets"] = []
        run_cfg = config_from({RunConfig: run_fields, CommandOptions: given[CommandOptions]})
        config = AbConfig(**given[AbConfig], run=run_cfg)
        as_json, quiet = given[CommandOptions]["as_json"], given[CommandOptions]["quiet"]
        from rich.console import Console

        from wattbench.cli.progress import run_progress
        from wattbench.core.errors import Interrupted
        from wattbench.run.ab import run_ab

        err_console, out_console = Console(stderr=True), Console(highlight=False, soft_wrap=True)
        display = run_progress(err_console if as_json else out_console, quiet,
                               sys.stderr.isatty() or os.environ.get("WATTBENCH_PROGRESS") == "1")
        try:
            with display:
                outcome = run_ab(config, progress=display.update)
        except Interrupted as e:
            typer.echo(f"wattbench: {e}", err=True)
            raise typer.Exit(130) from None
        cmp = outcome.comparison
        if as_json:
            import json

            data = {"comparison": cmp.model_dump(mode="json"),
                    "run_dirs": [str(outcome.run_dir_a), str(outcome.run_dir_b)]}
            sys.stdout.write(json.dumps(data, indent=2) + "\n")
            return
        from wattbench.report.ab import render_ab

        render_ab(cmp, [outcome.a, outcome.b], [str(outcome.run_dir_a), str(outcome.run_dir_b)],
                  [config.side_a, config.side_b], out_console)
