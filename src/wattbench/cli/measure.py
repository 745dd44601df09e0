"""``wattbench measure -- COMMAND``: energy around a load generator you already run (run/measure.py)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import typer

from wattbench.cli.common import handle_errors, read_api_key
from wattbench.cli.options import CommandOptions, Given, options_from
from wattbench.config.run import RunConfig
from wattbench.config.run_commands import MeasureConfig
from wattbench.core.interrupt import sigterm_as_ctrl_c

if TYPE_CHECKING:
    from wattbench.run.events import ProgressEvent, ProgressFn

HELP = """Run COMMAND (a load generator) while sampling every meter as `run` does,
then read its result files for the work done: one level per benchmark it ran.

Reads vllm bench serve --save-result --save-detailed, AIPerf's
profile_export.jsonl and GuideLLM's benchmarks.json. Any other command: one
level over its lifetime (or per --window-from marker pair), tokens from the
server's /metrics counters (--target), else energy and power only.

Examples:

\b
  wattbench measure -s const:node=300 -- vllm bench serve \\
      --base-url http://127.0.0.1:8000 --model M --dataset-name random \\
      --num-prompts 200 --max-concurrency 16 --request-rate inf \\
      --save-result --save-detailed --result-dir out
  wattbench measure -- aiperf profile --url http://127.0.0.1:8000 \\
      -m M --streaming --concurrency 8
  wattbench measure -t http://127.0.0.1:8000 -- ./my_load.sh
"""


def _progress(quiet: bool) -> ProgressFn:
    """The command's own output as it comes, and plain progress lines (each window's start and its
    headline at its end: ``cli.progress.PlainProgress``) on stderr."""
    from wattbench.cli.progress import PlainProgress
    from wattbench.run.events import CommandOutput

    plain = PlainProgress(sys.stderr)

    def show(event: ProgressEvent) -> None:
        if quiet:
            return
        if isinstance(event, CommandOutput):
            sys.stderr.write(event.line + "\n")
        else:
            plain.update(event)
    return show


def register(app: typer.Typer) -> None:
    @app.command("measure", help=HELP, context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
    @handle_errors
    @options_from("measure", MeasureConfig, RunConfig, CommandOptions)
    @sigterm_as_ctrl_c()  # SIGTERM stops the measurement as Ctrl-C does and keeps what it measured
    def measure(given: Given) -> None:
        from wattbench.core.errors import Interrupted
        from wattbench.run.measure import measure as run_measure

        run_fields = dict(given[RunConfig])
        run_fields["api_key"] = read_api_key(run_fields["api_key"], given[CommandOptions]["api_key_file"]) or None
        config = RunConfig(**run_fields)
        mcfg = MeasureConfig(run=config, **given[MeasureConfig])
        as_json, quiet = given[CommandOptions]["as_json"], given[CommandOptions]["quiet"]
        from rich.console import Console

        from wattbench.report.terminal import run_summary

        try:
            res = run_measure(mcfg, progress=_progress(quiet))
        except Interrupted as e:
            partial = getattr(e, "result", None)
            if partial is not None and partial.levels:
                Console(stderr=True).print(run_summary(partial))
            typer.echo(f"wattbench: {e}", err=True)
            raise typer.Exit(130) from None
        if as_json:
            sys.stdout.write(res.model_dump_json(indent=2) + "\n")
        else:
            from wattbench.run.session import run_dir_path

            out_console = Console()
            out_console.print(run_summary(res, run_dir_path(config, res.run_id)))
            out_console.print(f"results: {run_dir_path(config, res.run_id)}")
        from wattbench.run.benchmark import NOT_REGISTERED

        for w in res.warnings:
            if w.startswith(NOT_REGISTERED):  # one line; the measurement itself is complete (exit 0)
                typer.echo(f"wattbench: warning: {w}", err=True)
        from wattbench.cli.common import strict_exit
        from wattbench.run.session import run_dir_path as _where

        strict_exit(config.strict, res, _where(config, res.run_id))
