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
    Pareto,
    PowerSplit,
    Result,
    SearchOutcome,
    ServerInfo,
    TrialsBlock,
    Window,
)

log = logging.getLogger("wattbench.run")

ProgressFn = Callable[[str, dict], None]


def new_run_id(anchor: ClockAnchor) -> str:
    from wattbench.results.ids import new_run_id as _new

    return _new(anchor.wall_ns)


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
    cluster: Any = None
    energy_unavailable_reason: str | None = None
    telemetry_writer: Any = None
    carbon: Any = None  # metrics.carbon.IntensitySeries from --carbon-intensity
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
        tenant_field=config.tenant_field,
    )


def _write_level_artifacts(state: _RunState) -> None:
    """Write the telemetry and server timeline since the last write and rewrite result.json
    (atomically). Called after every level (its requests are appended as they finish)."""
    from wattbench.results import rundir

    assert state.run_dir is not None and state.result is not None
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


def _account_level(state: _RunState, index: int, spec, outcome, token_source: str, slos: list) -> LevelResult:
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
        from wattbench.accounting.split import power_split

        split = power_split(level.energy, level.window.duration_s)  # memory vs the rest of the board
        if split is not None:
            level.power_split = PowerSplit.model_validate(split)
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
    elif state.sampler is not None:
        level.energy_unavailable_reason = ("the level has no measurement window: no measured request completed, "
                                           "so no energy can be attributed to it")
    else:
        level.energy_unavailable_reason = "no power meter (see the run's verdict)"
    if state.scraper is not None:
        # one scrape after the window so its end is bracketed by scrapes (counter deltas interpolate)
        time.sleep(min(state.scraper.interval_s * 1.2, 2.0))
        level.server_metrics = state.scraper.timeline.summary(outcome.start_ns, outcome.end_ns)
    elif state.result is not None:
        level.server_metrics = {
            "available": False,
            "reason": f"the server ({state.result.server.engine or 'unknown engine'}) exposes no Prometheus /metrics; "
                      "the report's timeline shows the client's view (requests in flight, tokens/s)",
        }
    if slos and level.window.duration_s > 0:
        from wattbench.metrics.slo import goodput

        level.goodput = goodput(outcome.records, slos, level.window.duration_s,
                                avg_power_w={b: e.avg_power_w for b, e in level.energy.items()},
                                window_output_tokens=throughput.tokens_in_window.output)
    if str(outcome.stopped_early or "").startswith("over-saturated"):
        extra.append(Finding("warn", f"level stopped early, {outcome.stopped_early}; its figures describe a "
                                     "server past its capacity"))
    sat = _oversaturation(state, spec, outcome)
    if sat is not None:
        level.extra["oversaturation"] = sat.to_dict()
        if sat.oversaturated:
            extra.append(Finding("warn", f"over-saturated: {sat.reason}; latency figures grow with run length"))
    from wattbench.accounting.validity import steady_findings

    e2e_p50 = latency.e2e_ms.p50
    extra += steady_findings(level.window, level.steady_window, mode=spec.mode, energy=level.energy,
                             energy_steady=level.energy_steady, e2e_s=e2e_p50 / 1e3 if e2e_p50 else None)
    level.validity = level_validity(accounted, load=outcome.load, token_source=token_source, extra=extra,
                                    n_requests=level.requests.completed + level.requests.failed)
    from wattbench.load.saturation import mark_saturated

    return mark_saturated(level)


def _oversaturation(state: _RunState, spec, outcome):
    """Whether the level's queue grew without bound: the server's waiting queue where scraped,
    else (open loop) requests sent but not finished, sampled every 100 ms over the window."""
    from wattbench.load.saturation import is_oversaturated
    from wattbench.metrics.latency import request_end_ns

    t0, t1 = outcome.start_ns, outcome.end_ns
    if t1 <= t0:
        return None
    tl = state.scraper.timeline if state.scraper is not None else None
    if tl is not None and "waiting" in tl.series:
        ts, vs = tl.series["waiting"]
        pts = [(t, v) for t, v in zip(ts, vs) if t0 <= t <= t1]
        if len(pts) >= 8:
            return is_oversaturated([(t - t0) / 1e9 for t, _ in pts], [v for _, v in pts], min_points=4)
    if spec.mode == "concurrency":
        return None  # a closed loop's backlog is capped by its concurrency
    import numpy as np

    recs = [r for r in outcome.records if not r.warmup]
    if not recs:
        return None
    sent = np.sort(np.array([r.sent_ns for r in recs], dtype=np.int64))
    ends = np.sort(np.array([request_end_ns(r) or r.end_ns or t1 for r in recs], dtype=np.int64))
    grid = np.arange(t0, t1, 100_000_000, dtype=np.int64)
    backlog = np.searchsorted(sent, grid, side="right") - np.searchsorted(ends, grid, side="right")
    return is_oversaturated(((grid - t0) / 1e9).tolist(), backlog.tolist())


def _count_source(records) -> str:
    """Where the level's token counts come from: the server's ``usage`` for every completed
    request, or ``missing`` when some completed request had none (then throughput undercounts)."""
    done = [r for r in records if r.ok and not r.warmup]
    if done and any(r.output_tokens is None for r in done):
        return "missing"
    return "usage"


def _add_level_findings(level: LevelResult, spec, outcome, length_source: str | None) -> None:
    """What the level measured, judged (accounting/level_findings.py): nothing completed, small
    samples, a closed loop far below its label, prompt lengths off, the target gone."""
    from wattbench.accounting.level_findings import level_findings
    from wattbench.accounting.validity import combine, worst

    if outcome.target_down:
        level.extra["target_down"] = dict(outcome.target_down)
    level.extra["timing"] = {"warmup_s": spec.warmup_s, "warmup_requests": spec.warmup_requests,
                             "duration_s": spec.duration_s, "duration_includes_warmup": False}
    found = level_findings(level, outcome.records, stopped_early=outcome.stopped_early, length_source=length_source,
                           target_down=outcome.target_down)
    if found:
        level.validity = worst(level.validity, combine(found))


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

    from wattbench.accounting.level_findings import run_validity

    state.result.status = status  # type: ignore[assignment]
    state.result.status_detail = detail
    state.result.validity = run_validity(state.result, state.energy_unavailable_reason)
    with contextlib.suppress(Exception):
        if state.sampler is not None and state.telemetry_writer is not None:
            state.telemetry_writer.flush(state.sampler.log)
    with contextlib.suppress(Exception):
        rundir.write_result(state.run_dir, state.result)
    _write_report(state)


def _run(state: _RunState, stack: contextlib.ExitStack) -> Result:
    from wattbench.load.types import TargetSpec
    from wattbench.server.detect import detect_server, reuses_connections
    from wattbench.server.openai import check_target, normalize_base_url
    from wattbench.server.redact import combine_credentials

    cfg = state.config
    api_key = _api_key(cfg)
    run_dir = _resolve_run_dir(cfg, state.run_id)
    from wattbench.metrics.slo import parse_slos

    slos = parse_slos(cfg.slo) if cfg.slo else []  # bad SLO text fails before anything starts
    from wattbench.metrics.carbon_series import parse_carbon_intensity

    state.carbon = parse_carbon_intensity(cfg.carbon_intensity)  # a bad file fails here too
    if cfg.optimize and cfg.optimize not in OBJECTIVES:
        raise UserError(f"--optimize {cfg.optimize!r}: choose one of {', '.join(OBJECTIVES)}")
    if cfg.ray and cfg.rate and cfg.max_concurrency is not None:
        raise UserError("--rate with --max-concurrency is not supported with --ray yet: drop one of them")
    if cfg.sweep not in (None, "auto"):
        raise UserError(f"--sweep {cfg.sweep!r}: the only sweep is 'auto' (give levels with --concurrency/--rate)")

    _validate_levels(cfg)  # every level the run plans, checked before anything is written

    # 1. target: given, or an engine we launch and stop.
    tokenizer_path = cfg.tokenizer
    launched_info: ServerInfo | None = None
    launched_model: str | None = None  # the launch plan's name for the model (issue 15)
    if cfg.target:
        # credentials in the URL become an Authorization header; the URL kept and written has none
        target_url, api_key = combine_credentials(cfg.target, api_key)
        base_url = normalize_base_url(target_url)
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
        launched_model = handle.model
        if tokenizer_path is None:
            tokenizer_path = handle.plan.tokenizer_source()  # the served model's own tokenizer: exact lengths

    model, models = asyncio.run(check_target(base_url, api_key, cfg.model, launched_model=launched_model))
    if launched_model is not None and model not in models:
        from wattbench.server.openai import check_model_answers

        asyncio.run(check_model_answers(base_url, api_key, model, cfg.api))  # a real request, not the listing
    server = asyncio.run(detect_server(base_url, api_key))
    extra_keys: dict[str, str | None] = {}
    for u in cfg.targets:
        clean, key = combine_credentials(u, _api_key(cfg))
        extra_keys.setdefault(normalize_base_url(clean), key)
    extra_urls = [u for u in extra_keys if u != base_url]
    extra_servers = []
    for u in extra_urls:  # replicas (or a load balancer's backends): same model, checked each
        asyncio.run(check_target(u, extra_keys[u], model))
        extra_servers.append(asyncio.run(detect_server(u, extra_keys[u])))
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
    targets = [target] + [
        TargetSpec(base_url=u, model=model, api=cfg.api, api_key=extra_keys[u],
                   request_timeout_s=cfg.request_timeout_s,
                   stall_timeout_s=cfg.stall_timeout_s, keep_output_text=cfg.keep_output_text,
                   extra_body=dict(si.extra_body), send_min_tokens=bool(si.supports_ignore_eos))
        for u, si in zip(extra_urls, extra_servers)
    ]
    workload = _build_workload(cfg, target, server, tokenizer_path)
    # Force output lengths only on servers that accept the fields (strict servers reject them).
    target.extra_body = dict(server.extra_body)
    target.send_min_tokens = bool(server.supports_ignore_eos)
    target.keepalive = reuses_connections(server.engine)
    for t, si in zip(targets[1:], extra_servers):
        t.keepalive = reuses_connections(si.engine)
    server.output_length_forced = bool(target.extra_body)
    for t in targets:  # the user's request fields (--extra-body, --temperature, --top-p) and --header
        t.extra_body.update(cfg.request_fields())
        t.headers = dict(cfg.headers)

    # 2. sensors (nothing is written before the input has been checked). With --ray one sensor
    #    actor per node samples there and the driver merges on its clock.
    cluster = None
    if cfg.ray:
        from wattbench.distributed.run import RayCluster

        cluster = stack.enter_context(RayCluster(cfg.ray, n_actors=cfg.ray_actors, sensors=cfg.sensors,
                                                 sensor_interval_s=cfg.sample_interval_s))
        state.cluster = cluster
        sensors, problems = [], []
        if not cfg.no_sensors:
            problems = list(cluster.start_sensors())
    else:
        sensors, problems = _open_sensors(cfg)
    from wattbench.telemetry.sampler import Sampler

    sampler = None
    if cluster is not None and not cfg.no_sensors:
        sampler = _ClusterTelemetry(cluster)
        if sampler.channels:
            state.sampler = sampler
        else:
            sampler = None
    elif sensors:
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
        extra={"targets": [t.base_url for t in targets]} if len(targets) > 1 else {},
        sensor_problems=problems,
        tags=list(cfg.tags),
    )
    result.extra["workload"] = workload.describe()
    if state.carbon is not None:
        result.carbon = {**state.carbon.describe(), "unit": "gCO2e/kWh", "pue": cfg.pue}
    result.extra["prompt_length_source"] = workload.token_source
    if workload.token_source == "approx":
        result.warnings.append(
            "prompt lengths are approximate (no tokenizer: give --tokenizer PATH, or a server with /tokenize); "
            "token counts still come from the server's usage"
        )
    if sampler is None:  # said once, in the run's verdict (accounting.level_findings.run_validity)
        state.energy_unavailable_reason = (
            "--no-sensors was given" if cfg.no_sensors
            else "no power meter could be read on this machine"
            + (f"; {len(problems)} sensor problem(s) listed below" if problems else "")
        )
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
        result.idle_window = Window(start_ns=t0, end_ns=t1, duration_s=(t1 - t0) / 1e9, kind="idle")
        state.idle_power = idle

    # 6. the levels: a fixed ladder, an automatic sweep or an SLO-aware search; each level
    #    repeated --trials times; each level takes fresh requests (no prefix-cache hits).
    from wattbench.workload.trace import TraceWorkload

    lr = _LevelRunner(state, targets, workload, isinstance(workload, TraceWorkload), slos)
    _run_levels(state, lr)
    if cfg.prefill_decode_pair and sampler is not None:
        _prefill_decode_pair(state, lr)
    _run_analyses(state, lr)

    # 7. idle after the last level (optional): drift check.
    if sampler is not None and cfg.idle_after_s > 0:
        _emit(state, "phase", name="idle", message=f"measuring idle power after the load for {cfg.idle_after_s:g} s")
        t0 = now_ns()
        time.sleep(cfg.idle_after_s)
        t1 = now_ns()
        w = result.idle_window
        if w:  # before and after together: averaged idle power per boundary and its drift
            both = measure_idle(sampler.log, w.start_ns, w.end_ns, after_start_ns=t0, after_end_ns=t1)
        else:
            both = measure_idle(sampler.log, t0, t1)
        result.idle_after_window = Window(start_ns=t0, end_ns=t1, duration_s=(t1 - t0) / 1e9, kind="idle_after")
        result.idle = {b: i.to_dict() for b, i in both.items()}

    # 8. close out.
    _finish(state, "complete", None)
    if cfg.register_run:
        with contextlib.suppress(Exception):  # history is an index; the run directory is the record
            from wattbench.results.store import HistoryStore

            HistoryStore(cfg.db).register(result, run_dir)
    return result


def _validate_levels(cfg: RunConfig) -> None:
    """The load generator's own checks (``load.level.validate_spec``) on every planned level, so bad
    input (``--arrival poison``, a rate the generator refuses) exits before a file is written."""
    from wattbench.load.level import validate_spec
    from wattbench.load.types import LevelSpec

    plans = cfg.levels() if not (cfg.sweep or cfg.optimize) else [("rate", r) for r in cfg.rate] or [
        ("concurrency", c) for c in (cfg.concurrency or [1])]
    for mode, value in plans:
        validate_spec(LevelSpec(index=0, mode=mode, value=value, arrival=cfg.arrival,  # type: ignore[arg-type]
                                num_requests=cfg.num_requests, duration_s=cfg.duration_s, workers=cfg.workers,
                                speedup=cfg.speedup))


OBJECTIVES = ("goodput_per_kw", "output_tokens_per_s_per_kw", "goodput_rps")
DEFAULT_LADDER = (1, 2, 4, 8, 16, 32, 64, 128, 256)
SEARCH_MAX_CONCURRENCY = 256  # --sweep auto / --optimize upper end when --max-concurrency is not given


class _LevelRunner:
    """Runs one load level (all its trials) and records it; the sweeps call ``measure``."""

    def __init__(self, state: _RunState, targets: list, workload, is_trace: bool, slos: list):
        self.state = state
        self.targets = targets
        self.workload = workload
        self.is_trace = is_trace
        self.slos = slos
        self.used = 0  # requests drawn from the workload so far

    def planned_levels(self) -> int | None:
        """How many levels the run will measure; None while a search (--sweep auto, --optimize)
        decides as it goes."""
        cfg = self.state.config
        if cfg.sweep or cfg.optimize:
            return None
        return len(cfg.levels()) + (2 if cfg.prefill_decode_pair else 0)

    def measure(self, mode: str, value: float, *, output_tokens: int | None = None,
                input_tokens: int | None = None, label_suffix: str = "") -> LevelResult:
        from wattbench.accounting import thermal_summary
        from wattbench.load.types import LevelSpec

        state, cfg = self.state, self.state.config
        result = state.result
        assert result is not None
        index = len(result.levels)
        trials: list[LevelResult] = []
        for k in range(max(1, cfg.trials)):
            if k > 0 and cfg.cooldown_s > 0:
                _emit(state, "phase", name="cooldown", message=f"cooldown {cfg.cooldown_s:g} s before trial {k + 1}")
                time.sleep(cfg.cooldown_s)
            thermal_before = None
            if state.sampler is not None:
                t = now_ns()
                thermal_before = thermal_summary(state.sampler.log, t - 3_000_000_000, t)
            spec = LevelSpec(
                index=index,
                mode=("trace" if self.is_trace else mode),  # type: ignore[arg-type]
                value=value,
                arrival=cfg.arrival,
                num_requests=cfg.num_requests,
                duration_s=cfg.duration_s,
                warmup_s=cfg.warmup_s,
                warmup_requests=cfg.warmup_requests,
                seed=cfg.seed + 1000 * index + k,
                workers=cfg.workers,
                speedup=cfg.speedup,
                max_in_flight=cfg.max_concurrency if mode == "rate" else None,
            )
            if spec.num_requests is None and spec.duration_s is None and not self.is_trace:
                spec.num_requests = _default_num_requests(mode, value, result.levels)
            label = spec.label + label_suffix + (f" trial {k + 1}/{cfg.trials}" if cfg.trials > 1 else "")
            _emit(state, "level_start", index=index, label=label, total=spec.num_requests,
                  levels=self.planned_levels(), trial=k + 1, trials=max(1, cfg.trials), duration_s=spec.duration_s)

            def on_progress(p: dict, _i=index) -> None:
                if state.sampler is not None:
                    p = dict(p)
                    p["power_w"] = state.sampler.latest_power_w()
                _emit(state, "progress", index=_i, **p)

            requests = self._requests(output_tokens, input_tokens)
            try:
                outcome = self._run_one(spec, requests, on_progress)
            except Interrupted as e:  # keep the completed requests of the interrupted level
                partial = getattr(e, "outcome", None)
                if partial is not None and partial.records:
                    lv = self._account(index, spec, partial, k, thermal_before, label_suffix)
                    self._record(lv, partial.records, trials + [lv])
                raise
            self.used += len(outcome.records)
            lv = self._account(index, spec, outcome, k, thermal_before, label_suffix)
            trials.append(lv)
            self._write_requests(outcome.records, k)
            if outcome.target_down:
                break  # no further trial against a target that stopped answering
        level = trials[-1]
        self._record(level, [], trials)
        if level.extra.get("target_down"):
            from wattbench.errors import TargetStopped

            raise TargetStopped(f"{level.extra['target_down']['text']} (level {level.label}); the run stopped, "
                                f"the {sum(t.requests.completed + t.requests.failed for t in trials)} requests "
                                "measured are kept" + (f" in {state.run_dir}" if state.run_dir else ""))
        return level

    def _run_one(self, spec, requests, on_progress):
        from wattbench.load.level import run_level

        cluster = self.state.cluster
        if cluster is not None:  # --ray: load actors over the cluster, records on the driver's clock
            factory = _SpecList(requests, _requests_needed(spec))
            out = cluster.run_level(spec, self.targets, factory, on_progress=on_progress)
            self.state.result.nodes = cluster.node_infos()
            return out
        if len(self.targets) > 1:
            from wattbench.load.targets import run_level_multi

            return run_level_multi(spec, self.targets, requests, on_progress=on_progress)
        return run_level(spec, self.targets[0], requests, on_progress=on_progress)

    def _requests(self, output_tokens: int | None, input_tokens: int | None):
        # a trace replays its rows; every other workload is asked for an endless stream, so a dataset
        # shorter than the run cycles (docs/workloads.md) instead of leaving later levels empty
        specs = self.workload.specs(None, start=0) if self.is_trace else self.workload.specs(
            ENDLESS_REQUESTS, start=self.used)
        if output_tokens is None and input_tokens is None:
            return specs
        return _override_lengths(specs, output_tokens, input_tokens, self.workload)

    def _account(self, index, spec, outcome, trial: int, thermal_before, label_suffix: str) -> LevelResult:
        lv = _account_level(self.state, index, spec, outcome, _count_source(outcome.records), self.slos)
        lv.label = spec.label + label_suffix
        _add_level_findings(lv, spec, outcome, self.workload.token_source)
        if len(self.targets) > 1:
            from wattbench.load.targets import per_target_summary

            lv.per_target = per_target_summary(outcome.records, outcome.start_ns, outcome.end_ns,
                                               [t.base_url for t in self.targets])
        if self.state.cluster is not None and self.state.sampler is not None and outcome.end_ns > outcome.start_ns:
            lv.per_node_energy = _per_node_energy(self.state, outcome, lv)
        _attribute(self.state, lv, outcome.records)
        lv.extra["prompt_length_source"] = self.workload.token_source
        lv.extra["trial"] = trial
        if thermal_before is not None:
            lv.extra["thermal_before"] = thermal_before
        return lv

    def _write_requests(self, records, trial: int) -> None:
        from wattbench.results import rundir

        if self.state.config.trials > 1:
            for r in records:
                r.trial = trial  # extra field: which trial of the level
        rundir.append_requests(self.state.run_dir, records)

    def _record(self, level: LevelResult, partial_records, trials: list[LevelResult]) -> None:
        """Add the level (its last trial, with the trials' mean and CI) and write everything."""
        state = self.state
        assert state.result is not None
        if len(trials) > 1:
            level.trials = TrialsBlock.model_validate(_trials_block(trials))
        state.result.levels.append(level)
        if partial_records:
            self._write_requests(partial_records, level.extra.get("trial", 0))
        _write_level_artifacts(state)
        _write_report(state)
        _emit(state, "level_done", index=level.index, level=level)


class _SpecList:
    """A picklable request factory for Ray load actors: the level's requests drawn up front."""

    def __init__(self, specs, n: int):
        import itertools

        self.specs = list(itertools.islice(iter(specs), n))

    def __call__(self, i: int):
        return self.specs[i] if 0 <= i < len(self.specs) else None


def _requests_needed(spec) -> int:
    """How many requests a distributed level can use (drawn before it starts)."""
    extra = (spec.warmup_requests or 0) + int(spec.value if spec.mode == "concurrency" else 0)
    if spec.num_requests is not None:
        return spec.num_requests + extra
    if spec.mode == "rate" and spec.duration_s is not None:
        return int(spec.value * (spec.duration_s + (spec.warmup_s or 0.0)) * 1.3) + 16 + extra
    return MAX_PREDRAWN_REQUESTS


MAX_PREDRAWN_REQUESTS = 20_000
ENDLESS_REQUESTS = 1 << 40  # "no end" for a workload's lazy specs(n, start)


class _ClusterTelemetry:
    """The Ray cluster's merged sensor stream seen through the sampler's interface."""

    def __init__(self, cluster):
        self.cluster = cluster

    @property
    def log(self):
        return self.cluster.telemetry()

    @property
    def channels(self):
        return list(self.cluster.telemetry().channels.values())

    def latest_power_w(self):
        return None

    def gpu_inventory(self):
        return []

    def stop(self):
        return self.cluster.stop_sensors()

    def close(self):
        self.stop()


def _attribute(state: _RunState, level: LevelResult, records) -> None:
    """Energy per request (accounting/request_energy.py) and carbon (accounting/carbon.py), issue 20."""
    if state.sampler is None or not level.energy:
        return
    import functools

    from wattbench.accounting.boundaries import boundary_totals
    from wattbench.accounting.request_energy import attribute_level

    log, pue = state.sampler.log, state.config.pue

    @functools.lru_cache(maxsize=4096)
    def totals(t0: int, t1: int) -> dict:
        return boundary_totals(log, t0, t1, pue=pue)

    def energy_fn_for(b: str):
        def f(t0: int, t1: int) -> float | None:
            t = totals(t0, t1).get(b)
            return None if t is None else t.energy_j
        return f

    attribute_level(level, records, energy_fn_for, attribute_idle=state.config.attribute_idle)
    if state.carbon is not None:
        from wattbench.accounting.carbon import apply_carbon

        apply_carbon(level, records, state.carbon, state.anchor.wall_ns, state.anchor.mono_ns, energy_fn_for, pue)


def _per_node_energy(state: _RunState, outcome, level: LevelResult) -> dict:
    from wattbench.accounting import account_window
    from wattbench.distributed.merge import split_by_node

    cfg = state.config
    out = {}
    for node, sub in split_by_node(state.sampler.log).items():
        acc = account_window(sub, outcome.start_ns, outcome.end_ns, output_tokens=level.throughput.output_tokens,
                             total_tokens=level.throughput.output_tokens + level.throughput.input_tokens,
                             idle=None, price_per_kwh=cfg.price_per_kwh, pue=cfg.pue)
        out[node] = acc.energy
    return out


def _override_lengths(specs, output_tokens: int | None, input_tokens: int | None, workload):
    """The workload's requests with forced lengths (the prefill/decode isolating pair)."""
    from wattbench.workload.synthetic import PromptBuilder
    from wattbench.workload.base import RequestSpec

    builder = None
    if input_tokens is not None:
        builder = PromptBuilder(workload.ts, seed=4242) if hasattr(workload, "ts") else None
    import numpy as np

    rng = np.random.default_rng(4242)
    for i, s in enumerate(specs):
        prompt = s.prompt
        n_in = s.input_tokens
        if input_tokens is not None and builder is not None:
            prompt = builder.text(input_tokens, rng, f"[{i}] ")
            n_in = input_tokens
        out = output_tokens if output_tokens is not None else s.max_tokens
        yield RequestSpec(prompt=prompt, messages=None if prompt else s.messages, max_tokens=out,
                          input_tokens=n_in, token_source=s.token_source, min_tokens=out)


def _trials_block(trials: list[LevelResult]) -> dict:
    """Mean and 95% CI (Student t) over trials of every headline figure, in the form compare and
    regress read: ``figures[name]`` and ``figures[name@boundary]`` -> mean, ci_low, ci_high, n."""
    from wattbench.analysis.figures import ENERGY_FIGURES, headline
    from wattbench.metrics.trials import ci95

    boundaries = sorted({b for t in trials for b in t.energy})
    values: dict[str, list[float]] = {}
    for t in trials:
        for b in boundaries or [None]:
            for name, v in headline(t, b).items():
                if v is None:
                    continue
                key = f"{name}@{b}" if (b and name in ENERGY_FIGURES) else name
                if b and name not in ENERGY_FIGURES and b != (boundaries or [None])[0]:
                    continue  # boundary-free figures once
                values.setdefault(key, []).append(float(v))
    figures = {}
    for key, vs in values.items():
        c = ci95(vs)
        figures[key] = {"mean": c["mean"], "ci_low": c["ci95_low"], "ci_high": c["ci95_high"], "n": c["n"],
                        "values": vs}
    return {"n": len(trials), "confidence": 0.95, "figures": figures,
            "thermal_before": [t.extra.get("thermal_before") for t in trials]}


def _level_figures(level: LevelResult) -> dict:
    """What the sweeps judge a level by: its dump plus a flat objective per boundary."""
    d = level.model_dump(mode="json")
    if level.requests.completed == 0:  # a failed level, not a missing one (load/search.py)
        d["failed"] = next((r.split(": ", 1)[-1] for r in level.validity.reasons if "no measured request" in r),
                           "no measured request completed")
    d["oversaturated"] = bool((level.extra.get("oversaturation") or {}).get("oversaturated")) or str(
        level.extra.get("stopped_early") or "").startswith("over-saturated")
    b = _primary_boundary(level)
    e = level.energy.get(b) if b else None
    d["output_tokens_per_s_per_kw"] = e.output_tokens_per_s_per_kw if e else None
    gp = level.goodput or {}
    d["goodput_rps"] = gp.get("requests_per_s")
    if b and gp.get("per_kw"):
        d["goodput_per_kw"] = (gp["per_kw"].get(b) or {}).get("output_tokens_per_s_per_kw")
    elif e is not None and not gp:
        d["goodput_per_kw"] = e.output_tokens_per_s_per_kw  # no SLO: every completed token is good
    return d


def _primary_boundary(level: LevelResult) -> str | None:
    """The boundary headline figures use: one rule, ``results.headline.headline_boundary``."""
    from wattbench.results.headline import headline_boundary

    return headline_boundary(level)

def _run_levels(state: _RunState, lr: _LevelRunner) -> None:
    from wattbench.load.search import auto_sweep, optimize

    cfg = state.config
    result = state.result
    assert result is not None
    mode = "rate" if cfg.rate else "concurrency"
    if cfg.sweep == "auto":
        res = auto_sweep(lambda v: _level_figures(lr.measure("concurrency", v)), start=1,
                         max_value=cfg.max_concurrency or SEARCH_MAX_CONCURRENCY)
        result.sweep = SearchOutcome.model_validate(res.to_dict("throughput.output_tokens_per_s"))
    elif cfg.optimize:
        if cfg.rate:
            candidates = list(cfg.rate)
        else:
            candidates = list(cfg.concurrency) or [
                c for c in DEFAULT_LADDER if c <= (cfg.max_concurrency or SEARCH_MAX_CONCURRENCY)]
        res = optimize(lambda v: _level_figures(lr.measure(mode, v)), candidates, objective=cfg.optimize,
                       slos=lr.slos)
        d = res.to_dict(cfg.optimize)
        d["candidates"] = candidates
        d["ladder_size"] = len(candidates)
        result.optimize = SearchOutcome.model_validate(d)
    else:
        for m, v in cfg.levels():
            lr.measure(m, v)


def _prefill_decode_pair(state: _RunState, lr: _LevelRunner) -> None:
    """Two extra levels that isolate prefill (max_tokens=1) and decode (short prompts, long outputs)
    at the run's largest concurrency, solved exactly as a cross-check of the regression."""
    from wattbench.accounting.attribution import isolating_pair

    cfg = state.config
    conc = max(cfg.concurrency or [8])
    pre = lr.measure("concurrency", conc, output_tokens=1, input_tokens=1024, label_suffix=" prefill-heavy")
    dec = lr.measure("concurrency", conc, output_tokens=512, input_tokens=16, label_suffix=" decode-heavy")
    b = _primary_boundary(pre) or _primary_boundary(dec)

    def figs(lv: LevelResult) -> dict:
        e = lv.energy.get(b) if b else None
        if e is None:  # an error text is a sentence, never a leaked key name
            why = next((r.split(": ", 1)[-1] for r in lv.validity.reasons if "no measured request" in r), None) \
                or lv.energy_unavailable_reason or f"no {b or 'power'} energy was measured in it"
            raise UserError(f"the {lv.label} level has no energy to split ({why})")
        return {"dynamic_energy_j": e.dynamic_energy_j, "energy_j": e.energy_j, "idle_power_w": e.idle_power_w,
                "duration_s": lv.window.duration_s if lv.window else None,
                "input_tokens": lv.throughput.input_tokens, "output_tokens": lv.throughput.output_tokens}

    try:
        pair = isolating_pair(figs(pre), figs(dec))
        pair["boundary"] = b
        pair["levels"] = [pre.index, dec.index]
    except UserError as e:
        pair = {"error": str(e)}
    except (KeyError, TypeError) as e:
        pair = {"error": f"the isolating pair could not be solved: a figure it needs is missing "
                         f"({type(e).__name__} {e})"}
    failed = [lv.label for lv in (pre, dec) if lv.requests.completed == 0]
    if failed:
        pair["failed_levels"] = failed
    state.result.extra.setdefault("prefill_decode", {})["isolating_pair"] = pair


def _run_analyses(state: _RunState, lr: _LevelRunner) -> None:
    """Run-level analyses over the measured levels: Pareto frontier, prefill/decode regression."""
    from wattbench.analysis.pareto import frontier_from_levels

    result = state.result
    assert result is not None
    if not result.levels:
        return
    b = _primary_boundary(result.levels[0])
    if b:
        dumps = [lv.model_dump(mode="json") for lv in result.levels]
        pareto = {
            "boundary": b,
            "tpot_p99": frontier_from_levels(dumps, boundary=b, latency="tpot_ms", stat="p99"),
            "ttft_p99": frontier_from_levels(dumps, boundary=b, latency="ttft_ms", stat="p99"),
        }
        if lr.slos:
            pareto["goodput_tpot_p99"] = frontier_from_levels(
                dumps, boundary=b, latency="tpot_ms", stat="p99", efficiency="goodput_per_kw")
        result.pareto = Pareto.model_validate(pareto)
    if state.sampler is not None and b:
        reg = _attribution(state, b)
        pd = result.extra.setdefault("prefill_decode", {})
        pd["regression"] = reg
        pair = pd.get("isolating_pair")
        if pair and "error" not in pair and reg.get("status") == "ok":
            from wattbench.accounting.attribution import cross_check

            pd["cross_check"] = cross_check(reg, pair)


def _attribution(state: _RunState, boundary: str) -> dict:
    """Prefill/decode regression over every measured level of the run (more spread in the token
    mix separates the two better). Token counts per interval from the server's counters when they
    were scraped, else from client timing."""
    from wattbench.accounting.attribution import fit_intervals, intervals_from_counters, intervals_from_records
    from wattbench.accounting.boundaries import boundary_totals
    from wattbench.results import rundir

    log = state.sampler.log

    def energy(t0: int, t1: int) -> float | None:
        t = boundary_totals(log, t0, t1).get(boundary)
        return None if t is None else t.energy_j

    try:
        tl = state.scraper.timeline if state.scraper is not None else None
        if tl is not None and tl.available and "prompt_tokens" in tl.series and "generation_tokens" in tl.series:
            levels = state.result.levels
            t0, t1 = levels[0].window.start_ns, levels[-1].window.end_ns
            pts = [(t, v) for t, v in tl.scrapes if t0 <= t <= t1
                   and "prompt_tokens" in v and "generation_tokens" in v]
            iv = intervals_from_counters([t for t, _ in pts], [v["prompt_tokens"] for _, v in pts],
                                         [v["generation_tokens"] for _, v in pts], energy)
            source = "server counters"
        else:
            records = rundir.load_requests(state.run_dir, notes=[])
            dur = sum(lv.window.duration_s for lv in state.result.levels if lv.window)
            iv = intervals_from_records(records, energy, interval_s=max(0.5, dur / 120))
            source = "client timing"
        out = fit_intervals(iv)
        out["boundary"] = boundary
        out["token_source"] = source
        return out
    except UserError as e:
        return {"error": str(e), "boundary": boundary}


def _default_num_requests(mode: str, value: float, levels=()) -> int:
    """A level with neither --num-requests nor --duration: sized so its steady state can earn a
    ``valid`` verdict (``accounting.steady.default_num_requests``), from the median E2E and the
    meter's update period measured at the previous level."""
    from wattbench.accounting.steady import default_num_requests

    e2e_s = period_s = None
    if levels:
        prev = levels[-1]
        e2e_s = prev.latency.e2e_ms.p50 / 1e3 if prev.latency.e2e_ms.p50 else None
        periods = [e.update_period_s for e in prev.energy.values() if e.update_period_s]
        period_s = max(periods) if periods else None
    return default_num_requests(mode, value, e2e_s, period_s)
