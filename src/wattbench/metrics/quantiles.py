"""Exact statistics of a stream of values too long to hold: numpy's figures, in bounded memory.

A level's inter-chunk gaps (ITL) are as many as its tokens: millions in a long level. They come as
a **source**: a callable that, each time it is called, yields the stream's values anew as float64
arrays (blocks), always the same values in the same order (``Blocks``). From it:

- ``pairwise_sum(source, n)``: ``np.sum`` of the concatenated stream, bit for bit. numpy sums a
  contiguous float64 array pairwise: ``n <= 128`` values with eight running sums, more split at
  ``n2 = n // 2`` rounded down to a multiple of 8 and the halves added. The split depends only
  on ``n``, so the stream is cut into the same subtrees (each at most ``NODE`` values, summed by
  numpy itself) and their sums are added in the same tree;
- ``moments(source)``: count, mean, min, max and population std exactly as ``a.mean()``,
  ``a.min()``, ``a.max()``, ``a.std()`` (numpy's two-pass ``std``: the mean, then the pairwise
  sum of squared deviations);
- ``order_statistics(source, ranks)``: the values of given ranks (0-based, ascending) by
  multi-pass narrowing: values are mapped to an order-preserving unsigned 64-bit key (the float's
  bits, the sign bit flipped for positives and all bits for negatives); each pass counts the
  values of each still-open key interval in ``BINS`` bins and keeps the bin holding the wanted
  rank, until the interval is a single key (ties, all-equal values) or holds at most ``COLLECT``
  values, which are then gathered and sorted. Memory: ``BINS`` counters and ``COLLECT`` values
  per wanted rank, whatever the stream's length;
- ``percentiles(source, qs)``: ``np.percentile(a, qs)`` (method ``linear``) bit for bit: numpy's
  virtual index ``(n - 1) * q / 100``, its neighbours and its interpolation (``_lerp``: from the
  lower value below gamma 0.5, from the upper one above).

Input must be free of NaN (the statistics here are of times). ``n == 0`` gives no figure.
"""

from __future__ import annotations

from typing import Callable, Iterable, Iterator, Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["Blocks", "pairwise_sum", "moments", "order_statistics", "percentiles", "lerp_percentiles",
           "NODE", "BINS", "COLLECT"]

NODE = 1 << 16  # largest subtree of the pairwise sum handed to numpy at once
BINS = 1 << 14  # bins per narrowing pass
COLLECT = 1 << 16  # an interval with at most this many values is gathered and sorted

_SIGN = np.uint64(1 << 63)

Source = Callable[[], Iterable[NDArray[np.float64]]]  # a re-iterable stream of float64 blocks (``Blocks``)
Transform = Callable[[NDArray[np.float64]], NDArray[np.float64]]  # applied to each block before it is summed


class Blocks:
    """A re-iterable stream of float64 blocks: ``Blocks(make)`` where ``make()`` returns a fresh
    iterable of arrays each time (the same values in the same order)."""

    def __init__(self, make: Callable[[], Iterable[ArrayLike]]):
        self._make = make

    def __call__(self) -> Iterator[NDArray[np.float64]]:
        for b in self._make():
            a = np.ascontiguousarray(b, dtype=np.float64).ravel()
            if a.size:
                yield a

    @classmethod
    def of(cls, values: ArrayLike) -> "Blocks":
        """One array as a stream (for tests and small inputs)."""
        a = np.asarray(values, dtype=np.float64)
        return cls(lambda: [a])


class _Reader:
    """Hands out the stream's next ``m`` values, block boundaries hidden."""

    def __init__(self, blocks: Iterator[NDArray[np.float64]], transform: Transform | None = None):
        self._it = blocks
        self._tf = transform
        self._buf: NDArray[np.float64] = np.zeros(0)
        self._pos = 0

    def take(self, m: int) -> NDArray[np.float64]:
        parts: list[NDArray[np.float64]] = []
        while m > 0:
            if self._pos >= self._buf.size:
                b = next(self._it)
                self._buf = self._tf(b) if self._tf is not None else b
                self._pos = 0
            k = min(m, self._buf.size - self._pos)
            parts.append(self._buf[self._pos: self._pos + k])
            self._pos += k
            m -= k
        return parts[0] if len(parts) == 1 else np.concatenate(parts)


def pairwise_sum(source: Source, n: int, transform: Transform | None = None) -> float:
    """``np.sum`` of the first ``n`` values of the stream (``transform`` applied to each block
    first), with numpy's pairwise summation tree (module docstring). ``n`` must be the count."""
    if n <= 0:
        return 0.0
    reader = _Reader(iter(source()), transform)

    def node(m: int) -> np.float64:
        if m <= NODE:
            total: np.float64 = np.add.reduce(np.ascontiguousarray(reader.take(m)))
            return total
        m2 = m // 2
        m2 -= m2 % 8
        left = node(m2)
        return left + node(m - m2)

    return float(node(n))


def moments(source: Source) -> tuple[int, float | None, float | None, float | None, float | None]:
    """``(count, mean, min, max, std)`` of the stream as numpy computes them on the whole array
    (population std); ``(0, None, None, None, None)`` when empty."""
    n = 0
    lo: np.float64 | None = None
    hi: np.float64 | None = None
    for b in source():
        n += b.size
        bmin, bmax = b.min(), b.max()
        lo = bmin if lo is None or bmin < lo else lo
        hi = bmax if hi is None or bmax > hi else hi
    if n == 0 or lo is None or hi is None:  # (lo and hi are set once a value came)
        return 0, None, None, None, None
    mean = np.float64(pairwise_sum(source, n)) / n
    sq = pairwise_sum(source, n, transform=lambda b: np.square(b - mean))
    std = float(np.sqrt(np.float64(sq) / n))
    return n, float(mean), float(lo), float(hi), std


def _keys(a: NDArray[np.float64]) -> NDArray[np.uint64]:
    """Order-preserving uint64 keys of float64 values (-0.0 taken as 0.0)."""
    b = (a + 0.0).view(np.uint64)
    return np.where(b & _SIGN, ~b, b | _SIGN)


def _value(k: np.uint64) -> float:
    k = np.uint64(k)
    bits = (k & ~_SIGN) if (k & _SIGN) else ~k
    return float(np.array([bits], dtype=np.uint64).view(np.float64)[0])


def order_statistics(source: Source, ranks: Sequence[int], *, bins: int = BINS,
                     collect: int = COLLECT) -> dict[int, float]:
    """``{rank: value}``: the ``rank``-th smallest value (0-based) of the stream for each rank, as
    ``np.sort(a)[rank]`` (module docstring). Ranks must lie in ``[0, n)``."""
    kmin: np.uint64 | None = None
    kmax: np.uint64 | None = None
    n = 0
    for b in source():  # the first pass: the count and the key range
        k = _keys(b)
        n += k.size
        bmin, bmax = k.min(), k.max()
        kmin = bmin if kmin is None or bmin < kmin else kmin
        kmax = bmax if kmax is None or bmax > kmax else kmax
    out: dict[int, float] = {}
    want = sorted(set(int(r) for r in ranks))
    if any(r < 0 or r >= n for r in want):
        raise ValueError(f"ranks {want} outside [0, {n})")
    # each open rank: (lo_key, hi_key, values below lo, values inside or None when unknown)
    if kmin is None or kmax is None:  # no value, so no rank to find (refused above)
        return out
    open_: dict[int, tuple[int, int, int, int]] = {r: (int(kmin), int(kmax), 0, n) for r in want}
    shift_bits = max(1, int(bins).bit_length() - 1)
    while open_:
        for r, (lo, hi, _, _) in list(open_.items()):
            if lo == hi:
                out[r] = _value(np.uint64(lo))
                del open_[r]
        if not open_:
            break
        intervals = sorted({(lo, hi, below, inside) for lo, hi, below, inside in open_.values()})
        # each interval's plan: (lo, hi, shift, the keys collected (a list) or a histogram's counts)
        plans: list[tuple[int, int, int, list[NDArray[np.uint64]] | NDArray[np.int64]]] = []
        for lo, hi, below, inside in intervals:
            if inside <= collect:
                plans.append((lo, hi, 0, []))
            else:
                shift = max(0, (hi - lo).bit_length() - shift_bits)
                plans.append((lo, hi, shift, np.zeros(((hi - lo) >> shift) + 1, dtype=np.int64)))
        for b in source():
            k = _keys(b)
            for lo, hi, shift, acc in plans:
                sel = k[(k >= np.uint64(lo)) & (k <= np.uint64(hi))]
                if not sel.size:
                    continue
                if isinstance(acc, list):
                    acc.append(sel)
                else:
                    idx = ((sel - np.uint64(lo)) >> np.uint64(shift)).astype(np.int64)
                    acc += np.bincount(idx, minlength=acc.size)
        sorted_keys: dict[tuple[int, int, int, int], NDArray[np.uint64]] = {}
        cumulative: dict[tuple[int, int, int, int], tuple[NDArray[np.int64], int]] = {}
        for interval, (_, _, shift, acc) in zip(intervals, plans):
            if isinstance(acc, list):
                sorted_keys[interval] = np.sort(np.concatenate(acc)) if acc else np.zeros(0, dtype=np.uint64)
            else:
                cumulative[interval] = (np.cumsum(acc), shift)
        for r, key in list(open_.items()):
            lo, hi, below, _ = key
            if key in sorted_keys:
                out[r] = _value(sorted_keys[key][r - below])
                del open_[r]
                continue
            cum, shift = cumulative[key]
            j = int(np.searchsorted(cum, r - below, side="right"))
            before = int(cum[j - 1]) if j else 0
            new_lo = lo + (j << shift)
            new_hi = min(hi, new_lo + (1 << shift) - 1)
            open_[r] = (new_lo, new_hi, below + before, int(cum[j]) - before)
    return out


def lerp_percentiles(n: int, qs: ArrayLike, value_at: Callable[[int], float]) -> list[float]:
    """numpy's ``linear`` percentiles of ``n`` sorted values, ``value_at(i)`` giving the ``i``-th
    smallest: the same index arithmetic and interpolation as ``np.percentile`` (see
    ``numpy.lib._function_base_impl._quantile`` and ``_lerp``)."""
    q = np.true_divide(np.asarray(qs), 100)
    virtual = (n - 1) * q
    prev = np.floor(virtual)
    nxt = prev + 1
    above = virtual >= n - 1
    prev[above] = -1
    nxt[above] = -1
    below = virtual < 0
    prev[below] = 0
    nxt[below] = 0
    prev_i, nxt_i = prev.astype(np.intp), nxt.astype(np.intp)
    gamma = np.asarray(virtual - prev_i, dtype=virtual.dtype)
    a = np.array([value_at(int(i) % n) for i in prev_i], dtype=np.float64)
    b = np.array([value_at(int(i) % n) for i in nxt_i], dtype=np.float64)
    diff = b - a
    res = np.add(a, diff * gamma)
    np.subtract(b, diff * (1 - gamma), out=res, where=gamma >= 0.5)
    values: list[float] = res.tolist()
    return values


def percentiles(source: Source, qs: ArrayLike, n: int | None = None) -> list[float] | None:
    """``np.percentile(a, qs)`` of the stream (a list, one per ``q``), ``None`` when it is empty."""
    if n is None:
        n = sum(b.size for b in source())
    if n == 0:
        return None
    q = np.true_divide(np.asarray(qs), 100)
    virtual = (n - 1) * q
    prev = np.floor(virtual).astype(np.intp)
    ranks = {min(max(int(i), 0), n - 1) for i in prev} | {min(max(int(i) + 1, 0), n - 1) for i in prev}
    got = order_statistics(source, sorted(ranks))
    return lerp_percentiles(n, qs, got.__getitem__)
