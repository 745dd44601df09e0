"""The run's one clock.

Every interval inside a run comes from ``time.perf_counter_ns()`` in the process that owns the
run. A single wall-clock anchor, read together with the monotonic clock, lets results be placed
on a calendar and lets external wall-clock logs (a PDU logger, a Prometheus server) be mapped
onto the run's timeline. Never subtract two wall-clock readings to get an interval.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

now_ns = time.perf_counter_ns


def now_s() -> float:
    return time.perf_counter_ns() / 1e9


@dataclass(frozen=True)
class ClockAnchor:
    """A wall-clock reading and a monotonic reading taken together (bracketed to < 1 ms)."""

    wall_ns: int
    mono_ns: int
    uncertainty_ns: int

    @classmethod
    def take(cls) -> "ClockAnchor":
        best = None
        for _ in range(5):
            a = time.perf_counter_ns()
            w = time.time_ns()  # wall anchor
            b = time.perf_counter_ns()
            if best is None or (b - a) < best[2]:
                best = (w, (a + b) // 2, b - a)
        w, m, u = best
        return cls(wall_ns=w, mono_ns=m, uncertainty_ns=u)

    def to_mono_ns(self, wall_ns: int) -> int:
        """Map a wall-clock timestamp (e.g. from a meter's log) onto this run's monotonic clock."""
        return self.mono_ns + (wall_ns - self.wall_ns)

    def to_wall_ns(self, mono_ns: int) -> int:
        return self.wall_ns + (mono_ns - self.mono_ns)
