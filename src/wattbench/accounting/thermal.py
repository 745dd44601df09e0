"""Thermal and clock summary of a window, and the throttle-reason bits that mean capping.

Auxiliary channel quantities read (``Channel.quantity``; aliases accepted):
``temperature_c``, ``sm_clock_mhz``, ``clock_event_reasons`` (alias ``throttle_reasons``),
``power_limit_w``.

NVML clock-event ("throttle") reason bits that mean power or thermal capping (values checked
against ``pynvml.nvmlClocksEventReason*``):

======  ==========================  ======================================
bit     pynvml constant             meaning
======  ==========================  ======================================
0x04    SwPowerCap                  software power cap (power limit)
0x08    HwSlowdown                  hardware slowdown (power brake/thermal)
0x20    SwThermalSlowdown           software thermal slowdown
0x40    HwThermalSlowdown           hardware thermal slowdown
0x80    HwPowerBrakeSlowdown        external power brake
======  ==========================  ======================================

Other bits (GPU idle 0x1, application clocks 0x2, sync boost 0x10, display 0x100) are reported
but do not mean the figures were taken under capping.

``--precondition``'s rule (``temperature_settle`` over ``temperature_series``): the devices'
temperature has settled when each device's readings span at least ``PRECONDITION_COVER`` of the
last ``PRECONDITION_WINDOW_S`` and their Theil–Sen slope is within ±``PRECONDITION_SLOPE_C_PER_MIN``;
``run/prime.precondition`` loads the device until it holds, and the server's throughput over the
loads holds too (``metrics.drift.rounds_settle``, over the same window), or ``--precondition-max``
seconds (``PRECONDITION_MAX_S`` by default) pass.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from wattbench.core.schema import Thermal
from wattbench.metrics.drift import theil_sen
from wattbench.telemetry.base import TelemetryLog

CAPPING_BITS: dict[int, str] = {
    0x04: "sw_power_cap",
    0x08: "hw_slowdown",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
}
OTHER_BITS: dict[int, str] = {0x01: "gpu_idle", 0x02: "applications_clocks", 0x10: "sync_boost",
                              0x100: "display_clock"}
CAPPING_MASK = sum(CAPPING_BITS)

QUANTITIES = {
    "temperature_c": ("temperature_c", "gpu_temperature_c", "temperature"),
    "sm_clock_mhz": ("sm_clock_mhz", "clock_sm_mhz"),
    "throttle_reasons": ("clock_event_reasons", "throttle_reasons", "clocks_event_reasons"),
    "power_limit_w": ("power_limit_w", "enforced_power_limit_w"),
    "gpu_util_pct": ("gpu_util_pct", "utilization_pct", "gpu_utilization_pct"),
}


def reason_names(bits: int) -> list[str]:
    return [n for b, n in {**CAPPING_BITS, **OTHER_BITS}.items() if bits & b]


def _aux(log: TelemetryLog, what: str, t0: int, t1: int) -> dict[str, np.ndarray]:
    """device -> values of the aux quantity inside [t0, t1]."""
    out: dict[str, np.ndarray] = {}
    for c in log.channels.values():
        if c.kind != "aux" or c.quantity not in QUANTITIES[what]:
            continue
        t_raw, v_raw = log.series(c.id)
        t = np.asarray(t_raw, dtype=np.int64)
        v = np.asarray(v_raw, dtype=np.float64)
        sel = v[(t >= t0) & (t <= t1)]
        if len(sel):
            key = c.device or c.id
            out[key] = np.concatenate([out[key], sel]) if key in out else sel
    return out


def throttling(log: TelemetryLog, t0: int, t1: int) -> dict[str, dict[str, Any]]:
    """device -> {"bits": OR of all bits seen, "capping_fraction": share of samples with capping
    bits, "reasons": names}; only devices that report reasons."""
    res: dict[str, dict[str, Any]] = {}
    for dev, vals in _aux(log, "throttle_reasons", t0, t1).items():
        ints = vals.astype(np.int64)
        bits = int(np.bitwise_or.reduce(ints)) if len(ints) else 0
        res[dev] = {
            "bits": bits,
            "capping_fraction": float(np.mean((ints & CAPPING_MASK) != 0)),
            "reasons": reason_names(bits),
            "capping_reasons": [n for b, n in CAPPING_BITS.items() if bits & b],
        }
    return res


def thermal_summary(log: TelemetryLog, start_ns: int, end_ns: int) -> Thermal:
    """Max temperature, min/mean SM clock, mean GPU utilization, throttle reasons seen and power limit over the window,
    overall and per device (for ``LevelResult.thermal``)."""
    temps = _aux(log, "temperature_c", start_ns, end_ns)
    clocks = _aux(log, "sm_clock_mhz", start_ns, end_ns)
    limits = _aux(log, "power_limit_w", start_ns, end_ns)
    util = _aux(log, "gpu_util_pct", start_ns, end_ns)
    thr = throttling(log, start_ns, end_ns)
    devices: dict[str, dict[str, Any]] = {}
    for dev in sorted(set(temps) | set(clocks) | set(limits) | set(thr)):
        d: dict[str, Any] = {}
        if dev in temps:
            d["max_temperature_c"] = float(np.max(temps[dev]))
        if dev in clocks:
            d["min_sm_clock_mhz"] = float(np.min(clocks[dev]))
            d["mean_sm_clock_mhz"] = float(np.mean(clocks[dev]))
        if dev in limits:
            d["power_limit_w"] = float(limits[dev][-1])
            if np.ptp(limits[dev]) > 0:
                d["power_limit_changed"] = True
        if dev in thr:
            d["throttle_reasons"] = thr[dev]["reasons"]
            d["capping_fraction"] = thr[dev]["capping_fraction"]
        devices[dev] = d
    out: dict[str, Any] = {}
    if temps:
        out["max_temperature_c"] = max(float(np.max(v)) for v in temps.values())
    if util:
        out["mean_gpu_utilization_pct"] = float(np.mean(np.concatenate(list(util.values()))))
    if clocks:
        allc = np.concatenate(list(clocks.values()))
        out["min_sm_clock_mhz"] = float(np.min(allc))
        out["mean_sm_clock_mhz"] = float(np.mean(allc))
    if thr:
        out["throttle_reasons_seen"] = sorted({r for x in thr.values() for r in x["reasons"]})
        out["capping_reasons_seen"] = sorted({r for x in thr.values() for r in x["capping_reasons"]})
    if limits:
        out["power_limit_w"] = sum(float(v[-1]) for v in limits.values())
    if devices:
        out["devices"] = devices
    return Thermal.model_validate(out)


# --precondition (run/prime.precondition): the device is loaded until its temperature settles
PRECONDITION_WINDOW_S = 60.0  # the slope is read over the last minute of readings
PRECONDITION_SLOPE_C_PER_MIN = 1.0  # settled: every device's temperature moves by at most this
PRECONDITION_MAX_S = 600.0  # --precondition-max's default: past it the run measures on, and says it did not settle
PRECONDITION_COVER = 0.9  # the readings must span this share of the window before a slope is read


@dataclass(frozen=True)
class Settle:
    """Whether the devices' temperature has settled (``temperature_settle``): the steepest device's
    Theil–Sen slope over the window (°C/min), its last reading, and how much of the window the
    readings span (s; 0 without a temperature channel)."""

    settled: bool
    slope_c_per_min: float | None
    temperature_c: float | None
    covered_s: float
    devices: int = 0


def temperature_series(log: TelemetryLog, t0: int, t1: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """device -> (t_ns, °C) of its temperature readings inside [t0, t1]."""
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for c in log.channels.values():
        if c.kind != "aux" or c.quantity not in QUANTITIES["temperature_c"]:
            continue
        t_raw, v_raw = log.series(c.id)
        t = np.asarray(t_raw, dtype=np.int64)
        v = np.asarray(v_raw, dtype=np.float64)
        sel = (t >= t0) & (t <= t1)
        if sel.any():
            out[c.device or c.id] = (t[sel], v[sel])
    return out


def temperature_settle(series: dict[str, tuple[np.ndarray, np.ndarray]], window_s: float = PRECONDITION_WINDOW_S,
                       bound_c_per_min: float = PRECONDITION_SLOPE_C_PER_MIN) -> Settle:
    """Settled when every device's readings span at least ``PRECONDITION_COVER`` of ``window_s``
    and the Theil–Sen slope of each (``metrics.drift.theil_sen``: robust to the 1 °C steps of an
    integer sensor) is within ±``bound_c_per_min``. ``series``: the window's readings per device
    (``temperature_series``)."""
    if not series:
        return Settle(False, None, None, 0.0)
    slopes: list[float] = []
    covered = math.inf
    last: float | None = None
    for t, v in series.values():
        span_s = float(t[-1] - t[0]) / 1e9 if t.size else 0.0
        covered = min(covered, span_s)
        last = float(v[-1]) if last is None else max(last, float(v[-1]))
        tr = theil_sen(t / 1e9, v) if t.size >= 2 else None
        if tr is not None:
            slopes.append(tr.slope * 60.0)
    steepest = max(slopes, key=abs) if slopes else None
    full = covered >= PRECONDITION_COVER * window_s
    ok = full and steepest is not None and len(slopes) == len(series) and abs(steepest) <= bound_c_per_min
    return Settle(ok, steepest, last, covered if math.isfinite(covered) else 0.0, len(series))
