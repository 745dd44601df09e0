"""``run_benchmark(config, progress) -> Result``: the run, phase by phase.

    targets (given, or an engine launched) ── check + detect ──► ServerInfo      run/targets.py
    workload ──► RequestSpec source
    sensors ──► Sampler (thread) ──► TelemetryLog ─┐                             run/telemetry.py
    /metrics ──► MetricsScraper (thread) ──────────┤
    plan (ladder, sweep, optimize, pair) ──► level ─┴─► accounting ──► LevelResult  run/plan.py, run/level.py
    levels ──► Pareto, prefill/decode regression                                   run/analyses.py

Nothing is written before every input has been checked. The ``RunSession`` (run/session.py) holds
the resources and writes the run directory after every level.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wattbench import __version__
from wattbench.accounting.idle import IdlePower, measure_idle
from wattbench.core.clock import ClockAnchor, now_ns
from wattbench.config.run import RunConfig
from wattbench.environment import collect_environment
from wattbench.core.errors import Interrupted, WattbenchError
from wattbench.metrics.carbon_series import parse_carbon_intensity
from wattbench.metrics.slo import parse_slos
from wattbench.results import rundir
from wattbench.core.ids import new_run_id as _new_run_id
from wattbench.core.schema import (CarbonIntensity, ClockInfo, IdleBaseline, NoiseInfo, PrefillDecode, RecordedConfig,
                                   Result, ServerInfo, Window)
from wattbench.report.summary import history_summary
from wattbench.results.store import HistoryStore
from wattbench.run import analyses, plan, telemetry
from wattbench.run.level import LevelRunner
from wattbench.run.events import Phase, ProgressFn
from wattbench.run.session import RunSession, resolve_run_dir
from wattbench.run.targets import Targets, resolve_targets, run_secrets
from wattbench.server.metrics import MetricsScraper
from wattbench.core import secret_scope
from wattbench.engines.base import Engine
from wattbench.telemetry.base import Sensor
from wattbench.telemetry.jsonl import TelemetryWriter
from wattbench.workload.presets import load_workload
from wattbench.workload.source import Workload
from wattbench.workload.synthetic import PromptBuilder
from wattbench.workload.tokenizer import open_token_source

SCRAPE_INTERVAL_S = 0.5


def new_run_id(anchor: ClockAnchor) -> str:
    return _new_run_id(anchor.wall_ns)


def run_benchmark(config: RunConfig, progress: ProgressFn | None = None) -> Result:
    """Run a benchmark as configured and return its Result (also written to the run directory).

    Raises ``UserError`` for bad input before anything is written, ``Interrupted`` when stopped
    by SIGINT/SIGTERM (the partial result is on disk and attached as ``.result``).
    """
    anchor = ClockAnchor.take()
    with contextlib.ExitStack() as stack:
        session = RunSession(config=config, progress=progress or (lambda event: None), anchor=anchor,
                             run_id=new_run_id(anchor), stack=stack)
        try:
            return _run(session)
        except (KeyboardInterrupt, Interrupted) as e:
            raise stopped(session, "the run", "the levels measured so far are saved") from e
        except Exception as e:
            if session.result is not None:  # closed, even before its first level: never left "running"
                session.finish("failed", str(e) if isinstance(e, WattbenchError) else f"{type(e).__name__}: {e}", e)
                # the levels finished before the failure (a target gone, exit 4) are a result: in the
                # history, and on the error for the CLI to summarise
                register(session.config, session.result, session.run_dir)
                if isinstance(e, WattbenchError):
                    e.result = session.result  # type: ignore[attr-defined]
            raise


def _run(session: RunSession) -> Result:
    cfg = session.config
    lr = begin(session, prepare(session))
    result = session.result
    assert result is not None
    # the levels: a fixed ladder, an automatic sweep or an SLO-aware search; each level repeated
    # --trials times; each level takes fresh requests (no prefix-cache hits)
    plan.run_plan(cfg, result, lr.measure, session.slos, runner=lr)
    if cfg.prefill_decode_pair:  # a power meter is read: plan.check_meter refused the pair without one
        result.prefill_decode = PrefillDecode(isolating_pair=plan.prefill_decode_pair(cfg, lr.measure))
    conclude(session)
    return result


@dataclass
class Prepared:
    """What a run has checked and started before it writes anything: its directory, its targets,
    its workload (with why the server's ``/tokenize`` was not used), the prompts' salt and the
    sensor problems met."""

    run_dir: Path
    targets: Targets
    workload: Workload
    no_tokenizer_why: str | None
    salt: str | None
    problems: list[str]


def prepare(session: RunSession, *, sensors: list[Sensor] | None = None, share_telemetry: RunSession | None = None,
            engine: Engine | None = None) -> Prepared:
    """Every check before anything is written: the run directory, SLOs, carbon intensity, the plan,
    the history database, the targets (an engine launched), the workload; then the telemetry
    started (``sensors``: the sensors to sample, None from the config; ``share_telemetry``: another
    session whose sampler this run reads too — ``wattbench ab``'s two sides on one machine's
    meters). ``engine``: the engine to launch when there is no target (None: the config's)."""
    cfg = session.config
    # nothing written or printed from here on holds them, until the session closes
    session.stack.enter_context(secret_scope.scope(*run_secrets(cfg)))
    run_dir = resolve_run_dir(cfg, session.run_id)
    session.slos = parse_slos(cfg.slo) if cfg.slo else []  # bad SLO text fails before anything starts
    session.carbon = parse_carbon_intensity(cfg.carbon_intensity)  # a bad file fails here too
    plan.validate_plan(cfg)  # every level the run plans, checked before anything is written
    if cfg.register_run:
        HistoryStore.check_usable(cfg.db)  # a corrupt --db: one line now, not a run kept but not registered
    targets = resolve_targets(session, run_dir, engine)
    workload, no_tokenizer_why = _build_workload(cfg, targets)
    salt = _salt_prompts(cfg, session.run_id, workload)
    if share_telemetry is not None:
        session.sampler = share_telemetry.sampler
        session.cluster = share_telemetry.cluster
        problems = list(share_telemetry.result.sensor_problems) if share_telemetry.result else []
    else:
        problems = telemetry.start_telemetry(session, sensors)
    plan.check_meter(cfg, session.sampler.channels if session.sampler is not None else [])  # before any load
    return Prepared(run_dir, targets, workload, no_tokenizer_why, salt, problems)


def begin(session: RunSession, prep: Prepared, *, idle: bool = True) -> LevelRunner:
    """The run directory and result skeleton written, the ``/metrics`` scraper started, the idle
    baseline measured (``idle``: False where the caller measures it), and the level runner."""
    result = _start_result(session, prep.run_dir, prep.targets, prep.workload, prep.problems, prep.no_tokenizer_why)
    result.noise = NoiseInfo(prompt_salt=prep.salt)
    server = prep.targets.server
    if server.metrics_endpoint:
        session.scraper = MetricsScraper(server.metrics_endpoint, interval_s=SCRAPE_INTERVAL_S,
                                         engine=server.engine, api_key=prep.targets.specs[0].api_key).start()
        session.stack.callback(session.scraper.stop)
    if idle:
        idle_before(session)
    return LevelRunner(session, prep.targets.specs, prep.workload)


def conclude(session: RunSession, *, idle: bool = True) -> None:
    """After the levels: the run-level analyses, the idle baseline after (``idle``), the result
    closed ``complete`` and registered in the history."""
    analyses.run_analyses(session)
    if idle:
        idle_after(session)
    session.finish("complete", None)
    register(session.config, session.result, session.run_dir)


def stopped(session: RunSession, during: str, saved: str) -> Interrupted:
    """A run stopped by Ctrl-C/SIGTERM (``run`` and ``measure``): closed ``interrupted``, its finished
    levels registered, and the error to raise, saying where what was measured is and carrying the
    partial result (``.result``)."""
    session.finish("interrupted", f"stopped by signal during {during}")
    if session.result is not None and session.result.levels:
        register(session.config, session.result, session.run_dir)
    where = f" in {session.run_dir}" if session.run_dir and session.result else ""
    err = Interrupted(f"interrupted; {saved}{where}")
    err.result = session.result  # type: ignore[attr-defined]
    return err


def strict_failures(result: Result) -> bool:
    """Whether ``--strict`` fails the run: some figure of it is not ``valid`` — the efficiency
    verdict (``warn``, ``estimate``, ``invalid``, or energy unavailable, which is at best ``warn``)
    or the latency verdict, of any level or of the run's own findings (``result.validity``: the
    worst of each). The run's answer the CLI asks, as ``empty_levels``; it exits
    ``core.errors.EXIT_STRICT`` with the verdict line."""
    v = result.validity
    return v.verdict != "valid" or v.latency not in (None, "valid") or v.energy == "unavailable"


def empty_levels(result: Result) -> list[str]:
    """The run's levels that completed no measured request, by label, and the levels some trial of
    which completed none (``concurrency=2 trial 2 of 3``): the run is kept, but it is not the result
    asked (``wattbench run`` says so and exits with ``core.errors.EXIT_EMPTY_LEVEL``)."""
    out = []
    for lv in result.levels:
        tb = lv.trials
        dead = [u.trial for u in tb.unmeasured] if tb is not None else []
        if lv.requests.completed == 0 or (tb is not None and len(dead) == tb.n):
            out.append(lv.label)
        elif tb is not None and dead:
            out.append(f"{lv.label} {'trial' if len(dead) == 1 else 'trials'} {', '.join(map(str, dead))} "
                       f"of {tb.n}")
    return out


def register(cfg: RunConfig, result: Result | None, run_dir: Path | None) -> None:
    """Index the run in the history (``run`` and ``measure``; ``--no-register`` skips it): a complete
    run, and one that stopped with levels measured (interrupted, the target gone) under its status.
    A history that cannot take it leaves the run standing, with one warning saying how to register
    it later."""
    if not cfg.register_run or result is None or run_dir is None:
        return
    try:  # history is an index; the run directory is the record
        with HistoryStore(cfg.db) as store:
            store.register(result, run_dir, summary=history_summary(result))
    except Exception as e:  # noqa: BLE001 - whatever broke the index, the run stands: say so once
        why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        result.warnings.append(f"{NOT_REGISTERED}: {why}; register it later with "
                               f"`wattbench history import {run_dir}`")
        with contextlib.suppress(Exception):
            rundir.write_result(run_dir, result)


# The warning a run carries when it is complete on disk but the history could not index it (the
# CLI prints it as its one line, exit 0: the measurement stands, the index is what failed).
NOT_REGISTERED = "the run is kept but not registered in the history"


def _salt_prompts(cfg: RunConfig, run_id: str, workload: Workload) -> str | None:
    """The text every synthetic prompt's unique tag starts with (``workload/synthetic.py``): the
    run id's random part unless ``--prompt-salt`` gives one, so a run never repeats a prompt an
    earlier run sent to the same server (its prefix cache would skip that prompt's prefill).
    None for workloads whose prompts are the user's (datasets)."""
    builder: PromptBuilder | None = getattr(workload, "builder", None)  # a synthetic workload's
    if builder is None:
        return None
    builder.salt = cfg.prompt_salt if cfg.prompt_salt is not None else run_id.rsplit("-", 1)[-1]
    return builder.salt


def _build_workload(cfg: RunConfig, targets: Targets) -> tuple[Workload, str | None]:
    """The workload and its token source: ``--tokenizer`` (or the launched model's tokenizer),
    else the server's ``/tokenize``, else approximate lengths (recorded as such); and why the
    server's ``/tokenize`` was not used, when it was tried and failed."""
    t = targets.specs[0]
    ts = open_token_source(targets.tokenizer_path, base_url=t.base_url, model=t.model, api_key=t.api_key)
    why: str | None = getattr(ts, "why", None)  # the server's /tokenize, tried and failed
    return load_workload(cfg.workload, ts, cfg.seed, input_tokens=cfg.input_tokens, output_tokens=cfg.output_tokens,
                         max_context_tokens=targets.server.max_model_len, speedup=cfg.speedup,
                         tenant_field=cfg.tenant_field), why


def _start_result(session: RunSession, run_dir: Path, targets: Targets, workload: Workload, problems: list[str],
                  no_tokenizer_why: str | None = None) -> Result:
    """The run directory and the result skeleton, written once before the load."""
    # Approximate prompt lengths (no tokenizer) are judged per level against the server's count
    # (accounting.level_findings.input_length_finding: said once, with the measured difference);
    # the run says only why a /tokenize the server has could not be used (in the one skeleton write).
    warnings = []
    if workload.token_source == "approx" and no_tokenizer_why:
        warnings.append(f"the server's /tokenize was not used ({no_tokenizer_why}): prompt lengths are "
                        "approximate; give --tokenizer PATH for exact lengths")
    return start_result(session, run_dir, targets.server, problems,
                        extra={"targets": [t.base_url for t in targets.specs]} if len(targets.specs) > 1 else {},
                        workload=workload.describe(), prompt_length_source=workload.token_source, warnings=warnings)


def start_result(session: RunSession, run_dir: Path, server: ServerInfo, problems: list[str], *,
                 extra: dict[str, Any] | None = None, **fields: Any) -> Result:
    """The run directory and the result skeleton (the clock anchor, the environment, the sensors,
    the server), written before the load; ``run`` and ``measure`` share it. ``fields``: more
    ``Result`` fields (the workload, or what ``measure`` ran)."""
    cfg, sampler, anchor = session.config, session.sampler, session.anchor
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:  # checked before the run (session.resolve_run_dir); changed since: one line
        raise rundir.storage_error(run_dir, e) from None
    session.run_dir = run_dir
    # held while the run writes here: a reader tells a run in progress from a crashed one (results/recovery.py)
    session.stack.callback(rundir.RunLock(run_dir).release)
    gpus = sampler.gpu_inventory() if sampler is not None else []
    result = Result(
        wattbench_version=__version__,
        run_id=session.run_id,
        created_at=_dt.datetime.fromtimestamp(anchor.wall_ns / 1e9, tz=_dt.timezone.utc).isoformat(),
        clock=ClockInfo(anchor_wall_ns=anchor.wall_ns, anchor_mono_ns=anchor.mono_ns,
                        anchor_uncertainty_ns=anchor.uncertainty_ns),
        config=RecordedConfig.model_validate(cfg.public_dict()),
        environment=collect_environment(gpus),
        server=server,
        sensors=[c.to_dict() for c in (sampler.channels if sampler else [])],
        extra=dict(extra or {}),
        sensor_problems=problems,
        tags=list(cfg.tags),
        config_label=cfg.config_label,
        **fields,
    )
    if session.carbon is not None:
        result.carbon = CarbonIntensity(**session.carbon.describe(), unit="gCO2e/kWh", pue=cfg.pue)
    if sampler is None:  # said once, in the run's verdict (accounting.level_findings.run_validity)
        session.energy_unavailable_reason = (
            "--no-sensors was given" if cfg.no_sensors
            else "no power meter could be read on this machine"
            + (f"; {len(problems)} sensor problem(s) listed below" if problems else ""))
    session.result = result
    if sampler is not None:
        session.telemetry_writer = TelemetryWriter(run_dir / "telemetry.jsonl", sampler.channels, anchor)
    rundir.write_result(run_dir, result)
    return result


def _idle_window(session: RunSession, seconds: float, what: str) -> tuple[int, int]:
    session.emit(Phase("idle", f"measuring idle power{what} for {seconds:g} s"))
    t0 = now_ns()
    time.sleep(seconds)
    t1 = now_ns()
    session.await_closing_reads(t1)  # a reading after the idle window's end, as after every level
    return t0, t1


def idle_sample(session: RunSession, seconds: float, what: str) -> tuple[tuple[int, int], dict[str, IdlePower]] | None:
    """One more idle window of ``seconds`` on the session's meters, nothing loaded (``wattbench ab``
    between its blocks of pairs): its ``(start_ns, end_ns)`` and idle power per boundary; None where
    there is no meter, ``seconds`` is 0, or every power figure is a declared constant. The result's
    baseline is left as it is."""
    if session.sampler is None or seconds <= 0 or only_declared(session):
        return None
    t0, t1 = _idle_window(session, seconds, what)
    return (t0, t1), measure_idle(session.sampler.log, t0, t1)


def only_declared(session: RunSession) -> bool:
    """Whether every energy or power channel is a declared constant: an idle baseline would read the
    constant back, so it is skipped (and the run says so)."""
    chans = [c for c in session.sampler.channels if c.kind in ("counter", "power")] if session.sampler else []
    return bool(chans) and all(c.method == "declared" for c in chans)


def idle_before(session: RunSession) -> None:
    """The idle baseline before the load; skipped when the only power figures are declared
    constants (said once, as a note of the run: ``accounting.level_findings.no_idle_finding``)."""
    cfg, result = session.config, session.result
    if session.sampler is None or cfg.idle_s <= 0:
        return
    assert result is not None  # measured after begin() wrote the skeleton
    if only_declared(session):
        return
    t0, t1 = _idle_window(session, cfg.idle_s, "")
    idle = measure_idle(session.sampler.log, t0, t1)
    result.idle = {b: IdleBaseline.model_validate(i.to_dict()) for b, i in idle.items()}
    result.idle_window = Window(start_ns=t0, end_ns=t1, duration_s=(t1 - t0) / 1e9, kind="idle")
    session.idle_power = idle


def idle_after(session: RunSession) -> None:
    """Idle after the last level (optional): before and after together give the averaged idle
    power per boundary and its drift."""
    cfg, result = session.config, session.result
    if session.sampler is None or cfg.idle_after_s <= 0 or only_declared(session):
        return
    assert result is not None  # measured after the levels
    t0, t1 = _idle_window(session, cfg.idle_after_s, " after the load")
    w = result.idle_window
    if w:
        both = measure_idle(session.sampler.log, w.start_ns, w.end_ns, after_start_ns=t0, after_end_ns=t1)
    else:
        both = measure_idle(session.sampler.log, t0, t1)
    result.idle_after_window = Window(start_ns=t0, end_ns=t1, duration_s=(t1 - t0) / 1e9, kind="idle_after")
    result.idle = {b: IdleBaseline.model_validate(i.to_dict()) for b, i in both.items()}
