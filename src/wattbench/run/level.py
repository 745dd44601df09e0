"""Measure one level: its trials (``--trials``, with ``--cooldown`` between them), each a fresh
slice of the workload through ``load.level.run_level`` (or the multi-target / Ray forms),
accounted (``accounting.level.account_level``), attributed per request, and written at once."""

from __future__ import annotations

import itertools
import time

import numpy as np

from wattbench.accounting import thermal_summary
from wattbench.accounting.level import account_level, add_level_findings, count_source
from wattbench.clock import now_ns
from wattbench.errors import Interrupted, LevelFailed, TargetStopped
from wattbench.load.level import run_level
from wattbench.load.targets import per_target_summary, run_level_multi
from wattbench.load.types import LevelSpec
from wattbench.results import rundir
from wattbench.results.recordset import as_record_set, spooling_into
from wattbench.results.schema import LevelResult, TrialsBlock
from wattbench.run import analyses
from wattbench.run.plan import default_num_requests, planned_levels
from wattbench.run.session import RunSession
from wattbench.workload.base import RequestSpec
from wattbench.workload.synthetic import PromptBuilder
from wattbench.workload.trace import TraceWorkload

MAX_PREDRAWN_REQUESTS = 20_000
ENDLESS_REQUESTS = 1 << 40  # "no end" for a workload's lazy specs(n, start)
THERMAL_BEFORE_NS = 3_000_000_000  # the thermal state over the 3 s before each trial
LENGTH_OVERRIDE_SEED = 4242


class LevelRunner:
    """Runs one load level (all its trials) and records it; the plan calls ``measure``."""

    def __init__(self, session: RunSession, targets: list, workload):
        self.session = session
        self.targets = targets
        self.workload = workload
        self.is_trace = isinstance(workload, TraceWorkload)
        self.used = 0  # requests drawn from the workload so far

    def _spec(self, mode: str, value: float, index: int, trial: int) -> LevelSpec:
        cfg, result = self.session.config, self.session.result
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
        session, cfg = self.session, self.session.config
        assert session.result is not None
        index = len(session.result.levels)
        n_trials = max(1, cfg.trials)
        trials: list[LevelResult] = []
        for k in range(n_trials):
            if k > 0 and cfg.cooldown_s > 0:
                session.emit("phase", name="cooldown", message=f"cooldown {cfg.cooldown_s:g} s before trial {k + 1}")
                time.sleep(cfg.cooldown_s)
            thermal_before = None
            if session.sampler is not None:
                t = now_ns()
                thermal_before = thermal_summary(session.sampler.log, t - THERMAL_BEFORE_NS, t)
            spec = self._spec(mode, value, index, k)
            label = spec.label + label_suffix + (f" trial {k + 1}/{cfg.trials}" if cfg.trials > 1 else "")
            session.emit("level_start", index=index, label=label, total=spec.num_requests,
                         levels=planned_levels(cfg), trial=k + 1, trials=n_trials, duration_s=spec.duration_s)
            requests = self._requests(output_tokens, input_tokens)
            # the level's records spool into the run directory as they finish (a killed run keeps them)
            spool = rundir.begin_level_spool(session.run_dir, index, k, label)
            try:
                with spooling_into(spool):
                    outcome = self._run_one(spec, requests, self._on_progress(index))
            except (Interrupted, LevelFailed) as e:  # keep the completed requests of the level cut short
                partial = getattr(e, "outcome", None)
                if partial is not None and partial.records:
                    lv = self._account(index, spec, partial, k, thermal_before, label_suffix)
                    self._record(lv, partial.records, trials + [lv])
                else:
                    rundir.end_level_spool(session.run_dir, index, k)  # nothing finished: nothing to keep
                raise
            self.used += len(outcome.records)
            trials.append(self._account(index, spec, outcome, k, thermal_before, label_suffix))
            self._write_requests(outcome.records, k, index)
            if outcome.target_down:
                break  # no further trial against a target that stopped answering
        level = trials[-1]
        self._record(level, [], trials)
        if level.target_down:
            raise TargetStopped(f"{level.target_down['text']} (level {level.label}); the run stopped, "
                                f"the {sum(t.requests.completed + t.requests.failed for t in trials)} requests "
                                "measured are kept" + (f" in {session.run_dir}" if session.run_dir else ""))
        return level

    def _on_progress(self, index: int):
        session = self.session

        def on_progress(p: dict) -> None:
            if session.sampler is not None:
                p = dict(p)
                p["power_w"] = session.sampler.latest_power_w()
            session.emit("progress", index=index, **p)
        return on_progress

    def _run_one(self, spec, requests, on_progress):
        cluster = self.session.cluster
        if cluster is not None:  # --ray: load actors over the cluster, records on the driver's clock
            factory = SpecList(requests, requests_needed(spec))
            out = cluster.run_level(spec, self.targets, factory, on_progress=on_progress)
            self.session.result.nodes = cluster.node_infos()
            return out
        if len(self.targets) > 1:
            return run_level_multi(spec, self.targets, requests, on_progress=on_progress)
        return run_level(spec, self.targets[0], requests, on_progress=on_progress)

    def _requests(self, output_tokens: int | None, input_tokens: int | None):
        # a trace replays its rows; every other workload is asked for an endless stream, so a dataset
        # shorter than the run cycles (docs/workloads.md) instead of leaving later levels empty
        specs = self.workload.specs(None, start=0) if self.is_trace else self.workload.specs(
            ENDLESS_REQUESTS, start=self.used)
        if output_tokens is None and input_tokens is None:
            return specs
        return override_lengths(specs, output_tokens, input_tokens, self.workload)

    def _account(self, index, spec, outcome, trial: int, thermal_before, label_suffix: str) -> LevelResult:
        session = self.session
        session.await_closing_reads(outcome.end_ns)
        lv = account_level(index, spec, outcome, session.level_context(), count_source(outcome.records))
        lv.label = spec.label + label_suffix
        add_level_findings(lv, spec, outcome, self.workload.token_source)
        if len(self.targets) > 1:
            lv.per_target = per_target_summary(outcome.records, outcome.start_ns, outcome.end_ns,
                                               [t.base_url for t in self.targets])
        if session.cluster is not None and session.sampler is not None and outcome.end_ns > outcome.start_ns:
            lv.per_node_energy = analyses.per_node_energy(session, outcome, lv)
        analyses.attribute(session, lv, outcome.records)
        lv.trial = trial
        lv.thermal_before = thermal_before
        return lv

    def _write_requests(self, records, trial: int, index: int) -> None:
        """Stream the level's records (their per-request energy and carbon already annotated by
        ``_account``) into ``requests.jsonl``; the chunk stamps only with ``--keep-chunks``. Then
        the level's spool goes: its records are where they belong."""
        records = as_record_set(records)
        if self.session.config.trials > 1:  # extra field: which trial of the level
            records.annotate("trial", np.full(len(records), trial, dtype=object))
        rundir.append_requests(self.session.run_dir, records, keep_chunks=self.session.config.keep_chunks)
        records.close()
        rundir.end_level_spool(self.session.run_dir, index, trial)

    def _record(self, level: LevelResult, partial_records, trials: list[LevelResult]) -> None:
        """Add the level (its last trial, with the trials' mean and CI) and write everything."""
        session = self.session
        if len(trials) > 1:
            level.trials = TrialsBlock.model_validate(analyses.trials_block(trials))
        session.result.levels.append(level)
        if partial_records:
            self._write_requests(partial_records, level.trial or 0, level.index)
        session.write_level_artifacts()
        session.write_report()
        session.emit("level_done", index=level.index, level=level)


class SpecList:
    """A picklable request factory for Ray load actors: the level's requests drawn up front."""

    def __init__(self, specs, n: int):
        self.specs = list(itertools.islice(iter(specs), n))

    def __call__(self, i: int):
        return self.specs[i] if 0 <= i < len(self.specs) else None


def requests_needed(spec) -> int:
    """How many requests a distributed level can use (drawn before it starts)."""
    extra = (spec.warmup_requests or 0) + int(spec.value if spec.mode == "concurrency" else 0)
    if spec.num_requests is not None:
        return spec.num_requests + extra
    if spec.mode == "rate" and spec.duration_s is not None:
        return int(spec.value * (spec.duration_s + (spec.warmup_s or 0.0)) * 1.3) + 16 + extra
    return MAX_PREDRAWN_REQUESTS


def override_lengths(specs, output_tokens: int | None, input_tokens: int | None, workload):
    """The workload's requests with forced lengths (the prefill/decode isolating pair)."""
    builder = None
    if input_tokens is not None:
        builder = PromptBuilder(workload.ts, seed=LENGTH_OVERRIDE_SEED) if hasattr(workload, "ts") else None
    rng = np.random.default_rng(LENGTH_OVERRIDE_SEED)
    for i, s in enumerate(specs):
        prompt = s.prompt
        n_in = s.input_tokens
        if input_tokens is not None and builder is not None:
            prompt = builder.text(input_tokens, rng, f"[{i}] ")
            n_in = input_tokens
        out = output_tokens if output_tokens is not None else s.max_tokens
        yield RequestSpec(prompt=prompt, messages=None if prompt else s.messages, max_tokens=out,
                          input_tokens=n_in, token_source=s.token_source, min_tokens=out)
