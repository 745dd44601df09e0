"""Idle baseline: per-boundary idle power, and the idle/dynamic split of a load window.

``idle_power_w`` for a boundary is its energy over an idle window divided by the window's
duration (the same accounting as a load window). With a window before the first level and one
after the last, the two powers are averaged (plain mean) and ``drift_pct`` =
``100 × (after − before) / before`` is reported: a large drift means the machine's idle state
changed (temperature, clocks, a background job) and the split below is less certain.

For a load window of duration ``T`` with gross energy ``E``::

    idle_energy_j    = idle_power_w × T
    dynamic_energy_j = E − idle_energy_j

and its uncertainty adds the absolute errors of both (one meter, so not independent)::

    dynamic_uncertainty_pct = (E·u_E + idle_energy_j·u_idle) / dynamic_energy_j
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from wattbench.accounting.boundaries import boundary_totals
from wattbench.telemetry.base import TelemetryLog


@dataclass
class IdlePower:
    boundary: str
    power_w: float
    duration_s: float
    before_w: float | None = None
    after_w: float | None = None
    drift_pct: float | None = None
    uncertainty_pct: float | None = None
    method: str = ""
    label: str = "measured"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def measure_idle(
    log: TelemetryLog,
    start_ns: int,
    end_ns: int,
    *,
    after_start_ns: int | None = None,
    after_end_ns: int | None = None,
    pue: float = 1.0,
) -> dict[str, IdlePower]:
    """Idle power per boundary from ``[start_ns, end_ns]`` and, when given, an idle window after
    the last level (``[after_start_ns, after_end_ns]``)."""
    before = {b: t for b, t in boundary_totals(log, start_ns, end_ns, pue=pue).items() if t.avg_power_w is not None}
    after = {}
    if after_start_ns is not None and after_end_ns is not None and after_end_ns > after_start_ns:
        after = {b: t for b, t in boundary_totals(log, after_start_ns, after_end_ns, pue=pue).items()
                 if t.avg_power_w is not None}
    out: dict[str, IdlePower] = {}
    for b in list(before) + [b for b in after if b not in before]:
        pb = before[b].avg_power_w if b in before else None
        pa = after[b].avg_power_w if b in after else None
        ref = before.get(b) or after[b]
        vals = [p for p in (pb, pa) if p is not None]
        dur = sum(x.duration_s for x in (before.get(b), after.get(b)) if x is not None)
        drift = 100.0 * (pa - pb) / pb if pb and pa is not None else None
        u = ref.uncertainty_pct
        if drift is not None and u is not None:
            u = (u**2 + (drift / 2) ** 2) ** 0.5
        out[b] = IdlePower(boundary=b, power_w=sum(vals) / len(vals), duration_s=dur, before_w=pb, after_w=pa,
                           drift_pct=drift, uncertainty_pct=u, method=ref.method, label=ref.label)
    return out


def idle_split(gross_energy_j: float | None, idle_power_w: float | None, duration_s: float
               ) -> tuple[float | None, float | None]:
    """``(idle_energy_j, dynamic_energy_j)`` of a window."""
    if idle_power_w is None:
        return None, None
    idle_j = idle_power_w * duration_s
    return idle_j, (None if gross_energy_j is None else gross_energy_j - idle_j)


def dynamic_uncertainty_pct(
    gross_energy_j: float | None, gross_pct: float | None, idle_energy_j: float | None, idle_pct: float | None
) -> float | None:
    """Uncertainty of ``gross − idle``: the two absolute errors add linearly (same meter, so not
    independent), relative to the dynamic energy. ``None`` when the dynamic energy is not positive."""
    if gross_energy_j is None or gross_pct is None or idle_energy_j is None or idle_pct is None:
        return None
    dyn = gross_energy_j - idle_energy_j
    if dyn <= 0:
        return None
    return (abs(gross_energy_j) * gross_pct + abs(idle_energy_j) * idle_pct) / dyn
