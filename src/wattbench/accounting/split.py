"""Where an accelerator's watts go: its memory (HBM) vs the rest of the board, idle vs dynamic.

Pure: from one window's per-boundary energies (``BoundaryEnergy``, as ``account_window`` gives
them). Needs both ``accelerator`` (the board) and ``accelerator_memory`` (the part of it the board
reports as memory power: NVML's memory scope, on an H200 a 1 s average field); ``None`` otherwise.

* memory  = the ``accelerator_memory`` figure;
* rest    = ``accelerator`` − ``accelerator_memory`` (the memory boundary is inside the board's,
            telemetry.base.CONTAINS, so the difference is everything else on the board: compute,
            on-chip memory, IO, conversion losses);
* each part's average power, idle power (the idle baseline measured before the load; the rest's
  idle = board idle − memory idle) and dynamic power (average − idle), its energy, and its share
  of the board's energy;
* uncertainty in percent: memory's own; the rest's absolute uncertainty is the sum of the board's
  and the memory's (the two meters share a sensor, so the errors are taken as correlated, the
  conservative choice, as accounting/uncertainty.py does for sums) divided by the rest's energy.

Where an idle baseline is missing for either boundary, the idle and dynamic figures are ``None``
for every part (a partial split would not add up).
"""

from __future__ import annotations

from typing import Any

from wattbench.core.schema import BoundaryEnergy

BOARD, MEMORY = "accelerator", "accelerator_memory"


def power_split(energy: dict[str, BoundaryEnergy], duration_s: float) -> dict[str, Any] | None:
    """The memory / rest-of-board split of one window, or None when it cannot be made."""
    board, mem = energy.get(BOARD), energy.get(MEMORY)
    if board is None or mem is None or board.energy_j is None or mem.energy_j is None or duration_s <= 0:
        return None
    if board.energy_j <= 0:
        return None
    rest_j = board.energy_j - mem.energy_j
    board_idle_w, mem_idle_w = board.idle_power_w, mem.idle_power_w
    idle_ok = board_idle_w is not None and mem_idle_w is not None
    parts = {
        "memory": _part(mem.energy_j, mem_idle_w if idle_ok else None, duration_s, board.energy_j),
        "rest": _part(rest_j, board_idle_w - mem_idle_w if board_idle_w is not None and mem_idle_w is not None
                      else None, duration_s, board.energy_j),
    }
    parts["memory"]["uncertainty_pct"] = mem.uncertainty_pct
    parts["rest"]["uncertainty_pct"] = _rest_uncertainty(board, mem, rest_j)
    return {
        "board_energy_j": board.energy_j,
        "board_avg_power_w": board.energy_j / duration_s,
        "board_idle_power_w": board.idle_power_w if idle_ok else None,
        "memory_share": mem.energy_j / board.energy_j,
        "parts": parts,
        "memory_channels": list(mem.channels),
        "notes": ["rest = accelerator − accelerator_memory; memory from the board's own memory-power reading"]
        + ([] if idle_ok else ["no idle baseline for both boundaries: idle/dynamic split not made"]),
    }


def _part(energy_j: float, idle_w: float | None, duration_s: float, board_j: float) -> dict[str, Any]:
    avg = energy_j / duration_s
    return {
        "energy_j": energy_j,
        "avg_power_w": avg,
        "idle_power_w": idle_w,
        "dynamic_power_w": avg - idle_w if idle_w is not None else None,
        "idle_energy_j": idle_w * duration_s if idle_w is not None else None,
        "dynamic_energy_j": energy_j - idle_w * duration_s if idle_w is not None else None,
        "share": energy_j / board_j,
    }


def _rest_uncertainty(board: BoundaryEnergy, mem: BoundaryEnergy, rest_j: float) -> float | None:
    if (board.uncertainty_pct is None or mem.uncertainty_pct is None or board.energy_j is None
            or mem.energy_j is None or rest_j <= 0):
        return None
    abs_j = board.uncertainty_pct / 100 * board.energy_j + mem.uncertainty_pct / 100 * mem.energy_j
    return 100 * abs_j / rest_j

