"""Run one load level: closed loop, open loop or trace replay, in one or several worker processes.

``run_level(spec, target, requests, on_progress) -> LevelOutcome``

Modes
-----
- **closed loop** (``mode="concurrency"``): N streams, each sends its next request when the
  previous one ended. Bounded by ``num_requests`` (measured requests) and/or ``duration_s``; a
  finite ``requests`` iterable also ends the level when it runs out.
- **open loop** (``mode="rate"``): arrivals at ``t0 + offset`` on the monotonic clock from a seeded
  ``poisson``/``constant``/``gamma:K`` schedule (``load/schedule.py``); each record carries
  ``scheduled_ns`` and ``sent_ns`` (their difference is the send lag). Bounded by ``num_requests``
  and/or ``duration_s``.
- **trace** (``mode="trace"``): arrivals at ``RequestSpec.arrival_s / speedup`` (offsets shifted so
  the first arrival is at 0).

Warm-up (``warmup_s`` and/or ``warmup_requests``) comes first; its requests are marked
``warmup=True`` and excluded from the window and from statistics. A request is warm-up when it
was *handed out* (closed loop) or *scheduled* (open loop) before the warm-up ended, or was among
the first ``warmup_requests``. ``duration_s`` counts from the end of the warm-up. At the duration
the level stops sending and lets the requests in flight finish; ``load.drain_s`` records how long
that took.

Sessions: requests with the same ``session_id`` go in the order the workload gives them (turn
order), each after the previous turn finished plus ``think_time_s``, carrying the earlier turns'
messages and the server's answers (chat API) or the concatenated prompt and answers
(completions API). A session always runs on one worker. In a closed loop a stream that picked a
later turn waits for it (a user thinking is part of the session).

Workers
-------
``spec.workers`` worker processes (``None`` = auto, see ``auto_workers``). One worker runs in the
calling process on its own event loop (uvloop when importable); several are started with the
``spawn`` context, each with its own loop and ``aiohttp`` session. Closed loop concurrency is
partitioned (N // W each, the remainder to the first ones); open-loop arrivals are interleaved
(arrival i to worker i mod W; a session sticks to the worker of its first turn). All workers get
the same absolute start time ``t0`` on ``perf_counter_ns`` — CLOCK_MONOTONIC on Linux, one clock
for every process of the host — so their records merge without conversion. Closed-loop requests
are pulled from the parent on demand (small prefetch), so ``requests`` may be an endless callable.

Interruption: a SIGINT (Ctrl-C) while a level runs in the main thread cancels the requests in
flight and raises ``wattbench.core.errors.Interrupted`` whose ``outcome`` attribute is the partial
``LevelOutcome`` (completed requests only, ``stopped_early="interrupted"``); worker processes
ignore SIGINT and are cancelled by the parent.

Layout: ``load/plan.py`` (worker rule, plans, feeder, arrivals), ``load/worker.py`` (one worker's
event loop), ``load/link.py`` (worker ↔ coordinator protocol and typed messages),
``load/executor.py`` (in-process and subprocess executors, the one coordinator loop),
``metrics/saturation.py`` (every threshold, the client guard, the backlog guard); this module ties
them together and assembles the ``LevelOutcome``.

Client saturation: ``load.saturated`` is set, with reasons, on the client's own signals only
(thresholds in ``metrics/saturation.py``): the send-lag p99 exceeds ``max(5 ms, 10% of the mean
inter-arrival time)``, a worker used more than 90% of one core, or the event loop's lag p99
exceeds 2 ms. An achieved rate below the target is not a client signal (a short Poisson level
scatters widely); accounting judges it against the arrival process's own spread. The loop lag is measured by a 10 ms timer in every worker: a client
that is not CPU-bound itself can still be starved of CPU by other processes (measured on a shared
host: 20% of a core used, arrival stamps 5-25 ms late), and only this probe sees that.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import numpy as np

from wattbench.core.errors import Interrupted, LevelFailed, StorageError, UserError, WattbenchError
from wattbench.load.executor import InProcessExecutor, LevelControl, LoadProgress, SubprocessExecutor, coordinate
from wattbench.load.client import sending_for
from wattbench.load.link import WorkerResult
from wattbench.load.plan import (
    ARRIVALS_PER_WORKER_RPS,
    STREAMS_PER_WORKER,
    auto_workers,
    build_plans,
    validate_spec,
)
# the client's own saturation thresholds have one home, metrics/saturation.py: import them from there
from wattbench.metrics.saturation import client_saturation_reasons
from wattbench.core.load_types import LevelOutcome, LevelSpec
from wattbench.core.target import TargetSpec
from wattbench.metrics.latency import stats
from wattbench.core.recordset import NONE, RecordSet, as_record_set
from wattbench.core.schema import LoadStats, RequestRecord, TargetDownInfo
from wattbench.workload.base import RequestSpec
from wattbench.accounting.steady import steady_window_ns

__all__ = ["run_level", "validate_spec", "auto_workers", "assemble_outcome", "settle_outcome", "STREAMS_PER_WORKER",
           "ARRIVALS_PER_WORKER_RPS", "Drain", "await_drained"]

DRAIN_POLL_S = 0.25  # how often the server's in-flight count is read while waiting for it to drain
DRAIN_NO_PROGRESS_S = 10.0  # a count that has not fallen for this long is not draining: the wait ends


@dataclass(frozen=True)
class Drain:
    """Whether the server had finished the load before a level (``await_drained``).

    ``drained``: True once its in-flight count (running + waiting) was back to ``baseline`` (what it
    served before the run's first load); False when ``limit_s`` passed first (``in_flight``: the
    last count read); None when the server reports no such count — then the client's own
    requests are what is known to have ended (``run_level`` returns only once every request it
    sent has finished or been cancelled) — and ``abandoned``: how many of them it gave up on, which
    an engine may still be serving."""

    drained: bool | None
    waited_s: float
    in_flight: float | None
    baseline: float
    limit_s: float
    abandoned: int = 0  # requests of the load before that the client gave up on (they may run on)
    stuck: bool = False  # the wait ended early: the count stopped falling (``DRAIN_NO_PROGRESS_S``)


def await_drained(in_flight: Callable[[], float | None], *, baseline: float = 0.0, limit_s: float,
                  abandoned: int = 0, poll_s: float = DRAIN_POLL_S, no_progress_s: float = DRAIN_NO_PROGRESS_S,
                  clock: Callable[[], float] = time.monotonic,
                  sleep: Callable[[float], None] = time.sleep) -> Drain:
    """Wait until the server has drained the previous load: ``in_flight()`` (the server's running +
    waiting requests, None when it cannot tell) at or below ``baseline``, for at most ``limit_s``.

    On the H200, trials of c=16 read 172 / 157 / 263 tok/s, each following a c=64 level that ended
    with its 64 requests still on the server: a level that starts before the server has finished
    the previous one shares it with that load. A request the client abandoned (a timeout, a stall,
    an interrupt) can run on in an engine that does not abort it; nothing on the client side sees
    it, the server's own count does.

    A count that has not fallen below its lowest for ``no_progress_s`` is a server that is not
    draining (a leaked request, a count that never comes down): the wait ends there, ``stuck``, so
    such a server costs ``no_progress_s`` before each level and trial, not ``limit_s``."""
    t0 = clock()
    n = in_flight()
    if n is None:
        return Drain(None, 0.0, None, baseline, limit_s, abandoned)
    low, t_low = n, t0  # the lowest count read, and when it was first read
    while n > baseline:
        now = clock()
        waited = now - t0
        if waited >= limit_s:
            return Drain(False, waited, n, baseline, limit_s, abandoned)
        if now - t_low >= no_progress_s:  # not draining: a stuck count is not waited out to the limit
            return Drain(False, waited, n, baseline, limit_s, abandoned, stuck=True)
        sleep(min(poll_s, max(0.0, limit_s - waited)))
        got = in_flight()
        if got is not None:  # a failed read: the last count stands until the next one
            n = got
            if n < low:
                low, t_low = n, clock()
    return Drain(True, clock() - t0, n, baseline, limit_s, abandoned)


def run_level(
    spec: LevelSpec,
    target: TargetSpec | Sequence[TargetSpec],
    requests: Iterable[RequestSpec] | Callable[[int], RequestSpec],
    on_progress: Callable[[LoadProgress], None] | None = None,
    route: Callable[[int], int] | None = None,
    control: LevelControl | None = None,
) -> LevelOutcome:
    """Run one level and return its records, window and load statistics (see module doc).

    ``target`` may be a list of targets (replicas, or a load balancer and its backends): then
    ``route(k)`` gives the index in that list of closed-loop stream ``k`` (numbered over all
    workers) or of the open-loop/trace request with index ``k`` (default: ``k % len(targets)``,
    round robin); a session stays on the target of its first turn; every record carries
    ``target`` = the base URL it went to. ``wattbench.load.targets`` builds weighted routes.
    ``control`` stops or cancels the level from another thread (``load.executor.LevelControl``);
    a cancel raises ``Interrupted`` as SIGINT does.
    """
    validate_spec(spec, targets=1 if isinstance(target, TargetSpec) else len(target))
    targets: list[TargetSpec] | None = None
    if not isinstance(target, TargetSpec):
        targets = list(target)
        if not targets:
            raise UserError("no target given: pass at least one --target URL")
        target = targets[0]
        if route is None:
            n_targets = len(targets)

            def route(k: int) -> int:  # round robin
                return k % n_targets
    lp = build_plans(spec, target, targets, route, requests)
    plans, feeder = lp.plans, lp.feeder
    executor = InProcessExecutor(plans[0], feeder) if len(plans) == 1 else SubprocessExecutor(plans, feeder)
    # in this process, the level's own targets' query strings are the ones sent to their origins
    # (``wattbench ab``'s other side may be another query on the same origin); workers do it in theirs
    sending = sending_for(targets or [target]) if len(plans) == 1 else contextlib.nullcontext()
    try:
        with sending:
            results, t0_ns, interrupted, stop_reason = coordinate(executor, spec, plans, feeder, on_progress, control)
    except WattbenchError as e:
        raise failed_level(spec, e, executor.records, lp.target_rate, len(plans)) from None
    exhausted_early = lp.exhausted_early
    if feeder is not None and spec.num_requests is not None and feeder.exhausted:
        exhausted_early = feeder.measured < spec.num_requests
    outcome = assemble_outcome(spec, results, t0_ns, lp.target_rate, len(plans), records=executor.records)
    return settle_outcome(spec, outcome, results, t0_ns, interrupted, stop_reason, exhausted_early)


def failed_level(spec: LevelSpec, err: WattbenchError, records: RecordSet, target_rate: float | None, n_workers: int
                 ) -> WattbenchError:
    """The error a level ends with when a load worker failed (``coordinate`` raised): with records
    streamed before the failure, ``LevelFailed`` carrying the outcome they make (``stopped_early``
    ``worker_failed``), so the run records them; without any, ``err`` itself (e.g. a worker that
    never started). A failed write of the records (``StorageError``: the run directory filled up or
    went read-only) is ``err`` itself: nothing more can be written, the records finished before it
    stay in the level's spool, where ``wattbench report`` finds them."""
    if not records or isinstance(err, (LevelFailed, Interrupted, StorageError)):
        return err
    t0_ns = int(records.columns("sent_ns")["sent_ns"].min())
    outcome = assemble_outcome(spec, [], t0_ns, target_rate, n_workers, records=records)
    outcome.stopped_early = "worker_failed"
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]  # a traceback: its last line says what
    why = lines[0] if len(lines) == 1 else f"{lines[0]} {lines[-1]}"
    out = LevelFailed(f"{why}; the level stopped, the {len(records)} requests it finished before are kept")
    out.outcome = outcome  # type: ignore[attr-defined]  # core.errors cannot name LevelOutcome (an import cycle)
    return out


def last_answer_ns(records: RecordSet | Sequence[RequestRecord], target: str) -> int | None:
    """When the last request that ``target`` answered ended (its ``end_ns``, else ``sent_ns``), over
    every worker's records; ``None`` when it answered none. A record with no target is of a level
    with one target (``rec.target`` is set only when several are driven)."""
    rs = as_record_set(records)
    if not len(rs):
        return None
    cols = rs.columns("ok", "target", "end_ns", "sent_ns")
    labels = rs.labels("target")
    mine = cols["target"] == NONE
    if target in labels:
        mine |= cols["target"] == labels.index(target)
    mine &= cols["ok"]
    if not mine.any():
        return None
    ends = np.where(cols["end_ns"] != NONE, cols["end_ns"], cols["sent_ns"])
    return int(ends[mine].max())


def settle_outcome(spec: LevelSpec, outcome: LevelOutcome, results: list[WorkerResult], t0_ns: int,
                   interrupted: bool, stop_reason: str | None, exhausted_early: bool) -> LevelOutcome:
    """Why the level ended, in one order whatever ran it (workers here, Ray actors in
    ``distributed/``): an interrupt raises ``Interrupted`` carrying the outcome (the completed
    requests); else a target that stopped answering (the first to, ``outcome.target_down``), the
    backlog guard's reason, the request source running out."""
    if interrupted:
        outcome.stopped_early = "interrupted"
        err = Interrupted(f"level {spec.label} interrupted; {len(outcome.records)} completed requests kept")
        err.outcome = outcome  # type: ignore[attr-defined]  # as in failed_level
        raise err
    downs = [r.down for r in results if r.down is not None]
    if downs:
        first = min(downs, key=lambda d: d.first_failure_ns)
        # the last answer is the target's, whichever worker read it: the worker that saw the failure
        # first may have had none answered while another had many
        seen = last_answer_ns(outcome.records, first.target)
        if seen is not None and (first.last_ok_ns is None or seen > first.last_ok_ns):
            first = dataclasses.replace(first, last_ok_ns=seen)
        outcome.target_down = TargetDownInfo(**first.to_dict(t0_ns), text=first.text(t0_ns))
        outcome.stopped_early = "target stopped answering"
    elif stop_reason:
        outcome.stopped_early = stop_reason
    elif exhausted_early:
        outcome.stopped_early = "requests_exhausted"
    return outcome


# ---------------------------------------------------------------------------------- outcome


def end_column(cols: dict[str, np.ndarray]) -> np.ndarray:
    """``metrics.latency.request_end_ns`` over columns: the last content chunk, else when the
    stream closed, else ``NONE`` (the request never ended)."""
    return np.where(cols["last_token_ns"] != NONE, cols["last_token_ns"], cols["end_ns"])


def mean_in_flight(records: RecordSet | Sequence[RequestRecord], start_ns: int, end_ns: int) -> float | None:
    """Mean number of requests in flight over ``[start_ns, end_ns]`` (records: a RecordSet or a list)."""
    if end_ns <= start_ns or not records:
        return None
    cols = as_record_set(records).columns("sent_ns", "last_token_ns", "end_ns")
    return _mean_in_flight(cols["sent_ns"], end_column(cols), start_ns, end_ns)


def _mean_in_flight(sent: np.ndarray, end: np.ndarray, start_ns: int, end_ns: int) -> float | None:
    if end_ns <= start_ns or sent.size == 0:
        return None
    ok = end != NONE
    a = np.maximum(sent[ok], start_ns)
    b = np.minimum(end[ok], end_ns)
    d = b - a
    return int(d[d > 0].sum()) / (end_ns - start_ns)


def merged_records(results: list[WorkerResult]) -> RecordSet:
    """The records the workers kept themselves (Ray's load actors, tests) as one RecordSet."""
    own = [res.records for res in results if res.records is not None]
    if len(own) == 1 and isinstance(own[0], RecordSet):
        return own[0]
    rs = RecordSet()
    for recs in own:
        rs.extend(recs)
    return rs


def assemble_outcome(spec: LevelSpec, results: list[WorkerResult], t0_ns: int, target_rate: float | None, n_workers: int,
                     records: RecordSet | None = None) -> LevelOutcome:
    """The level's outcome from its records (``records``, else the workers' own, merged) and the
    workers' results: windows and load statistics from columns (no Python object per request)."""
    rs = merged_records(results) if records is None else records
    c = rs.columns("sent_ns", "scheduled_ns", "last_token_ns", "end_ns", "warmup", "ok")
    sent, sched, ok = c["sent_ns"], c["scheduled_ns"], c["ok"]
    meas = ~c["warmup"]
    end = end_column(c)
    del c  # a few columns at a time: 8 bytes a request each
    end_or_sent = np.where(end != NONE, end, sent)
    last_end = int(end_or_sent.max()) if sent.size else None
    n_meas = int(meas.sum())
    if n_meas:
        start_ns = int(sent[meas].min())
        end_ns = int(end_or_sent[meas].max())
    else:
        start_ns = end_ns = t0_ns
    del end_or_sent
    # Steady window: the one rule (accounting/steady.py), over every stream (warm-up ones load the
    # server too), never before the first measured send.
    steady_start = steady_end = None
    if n_meas:
        sw = steady_window_ns(sent, end, spec.mode, int(spec.value) if spec.mode == "concurrency" else None,
                              start_ns=start_ns)
        if sw is not None:
            steady_start, steady_end = sw.start_ns, sw.end_ns
    # Load statistics.
    load = LoadStats(mode=spec.mode, workers=n_workers,
                     max_in_flight=spec.max_in_flight if spec.mode == "rate" else None)
    if spec.mode == "concurrency":
        load.target_concurrency = int(spec.value)
    else:
        load.target_rate_rps = target_rate
        load.arrival = spec.arrival if spec.mode == "rate" else "trace"
    if n_meas > 1:
        if spec.mode == "concurrency":
            dur = (end_ns - start_ns) / 1e9
            load.achieved_rate_rps = int((meas & ok).sum()) / dur if dur > 0 else None
        else:
            # From the first request's SCHEDULED time to the last actual send: a client that falls
            # behind and then sends in bursts reads as slow, not as fast.
            first = int(np.where(sched != NONE, sched, sent)[meas].min())
            span = (int(sent[meas].max()) - first) / 1e9
            load.achieved_rate_rps = (n_meas - 1) / span if span > 0 else None
    load.mean_in_flight = _mean_in_flight(sent, end, start_ns, end_ns)
    lagged = meas & (sched != NONE)
    if lagged.any():  # the send lags in send order, as they were sent (open loop)
        by_sent = np.argsort(sent, kind="stable")
        lagged = by_sent[lagged[by_sent]]
    load.send_lag_ms = stats((sent[lagged] - sched[lagged]) / 1e6)
    del sent, sched, end, ok, meas, lagged
    cpus = [res.cpu_pct for res in results if res.cpu_pct is not None]
    load.client_cpu_pct = max(cpus) if cpus else None
    load.client_cpu_pct_per_worker = cpus
    load.client_loop_lag_ms = stats([x / 1e6 for res in results for x in res.loop_lag_ns])
    stops = [res.stop_ns for res in results if res.stop_ns is not None]
    if stops and last_end is not None:
        load.drain_s = max(0.0, (last_end - max(stops)) / 1e9)
    # Saturation guard: the client's own signals only (metrics/saturation.py).
    reasons = client_saturation_reasons(load, target_rate)
    load.saturated = bool(reasons)
    load.saturation_reasons = reasons
    return LevelOutcome(
        records=rs,
        start_ns=start_ns,
        end_ns=end_ns,
        steady_start_ns=steady_start,
        steady_end_ns=steady_end,
        load=load,
    )
