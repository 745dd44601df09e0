"""Sampling geometry shared by counters and power series: expected period, gaps, coverage,
window polylines and time-weighted percentiles.

Definitions (documented in docs/accounting.md):

* **expected period** ``p``: ``max(channel.update_period_s, median interval between points)``.
  The median guards against a sampler that polls slower than the meter updates (every interval
  would otherwise look like a gap); the declared period guards against a sampler that polls
  faster than the meter refreshes.
* **gap**: an interval between consecutive points longer than ``gap_factor * p``
  (``DEFAULT_GAP_FACTOR`` = 3). The stretch between a window edge and the nearest point beyond it
  (when the series does not reach the edge) is an interval too.
* **coverage**: the fraction of the window not inside a gap (0..1).
* **largest gap**: the longest interval (full length, not clipped to the window) that overlaps
  the window.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DEFAULT_GAP_FACTOR = 3.0


@dataclass
class Coverage:
    coverage: float
    largest_gap_s: float
    gaps: int
    gap_s: float  # time inside the window covered by gaps


def expected_period_s(t_ns: np.ndarray, declared_s: float | None) -> float:
    """``max(declared, median point interval)``; 0.0 when neither is known."""
    med = float(np.median(np.diff(t_ns))) / 1e9 if len(t_ns) >= 2 else 0.0
    return max(declared_s or 0.0, med)


def coverage(t_ns: np.ndarray, t0: int, t1: int, max_gap_s: float) -> Coverage:
    """Coverage of ``[t0, t1]`` by the points ``t_ns`` (sorted) given the largest tolerated interval."""
    win = (t1 - t0) / 1e9
    if win <= 0:
        return Coverage(1.0, 0.0, 0, 0.0)
    if len(t_ns) == 0:
        return Coverage(0.0, win, 1, win)
    # segments: (start, end, full_length_s); edge stretches measured from the edge to the data
    starts = [min(t0, int(t_ns[0]))] + [int(x) for x in t_ns]
    ends = [int(t_ns[0])] + [int(x) for x in t_ns[1:]] + [max(t1, int(t_ns[-1]))]
    largest = 0.0
    gap_s = 0.0
    gaps = 0
    for a, b in zip(starts, ends):
        lo, hi = max(a, t0), min(b, t1)
        if hi <= lo:
            continue
        full = (b - a) / 1e9
        largest = max(largest, full)
        if full > max_gap_s:
            gaps += 1
            gap_s += (hi - lo) / 1e9
    return Coverage(max(0.0, 1.0 - gap_s / win), largest, gaps, gap_s)


def interp_at(t_ns: np.ndarray, v: np.ndarray, t: int) -> float:
    """Linear interpolation of ``v`` at ``t``; the nearest value is held beyond the ends."""
    base = int(t_ns[0])
    return float(np.interp(float(t - base), (t_ns - base).astype(np.float64), v))


def window_polyline(t_ns: np.ndarray, v: np.ndarray, t0: int, t1: int) -> tuple[np.ndarray, np.ndarray]:
    """Points of a series inside ``(t0, t1)`` plus linearly interpolated values at both edges
    (values held beyond the series' ends). Times in ns (int64)."""
    inside = (t_ns > t0) & (t_ns < t1)
    tt = np.concatenate(([t0], t_ns[inside], [t1])).astype(np.int64)
    vv = np.concatenate(([interp_at(t_ns, v, t0)], v[inside], [interp_at(t_ns, v, t1)])).astype(np.float64)
    return tt, vv


def trapezoid_j(tt: np.ndarray, vv: np.ndarray) -> float:
    if len(tt) < 2:
        return 0.0
    dt = np.diff(tt).astype(np.float64) / 1e9
    return float(np.sum((vv[:-1] + vv[1:]) * 0.5 * dt))


def sum_polylines(lines: list[tuple[np.ndarray, np.ndarray]], t0: int, t1: int) -> tuple[np.ndarray, np.ndarray]:
    """Sum several window polylines on the union of their time points (each interpolated linearly)."""
    if not lines:
        return np.array([t0, t1], dtype=np.int64), np.zeros(2)
    grid = np.unique(np.concatenate([t for t, _ in lines] + [np.array([t0, t1], dtype=np.int64)]))
    grid = grid[(grid >= t0) & (grid <= t1)]
    total = np.zeros(len(grid))
    for t, v in lines:
        total += np.interp((grid - t0).astype(np.float64), (t - t0).astype(np.float64), v)
    return grid, total


def time_weights(tt: np.ndarray) -> np.ndarray:
    """Weight of each polyline point: half of each adjacent interval (trapezoid weights), in s."""
    if len(tt) < 2:
        return np.ones(len(tt))
    dt = np.diff(tt).astype(np.float64) / 1e9
    w = np.zeros(len(tt))
    w[:-1] += dt / 2
    w[1:] += dt / 2
    return w


def weighted_percentile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    """The smallest value whose cumulative weight share reaches ``q`` (0..100)."""
    order = np.argsort(values, kind="stable")
    v = values[order]
    cw = np.cumsum(weights[order])
    if cw[-1] <= 0:
        return float(np.percentile(values, q))
    idx = int(np.searchsorted(cw, q / 100.0 * cw[-1] - 1e-12 * cw[-1], side="left"))
    return float(v[min(idx, len(v) - 1)])


def power_stats(tt: np.ndarray, vv: np.ndarray) -> dict[str, float]:
    """p95, p99 (time-weighted over polyline points) and max power of a window polyline."""
    w = time_weights(tt)
    return {
        "p95_power_w": weighted_percentile(vv, w, 95.0),
        "p99_power_w": weighted_percentile(vv, w, 99.0),
        "max_power_w": float(np.max(vv)),
    }
