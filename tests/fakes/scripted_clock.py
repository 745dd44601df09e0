"""Scripted clocks (``wattbench.core.clock.Clock``): time passes only when a thread waits, so what a
test asserts about deadlines, reads, retries and wall time is exact on any host under any load.
Two kinds: ``SamplerClock`` (each thread its own time; for the sampler alone) and ``SharedClock``
(one time, moved by the test, that worker threads follow in lock step; for the monitor).

``SamplerClock`` is a clock per thread (each sampler thread owns a sensor and its own time; the
test's thread has one too), started at ``start_ns``; the horizon is ``span_ns`` after it. A sampler
built with ``clock=sc`` reads it and waits on it: a wait of ``t`` seconds advances the waiting
thread's clock by ``t`` and returns at once. A thread's loop ends when its clock reaches
``horizon_ns`` — ``Sampler.stop()`` joins the threads, which run to it — so every thread runs the
same scripted span however the host schedules it; ``elapse()`` moves the test's own thread to the
horizon (the span it "slept"). A sensor built with ``clock=sc`` stamps its reads on its thread's
clock; ``sc.spend(ns)`` inside a read scripts how long that read took."""

from __future__ import annotations

import threading


class SamplerClock:
    def __init__(self, span_ns: int, start_ns: int = 1_000_000_000) -> None:
        self.start_ns, self.horizon_ns = start_ns, start_ns + span_ns
        self._t: dict[threading.Thread, int] = {}  # keyed by the thread itself (an ident is reused)
        self._lock = threading.Lock()

    def __call__(self) -> int:
        with self._lock:
            return self._t.setdefault(threading.current_thread(), self.start_ns)

    def spend(self, ns: int) -> None:
        """The calling thread's clock moves on by ``ns`` (a read that took that long)."""
        with self._lock:
            k = threading.current_thread()
            self._t[k] = self._t.setdefault(k, self.start_ns) + int(ns)

    def elapse(self) -> None:
        """The calling thread's clock moves on to the horizon."""
        self.spend(self.horizon_ns - self())

    # the wattbench.core.clock.Clock protocol, for the sampler
    def now_ns(self) -> int:
        return self()

    def sleep(self, seconds: float) -> None:
        self.spend(int(round(seconds * 1e9)))

    def event(self) -> "_ClockEvent":
        return _ClockEvent(self)


class _ClockEvent:
    """``threading.Event`` as the sampler uses it, on the scripted clock."""

    def __init__(self, clock: SamplerClock) -> None:
        self.clock = clock

    def set(self) -> None:  # stop(): the threads end at the horizon, not when stop() is called
        pass

    def clear(self) -> None:
        pass

    def is_set(self) -> bool:
        return self.clock() >= self.clock.horizon_ns

    def wait(self, timeout: float | None = None) -> bool:
        if timeout:
            self.clock.spend(int(round(timeout * 1e9)))
        return self.is_set()


class SharedClock:
    """One scripted time for every thread (``wattbench.core.clock.Clock``), moved only by the test.

    For code where the test's thread and worker threads act on the same time (the monitor: the
    test ticks the scraper while the sampler thread reads the meter). The thread that made the
    clock is the driver: its ``sleep(s)`` (and its waits) move the time ``s`` on. Any other
    thread's wait (``event().wait(t)``, ``sleep(t)``) blocks until the time reaches its deadline
    or the event is set. The driver moves the time from one due deadline to the next, and at each
    waits until every thread it ``watch``es is waiting again (or has ended), so what a worker does
    at time ``t`` (a read at its deadline) is done before the driver goes on, on any host under any
    load. Reads and scrapes take no scripted time. ``hang_s`` (real seconds) only ends a hang: a
    watched thread that never waits again fails the test."""

    def __init__(self, start_ns: int = 1_000_000_000, hang_s: float = 120.0) -> None:
        self.start_ns = self._t = start_ns
        self.hang_s = hang_s
        self._driver = threading.current_thread()
        self._cv = threading.Condition()
        self._waiting: dict[threading.Thread, tuple[int | None, "_SharedEvent"]] = {}
        self._watched: list[threading.Thread] = []

    # -- wattbench.core.clock.Clock ----------------------------------------------------------------
    def now_ns(self) -> int:
        with self._cv:
            return self._t

    def __call__(self) -> int:
        return self.now_ns()

    def sleep(self, seconds: float) -> None:
        self._wait(_SharedEvent(self), seconds)

    def event(self) -> "_SharedEvent":
        return _SharedEvent(self)

    # -- the driver ---------------------------------------------------------------------------
    def watch(self, threads) -> None:
        """Worker threads whose waits the driver waits for (e.g. ``monitor.sampler._threads``)."""
        self._watched.extend(threads)
        self.settle()

    def advance(self, seconds: float) -> None:
        """Move the time ``seconds`` on, deadline by deadline (driver only)."""
        assert threading.current_thread() is self._driver, "only the test's thread moves the time"
        target = self._t + int(round(seconds * 1e9))
        self.settle()
        while True:
            with self._cv:
                due = [d for d, _ in self._waiting.values() if d is not None and self._t < d <= target]
                self._t = min(due) if due else target
                self._cv.notify_all()
            self.settle()
            if self._t >= target:
                return

    def settle(self) -> None:
        """Wait until every watched thread has ended or waits for a later time (or for ever)."""
        with self._cv:
            if not self._cv.wait_for(self._settled, timeout=self.hang_s):
                raise AssertionError(f"a watched thread did not wait again within {self.hang_s} s (hung?)")

    def _settled(self) -> bool:
        for th in self._watched:
            if not th.is_alive():
                continue
            w = self._waiting.get(th)
            if w is None or w[1]._flag or (w[0] is not None and w[0] <= self._t):
                return False
        return True

    # -- waits --------------------------------------------------------------------------------
    def _wait(self, ev: "_SharedEvent", timeout: float | None) -> bool:
        th = threading.current_thread()
        if th is self._driver:
            if timeout and not ev.is_set():
                self.advance(timeout)
            return ev.is_set()
        with self._cv:
            deadline = None if timeout is None else self._t + int(round(timeout * 1e9))
            self._waiting[th] = (deadline, ev)
            self._cv.notify_all()
            try:
                while not ev._flag and (deadline is None or self._t < deadline):
                    self._cv.wait(timeout=self.hang_s)
            finally:
                del self._waiting[th]
                self._cv.notify_all()
            return ev._flag


class _SharedEvent:
    """``threading.Event`` on a ``SharedClock``."""

    def __init__(self, clock: SharedClock) -> None:
        self.clock = clock
        self._flag = False

    def set(self) -> None:
        with self.clock._cv:
            self._flag = True
            self.clock._cv.notify_all()

    def clear(self) -> None:
        with self.clock._cv:
            self._flag = False

    def is_set(self) -> bool:
        return self._flag

    def wait(self, timeout: float | None = None) -> bool:
        return self.clock._wait(self, timeout)
