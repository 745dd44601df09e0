"""What a level observed beside its figures: goodput under the run's SLOs (``LevelResult.goodput``),
the GPUs' thermal and clock state (``LevelResult.thermal``), the host's CPUs
(``LevelResult.host_cpu``) and the server's own metrics (``LevelResult.server_metrics``).

Each block is written with the keys its writer set (``_Sparse``): a thermal summary without a
clock channel has no clock key, a server without ``/metrics`` only ``available`` and ``reason``.
A block of an older file loads as it was written: every field is optional, and a key this model
does not name is **kept** (an extra, written back as read, read by no code) — as everywhere in the
schema (``_M``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from wattbench.core.schema.base import Num, _Sparse


# ---------------------------------------------------------------- goodput (metrics/slo.py)


class SLOBound(_Sparse):
    """One SLO as written (``ttft_p99=500ms``): ``metrics.slo.SLO``."""

    metric: str  # ttft | tpot | itl | e2e
    stat: str  # mean | p50 | p90 | p95 | p99 | max
    threshold_ms: float


class SLOCheck(_Sparse):
    """One SLO checked over the level: the stat over its successful requests (ITL: gaps pooled)."""

    threshold_ms: float
    observed_ms: float | None = None  # None: no value went in
    met: bool = False
    n: int = 0  # values that went in


class GoodputPerKw(_Sparse):
    """Goodput per kW at one boundary (None where its average power is unknown or not > 0)."""

    requests_per_s_per_kw: float | None = None
    output_tokens_per_s_per_kw: float | None = None
    avg_power_w: float | None = None


class Goodput(_Sparse):
    """Goodput of one level under ``--slo`` (``metrics.slo.goodput`` states the rule): the requests
    that succeeded and met every SLO, their output tokens, per second and per kW."""

    slos: list[SLOBound] = Field(default_factory=list)
    duration_s: float | None = None
    good_requests: int = 0
    total_requests: int = 0  # measured requests, failures included
    fraction: float | None = None  # good / total; None without a measured request
    requests_per_s: float = 0.0
    output_tokens_per_s: float = 0.0
    # tokens_in_window: the window's tokens times the good share of the measured requests' tokens
    # (as every efficiency figure); measured_request_tokens: the good requests' own tokens
    token_basis: Literal["tokens_in_window", "measured_request_tokens"] = "measured_request_tokens"
    # the good requests' share of the measured completed requests' output tokens (0..1): every goodput
    # token figure is this share of a window's output tokens (None: written before it was kept, or no
    # output token; ``metrics.slo.good_output_share`` recovers it from an older block)
    good_output_share: float | None = None
    per_slo: dict[str, int] = Field(default_factory=dict)  # SLO name -> requests meeting it alone
    level: dict[str, SLOCheck] = Field(default_factory=dict)  # SLO name -> the level's check
    all_met: bool = False  # every level check holds
    per_kw: dict[str, GoodputPerKw] = Field(default_factory=dict)  # boundary -> per kW

    @property
    def slo_text(self) -> str | None:
        """The SLOs as written (``ttft_p99=500ms,tpot_p99=50ms``); None without one."""
        if not self.slos:
            return None
        return ",".join(f"{s.metric}_{s.stat}={s.threshold_ms:g}ms" for s in self.slos)

    def per_kw_at(self, boundary: str | None) -> float | None:
        """Goodput output tokens/s per kW at ``boundary`` (None: not there, or no power)."""
        got = self.per_kw.get(boundary) if boundary else None
        return None if got is None else got.output_tokens_per_s_per_kw


# ---------------------------------------------------------------- thermal (accounting/thermal.py)


class DeviceThermal(_Sparse):
    """One device's thermal and clock state over a window (a key only where its channel reported)."""

    max_temperature_c: float | None = None
    min_sm_clock_mhz: float | None = None
    mean_sm_clock_mhz: float | None = None
    power_limit_w: float | None = None  # the last reading
    power_limit_changed: bool | None = None  # True: the limit moved within the window
    throttle_reasons: list[str] = Field(default_factory=list)  # every clock-event reason seen
    capping_fraction: float | None = None  # share of samples with a power or thermal capping bit


class Thermal(_Sparse):
    """The GPUs' thermal and clock state over a window, over all devices and per device
    (``accounting.thermal.thermal_summary``); ``{}`` where no auxiliary channel reported."""

    max_temperature_c: float | None = None
    mean_gpu_utilization_pct: float | None = None
    min_sm_clock_mhz: float | None = None
    mean_sm_clock_mhz: float | None = None
    throttle_reasons_seen: list[str] = Field(default_factory=list)
    capping_reasons_seen: list[str] = Field(default_factory=list)  # the reasons that mean capping
    power_limit_w: float | None = None  # the devices' last limits, summed
    cpu_mhz: float | None = None  # the host CPUs' mean current frequency (cpufreq), where readable
    devices: dict[str, DeviceThermal] = Field(default_factory=dict)


# ---------------------------------------------------------------- host CPUs (environment.py)


class HostCpu(_Sparse):
    """The host's CPUs over a window (``environment.host_cpu_between``): ``/proc/stat``'s counters
    and the processes' ``/proc/PID/stat`` times, read at its start and its end — nothing samples
    between. A share (``_pct``) is of all the host's CPU time over the window (its CPUs' clock
    ticks, steal included); ``_cores`` is CPU seconds per second (1.0: one core busy throughout).
    A key only where it was read: none off Linux, no server key where wattbench did not launch
    the server (``--target``)."""

    duration_s: float | None = None  # the window, between the two reads
    cpu_count: int | None = None  # CPUs online at the end (``cpuN`` lines of /proc/stat)
    cpu_count_start: int | None = None  # CPUs online at the start (a hot-plug moves it)
    busy_pct: float | None = None  # user, nice, system, irq and softirq time: neither idle, iowait nor steal
    steal_pct: float | None = None  # time the hypervisor gave the VM's CPUs to others
    iowait_pct: float | None = None  # idle time with I/O outstanding
    server_cpu_cores: float | None = None  # the launched engine's process tree (its descendants included)
    server_cpu_pct: float | None = None
    wattbench_cpu_cores: float | None = None  # wattbench's own process (its threads included)
    wattbench_cpu_pct: float | None = None

    @property
    def others_busy_pct(self) -> float | None:
        """The busy share neither the launched server nor wattbench's process used — the host's
        other processes (and the kernel's work for none of them); None without the server's share.
        Read at slightly different instants, so clamped at 0."""
        if self.busy_pct is None or self.server_cpu_pct is None:
            return None
        return max(0.0, self.busy_pct - self.server_cpu_pct - (self.wattbench_cpu_pct or 0.0))


# ---------------------------------------------------------------- server metrics (server/metrics.py)


class ServerMetrics(_Sparse):
    """The server's own Prometheus series over a window (``server.metrics.ServerTimeline.summary``):
    gauges as time-weighted mean and max, counters as their increase. ``available`` False: none
    were scraped (``reason`` says why). A key only where the engine exposes the series."""

    available: bool = False
    engine: str | None = None
    reason: str | None = None
    mean_running_requests: float | None = None
    max_running_requests: float | None = None
    mean_waiting_requests: float | None = None
    max_waiting_requests: float | None = None
    mean_kv_cache_usage_pct: float | None = None
    max_kv_cache_usage_pct: float | None = None
    prompt_tokens_delta: Num | None = None
    generation_tokens_delta: Num | None = None
    preemptions_delta: Num | None = None
    samples_in_window: int | None = None  # scrapes inside the window
    window_covered: bool | None = None  # a scrape at or before its start and at or after its end
