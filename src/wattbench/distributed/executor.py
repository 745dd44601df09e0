"""Ray's load executor: a level shared over Ray load actors, run by the one coordinator loop.

``load.executor.coordinate`` (interrupt → deadline → backlog guard → progress) drives every level,
on one machine or on Ray; this module supplies its Ray side.

- ``share_level(spec, targets, multi, route, request_factory, n) -> LevelShare``: what each of ``n``
  actors runs (docs: ``distributed/run.py``'s module doc, "How a level is shared"). Closed loop: a
  sub-level per actor (its streams, its ``num_requests``/``warmup_requests`` share, the factory's
  indices ``i ≡ a (mod n)``), which the actor bounds itself (its own ``run_level``: duration,
  warm-up). Open loop and trace: ``load.plan.build_plans`` with one worker per actor, so the
  arrivals, the ``--max-concurrency`` share and the routes are split by the same rule as on one
  machine; the driver's backlog guard watches those arrivals.
- ``RayExecutor`` implements ``load.executor.Executor`` over the actors:
  ``prepare()`` measures every actor's clock offset (``distributed.clock``); ``start(loop)`` fixes
  ``t0`` on the driver's clock (``START_MARGIN_NS`` plus two round trips ahead), hands it to each
  actor on its own clock and submits the runs; ``progress()`` is the actors' counts, polled every
  ``PROGRESS_PERIOD_S`` without blocking the loop (an actor that does not answer keeps its last
  counts); ``stop()``/``cancel()`` ask every actor still running to stop sending / cancel its
  requests in flight; ``results()`` raises ``WattbenchError`` naming the actor, its node and the
  error when an actor failed or died, else measures every offset again (drift) and returns
  ``WorkerResult``s with every timestamp on the driver's clock (offset interpolated at its time).
- ``run_on_actors(spec, share, loads, on_progress) -> LevelOutcome``: the level under
  ``coordinate``, assembled by ``load.level.assemble_outcome`` (window, steady window, load
  statistics), with the actors' own saturation findings and ``load.actors`` (per actor: node,
  clock offset ± uncertainty, drift, CPU, records); why it ended is settled as for ``run_level``
  (``load.level.settle_outcome``: an interrupt raises ``Interrupted`` carrying the completed
  requests; a target an actor saw stop answering is ``target_down``, the level stops there).

The seam to Ray is ``calls(handle, method, *args) -> concurrent.futures.Future`` (``ray_call``:
``handle.method.remote(*args).future()``); tests run plain ``LoadWorker`` objects on threads there.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from concurrent.futures import Future
from dataclasses import dataclass, field
from collections.abc import Callable, Sequence
from typing import Any

from wattbench.core.secret_scope import clip
from wattbench.core.clock import now_ns
from wattbench.distributed.clock import DEFAULT_PINGS, ClockOffset, OffsetLine, drift_ppm, measure_offset
from wattbench.distributed.merge import shift_record
from wattbench.distributed.messages import ClosedJob, Job, OpenJob, Reply, expect, seal, timed
from wattbench.core.errors import UserError, WattbenchError
from wattbench.load.executor import LoadProgress, coordinate
from wattbench.load.level import assemble_outcome, settle_outcome
from wattbench.load.link import Progress, WorkerResult
from wattbench.load.plan import PROGRESS_PERIOD_S, WorkerPlan, build_plans, split_count
from wattbench.core.load_types import LevelOutcome, LevelSpec
from wattbench.core.target import TargetSpec
from wattbench.core.recordset import RecordSet
from wattbench.core.schema import LoadActorInfo, build_record

__all__ = ["RayExecutor", "LoadActor", "LevelShare", "share_level", "run_on_actors", "ray_call",
           "START_MARGIN_NS"]

START_MARGIN_NS = 200_000_000  # t0 this far (plus two round trips) ahead: time for the runs to reach the actors
_RUN_IDS = itertools.count(1)  # a run id per level: an actor applies a stop/cancel to that run only

# (done, failed, output tokens): an actor's progress as it reports it (load.link.Progress's fields)
Counts = tuple[int, int, int]


def _counts(given: Sequence[int]) -> Counts:
    done, failed, output_tokens = given
    return done, failed, output_tokens


def ray_call(handle: Any, method: str, *args: object) -> Future[Any]:
    """``handle.method.remote(*args)`` as a ``concurrent.futures.Future`` (``handle``: a Ray actor
    handle, whose remote methods Ray builds at run time: no type names them)."""
    fut: Future[Any] = getattr(handle, method).remote(*args).future()
    return fut


@dataclass
class LoadActor:
    """A load actor as the driver knows it; ``offsets``: its clock, before (and after) the last level."""

    handle: Any
    index: int
    node_id: str
    hostname: str | None
    ip: str | None
    offsets: list[ClockOffset] = field(default_factory=list)


def offset_line(offsets: list[ClockOffset]) -> OffsetLine:
    return OffsetLine(offsets[0], offsets[-1] if len(offsets) > 1 else None)


def short_id(node_id: str) -> str:
    """Ray node ids are 56 hex digits; the first 8 name a node in results and channel ids."""
    return node_id[:8] if len(node_id) > 12 else node_id


def short_error(e: BaseException, limit: int = 300) -> str:
    return clip(f"{type(e).__name__}: {e}".strip(), limit, "…")


# ------------------------------------------------------------------------------------ sharing


@dataclass
class LevelShare:
    """A level shared over actors: one job per actor (what its ``run_closed``/``run_open`` gets),
    the open loop's plans (the backlog guard's arrivals; closed loop: none), the open loop's target
    rate, and whether the request source ran out while the arrivals were drawn."""

    jobs: list[Job]
    plans: list[WorkerPlan]
    target_rate: float | None
    exhausted_early: bool


def _share(total: int | None, a: int, n: int) -> int | None:
    if total is None or total == 0:
        return total
    return split_count(total, n)[a] or None


def share_level(spec: LevelSpec, targets: list[TargetSpec], multi: bool, route: Callable[[int], int],
                request_factory: Callable[[int], Any], n: int) -> LevelShare:
    """What each of ``n`` actors runs (module doc); refuses, naming the flag, a closed loop Ray
    cannot share (sessions, more actors than streams; fewer streams than targets is
    ``load.plan.validate_spec``'s, checked before)."""
    if spec.mode != "concurrency":
        lp = build_plans(dataclasses.replace(spec, workers=n), targets[0], targets if multi else None, route,
                         request_factory)
        return LevelShare([OpenJob(p) for p in lp.plans], lp.plans, lp.target_rate, lp.exhausted_early)
    conc = int(spec.value)
    if spec.num_requests is None and spec.duration_s is None:
        raise UserError("a closed-loop level needs --num-requests or --duration")
    if n > conc:
        raise UserError(f"{n} load actors for concurrency {conc}: give at most one actor per stream")
    first_request = request_factory(0)
    if first_request is not None and getattr(first_request, "session_id", None) is not None:
        raise UserError("a workload with sessions cannot run closed-loop on Ray (a session's turns would "
                        "be spread over actors): use --rate, or run without --ray")
    jobs: list[Job] = []
    stream = 0
    for a, streams in enumerate(split_count(conc, n)):
        sub = dataclasses.replace(spec, value=streams, workers=1, num_requests=_share(spec.num_requests, a, n),
                                  warmup_requests=_share(spec.warmup_requests, a, n))
        routes = [route(stream + k) for k in range(streams)] if multi else None
        stream += streams
        jobs.append(ClosedJob(index=a, n=n, spec=sub, targets=targets, routes=routes,
                              request_factory=request_factory))
    return LevelShare(jobs, [], None, False)


# ----------------------------------------------------------------------------------- executor


class RayExecutor:
    """``load.executor.Executor`` over Ray load actors (module doc)."""

    fast_loop = False  # coordination only: the actors run the load

    def __init__(self, loads: list[LoadActor], jobs: list[Job], mode: str,
                 calls: Callable[..., Future[Any]] = ray_call, pings: int = DEFAULT_PINGS) -> None:
        if len(loads) != len(jobs):
            raise WattbenchError(f"{len(jobs)} jobs for {len(loads)} load actors")
        self.loads, self.jobs, self.mode = loads, jobs, mode
        self.calls, self.pings = calls, pings
        self.run_id = next(_RUN_IDS)
        self.runs: list[Future[Reply]] = []
        self.counts: list[Counts] = [(0, 0, 0)] * len(loads)
        self.polls: list[Future[Any] | None] = [None] * len(loads)
        self.last_poll_ns = 0
        self.raw: list[Reply] = []
        self.n_records: dict[int, int] = {}  # actor index -> the records its reply carried
        self._results: list[WorkerResult] | None = None
        self.records = RecordSet()  # the level's records, on the driver's clock, as the actors' arrive
        self.done_f: asyncio.Future[list[Any]] | None = None

    def _offset(self, ld: LoadActor) -> ClockOffset:
        return measure_offset(lambda: self.calls(ld.handle, "clock").result(), n=self.pings)

    def prepare(self) -> None:
        for ld in self.loads:
            ld.offsets = [self._offset(ld)]

    def start(self, loop: asyncio.AbstractEventLoop) -> int:
        t0_ns = now_ns() + START_MARGIN_NS + 2 * max(ld.offsets[0].rtt_ns for ld in self.loads)
        method = "run_closed" if self.mode == "concurrency" else "run_open"
        for ld, job in zip(self.loads, self.jobs):
            # the targets' secrets beside the job, in a small argument: never in Ray's object store (messages.seal)
            sealed, targets = seal(timed(job, ld.offsets[0].to_node(t0_ns), self.run_id))
            self.runs.append(self.calls(ld.handle, method, sealed, targets))
        # gather with return_exceptions: a failed run is read by results(), never logged as unretrieved
        self.done_f = asyncio.gather(*(asyncio.wrap_future(f, loop=loop) for f in self.runs), return_exceptions=True)
        return t0_ns

    def finished(self) -> bool:
        return bool(self.runs) and all(f.done() for f in self.runs)

    def failed(self) -> bool:
        return any(f.done() and f.exception() is not None for f in self.runs)

    async def wait(self, timeout_s: float) -> None:
        self._poll()
        assert self.done_f is not None  # start() made it; the coordinator waits only after start
        await asyncio.wait({self.done_f}, timeout=timeout_s)

    def _poll(self) -> None:
        """Take the progress answers that came; ask again every ``PROGRESS_PERIOD_S``."""
        for k, f in enumerate(self.polls):
            if f is not None and f.done():
                if f.exception() is None:
                    self.counts[k] = _counts(f.result())
                self.polls[k] = None
        now = now_ns()
        if now - self.last_poll_ns < PROGRESS_PERIOD_S * 1e9:
            return
        self.last_poll_ns = now
        for k, (ld, run) in enumerate(zip(self.loads, self.runs)):
            if self.polls[k] is None and not run.done():
                self.polls[k] = self.calls(ld.handle, "progress")

    def progress(self) -> Progress:
        for k, run in enumerate(self.runs):  # an actor's last counts come with its result
            if run.done() and run.exception() is None:
                self.counts[k] = _counts(expect(run.result(), Reply, f"load actor {self.loads[k].index}'s reply").progress)
        return Progress(*(sum(x) for x in zip(*self.counts)))

    def _tell(self, method: str) -> None:
        for ld, run in zip(self.loads, self.runs):
            if not run.done():
                self.calls(ld.handle, method, self.run_id)  # not awaited: the run's end is the answer

    def stop(self) -> None:
        self._tell("stop")

    def cancel(self) -> None:
        self._tell("cancel")

    def results(self) -> list[WorkerResult]:
        for ld, run in zip(self.loads, self.runs):
            e = run.exception()
            if e is not None:
                raise WattbenchError(f"load actor {ld.index} on node {short_id(ld.node_id)} ({ld.hostname}) "
                                     f"failed: {short_error(e, 2000)}") from None
        if self._results is not None:  # the records are in self.records once
            return self._results
        self.raw = [expect(run.result(), Reply, f"load actor {ld.index}'s reply")
                    for ld, run in zip(self.loads, self.runs)]
        for ld in self.loads:  # the offsets after the level: drift over the level is corrected
            try:
                ld.offsets.append(self._offset(ld))
            except Exception:  # noqa: BLE001 - an actor gone now: its offset before the level stands
                pass
        self._results = [self._on_driver_clock(ld, res) for ld, res in zip(self.loads, self.raw)]
        return self._results

    def _on_driver_clock(self, ld: LoadActor, res: Reply) -> WorkerResult:
        to_driver = offset_line(ld.offsets).to_driver
        for d in res.records:
            self.records.append(shift_record(build_record(**d), to_driver))
        self.n_records[ld.index] = len(res.records)
        res.records.clear()  # appended: the dicts can go
        stop = to_driver(res.stop_ns) if res.stop_ns is not None else None
        down = res.down
        if down is not None:  # the target stopped answering this actor: when, on the driver's clock
            last_ok = down.last_ok_ns
            down = dataclasses.replace(down, last_ok_ns=None if last_ok is None else to_driver(last_ok),
                                       first_failure_ns=to_driver(down.first_failure_ns))
        # the open loop's loop-lag probes are durations: merged like workers' (closed loop: judged by the actor)
        return WorkerResult(None, res.cpu_pct, stop, res.stopped_early == "interrupted", list(res.loop_lag_ns), down)

    def close(self) -> None:
        if self.runs and not self.finished():  # the coordinator failed: leave no actor sending
            self.cancel()

    # -- what the actors said beside their records
    def actor_rows(self) -> list[LoadActorInfo]:
        rows: list[LoadActorInfo] = []
        for ld, res in zip(self.loads, self.raw):
            before = ld.offsets[0]
            rows.append(LoadActorInfo(
                index=ld.index, node_id=ld.node_id, hostname=ld.hostname, records=self.n_records.get(ld.index, 0),
                cpu_pct=res.cpu_pct, clock_offset_ns=before.offset_ns,
                clock_uncertainty_ns=offset_line(ld.offsets).uncertainty_ns, clock_rtt_ns=before.rtt_ns,
                drift_ppm=drift_ppm(before, ld.offsets[-1]) if len(ld.offsets) > 1 else None,
                # ± on drift_ppm: both offsets' bounds over the time between them (short levels: large)
                drift_uncertainty_ppm=_drift_u(ld.offsets),
            ))
        return rows

    def saturation_reasons(self) -> list[str]:
        """Closed loop: each actor judged its own client saturation (loop lag, CPU)."""
        return [f"load actor {ld.index}: {reason}" for ld, res in zip(self.loads, self.raw)
                for reason in res.saturation_reasons]

    def stopped_early(self) -> str | None:
        why = sorted({res.stopped_early for res in self.raw if res.stopped_early})
        return why[0] if why else None


def _drift_u(offsets: list[ClockOffset]) -> float | None:
    if len(offsets) < 2 or offsets[-1].at_driver_ns <= offsets[0].at_driver_ns:
        return None
    span = offsets[-1].at_driver_ns - offsets[0].at_driver_ns
    return (offsets[0].uncertainty_ns + offsets[-1].uncertainty_ns) / span * 1e6


def run_on_actors(spec: LevelSpec, share: LevelShare, loads: list[LoadActor],
                  on_progress: Callable[[LoadProgress], None] | None = None, *,
                  calls: Callable[..., Future[Any]] = ray_call,
                  pings: int = DEFAULT_PINGS) -> LevelOutcome:
    """The shared level on ``loads`` under the one coordinator loop (module doc)."""
    ex = RayExecutor(loads, share.jobs, spec.mode, calls=calls, pings=pings)
    results, t0_ns, interrupted, stop_reason = coordinate(ex, spec, share.plans, None, on_progress)
    outcome = assemble_outcome(spec, results, t0_ns, share.target_rate, len(loads), records=ex.records)
    for reason in ex.saturation_reasons():
        outcome.load.saturation_reasons.append(reason)
        outcome.load.saturated = True
    outcome.stopped_early = ex.stopped_early()  # the closed loop's actors say why they ended
    outcome.load.actors = ex.actor_rows()
    return settle_outcome(spec, outcome, results, t0_ns, interrupted, stop_reason, share.exhausted_early)
