"""The validity gates the ML.ENERGY benchmark applies to a measurement, as wattbench reads them.

Each gate wattbench can read is a finding named as that gate (``FindingKind.GATE_*``: its summary
starts ``ML.ENERGY gate:``), judged under the materiality rule (``accounting.findings``): a gate
whose failure biases no figure by an estimated amount is a ``note`` (the figure is measured, it is
only not comparable with a figure that passed the gate); one whose failure puts a figure outside
what the device can give is judged by its size against the efficiency bound.

=====================================================  ===============================================
gate                                                   how wattbench reads it
=====================================================  ===============================================
steady window ≥ 30 s                                   ``GATE_STEADY_WINDOW``: the level's steady-state
                                                       window (``LevelResult.steady_window``); a note
                                                       (how short a steady state biases the figures is
                                                       wattbench's own ``steady_short`` rule)
power within the device's range                        ``GATE_POWER_RANGE``: the measured accelerator
                                                       power's average against the boards' power limit
                                                       (``Thermal.power_limit_w``, NVML): judged by the
                                                       overshoot (a meter reading more than the board
                                                       can draw)
temperature in range                                   the thermal capping the GPU reported
                                                       (``clocks_capped`` with a thermal reason,
                                                       ``accounting/validity.py``): named as this gate
the running batch ≥ 80% of the server's limit          not read: the level holds the server's running
                                                       count (``server_metrics``) but not its limit
                                                       (``max_num_seqs`` is not exposed by vLLM)
< 30% of answers hitting the output cap                not read: wattbench forces output lengths by
                                                       default (every answer at its cap by design)
=====================================================  ===============================================
"""

from __future__ import annotations

from wattbench.accounting.findings import EFFICIENCY_MATERIAL_PCT, Finding, judged, rule
from wattbench.core.schema import FindingKind, LevelResult

STEADY_GATE_S = 30.0  # ML.ENERGY: a measurement's steady window is at least 30 s
GATE = "ML.ENERGY gate"


def steady_gate(level: LevelResult) -> Finding | None:
    """A ``note`` when the level's steady-state window is shorter than ``STEADY_GATE_S``."""
    w = level.steady_window
    if w is None or w.duration_s is None or w.duration_s >= STEADY_GATE_S or not level.requests.completed:
        return None
    return rule(FindingKind.GATE_STEADY_WINDOW, "note",
                f"{GATE}: steady window ≥ {STEADY_GATE_S:g} s not met: {w.duration_s:.1f} s (the figures are "
                f"measured, but not comparable with a benchmark that requires it; longer levels: --duration)",
                ("efficiency", "throughput"), summary=f"{GATE}: steady window ≥ {STEADY_GATE_S:g} s not met")


def power_range_gate(level: LevelResult) -> Finding | None:
    """The measured accelerator power above the boards' power limit (summed over the devices, as
    the accelerator boundary sums them): judged by the overshoot in percent."""
    be = level.energy.get("accelerator")
    limit = level.thermal.power_limit_w if level.thermal is not None else None
    if be is None or be.label != "measured" or be.avg_power_w is None or not limit or limit <= 0:
        return None
    over = 100.0 * (be.avg_power_w / limit - 1.0)
    if over <= 0:
        return None
    return judged(FindingKind.GATE_POWER_RANGE,
                  f"{GATE}: power within the device's range not met: the accelerator averaged {be.avg_power_w:.0f} W, "
                  f"{over:.1f}% above its boards' power limit of {limit:.0f} W (a reading the device cannot draw: "
                  "check which devices the meter covers)",
                  ("energy", "efficiency"), over, EFFICIENCY_MATERIAL_PCT,
                  summary=f"{GATE}: power within the device's range not met")


def gate_findings(level: LevelResult) -> list[Finding]:
    """Every gate above that the level fails, in the table's order."""
    return [f for f in (steady_gate(level), power_range_gate(level)) if f is not None]
