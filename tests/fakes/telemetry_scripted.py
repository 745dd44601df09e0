"""A scripted sensor: plays a known power/counter trace as a function of the run clock."""

from __future__ import annotations

from wattbench.clock import now_ns
from wattbench.telemetry.base import Channel, Reading, Sensor


class ScriptedSensor(Sensor):
    """Counter = ``power_w`` × seconds since open; optionally raises on reads number ``fail_on``."""

    def __init__(self, name="scripted", power_w=100.0, poll_interval_s=None, fail_on=(), open_error=None,
                 boundary="accelerator"):
        self.name = name
        self.power_w = power_w
        if poll_interval_s is not None:
            self.poll_interval_s = poll_interval_s
        self.fail_on = set(fail_on)
        self.open_error = open_error
        self.boundary = boundary
        self.reads = 0
        self.read_times: list[int] = []
        self.closed = False
        self.t0 = None

    def open(self):
        if self.open_error is not None:
            raise self.open_error
        self.t0 = now_ns()
        return [
            Channel(id=f"{self.name}.energy", sensor=self.name, kind="counter", quantity="energy", unit="J",
                    boundary=self.boundary, device="d0", primary=True),
            Channel(id=f"{self.name}.power", sensor=self.name, kind="power", quantity="power", unit="W",
                    boundary=self.boundary, device="d0"),
        ]

    def read(self):
        self.reads += 1
        t = now_ns()
        self.read_times.append(t)
        if self.reads in self.fail_on:
            raise OSError(f"scripted failure on read {self.reads}")
        e = self.power_w * (t - self.t0) / 1e9
        return [Reading(t, f"{self.name}.energy", e), Reading(t, f"{self.name}.power", self.power_w)]

    def close(self):
        self.closed = True
