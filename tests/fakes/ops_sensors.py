"""A scripted sensor for the monitor: a power trace set by the test, with exact ground truth.

``TraceSensor.set_power(w)`` changes the power from now on; the counter channel reads the exact
integral of the trace at read time, the power channel the current value. ``true_energy(t0, t1)``
integrates the trace exactly (piecewise constant). ``failing = True`` makes reads raise.
"""

from __future__ import annotations

import threading

from wattbench.clock import now_ns
from wattbench.telemetry.base import Channel, Reading, Sensor


class TraceSensor(Sensor):
    def __init__(self, name: str = "trace", power_w: float = 100.0, boundary: str = "accelerator",
                 poll_interval_s: float = 0.02):
        self.name = name
        self.boundary = boundary
        self.poll_interval_s = poll_interval_s
        self._lock = threading.Lock()
        self._changes: list[tuple[int, float]] = []  # (t_ns, watts from then on)
        self._initial_w = power_w
        self.failing = False
        self.reads = 0
        self.attempts = 0
        self.read_times: list[int] = []

    def open(self):
        with self._lock:
            self._changes = [(now_ns(), self._initial_w)]
        return [Channel(id=f"{self.name}.energy", sensor=self.name, kind="counter", quantity="energy", unit="J",
                        boundary=self.boundary, device="d0", primary=True, update_period_s=self.poll_interval_s)]

    def set_power(self, watts: float) -> int:
        t = now_ns()
        with self._lock:
            self._changes.append((t, float(watts)))
        return t

    def bracket_gap_s(self, t: int) -> float:
        """Seconds between the reads just before and just after ``t``."""
        before = max(x for x in self.read_times if x <= t)
        after = min(x for x in self.read_times if x > t)
        return (after - before) / 1e9

    def true_energy(self, t0: int, t1: int) -> float:
        with self._lock:
            ch = list(self._changes)
        e = 0.0
        for i, (ta, w) in enumerate(ch):
            tb = ch[i + 1][0] if i + 1 < len(ch) else max(t1, ta)
            lo, hi = max(ta, t0), min(tb, t1)
            if hi > lo:
                e += w * (hi - lo) / 1e9
        return e

    def read(self):
        self.attempts += 1
        if self.failing:
            raise OSError("scripted meter failure")
        t = now_ns()
        self.reads += 1
        self.read_times.append(t)
        return [Reading(t, f"{self.name}.energy", self.true_energy(self._changes[0][0], t))]
