"""One load worker: its event loop's side of a level.

A ``Worker`` runs a ``WorkerPlan`` (``load/plan.py``) on one event loop: closed-loop streams that
pull requests through their link (``load/link.py``), or open-loop arrivals at ``t0 + offset``. It appends each finished record to
its ``records`` sink the moment the request ends (the level's ``RecordSet`` in-process; a
``RecordStream`` to the parent in a worker process), and keeps its counts (done, failed, output
tokens), when it stopped sending and its loop-lag probes.

A worker process streams its records to the parent during the level (``RecordStream``): they are
buffered as plain dicts and sent as a ``Records`` message whenever ``RECORDS_PER_MESSAGE`` (64) are
waiting and with every progress report (every ``progress_period_s``, 0.2 s), so the worker holds at
most 64 records or 0.2 s of them, a send holds its loop a fraction of a millisecond, and a worker
that dies keeps what it already sent.

``run_worker_on_loop`` is the one "run a worker on its own loop, reporting progress, measuring its
CPU", used by the worker process (``worker_process``) and by the Ray load actor
(``distributed/actors.py``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import signal
import sys
import time
from collections import deque
from multiprocessing.connection import Connection
from typing import Any, Awaitable, Callable, Coroutine

import psutil  # type: ignore[import-untyped]  # psutil ships no stubs (types-psutil is not a dependency)

from wattbench.core.clock import now_ns
from wattbench.core.process_output import ProcessSecrets, contain_output, safe_traceback
from wattbench.core.secret_scope import scrub
from wattbench.load.link import Error, PipeLink, Progress, Ready, Records, Start, WorkerDone, WorkerLink
from wattbench.load.liveness import LivenessWatch, TargetDown
from wattbench.load.plan import Item, WorkerPlan
from wattbench.core.target import TargetSpec
from wattbench.metrics.latency import request_end_ns
from wattbench.core.recordset import RecordSet
from wattbench.core.schema import RequestRecord
from wattbench.workload.base import RequestSpec
from wattbench.load.client import new_event_loop, sending_for, StreamClient

LOOP_PROBE_S = 0.01  # the loop-lag probe's period
# A worker process sends its waiting records once this many wait (and with every progress report):
# a 64-record batch (~60 KB pickled, within a pipe's buffer) holds the worker's loop ~0.25 ms; a
# 640-record one ~3-4 ms, up to 30 ms on a loaded host while the parent reads
# (measured on the 2-core CPU machine, 2026-12-01: docs/benchmarks.md)
RECORDS_PER_MESSAGE = 64


class RecordStream:
    """A worker process's record sink: finished records wait here as dicts until ``flush`` sends
    them to the parent (one ``Records`` message); ``append`` flushes by itself once
    ``RECORDS_PER_MESSAGE`` are waiting."""

    def __init__(self, send: Callable[[object], None]):
        self.send = send
        self.waiting: list[dict[str, Any]] = []
        self.sent = 0

    def append(self, rec: RequestRecord) -> None:
        d = dict(rec.__dict__)  # the field values as they are (no model_dump: half the cost)
        if rec.__pydantic_extra__:
            d.update(rec.__pydantic_extra__)
        self.waiting.append(d)
        if len(self.waiting) >= RECORDS_PER_MESSAGE:
            self.flush()

    def flush(self) -> None:
        if self.waiting:
            batch, self.waiting = self.waiting, []
            self.send(Records(batch))
            self.sent += len(batch)

    def __len__(self) -> int:
        return self.sent + len(self.waiting)


# ------------------------------------------------------------------------------------ worker


async def sleep_until(when_ns: int) -> None:
    """Sleep until ``when_ns`` on the monotonic clock, never returning early: uvloop's timers
    have whole-millisecond resolution and wake up to 1 ms early (measured: most 2.4 ms sleeps),
    so sleep again for what is left."""
    while (left := when_ns - now_ns()) > 0:
        await asyncio.sleep(left / 1e9)


async def probe_loop_lag(lags_ns: list[int]) -> None:
    """Sleep LOOP_PROBE_S at a time and append to ``lags_ns`` how late each wake-up is: the delay
    any socket read of the worker on this loop can suffer before it is stamped. Runs until
    cancelled. A worker looks it up when it starts, so an integration test can take the host's
    share of this signal out by replacing it (a test of the saturation guard does)."""
    period = int(LOOP_PROBE_S * 1e9)
    while True:
        due = now_ns() + period
        await asyncio.sleep(LOOP_PROBE_S)
        lags_ns.append(max(0, now_ns() - due))


class Session:
    __slots__ = ("messages", "text", "tail", "last_end_ns", "target")

    def __init__(self, target: TargetSpec) -> None:
        self.target = target  # a session stays on the target of its first turn
        self.messages: list[dict[str, Any]] = []
        self.text = ""
        self.tail: asyncio.Future[None] | None = None
        self.last_end_ns: int | None = None


class Worker:
    """One worker's event-loop side. ``link`` connects it to the parent (in-process or pipe)."""

    client: StreamClient  # set by run(), for the level

    def __init__(self, plan: WorkerPlan, link: WorkerLink, records: RecordSet | RecordStream | None = None):
        self.plan = plan
        self.link = link
        # where finished records go (``append``): the level's RecordSet, or a RecordStream
        self.records: RecordSet | RecordStream = RecordSet() if records is None else records
        self.done = 0
        self.failed = 0
        self.output_tokens = 0
        self.stop_ns: int | None = None  # when this worker stopped sending
        self.sessions: dict[str, Session] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        self.loop_lag_ns: list[int] = []
        self.watches: dict[str, LivenessWatch] = {}
        self.down: TargetDown | None = None  # the target stopped answering: this worker stopped sending

    def progress(self) -> Progress:
        return Progress(self.done, self.failed, self.output_tokens)

    # -- one request (with session handling)
    async def _one(
        self, idx: int, spec: RequestSpec, scheduled_ns: int | None, warm: bool, target: TargetSpec | None = None
    ) -> None:
        plan = self.plan
        target = target or plan.target
        keep_user = target.keep_output_text
        sid = spec.session_id
        if sid is None:
            rec = await self.client.send(
                spec, target, plan.level, idx, plan.worker, scheduled_ns=scheduled_ns, warmup=warm
            )
        else:
            st = self.sessions.get(sid)
            if st is None:
                st = self.sessions[sid] = Session(target)
            target = st.target
            prev = st.tail
            mine: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            st.tail = mine
            try:
                if prev is not None:
                    await prev
                if st.last_end_ns is not None and spec.think_time_s > 0:
                    await sleep_until(st.last_end_ns + int(spec.think_time_s * 1e9))
                if scheduled_ns is not None:
                    scheduled_ns = max(scheduled_ns, now_ns())
                turn_spec = self._with_history(spec, st)
                rec = await self.client.send(
                    turn_spec,
                    target,
                    plan.level,
                    idx,
                    plan.worker,
                    scheduled_ns=scheduled_ns,
                    warmup=warm,
                    keep_text=True,
                )
                answer = rec.output_text or ""
                if target.api == "chat":
                    st.messages = list(turn_spec.messages or []) + [{"role": "assistant", "content": answer}]
                else:
                    st.text = (turn_spec.prompt or "") + answer
                st.last_end_ns = request_end_ns(rec)
                if not keep_user:
                    rec.output_text = None
            finally:
                if not mine.done():
                    mine.set_result(None)
        if plan.targets:
            rec.target = target.base_url
        self.records.append(rec)
        watch = self.watches.get(target.base_url)
        if watch is None:
            watch = self.watches[target.base_url] = LivenessWatch(target.base_url)
        if watch.update(rec) is not None and self.down is None:
            self.down = watch.down
            self.link.stop.set()  # stop sending; the requests in flight finish (or fail) as they do
        if rec.ok:
            self.done += 1
            self.output_tokens += rec.output_tokens or 0
        else:
            self.failed += 1

    def _target_of(self, k: int) -> TargetSpec:
        """The target of stream ``k`` (closed loop) or arrival ``k`` (open loop)."""
        plan = self.plan
        if not plan.targets or plan.routes is None:  # build_plans gives routes with the targets
            return plan.target
        return plan.targets[plan.routes[k]]

    def _with_history(self, spec: RequestSpec, st: Session) -> RequestSpec:
        if st.target.api == "chat":
            own = spec.messages if spec.messages is not None else [{"role": "user", "content": spec.prompt or ""}]
            return dataclasses.replace(spec, messages=st.messages + list(own))
        return dataclasses.replace(spec, prompt=st.text + (spec.prompt or ""))

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    # -- closed loop
    async def _closed(self, t0_ns: int) -> None:
        plan = self.plan
        link = self.link
        stop_at = t0_ns + int(plan.stop_after_s * 1e9) if plan.stop_after_s is not None else None
        warm_end = t0_ns + int(plan.warmup_s * 1e9) if plan.warmup_s else None
        buf: deque[Item] = deque()
        state = {"end": False}
        lock = asyncio.Lock()
        low = max(1, plan.concurrency // 2)

        def stopped() -> bool:
            return link.stop.is_set() or (stop_at is not None and now_ns() >= stop_at)

        async def refill() -> None:
            async with lock:
                if state["end"] or len(buf) > low:
                    return
                items, end = await link.fetch(max(1, plan.concurrency))
                buf.extend(items)
                state["end"] = end

        def no_more() -> None:
            if self.stop_ns is None:  # sending stopped now; the drain starts
                self.stop_ns = now_ns()

        async def next_item() -> Item | None:
            while True:
                if stopped():
                    no_more()
                    return None
                if buf and buf[0][2] == "time" and warm_end is not None and now_ns() >= warm_end:
                    # handed out during the warm-up, sent after it: decided again by the feeder
                    stale = [(i, sp) for i, sp, w in buf if w == "time"]
                    keep = [it for it in buf if it[2] != "time"]
                    buf.clear()
                    buf.extend(keep)
                    link.give_back(stale)
                    state["end"] = False  # the feeder holds requests again
                    continue
                if buf:
                    item = buf.popleft()
                    if len(buf) <= low and not state["end"] and not lock.locked():
                        self._spawn(refill())
                    return item
                if state["end"]:
                    no_more()
                    return None
                await refill()
                if not buf and not state["end"]:
                    await asyncio.sleep(0.02)  # the parent had nothing for us yet (sessions)

        async def stream(target: TargetSpec) -> None:
            while True:
                item = await next_item()
                if item is None:
                    return
                idx, spec, warm = item
                await self._one(idx, spec, None, bool(warm), target)

        streams = [asyncio.ensure_future(stream(self._target_of(k))) for k in range(plan.concurrency)]
        self.tasks.update(streams)
        try:
            await asyncio.gather(*streams)
        finally:
            if self.stop_ns is None:
                self.stop_ns = now_ns()
            for t in list(self.tasks):  # a prefetch still waiting for the parent
                if not t.done():
                    t.cancel()

    # -- open loop / trace
    async def _open(self, t0_ns: int) -> None:
        link = self.link
        cap = asyncio.Semaphore(self.plan.max_in_flight) if self.plan.max_in_flight else None

        async def capped(coro: Awaitable[None], slot: asyncio.Semaphore) -> None:
            try:
                await coro
            finally:
                slot.release()

        for k, (idx, off, spec, warm) in enumerate(self.plan.arrivals or ()):
            if link.stop.is_set():
                break
            when = t0_ns + int(off * 1e9)
            await sleep_until(when)
            if cap is not None:
                if cap.locked():
                    # capped at --max-concurrency: the request waits for a slot, and its send lag
                    # (what the saturation guard judges) counts from when the slot freed
                    await cap.acquire()
                    when = max(when, now_ns())
                else:
                    await cap.acquire()
                self._spawn(capped(self._one(idx, spec, when, warm, self._target_of(k)), cap))
                continue
            self._spawn(self._one(idx, spec, when, warm, self._target_of(k)))
        self.stop_ns = now_ns()
        while self.tasks:
            await asyncio.gather(*list(self.tasks), return_exceptions=False)

    async def run(self, t0_ns: int) -> bool:
        """Run until the level's bound; returns True when it was cancelled (interrupt)."""
        plan = self.plan
        conc = plan.concurrency if plan.mode == "concurrency" else len(plan.arrivals or ())
        async with StreamClient(plan.target, conc) as client:
            self.client = client
            await sleep_until(t0_ns)
            body = self._closed(t0_ns) if plan.mode == "concurrency" else self._open(t0_ns)
            main = asyncio.ensure_future(body)
            probe = asyncio.ensure_future(probe_loop_lag(self.loop_lag_ns))
            cancel = asyncio.ensure_future(self.link.cancel.wait())
            await asyncio.wait({main, cancel}, return_when=asyncio.FIRST_COMPLETED)
            probe.cancel()
            interrupted = cancel.done()
            if interrupted:
                main.cancel()
                for t in list(self.tasks):
                    t.cancel()
                await asyncio.gather(main, *list(self.tasks), return_exceptions=True)
                if self.stop_ns is None:
                    self.stop_ns = now_ns()
            else:
                cancel.cancel()
                main.result()  # re-raise a bug
        return interrupted


# -------------------------------------------------------------------------------- run a worker


def _cpu_s_process() -> float:
    t = psutil.Process().cpu_times()
    return float(t.user + t.system)


def _cpu_s_thread() -> float:
    return time.thread_time_ns() / 1e9


def run_worker_on_loop(loop: asyncio.AbstractEventLoop, worker: Worker, t0_ns: int,
                       report: Callable[[Progress], None], period_s: float,
                       process_cpu: bool = False) -> tuple[bool, float]:
    """Run ``worker`` to its end on ``loop`` (not running), calling ``report`` every ``period_s``;
    returns (interrupted, CPU % of one core over the run: the process's or this thread's)."""
    cpu = _cpu_s_process if process_cpu else _cpu_s_thread

    async def main() -> bool:
        async def progress() -> None:
            while True:
                await asyncio.sleep(period_s)
                report(worker.progress())

        ptask = asyncio.ensure_future(progress())
        try:
            return await worker.run(t0_ns)
        finally:
            ptask.cancel()

    cpu0, wall0 = cpu(), now_ns()
    interrupted = loop.run_until_complete(main())
    cpu_pct = 100.0 * (cpu() - cpu0) / max(1e-9, (now_ns() - wall0) / 1e9)
    return interrupted, cpu_pct


def worker_process(plan: WorkerPlan, conn: Connection) -> None:
    """Entry point of a worker subprocess (spawned). Everything the process writes to its stdout and
    stderr — a warning, a log line, a traceback, C code's output — passes through
    ``core.process_output.contain_output``, scrubbed of its targets' secrets (which reach it with the
    plan, through the pipe: never a file or its command line) and of the credential variables of its
    environment, and made safe for the terminal it shares with the run, before it leaves the
    process."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides

    targets = plan.targets or [plan.target]
    failed = False
    secrets = ProcessSecrets(s for t in targets for s in t.secrets())
    with contain_output(secrets):
        try:
            _work(plan, targets, conn)
        except BaseException:  # noqa: BLE001 - a bug outside the level: said here, scrubbed, exit 1
            failed = True
            print(safe_traceback(secrets.text), file=sys.stderr)
    if failed:
        sys.exit(1)  # the traceback was said above (multiprocessing prints none for SystemExit)


def _work(plan: WorkerPlan, targets: list[TargetSpec], conn: Connection) -> None:
    loop = new_event_loop()
    asyncio.set_event_loop(loop)
    # a spawned process starts with nothing of the parent's: the targets' query strings and secrets
    with sending_for(targets):
        try:
            conn.send(Ready(now_ns()))
            msg = conn.recv()
            if not isinstance(msg, Start):
                return
            link = PipeLink(conn, loop)
            stream = RecordStream(conn.send)
            worker = Worker(plan, link, stream)

            def report(p: Progress) -> None:
                stream.flush()  # the records first: the parent's counts never run ahead of its records
                conn.send(p)

            interrupted, cpu_pct = run_worker_on_loop(loop, worker, msg.t0_ns, report, plan.progress_period_s,
                                                      process_cpu=True)
            link.close()
            stream.flush()
            conn.send(WorkerDone(cpu_pct, worker.stop_ns, interrupted, worker.progress(), worker.loop_lag_ns,
                                 worker.down))
        except (EOFError, BrokenPipeError):  # the parent is gone: nothing to report to
            pass
        except BaseException:  # report the bug to the parent, which raises it
            try:
                conn.send(Error(safe_traceback(scrub)))  # an aiohttp error's URL holds the query
            except (OSError, EOFError):
                pass
        finally:
            cancel_pending(loop)
            loop.close()
            conn.close()


def cancel_pending(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what an interrupted level left running (streams in flight) and let it unwind, so
    no task is destroyed pending and no connection is left half-open."""
    pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
    if not pending:
        return
    for t in pending:
        t.cancel()
    try:
        loop.run_until_complete(asyncio.wait(pending, timeout=5.0))
    except BaseException:  # noqa: BLE001 - best effort while tearing down
        pass
