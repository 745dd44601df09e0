"""The sampler: daemon threads that poll the sensors on absolute deadlines.

One thread per opened sensor, so a slow meter (``ipmitool`` taking 300 ms, a Redfish BMC
timing out) never delays the GPU counter reads; each sensor's ``read()`` is only ever called
from its own thread, so sensors need not be thread-safe.

Each sensor is polled at its own period: its ``poll_interval_s`` when it sets one (on the
instance or its class), else the sampler's ``interval_s``. Deadlines are absolute
(``t0 + k·period``), so a slow read does not push later reads back; a deadline already missed
by a whole period is skipped (counted in ``overhead()['missed_deadlines']``) instead of being
read in a burst.

A read that raises is recorded as a ``SensorFailure`` (the accounting sees the gap) and the
sampler carries on. Sensors that cannot be opened are left out and their ``SensorError``
message (which names the fix) goes to ``problems``. The thread never touches the event loop;
``snapshot()`` / ``latest_power_w()`` are safe to call from any thread for a live display.

Time is read and waited on through ``clock`` (``wattbench.core.clock.Clock``; the real monotonic
clock by default, a scripted one in tests).

The sampler measures its own cost: ``overhead()`` reports the thread's CPU time
(``time.thread_time_ns`` inside the thread) against the wall time it ran, as % of one core.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from wattbench.core.secret_scope import clip
from wattbench.core.clock import MONOTONIC, Clock
from wattbench.core.errors import SensorError
from wattbench.telemetry.base import BOUNDARIES, Channel, Reading, Sensor, SensorFailure, TelemetryLog
from wattbench.telemetry.nvml import gpu_inventory, NvmlSensor

if TYPE_CHECKING:
    from wattbench.core.schema import GPUInfo


class TelemetrySink(Protocol):
    """Receives what the sampler sees as it sees it (e.g. ``jsonl.TelemetryWriter``)."""

    def channels(self, channels: list[Channel]) -> None: ...
    def write(self, readings: list[Reading]) -> None: ...
    def failure(self, failure: SensorFailure) -> None: ...


CLOSING_POLL_S = 0.01  # how often await_reads_after looks for the closing reads


def period_of(sensor: Sensor, default_s: float) -> float:
    """The sensor's own poll period if it sets one, else ``default_s``."""
    if "poll_interval_s" in vars(sensor) or type(sensor).poll_interval_s is not Sensor.poll_interval_s:
        return float(sensor.poll_interval_s)
    return float(default_s)


class Sampler:
    def __init__(self, sensors: Sequence[Sensor], interval_s: float = 0.1, sink: TelemetrySink | None = None,
                 clock: Clock = MONOTONIC) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be > 0")
        self.sensors = list(sensors)
        self.interval_s = interval_s
        self.sink = sink
        self.clock = clock  # where the threads read the time and wait (a scripted one in tests)
        self.log = TelemetryLog()
        self.problems: list[str] = []
        self.opened: list[Sensor] = []
        self._lock = threading.Lock()
        self._stop = clock.event()
        self._threads: list[threading.Thread] = []
        self._started = False
        self._t_start_ns = 0
        self._t_stop_ns: int | None = None
        self._cpu_by_thread: dict[str, int] = {}
        self._latest: dict[str, tuple[int, float]] = {}
        self._prev: dict[str, tuple[int, float]] = {}
        self._is_open = False
        self._reads = 0
        self._failures = 0
        self._missed = 0
        self._read_ns: dict[str, int] = {}

    # -- lifecycle --------------------------------------------------------------------------
    @property
    def channels(self) -> list[Channel]:
        """Every channel of the sensors that opened."""
        return list(self.log.channels.values())

    def open(self) -> list[str]:
        """Open every sensor; keep the ones that open. Returns the problems met (each names its
        fix); they are also kept in ``problems``."""
        if self._is_open:
            return []
        before = len(self.problems)
        for s in self.sensors:
            try:
                chans = s.open()
            except SensorError as e:
                self.problems.append(f"{s.name}: {e}")
                self._close_one(s)
                continue
            self.problems.extend(getattr(s, "warnings", []) or [])
            if not chans:
                self.problems.append(f"{s.name}: opened but offers no channel on this machine")
                self._close_one(s)
                continue
            self.opened.append(s)
            self.log.add_channels(chans)
            if self.sink is not None:
                self.sink.channels(chans)
        self._is_open = True
        return self.problems[before:]

    def start(self) -> None:
        if self._started:
            raise RuntimeError("sampler already started")
        self._started = True
        self.open()
        self._stop.clear()
        self._t_start_ns = self.clock.now_ns()
        for i, s in enumerate(self.opened):
            period_ns = int(period_of(s, self.interval_s) * 1e9)
            t = threading.Thread(target=self._loop, args=(s, period_ns, f"{i}:{s.name}"),
                                 name=f"wattbench-sampler-{s.name}", daemon=True)
            self._threads.append(t)
        for t in self._threads:
            t.start()

    def stop(self) -> TelemetryLog:
        """Stop the threads, close the sensors, return everything seen.

        A sensor that reads some quantity seldom (NVML's energy counter) gets one closing read of
        everything (``force_full_read()``), so the last window's end is bracketed by a reading."""
        self._stop.set()
        for t in self._threads:
            t.join()
        if self._started and self._t_stop_ns is None:
            for s in self.opened:
                if hasattr(s, "force_full_read"):
                    s.force_full_read()
                    self._poll(s)
            self._t_stop_ns = self.clock.now_ns()
        for s in self.opened:
            self._close_one(s)
        self.opened = []
        return self.log

    close = stop

    def await_reads_after(self, t_ns: int, timeout_s: float) -> bool:
        """Closing reads for a window that ended at ``t_ns``: the accounting brackets a window's edge
        with a reading on each side (``accounting/counters.py``: a counter's delta around the edge
        apportioned by its power channel's shape), and a seldom-read counter (NVML's, every 0.9 s)
        otherwise has no reading after the edge yet when the level is accounted, so its end is
        extrapolated at the last interval's power and the edge's error bound is a whole read period.

        Every sensor that reads a quantity seldom gets a closing read (``force_full_read()``, as at
        ``stop``), and this waits — at most ``timeout_s``, on the sampler's clock — until each
        energy and power channel of a sensor polled at least that often has a reading after
        ``t_ns``. Returns whether all did; a channel that did not (a meter slower than the wait, a
        failing one) is accounted as before, extrapolated at its edge with that error bound."""
        if not self._started or self._t_stop_ns is not None:
            return True
        for s in self.opened:
            if hasattr(s, "force_full_read"):
                s.force_full_read()  # a flag the sensor's own thread reads at its next poll
        fast = {s.name for s in self.opened if period_of(s, self.interval_s) <= timeout_s}
        with self._lock:
            chans = self.log.channels
            wanted = [cid for cid in self._latest if cid in chans and chans[cid].kind in ("counter", "power")
                      and chans[cid].sensor in fast]
        deadline = self.clock.now_ns() + int(timeout_s * 1e9)
        while True:
            with self._lock:
                if all(self._latest[cid][0] > t_ns for cid in wanted):
                    return True
            if self.clock.now_ns() >= deadline:
                return False
            self.clock.sleep(CLOSING_POLL_S)

    def __enter__(self) -> "Sampler":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @staticmethod
    def _close_one(s: Sensor) -> None:
        try:
            s.close()
        except Exception:  # a sensor that fails to close must not lose the run's telemetry
            pass

    # -- the threads ------------------------------------------------------------------------
    def _loop(self, s: Sensor, period_ns: int, key: str) -> None:
        cpu0 = time.thread_time_ns()
        due = self.clock.now_ns()
        try:
            while not self._stop.is_set():
                t = self.clock.now_ns()
                if due > t:
                    if self._stop.wait((due - t) / 1e9):
                        break
                    continue
                self._poll(s)
                due += period_ns
                after = self.clock.now_ns()
                if due <= after:  # overran by at least a whole period: skip, do not burst
                    missed = (after - due) // period_ns + 1
                    with self._lock:
                        self._missed += int(missed)
                    due += int(missed) * period_ns
                self._cpu_by_thread[key] = time.thread_time_ns() - cpu0
        finally:
            self._cpu_by_thread[key] = time.thread_time_ns() - cpu0

    def _poll(self, s: Sensor) -> None:
        a = self.clock.now_ns()
        try:
            readings = s.read()
        except Exception as e:  # any failure: record it, keep the run going
            f = SensorFailure(sensor=s.name, t_ns=self.clock.now_ns(), error=clip(f"{type(e).__name__}: {e}", 500))
            with self._lock:
                self.log.failures.append(f)
                self._failures += 1
            if self.sink is not None:
                self.sink.failure(f)
            return
        took = self.clock.now_ns() - a
        with self._lock:
            self._read_ns[s.name] = self._read_ns.get(s.name, 0) + took
            self.log.add(readings)
            self._reads += 1
            for r in readings:
                old = self._latest.get(r.channel)
                if old is not None:
                    self._prev[r.channel] = old
                self._latest[r.channel] = (r.t_ns, r.value)
        if self.sink is not None and readings:
            self.sink.write(readings)

    # -- live access ------------------------------------------------------------------------
    def series(self, channel_id: str) -> tuple[list[int], list[float]]:
        """A consistent copy of one channel's series, safe while the sampler runs."""
        with self._lock:
            t, v = self.log.series(channel_id)
            return list(t), list(v)

    def snapshot(self) -> dict[str, tuple[int, float]]:
        """Latest (t_ns, value) of every channel seen so far."""
        with self._lock:
            return dict(self._latest)

    def latest_power_w(self) -> float | None:
        """For a live display only: one figure of watts now.

        The sum over devices of ``latest_power_by_channel()`` at one boundary: ``accelerator``
        when any primary accelerator channel exists, else the innermost boundary (BOUNDARIES
        order) with a measured primary channel, else any. Never adds two boundaries.
        """
        per = self.latest_power_by_channel()
        if not per:
            return None
        chans = self.log.channels
        by_boundary: dict[str, list[Channel]] = {}
        for cid in per:
            c = chans[cid]
            by_boundary.setdefault(c.boundary or "", []).append(c)
        order = [b for b in BOUNDARIES if b in by_boundary]
        measured = [b for b in order if any(c.method == "measured" for c in by_boundary[b])]
        pick = measured[0] if measured else (order[0] if order else next(iter(by_boundary)))
        return sum(per[c.id] for c in by_boundary[pick])

    def latest_power_by_channel(self) -> dict[str, float]:
        """For a live display only: latest watts per primary channel, keyed by channel id.

        A primary power channel gives its latest value. A primary counter shows the latest value
        of a power channel of the same sensor, boundary and device when there is one, else the slope of
        its last two readings. Energy figures come from ``wattbench.accounting``, not from here.
        """
        out: dict[str, float] = {}
        with self._lock:
            latest, prev = dict(self._latest), dict(self._prev)
        chans = self.log.channels
        for cid, c in chans.items():
            if not c.primary or cid not in latest:
                continue
            if c.kind == "power":
                out[cid] = latest[cid][1]
                continue
            buddy = [
                o.id for o in chans.values()
                if o.kind == "power" and o.sensor == c.sensor and o.boundary == c.boundary and o.device == c.device
                and o.id in latest
                and o.quantity == "power"
            ]
            if buddy:
                out[cid] = latest[sorted(buddy)[0]][1]
            elif cid in prev:
                (t1, v1), (t0, v0) = latest[cid], prev[cid]
                if t1 > t0 and v1 >= v0:
                    out[cid] = (v1 - v0) / ((t1 - t0) / 1e9)
        return out

    def gpu_inventory(self) -> list[GPUInfo]:
        """GPUInfo for the GPUs of an open NVML sensor (the result's environment); [] without one."""
        for s in self.sensors:
            if isinstance(s, NvmlSensor):
                return gpu_inventory(s.nvml if s.nvml is not None else s._nvml_arg)
        return []

    def overhead(self) -> dict[str, Any]:
        """The sampler threads' own cost so far (or over their whole life once stopped).

        ``cpu_s`` sums the CPU time of every sampler thread; ``cpu_pct_of_core`` divides it by
        the wall time the sampler ran.
        """
        if not self._started:
            wall = 0
        else:
            wall = (self._t_stop_ns if self._t_stop_ns is not None else self.clock.now_ns()) - self._t_start_ns
        cpu = sum(self._cpu_by_thread.values())
        return {
            "cpu_s": cpu / 1e9,
            "wall_s": wall / 1e9,
            "cpu_pct_of_core": 100.0 * cpu / wall if wall > 0 else 0.0,
            "threads": len(self._threads),
            "reads": self._reads,
            "failures": self._failures,
            "missed_deadlines": self._missed,
            "read_time_s": {k: v / 1e9 for k, v in self._read_ns.items()},
        }
