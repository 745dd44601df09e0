"""The run orchestrator: ``run_benchmark(config) -> Result``.

It wires the parts together and computes nothing itself:

    target (given, or an engine it launches) ── check + detect ──► ServerInfo
    workload ──► RequestSpec source
    sensors ──► Sampler (thread) ──► TelemetryLog ─┐
    /metrics ──► MetricsScraper (thread) ──────────┤
    load.level.run_level ──► LevelOutcome ─────────┴─► metrics + accounting ──► LevelResult

The result directory is written after every level (result.json, requests.jsonl,
telemetry.jsonl, server_timeline.jsonl, report.html), so an interrupted run keeps what it
measured. Progress is reported through a callback; the library never prints.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as _dt
import logging
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from wattbench import __version__
from wattbench.clock import ClockAnchor, now_ns
from wattbench.config import RunConfig
from wattbench.errors import Interrupted, UserError, WattbenchError
from wattbench.results.schema import (
    ClockInfo,
    LevelResult,
    Result,
    ServerInfo,
    Validity,
    Window,
)

log = logging.getLogger("wattbench.run")

ProgressFn = Callable[[str, dict], None]


def new_run_id(anchor: ClockAnchor) -> str:
    stamp = _dt.datetime.fromtimestamp(anchor.wall_ns / 1e9, tz=_dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{secrets.token_hex(3)}"


@dataclass
class _RunState:
    """Everything the run holds while it goes; closed in reverse order by ``_RunContext``."""

    config: RunConfig
    progress: ProgressFn
    anchor: ClockAnchor
    run_id: str
    run_dir: Path | None = None
    result: Result | None = None
    sampler: Any = None
    scraper: Any = None
    engine: Any = None
    records_written: int = 0
    idle_power: dict | None = None
    energy_unavailable_reason: str | None = None
    telemetry_writer: Any = None
    cleanup: list[Callable[[], None]] = field(default_factory=list)


def _emit(state: _RunState, event: str, **data: Any) -> None:
    try:
        state.progress(event, data)
    except Exception:  # a broken progress display must never break a measurement
        log.exception("progress callback failed")


# ---------------------------------------------------------------- pieces


def _resolve_run_dir(config: RunConfig, run_id: str) -> Path:
    if config.out:
        d = Path(config.out).expanduser()
        if (d / "result.json").exists():
            raise UserError(f"--out {d} already holds a result.json; choose another directory or remove it")
    else:
        d = Path("wattbench-results") / run_id
    return d


def _api_key(config: RunConfig) -> str | None:
    import os

    if config.api_key is not None:
        return config.api_key.get_secret_value()
    return os.environ.get("WATTBENCH_API_KEY") or os.environ.get("OPENAI_API_KEY") or None


def _open_sensors(config: RunConfig) -> tuple[list, list[str]]:
    """Sensors to sample and the problems met while looking for them (each with its fix).

    Auto-detection with the embedded engine (which runs on this machine) adds an
    estimate-labelled CPU figure where no CPU meter exists, so a CPU-only newcomer sees an
    honest, labelled estimate rather than nothing.
    """
    if config.no_sensors:
        return [], []
    from wattbench.telemetry import detect, spec

    if config.sensors:
        return [spec.parse_sensor_spec(s) for s in config.sensors], []
    return detect.autodetect(estimate_cpu=config.target is None)


def _build_workload(config: RunConfig, target, server: ServerInfo, tokenizer_path: str | None):
    """The workload and its token source: ``--tokenizer`` (or the launched model's tokenizer),
    else the server's ``/tokenize``, else approximate lengths (recorded as such)."""
    from wattbench.workload.presets import load_workload
    from wattbench.workload.tokenizer import open_token_source

    ts = open_token_source(tokenizer_path, base_url=target.base_url, model=target.model, api_key=target.api_key)
    return load_workload(
        config.workload,
        ts,
        config.seed,
        input_tokens=config.input_tokens,
        output_tokens=config.output_tokens,
        max_context_tokens=server.max_model_len,
        speedup=config.speedup,
    )


def _write_level_artifacts(state: _RunState, outcome_records: list) -> None:
    """Append this level's requests, the telemetry and server timeline since the last write,
    and rewrite result.json (atomically). Called after every level."""
    from wattbench.results import rundir

    assert state.run_dir is not None and state.result is not None
    rundir.append_requests(state.run_dir, outcome_records)
    try:
        if state.sampler is not None and state.telemetry_writer is not None:
            state.telemetry_writer.flush(state.sampler.log)
        if state.scraper is not None:
            state.scraper.timeline.to_jsonl(state.run_dir / "server_timeline.jsonl")
    except OSError as e:  # disk full: one line, the run stops (result.json keeps the levels before)
        raise rundir.storage_error(state.run_dir, e) from None
    rundir.write_result(state.run_dir, state.result)


def _write_report(state: _RunState) -> None:
    if not state.config.html or state.run_dir is None:
        return
    try:
        from wattbench.report.html import write_run_html

        write_run_html(state.run_dir)
    except Exception as e:  # the report must never cost the measurement
        msg = f"report.html could not be written: {e}"
        if state.result is not None and msg not in state.result.warnings:
            state.result.warnings.append(msg)


# ---------------------------------------------------------------- per level


def _account_level(state: _RunState, index: int, spec, outcome, token_source: str) -> LevelResult:
    from wattbench.accounting import account_window, level_validity
    from wattbench.metrics.latency import summarize_level

    cfg = state.config
    result = state.result
    assert result is not None
    requests, latency, throughput = summarize_level(outcome.records, outcome.start_ns, outcome.end_ns)
    level = LevelResult(
        index=index,
        label=spec.label,
        load=outcome.load,
        window=Window(
            start_ns=outcome.start_ns,
            end_ns=outcome.end_ns,
            duration_s=max(0.0, (outcome.end_ns - outcome.start_ns) / 1e9),
            kind="full",
        ),
        requests=requests,
        latency=latency,
        throughput=throughput,
        token_source=token_source,
    )
    if outcome.steady_start_ns is not None and outcome.steady_end_ns is not None and (
        outcome.steady_end_ns > outcome.steady_start_ns
    ):
        level.steady_window = Window(
            start_ns=outcome.steady_start_ns,
            end_ns=outcome.steady_end_ns,
            duration_s=(outcome.steady_end_ns - outcome.steady_start_ns) / 1e9,
            kind="steady",
        )
    if outcome.stopped_early:
        level.extra["stopped_early"] = outcome.stopped_early

    from wattbench.accounting.validity import Finding

    accounted = None
    extra: list = []
    if level.requests.failed:
        total = level.requests.failed + level.requests.completed
        share = level.requests.failed / max(total, 1)
        extra.append(Finding("invalid" if share > 0.5 else "warn",
                             f"{level.requests.failed} of {total} requests failed ({share:.0%})"))
    if state.sampler is not None and level.window.duration_s > 0:
        tlog = state.sampler.log
        idle = state.idle_power
        accounted = account_window(
            tlog,
            outcome.start_ns,
            outcome.end_ns,
            output_tokens=throughput.output_tokens,
            total_tokens=throughput.output_tokens + throughput.input_tokens,
            idle=idle,
            price_per_kwh=cfg.price_per_kwh,
            pue=cfg.pue,
            kind="full",
        )
        level.energy = accounted.energy
        level.thermal = accounted.thermal
        if level.steady_window is not None:
            out_tok, in_tok = _steady_tokens(outcome.records, level.steady_window)
            acc_s = account_window(
                tlog,
                level.steady_window.start_ns,
                level.steady_window.end_ns,
                output_tokens=out_tok,
                total_tokens=out_tok + in_tok,
                idle=idle,
                price_per_kwh=cfg.price_per_kwh,
                pue=cfg.pue,
                kind="steady",
            )
            level.energy_steady = acc_s.energy
        if not level.energy:
            level.energy_unavailable_reason = "no power or energy channel produced readings in this window"
    else:
        level.energy_unavailable_reason = state.energy_unavailable_reason or "no sensor was sampled"
    if state.scraper is not None:
        # one scrape after the window so its end is bracketed by scrapes (counter deltas interpolate)
        time.sleep(min(state.scraper.interval_s * 1.2, 2.0))
        level.server_metrics = state.scraper.timeline.summary(outcome.start_ns, outcome.end_ns)
    level.validity = level_validity(accounted, load=outcome.load, token_source=token_source, extra=extra)
    from wattbench.load.saturation import mark_saturated

    return mark_saturated(level)


def _count_source(records) -> str:
    """Where the level's token counts come from: the server's ``usage`` for every completed
    request, or ``missing`` when some completed request had none (then throughput undercounts)."""
    done = [r for r in records if r.ok and not r.warmup]
    if done and any(r.output_tokens is None for r in done):
        return "missing"
    return "usage"


def _save_level(state: _RunState, index: int, spec, outcome, prompt_length_source: str) -> None:
    """Account a finished (or interrupted) level and write everything measured so far."""
    assert state.result is not None
    level = _account_level(state, index, spec, outcome, _count_source(outcome.records))
    level.extra["prompt_length_source"] = prompt_length_source
    state.result.levels.append(level)
    _write_level_artifacts(state, outcome.records)
    _write_report(state)
    _emit(state, "level_done", index=index, level=level)


def _steady_tokens(records, window: Window) -> tuple[int, int]:
    """Output and input tokens attributable to the steady window.

    Output tokens: each measured request's tokens pro rata to the part of its generation
    (first to last token) inside the window; input tokens: requests whose first token arrived
    inside it. Figures computed here are inputs to accounting, not statistics.
    """
    from wattbench.metrics.latency import tokens_in_window

    return tokens_in_window(records, window.start_ns, window.end_ns)


# ---------------------------------------------------------------- the run


def run_benchmark(config: RunConfig, progress: ProgressFn | None = None) -> Result:
    """Run a benchmark as configured and return its Result (also written to the run directory).

    Raises ``UserError`` for bad input before anything is written, ``Interrupted`` when stopped
    by SIGINT/SIGTERM (the partial result is on disk and attached as ``.result``).
    """
    progress = progress or (lambda event, data: None)
    anchor = ClockAnchor.take()
    state = _RunState(config=config, progress=progress, anchor=anchor, run_id=new_run_id(anchor))
    with contextlib.ExitStack() as stack:
        try:
            return _run(state, stack)
        except (KeyboardInterrupt, Interrupted) as e:
            _finish(state, "interrupted", "stopped by signal during the run")
            err = Interrupted(
                "interrupted; the levels measured so far are saved"
                + (f" in {state.run_dir}" if state.run_dir and state.result else "")
            )
            err.result = state.result  # type: ignore[attr-defined]
            raise err from e
        except WattbenchError as e:
            if state.result is not None and state.result.levels:
                _finish(state, "failed", str(e))
            raise
        except Exception as e:
            if state.result is not None and state.result.levels:
                _finish(state, "failed", f"{type(e).__name__}: {e}")
            raise


def _finish(state: _RunState, status: str, detail: str | None) -> None:
    if state.result is None or state.run_dir is None:
        return
    from wattbench.results import rundir

    state.result.status = status  # type: ignore[assignment]
    state.result.status_detail = detail
    with contextlib.suppress(Exception):
        if state.sampler is not None and state.telemetry_writer is not None:
            state.telemetry_writer.flush(state.sampler.log)
    with contextlib.suppress(Exception):
        rundir.write_result(state.run_dir, state.result)
    _write_report(state)


def _run(state: _RunState, stack: contextlib.ExitStack) -> Result:
    from wattbench.load.level import run_level
    from wattbench.load.types import LevelSpec, TargetSpec
    from wattbench.server.detect import detect_server
    from wattbench.server.openai import check_target, normalize_base_url

    cfg = state.config
    api_key = _api_key(cfg)
    run_dir = _resolve_run_dir(cfg, state.run_id)

    # 1. target: given, or an engine we launch and stop.
    tokenizer_path = cfg.tokenizer
    launched_info: ServerInfo | None = None
    if cfg.target:
        base_url = normalize_base_url(cfg.target)
    else:
        from wattbench.engines import launch

        _emit(state, "phase", name="engine", message=f"starting the {cfg.engine} engine")
        run_dir.mkdir(parents=True, exist_ok=True)
        handle = stack.enter_context(
            launch(
                engine=cfg.engine,
                model=cfg.engine_model,
                device=cfg.device,
                engine_args=cfg.engine_args,
                run_dir=run_dir,
            )
        )
        base_url = normalize_base_url(handle.base_url)
        launched_info = handle.server_info
        if tokenizer_path is None and handle.plan.model_path:
            tokenizer_path = handle.plan.model_path  # the served model's own tokenizer: exact lengths

    model, models = asyncio.run(check_target(base_url, api_key, cfg.model))
    server = asyncio.run(detect_server(base_url, api_key))
    if launched_info is not None:
        from wattbench.server.detect import merge_launched

        server = merge_launched(launched_info, server)
    server.base_url = base_url
    server.model = model
    server.models = models

    target = TargetSpec(
        base_url=base_url,
        model=model,
        api=cfg.api,
        api_key=api_key,
        request_timeout_s=cfg.request_timeout_s,
        stall_timeout_s=cfg.stall_timeout_s,
        keep_output_text=cfg.keep_output_text,
    )
    workload = _build_workload(cfg, target, server, tokenizer_path)
    # Force output lengths only on servers that accept the fields (strict servers reject them).
    target.extra_body = dict(server.extra_body)
    target.send_min_tokens = bool(server.supports_ignore_eos)
    server.output_length_forced = bool(target.extra_body)

    # 2. sensors (nothing is written before the input has been checked).
    sensors, problems = _open_sensors(cfg)
    from wattbench.telemetry.sampler import Sampler

    sampler = None
    if sensors:
        sampler = Sampler(sensors, interval_s=cfg.sample_interval_s)
        problems = problems + sampler.open()
        if sampler.channels:
            sampler.start()
            stack.callback(sampler.stop)
            state.sampler = sampler
        else:
            sampler.close()
            sampler = None

    # 3. the run directory and the result skeleton.
    run_dir.mkdir(parents=True, exist_ok=True)
    state.run_dir = run_dir
    from wattbench.environment import collect_environment
    from wattbench.telemetry.jsonl import TelemetryWriter

    gpus = sampler.gpu_inventory() if sampler is not None else []
    result = Result(
        wattbench_version=__version__,
        run_id=state.run_id,
        created_at=_dt.datetime.fromtimestamp(state.anchor.wall_ns / 1e9, tz=_dt.timezone.utc).isoformat(),
        clock=ClockInfo(
            anchor_wall_ns=state.anchor.wall_ns,
            anchor_mono_ns=state.anchor.mono_ns,
            anchor_uncertainty_ns=state.anchor.uncertainty_ns,
        ),
        config=cfg.public_dict(),
        environment=collect_environment(gpus),
        server=server,
        sensors=[c.to_dict() for c in (sampler.channels if sampler else [])],
        sensor_problems=problems,
        tags=list(cfg.tags),
    )
    result.extra["workload"] = workload.describe()
    result.extra["prompt_length_source"] = workload.token_source
    if workload.token_source == "approx":
        result.warnings.append(
            "prompt lengths are approximate (no tokenizer: give --tokenizer PATH, or a server with /tokenize); "
            "token counts still come from the server's usage"
        )
    if sampler is None:
        why = (
            "--no-sensors was given"
            if cfg.no_sensors
            else "no power meter could be read on this machine"
            + (": " + "; ".join(problems) if problems else "")
        )
        state.energy_unavailable_reason = why
        result.warnings.append(f"energy unavailable: {why}")
    result.extra["run_dir"] = str(run_dir)
    state.result = result
    if sampler is not None:
        state.telemetry_writer = TelemetryWriter(run_dir / "telemetry.jsonl", sampler.channels, state.anchor)
    from wattbench.results import rundir

    rundir.write_result(run_dir, result)

    # 4. server /metrics timeline.
    if server.metrics_endpoint:
        from wattbench.server.metrics import MetricsScraper

        scraper = MetricsScraper(server.metrics_endpoint, interval_s=0.5, engine=server.engine, api_key=api_key)
        scraper.start()
        stack.callback(scraper.stop)
        state.scraper = scraper

    # 5. idle baseline before the load.
    from wattbench.accounting import measure_idle

    if sampler is not None and cfg.idle_s > 0:
        _emit(state, "phase", name="idle", message=f"measuring idle power for {cfg.idle_s:g} s")
        t0 = now_ns()
        time.sleep(cfg.idle_s)
        t1 = now_ns()
        idle = measure_idle(sampler.log, t0, t1)
        result.idle = {b: i.to_dict() for b, i in idle.items()}
        result.extra["idle_window"] = {"start_ns": t0, "end_ns": t1, "duration_s": (t1 - t0) / 1e9}
        state.idle_power = idle

    # 6. the levels. Each level takes fresh requests (no prefix-cache hits from the previous one).
    from wattbench.workload.trace import TraceWorkload

    is_trace = isinstance(workload, TraceWorkload)
    used = 0
    levels = cfg.levels()
    for index, (mode, value) in enumerate(levels):
        spec = LevelSpec(
            index=index,
            mode=("trace" if is_trace else mode),
            value=value,
            arrival=cfg.arrival,
            num_requests=cfg.num_requests,
            duration_s=cfg.duration_s,
            warmup_s=cfg.warmup_s,
            warmup_requests=cfg.warmup_requests,
            seed=cfg.seed + index,
            workers=cfg.workers,
            speedup=cfg.speedup,
        )
        if spec.num_requests is None and spec.duration_s is None and not is_trace:
            spec.num_requests = _default_num_requests(mode, value)
        _emit(state, "level_start", index=index, label=spec.label, total=spec.num_requests, levels=len(levels))

        def on_progress(p: dict, _i=index) -> None:
            if sampler is not None:
                p = dict(p)
                p["power_w"] = sampler.latest_power_w()
            _emit(state, "progress", index=_i, **p)

        try:
            outcome = run_level(spec, target, workload.specs(None, start=0 if is_trace else used), on_progress=on_progress)
        except Interrupted as e:  # keep the completed requests of the interrupted level
            partial = getattr(e, "outcome", None)
            if partial is not None and partial.records:
                _save_level(state, index, spec, partial, workload.token_source)
            raise
        _save_level(state, index, spec, outcome, workload.token_source)
        used += len(outcome.records)

    # 7. idle after the last level (optional): drift check.
    if sampler is not None and cfg.idle_after_s > 0:
        _emit(state, "phase", name="idle", message=f"measuring idle power after the load for {cfg.idle_after_s:g} s")
        t0 = now_ns()
        time.sleep(cfg.idle_after_s)
        t1 = now_ns()
        w = result.extra.get("idle_window")
        if w:  # before and after together: averaged idle power per boundary and its drift
            both = measure_idle(sampler.log, w["start_ns"], w["end_ns"], after_start_ns=t0, after_end_ns=t1)
        else:
            both = measure_idle(sampler.log, t0, t1)
        result.extra["idle_after_window"] = {"start_ns": t0, "end_ns": t1, "duration_s": (t1 - t0) / 1e9}
        result.idle = {b: i.to_dict() for b, i in both.items()}

    # 8. close out.
    verdicts = [lv.validity.verdict for lv in result.levels]
    worst = "invalid" if "invalid" in verdicts else "warn" if "warn" in verdicts else "valid"
    result.validity = Validity(
        verdict=worst,  # type: ignore[arg-type]
        reasons=sorted({f"{lv.label}: {r}" for lv in result.levels for r in lv.validity.reasons}),
    )
    _finish(state, "complete", None)
    if cfg.register_run:
        with contextlib.suppress(Exception):  # history is an index; the run directory is the record
            from wattbench.results.store import HistoryStore

            HistoryStore(cfg.db).register(result, run_dir)
    return result


def _default_num_requests(mode: str, value: float) -> int:
    """A level with neither --num-requests nor --duration: enough requests for stable
    percentiles at that load (at least 4 rounds of the concurrency, at least 32)."""
    if mode == "concurrency":
        return max(32, int(value) * 4)
    return max(32, int(value * 10))
