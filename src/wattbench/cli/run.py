"""``wattbench run``: parse flags into a RunConfig, call ``run_benchmark``, render progress and summary."""

from __future__ import annotations

import os
import sys
from typing import List, Optional

import typer

from wattbench.cli.common import (
    API_KEY_HELP,
    api_key_file_option,
    DB_HELP,
    LIST_METAVAR,
    config_label_option,
    REGISTER_HELP,
    currency_option,
    handle_errors,
    no_sensors_option,
    parse_headers,
    parse_json_object,
    price_per_kwh_option,
    pue_option,
    sample_interval_option,
    sensor_option,
    split_list,
)
from wattbench.core.interrupt import install_sigterm

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


def _install_sigterm() -> None:
    """SIGTERM behaves like Ctrl-C: the run stops cleanly and keeps what it measured (interrupt.py)."""
    install_sigterm()


def register(app: typer.Typer) -> None:
    @app.command("run", help=HELP)
    @handle_errors
    def run(
        target: Optional[List[str]] = typer.Option(None, "--target", "-t", help="Base URL of an OpenAI-compatible server (with or without /v1); repeat for replicas (per-target statistics beside the total). Omit to start the embedded engine."),
        model: Optional[str] = typer.Option(None, "--model", "-m", help="Model name on the server (default: first of /v1/models); with no --target, a preset name (tiny, llama-1b, llama-8b, qwen-7b) or a local HF model directory."),
        api: str = typer.Option("completions", "--api", help="completions or chat."),
        api_key: Optional[str] = typer.Option(None, "--api-key", help=API_KEY_HELP, show_default=False),
        api_key_file: Optional[str] = api_key_file_option(),
        concurrency: Optional[str] = typer.Option(None, "--concurrency", "-c", metavar=LIST_METAVAR, help="Closed loop: concurrent streams; a comma list runs levels in turn (1,8,64)."),
        rate: Optional[str] = typer.Option(None, "--rate", "-r", metavar=LIST_METAVAR, help="Open loop: requests/s; a comma list runs levels in turn (2,4,8); inf sends every request at once."),
        arrival: str = typer.Option("poisson", "--arrival", help="Open-loop arrivals: poisson, constant or gamma:K."),
        num_requests: Optional[int] = typer.Option(None, "--num-requests", "-n", help="Measured requests per level (warm-up excluded; default: 4 rounds of the concurrency, 5+ once an E2E is measured, so the steady state can be long enough; docs/accounting.md)."),
        duration: Optional[float] = typer.Option(None, "--duration", "-d", help="Seconds of measured load per level, after the warm-up (--warmup 5s --duration 20 sends for 25 s); requests in flight at the end finish (each within --request-timeout) and are measured."),
        warmup: Optional[str] = typer.Option(None, "--warmup", help="Excluded from statistics: 10s (seconds) or 20 (requests)."),
        workers: Optional[int] = typer.Option(None, "--workers", help="Load-generator processes (default: auto)."),
        seed: int = typer.Option(0, "--seed", help="Seed for arrivals and lengths."),
        workload: Optional[str] = typer.Option(None, "--workload", "-w", help="Preset (chat, summarize, generate, rag, code) or a dataset/trace file."),
        input_tokens: str = typer.Option("256", "--input-tokens", help="N, uniform:A:B, normal:MU:SIGMA or lognormal:MU:SIGMA."),
        output_tokens: str = typer.Option("128", "--output-tokens", help="N, uniform:A:B, normal:MU:SIGMA or lognormal:MU:SIGMA."),
        tokenizer: Optional[str] = typer.Option(None, "--tokenizer", help="Local HF tokenizer (tokenizer.json or its directory) for token-exact prompts."),
        speedup: float = typer.Option(1.0, "--speedup", help="Trace replay: divide inter-arrival gaps by this."),
        sensor: Optional[List[str]] = sensor_option(),
        no_sensors: bool = no_sensors_option(),
        sample_interval: float = sample_interval_option(),
        idle: float = typer.Option(3.0, "--idle", help="Seconds of idle baseline before the first level (0 to skip)."),
        idle_after: float = typer.Option(0.0, "--idle-after", help="Seconds of idle baseline after the last level."),
        price_per_kwh: float = price_per_kwh_option(),
        currency: str = currency_option(),
        pue: float = pue_option(),
        carbon_intensity: Optional[str] = typer.Option(None, "--carbon-intensity", help="Grid carbon intensity: gCO2e/kWh, or a CSV/JSON time series (an Electricity Maps export) aligned on the run's wall clock."),
        attribute_idle: bool = typer.Option(False, "--attribute-idle", help="Energy per request includes a share of idle power by time in flight (the shares then add up to the gross energy)."),
        tenant_field: str = typer.Option("tenant", "--tenant-field", help="Dataset/trace row field naming the tenant, for energy per tenant."),
        slo: Optional[str] = typer.Option(None, "--slo", help="e.g. ttft_p99=500ms,tpot_p99=50ms."),
        trials: int = typer.Option(1, "--trials", help="Measure every level N times (mean and 95% CI); a ladder's trials interleave: c=16, 64, 16, 64, …"),
        trial_order: str = typer.Option("interleaved", "--trial-order", help="--trials over a ladder: interleaved (level by level, round after round) or shuffled (a seeded shuffle per round)."),
        restart_engine: bool = typer.Option(False, "--restart-engine", help="With --trials: restart the launched engine (and prime it) before every round, so start-to-start noise is inside the CI."),
        no_prime: bool = typer.Option(False, "--no-prime", help="Skip the priming load (the run's largest level, not measured) before the first level."),
        prime_requests: Optional[int] = typer.Option(None, "--prime-requests", help="Requests the priming sends (default: two rounds of the largest concurrency; about 10 s of the largest rate)."),
        prompt_salt: Optional[str] = typer.Option(None, "--prompt-salt", help="Text every synthetic prompt starts with after any shared prefix (default: the run id's random part, so no run repeats another's prompts to a server's prefix cache; '' for prompts identical across runs with the same seed)."),
        no_calibrate_prompts: bool = typer.Option(False, "--no-calibrate-prompts", help="Without --tokenizer or a server /tokenize: keep the 0.75 words-per-token guess instead of fitting prompt lengths to the server's usage.prompt_tokens (a few one-token probe requests before the first level)."),
        no_history_check: bool = typer.Option(False, "--no-history-check", help="Skip measuring the first level again at the end (a difference beyond noise warns)."),
        cooldown: float = typer.Option(0.0, "--cooldown", help="Seconds between trials."),
        sweep: Optional[str] = typer.Option(None, "--sweep", help="auto: double concurrency from 1 until throughput stops growing."),
        optimize: Optional[str] = typer.Option(None, "--optimize", help="Search the level with the best goodput_per_kw (or output_tokens_per_s_per_kw, goodput_rps) meeting --slo, in few levels."),
        max_concurrency: Optional[int] = typer.Option(None, "--max-concurrency", help="With --rate: at most N requests in flight (arrivals wait for a slot). With --sweep auto / --optimize: the upper end of the search (default 256)."),
        prefill_decode_pair: bool = typer.Option(False, "--prefill-decode-pair", help="Two extra levels (max_tokens=1; short prompts, long outputs) that cross-check the prefill/decode energy split."),
        ray: Optional[str] = typer.Option(None, "--ray", help="Run load actors and per-node sensors on a Ray cluster: auto (the one this machine belongs to), local (a one-machine cluster on 127.0.0.1) or an address (needs wattbench[ray])."),
        ray_actors: Optional[int] = typer.Option(None, "--ray-actors", help="Load-generator actors (default: one per node, more for large loads)."),
        engine: str = typer.Option("transformers", "--engine", help="Engine to start when no --target: transformers, vllm, sglang, llamacpp."),
        engine_arg: Optional[List[str]] = typer.Option(None, "--engine-arg", help="Extra argument passed to the engine (repeatable)."),
        device: Optional[str] = typer.Option(None, "--device", help="Engine device: cuda or cpu (default: cuda when present)."),
        out: Optional[str] = typer.Option(None, "--out", "-o", help="Run directory (default ./wattbench-results/<run_id>)."),
        tag: Optional[List[str]] = typer.Option(None, "--tag", help="Tag the run in the history store (repeatable)."),
        config_label: Optional[str] = config_label_option(),
        db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
        register_run: bool = typer.Option(True, "--register/--no-register", help=REGISTER_HELP),
        no_html: bool = typer.Option(False, "--no-html", help="Do not write report.html."),
        keep_output_text: bool = typer.Option(False, "--keep-output-text", help="Keep response texts in requests.jsonl."),
        keep_chunks: bool = typer.Option(False, "--keep-chunks", help="Keep every content chunk's arrival stamp (chunk_ns) in requests.jsonl (per-request ITL and token timelines later; ~15 bytes more per content chunk)."),
        request_timeout: float = typer.Option(600.0, "--request-timeout", help="Seconds a request may take in all."),
        header: Optional[List[str]] = typer.Option(None, "--header", "-H", help="Request header K:V, repeatable (sent with every request; values that can hold a credential are never written)."),
        secret_header: Optional[List[str]] = typer.Option(None, "--secret-header", help="Header NAME whose --header value is a secret although its name does not say so (repeatable): never written or printed, scrubbed wherever a server echoes it."),
        extra_body: Optional[str] = typer.Option(None, "--extra-body", help='JSON object merged into every request body, e.g. \'{"top_k": 20}\'.'),
        temperature: Optional[float] = typer.Option(None, "--temperature", help="Sampling temperature (default 0: greedy)."),
        top_p: Optional[float] = typer.Option(None, "--top-p", help="Nucleus sampling top-p."),
        stall_timeout: float = typer.Option(120.0, "--stall-timeout", help="Seconds without a byte before a stream counts as stalled."),
        as_json: bool = typer.Option(False, "--json", help="Print the result as JSON on stdout (progress goes to stderr)."),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress display."),
    ) -> None:
        from wattbench.cli.common import read_api_key

        api_key = read_api_key(api_key, api_key_file)
        from pydantic import SecretStr

        from wattbench.config import RunConfig
        from wattbench.core.errors import Interrupted

        warmup_s, warmup_requests = _parse_warmup(warmup)
        engine_model = None
        targets = list(target or [])
        if not targets and model is not None:
            engine_model, model = model, None
        config = RunConfig(
            target=targets[0] if targets else None,
            targets=targets if len(targets) > 1 else [],
            model=model,
            api=api,  # type: ignore[arg-type]
            api_key=SecretStr(api_key) if api_key else None,
            concurrency=split_list(concurrency, int, "--concurrency"),
            rate=split_list(rate, float, "--rate"),
            arrival=arrival,
            num_requests=num_requests,
            duration_s=duration,
            warmup_s=warmup_s,
            warmup_requests=warmup_requests,
            workers=workers,
            seed=seed,
            workload=workload,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            tokenizer=tokenizer,
            speedup=speedup,
            sensors=list(sensor or []),
            no_sensors=no_sensors,
            sample_interval_s=sample_interval,
            idle_s=idle,
            idle_after_s=idle_after,
            price_per_kwh=price_per_kwh,
            currency=currency,
            pue=pue,
            carbon_intensity=carbon_intensity,
            attribute_idle=attribute_idle,
            tenant_field=tenant_field,
            slo=slo,
            trials=trials,
            trial_order=trial_order,  # type: ignore[arg-type]
            restart_engine=restart_engine,
            prime=not no_prime,
            prime_requests=prime_requests,
            history_check=not no_history_check,
            prompt_salt=prompt_salt,
            calibrate_prompts=not no_calibrate_prompts,
            cooldown_s=cooldown,
            sweep=sweep,
            optimize=optimize,
            max_concurrency=max_concurrency,
            prefill_decode_pair=prefill_decode_pair,
            ray=ray,
            ray_actors=ray_actors,
            engine=engine,  # type: ignore[arg-type]
            engine_model=engine_model,
            engine_args=list(engine_arg or []),
            device=device,
            out=out,
            tags=list(tag or []),
            config_label=config_label,
            db=db,
            register_run=register_run,
            html=not no_html,
            keep_output_text=keep_output_text,
            keep_chunks=keep_chunks,
            request_timeout_s=request_timeout,
            headers=parse_headers(header),
            secret_headers=list(secret_header or []),
            extra_body=parse_json_object(extra_body, "--extra-body"),
            temperature=temperature,
            top_p=top_p,
            stall_timeout_s=stall_timeout,
        )
        from wattbench.cli.progress import run_progress
        from wattbench.report.terminal import run_summary

        from rich.console import Console

        err_console = Console(stderr=True)
        out_console = Console()
        # bars on a terminal; plain lines on stderr where it is not one (a CI log, nohup)
        display = run_progress(err_console if as_json else out_console, quiet,
                               sys.stderr.isatty() or os.environ.get("WATTBENCH_PROGRESS") == "1")
        _install_sigterm()
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
        from wattbench.run.benchmark import NOT_REGISTERED

        for w in result.warnings:
            if w.startswith(NOT_REGISTERED):  # one line; the run itself is complete (exit 0)
                typer.echo(f"wattbench: warning: {w}", err=True)
        from wattbench.accounting.level_findings import empty_levels
        from wattbench.core.errors import EXIT_EMPTY_LEVEL

        empty = empty_levels(result)
        if empty:  # a level that measured nothing is not a result: say so and exit non-zero
            typer.echo(f"wattbench: error: {len(empty)} level(s) completed no measured request "
                       f"({', '.join(empty)}); the run is kept but they measured nothing", err=True)
            raise typer.Exit(EXIT_EMPTY_LEVEL)
