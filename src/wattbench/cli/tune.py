"""``wattbench tune``: parse flags into a TuneConfig, call ``wattbench.tune.tune``, render."""

from __future__ import annotations

import sys
from typing import List, Optional

import typer

from wattbench.cli.common import DB_HELP, LIST_METAVAR, config_label_option, handle_errors, split_list
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
    def tune_cmd(
        engine: str = typer.Option("transformers", "--engine", help="transformers, vllm, sglang or llamacpp (started and restarted by wattbench)."),
        model: Optional[str] = typer.Option(None, "--model", "-m", help="Preset (tiny, llama-1b, …) or a local HF model directory."),
        device: Optional[str] = typer.Option(None, "--device", help="cuda or cpu (default: cuda when present)."),
        engine_arg: Optional[List[str]] = typer.Option(None, "--engine-arg", help="Argument given to the engine in every configuration (repeatable)."),
        axis: Optional[List[str]] = typer.Option(None, "--axis", help="NAME=V1,V2,… an engine flag and its values (repeatable); default: the engine's built-in space."),
        space: Optional[str] = typer.Option(None, "--space", help="YAML/JSON space file (axes, ranges, conditions)."),
        power_limit: Optional[str] = typer.Option(None, "--power-limit", metavar=LIST_METAVAR, help="GPU power limits to try, W (400,550,700). Needs --allow-gpu-settings and root."),
        sm_clocks: Optional[str] = typer.Option(None, "--sm-clocks", metavar=LIST_METAVAR, help="Locked SM clocks to try, MHz (1200,1590,1980). Needs --allow-gpu-settings and root."),
        allow_gpu_settings: bool = typer.Option(False, "--allow-gpu-settings", help="Allow changing the GPU power limit / clocks (restored after every trial)."),
        gpu: Optional[str] = typer.Option(None, "--gpus", metavar=LIST_METAVAR, help="GPU indices whose settings are changed (default: all)."),
        slo: Optional[str] = typer.Option(None, "--slo", help="e.g. ttft_p99=500ms,tpot_p99=50ms (the run grammar)."),
        objective: str = typer.Option("goodput_per_kw", "--objective", help="goodput_per_kw, output_tokens_per_s_per_kw or j_per_output_token."),
        boundary: Optional[str] = typer.Option(None, "--boundary", help="Power boundary of the score (default: the headline boundary, as run and plan use)."),
        concurrency: Optional[str] = typer.Option(None, "--concurrency", "-c", metavar=LIST_METAVAR, help="Load ladder searched in each configuration (default 1,2,4,…,--max-concurrency)."),
        rate: Optional[str] = typer.Option(None, "--rate", "-r", metavar=LIST_METAVAR, help="Open-loop rate ladder instead (requests/s)."),
        max_concurrency: int = typer.Option(256, "--max-concurrency", help="Top of the default concurrency ladder."),
        num_requests: Optional[int] = typer.Option(None, "--num-requests", "-n", help="Measured requests per level."),
        duration: Optional[float] = typer.Option(None, "--duration", "-d", help="Seconds of load per level."),
        workload: Optional[str] = typer.Option(None, "--workload", "-w", help="Preset or dataset/trace file (as in run)."),
        input_tokens: str = typer.Option("256", "--input-tokens"),
        output_tokens: str = typer.Option("128", "--output-tokens"),
        sensor: Optional[List[str]] = typer.Option(None, "--sensor", "-s", help="Sensor spec, repeatable (default: auto-detect)."),
        idle: float = typer.Option(3.0, "--idle", help="Seconds of idle baseline per trial."),
        strategy: str = typer.Option("auto", "--strategy", help="auto (exhaustive up to 16 configurations, else Optuna TPE), exhaustive or optuna."),
        max_trials: Optional[int] = typer.Option(None, "--max-trials", help="Budget: configurations measured (the defaults included)."),
        max_minutes: Optional[float] = typer.Option(None, "--max-minutes", help="Budget: no new trial starts after this many minutes."),
        noise_pct: float = typer.Option(5.0, "--noise-pct", help="Best two closer than this (single measurements) are measured again."),
        max_repeats: int = typer.Option(2, "--max-repeats", help="Rounds of repeat measurements of the best two."),
        no_baseline: bool = typer.Option(False, "--no-baseline", help="Do not measure the engine defaults first (no gain is quoted)."),
        seed: int = typer.Option(0, "--seed"),
        out: Optional[str] = typer.Option(None, "--out", "-o", help="Tune directory (default ./wattbench-results/tune-<time>)."),
        resume: Optional[str] = typer.Option(None, "--resume", help="Continue an interrupted tune in this directory."),
        tag: Optional[List[str]] = typer.Option(None, "--tag", help="Tag every trial run in the history store."),
        config_label: Optional[str] = config_label_option(),
        db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
        as_json: bool = typer.Option(False, "--json", help="Print tune.json on stdout."),
    ) -> None:
        from wattbench.config import RunConfig, domain_for
        from wattbench.tune import TuneConfig, tune
        from wattbench.results.tune import write_tune

        base = RunConfig(engine=engine, engine_model=model, device=device,  # type: ignore[arg-type]
                         engine_args=list(engine_arg or []), concurrency=split_list(concurrency, int, "--concurrency"),
                         rate=split_list(rate, float, "--rate"), max_concurrency=max_concurrency,
                         num_requests=num_requests, duration_s=duration, workload=workload,
                         input_tokens=input_tokens, output_tokens=output_tokens, sensors=list(sensor or []),
                         idle_s=idle, slo=slo, seed=seed, tags=list(tag or []), config_label=config_label, db=db,
                         html=True)
        cfg = TuneConfig(base=base, axes=list(axis or []), space_file=space,
                         power_limits_w=split_list(power_limit, float, "--power-limit"),
                         sm_clocks_mhz=split_list(sm_clocks, int, "--sm-clocks"),
                         allow_gpu_settings=allow_gpu_settings,
                         gpu_indices=split_list(gpu, int, "--gpus", domain=domain_for("--gpus", "tune")) or None, objective=objective, boundary=boundary,
                         strategy=strategy, max_trials=max_trials, max_minutes=max_minutes, noise_pct=noise_pct,
                         max_repeats=max_repeats, baseline=not no_baseline, seed=seed, out=out, resume=resume)
        from rich.console import Console

        from wattbench.report.tune import tune_html, tune_summary

        con = Console(stderr=as_json)

        def progress(event: str, data: dict) -> None:
            if event == "trial_start":
                rep = f" (repeat of {data['repeat_of']})" if data.get("repeat_of") is not None else ""
                con.print(f"trial {data['index']}: {data['label']}{rep}")
            elif event == "trial_done":
                tr = data["trial"]
                con.print(f"  -> {tr.status}" + (f", score {fmt(tr.score, kind='precise')}" if tr.score is not None else "")
                          + (f" ({tr.detail})" if tr.detail else ""))
            elif event == "gpu_restored":
                con.print("restored GPU settings left by an earlier tune: " + "; ".join(data["actions"]))

        from wattbench.cli.run import _install_sigterm
        from wattbench.core.errors import Interrupted

        _install_sigterm()  # SIGTERM stops like Ctrl-C: the trial in progress ends, tune.json is kept
        try:
            t = tune(cfg, progress=progress)
        except (Interrupted, KeyboardInterrupt):
            typer.echo("wattbench: tune interrupted; finished trials are saved: continue with --resume DIR", err=True)
            raise typer.Exit(130) from None
        from pathlib import Path

        (Path(t.directory) / "report.html").write_text(tune_html(t))
        write_tune(Path(t.directory), t)
        if as_json:
            sys.stdout.write(t.model_dump_json(indent=2) + "\n")
            return
        for r in tune_summary(t):
            con.print(r)
        con.print(f"tune: {t.directory}")
