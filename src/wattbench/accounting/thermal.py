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
"""

from __future__ import annotations

from typing import Any

import numpy as np

from wattbench.core.schema import Thermal
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
