"""``wattbench measure -- COMMAND``: energy around a load generator you already run (run/measure.py)."""

from __future__ import annotations

import sys
from typing import List, Optional

import typer

from wattbench.cli.common import (
    API_KEY_HELP,
    api_key_file_option,
    DB_HELP,
    REGISTER_HELP,
    config_label_option,
    currency_option,
    handle_errors,
    no_sensors_option,
    price_per_kwh_option,
    pue_option,
    sample_interval_option,
    sensor_option,
)
from wattbench.core.interrupt import install_sigterm

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


def _progress(quiet: bool):
    """The command's own output as it comes, and plain progress lines (each window's start and its
    headline at its end: ``cli.progress.PlainProgress``) on stderr."""
    from wattbench.cli.progress import PlainProgress

    plain = PlainProgress(sys.stderr)

    def show(event: str, data: dict) -> None:
        if quiet:
            return
        if event == "command_output":
            sys.stderr.write(data.get("line", "") + "\n")
        else:
            plain.update(event, data)
    return show


def register(app: typer.Typer) -> None:
    @app.command("measure", help=HELP, context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
    @handle_errors
    def measure(
        command: List[str] = typer.Argument(..., help="The command to run, after --.", show_default=False),
        target: Optional[str] = typer.Option(None, "--target", "-t", help="The server whose /metrics token counters to scrape (default: the URL the tool's own arguments name)."),
        api_key: Optional[str] = typer.Option(None, "--api-key", help=API_KEY_HELP, show_default=False),
        api_key_file: Optional[str] = api_key_file_option(),
        tool: Optional[str] = typer.Option(None, "--tool", help="What COMMAND is: vllm-bench-serve, aiperf, guidellm, wattbench-run or command (default: recognised from it)."),
        result: Optional[List[str]] = typer.Option(None, "--result", help="The tool's result file (repeatable; default: found where its arguments put it)."),
        window_from: Optional[str] = typer.Option(None, "--window-from", help="A file of 'start SECONDS [LABEL]' / 'end SECONDS' lines the command writes: one level per pair."),
        sensor: Optional[List[str]] = sensor_option(),
        no_sensors: bool = no_sensors_option(),
        sample_interval: float = sample_interval_option(),
        idle: float = typer.Option(3.0, "--idle", help="Seconds of idle baseline before the command (0 to skip)."),
        idle_after: float = typer.Option(0.0, "--idle-after", help="Seconds of idle baseline after it."),
        price_per_kwh: float = price_per_kwh_option(),
        currency: str = currency_option(),
        pue: float = pue_option(),
        out: Optional[str] = typer.Option(None, "--out", "-o", help="Run directory (default ./wattbench-results/<run_id>)."),
        tag: Optional[List[str]] = typer.Option(None, "--tag", help="Tag the run in the history store (repeatable)."),
        config_label: Optional[str] = config_label_option(),
        db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
        register_run: bool = typer.Option(True, "--register/--no-register", help=REGISTER_HELP),
        no_html: bool = typer.Option(False, "--no-html", help="Do not write report.html."),
        keep_chunks: bool = typer.Option(False, "--keep-chunks", help="Keep the tool's per-chunk stamps in requests.jsonl."),
        as_json: bool = typer.Option(False, "--json", help="Print the result as JSON on stdout (the command's output goes to stderr)."),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="Do not echo the command's output (it is in command.log)."),
    ) -> None:
        from wattbench.cli.common import read_api_key

        api_key = read_api_key(api_key, api_key_file)
        from pydantic import SecretStr

        from wattbench.config import RunConfig
        from wattbench.core.errors import Interrupted
        from wattbench.run.measure import MeasureConfig, measure as run_measure

        config = RunConfig(target=target, api_key=SecretStr(api_key) if api_key else None,
                           sensors=list(sensor or []), no_sensors=no_sensors, sample_interval_s=sample_interval,
                           idle_s=idle, idle_after_s=idle_after, price_per_kwh=price_per_kwh, currency=currency,
                           pue=pue, out=out, tags=list(tag or []), config_label=config_label, db=db, register_run=register_run, html=not no_html,
                           keep_chunks=keep_chunks)
        mcfg = MeasureConfig(command=list(command), run=config, tool=tool, result_files=list(result or []),
                             window_from=window_from)
        install_sigterm()
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
