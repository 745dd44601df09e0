"""Thinning plot data so long runs stay small without losing peaks.

Only shaping: no figure shown in a report is computed here.

- ``minmax_indices``: split the time span into equal-time buckets (about one per pixel column);
  keep, per bucket, the sample with the smallest and the one with the largest value, plus the
  first and last sample. Every local peak and dip survives; a 1 h run at 10 Hz per channel
  (36,000 samples) is drawn from at most ``max_points`` samples.
- ``ecdf_points``: sorted values with their cumulative fraction; above ``max_points`` values,
  evenly spaced ranks are kept (always the smallest and the largest).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

DEFAULT_MAX_POINTS = 4000


def minmax_indices(t: np.ndarray, v: np.ndarray, max_points: int = DEFAULT_MAX_POINTS) -> np.ndarray:
    """Indices (sorted) of the samples to draw; all of them when there are few enough.

    ``t`` must be sorted ascending. NaN values are never chosen as min/max but do not break
    the bucket they fall in.
    """
    t = np.asarray(t)
    v = np.asarray(v, dtype=float)
    n = t.size
    if n <= max_points:
        return np.arange(n)
    if max_points < 4:
        raise ValueError("max_points must be >= 4")
    buckets = (max_points - 2) // 2
    t0, t1 = float(t[0]), float(t[-1])
    if t1 <= t0:
        bucket_id = (np.arange(n) * buckets // n).astype(np.int64)
    else:
        bucket_id = np.minimum(((t.astype(float) - t0) / (t1 - t0) * buckets).astype(np.int64), buckets - 1)
    finite = np.isfinite(v)
    idx = np.nonzero(finite)[0]
    keep = [np.array([0, n - 1])]
    if idx.size:
        b = bucket_id[idx]
        order = idx[np.lexsort((v[idx], b))]  # grouped by bucket, ascending value inside
        bo = bucket_id[order]
        starts = np.r_[0, np.nonzero(np.diff(bo))[0] + 1]
        ends = np.r_[starts[1:] - 1, order.size - 1]
        keep += [order[starts], order[ends]]
    return np.unique(np.concatenate(keep))


def thin_series(t: np.ndarray, v: np.ndarray, max_points: int = DEFAULT_MAX_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """``(t, v)`` reduced with ``minmax_indices``."""
    t = np.asarray(t)
    v = np.asarray(v)
    i = minmax_indices(t, v, max_points)
    return t[i], v[i]


def ecdf_points(values: Sequence[float | None] | np.ndarray, max_points: int = 2000) -> tuple[np.ndarray, np.ndarray]:
    """``(x, fraction)`` of the empirical CDF of the finite values (None left out), thinned to
    ``max_points``."""
    x = np.asarray([a for a in values if a is not None], dtype=float)
    x = np.sort(x[np.isfinite(x)])
    n = x.size
    if n == 0:
        return x, x
    frac = np.arange(1, n + 1) / n
    if n > max_points:
        i = np.unique(np.linspace(0, n - 1, max_points).round().astype(np.int64))
        return x[i], frac[i]
    return x, frac
