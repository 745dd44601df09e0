"""The sensor seam.

A sensor is small: ``open() -> list[Channel]``, ``read() -> list[Reading]``, ``close()``.
Each channel describes one stream of readings: a cumulative energy counter in joules, a power
value in watts, or an auxiliary gauge (temperature, clocks, utilization, throttle reasons …).
Vendor units (mW, mJ, µJ) are converted to SI inside the adapter, nowhere else.

Timestamps are the run's monotonic clock (``time.perf_counter_ns()``) taken when the value was
read, or — where the meter reports its own sample time (NVML's sample buffer, a wall meter's log) —
that time mapped onto the monotonic clock.
"""

from __future__ import annotations

import abc
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from wattbench.core.schema import GPUInfo

# Power boundaries, inner to outer. A contained boundary is never added to its container.
BOUNDARIES: tuple[str, ...] = (
    "accelerator",
    "accelerator_memory",
    "cpu",
    "dram",
    "host",
    "node",
    "cluster",
    "wall",
    "facility",
)

# boundary -> boundaries it contains (directly or not). Used to refuse double counting.
CONTAINS: dict[str, frozenset[str]] = {
    "accelerator": frozenset({"accelerator_memory"}),
    "accelerator_memory": frozenset(),
    "cpu": frozenset(),
    "dram": frozenset(),
    "host": frozenset({"cpu", "dram"}),
    "node": frozenset({"accelerator", "accelerator_memory", "cpu", "dram", "host"}),
    "cluster": frozenset({"accelerator", "accelerator_memory", "cpu", "dram", "host", "node"}),
    "wall": frozenset({"accelerator", "accelerator_memory", "cpu", "dram", "host", "node"}),
    "facility": frozenset({"accelerator", "accelerator_memory", "cpu", "dram", "host", "node", "cluster", "wall"}),
}

Kind = Literal["counter", "power", "aux"]
Method = Literal["measured", "declared", "estimate"]


@dataclass(frozen=True)
class Channel:
    """Description of one stream of readings.

    ``kind``: ``counter`` (cumulative energy, J), ``power`` (W) or ``aux`` (any other gauge).
    ``quantity``: what the value is: ``energy``, ``power``, ``power_avg``, ``temperature_c``,
    ``sm_clock_mhz``, ``utilization_pct``, ``throttle_reasons`` …
    ``primary``: this channel is the preferred figure for its (boundary, device).
    ``max_value``: counter range for wraparound (RAPL ``max_energy_range_uj`` in J), if known.
    ``node``: set only in logs merged from several nodes (``wattbench.distributed``): the node's
    id; such channels' ``id`` and ``device`` are prefixed with it, so two nodes' ``gpu0`` stay two
    devices, and accounting totals the ``cluster`` boundary node by node.
    """

    id: str
    sensor: str
    kind: Kind
    quantity: str
    unit: str
    boundary: str | None = None
    device: str = ""
    resolution: float | None = None
    update_period_s: float | None = None
    source: str = ""
    method: Method = "measured"
    primary: bool = False
    max_value: float | None = None
    uncertainty_pct: float | None = None  # the meter's own accuracy, when documented
    notes: str = ""
    node: str = ""  # the cluster node this channel was read on (distributed runs); "" = this host

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class Reading:
    """One value of one channel at one instant of the run's monotonic clock (ns)."""

    t_ns: int
    channel: str
    value: float


class Sensor(abc.ABC):
    """A meter adapter. Subclasses set ``name`` and implement the three methods.

    ``poll_interval_s`` is how often the sampler should call ``read()``; a sensor whose
    ``read()`` drains a buffer (NVML samples, a log file) may be polled less often.
    ``read()`` may raise; the sampler records the failure as a gap and carries on.
    """

    name: str = "sensor"
    poll_interval_s: float = 0.1

    @abc.abstractmethod
    def open(self) -> list[Channel]:
        """Acquire the meter; return the channels it provides. Raise SensorError with a fix."""

    @abc.abstractmethod
    def read(self) -> list[Reading]:
        """Read every channel once (or drain buffered samples)."""

    def close(self) -> None:  # noqa: B027 - optional
        """Release the meter."""

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "poll_interval_s": self.poll_interval_s}


@dataclass
class SensorFailure:
    """A failed read during a run: where it happened and why."""

    sensor: str
    t_ns: int
    error: str


class TelemetryLog:
    """Everything the sampler saw in a run: channel inventory, per-channel series, failures.

    Series are kept per channel (parallel lists of monotonic ns and values) so that accounting
    never scans other channels' readings.
    """

    def __init__(self) -> None:
        self.channels: dict[str, Channel] = {}
        self.t_ns: dict[str, list[int]] = {}
        self.values: dict[str, list[float]] = {}
        self.failures: list[SensorFailure] = []

    def add_channels(self, channels: list[Channel]) -> None:
        for c in channels:
            self.channels[c.id] = c
            self.t_ns.setdefault(c.id, [])
            self.values.setdefault(c.id, [])

    def add(self, readings: list[Reading]) -> None:
        for r in readings:
            ts = self.t_ns.get(r.channel)
            if ts is None:
                ts = self.t_ns[r.channel] = []
                self.values[r.channel] = []
            ts.append(r.t_ns)
            self.values[r.channel].append(r.value)

    def series(self, channel_id: str) -> tuple[list[int], list[float]]:
        return self.t_ns.get(channel_id, []), self.values.get(channel_id, [])

    def __len__(self) -> int:
        return sum(len(v) for v in self.t_ns.values())


class TelemetrySource(Protocol):
    """What a run reads of its sampler while it goes: ``telemetry.sampler.Sampler`` on this host, or
    the Ray cluster's merged stream (``run.telemetry.ClusterTelemetry``). Starting and stopping are
    not part of it: whoever builds the source starts it and puts its stop on the run's stack.

    ``log``: everything seen so far (the accounting reads windows of it). ``channels``: every channel
    that reads. ``latest_power_w()``: watts for a live display only, ``None`` when unknown.
    ``await_reads_after(t_ns, timeout_s)``: wait at most ``timeout_s`` until every energy and power
    channel has a reading after ``t_ns`` (a window's end); whether all did. ``gpu_inventory()``: the
    GPUs read, for the result's environment (``[]`` when not known).
    """

    @property
    def log(self) -> TelemetryLog: ...
    @property
    def channels(self) -> list[Channel]: ...
    def latest_power_w(self) -> float | None: ...
    def await_reads_after(self, t_ns: int, timeout_s: float) -> bool: ...
    def gpu_inventory(self) -> list[GPUInfo]: ...
