"""``MonitorSnapshot``: what the monitor knows after each scrape, as one frozen value passed from the
tracker (the figures) through the service (which adds its sources, problems and ticks) to the
Prometheus exporter, the live table and the summary.

Units are in the names: ``t_s`` seconds since the monitor started (monotonic clock), ``power_w``
the last accounted span's average power per boundary, ``energy_total_j`` the energy since the
start per boundary; ``windows`` each sliding window's figures (and ``total``), ``segmentation``
idle vs loaded over the whole run, ``by_model`` the per-model estimate. ``to_dict`` is the JSON
form the summary (``--json``) and the history file's ``summary`` line have always had: the same
keys, in the same order; ``from_dict`` reads it back (a history file's ``summary`` line, of
this version or an earlier one: keys it does not know are left, keys it lacks take the defaults).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any


@dataclass(frozen=True)
class MonitorSnapshot:
    """The monitor's figures after one scrape (module doc); the defaults are those before any."""

    t_s: float = 0.0
    state: str | None = None  # idle, loaded or unknown; None before the first span
    power_w: dict[str, float] = field(default_factory=dict)
    running: float | None = None  # the server's requests running and waiting at the last span
    waiting: float | None = None
    windows: dict[str, dict[str, Any]] = field(default_factory=dict)  # label -> figures
    idle_power_w: dict[str, float] = field(default_factory=dict)
    loaded_power_w: dict[str, float] = field(default_factory=dict)
    segmentation: dict[str, Any] = field(default_factory=dict)
    segment: dict[str, Any] | None = None  # the idle/loaded segment in progress
    energy_total_j: dict[str, float] = field(default_factory=dict)
    by_model: dict[str, Any] = field(default_factory=dict)
    counter_resets: int = 0
    intervals: int = 0
    forced_intervals: int = 0
    buffered_points: int = 0
    sources: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> up, errors, last error
    problems: tuple[str, ...] = ()
    ticks: int = 0
    exporter: str | None = None  # the /metrics URL it serves, None without one

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (module doc)."""
        return {
            "t_s": self.t_s, "state": self.state, "power_w": self.power_w, "running": self.running,
            "waiting": self.waiting, "windows": self.windows, "idle_power_w": self.idle_power_w,
            "loaded_power_w": self.loaded_power_w, "segmentation": self.segmentation, "segment": self.segment,
            "energy_total_j": self.energy_total_j, "by_model": self.by_model, "counter_resets": self.counter_resets,
            "intervals": self.intervals, "forced_intervals": self.forced_intervals,
            "buffered_points": self.buffered_points, "sources": self.sources, "problems": list(self.problems),
            "ticks": self.ticks, "exporter": self.exporter,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> MonitorSnapshot:
        """The snapshot a ``to_dict`` form holds (module doc); ``None`` values of the dict fields
        read as empty."""
        known = {f.name: f for f in fields(cls)}
        given: dict[str, Any] = {k: v for k, v in d.items() if k in known}
        for k in ("power_w", "windows", "idle_power_w", "loaded_power_w", "segmentation", "energy_total_j",
                  "by_model", "sources"):
            if k in given and given[k] is None:
                given[k] = {}
        if "problems" in given:
            given["problems"] = tuple(given["problems"] or ())
        return cls(**given)
