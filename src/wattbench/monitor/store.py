"""A bounded telemetry log for long-running monitoring.

``BoundedTelemetryLog`` is a ``TelemetryLog`` whose per-channel series are ring buffers: the
monitor trims them to what the next accounting window needs (``trim_before``), and a hard cap
(``max_points``) bounds each channel even if trimming stalls. Failures are kept in a ring too.
It is safe to ``add`` from the sampler thread while the monitor thread reads ``series``.
"""

from __future__ import annotations

import threading
from collections import deque

from wattbench.telemetry.base import Channel, Reading, SensorFailure, TelemetryLog

DEFAULT_MAX_POINTS = 50_000  # per channel: ~16 min of a 50 Hz NVML sample buffer
DEFAULT_MAX_FAILURES = 256


class BoundedTelemetryLog(TelemetryLog):
    # Ring buffers where the base keeps lists: this class overrides every method that fills or
    # reads them (series returns lists), so the base's list-typed attributes are narrowed here.
    t_ns: dict[str, deque[int]]  # type: ignore[assignment]
    values: dict[str, deque[float]]  # type: ignore[assignment]
    failures: deque[SensorFailure]  # type: ignore[assignment]

    def __init__(self, max_points: int = DEFAULT_MAX_POINTS, max_failures: int = DEFAULT_MAX_FAILURES) -> None:
        super().__init__()
        self.max_points = int(max_points)
        self.failures = deque(maxlen=max_failures)
        self._lock = threading.Lock()
        self.dropped = 0  # points pushed out by the hard cap (trimming should make this 0)

    def add_channels(self, channels: list[Channel]) -> None:
        with self._lock:
            for c in channels:
                self.channels[c.id] = c
                self.t_ns.setdefault(c.id, deque(maxlen=self.max_points))
                self.values.setdefault(c.id, deque(maxlen=self.max_points))

    def add(self, readings: list[Reading]) -> None:
        with self._lock:
            for r in readings:
                ts = self.t_ns.get(r.channel)
                if ts is None:
                    ts = self.t_ns[r.channel] = deque(maxlen=self.max_points)
                    self.values[r.channel] = deque(maxlen=self.max_points)
                if len(ts) == self.max_points:
                    self.dropped += 1
                ts.append(r.t_ns)
                self.values[r.channel].append(r.value)

    def series(self, channel_id: str) -> tuple[list[int], list[float]]:
        with self._lock:
            return list(self.t_ns.get(channel_id, ())), list(self.values.get(channel_id, ()))

    def latest_t(self, channel_id: str) -> int | None:
        with self._lock:
            ts = self.t_ns.get(channel_id)
            return ts[-1] if ts else None

    def trim_before(self, cutoff_ns: int) -> int:
        """Drop readings older than ``cutoff_ns``, keeping the last one at or before it (the left
        edge of the next window is interpolated from it). Returns the number dropped."""
        n = 0
        with self._lock:
            for cid, ts in self.t_ns.items():
                vs = self.values[cid]
                while len(ts) >= 2 and ts[1] <= cutoff_ns:
                    ts.popleft()
                    vs.popleft()
                    n += 1
        return n

    def points(self) -> int:
        with self._lock:
            return sum(len(v) for v in self.t_ns.values())
