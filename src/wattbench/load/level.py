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
flight and raises ``wattbench.errors.Interrupted`` whose ``outcome`` attribute is the partial
``LevelOutcome`` (completed requests only, ``stopped_early="interrupted"``); worker processes
ignore SIGINT and are cancelled by the parent.

Client saturation: ``load.saturated`` is set, with reasons, on the client's own signals only
(thresholds in ``load/saturation.py``): the send-lag p99 exceeds ``max(5 ms, 10% of the mean
inter-arrival time)``, a worker used more than 90% of one core, or the event loop's lag p99
exceeds 2 ms. An achieved rate below the target is not a client signal (a short Poisson level
scatters widely); accounting judges it against the arrival process's own spread. The loop lag is measured by a 10 ms timer in every worker: a client
that is not CPU-bound itself can still be starved of CPU by other processes (measured on a shared
host: 20% of a core used, arrival stamps 5-25 ms late), and only this probe sees that.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import math
import os
import signal
import threading
import time
import traceback
from collections import deque
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Sequence


from wattbench.clock import now_ns
from wattbench.errors import Interrupted, UserError, WattbenchError
from wattbench.load.liveness import LivenessWatch, TargetDown
from wattbench.load.schedule import iter_arrival_times, parse_arrival
from wattbench.load.types import LevelOutcome, LevelSpec, TargetSpec
from wattbench.metrics.latency import request_end_ns, stats
from wattbench.results.schema import LoadStats, RequestRecord
from wattbench.workload.base import RequestSpec

__all__ = ["run_level", "auto_workers", "STREAMS_PER_WORKER", "ARRIVALS_PER_WORKER_RPS"]

# Auto worker rule (docs/benchmarks.md, "Client overhead"): one worker keeps its timestamps
# within 1 ms up to ~256 concurrent streams at ~20 ms inter-token latency; open loop, one worker
# per 100 requests/s of target rate.
STREAMS_PER_WORKER = 256
ARRIVALS_PER_WORKER_RPS = 100.0
PROGRESS_PERIOD_S = 0.2  # on_progress at most 5 times/s
START_MARGIN_NS = 50_000_000  # t0 is this far after every worker reported ready

LOOP_PROBE_S = 0.01  # the loop-lag probe's period
# The client's own saturation thresholds have one home: load/saturation.py.
from wattbench.load.saturation import (  # noqa: E402
    SAT_CPU_PCT,
    SAT_LAG_FLOOR_MS,
    SAT_LAG_FRACTION,
    SAT_LOOP_LAG_MIN_PROBES,
    SAT_LOOP_LAG_MS,
    client_saturation_reasons,
)

Item = tuple  # (index, RequestSpec, warmup: bool)


def auto_workers(spec: LevelSpec, cpu_count: int | None = None) -> int:
    """Workers for a level when ``spec.workers`` is None: enough that each worker drives at most
    ``STREAMS_PER_WORKER`` concurrent streams (closed loop) or ``ARRIVALS_PER_WORKER_RPS``
    arrivals/s (open loop), never more than the host's cores; trace replay uses one."""
    cpus = cpu_count or os.cpu_count() or 1
    if spec.mode == "concurrency":
        need = math.ceil(spec.value / STREAMS_PER_WORKER)
    elif spec.mode == "rate" and math.isinf(spec.value):  # all at once: streams in flight, not arrivals/s
        need = math.ceil(min(spec.num_requests or 1, spec.max_in_flight or math.inf) / STREAMS_PER_WORKER)
    elif spec.mode == "rate":
        need = math.ceil(spec.value / ARRIVALS_PER_WORKER_RPS)
    else:
        need = 1
    return max(1, min(cpus, need))


# ------------------------------------------------------------------------------------- plans


@dataclass
class _Plan:
    """What one worker does (picklable)."""

    worker: int
    level: int
    mode: str
    target: TargetSpec
    concurrency: int = 0  # closed loop
    arrivals: list | None = None  # open loop: [(index, offset_s, spec, warmup)] sorted by offset
    max_in_flight: int | None = None  # open loop: this worker's share of --max-concurrency
    stop_after_s: float | None = None  # closed loop: stop sending at t0 + this
    warmup_s: float | None = None  # closed loop: a request sent after t0 + this is measured
    progress_period_s: float = PROGRESS_PERIOD_S
    # several targets: ``routes[k]`` is the index in ``targets`` of this worker's stream k (closed
    # loop) or arrival k (open loop); records then carry ``target`` = the base URL
    targets: list | None = None
    routes: list | None = None


def _source(requests) -> Iterator[tuple[int, RequestSpec]]:
    if callable(requests):
        for i in itertools.count():
            try:
                spec = requests(i)
            except (IndexError, StopIteration):
                return
            if spec is None:
                return
            yield i, spec
    else:
        yield from enumerate(requests)


class _Feeder:
    """Hands closed-loop requests to workers on demand (in the parent process).

    Decides warm-up at hand-out time, enforces ``num_requests``, keeps a session on one worker,
    and stops at the deadline.
    """

    def __init__(self, spec: LevelSpec, requests, n_workers: int):
        self._it = _source(requests)
        self.spec = spec
        self.n_workers = n_workers
        self.pending = [deque() for _ in range(n_workers)]
        self.owner: dict[str, int] = {}
        self.handed = 0
        self.measured = 0
        self.t0_ns: int | None = None
        self.first_measured_ns: int | None = None
        self.exhausted = False  # the source ran out
        self.closed = False
        self.lock = threading.Lock()

    def _warm(self, now: int) -> bool | str:
        """``True`` (warm-up by count), ``"time"`` (handed out during the timed warm-up: the
        worker gives it back if it could only send it after the warm-up ended) or ``False``."""
        s = self.spec
        if s.warmup_requests and self.handed < s.warmup_requests:
            return True
        if s.warmup_s and self.t0_ns is not None and now < self.t0_ns + int(s.warmup_s * 1e9):
            return "time"
        return False

    def give_back(self, worker: int, items: list) -> None:
        """Requests handed out as timed warm-up that a worker could not send before the warm-up
        ended: they go back to the front of its queue and are decided again when taken (so a
        request sent after the warm-up is measured, whatever the prefetch held)."""
        with self.lock:
            for idx, spec in reversed(items):
                self.pending[worker].appendleft((idx, spec))
                self.handed -= 1

    def _limit_reached(self) -> bool:
        n = self.spec.num_requests
        return n is not None and self.measured >= n

    def take(self, worker: int, n: int) -> tuple[list[Item], bool]:
        """Up to ``n`` items for ``worker``; the flag says no more will ever come."""
        with self.lock:
            out: list[Item] = []
            pend = self.pending[worker]
            scanned = 0
            while len(out) < n and not self.closed:
                if pend:
                    idx, spec = pend.popleft()
                else:
                    if self.exhausted or scanned > 64 + 4 * n:
                        break
                    try:
                        idx, spec = next(self._it)
                    except StopIteration:
                        self.exhausted = True
                        break
                    scanned += 1
                    sid = spec.session_id
                    if sid is not None:
                        w = self.owner.setdefault(sid, worker)
                        if w != worker:
                            self.pending[w].append((idx, spec))
                            continue
                now = now_ns()
                warm = self._warm(now)
                if not warm and self._limit_reached():
                    self.closed = True
                    break
                self.handed += 1
                if not warm:
                    self.measured += 1
                    if self.first_measured_ns is None:
                        self.first_measured_ns = now
                out.append((idx, spec, warm))
            end = self.closed or self._limit_reached() or (self.exhausted and not pend)
            return out, end

    def close(self) -> None:
        with self.lock:
            self.closed = True


def _open_arrivals(spec: LevelSpec, requests, n_workers: int) -> tuple[list[list], float | None, bool]:
    """Materialize the open-loop/trace arrivals and partition them over workers.

    Returns (per-worker arrival lists, target rate (trace: from the schedule), source exhausted
    early)."""
    src = _source(requests)
    arrivals: list[tuple[int, float, RequestSpec, bool]] = []
    exhausted = False
    wr = spec.warmup_requests or 0
    ws = spec.warmup_s or 0.0
    if spec.mode == "rate":
        if spec.num_requests is None and spec.duration_s is None:
            raise UserError("an open-loop level needs --num-requests or --duration")
        if spec.num_requests is None and math.isinf(spec.value):
            from wattbench.load.schedule import INF_NEEDS_N

            raise UserError(INF_NEEDS_N)
        warm_end: float | None = None  # where the measured phase starts
        measured = 0
        for off in iter_arrival_times(spec.value, spec.arrival, spec.seed):
            warm = len(arrivals) < wr or off < ws
            if not warm:
                if warm_end is None:
                    warm_end = ws if not wr else off
                if spec.num_requests is not None and measured >= spec.num_requests:
                    break
                if spec.duration_s is not None and off >= warm_end + spec.duration_s:
                    break
            try:
                idx, rs = next(src)
            except StopIteration:
                exhausted = True
                break
            arrivals.append((idx, off, rs, warm))
            if not warm:
                measured += 1
        target_rate = spec.value
    else:  # trace
        if not spec.speedup > 0:
            raise UserError(f"--speedup must be positive, got {spec.speedup!r}")
        items = []
        for idx, rs in src:
            if rs.arrival_s is None:
                raise UserError(
                    f"trace request {idx} has no arrival time; a trace needs an arrival offset per request"
                )
            items.append((idx, rs.arrival_s / spec.speedup, rs))
        items.sort(key=lambda x: x[1])
        base = items[0][1] if items else 0.0
        measured = 0
        warm_end = None
        for k, (idx, off, rs) in enumerate(items):
            off -= base
            warm = k < wr or off < ws
            if not warm:
                if warm_end is None:
                    warm_end = ws if not wr else off
                if spec.num_requests is not None and measured >= spec.num_requests:
                    break
                if spec.duration_s is not None and off >= warm_end + spec.duration_s:
                    break
                measured += 1
            arrivals.append((idx, off, rs, warm))
        span = arrivals[-1][1] - arrivals[0][1] if len(arrivals) > 1 else 0.0
        target_rate = (len(arrivals) - 1) / span if span > 0 else None
    parts: list[list] = [[] for _ in range(n_workers)]
    owner: dict[str, int] = {}
    for k, a in enumerate(arrivals):
        w = k % n_workers
        sid = a[2].session_id
        if sid is not None:
            w = owner.setdefault(sid, w)
        parts[w].append(a)
    return parts, target_rate, exhausted


# ------------------------------------------------------------------------------------ worker


async def _sleep_until(when_ns: int) -> None:
    """Sleep until ``when_ns`` on the monotonic clock, never returning early: uvloop's timers
    have whole-millisecond resolution and wake up to 1 ms early (measured: most 2.4 ms sleeps),
    so sleep again for what is left."""
    while (left := when_ns - now_ns()) > 0:
        await asyncio.sleep(left / 1e9)


class _Session:
    __slots__ = ("messages", "text", "tail", "last_end_ns", "target")

    def __init__(self) -> None:
        self.target = None
        self.messages: list[dict] = []
        self.text = ""
        self.tail: asyncio.Future | None = None
        self.last_end_ns: int | None = None


class _Worker:
    """One worker's event-loop side. ``link`` connects it to the parent (in-process or pipe)."""

    def __init__(self, plan: _Plan, link):
        self.plan = plan
        self.link = link
        self.records: list[RequestRecord] = []
        self.done = 0
        self.failed = 0
        self.output_tokens = 0
        self.stop_ns: int | None = None  # when this worker stopped sending
        self.sessions: dict[str, _Session] = {}
        self.tasks: set[asyncio.Task] = set()
        self.client = None
        self.loop_lag_ns: list[int] = []
        self.watches: dict[str, LivenessWatch] = {}
        self.down: TargetDown | None = None  # the target stopped answering: this worker stopped sending

    async def _probe_loop_lag(self) -> None:
        """Sleep LOOP_PROBE_S at a time and record how late each wake-up is: the delay any
        socket read of this worker can suffer before it is stamped."""
        period = int(LOOP_PROBE_S * 1e9)
        lags = self.loop_lag_ns
        while True:
            due = now_ns() + period
            await asyncio.sleep(LOOP_PROBE_S)
            lags.append(max(0, now_ns() - due))

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
                st = self.sessions[sid] = _Session()
                st.target = target  # a session stays on the target of its first turn
            target = st.target
            prev = st.tail
            mine = asyncio.get_running_loop().create_future()
            st.tail = mine
            try:
                if prev is not None:
                    await prev
                if st.last_end_ns is not None and spec.think_time_s > 0:
                    await _sleep_until(st.last_end_ns + int(spec.think_time_s * 1e9))
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
        if not plan.targets:
            return plan.target
        return plan.targets[plan.routes[k]]

    def _with_history(self, spec: RequestSpec, st: _Session) -> RequestSpec:
        if (st.target or self.plan.target).api == "chat":
            own = spec.messages if spec.messages is not None else [{"role": "user", "content": spec.prompt or ""}]
            return dataclasses.replace(spec, messages=st.messages + list(own))
        return dataclasses.replace(spec, prompt=st.text + (spec.prompt or ""))

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    # -- closed loop
    async def _closed(self, t0_ns: int) -> None:
        plan = self.plan
        link = self.link
        stop_at = t0_ns + int(plan.stop_after_s * 1e9) if plan.stop_after_s is not None else None
        warm_end = t0_ns + int(plan.warmup_s * 1e9) if plan.warmup_s else None
        buf: deque = deque()
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
            return None

        async def next_item():
            while True:
                if stopped():
                    return no_more()
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
                    return no_more()
                await refill()
                if not buf and not state["end"]:
                    await asyncio.sleep(0.02)  # the parent had nothing for us yet (sessions)

        async def stream(target) -> None:
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

        async def capped(coro) -> None:
            try:
                await coro
            finally:
                cap.release()

        for k, (idx, off, spec, warm) in enumerate(self.plan.arrivals or ()):
            if link.stop.is_set():
                break
            when = t0_ns + int(off * 1e9)
            await _sleep_until(when)
            if cap is not None:
                if cap.locked():
                    # capped at --max-concurrency: the request waits for a slot, and its send lag
                    # (what the saturation guard judges) counts from when the slot freed
                    await cap.acquire()
                    when = max(when, now_ns())
                else:
                    await cap.acquire()
                self._spawn(capped(self._one(idx, spec, when, warm, self._target_of(k))))
                continue
            self._spawn(self._one(idx, spec, when, warm, self._target_of(k)))
        self.stop_ns = now_ns()
        while self.tasks:
            await asyncio.gather(*list(self.tasks), return_exceptions=False)

    async def run(self, t0_ns: int) -> bool:
        """Run until the level's bound; returns True when it was cancelled (interrupt)."""
        from wattbench.load.client import StreamClient

        plan = self.plan
        conc = plan.concurrency if plan.mode == "concurrency" else len(plan.arrivals or ())
        async with StreamClient(plan.target, conc) as client:
            self.client = client
            await _sleep_until(t0_ns)
            body = self._closed(t0_ns) if plan.mode == "concurrency" else self._open(t0_ns)
            main = asyncio.ensure_future(body)
            probe = asyncio.ensure_future(self._probe_loop_lag())
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


# ------------------------------------------------------------------------------------ links


class _LocalLink:
    """The worker runs in the calling process: the feeder is called directly."""

    def __init__(self, feeder: _Feeder | None, worker: int):
        self.feeder = feeder
        self.worker = worker
        self.stop = asyncio.Event()
        self.cancel = asyncio.Event()

    async def fetch(self, n: int) -> tuple[list[Item], bool]:
        return self.feeder.take(self.worker, n)

    def give_back(self, items: list) -> None:
        self.feeder.give_back(self.worker, items)


class _PipeLink:
    """The worker is a subprocess: requests come from the parent over a pipe."""

    def __init__(self, conn, loop: asyncio.AbstractEventLoop):
        self.conn = conn
        self.loop = loop
        self.stop = asyncio.Event()
        self.cancel = asyncio.Event()
        self._waiting: asyncio.Future | None = None
        loop.add_reader(conn.fileno(), self._readable)
        # uvloop (libuv's uv_poll) switches a watched fd to non-blocking; a Connection needs a
        # blocking fd, or sending a large batch of records fails half-way with EAGAIN.
        os.set_blocking(conn.fileno(), True)

    def _readable(self) -> None:
        try:
            while self.conn.poll():
                msg = self.conn.recv()
                kind = msg[0]
                if kind == "items":
                    if self._waiting is not None and not self._waiting.done():
                        self._waiting.set_result((msg[1], msg[2]))
                elif kind == "stop":
                    self.stop.set()
                elif kind == "cancel":
                    self.stop.set()
                    self.cancel.set()
        except (EOFError, OSError):  # the parent is gone
            self.loop.remove_reader(self.conn.fileno())
            self.stop.set()
            self.cancel.set()
            if self._waiting is not None and not self._waiting.done():
                self._waiting.set_result(([], True))

    async def fetch(self, n: int) -> tuple[list[Item], bool]:
        self._waiting = self.loop.create_future()
        self.conn.send(("need", n))
        return await self._waiting

    def give_back(self, items: list) -> None:
        self.conn.send(("back", items))  # before any later "need" on the same pipe

    def close(self) -> None:
        try:
            self.loop.remove_reader(self.conn.fileno())
        except (ValueError, OSError):
            pass


def _cpu_s_process() -> float:
    import psutil

    t = psutil.Process().cpu_times()
    return t.user + t.system


def _worker_process(plan: _Plan, conn) -> None:
    """Entry point of a worker subprocess (spawned)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides
    from wattbench.load.client import new_event_loop

    loop = new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        conn.send(("ready", now_ns()))
        msg = conn.recv()
        if msg[0] != "start":
            return
        t0_ns = msg[1]
        link = _PipeLink(conn, loop)
        worker = _Worker(plan, link)

        async def progress() -> None:
            while True:
                await asyncio.sleep(plan.progress_period_s)
                conn.send(("progress", worker.done, worker.failed, worker.output_tokens))

        async def main() -> bool:
            ptask = asyncio.ensure_future(progress())
            try:
                return await worker.run(t0_ns)
            finally:
                ptask.cancel()

        cpu0, wall0 = _cpu_s_process(), now_ns()
        interrupted = loop.run_until_complete(main())
        cpu_pct = 100.0 * (_cpu_s_process() - cpu0) / max(1e-9, (now_ns() - wall0) / 1e9)
        link.close()
        recs = worker.records
        for k in range(0, len(recs), 2000):
            conn.send(("records", [r.model_dump() for r in recs[k : k + 2000]]))
        conn.send(("result", cpu_pct, worker.stop_ns, interrupted, worker.done, worker.failed,
                   worker.output_tokens, worker.loop_lag_ns, worker.down))
    except (EOFError, BrokenPipeError):  # the parent is gone: nothing to report to
        pass
    except BaseException:  # report the bug to the parent, which raises it
        try:
            conn.send(("error", traceback.format_exc()))
        except (OSError, EOFError):
            pass
    finally:
        _cancel_pending(loop)
        loop.close()
        conn.close()


# ------------------------------------------------------------------------------------ parent


@dataclass
class _WorkerResult:
    records: list[RequestRecord]
    cpu_pct: float | None
    stop_ns: int | None
    interrupted: bool
    loop_lag_ns: list[int] = dataclasses.field(default_factory=list)
    down: TargetDown | None = None  # the target this worker saw stop answering


def validate_spec(spec: LevelSpec) -> None:
    """Refuse a level the generator cannot run (UserError naming the flag); the runner calls this
    for every planned level before it writes anything."""
    _validate(spec)


def _validate(spec: LevelSpec) -> None:
    if spec.mode == "concurrency" and not (spec.value >= 1 and float(spec.value).is_integer()):
        raise UserError(f"--concurrency must be a whole number >= 1, got {spec.value!r}")
    if spec.mode == "rate":
        if not (not math.isnan(spec.value) and spec.value > 0):
            raise UserError(f"--rate must be a positive number of requests/s (or inf), got {spec.value!r}")
        parse_arrival(spec.arrival)
    if spec.num_requests is not None and spec.num_requests < 1:
        raise UserError(f"--num-requests must be >= 1, got {spec.num_requests}")
    if spec.duration_s is not None and not spec.duration_s > 0:
        raise UserError(f"--duration must be positive, got {spec.duration_s!r}")
    if spec.workers is not None and spec.workers < 1:
        raise UserError(f"--workers must be >= 1, got {spec.workers}")


def _route(route: Callable[[int], int], k: int, n: int) -> int:
    i = route(k)
    if not (isinstance(i, int) and 0 <= i < n):
        raise WattbenchError(f"target route gave {i!r} for {k}; expected an index in 0..{n - 1}")
    return i


def run_level(
    spec: LevelSpec,
    target: TargetSpec | Sequence[TargetSpec],
    requests: Iterable[RequestSpec] | Callable[[int], RequestSpec],
    on_progress: Callable[[dict], None] | None = None,
    route: Callable[[int], int] | None = None,
) -> LevelOutcome:
    """Run one level and return its records, window and load statistics (see module doc).

    ``target`` may be a list of targets (replicas, or a load balancer and its backends): then
    ``route(k)`` gives the index in that list of closed-loop stream ``k`` (numbered over all
    workers) or of the open-loop/trace request with index ``k`` (default: ``k % len(targets)``,
    round robin); a session stays on the target of its first turn; every record carries
    ``target`` = the base URL it went to. ``wattbench.load.targets`` builds weighted routes.
    """
    _validate(spec)
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
    n_workers = spec.workers or auto_workers(spec)
    if spec.mode == "concurrency":
        n_workers = min(n_workers, int(spec.value))
        if spec.num_requests is None and spec.duration_s is None and callable(requests):
            raise UserError("a closed-loop level needs --num-requests or --duration")
    feeder: _Feeder | None = None
    target_rate = None
    exhausted_early = False
    plans: list[_Plan] = []
    if spec.mode == "concurrency":
        feeder = _Feeder(spec, requests, n_workers)
        conc = int(spec.value)
        stop_after = None
        if spec.duration_s is not None and not spec.warmup_requests:
            stop_after = (spec.warmup_s or 0.0) + spec.duration_s
        first = 0
        for w in range(n_workers):
            share = conc // n_workers + (1 if w < conc % n_workers else 0)
            plans.append(_Plan(w, spec.index, spec.mode, target, concurrency=share, stop_after_s=stop_after,
                               warmup_s=spec.warmup_s))
            if targets:
                plans[-1].targets = targets
                plans[-1].routes = [_route(route, first + k, len(targets)) for k in range(share)]
            first += share
    else:
        cap = spec.max_in_flight
        if cap is not None:
            if cap < 1:
                raise UserError(f"--max-concurrency must be >= 1, got {cap}")
            n_workers = min(n_workers, cap)
        parts, target_rate, exhausted_early = _open_arrivals(spec, requests, n_workers)
        plans = [_Plan(w, spec.index, spec.mode, target, arrivals=parts[w],
                       max_in_flight=None if cap is None else cap // n_workers + (1 if w < cap % n_workers else 0))
                 for w in range(n_workers)]
        if targets:
            for p in plans:
                p.targets = targets
                p.routes = [_route(route, a[0], len(targets)) for a in p.arrivals]
    if n_workers == 1:
        results, t0_ns, interrupted, stop_reason = _run_inprocess(plans[0], feeder, spec, on_progress)
    else:
        results, t0_ns, interrupted, stop_reason = _run_subprocesses(plans, feeder, spec, on_progress)
    if feeder is not None and spec.num_requests is not None and feeder.exhausted:
        exhausted_early = feeder.measured < spec.num_requests
    outcome = _assemble(spec, results, t0_ns, target_rate, n_workers)
    if interrupted:
        outcome.stopped_early = "interrupted"
        err = Interrupted(f"level {spec.label} interrupted; {len(outcome.records)} completed requests kept")
        err.outcome = outcome
        raise err
    downs = [r.down for r in results if r.down is not None]
    if downs:
        first = min(downs, key=lambda d: d.first_failure_ns)
        outcome.target_down = first.to_dict(t0_ns)
        outcome.target_down["text"] = first.text(t0_ns)
        outcome.stopped_early = "target stopped answering"
    elif stop_reason:
        outcome.stopped_early = stop_reason
    elif exhausted_early:
        outcome.stopped_early = "requests_exhausted"
    return outcome


def _progress_dict(done: int, failed: int, out_tok: int, t0_ns: int) -> dict:
    return {
        "done": done,
        "failed": failed,
        "output_tokens": out_tok,
        "elapsed_s": max(0.0, (now_ns() - t0_ns) / 1e9),
    }


def _deadline_ns(spec: LevelSpec, feeder: _Feeder | None, t0_ns: int) -> int | None:
    """Closed loop: when to stop sending (None: not known yet / no duration bound)."""
    if feeder is None or spec.duration_s is None:
        return None
    if spec.warmup_requests:
        if feeder.first_measured_ns is None:
            return None
        return feeder.first_measured_ns + int(spec.duration_s * 1e9)
    return t0_ns + int(((spec.warmup_s or 0.0) + spec.duration_s) * 1e9)


def _run_loop(coro_fn, fast: bool = True):
    """Run ``coro_fn(loop)`` on a fresh loop (uvloop when ``fast``); SIGINT sets the returned flag
    instead of raising."""
    from wattbench.load.client import new_event_loop

    loop = new_event_loop() if fast else asyncio.new_event_loop()
    interrupted = threading.Event()
    # A plain Python handler, not loop.add_signal_handler: the coordinating coroutines poll the
    # flag every 50 ms, and no loop-owned signal fd is left behind between levels.
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGINT, lambda signum, frame: interrupted.set())
    try:
        return loop.run_until_complete(coro_fn(loop, interrupted)), interrupted.is_set()
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
        _cancel_pending(loop)
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


def _cancel_pending(loop) -> None:
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


class _SaturationWatch:
    """Open loop and trace replay: the backlog (requests whose scheduled time has passed minus
    those finished) sampled every 100 ms; once it grows without bound
    (:func:`wattbench.load.saturation.is_oversaturated` over the samples, checked each second), the
    level stops sending early and drains. Closed loops never trip it (their backlog is capped)."""

    PERIOD_NS = 100_000_000

    def __init__(self, spec: LevelSpec, plans: list[_Plan], t0_ns: int):
        import numpy as np

        self.enabled = spec.mode in ("rate", "trace") and spec.stop_when_oversaturated
        offs = [a[1] for p in plans for a in (p.arrivals or ())]
        self.offsets = np.sort(np.asarray(offs, dtype=float))
        self.t0_ns = t0_ns
        self.times: list[float] = []
        self.backlog: list[float] = []
        self.last_ns = 0
        self.last_check_ns = 0
        self.reason: str | None = None

    def update(self, finished: int) -> str | None:
        """Feed the number of finished requests; returns the stop reason once, when it trips."""
        if not self.enabled or self.reason is not None:
            return None
        now = now_ns()
        if now - self.last_ns < self.PERIOD_NS or now < self.t0_ns:
            return None
        import numpy as np

        self.last_ns = now
        elapsed = (now - self.t0_ns) / 1e9
        sent = int(np.searchsorted(self.offsets, elapsed, side="right"))
        if sent >= self.offsets.size:  # everything sent: nothing left to stop
            self.enabled = False
            return None
        self.times.append(elapsed)
        self.backlog.append(float(sent - finished))
        if now - self.last_check_ns >= 1_000_000_000 and len(self.times) >= 40:
            from wattbench.load.saturation import is_oversaturated

            self.last_check_ns = now
            verdict = is_oversaturated(self.times, self.backlog)
            if verdict.oversaturated:
                self.reason = f"over-saturated after {elapsed:.1f} s: {verdict.reason}"
                return self.reason
        return None


def _run_inprocess(plan: _Plan, feeder, spec: LevelSpec, on_progress):
    async def go(loop, interrupted: threading.Event):
        link = _LocalLink(feeder, 0)
        worker = _Worker(plan, link)
        t0_ns = now_ns() + 1_000_000
        if feeder is not None:
            feeder.t0_ns = t0_ns
        thread_cpu0, wall0 = time.thread_time_ns(), now_ns()
        task = asyncio.ensure_future(worker.run(t0_ns))
        watch = _SaturationWatch(spec, [plan], t0_ns)
        last = 0
        while not task.done():
            await asyncio.wait({task}, timeout=0.05)
            if interrupted.is_set() and not link.cancel.is_set():
                link.stop.set()
                link.cancel.set()
            if watch.update(worker.done + worker.failed) and not link.stop.is_set():
                link.stop.set()
                stops.append(watch.reason)
            dl = _deadline_ns(spec, feeder, t0_ns)
            if dl is not None and now_ns() >= dl and not link.stop.is_set():
                feeder.close()
                link.stop.set()
            if on_progress is not None and now_ns() - last >= PROGRESS_PERIOD_S * 1e9:
                last = now_ns()
                on_progress(_progress_dict(worker.done, worker.failed, worker.output_tokens, t0_ns))
        was_cancelled = task.result()
        cpu_pct = 100.0 * (time.thread_time_ns() - thread_cpu0) / max(1, now_ns() - wall0)
        if on_progress is not None:
            on_progress(_progress_dict(worker.done, worker.failed, worker.output_tokens, t0_ns))
        return [_WorkerResult(worker.records, cpu_pct, worker.stop_ns, was_cancelled, worker.loop_lag_ns,
                              worker.down)], t0_ns

    stops: list[str] = []
    (results, t0_ns), interrupted = _run_loop(go)
    return results, t0_ns, interrupted or any(r.interrupted for r in results), (stops[0] if stops else None)


def _run_subprocesses(plans: list[_Plan], feeder, spec: LevelSpec, on_progress):
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    conns, procs = [], []
    for plan in plans:
        parent_conn, child_conn = ctx.Pipe(duplex=True)
        p = ctx.Process(target=_worker_process, args=(plan, child_conn), daemon=True,
                        name=f"wattbench-worker-{plan.worker}")
        p.start()
        child_conn.close()
        conns.append(parent_conn)
        procs.append(p)
    try:
        return _coordinate(plans, conns, procs, feeder, spec, on_progress)
    finally:
        for c in conns:
            c.close()
        for p in procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join(timeout=5)


def _coordinate(plans, conns, procs, feeder, spec: LevelSpec, on_progress):
    n = len(plans)
    # Wait for every worker to be ready (imports done), then give all the same t0.
    for w, c in enumerate(conns):
        if not c.poll(120):
            raise WattbenchError(f"load worker {w} did not start within 120 s")
        try:
            msg = c.recv()
        except EOFError:
            raise WattbenchError(
                f"load worker {w} exited while starting (a script that starts several workers "
                "must guard its entry point with `if __name__ == '__main__':`)"
            ) from None
        if msg[0] == "error":
            raise WattbenchError(f"load worker {w} failed to start:\n{msg[1]}")
    t0_ns = now_ns() + START_MARGIN_NS
    if feeder is not None:
        feeder.t0_ns = t0_ns
    for c in conns:
        c.send(("start", t0_ns))

    async def go(loop, interrupted: threading.Event):
        records: list[list] = [[] for _ in range(n)]
        results: list[_WorkerResult | None] = [None] * n
        counts = [(0, 0, 0)] * n
        finished = loop.create_future()
        errors: list[str] = []
        stopped = [False]

        def broadcast(msg) -> None:
            for w in range(n):
                if results[w] is None:
                    try:
                        conns[w].send(msg)
                    except (OSError, BrokenPipeError):
                        pass

        def on_msg(w: int) -> None:
            c = conns[w]
            try:
                while c.poll():
                    msg = c.recv()
                    kind = msg[0]
                    if kind == "need":
                        items, end = feeder.take(w, msg[1]) if feeder is not None else ([], True)
                        c.send(("items", items, end))
                    elif kind == "back":
                        feeder.give_back(w, msg[1])
                    elif kind == "progress":
                        counts[w] = msg[1:4]
                    elif kind == "records":
                        records[w].extend(msg[1])
                    elif kind == "result":
                        _, cpu, stop_ns, intr, d, f, o, lags, down = msg
                        counts[w] = (d, f, o)
                        results[w] = _WorkerResult(
                            [RequestRecord.model_construct(**r) for r in records[w]], cpu, stop_ns, intr, lags, down
                        )
                        loop.remove_reader(c.fileno())
                        break
                    elif kind == "error":
                        errors.append(msg[1])
                        results[w] = _WorkerResult([], None, None, True)
                        loop.remove_reader(c.fileno())
                        break
            except (EOFError, OSError) as e:
                loop.remove_reader(c.fileno())
                if results[w] is None:
                    errors.append(
                        f"load worker {w} exited unexpectedly (exit code {procs[w].exitcode}, {e!r})"
                    )
                    results[w] = _WorkerResult([RequestRecord.model_construct(**r) for r in records[w]], None, None, True)
            if all(r is not None for r in results) and not finished.done():
                finished.set_result(None)

        for w, c in enumerate(conns):
            loop.add_reader(c.fileno(), on_msg, w)
            os.set_blocking(c.fileno(), True)  # see _PipeLink
        last = 0
        cancelled = False
        watch = _SaturationWatch(spec, plans, t0_ns)
        while not finished.done():
            await asyncio.wait({finished}, timeout=0.05)
            if interrupted.is_set() and not cancelled:
                cancelled = True
                broadcast(("cancel",))
            dl = _deadline_ns(spec, feeder, t0_ns)
            if dl is not None and now_ns() >= dl and not stopped[0]:
                stopped[0] = True
                feeder.close()
                broadcast(("stop",))
            if watch.update(sum(c[0] + c[1] for c in counts)) and not stopped[0]:
                stopped[0] = True
                stops.append(watch.reason)
                broadcast(("stop",))
            if on_progress is not None and now_ns() - last >= PROGRESS_PERIOD_S * 1e9:
                last = now_ns()
                on_progress(_progress_dict(*(sum(x) for x in zip(*counts)), t0_ns))
            if not finished.done() and not any(p.is_alive() for p in procs):
                await asyncio.sleep(0.2)
                for w in range(n):
                    on_msg(w)
                if not finished.done():
                    errors.append("load workers exited without a result")
                    break
        if on_progress is not None:
            on_progress(_progress_dict(*(sum(x) for x in zip(*counts)), t0_ns))
        if errors:
            raise WattbenchError("load worker failed:\n" + "\n".join(errors))
        return results

    stops: list[str] = []
    results, interrupted = _run_loop(go, fast=False)  # coordination only: no need for uvloop
    return results, t0_ns, interrupted or any(r.interrupted for r in results), (stops[0] if stops else None)


# ---------------------------------------------------------------------------------- outcome


def _mean_in_flight(records: list[RequestRecord], start_ns: int, end_ns: int) -> float | None:
    if end_ns <= start_ns or not records:
        return None
    total = 0
    for r in records:
        e = request_end_ns(r)
        if e is None:
            continue
        a, b = max(r.sent_ns, start_ns), min(e, end_ns)
        if b > a:
            total += b - a
    return total / (end_ns - start_ns)


def _assemble(spec: LevelSpec, results: list[_WorkerResult], t0_ns: int, target_rate, n_workers: int) -> LevelOutcome:
    records = sorted((r for res in results for r in res.records), key=lambda r: r.sent_ns)
    measured = [r for r in records if not r.warmup]
    if measured:
        start_ns = min(r.sent_ns for r in measured)
        end_ns = max(request_end_ns(r) or r.sent_ns for r in measured)
    else:
        start_ns = end_ns = t0_ns
    # Steady window: the one rule (accounting/steady.py), over every stream (warm-up ones load the
    # server too), never before the first measured send.
    steady_start = steady_end = None
    if measured:
        from wattbench.accounting.steady import steady_window

        sw = steady_window([(r.sent_ns, request_end_ns(r)) for r in records], spec.mode,
                           int(spec.value) if spec.mode == "concurrency" else None, start_ns=start_ns)
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
    if len(measured) > 1:
        if spec.mode == "concurrency":
            dur = (end_ns - start_ns) / 1e9
            load.achieved_rate_rps = sum(1 for r in measured if r.ok) / dur if dur > 0 else None
        else:
            # From the first request's SCHEDULED time to the last actual send: a client that falls
            # behind and then sends in bursts reads as slow, not as fast.
            first = min((r.scheduled_ns if r.scheduled_ns is not None else r.sent_ns) for r in measured)
            span = (max(r.sent_ns for r in measured) - first) / 1e9
            load.achieved_rate_rps = (len(measured) - 1) / span if span > 0 else None
    load.mean_in_flight = _mean_in_flight(records, start_ns, end_ns)
    lags = [(r.sent_ns - r.scheduled_ns) / 1e6 for r in measured if r.scheduled_ns is not None]
    load.send_lag_ms = stats(lags)
    cpus = [res.cpu_pct for res in results if res.cpu_pct is not None]
    load.client_cpu_pct = max(cpus) if cpus else None
    load.client_cpu_pct_per_worker = cpus
    load.client_loop_lag_ms = stats([x / 1e6 for res in results for x in res.loop_lag_ns])
    stops = [res.stop_ns for res in results if res.stop_ns is not None]
    if stops and records:
        last_end = max(request_end_ns(r) or r.sent_ns for r in records)
        load.drain_s = max(0.0, (last_end - max(stops)) / 1e9)
    # Saturation guard: the client's own signals only (load/saturation.py).
    reasons = client_saturation_reasons(load, target_rate)
    load.saturated = bool(reasons)
    load.saturation_reasons = reasons
    return LevelOutcome(
        records=records,
        start_ns=start_ns,
        end_ns=end_ns,
        steady_start_ns=steady_start,
        steady_end_ns=steady_end,
        load=load,
    )
