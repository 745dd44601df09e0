"""Ground-truth power traces: a scripted ``Sensor`` and a pure ``TelemetryLog`` builder.

The one scripted sensor of the test suite (the sampler, accounting, distributed and Ray tests all
use it). ``ScriptedSensor`` plays a known power trace ``power_w(elapsed_s)`` (or a constant, given
as a number): on each ``read()`` it reports,
at the current ``time.perf_counter_ns()``, the power (W) and/or the exact cumulative energy (J,
the integral of the trace since ``open()``, computed analytically or by fine quadrature). Faults
can be injected: counter wrap (``max_value``), counter resets at given elapsed times, and gaps
(intervals in which ``read()`` raises, as a failing meter does), failures on given read numbers
(``fail_on``) and at ``open()`` (``open_error``). It counts its reads (``reads``, ``read_times``)
and knows when it was closed. It works with a real sampler, in a thread or a process.

``build_log`` makes a ``TelemetryLog`` straight from arrays for unit tests, no clock involved.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Collection, Sequence

import numpy as np

from wattbench.telemetry.base import Channel, Reading, Sensor, TelemetryLog


class Trace:
    """A piecewise-linear power trace ``[(t_s, watts), ...]`` with exact energy.

    Repeat a time to make a step: ``Trace([(0, 100), (5, 100), (5, 300), (10, 300)])``.
    Before the first point and after the last, the end values are held.
    """

    def __init__(self, points: Sequence[tuple[float, float]]) -> None:
        self.t = np.array([p[0] for p in points], dtype=np.float64)
        self.w = np.array([p[1] for p in points], dtype=np.float64)
        if np.any(np.diff(self.t) < 0):
            raise ValueError("trace times must not decrease")

    def __call__(self, t_s: float) -> float:
        # right-continuous at steps: the last point with time <= t decides a repeated time
        k = int(np.searchsorted(self.t, t_s, side="right"))
        if k == 0:
            return float(self.w[0])
        if k >= len(self.t):
            return float(self.w[-1])
        t0, t1, w0, w1 = self.t[k - 1], self.t[k], self.w[k - 1], self.w[k]
        return float(w0 + (w1 - w0) * (t_s - t0) / (t1 - t0)) if t1 > t0 else float(w1)

    def energy(self, a_s: float, b_s: float) -> float:
        """Exact integral over ``[a_s, b_s]``."""
        if b_s <= a_s:
            return 0.0
        knots = [a_s] + [float(x) for x in self.t if a_s < x < b_s] + [b_s]
        total = 0.0
        for x0, x1 in zip(knots, knots[1:]):
            if x1 > x0:
                # linear within (x0, x1): evaluate just inside to avoid step ambiguity
                eps = (x1 - x0) * 1e-9
                w0, w1 = self(x0 + eps), self(x1 - eps)
                total += 0.5 * (w0 + w1) * (x1 - x0)
        return total

    def cumulative(self, t_s: float) -> float:
        return self.energy(float(min(self.t[0], 0.0)), t_s)


def step_trace(levels: Sequence[tuple[float, float]]) -> Trace:
    """``[(from_s, watts), ...]``: piecewise-constant power as a ``Trace``."""
    pts: list[tuple[float, float]] = []
    for i, (s, w) in enumerate(sorted(levels)):
        if pts:
            pts.append((s, pts[-1][1]))
        pts.append((s, w))
    return Trace(pts)


def energy_of(power_w: Callable[[float], float], a_s: float, b_s: float, n: int) -> float:
    """Energy (J) of a power function of time over [a, b] by the trapezoid rule on n steps (for
    power given as a plain callable; a ``Trace`` integrates exactly)."""
    if b_s <= a_s:
        return 0.0
    t = np.linspace(a_s, b_s, n + 1)
    w = np.array([power_w(x) for x in t], dtype=float)
    return float(np.sum((w[1:] + w[:-1]) / 2.0 * np.diff(t)))


class Constant:
    """A constant power trace (W), with its exact energy; picklable, unlike a lambda."""

    def __init__(self, watts: float) -> None:
        self.watts = float(watts)

    def __call__(self, t_s: float) -> float:
        return self.watts

    def energy(self, a_s: float, b_s: float) -> float:
        return self.watts * max(0.0, b_s - a_s)


class LivePower:
    """A power the test changes while the sensor runs (``ScriptedSensor.set_power``): piecewise
    constant from each change on, with exact energy. Thread-safe (the sampler reads while the test
    sets)."""

    def __init__(self, watts: float) -> None:
        self._lock = threading.Lock()
        self._changes: list[tuple[float, float]] = [(0.0, float(watts))]  # (elapsed s, W from then on)
        self.origin_ns: int | None = None
        self.clock: Callable[[], int] = time.perf_counter_ns

    def start(self, origin_ns: int, clock: Callable[[], int]) -> None:
        self.origin_ns, self.clock = origin_ns, clock

    def set(self, watts: float) -> int:
        t = self.clock()
        with self._lock:
            self._changes.append(((t - (self.origin_ns or t)) / 1e9, float(watts)))
        return t

    def __call__(self, t_s: float) -> float:
        with self._lock:
            return next((w for ts, w in reversed(self._changes) if ts <= t_s), self._changes[0][1])

    def energy(self, a_s: float, b_s: float) -> float:
        with self._lock:
            ch = list(self._changes)
        e = 0.0
        for i, (ta, w) in enumerate(ch):
            tb = ch[i + 1][0] if i + 1 < len(ch) else max(b_s, ta)
            lo, hi = max(ta, a_s), min(tb, b_s)
            if hi > lo:
                e += w * (hi - lo)
        return e


class ScriptedSensor(Sensor):
    """Plays ``power_w(elapsed_s)``; channels: ``<name>.energy`` (counter) and/or ``<name>.power``.

    ``poll_interval_s=None`` leaves the sensor without its own interval (the sampler's applies).
    With ``power_w=LivePower(w)`` the test changes the power while it runs (``set_power``);
    ``true_energy(t0_ns, t1_ns)`` is the trace's exact energy between two clock readings;
    ``failing = True`` makes every read raise until it is set back."""

    def __init__(
        self,
        power_w: Callable[[float], float] | float = 100.0,
        *,
        name: str = "scripted",
        boundary: str = "accelerator",
        device: str = "dev0",
        counter: bool = True,
        power: bool = True,
        max_value: float | None = None,
        resets_at_s: Sequence[float] = (),
        gaps_s: Sequence[tuple[float, float]] = (),
        update_period_s: float | None = 0.01,
        poll_interval_s: float | None = 0.01,
        energy_fn: Callable[[float], float] | None = None,
        clock: Callable[[], int] = time.perf_counter_ns,
        fail_on: Collection[int] = (),
        open_error: BaseException | None = None,
    ) -> None:
        self.name = name
        if poll_interval_s is not None:
            self.poll_interval_s = poll_interval_s
        if isinstance(power_w, (int, float)):
            power_w = Constant(power_w)
        self.power_w = power_w
        self.boundary, self.device = boundary, device
        self.counter, self.power = counter, power
        self.max_value = max_value
        self.resets_at_s = sorted(resets_at_s)
        self.gaps_s = list(gaps_s)
        self.update_period_s = update_period_s
        self.energy_fn = energy_fn
        self.clock = clock
        self.fail_on = set(fail_on)
        self.open_error = open_error
        self.t_open_ns: int | None = None
        self.reads = 0  # read() calls, failed ones included
        self.read_times: list[int] = []
        self.closed = False
        self.failing = False

    def energy(self, elapsed_s: float) -> float:
        """The exact energy (J) of the trace since ``open()``."""
        if self.energy_fn is not None:
            return self.energy_fn(elapsed_s)
        if hasattr(self.power_w, "energy"):  # Trace, Constant: exact
            return self.power_w.energy(0.0, elapsed_s)
        return energy_of(self.power_w, 0.0, elapsed_s, 2000)

    def channels(self) -> list[Channel]:
        out = []
        if self.counter:
            out.append(Channel(id=f"{self.name}.energy", sensor=self.name, kind="counter", quantity="energy",
                               unit="J", boundary=self.boundary, device=self.device, primary=True,
                               update_period_s=self.update_period_s, max_value=self.max_value, source="scripted"))
        if self.power:
            out.append(Channel(id=f"{self.name}.power", sensor=self.name, kind="power", quantity="power",
                               unit="W", boundary=self.boundary, device=self.device, primary=not self.counter,
                               update_period_s=self.update_period_s, source="scripted"))
        return out

    def open(self) -> list[Channel]:
        if self.open_error is not None:
            raise self.open_error
        self.t_open_ns = self.clock()
        if hasattr(self.power_w, "start"):  # LivePower: its changes are timed from this open
            self.power_w.start(self.t_open_ns, self.clock)
        return self.channels()

    @property
    def attempts(self) -> int:
        return self.reads

    def set_power(self, watts: float) -> int:
        """``LivePower`` only: the power from now on; returns the clock reading of the change."""
        return self.power_w.set(watts)

    def true_energy(self, t0_ns: int, t1_ns: int) -> float:
        """The trace's exact energy (J) between two readings of the sensor's clock (zero before open)."""
        a = max(0.0, (t0_ns - self.t_open_ns) / 1e9)
        b = max(0.0, (t1_ns - self.t_open_ns) / 1e9)
        return self.energy(b) - self.energy(a) if b > a else 0.0

    def bracket_gap_s(self, t_ns: int) -> float:
        """Seconds between the reads just before and just after ``t_ns``."""
        before = max(x for x in self.read_times if x <= t_ns)
        after = min(x for x in self.read_times if x > t_ns)
        return (after - before) / 1e9

    def counter_value(self, elapsed_s: float) -> float:
        """What the counter shows: energy since the last reset, modulo ``max_value``."""
        since = max([r for r in self.resets_at_s if r <= elapsed_s], default=0.0)
        e = self.energy(elapsed_s) - (self.energy(since) if since > 0 else 0.0)
        return math.fmod(e, self.max_value) if self.max_value else e

    def read(self) -> list[Reading]:
        if self.t_open_ns is None:
            raise RuntimeError("ScriptedSensor.read() before open()")
        self.reads += 1
        t = self.clock()
        self.read_times.append(t)
        if self.reads in self.fail_on:
            raise OSError(f"scripted failure on read {self.reads}")
        if self.failing:
            raise OSError("scripted meter failure")
        el = (t - self.t_open_ns) / 1e9
        if any(a <= el < b for a, b in self.gaps_s):
            raise OSError(f"scripted gap at {el:.3f} s")
        out = []
        if self.counter:
            out.append(Reading(t, f"{self.name}.energy", self.counter_value(el)))
        if self.power:
            out.append(Reading(t, f"{self.name}.power", float(self.power_w(el))))
        return out

    def close(self) -> None:
        self.closed = True


def build_log(*series: tuple[Channel, Sequence[float], Sequence[float]], failures=()) -> TelemetryLog:
    """A ``TelemetryLog`` from ``(channel, times_s, values)`` triples (times in s, stored as ns)."""
    log = TelemetryLog()
    for ch, ts, vs in series:
        log.add_channels([ch])
        log.add([Reading(int(round(t * 1e9)), ch.id, float(v)) for t, v in zip(ts, vs)])
    log.failures.extend(failures)
    return log


def counter_channel(cid: str = "c", *, boundary: str = "accelerator", device: str = "dev0", **kw) -> Channel:
    kw.setdefault("primary", True)
    return Channel(id=cid, sensor=kw.pop("sensor", "scripted"), kind="counter", quantity="energy", unit="J",
                   boundary=boundary, device=device, **kw)


def power_channel(cid: str = "p", *, boundary: str = "accelerator", device: str = "dev0", **kw) -> Channel:
    return Channel(id=cid, sensor=kw.pop("sensor", "scripted"), kind="power", quantity=kw.pop("quantity", "power"),
                   unit="W", boundary=boundary, device=device, **kw)


def aux_channel(cid: str, quantity: str, *, device: str = "dev0") -> Channel:
    return Channel(id=cid, sensor="scripted", kind="aux", quantity=quantity, unit="", device=device)


def grid(a_s: float, b_s: float, step_s: float) -> np.ndarray:
    n = int(round((b_s - a_s) / step_s))
    return a_s + step_s * np.arange(n + 1)
