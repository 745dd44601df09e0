"""Uncertainty (percent) of every energy figure.

Formula for one channel's energy ``E`` over a window (all terms in percent of ``E``, treated as
independent and added in quadrature)::

    u = sqrt(u_meter² + u_edge² + u_gap² + u_fill² + u_cross²)

    u_meter  the meter's stated accuracy (``Channel.uncertainty_pct``, else the table below)
    u_edge   100 × edge_error_j / E   (counter: one update period's energy at each edge;
                                        power: half the bracketing step over the edge stretch)
    u_gap    100 × (1 − coverage)     (time bridged by interpolation is taken as unknown to
                                        within its own share of the window)
    u_fill   100 × fill_interp_j / E  (counter-reset intervals filled by interpolation)
    u_cross  |diff_pct| of counter vs power integral, when both exist for the device

A boundary made of several devices or parts sums **absolute** uncertainties (``Σ u_i·E_i / ΣE_i``):
devices of one kind share a calibration, so their errors are treated as fully correlated — the
conservative choice. A PUE-scaled facility figure keeps its source's relative uncertainty (the PUE
is taken as given).

Default meter accuracy when the channel states none (``DEFAULT_METER_PCT``):

=================  =====  ==================================================================
sensor             ±%     source
=================  =====  ==================================================================
nvml, nvidia-smi,  5      NVML API reference, ``nvmlDeviceGetPowerUsage``: "On Fermi and Kepler
dcgm, prometheus          GPUs the reading is accurate to within +/- 5% of current power draw";
                          NVIDIA publishes no figure for newer GPUs (an H200 included), so there
                          the 5% is an assumption. nvidia-smi(1) "Power Draw … accurate to within
                          +/- 5 watts". DCGM reads NVML. The counter integrates the same sensor,
                          so it inherits the same accuracy. A channel may state its own
                          (the H200's 1 s average memory power states 10%, telemetry/nvml.py).
rapl (cpu)         5      Khan et al., "RAPL in Action", ACM TOMPECS 3(2), 2018; Hackenberg et
                          al., "An Energy Efficiency Feature Survey of the Intel Haswell
                          Processor", IPDPSW 2015 (package RAPL tracks external measurement
                          closely from Haswell on).
rapl (dram)        10     Desrochers, Paradis, Weaver, "A Validation of DRAM RAPL Power
                          Measurements", MEMSYS 2016 (DRAM RAPL within ~±20% at worst, better
                          on server parts).
jetson (INA3221)   5      TI INA3221 datasheet: gain error ≤0.25 %, shunt offset ±80 µV, plus
                          shunt tolerance; 5% covers low-current rails.
amd (amdsmi)       10     no published accuracy; conservative.
ipmi, redfish      10     DCMI/BMC readings come from PSU PMBus telemetry, typically ±2–5% at
                          high load and worse at light load; vendors rarely publish a figure.
external / wall    1      revenue-grade PDUs and plug meters: IEC 62053-21 class 1 (±1%).
declared           20     a nameplate or user-declared figure; override with the channel's own.
estimate           50     utilization × TDP models; order-of-magnitude only.
other measured     10     unknown meter.
=================  =====  ==================================================================
"""

from __future__ import annotations

import math

from wattbench.telemetry.base import Channel

DEFAULT_METER_PCT: dict[str, float] = {
    "nvml": 5.0,
    "nvidia-smi": 5.0,
    "nvidia_smi": 5.0,
    "dcgm": 5.0,
    "prometheus": 5.0,
    "rapl_cpu": 5.0,
    "rapl_dram": 10.0,
    "jetson": 5.0,
    "amd": 10.0,
    "ipmi": 10.0,
    "redfish": 10.0,
    "external": 1.0,
    "declared": 20.0,
    "estimate": 50.0,
    "other": 10.0,
}


def meter_pct(ch: Channel) -> float:
    """The channel's stated accuracy, else the documented default for its sensor kind."""
    if ch.uncertainty_pct is not None:
        return float(ch.uncertainty_pct)
    if ch.method == "declared":
        return DEFAULT_METER_PCT["declared"]
    if ch.method == "estimate":
        return DEFAULT_METER_PCT["estimate"]
    name = f"{ch.sensor} {ch.source}".lower()
    if "rapl" in name or "powercap" in name:
        return DEFAULT_METER_PCT["rapl_dram" if ch.boundary == "dram" else "rapl_cpu"]
    for key in ("nvidia-smi", "nvidia_smi", "nvml", "dcgm", "prometheus", "jetson", "amd", "ipmi", "redfish"):
        if key in name:
            return DEFAULT_METER_PCT[key]
    if any(k in name for k in ("external", "wall", "meter", "pdu")) or ch.boundary == "wall":
        return DEFAULT_METER_PCT["external"]
    return DEFAULT_METER_PCT["other"]


def combine_pct(
    energy_j: float | None,
    *,
    meter_pct: float,
    edge_error_j: float = 0.0,
    coverage: float = 1.0,
    fill_interp_j: float = 0.0,
    cross_diff_pct: float | None = None,
) -> tuple[float | None, dict[str, float]]:
    """The quadrature sum above; returns (total %, the parts)."""
    if energy_j is None:
        return None, {}
    e = abs(energy_j)
    parts = {
        "meter": float(meter_pct),
        "edge": 100.0 * edge_error_j / e if e > 0 else 0.0,
        "gap": 100.0 * max(0.0, 1.0 - coverage),
        "fill": 100.0 * fill_interp_j / e if e > 0 else 0.0,
        "cross_check": abs(cross_diff_pct) if cross_diff_pct is not None else 0.0,
    }
    return math.sqrt(sum(x * x for x in parts.values())), parts


def sum_pct(items: list[tuple[float | None, float | None]]) -> float | None:
    """Relative uncertainty of a sum of figures ``(energy_j, pct)``: absolute errors added linearly."""
    tot = sum(e for e, _ in items if e is not None)
    known = [(e, u) for e, u in items if e is not None and u is not None]
    if not items or len(known) < len(items) or tot <= 0:
        return None
    return sum(abs(e) * u / 100.0 for e, u in known) / tot * 100.0
