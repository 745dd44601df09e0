"""Measure one level: its trials (``--trials``, with ``--cooldown`` between them), each a fresh
slice of the workload through ``load.level.run_level`` (or the multi-target / Ray forms),
accounted (``accounting.level.account_level``), attributed per request, and written at once.
Also the load that measures nothing (the priming phase) and a level measured again outside the
run's levels (the history check): run/prime.py decides when."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np

from wattbench.accounting.drift import (
    mser_estimate_s,
    rounds_host_cpu,
    stationarity,
    stationarity_findings,
    steady_series,
    trim_warmup,
    warmup_finding,
)
from wattbench.accounting.thermal import (
    PRECONDITION_WINDOW_S,
    Settle,
    temperature_series,
    temperature_settle,
    thermal_summary,
)
from wattbench.environment import CpuSnapshot, cpu_frequency_mhz, cpu_snapshot, host_cpu_between
from wattbench.accounting.level import account_level, add_level_findings, count_source
from wattbench.core.clock import now_ns
from wattbench.core.errors import Interrupted, LevelFailed, TargetStopped
from wattbench.load.executor import LoadProgress
from wattbench.load.level import Drain, await_drained, run_level
from wattbench.load.targets import per_target_summary, run_level_multi
from wattbench.core.load_types import LevelOutcome, LevelSpec
from wattbench.core.target import TargetSpec
from wattbench.results import rundir
from wattbench.core.recordset import RecordSet, as_record_set, spooling_into
from wattbench.core.schema import (HostCpu, LevelResult, NoiseInfo, PrimingPhase, RequestRecord, Result, Thermal,
                                   Validity)
from wattbench.core.schema import FindingKind
from wattbench.run import analyses
from wattbench.run.plan import default_num_requests, planned_levels
from wattbench.run.prime import precondition
from wattbench.run.events import Load, LevelDone, LevelProgress, LevelStarted, Measured, Phase, Priming, Unrecorded
from wattbench.run.session import RunSession
from wattbench.run.targets import restart_engine
from wattbench.workload.base import RequestSpec
from wattbench.workload.source import Workload
from wattbench.workload.trace import TraceWorkload
from wattbench.accounting.findings import rule, worst
from wattbench.accounting.level_findings import measured_nothing, unmeasured_trials_finding
from wattbench.accounting.validity import combine
from wattbench.core.recordset import NONE
from wattbench.load.level import end_column
from wattbench.metrics.drift import SETTLE_CHANGE_PCT
from wattbench.metrics.latency import tokens_in_window
from wattbench.run.level_requests import SpecList, override_lengths, requests_needed

ENDLESS_REQUESTS = 1 << 40  # "no end" for a workload's lazy specs(n, start)
THERMAL_BEFORE_NS = 3_000_000_000  # the thermal state over the 3 s before each trial
# priming sends the workload's requests from here on: far past any a run measures, so a measured
# prompt is never in the server's prefix cache because of the priming
PRIME_START = 1 << 40
PRIME_SEED = 104_729
# Before each level or trial the server drains what came before (load.level.await_drained): at most
# DRAIN_E2E_FACTOR requests' time at the run's largest load (the priming's median E2E), within
# [DRAIN_MIN_S, DRAIN_MAX_S]; past it the level runs, with a finding.
DRAIN_MIN_S = 10.0
DRAIN_MAX_S = 120.0
DRAIN_E2E_FACTOR = 4.0


class LevelRunner:
    """Runs one load level (all its trials) and records it; the plan calls ``measure``."""

    def __init__(self, session: RunSession, targets: list[TargetSpec], workload: Workload) -> None:
        self.session = session
        self.targets = targets
        self.workload = workload
        self.is_trace = isinstance(workload, TraceWorkload)
        self.used = 0  # requests drawn from the workload so far
        self._trials: dict[int, list[LevelResult]] = {}  # level index -> its trials so far
        self._own_validity: dict[int, Validity] = {}  # id(trial) -> its verdict as accounted
        self.prime_at: tuple[str, float, int, str] | None = None  # run/prime.priming_level, set by the plan
        self.drain_baseline: float | None = None  # the server's in-flight count before the run's first load
        self.abandoned = 0  # requests of the last load the client gave up on (timeouts, stalls)

    @property
    def result(self) -> Result:
        """The run's result: ``run.benchmark.begin`` wrote its skeleton before it made the runner."""
        assert self.session.result is not None
        return self.session.result

    @property
    def run_dir(self) -> Path:
        """The run directory (made with the result's skeleton)."""
        assert self.session.run_dir is not None
        return self.session.run_dir

    @property
    def noise(self) -> NoiseInfo:
        """The result's ``noise`` block (``run.benchmark.begin`` starts it with the prompts' salt)."""
        assert self.result.noise is not None
        return self.result.noise

    def trials_of(self, index: int) -> list[LevelResult]:
        """Level ``index``'s trials measured so far, in the order they were measured."""
        return list(self._trials.get(index, []))

    def server_in_flight(self) -> float | None:
        """The server's requests running + waiting now, read from its ``/metrics`` (a scrape taken
        here, kept in the timeline); None when the server reports neither."""
        sc = self.session.scraper
        if sc is None or sc.timeline.available is False:
            return None
        t = now_ns()
        sc.scrape_once()
        for ts, vals in reversed(sc.timeline.scrapes):
            if ts < t:
                return None  # this read failed: no count taken after t
            if "running" in vals or "waiting" in vals:
                return float(vals.get("running", 0.0)) + float(vals.get("waiting", 0.0))
        return None

    def drain_limit_s(self) -> float:
        """How long a level waits for the server to drain (``DRAIN_*``)."""
        p = self.result.noise.priming if self.result.noise else None
        e2e = p.e2e_p50_s if p is not None and p.e2e_p50_s else 0.0
        return min(DRAIN_MAX_S, max(DRAIN_MIN_S, DRAIN_E2E_FACTOR * e2e))

    def await_drained(self) -> Drain | None:
        """Before a load: the first one records the server's in-flight count as the baseline (what
        it serves without this run: 0 on a dedicated server); every later one waits until the server
        is back to it (``load.level.await_drained``), so no level shares the server with the one
        before. None for the first load."""
        if self.drain_baseline is None:
            n = self.server_in_flight()
            self.drain_baseline = n if n is not None else 0.0
            return None
        d = await_drained(self.server_in_flight, baseline=self.drain_baseline, limit_s=self.drain_limit_s(),
                          abandoned=self.abandoned)
        if d.waited_s >= 1.0:
            what = "drained" if d.drained else f"still had {d.in_flight:g} requests"
            self.session.emit(Phase("drain", f"waited {d.waited_s:.1f} s for the server to finish "
                                                               f"the previous load; {what}"))
        return d

    def prime_now(self) -> None:
        """Send the run's priming load (``prime_at``), recorded in ``Result.noise``."""
        if self.prime_at is None:
            return
        mode, value, n, reason = self.prime_at
        self.await_drained()  # the first load: the baseline (after a restart: a fresh engine is idle)
        phase = self.prime(mode, value, n, reason)
        noise = self.noise
        if noise.priming is None:
            noise.priming = phase
        else:
            noise.repriming.append(phase)
        self.session.write_level_artifacts()

    def precondition(self, level: tuple[str, float, int, str]) -> None:
        """``--precondition``: loads of ``level`` (the priming's) until the devices' temperature and
        the server's output tokens/s settle (``run/prime.precondition``), at most
        ``--precondition-max`` seconds, recorded in ``Result.noise.precondition``; a run warning
        when it did not settle. The rules' window and throughput bound are read here, when it runs
        (``PRECONDITION_WINDOW_S``, ``SETTLE_CHANGE_PCT``): the seam a test shortens."""
        session = self.session
        mode, value, n, _ = level
        log = session.sampler.log if session.sampler is not None else None
        window_s = PRECONDITION_WINDOW_S
        limit_s = session.config.precondition_max_s
        session.emit(Phase("precondition", f"preconditioning the device at {mode}={value:g} until its temperature "
                                           f"and throughput settle (at most {limit_s:g} s; not measured)"))

        round_cpu: list[HostCpu | None] = []

        def load_round() -> PrimingPhase:
            cpu0 = self._cpu_snapshot()
            phase = self.prime(mode, value, n, "preconditioning: loading the device until it settles")
            round_cpu.append(host_cpu_between(cpu0, self._cpu_snapshot()))
            return phase

        def settle() -> Settle:
            if log is None:
                return Settle(False, None, None, 0.0)
            t = now_ns()
            return temperature_settle(temperature_series(log, t - int(window_s * 1e9), t), window_s)

        pc = precondition(load_round, settle, lambda: now_ns() / 1e9, limit_s=limit_s, window_s=window_s,
                          bound_pct=SETTLE_CHANGE_PCT)
        pc.round_host_cpu = round_cpu
        moved = rounds_host_cpu(round_cpu) if not pc.settled else None
        if moved:
            pc.reason += f" ({moved})"
        self.noise.precondition = pc
        if not pc.settled:
            self.result.warnings.append(f"--precondition: {pc.reason}")
        session.write_level_artifacts()

    def _cpu_snapshot(self) -> CpuSnapshot:
        """The host's CPUs now, with the launched engine's process tree where wattbench launched
        it (``environment.cpu_snapshot``)."""
        engine = self.session.engine
        return cpu_snapshot(engine.pid if engine is not None else None)

    def restart(self, before_trial: int) -> None:
        """A fresh engine (``--restart-engine``), primed again before it is measured."""
        restart_engine(self.session, self.targets, before_trial)
        self.prime_now()

    def _spec(self, mode: str, value: float, index: int, trial: int) -> LevelSpec:
        cfg, result = self.session.config, self.result
        spec = LevelSpec(index=index, mode=("trace" if self.is_trace else mode),  # type: ignore[arg-type]
                         value=value, arrival=cfg.arrival, num_requests=cfg.num_requests,
                         duration_s=cfg.duration_s, warmup_s=cfg.warmup_s, warmup_requests=cfg.warmup_requests,
                         seed=cfg.seed + 1000 * index + trial, workers=cfg.workers, speedup=cfg.speedup,
                         max_in_flight=cfg.max_concurrency if mode == "rate" else None)
        if spec.num_requests is None and spec.duration_s is None and not self.is_trace:
            spec.num_requests = default_num_requests(mode, value, result.levels)
        return spec

    def measure(self, mode: str, value: float, *, output_tokens: int | None = None,
                input_tokens: int | None = None, label_suffix: str = "") -> LevelResult:
        """A new level, all its ``--trials`` in a row (searches and the prefill/decode pair; a
        fixed ladder interleaves its trials through ``trial``: run/plan.py). Under ``--trials auto``
        a search's level is measured once: the candidates it finally ranks are measured to the
        precision asked (``run.plan.auto_rounds``)."""
        index = len(self.result.levels)
        cfg = self.session.config
        n = 1 if cfg.auto_trials else max(1, cfg.trial_count())
        for k in range(n):
            if k > 0 and self.session.config.restart_engine:
                self.restart(before_trial=k)
            self.trial(mode, value, index, k, n, output_tokens=output_tokens, input_tokens=input_tokens,
                       label_suffix=label_suffix)
        return self.result.levels[index]

    def trial(self, mode: str, value: float, index: int, k: int, n: int, *, output_tokens: int | None = None,
              input_tokens: int | None = None, label_suffix: str = "") -> LevelResult:
        """Trial ``k`` of ``n`` of level ``index``: measured, accounted, its requests written, and the
        level (its latest trial with the mean and CI of its trials so far) recorded at once."""
        session, cfg, run_dir = self.session, self.session.config, self.run_dir
        if k > 0 and cfg.cooldown_s > 0:
            session.emit(Phase("cooldown", f"cooldown {cfg.cooldown_s:g} s before trial {k + 1}"))
            time.sleep(cfg.cooldown_s)
        drain = self.await_drained()  # the server has finished the load before this one
        thermal_before = None
        if session.sampler is not None:
            t = now_ns()
            thermal_before = thermal_summary(session.sampler.log, t - THERMAL_BEFORE_NS, t)
        spec = self._spec(mode, value, index, k)
        label = spec.label + label_suffix + (f" trial {k + 1}/{n}" if n > 1 else "")
        session.emit(LevelStarted(Measured(index), label, total=spec.num_requests, levels=planned_levels(cfg),
                                  trial=k + 1, trials=n, duration_s=spec.duration_s))
        requests = self._requests(output_tokens, input_tokens)
        trials = self._trials.setdefault(index, [])
        # the level's records spool into the run directory as they finish (a killed run keeps them)
        spool = rundir.begin_level_spool(run_dir, index, k, label)
        cpu0 = self._cpu_snapshot()  # the host's CPUs at the load's start and end, never between
        try:
            with spooling_into(spool):
                outcome = self._run_one(spec, requests, self._on_progress(Measured(index)))
        except (Interrupted, LevelFailed) as e:  # keep the completed requests of the level cut short
            partial = getattr(e, "outcome", None)
            if partial is not None and partial.records:
                lv = self._account(index, spec, partial, k, thermal_before, label_suffix)
                lv.host_cpu = host_cpu_between(cpu0, self._cpu_snapshot())
                self._add_trial(trials, lv)
                self._record(index, partial.records, final=True)
            else:
                rundir.end_level_spool(run_dir, index, k)  # nothing finished: nothing to keep
            raise
        host_cpu = host_cpu_between(cpu0, self._cpu_snapshot())
        self.used += len(outcome.records)
        self.abandoned = abandoned_count(outcome.records)
        lv = self._account(index, spec, outcome, k, thermal_before, label_suffix)
        lv.host_cpu = host_cpu
        add_drain_finding(lv, drain, f"trial {k + 1}" if n > 1 else "")
        self._add_trial(trials, lv)
        self._write_requests(outcome.records, k, index)
        level = self._record(index, [], final=(k == n - 1 or bool(outcome.target_down)))
        if lv.target_down:  # no further trial against a target that stopped answering
            raise TargetStopped(f"{lv.target_down.text} (level {level.label}); the run stopped, "
                                f"the {sum(t.requests.completed + t.requests.failed for t in trials)} requests "
                                f"measured are kept in {run_dir}")
        return lv

    def level_done(self, index: int) -> None:
        """Level ``index`` has all its trials (``--trials auto`` stopped before its last planned round)."""
        level = next((lv for lv in self.result.levels if lv.index == index), None)
        if level is not None:
            self.session.write_level_artifacts()
            self.session.emit(LevelDone(Measured(index), level))

    def unrecorded(self, mode: str, value: float, index: int, label_suffix: str, *,
                   num_requests: int | None = None, duration_s: float | None = None) -> LevelResult:
        """One more measurement of a level, accounted like any other but recorded nowhere (the
        history check keeps it in ``Result.noise``); its requests are fresh ones, not written.
        ``num_requests`` / ``duration_s`` size it (default: as the run's levels)."""
        spec = self._spec(mode, value, index, 0)
        spec.seed += 7919  # its own arrivals
        if num_requests is not None or duration_s is not None:
            spec.num_requests, spec.duration_s = num_requests, duration_s
        drain = self.await_drained()
        load = Unrecorded(index)
        self.session.emit(LevelStarted(load, spec.label + label_suffix, total=spec.num_requests,
                                       duration_s=spec.duration_s))
        outcome = self._run_one(spec, self._requests(None, None), self._on_progress(load))
        self.used += len(outcome.records)
        self.abandoned = abandoned_count(outcome.records)
        lv = self._account(index, spec, outcome, 0, None, label_suffix)
        add_drain_finding(lv, drain)
        as_record_set(outcome.records).close()  # accounted; not written (its spool goes)
        lv.trial = None
        self.session.emit(LevelDone(load, lv))
        return lv

    def prime(self, mode: str, value: float, n_requests: int, reason: str) -> PrimingPhase:
        """Send ``n_requests`` at the level ``(mode, value)`` and measure nothing (run/prime.py): the
        requests come from far past any the run measures (``PRIME_START``), so no measured prompt
        is ever in the server's prefix cache because of the priming."""
        session, cfg = self.session, self.session.config
        spec = LevelSpec(index=0, mode=mode, value=value, arrival=cfg.arrival,  # type: ignore[arg-type]
                         num_requests=n_requests, seed=cfg.seed + PRIME_SEED, workers=cfg.workers,
                         max_in_flight=cfg.max_concurrency if mode == "rate" else None,
                         stop_when_oversaturated=False)
        label = f"priming {spec.label}"
        session.emit(Phase("prime", f"priming the server: {n_requests} requests at {spec.label} "
                                                      "(not measured)"))
        session.emit(LevelStarted(Priming(), label, total=n_requests))
        t0 = now_ns()
        outcome = self._run_one(spec, self.workload.specs(ENDLESS_REQUESTS, start=PRIME_START),
                                self._on_progress(Priming()))
        t1 = now_ns()
        # a scrape after the priming, as after every level: the first measured level's server
        # counters start from it, not from one taken before (or during) the priming's tokens
        session.await_closing_reads(t1)
        rs = as_record_set(outcome.records)
        ok = rs.columns("ok")["ok"] if len(rs) else np.zeros(0, bool)
        e2e_s = priming_e2e_s(rs) if len(rs) else None
        tokens, tok_s = priming_throughput(rs) if len(rs) else (None, None)
        self.abandoned = abandoned_count(rs)
        rs.close()  # nothing of the priming is kept
        session.emit(LevelDone(Priming(), None))
        return PrimingPhase(mode=mode, value=None if value == float("inf") else value, label=spec.label,
                            requests=n_requests, completed=int(ok.sum()),
                            failed=int(len(ok) - ok.sum()), duration_s=(t1 - t0) / 1e9, start_ns=t0, end_ns=t1,
                            reason=reason, prompts=f"workload requests {PRIME_START} onwards (never measured)",
                            e2e_p50_s=e2e_s, output_tokens=tokens, output_tokens_per_s=tok_s)

    def _on_progress(self, load: Load) -> Callable[[LoadProgress], None]:
        """The load generator's progress (``load.executor.LoadProgress``) as ``LevelProgress`` of
        ``load``, with the meter's latest power."""
        session = self.session

        def on_progress(p: LoadProgress) -> None:
            power = session.sampler.latest_power_w() if session.sampler is not None else None
            session.emit(LevelProgress(load, done=p.requests_done, failed=p.requests_failed,
                                       output_tokens=p.output_tokens, elapsed_s=p.elapsed_s, power_w=power))
        return on_progress

    def _run_one(self, spec: LevelSpec, requests: Iterable[RequestSpec],
                 on_progress: Callable[[LoadProgress], None]) -> LevelOutcome:
        cluster = self.session.cluster
        if cluster is not None:  # --ray: load actors over the cluster, records on the driver's clock
            factory = SpecList(requests, requests_needed(spec))
            out = cluster.run_level(spec, self.targets, factory, on_progress=on_progress)
            self.result.nodes = cluster.node_infos()
            return out
        if len(self.targets) > 1:
            return run_level_multi(spec, self.targets, requests, on_progress=on_progress)
        return run_level(spec, self.targets[0], requests, on_progress=on_progress)

    def _requests(self, output_tokens: int | None, input_tokens: int | None) -> Iterator[RequestSpec]:
        # a trace replays its rows; every other workload is asked for an endless stream, so a dataset
        # shorter than the run cycles (docs/workloads.md) instead of leaving later levels empty
        specs = self.workload.specs(None, start=0) if self.is_trace else self.workload.specs(
            ENDLESS_REQUESTS, start=self.used)
        if output_tokens is None and input_tokens is None:
            return specs
        return override_lengths(specs, output_tokens, input_tokens, self.workload)

    def _account(self, index: int, spec: LevelSpec, outcome: LevelOutcome, trial: int, thermal_before: Thermal | None,
                 label_suffix: str) -> LevelResult:
        session = self.session
        session.await_closing_reads(outcome.end_ns)
        lv = account_level(index, spec, outcome, session.level_context(), count_source(outcome.records))
        lv.label = spec.label + label_suffix
        # prompt lengths are checked against what was asked only where a length was asked (a past defect: 
        # a dataset's prompts were warned about as "input tokens asked 7")
        asked = getattr(self.workload, "builds_prompt_lengths", True)
        add_level_findings(lv, spec, outcome, self.workload.token_source if asked else None)
        if len(self.targets) > 1:
            lv.per_target = per_target_summary(outcome.records, outcome.start_ns, outcome.end_ns,
                                               [t.base_url for t in self.targets])
        if session.cluster is not None and session.sampler is not None and outcome.end_ns > outcome.start_ns:
            lv.per_node_energy = analyses.per_node_energy(session, outcome, lv)
        analyses.attribute(session, lv, outcome.records)
        lv.trial = trial
        lv.thermal_before = thermal_before
        self._stationarity_inputs(lv, outcome.records)
        return lv

    def _stationarity_inputs(self, lv: LevelResult, records: RecordSet | list[RequestRecord]) -> None:
        """The trial's per-second steady series, its warm-up estimate (MSER-5, with its finding)
        and the host's CPU clock (``accounting/drift.py``)."""
        if measured_nothing(lv):  # no figure, so no series a trend could read as a fall to nothing
            return
        rs = as_record_set(records)
        log = self.session.sampler.log if self.session.sampler is not None else None
        est = mser_estimate_s(rs, lv.window, lv.steady_window)
        # the trend is read after the warm-up: a ramp the steady window holds (an open loop's, whose
        # window starts at the first send) is the warm-up estimate's finding, not a drift
        lv.series = trim_warmup(steady_series(rs, log, lv.steady_window), lv.window, est)
        start = ((lv.steady_window.start_ns - lv.window.start_ns) / 1e9
                 if lv.steady_window is not None and lv.window is not None else None)
        lv.stationarity = stationarity([lv], est, start)
        f = warmup_finding(rs, lv.window, lv.steady_window, est)
        if f is not None:
            lv.validity = worst(lv.validity, combine([f]))
        mhz = cpu_frequency_mhz()
        if mhz is not None:
            lv.thermal.cpu_mhz = mhz

    def _write_requests(self, records: RecordSet | list[RequestRecord], trial: int, index: int) -> None:
        """Stream the level's records (their per-request energy and carbon already annotated by
        ``_account``) into ``requests.jsonl``; the chunk stamps only with ``--keep-chunks``. Then
        the level's spool goes: its records are where they belong."""
        rs = as_record_set(records)
        if self.session.config.trials != 1:  # extra field: which trial of the level
            rs.annotate("trial", np.full(len(rs), trial, dtype=object))
        rundir.append_requests(self.run_dir, rs, keep_chunks=self.session.config.keep_chunks)
        rs.close()
        rundir.end_level_spool(self.run_dir, index, trial)

    def _add_trial(self, trials: list[LevelResult], lv: LevelResult) -> None:
        trials.append(lv)
        self._own_validity[id(lv)] = lv.validity.model_copy(deep=True)

    def _record(self, index: int, partial_records: RecordSet | list[RequestRecord], final: bool) -> LevelResult:
        """Record level ``index`` (its latest trial, with the mean and CI of its trials so far) in
        place or at the end, and write everything; ``level_done`` once its last trial is in."""
        session = self.session
        trials = self._trials[index]
        # the level is its latest trial that measured something (the latest of all when none did),
        # with the means of the trials that measured; a trial that measured nothing has no figure
        measuring = analyses.measuring_trials(trials)
        level = measuring[-1] if measuring else trials[-1]
        for t in trials:
            t.trials = None  # a trial once recorded as the level keeps no stale block of the trials then
        level.trials = analyses.trials_block(trials) if len(trials) > 1 else None
        # its verdict as accounted: what follows is added afresh each time
        level.validity = self._own_validity[id(level)].model_copy(deep=True)
        # the level's stationarity: its trials' series together (drift, the likely cause, another
        # thermal state; a trial that measured nothing has no series), with its last trial's warm-up
        # estimate
        own = level.stationarity
        st = stationarity(trials, own.warmup_estimate_s if own else None, own.steady_start_s if own else None)
        level.stationarity = st
        found = stationarity_findings(st)
        if found:
            level.validity = worst(level.validity, combine(found))
        # an earlier trial that shared the server with the load before it biased the mean, so its
        # finding stays on the level; trials that measured nothing are named on it
        others = [t for t in trials if t is not level]
        earlier = [f for t in others for f in self._own_validity[id(t)].findings if f.kind == FindingKind.NOT_DRAINED]
        if level.trials is not None:
            dead = unmeasured_trials_finding([(u.trial, u.why) for u in level.trials.unmeasured], len(trials))
            if dead is not None:
                earlier.append(dead)
        if trials[-1].target_down and level is not trials[-1]:  # the run stops on it: the level says why
            level.target_down = trials[-1].target_down
            earlier += [f for f in self._own_validity[id(trials[-1])].findings if f.kind == FindingKind.TARGET_DOWN]
        if earlier:
            level.validity = worst(level.validity, combine(earlier))
        levels = self.result.levels
        pos = next((i for i, lv in enumerate(levels) if lv.index == index), None)
        if pos is None:
            levels.append(level)
        else:
            levels[pos] = level
        if partial_records:
            self._write_requests(partial_records, trials[-1].trial or 0, index)
        session.write_level_artifacts()
        session.write_report()
        if final:
            session.emit(LevelDone(Measured(level.index), level))
        return level


def add_drain_finding(level: LevelResult, drain: Drain | None, trial: str = "") -> None:
    """A level (``trial``: which trial of it, "" for the only one) that started before the server
    had finished the load before it (the wait's limit passed): a ``warn`` finding on every figure,
    with the count the server still had."""
    if drain is None or drain.drained is True:
        return

    which = f"{trial + ' ' if trial else ''}started"
    if drain.drained is None:  # the server reports no count: only what the client gave up on is known
        if not drain.abandoned:
            return
        f = rule(FindingKind.NOT_DRAINED, "warn",
                 f"{which} after the client gave up on {drain.abandoned} requests of the load before it (timeouts, "
                 "stalls); the server reports no in-flight count, so they may still have been running in it: give "
                 "--request-timeout longer than a request takes", (),
                 summary="started after requests the client gave up on, on a server without an in-flight count")
        level.validity = worst(level.validity, combine([f]))
        return
    base = f" (it served {drain.baseline:g} before the run)" if drain.baseline else ""
    f = rule(FindingKind.NOT_DRAINED, "warn",
             f"{which} while the server still had {drain.in_flight:g} requests of the load before it running or "
             f"waiting after {drain.waited_s:.0f} s{base}"
             + (" (the count had stopped falling: the server is not draining them)" if drain.stuck else "")
             + ": its figures include that load; give the server longer between levels (--cooldown S) or look for "
             "requests the client gave up on (timeouts)", (),
             summary="started before the server had drained the load before it")
    level.validity = worst(level.validity, combine([f]))


ABANDONED_ERRORS = ("timeout", "stall")  # requests the client gave up on: an engine may serve them on


def abandoned_count(records: RecordSet | list[RequestRecord]) -> int:
    """How many of a load's requests the client gave up on (``ABANDONED_ERRORS``)."""
    rs = as_record_set(records)
    if not len(rs):
        return 0
    codes = [i for i, lab in enumerate(rs.labels("error")) if lab in ABANDONED_ERRORS]
    return int(np.isin(rs.columns("error")["error"], codes).sum()) if codes else 0


def priming_e2e_s(records: RecordSet | list[RequestRecord]) -> float | None:
    """The median end-to-end time (s) of the priming's completed requests: how long one request
    takes at the run's largest load (``run/prime.unmeasurable`` sizes levels by it)."""
    c = as_record_set(records).columns("sent_ns", "last_token_ns", "end_ns", "ok")
    end = end_column(c)
    done = c["ok"] & (end != NONE)
    if not done.any():
        return None
    return float(np.median((end[done] - c["sent_ns"][done]) / 1e9))


def priming_throughput(records: RecordSet | list[RequestRecord]) -> tuple[int | None, float | None]:
    """A load's output tokens and tokens per second over its span: from its first request sent to
    the last one's end (the records' own clock, so the load generator's start-up is not in it),
    the tokens the server produced inside it by the window rule (``metrics.latency.tokens_in_window``:
    every stream's, a failed one's too). ``(None, None)`` when no request ended."""
    c = as_record_set(records).columns("sent_ns", "last_token_ns", "end_ns")
    end = end_column(c)
    sent = c["sent_ns"][c["sent_ns"] != NONE]
    ended = end[end != NONE]
    if not sent.size or not ended.size:
        return None, None
    t0, t1 = int(sent.min()), int(ended.max())
    if t1 <= t0:
        return None, None
    out, _ = tokens_in_window(records, t0, t1)
    return out, out / ((t1 - t0) / 1e9) if out > 0 else None
