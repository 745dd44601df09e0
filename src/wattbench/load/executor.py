"""Where a level's workers run, and the one coordinator loop that watches them.

An ``Executor`` runs a level's ``WorkerPlan``s and answers the coordinator:

- ``prepare()`` (blocking, before the coordinating loop starts: spawn and wait for readiness);
- ``start(loop) -> t0_ns`` (the common start time on ``perf_counter_ns``, given to every worker);
- ``progress() -> Progress`` (done, failed, output tokens summed over workers);
- ``finished()``, ``wait(timeout_s)`` (until finished or the timeout);
- ``failed()``: a worker died or raised (the coordinator then stops the others: the level's load is
  no longer the one asked for, and ``results()`` will raise);
- ``stop()`` (stop sending, let the requests in flight finish), ``cancel()`` (cancel them too);
- ``results() -> list[WorkerResult]`` (raises ``WattbenchError`` when a worker failed);
- ``close()``;
- ``records``: the level's ``RecordSet``, filled as requests finish (in-process: the worker
  appends to it; subprocess: the workers stream batches of records, appended as they arrive, so a
  worker that dies keeps what it sent). Its rows are in completion order.

``InProcessExecutor`` runs one worker on the coordinating loop itself (uvloop); ``SubprocessExecutor``
spawns one process per plan (``load/worker.py``'s ``worker_process``) and talks to them over pipes
(``load/link.py``). Ray's executor (``distributed/executor.py``'s ``RayExecutor``, a higher layer)
implements the same protocol over Ray load actors, which run the same worker.

``coordinate`` draws the closed loop's requests first (``Feeder.prefill``: before t0, off the loop),
then runs the one control loop, every 50 ms: interrupt (SIGINT, or ``control.cancel``) →
cancel; the closed loop's deadline, or ``control.stop`` → close the feeder and stop; the open loop's
backlog guard (``metrics/saturation.py``) → stop; progress (``LoadProgress``) to ``on_progress`` at
most every ``PROGRESS_PERIOD_S``; a failed worker → stop the others. ``LevelControl`` is how another thread stops or cancels a level: a Ray load
actor's level, asked by the driver's coordinator.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Awaitable, Callable, Protocol, TypeVar
import multiprocessing as mp

from wattbench.core.clock import now_ns
from wattbench.core.errors import WattbenchError
from wattbench.core.interrupt import handler_during
from wattbench.load.link import (
    Back, Cancel, Error, Items, LocalLink, Need, Progress, Ready, Records, Start, Stop, WorkerDone, WorkerResult,
)
from wattbench.load.plan import PROGRESS_PERIOD_S, Feeder, WorkerPlan
from wattbench.metrics.saturation import BacklogGuard
from wattbench.core.load_types import LevelSpec
from wattbench.load.worker import Worker, cancel_pending, worker_process
from wattbench.core.recordset import RecordSet
from wattbench.load.client import new_event_loop

_T = TypeVar("_T")

START_MARGIN_NS = 50_000_000  # t0 is this far after every worker reported ready
READY_TIMEOUT_S = 120


class LevelControl:
    """Stop (``stop``: no more sending, the requests in flight finish) or cancel (``cancel``: as
    SIGINT, the requests in flight are cancelled) a level from another thread."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.cancel = threading.Event()


class Executor(Protocol):
    """Runs a level's workers (module doc)."""

    fast_loop: bool
    records: RecordSet

    def prepare(self) -> None: ...

    def start(self, loop: asyncio.AbstractEventLoop) -> int: ...

    def progress(self) -> Progress: ...

    def finished(self) -> bool: ...

    def failed(self) -> bool: ...

    async def wait(self, timeout_s: float) -> None: ...

    def stop(self) -> None: ...

    def cancel(self) -> None: ...

    def results(self) -> list[WorkerResult]: ...

    def close(self) -> None: ...


class InProcessExecutor:
    """One worker on the coordinating loop; its CPU is this thread's."""

    fast_loop = True
    # set by start(), which the coordinator calls before anything else of the level
    link: LocalLink
    worker: Worker
    task: asyncio.Future[bool]  # the worker's run: True when it was cancelled

    def __init__(self, plan: WorkerPlan, feeder: Feeder | None):
        self.plan, self.feeder = plan, feeder
        self.records = RecordSet()
        self._cpu_pct: float | None = None

    def prepare(self) -> None:
        pass

    def start(self, loop: asyncio.AbstractEventLoop) -> int:
        self.link = LocalLink(self.feeder, 0)
        self.worker = Worker(self.plan, self.link, self.records)
        t0_ns = now_ns() + 1_000_000
        cpu0, wall0 = time.thread_time_ns(), now_ns()

        def done(_task: asyncio.Future[bool]) -> None:
            self._cpu_pct = 100.0 * (time.thread_time_ns() - cpu0) / max(1, now_ns() - wall0)

        self.task = asyncio.ensure_future(self.worker.run(t0_ns))
        self.task.add_done_callback(done)
        return t0_ns

    def progress(self) -> Progress:
        return self.worker.progress()

    def finished(self) -> bool:
        return self.task.done()

    def failed(self) -> bool:
        return self.task.done() and not self.task.cancelled() and self.task.exception() is not None

    async def wait(self, timeout_s: float) -> None:
        await asyncio.wait({self.task}, timeout=timeout_s)

    def stop(self) -> None:
        self.link.stop.set()

    def cancel(self) -> None:
        self.link.stop.set()
        self.link.cancel.set()

    def results(self) -> list[WorkerResult]:
        w = self.worker
        return [WorkerResult(None, self._cpu_pct, w.stop_ns, self.task.result(), w.loop_lag_ns, w.down)]

    def close(self) -> None:
        pass


class SubprocessExecutor:
    """One spawned process per plan, each on its own loop; the parent serves the feeder."""

    fast_loop = False  # coordination only: no need for uvloop
    # set by start()
    loop: asyncio.AbstractEventLoop
    done_f: asyncio.Future[None]

    def __init__(self, plans: list[WorkerPlan], feeder: Feeder | None):
        self.plans, self.feeder = plans, feeder
        n = len(plans)
        self.conns: list[Connection] = []
        self.procs: list[BaseProcess] = []
        self.records = RecordSet()
        self.out: list[WorkerResult | None] = [None] * n
        self.counts = [Progress(0, 0, 0)] * n
        self.errors: list[str] = []

    def prepare(self) -> None:
        ctx = mp.get_context("spawn")
        for plan in self.plans:
            parent_conn, child_conn = ctx.Pipe(duplex=True)
            p = ctx.Process(target=worker_process, args=(plan, child_conn), daemon=True,
                            name=f"wattbench-worker-{plan.worker}")
            p.start()
            child_conn.close()
            self.conns.append(parent_conn)
            self.procs.append(p)
        # Wait for every worker to be ready (imports done), then give all the same t0.
        for w, c in enumerate(self.conns):
            if not c.poll(READY_TIMEOUT_S):
                raise WattbenchError(f"load worker {w} did not start within {READY_TIMEOUT_S} s")
            try:
                msg = c.recv()
            except EOFError:
                raise WattbenchError(
                    f"load worker {w} exited while starting (a script that starts several workers "
                    "must guard its entry point with `if __name__ == '__main__':`)"
                ) from None
            if isinstance(msg, Error):
                raise WattbenchError(f"load worker {w} failed to start:\n{msg.traceback}")
            assert isinstance(msg, Ready), msg

    def start(self, loop: asyncio.AbstractEventLoop) -> int:
        self.loop = loop
        self.done_f = loop.create_future()
        t0_ns = now_ns() + START_MARGIN_NS
        for c in self.conns:
            c.send(Start(t0_ns))
        for w, c in enumerate(self.conns):
            loop.add_reader(c.fileno(), self._on_msg, w)
            os.set_blocking(c.fileno(), True)  # see PipeLink
        return t0_ns

    def _finish(self, w: int, result: WorkerResult) -> None:
        self.out[w] = result
        self.loop.remove_reader(self.conns[w].fileno())

    def _on_msg(self, w: int) -> None:
        c = self.conns[w]
        try:
            while self.out[w] is None and c.poll():
                msg = c.recv()
                if isinstance(msg, Need):
                    items, end = self.feeder.take(w, msg.n) if self.feeder is not None else ([], True)
                    c.send(Items(items, end))
                elif isinstance(msg, Back):
                    if self.feeder is not None:  # only a closed loop's worker gives items back
                        self.feeder.give_back(w, msg.items)
                elif isinstance(msg, Progress):
                    self.counts[w] = msg
                elif isinstance(msg, Records):
                    self.records.extend(msg.records)
                elif isinstance(msg, WorkerDone):
                    self.counts[w] = msg.progress
                    self._finish(w, WorkerResult(None, msg.cpu_pct, msg.stop_ns, msg.interrupted,
                                                 msg.loop_lag_ns, msg.down))
                elif isinstance(msg, Error):
                    self.errors.append(msg.traceback)
                    self._finish(w, WorkerResult(None, None, None, True))
        except (EOFError, OSError) as e:
            if self.out[w] is None:
                self.errors.append(f"load worker {w} exited unexpectedly (exit code {self.procs[w].exitcode}, {e!r})")
                self._finish(w, WorkerResult(None, None, None, True))
        if self.finished() and not self.done_f.done():
            self.done_f.set_result(None)

    def progress(self) -> Progress:
        return Progress(*(sum(x) for x in zip(*((p.done, p.failed, p.output_tokens) for p in self.counts))))

    def finished(self) -> bool:
        return all(r is not None for r in self.out)

    def failed(self) -> bool:
        return bool(self.errors)

    async def wait(self, timeout_s: float) -> None:
        await asyncio.wait({self.done_f}, timeout=timeout_s)
        if not self.finished() and not any(p.is_alive() for p in self.procs):
            await asyncio.sleep(0.2)  # what the dead workers sent last
            for w in range(len(self.conns)):
                if self.out[w] is None:
                    self._on_msg(w)
            if not self.finished():
                self.errors.append("load workers exited without a result")
                for w in range(len(self.conns)):
                    if self.out[w] is None:
                        self._finish(w, WorkerResult(None, None, None, True))

    def _broadcast(self, msg: Stop | Cancel) -> None:
        for w, c in enumerate(self.conns):
            if self.out[w] is None:
                try:
                    c.send(msg)
                except (OSError, BrokenPipeError):
                    pass

    def stop(self) -> None:
        self._broadcast(Stop())

    def cancel(self) -> None:
        self._broadcast(Cancel())

    def results(self) -> list[WorkerResult]:
        if self.errors:
            raise WattbenchError("load worker failed:\n" + "\n".join(self.errors))
        out = [r for r in self.out if r is not None]
        if len(out) < len(self.out):  # asked before every worker finished
            raise WattbenchError(f"{len(self.out) - len(out)} load worker(s) have no result yet")
        return out

    def close(self) -> None:
        for c in self.conns:
            c.close()
        for p in self.procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join(timeout=5)


@dataclass(frozen=True)
class LoadProgress:
    """A level's load so far, as ``coordinate`` hands it to ``on_progress`` (at most every
    ``PROGRESS_PERIOD_S``, and once at the end): requests completed and failed, output tokens of the
    completed ones (the servers' count), summed over every worker; seconds since the level's ``t0``."""

    requests_done: int
    requests_failed: int
    output_tokens: int
    elapsed_s: float


def load_progress(p: Progress, t0_ns: int) -> LoadProgress:
    """The workers' summed counts ``p`` as ``LoadProgress``, ``t0_ns`` the level's start."""
    return LoadProgress(requests_done=p.done, requests_failed=p.failed, output_tokens=p.output_tokens,
                        elapsed_s=max(0.0, (now_ns() - t0_ns) / 1e9))


def deadline_ns(spec: LevelSpec, feeder: Feeder | None, t0_ns: int) -> int | None:
    """Closed loop: when to stop sending (None: not known yet / no duration bound)."""
    if feeder is None or spec.duration_s is None:
        return None
    if spec.warmup_requests:
        if feeder.first_measured_ns is None:
            return None
        return feeder.first_measured_ns + int(spec.duration_s * 1e9)
    return t0_ns + int(((spec.warmup_s or 0.0) + spec.duration_s) * 1e9)


def coordinate(executor: Executor, spec: LevelSpec, plans: list[WorkerPlan], feeder: Feeder | None,
               on_progress: Callable[[LoadProgress], None] | None, control: LevelControl | None = None
               ) -> tuple[list[WorkerResult], int, bool, str | None]:
    """Run the level on ``executor`` under the one control loop (module doc). ``plans``: the open
    loop's arrivals for the backlog guard; ``control``: stop or cancel from another thread.

    Returns (worker results, t0_ns, interrupted, the guard's stop reason or None)."""
    stops: list[str] = []
    t0: list[int] = []

    async def go(loop: asyncio.AbstractEventLoop, interrupted: threading.Event) -> list[WorkerResult]:
        t0_ns = executor.start(loop)
        t0.append(t0_ns)
        if feeder is not None:
            feeder.t0_ns = t0_ns
        guard = BacklogGuard(spec.mode in ("rate", "trace") and spec.stop_when_oversaturated,
                             [a[1] for p in plans for a in (p.arrivals or ())], t0_ns)
        last, stopped, cancelled = 0, False, False
        while not executor.finished():
            await executor.wait(0.05)
            if interrupted.is_set() and not cancelled:
                stopped = cancelled = True
                executor.cancel()
            now = now_ns()
            dl = deadline_ns(spec, feeder, t0_ns)
            asked = control is not None and control.stop.is_set()
            if (asked or (dl is not None and now >= dl)) and not stopped:
                stopped = True
                if feeder is not None:
                    feeder.close()
                executor.stop()
            if executor.failed() and not stopped:  # the others would go on with part of the load
                stopped = True
                if feeder is not None:
                    feeder.close()
                executor.stop()
            p = executor.progress()
            if guard.update(p.done + p.failed, now) and not stopped:
                stopped = True
                if guard.reason is not None:
                    stops.append(guard.reason)
                executor.stop()
            if on_progress is not None and now - last >= PROGRESS_PERIOD_S * 1e9:
                last = now
                on_progress(load_progress(p, t0_ns))
        if on_progress is not None:
            on_progress(load_progress(executor.progress(), t0_ns))
        return executor.results()

    try:
        if feeder is not None:
            feeder.prefill()  # the requests drawn before t0: no prompt is built on the loop
        executor.prepare()
        results, interrupted = run_loop(go, fast=executor.fast_loop,
                                        interrupted=control.cancel if control is not None else None)
    finally:
        if feeder is not None:
            feeder.finish()
        executor.close()
    return results, t0[0], interrupted or any(r.interrupted for r in results), (stops[0] if stops else None)


def run_loop(coro_fn: Callable[[asyncio.AbstractEventLoop, threading.Event], Awaitable[_T]], fast: bool = True,
             interrupted: threading.Event | None = None) -> tuple[_T, bool]:
    """Run ``coro_fn(loop, interrupted)`` on a fresh loop (uvloop when ``fast``); SIGINT sets the
    ``interrupted`` flag (a new one, or the one given) instead of raising. Returns (its result,
    whether the flag was set)."""
    loop = new_event_loop() if fast else asyncio.new_event_loop()
    interrupted = interrupted if interrupted is not None else threading.Event()
    # A plain Python handler, not loop.add_signal_handler: the coordinating coroutine polls the
    # flag every 50 ms, and no loop-owned signal fd is left behind between levels.
    # The caller's handler is back however the level ends (a return, an error, the interrupt),
    # before what the level left running is cancelled.
    try:
        with handler_during(signal.SIGINT, lambda signum, frame: interrupted.set()):
            return loop.run_until_complete(coro_fn(loop, interrupted)), interrupted.is_set()
    finally:
        cancel_pending(loop)
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
