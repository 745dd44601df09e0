"""Energy from a power series (W) over a window ``[t0, t1]``: trapezoid integration.

* The series is cut to the window with values **linearly interpolated at both edges**; beyond
  the series' ends the nearest value is held (and the uncovered stretch lowers coverage).
* Intervals longer than ``gap_factor × p`` (p: expected period, see ``sampling``) are **gaps**:
  the trapezoid still bridges them linearly, but they are counted, their time is reported and
  they lower coverage (and so raise the uncertainty).
* **p95 / p99 power** are *time-weighted* over the window polyline (each point weighted by half
  of its adjacent intervals, as the trapezoid rule weights it), so a burst of fine samples (NVML's
  20 ms buffer) does not outvote coarse ones; **max** is the largest point.
* **Edge error** bound: at each edge, half the difference of the bracketing samples times the
  part of that interval inside the window (how far a linear guess can be from a step either way).
* **Declared** channels (``const:BOUNDARY=W``) integrate exactly to ``W × window``: the value is
  the latest reading at or before ``t1`` (else the first reading), and coverage is 1 by definition.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from wattbench.accounting.sampling import (
    DEFAULT_GAP_FACTOR,
    coverage,
    expected_period_s,
    power_stats,
    trapezoid_j,
    window_polyline,
)


@dataclass
class PowerIntegral:
    energy_j: float | None
    avg_power_w: float | None
    p95_power_w: float | None
    p99_power_w: float | None
    max_power_w: float | None
    coverage: float
    largest_gap_s: float
    gaps: int
    gap_s: float
    update_period_s: float
    edge_error_j: float
    samples: int  # readings inside the window
    notes: list[str] = field(default_factory=list)
    poly_t_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    poly_w: np.ndarray = field(default_factory=lambda: np.zeros(0))


def declared_energy(t_ns: npt.ArrayLike, values: npt.ArrayLike, t0: int, t1: int) -> PowerIntegral:
    """A declared constant: ``W × window`` exactly."""
    t = np.asarray(t_ns, dtype=np.int64)
    v = np.asarray(values, dtype=np.float64)
    if len(v) == 0:
        return PowerIntegral(None, None, None, None, None, 0.0, (t1 - t0) / 1e9, 1, (t1 - t0) / 1e9, 0.0, 0.0, 0,
                             notes=["declared channel has no reading; value unknown"])
    before = np.flatnonzero(t <= t1)
    w = float(v[before[-1]] if len(before) else v[0])
    dur = (t1 - t0) / 1e9
    return PowerIntegral(w * dur, w, w, w, w, 1.0, 0.0, 0, 0.0, 0.0, 0.0, int(np.sum((t >= t0) & (t <= t1))),
                         poly_t_ns=np.array([t0, t1], dtype=np.int64), poly_w=np.array([w, w]))


def power_energy(
    t_ns: npt.ArrayLike,
    values: npt.ArrayLike,
    t0: int,
    t1: int,
    *,
    update_period_s: float | None = None,
    gap_factor: float = DEFAULT_GAP_FACTOR,
    declared: bool = False,
) -> PowerIntegral:
    """Energy (J) of a power series over ``[t0, t1]`` (monotonic ns) by the trapezoid rule."""
    if declared:
        return declared_energy(t_ns, values, t0, t1)
    t = np.asarray(t_ns, dtype=np.int64)
    v = np.asarray(values, dtype=np.float64)
    order = np.argsort(t, kind="stable")
    t, v = t[order], v[order]
    win_s = (t1 - t0) / 1e9
    if len(t) == 0 or win_s <= 0:
        return PowerIntegral(None, None, None, None, None, 0.0, max(win_s, 0.0), 1, max(win_s, 0.0),
                             update_period_s or 0.0, 0.0, 0, notes=["power: no readings"])
    i0 = max(0, int(np.searchsorted(t, t0, side="right")) - 2)
    i1 = min(len(t), int(np.searchsorted(t, t1, side="left")) + 2)
    t, v = t[i0:i1], v[i0:i1]
    p = expected_period_s(t, update_period_s)
    tt, vv = window_polyline(t, v, t0, t1)
    energy = trapezoid_j(tt, vv)
    stats = power_stats(tt, vv)

    def edge_err(x: int) -> float:
        k = int(np.searchsorted(t, x, side="right"))
        if k == 0 or k >= len(t):
            return 0.0  # held value beyond the series: counted as uncovered time instead
        inside = (min(int(t[k]), t1) - x) if x == t0 else (x - max(int(t[k - 1]), t0))
        return 0.5 * abs(float(v[k] - v[k - 1])) * max(inside, 0) / 1e9

    cov = coverage(t, t0, t1, gap_factor * p) if p > 0 else coverage(t, t0, t1, win_s)
    notes = []
    if cov.gaps:
        notes.append(f"{cov.gaps} gap(s) totalling {cov.gap_s:.3f} s bridged by linear interpolation")
    return PowerIntegral(
        energy_j=energy, avg_power_w=energy / win_s, coverage=cov.coverage, largest_gap_s=cov.largest_gap_s,
        gaps=cov.gaps, gap_s=cov.gap_s, update_period_s=p, edge_error_j=edge_err(t0) + edge_err(t1),
        samples=int(np.sum((t >= t0) & (t <= t1))), notes=notes, poly_t_ns=tt, poly_w=vv, **stats,
    )
