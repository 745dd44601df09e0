"""``wattbench tune``: parse flags into a TuneConfig, call ``wattbench.tune.tune``, render."""

from __future__ import annotations

import sys

import typer

from wattbench.cli.common import handle_errors
from wattbench.cli.options import CommandOptions, Given, options_from
from wattbench.config.run import RunConfig
from wattbench.config.run_commands import TuneConfig
from wattbench.core.interrupt import sigterm_as_ctrl_c
from wattbench.core.numbers import fmt

HELP = """Search engine settings (and, as root, GPU power settings) for the most goodput per kW under an SLO.

Each configuration is a full run (engine restarted, load searched with --optimize up to the SLO);
the engine's defaults are measured first and the gain is quoted against them. docs/tune.md.

Examples:

\b
  wattbench tune --engine vllm --model tiny --slo tpot_p99=200ms \\
      --axis max-num-seqs=8,32 --axis max-num-batched-tokens=512,2048
  wattbench tune --engine transformers --model llama-1b \\
      --slo ttft_p99=2s,tpot_p99=100ms --max-minutes 8
  sudo wattbench tune --engine vllm --model llama-8b --slo tpot_p99=50ms \\
      --power-limit 400,550,700 --allow-gpu-settings
  wattbench tune --resume wattbench-results/tune-2026-12-01T03-00-00
"""


def register(app: typer.Typer) -> None:
    @app.command("tune", help=HELP)
    @handle_errors
    @options_from("tune", RunConfig, TuneConfig, CommandOptions)
    @sigterm_as_ctrl_c()  # SIGTERM stops like Ctrl-C: the trial in progress ends, tune.json is kept
    def tune_cmd(given: Given) -> None:
        from wattbench.results.tune import write_tune
        from wattbench.tune.events import GpuRestored, TrialDone, TrialStarted, TuneEvent
        from wattbench.tune.run import tune

        tune_fields = given[TuneConfig]
        base = RunConfig(**given[RunConfig], seed=tune_fields["seed"])  # the tune's seed seeds every trial's run
        cfg = TuneConfig(base=base, **tune_fields)
        as_json = given[CommandOptions]["as_json"]
        from rich.console import Console

        from wattbench.report.tune import tune_html, tune_summary

        con = Console(stderr=as_json)

        def progress(event: TuneEvent) -> None:
            if isinstance(event, TrialStarted):
                rep = f" (repeat of {event.repeat_of})" if event.repeat_of is not None else ""
                con.print(f"trial {event.index}: {event.label}{rep}")
            elif isinstance(event, TrialDone):
                tr = event.trial
                con.print(f"  -> {tr.status}" + (f", score {fmt(tr.score, kind='precise')}" if tr.score is not None else "")
                          + (f" ({tr.detail})" if tr.detail else ""))
            elif isinstance(event, GpuRestored):
                con.print("restored GPU settings left by an earlier tune: " + "; ".join(event.actions))

        from wattbench.core.errors import Interrupted

        try:
            t = tune(cfg, progress=progress)
        except (Interrupted, KeyboardInterrupt):
            typer.echo("wattbench: tune interrupted; finished trials are saved: continue with --resume DIR", err=True)
            raise typer.Exit(130) from None
        from pathlib import Path

        assert t.directory is not None  # tune() always names the directory it writes into
        (Path(t.directory) / "report.html").write_text(tune_html(t))
        write_tune(Path(t.directory), t)
        if as_json:
            sys.stdout.write(t.model_dump_json(indent=2) + "\n")
            return
        for r in tune_summary(t):
            con.print(r)
        con.print(f"tune: {t.directory}")
