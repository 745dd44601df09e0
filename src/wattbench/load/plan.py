"""A level's plan: how many workers, what each one does, and where closed-loop requests come from.

- ``auto_workers``: the worker rule (``STREAMS_PER_WORKER`` streams or ``ARRIVALS_PER_WORKER_RPS``
  arrivals/s per worker, never more than the host's cores).
- ``split_count``: the one rule for sharing a count (streams, requests, a concurrency cap) over
  workers or Ray actors: ``total // n`` each, the remainder to the first ones.
- ``WorkerPlan``: what one worker does (picklable; sent to a worker process or a Ray actor).
- ``Feeder``: hands closed-loop requests to workers on demand (warm-up decided at hand-out); the
  requests are drawn from the workload ahead of need, before the level starts and then by a
  drawing thread, never on the coordinating event loop (``Feeder.prefill``).
- ``open_arrivals``: the open-loop / trace arrivals, materialized and interleaved over workers.
- ``build_plans``: a level spec → one ``WorkerPlan`` per worker (and the feeder / target rate).
- ``validate_spec``: refuse a level the generator cannot run, naming the flag; ``capacity_problem``:
  a level the machine cannot hold (memory per request in flight, per worker, per held arrival; open
  files per worker), measured by ``benches/inflight_memory.py``.
"""

from __future__ import annotations

import itertools
import math
import os
import threading
from collections import deque
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Union

from wattbench.core.clock import now_ns
from wattbench.core.errors import UserError, WattbenchError
from wattbench.load.schedule import iter_arrival_times, parse_arrival
from wattbench.core.load_types import LevelSpec
from wattbench.core.target import TargetSpec
from wattbench.workload.base import RequestSpec
from wattbench.load.schedule import INF_NEEDS_N

# Auto worker rule (docs/benchmarks.md, "Client overhead"): one worker keeps its timestamps
# within 1 ms up to ~256 concurrent streams at ~20 ms inter-token latency; open loop, one worker
# per 100 requests/s of target rate.
STREAMS_PER_WORKER = 256
ARRIVALS_PER_WORKER_RPS = 100.0
PROGRESS_PERIOD_S = 0.2  # on_progress at most 5 times/s
# A closed loop's requests are drawn before the level starts (``Feeder.prefill``): all the level
# takes when its size is known, up to PREDRAW_MAX; past that a drawing thread keeps at least
# ``lookahead`` drawn ahead. Drawing on the event loop stalled every stream: a synthetic workload
# with --tokenizer builds its prompts 64 at a time, 37 ms of wall time a batch on the 2-core
# machine beside a loaded host (2026-12-07), and in that time no finished stream sent its next
# request and no arriving token was read.
PREDRAW_MAX = 4096
LOOKAHEAD_MIN = 128

Item = tuple[int, RequestSpec, "bool | str"]  # (index, RequestSpec, warmup: bool | "time")
Drawn = tuple[int, RequestSpec]  # a request of the source: (index, RequestSpec), warm-up not decided yet
Arrival = tuple[int, float, RequestSpec, bool]  # an open-loop arrival: (index, offset_s, RequestSpec, warmup)
# where a level's requests come from: a sequence, or request ``i`` by index (None, IndexError or
# StopIteration: no more)
Requests = Union[Iterable[RequestSpec], Callable[[int], "RequestSpec | None"]]


def split_count(total: int, n: int) -> list[int]:
    """``total`` shared over ``n`` parts: ``total // n`` each, the remainder to the first ones."""
    return [total // n + (1 if k < total % n else 0) for k in range(n)]


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
class WorkerPlan:
    """What one worker does (picklable)."""

    worker: int
    level: int
    mode: str
    target: TargetSpec
    concurrency: int = 0  # closed loop
    arrivals: list[Arrival] | None = None  # open loop: [(index, offset_s, spec, warmup)] sorted by offset
    max_in_flight: int | None = None  # open loop: this worker's share of --max-concurrency
    stop_after_s: float | None = None  # closed loop: stop sending at t0 + this
    warmup_s: float | None = None  # closed loop: a request sent after t0 + this is measured
    progress_period_s: float = PROGRESS_PERIOD_S
    # several targets: ``routes[k]`` is the index in ``targets`` of this worker's stream k (closed
    # loop) or arrival k (open loop); records then carry ``target`` = the base URL
    targets: list[TargetSpec] | None = None
    routes: list[int] | None = None


def request_source(requests: Requests) -> Iterator[Drawn]:
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


class Feeder:
    """Hands closed-loop requests to workers on demand (in the parent process).

    Decides warm-up at hand-out time, enforces ``num_requests``, keeps a session on one worker,
    and stops at the deadline.
    """

    def __init__(self, spec: LevelSpec, requests: Requests, n_workers: int):
        self._it = request_source(requests)
        # drawn from the source ahead of need (prefill, the drawing thread); ``_source_lock``: one
        # reader of the source at a time (a generator cannot run in two threads at once)
        self.drawn: deque[Drawn] = deque()
        self._source_lock = threading.Lock()
        self._source_done = False
        self._source_error: BaseException | None = None
        self.lookahead = max(LOOKAHEAD_MIN, 2 * int(spec.value))
        self._want = threading.Event()
        self._drawer: threading.Thread | None = None
        self.spec = spec
        self.n_workers = n_workers
        self.pending: list[deque[Drawn]] = [deque() for _ in range(n_workers)]
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

    def give_back(self, worker: int, items: list[Drawn]) -> None:
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
                        idx, spec = self._next_drawn()
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
        self._want.set()  # the drawing thread sees the feeder closed and ends

    # -- drawing ahead of need

    def prefill(self) -> None:
        """Before the level starts: draw what it will take when that is known (``num_requests`` plus
        the warm-up requests and one round of streams), all of it up to ``PREDRAW_MAX``. Past that,
        or when the level's size is not known (``--duration``, a timed warm-up), draw ``lookahead``
        (or ``PREDRAW_MAX``) and start the drawing thread that keeps ``lookahead`` drawn ahead of the
        hand-outs. A source that raises stops the drawing; the error is raised to the caller of
        ``take`` once what was drawn before it is handed out."""
        s = self.spec
        need = None
        if s.num_requests is not None:
            need = s.num_requests + (s.warmup_requests or 0) + int(s.value)
        if need is not None and need <= PREDRAW_MAX and not s.warmup_s:
            self._draw_to(need)  # everything the level takes, drawn before it starts
            return
        self._draw_to(min(need, PREDRAW_MAX) if need is not None else self.lookahead)
        if not self._source_done:
            self._drawer = threading.Thread(target=self._draw_loop, name="wattbench-feeder", daemon=True)
            self._drawer.start()

    def finish(self) -> None:
        """The level ended: stop the drawing thread (what it drew and nobody took is dropped)."""
        self.close()
        if self._drawer is not None:
            self._drawer.join(timeout=30)
            self._drawer = None

    def _draw_to(self, n: int) -> None:
        with self._source_lock:
            while len(self.drawn) < n and not self._source_done and not self.closed:
                try:
                    self.drawn.append(next(self._it))
                except StopIteration:
                    self._source_done = True
                except Exception as e:  # noqa: BLE001 - raised to take's caller in its turn
                    self._source_error = e
                    self._source_done = True

    def _draw_loop(self) -> None:
        while not self.closed and not self._source_done:
            self._want.wait()
            self._want.clear()
            self._draw_to(self.lookahead)

    def _next_drawn(self) -> Drawn:
        """The next request of the source, from those drawn ahead (drawn here, on the caller's
        thread, only when the drawing fell behind or there is none: ``prefill`` not called)."""
        if not self.drawn:
            self._draw_to(1)
        if len(self.drawn) <= self.lookahead // 2:
            self._want.set()
        if self.drawn:
            return self.drawn.popleft()
        if self._source_error is not None:
            err, self._source_error = self._source_error, None
            raise err
        raise StopIteration


def open_arrivals(spec: LevelSpec, requests: Requests, n_workers: int) -> tuple[list[list[Arrival]], float | None, bool]:
    """Materialize the open-loop/trace arrivals and partition them over workers.

    Returns (per-worker arrival lists, target rate (trace: from the schedule), source exhausted
    early)."""
    src = request_source(requests)
    arrivals: list[Arrival] = []
    exhausted = False
    wr = spec.warmup_requests or 0
    ws = spec.warmup_s or 0.0
    target_rate: float | None
    if spec.mode == "rate":
        if spec.num_requests is None and spec.duration_s is None:
            raise UserError("an open-loop level needs --num-requests or --duration")
        if spec.num_requests is None and math.isinf(spec.value):
            raise UserError(INF_NEEDS_N)
        warm_end: float | None = None  # where the measured phase starts
        measured = 0
        for off in iter_arrival_times(spec.value, spec.arrival, spec.seed):
            warm = len(arrivals) < wr or off < ws
            if not warm:
                warm_end, stop = _measured_phase(spec, warm_end, off, measured, ws, wr)
                if stop:
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
        items: list[tuple[int, float, RequestSpec]] = []
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
                warm_end, stop = _measured_phase(spec, warm_end, off, measured, ws, wr)
                if stop:
                    break
                measured += 1
            arrivals.append((idx, off, rs, warm))
        span = arrivals[-1][1] - arrivals[0][1] if len(arrivals) > 1 else 0.0
        target_rate = (len(arrivals) - 1) / span if span > 0 else None
    parts: list[list[Arrival]] = [[] for _ in range(n_workers)]
    owner: dict[str, int] = {}
    for k, a in enumerate(arrivals):
        w = k % n_workers
        sid = a[2].session_id
        if sid is not None:
            w = owner.setdefault(sid, w)
        parts[w].append(a)
    return parts, target_rate, exhausted


# ------------------------------------------------------------------------------------ worker



# ----------------------------------------------------------------------------------- capacity
#
# What a level costs the machine that generates the load (benches/inflight_memory.py, 2026-12-01,
# x86_64, Python 3.11, committed in benches/data/inflight_memory/inflight_memory.json): 25.9 KB of RSS per request
# in flight (2,048 streams in one worker; 23.6 KB at 256), 66 MiB per spawned worker process once it
# is ready, 1.8 KB per materialized open-loop arrival of the default 256-token workload. The bounds
# below round those up (a longer prompt or answer costs more); a level that needs more than
# ``MEMORY_SHARE`` of the memory available now, or more sockets per worker than a process may open
# (``ulimit -n`` less ``FD_RESERVE`` for the run's own files), is refused before the run starts.
# Before this check, ``-c 99999999999999999999`` filled 23.8 GB until the kernel's OOM killer ended
# the run, and ``-c 10000000`` hung.
BYTES_PER_IN_FLIGHT = 32 * 1024
BYTES_PER_WORKER = 96 * 1024 * 1024
BYTES_PER_ARRIVAL = 4 * 1024
MEMORY_SHARE = 0.5  # the server under test, the sampler and the rest of the host keep the other half
FD_RESERVE = 128  # files, pipes and sockets a process holds besides its streams


@dataclass(frozen=True)
class Machine:
    """What the load generator's host can hold: memory available now (bytes) and the open-file
    limit of one process; ``None`` where it cannot be read (then that bound is not checked)."""

    available_bytes: int | None
    fd_limit: int | None

    @classmethod
    def this(cls) -> "Machine":
        avail = None
        try:
            with open("/proc/meminfo") as f:
                for line in f:
                    if line.startswith("MemAvailable:"):
                        avail = int(line.split()[1]) * 1024
                        break
        except OSError:
            pass
        if avail is None:
            try:
                avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
            except (ValueError, OSError, AttributeError):
                avail = None
        try:
            import resource

            soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
            fds = None if soft == resource.RLIM_INFINITY else int(soft)
        except (ImportError, OSError, ValueError):
            fds = None
        return cls(avail, fds)


def _gib(n: float) -> str:
    return f"{n / 2**30:,.1f} GiB"


def capacity_problem(spec: LevelSpec, machine: Machine, flag_given: str | None = None) -> str | None:
    """Why ``machine`` cannot hold the level (one line naming the flag, or ``flag`` when given), or
    None. Counted: the requests in flight at once (closed loop: the concurrency; open loop:
    ``--max-concurrency``, or every request of ``--rate inf``), the spawned workers, the
    materialized open-loop arrivals."""
    if spec.mode == "concurrency":
        in_flight, flag = int(spec.value), f"--concurrency {int(spec.value)}"
    elif spec.mode == "rate" and math.isinf(spec.value):
        n = (spec.num_requests or 0) + (spec.warmup_requests or 0)
        in_flight = min(n, spec.max_in_flight) if spec.max_in_flight else n
        flag = f"--rate inf with --num-requests {spec.num_requests}"
    elif spec.mode == "rate" and spec.max_in_flight:
        in_flight, flag = spec.max_in_flight, f"--max-concurrency {spec.max_in_flight}"
    else:
        in_flight, flag = 0, ""
    flag = flag_given or flag
    arrivals = 0
    if spec.mode == "rate":
        if spec.num_requests is not None:
            arrivals = spec.num_requests + (spec.warmup_requests or 0)
        elif spec.duration_s is not None and not math.isinf(spec.value):
            arrivals = int(spec.value * (spec.duration_s + (spec.warmup_s or 0.0))) + (spec.warmup_requests or 0)
    workers = spec.workers or auto_workers(spec)
    if in_flight:
        workers = max(1, min(workers, in_flight))
    spawned = workers if workers > 1 else 0
    need = in_flight * BYTES_PER_IN_FLIGHT + spawned * BYTES_PER_WORKER + arrivals * BYTES_PER_ARRIVAL
    if machine.available_bytes is not None and need > MEMORY_SHARE * machine.available_bytes:
        parts = []
        if in_flight:
            parts.append(f"{in_flight:,} requests in flight ({flag}) x {BYTES_PER_IN_FLIGHT // 1024} KiB")
        if spawned:
            parts.append(f"{spawned:,} worker processes x {BYTES_PER_WORKER // 2**20} MiB")
        if arrivals:
            parts.append(f"{arrivals:,} open-loop arrivals held x {BYTES_PER_ARRIVAL // 1024} KiB")
        fix = ("lower --rate x --duration or --num-requests" if arrivals * BYTES_PER_ARRIVAL >= need / 2
               else "lower --workers" if spawned * BYTES_PER_WORKER >= need / 2
               else "lower it, or spread the load over machines with --ray")
        return (f"the level needs about {_gib(need)} of memory ({' + '.join(parts)}) and this machine has "
                f"{_gib(machine.available_bytes)} available, of which wattbench uses at most "
                f"{MEMORY_SHARE:.0%}; {fix}")
    if in_flight and machine.fd_limit is not None:
        per_worker = -(-in_flight // workers)
        room = machine.fd_limit - FD_RESERVE
        if per_worker > room:
            return (f"{flag} puts {per_worker:,} connections on each of {workers} load worker(s), but a process may "
                    f"open {machine.fd_limit:,} files (ulimit -n), {FD_RESERVE} of them kept for the run; raise "
                    "--workers or the limit (ulimit -n), or lower the load")
    return None


def validate_spec(spec: LevelSpec, machine: Machine | None = None, flag: str | None = None,
                  targets: int = 1, fix: str | None = None) -> None:
    """Refuse a level the generator cannot run (UserError naming the flag); the runner calls this
    for every planned level before it sends any request. ``machine``: the host's capacity
    (``Machine.this()`` when not given; ``capacity_problem``); ``flag``: how to name the level's
    load in that message when it is not the level's own flag (the top of a search, the
    prefill/decode pair's levels); ``targets``: how many targets the level's load is dealt over (a
    closed loop needs a stream for each); ``fix``: what to do about too few streams when raising
    the level's concurrency is not the user's to do (the pair's default with ``--rate``)."""
    if spec.mode == "concurrency" and not (spec.value >= 1 and float(spec.value).is_integer()):
        raise UserError(f"--concurrency must be a whole number >= 1, got {spec.value!r}")
    if spec.mode == "concurrency" and int(spec.value) < targets:
        raise UserError(
            f"{flag or f'--concurrency {int(spec.value)}'} is below the number of targets ({targets}): "
            f"some targets would get no stream; {fix or 'raise the concurrency or drop targets'}"
        )
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
    problem = capacity_problem(spec, machine if machine is not None else Machine.this(), flag)
    if problem:
        raise UserError(problem)


def _route(route: Callable[[int], int], k: int, n: int) -> int:
    i = route(k)
    if not (isinstance(i, int) and 0 <= i < n):
        raise WattbenchError(f"target route gave {i!r} for {k}; expected an index in 0..{n - 1}")
    return i


@dataclass
class LevelPlan:
    """A level made concrete: one plan per worker, the closed loop's feeder, the open loop's
    target rate, and whether the request source ran out while the arrivals were drawn."""

    plans: list[WorkerPlan]
    feeder: Feeder | None
    target_rate: float | None
    exhausted_early: bool


def build_plans(spec: LevelSpec, target: TargetSpec, targets: list[TargetSpec] | None,
                route: Callable[[int], int] | None, requests: Requests) -> LevelPlan:
    """One ``WorkerPlan`` per worker for ``spec`` (``targets``/``route``: several targets)."""
    if targets and route is None:  # run_level gives round robin when the caller gives none
        raise WattbenchError("a level over several targets needs a route for each request")
    n_workers = spec.workers or auto_workers(spec)
    if spec.mode == "concurrency":
        n_workers = min(n_workers, int(spec.value))
        if spec.num_requests is None and spec.duration_s is None and callable(requests):
            raise UserError("a closed-loop level needs --num-requests or --duration")
        feeder = Feeder(spec, requests, n_workers)
        stop_after = None
        if spec.duration_s is not None and not spec.warmup_requests:
            stop_after = (spec.warmup_s or 0.0) + spec.duration_s
        plans, first = [], 0
        for w, share in enumerate(split_count(int(spec.value), n_workers)):
            plans.append(WorkerPlan(w, spec.index, spec.mode, target, concurrency=share, stop_after_s=stop_after,
                                    warmup_s=spec.warmup_s))
            if targets and route is not None:
                plans[-1].targets = targets
                plans[-1].routes = [_route(route, first + k, len(targets)) for k in range(share)]
            first += share
        return LevelPlan(plans, feeder, None, False)
    cap = spec.max_in_flight
    if cap is not None:
        if cap < 1:
            raise UserError(f"--max-concurrency must be >= 1, got {cap}")
        n_workers = min(n_workers, cap)
    parts, target_rate, exhausted_early = open_arrivals(spec, requests, n_workers)
    caps = split_count(cap, n_workers) if cap is not None else [None] * n_workers
    plans = [WorkerPlan(w, spec.index, spec.mode, target, arrivals=parts[w], max_in_flight=caps[w])
             for w in range(n_workers)]
    if targets and route is not None:
        for p, arrivals in zip(plans, parts):
            p.targets = targets
            p.routes = [_route(route, a[0], len(targets)) for a in arrivals]
    return LevelPlan(plans, None, target_rate, exhausted_early)


def _measured_phase(spec: LevelSpec, warm_end: float | None, off: float, measured: int, ws: float,
                    wr: int) -> tuple[float, bool]:
    """One rule for open-loop and trace arrivals past the warm-up: the measured phase starts at the
    warm-up's end (``ws`` seconds, or the first arrival after ``wr`` warm-up requests); returns that
    start and whether the arrival at ``off`` falls past ``--num-requests``/``--duration``."""
    if warm_end is None:
        warm_end = ws if not wr else off
    stop = ((spec.num_requests is not None and measured >= spec.num_requests)
            or (spec.duration_s is not None and off >= warm_end + spec.duration_s))
    return warm_end, stop
