"""Energy from a cumulative energy counter (J) over a window ``[t0, t1]``.

Algorithm (docs/accounting.md, "Counters"):

1. **Collapse repeats.** A counter refreshes on its own schedule (NVML about every 100 ms) however
   often it is read, so a run of identical values is one refresh seen several times, not a gap.
   Each distinct value is kept once, at the time it was *first* seen: the refresh happened
   between the previous read and that moment, so the first-seen time is the closest bound.
2. **Deltas.** For consecutive points, ``d = v[i] - v[i-1]``:
   * ``d >= 0``: normal;
   * ``d < 0`` and ``max_value`` known: a **wrap**, ``d += max_value``;
   * ``d < 0`` without ``max_value``, or any delta whose implied power ``d / dt`` is implausible
     (above ``max_power_w`` when given, else above ``IMPLAUSIBLE_FACTOR`` × the median implied
     power of the normal intervals), or a wrap whose corrected delta implies more than
     ``WRAP_LOCAL_FACTOR`` × the larger of its neighbouring intervals' power (on a wrapping counter
     a reset otherwise reads as a wrap adding up to ``max_value``): a **reset**. Its delta is skipped and the interval's energy
     is taken from ``fill(t_a, t_b)`` (the integral of a power channel of the same device) when
     given, else interpolated as the mean power of the neighbouring normal intervals × dt; the
     interpolated energy is reported (``fill_interp_j``) and enters the uncertainty.
3. **Edges.** The unwrapped cumulative series is interpolated at ``t0`` and ``t1``. Beyond the
   series' ends it is extrapolated at the power of the nearest interval (and the uncovered stretch
   lowers coverage). Inside the bracketing interval ``[t_k, t_k+1]`` (delta ``d_k``):
   * with ``shape(a, b)`` (the energy a finer power channel of the same device integrates over
     ``[a, b]``, None where it does not cover it) the delta is apportioned by the power's own
     shape: ``cum(x) = cum_k + d_k · S(t_k, x) / S(t_k, t_k+1)``. This is what lets the counter be
     read seldom (NVML: ~3–5 ms of CPU per read on an H200, so wattbench reads it about once a
     second) while the edges keep the power channel's time resolution. Edge error: one declared
     update period's energy (the value's own timing) plus ``min(f, 1 − f) · |d_k − S_k|`` (how far
     the shape can misplace the part of the delta it apportions when the two meters disagree over
     the bracket; ``f`` the fraction);
   * otherwise linearly; because a value's time is only known to within one period ``p`` (the
     larger of the declared update period and the median interval between distinct values), the
     edge error is ``p × P(bracket)``.
   ``edge_error_j`` sums both edges and is carried into the uncertainty. When both edges were
   shaped, the reported ``update_period_s`` is the declared one (the edges' resolution).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt

from wattbench.accounting.sampling import DEFAULT_GAP_FACTOR, coverage, expected_period_s

IMPLAUSIBLE_FACTOR = 50.0
WRAP_LOCAL_FACTOR = 3.0


@dataclass
class CounterEnergy:
    energy_j: float | None
    coverage: float
    largest_gap_s: float
    gaps: int
    wraps: int
    resets: int
    update_period_s: float
    edge_error_j: float
    fill_j: float = 0.0  # energy of reset intervals taken from fill() (a power channel)
    fill_interp_j: float = 0.0  # energy of reset intervals interpolated from neighbours
    points: int = 0  # distinct values used
    notes: list[str] = field(default_factory=list)
    # counter-derived power timeline (interval midpoints, W), for percentiles
    power_t_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    power_w: np.ndarray = field(default_factory=lambda: np.zeros(0))


def collapse_repeats(t_ns: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Keep the first sample of each run of identical values."""
    if len(v) == 0:
        return t_ns, v
    keep = np.ones(len(v), dtype=bool)
    keep[1:] = v[1:] != v[:-1]
    return t_ns[keep], v[keep]


def classify_deltas(t: np.ndarray, v: np.ndarray, *, max_value: float | None = None,
                    max_power_w: float | None = None
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Step 2 of the algorithm over a sorted, repeat-collapsed series: ``(d, dt_s, power_w, wrap,
    reset)`` per interval, ``d`` already corrected for wraps (reset intervals keep their raw delta)."""
    d = np.diff(v)
    dt = np.diff(t).astype(np.float64) / 1e9
    wrap = np.zeros(len(d), dtype=bool)
    reset = np.zeros(len(d), dtype=bool)
    if max_value:
        wrap = d < 0
        d = np.where(wrap, d + max_value, d)
    else:
        reset = d < 0
    power = np.where(dt > 0, d / np.where(dt > 0, dt, 1.0), np.inf)
    normal = ~reset & ~wrap
    limit = max_power_w
    if limit is None:
        good = power[normal & (d > 0)]
        limit = IMPLAUSIBLE_FACTOR * float(np.median(good)) if len(good) >= 3 else np.inf
    implausible = ~reset & (power > limit)
    # a wrap must also look like its neighbours: on a wrapping counter a reset reads as a "wrap"
    # adding up to max_value, which shows as a power far above the intervals around it
    for i in np.flatnonzero(wrap & ~implausible):
        neigh = [power[j] for j in (i - 1, i + 1) if 0 <= j < len(d) and normal[j] and d[j] >= 0]
        if neigh and power[i] > WRAP_LOCAL_FACTOR * max(neigh):
            implausible[i] = True
    reset |= implausible
    wrap &= ~reset
    return d, dt, power, wrap, reset


def counter_power_w(t_ns: npt.ArrayLike, values: npt.ArrayLike, *, max_value: float | None = None,
                    max_power_w: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Power between consecutive distinct counter values, stamped at the interval midpoint, for
    drawing a channel that has no power reading. Repeats are collapsed and wraps corrected as in
    ``counter_energy``; reset (and implausible) intervals are dropped, not interpolated."""
    t = np.asarray(t_ns, dtype=np.int64)
    v = np.asarray(values, dtype=np.float64)
    order = np.argsort(t, kind="stable")
    t, v = collapse_repeats(t[order], v[order])
    if len(t) < 2:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    _, dt, power, _, reset = classify_deltas(t, v, max_value=max_value, max_power_w=max_power_w)
    keep = ~reset & (dt > 0)
    mid = (t[:-1] + (t[1:] - t[:-1]) // 2).astype(np.int64)
    return mid[keep], power[keep].astype(float)


def _fill_resets(t: np.ndarray, d: np.ndarray, dt: np.ndarray, power: np.ndarray, reset: np.ndarray,
                 overlap: np.ndarray, fill: Callable[[int, int], float | None] | None) -> tuple[float, float, int]:
    """Replace the deltas of reset intervals in place (``d``, ``power``): from the power channel
    (``fill``) where it has the interval, else the mean power of the valid neighbouring intervals.
    Returns (J filled from power, J interpolated, intervals filled from power), window overlap only."""
    fill_j = 0.0
    fill_interp_j = 0.0
    valid = ~reset
    filled_from_power = 0
    for i in np.flatnonzero(reset):
        e = fill(int(t[i]), int(t[i + 1])) if fill else None
        if e is not None:
            d[i] = e
            power[i] = e / dt[i] if dt[i] > 0 else 0.0
            if overlap[i]:
                fill_j += e
                filled_from_power += 1
            continue
        neigh = [power[j] for j in (i - 1, i + 1) if 0 <= j < len(d) and valid[j]]
        if not neigh:
            neigh = list(power[valid]) or [0.0]
        power[i] = float(np.mean(neigh))
        d[i] = power[i] * dt[i]
        if overlap[i]:
            fill_interp_j += d[i]
    return fill_j, fill_interp_j, filled_from_power


def counter_energy(
    t_ns: npt.ArrayLike,
    values: npt.ArrayLike,
    t0: int,
    t1: int,
    *,
    max_value: float | None = None,
    update_period_s: float | None = None,
    gap_factor: float = DEFAULT_GAP_FACTOR,
    max_power_w: float | None = None,
    fill: Callable[[int, int], float | None] | None = None,
    shape: Callable[[int, int], float | None] | None = None,
) -> CounterEnergy:
    """Energy (J) a cumulative counter recorded over ``[t0, t1]`` (monotonic ns)."""
    t = np.asarray(t_ns, dtype=np.int64)
    v = np.asarray(values, dtype=np.float64)
    order = np.argsort(t, kind="stable")
    t, v = collapse_repeats(t[order], v[order])
    win_s = (t1 - t0) / 1e9
    if len(t) < 2 or win_s <= 0:
        cov = coverage(t, t0, t1, (gap_factor * (update_period_s or 0.0)) or win_s)
        return CounterEnergy(None, cov.coverage if len(t) >= 2 else 0.0, cov.largest_gap_s, cov.gaps, 0, 0,
                             update_period_s or 0.0, 0.0, points=len(t),
                             notes=["counter: fewer than two distinct values; no energy"])
    # restrict to the bracketing neighbourhood (two extra points each side for fill neighbours)
    i0 = max(0, int(np.searchsorted(t, t0, side="right")) - 3)
    i1 = min(len(t), int(np.searchsorted(t, t1, side="left")) + 3)
    t, v = t[i0:i1], v[i0:i1]

    p = expected_period_s(t, update_period_s)
    d, dt, power, wrap, reset = classify_deltas(t, v, max_value=max_value, max_power_w=max_power_w)

    notes: list[str] = []
    overlap = (t[1:] > t0) & (t[:-1] < t1)
    fill_j, fill_interp_j, filled_from_power = _fill_resets(t, d, dt, power, reset, overlap, fill)

    cum = np.concatenate(([0.0], np.cumsum(d)))
    tf = (t - t0).astype(np.float64)
    declared_p = update_period_s or p

    def edge(x: float, side: Literal["left", "right"]) -> tuple[float, float, bool]:
        """(cumulative energy at x, its error bound, shaped?)"""
        # the interval holding the edge; an edge on a point takes the interval inside the window
        k = int(np.clip(np.searchsorted(tf, x, side=side) - 1, 0, len(power) - 1))
        bound = p * abs(float(power[k]))
        if x <= tf[0]:
            return cum[0] - power[0] * (tf[0] - x) / 1e9, bound, False
        if x >= tf[-1]:
            return cum[-1] + power[-1] * (x - tf[-1]) / 1e9, bound, False
        if shape is not None and 0 < x - tf[k] < tf[k + 1] - tf[k] and not reset[k]:
            whole = shape(int(t[k]), int(t[k + 1]))
            part = shape(int(t[k]), t0 + int(x)) if whole else None
            if whole and part is not None and whole > 0 and 0 <= part <= whole:
                f = part / whole
                err = declared_p * abs(float(power[k])) + min(f, 1 - f) * abs(float(d[k]) - whole)
                return float(cum[k] + d[k] * f), err, True
        return float(np.interp(x, tf, cum)), bound, False

    a, b = 0.0, float(t1 - t0)
    (ca, ea, sa), (cb, eb, sb) = edge(a, "right"), edge(b, "left")
    energy = cb - ca
    edge_err = ea + eb

    wraps = int(np.sum(wrap & overlap))
    resets = int(np.sum(reset & overlap))
    if resets:
        notes.append(
            f"counter reset in {resets} interval(s): energy there from the power channel in {filled_from_power}, "
            f"interpolated from neighbouring intervals in {resets - filled_from_power}"
        )
    if wraps:
        notes.append(f"counter wrapped {wraps} time(s) (max_value {max_value:g} J)")
    cov = coverage(t, t0, t1, gap_factor * p)
    mid = ((t[:-1] + t[1:]) // 2).astype(np.int64)
    return CounterEnergy(
        energy_j=float(energy), coverage=cov.coverage, largest_gap_s=cov.largest_gap_s, gaps=cov.gaps,
        wraps=wraps, resets=resets, update_period_s=declared_p if (sa and sb) else p, edge_error_j=float(edge_err), fill_j=float(fill_j),
        fill_interp_j=float(fill_interp_j), points=len(t), notes=notes, power_t_ns=mid, power_w=power.astype(float),
    )
