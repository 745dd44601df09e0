"""``wattbench run``: parse flags into a RunConfig, call ``run_benchmark``, render progress and summary."""

from __future__ import annotations

import os
import sys
from typing import Optional

import typer

from wattbench.cli.common import handle_errors, read_api_key
from wattbench.cli.options import CommandOptions, Given, options_from
from wattbench.config.run import RunConfig
from wattbench.core.interrupt import sigterm_as_ctrl_c

HELP = """Benchmark an OpenAI-compatible server (or the embedded engine when no --target is given).

Examples:

\b
  wattbench run                            # embedded engine, default load
  wattbench run -t http://127.0.0.1:8000 -c 1,8,64 -n 200
  wattbench run -t http://host:8000/v1 --rate 2,4,8 --duration 60
  wattbench run -t URL -c 1,8,64 --slo ttft_p99=500ms,tpot_p99=50ms
"""


def _parse_warmup(value: Optional[str]) -> tuple[Optional[float], Optional[int]]:
    """``10s`` = ten seconds, ``10`` = ten requests."""
    from wattbench.core.errors import UserError

    if value is None or value == "":
        return None, None
    v = value.strip().lower()
    try:
        if v.endswith("s"):
            secs = float(v[:-1])
            if secs < 0:
                raise ValueError
            return secs, None
        n = int(v)
        if n < 0:
            raise ValueError
        return None, n
    except ValueError:
        raise UserError(f"--warmup {value!r}: give seconds like 10s or a number of requests like 20") from None


def config_from(given: Given) -> RunConfig:
    """The RunConfig of ``run``'s options: what one option gives two fields is read here (the API
    key or its file; ``--warmup`` seconds or requests; one ``--target`` is ``target``, several are
    replicas; ``--model`` with no ``--target`` names the engine's model)."""
    fields = dict(given[RunConfig])
    fields["api_key"] = read_api_key(fields["api_key"], given[CommandOptions]["api_key_file"]) or None
    fields["warmup_s"], fields["warmup_requests"] = _parse_warmup(fields["warmup_s"])
    targets = fields["targets"]
    fields["target"] = targets[0] if targets else None
    fields["targets"] = targets if len(targets) > 1 else []
    if not targets and fields["model"] is not None:
        fields["engine_model"], fields["model"] = fields["model"], None
    return RunConfig(**fields)


def register(app: typer.Typer) -> None:
    @app.command("run", help=HELP)
    @handle_errors
    @options_from("run", RunConfig, CommandOptions)
    @sigterm_as_ctrl_c()  # SIGTERM stops the run as Ctrl-C does and keeps what it measured
    def run(given: Given) -> None:
        from wattbench.core.errors import Interrupted

        config = config_from(given)
        as_json, quiet = given[CommandOptions]["as_json"], given[CommandOptions]["quiet"]
        from wattbench.cli.progress import run_progress
        from wattbench.report.terminal import run_summary

        from rich.console import Console

        err_console = Console(stderr=True)
        out_console = Console()
        # bars on a terminal; plain lines on stderr where it is not one (a CI log, nohup)
        display = run_progress(err_console if as_json else out_console, quiet,
                               sys.stderr.isatty() or os.environ.get("WATTBENCH_PROGRESS") == "1")
        from wattbench.run import run_benchmark

        from wattbench.core.errors import WattbenchError
        from wattbench.run.session import run_dir_path

        try:
            with display:
                result = run_benchmark(config, progress=display.update)
        except WattbenchError as e:
            # the levels finished before an interrupt or a failure (the target gone, exit 4) are a
            # result: their summary on stdout, as a complete run's, then the one line on stderr
            partial = getattr(e, "result", None)
            if partial is not None and partial.levels:
                if as_json:
                    sys.stdout.write(partial.model_dump_json(indent=2) + "\n")
                else:
                    out_console.print(run_summary(partial, run_dir_path(config, partial.run_id)))
                    out_console.print(f"results: {run_dir_path(config, partial.run_id)}")
            if isinstance(e, Interrupted):
                typer.echo(f"wattbench: {e}", err=True)
                raise typer.Exit(130) from None
            raise
        if as_json:
            sys.stdout.write(result.model_dump_json(indent=2) + "\n")
        else:
            out_console.print(run_summary(result, run_dir_path(config, result.run_id)))
            out_console.print(f"results: {run_dir_path(config, result.run_id)}")
        from wattbench.run.benchmark import NOT_REGISTERED, empty_levels

        for w in result.warnings:
            if w.startswith(NOT_REGISTERED):  # one line; the run itself is complete (exit 0)
                typer.echo(f"wattbench: warning: {w}", err=True)
        from wattbench.core.errors import EXIT_EMPTY_LEVEL

        empty = empty_levels(result)
        if empty:  # a level that measured nothing is not a result: say so and exit non-zero
            typer.echo(f"wattbench: error: {len(empty)} level(s) completed no measured request "
                       f"({', '.join(empty)}); the run is kept, but what measured nothing has no figure (why: "
                       f"wattbench report --notes {run_dir_path(config, result.run_id)})", err=True)
            raise typer.Exit(EXIT_EMPTY_LEVEL)
        from wattbench.cli.common import strict_exit

        strict_exit(config.strict, result, run_dir_path(config, result.run_id))

