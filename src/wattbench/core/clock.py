"""The run's one clock.

Every interval inside a run comes from ``time.perf_counter_ns()`` in the process that owns the
run. A single wall-clock anchor, read together with the monotonic clock, lets results be placed
on a calendar and lets external wall-clock logs (a PDU logger, a Prometheus server) be mapped
onto the run's timeline. Never subtract two wall-clock readings to get an interval.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable, Protocol

now_ns = time.perf_counter_ns


class Clock(Protocol):
    """Where code that keeps time (the sampler, the monitor) reads it and waits on it.

    ``now_ns()`` is the run's monotonic clock; ``sleep(s)`` and ``event().wait(s)`` wait on it.
    The default is ``MONOTONIC`` (``perf_counter_ns``, ``time.sleep``, ``threading.Event``); a
    test passes a scripted clock instead, so what it asserts about deadlines, retries and
    backoff follows from its script, not from how the host scheduled the threads."""

    def now_ns(self) -> int: ...

    def sleep(self, seconds: float) -> None: ...

    def event(self) -> threading.Event: ...


class MonotonicClock:
    """The real clock: ``perf_counter_ns``, ``time.sleep`` and ``threading.Event``."""

    def now_ns(self) -> int:
        return time.perf_counter_ns()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def event(self) -> threading.Event:
        return threading.Event()


MONOTONIC: Clock = MonotonicClock()


def now_s() -> float:
    return time.perf_counter_ns() / 1e9


@dataclass(frozen=True)
class ClockAnchor:
    """A wall-clock reading and a monotonic reading taken together (bracketed to < 1 ms)."""

    wall_ns: int
    mono_ns: int
    uncertainty_ns: int

    @classmethod
    def take(cls, mono_ns: Callable[[], int] = time.perf_counter_ns) -> "ClockAnchor":
        """Pair the wall clock with ``mono_ns`` (the run's clock; a scripted one in tests)."""
        best: tuple[int, int, int] | None = None  # (wall, mid-point, bracket width)
        for _ in range(5):
            a = mono_ns()
            w = time.time_ns()  # wall anchor
            b = mono_ns()
            if best is None or (b - a) < best[2]:
                best = (w, (a + b) // 2, b - a)
        assert best is not None  # the loop ran
        w, m, u = best
        return cls(wall_ns=w, mono_ns=m, uncertainty_ns=u)

    def to_mono_ns(self, wall_ns: int) -> int:
        """Map a wall-clock timestamp (e.g. from a meter's log) onto this run's monotonic clock."""
        return self.mono_ns + (wall_ns - self.wall_ns)

    def to_wall_ns(self, mono_ns: int) -> int:
        return self.wall_ns + (mono_ns - self.mono_ns)
