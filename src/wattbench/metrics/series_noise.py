"""A configuration's run-to-run noise in the history: its figure over its runs in time order, split
at its change points, the spread pooled within the segments (pure functions; docs/compare.md
"Configuration identity"). ``results/store_noise`` reads a configuration's series from the history
store and calls ``series_noise``; ``SeriesNoise.noise`` is the ``history`` basis of
``metrics/figure_noise`` that ``metrics/noise.judge`` judges with.

**Change points** (``series_noise``): a run whose figure lies beyond the noise of the segment
before it — ``|ln x − median(segment)| > t(0.975, df) · s · sqrt(1 + 1/m)`` with ``s`` the spread
pooled so far (``df`` >= 2) — or, while the series has fewer than 2 df to know its noise, moves by
more than ``MAX_BOUND`` (a spread that wide would leave every verdict inconclusive anyway), starts a
new segment. A move under ``MIN_CHANGE`` (5%) never does (it stays in the spread, widening it). The
change between segments is therefore never folded into the spread; a lone outlier becomes a
segment of one run and adds no degree of freedom. The runs being judged stay in their segments —
the pooled-variance rule of a two-sample test — since a change between them is a change point,
not spread; two of them in one segment are left out of its spread (each is a group of its own in
that test, contributing no degree of freedom: a spread never holds the difference it judges, or a
regression would widen the very noise that excuses it). ``history noise``, ``compare`` and
``regress`` read one spread of a configuration's figure and say it in one sentence
(``history_text``): the configuration's runs, the same count everywhere, and where a comparison
left its own runs out, how many, with the sd and degrees of freedom of what remains.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

from wattbench.metrics.figure_noise import (
    MAX_BOUND, MIN_DF, FigureNoise, history_text, pooled_sd, spread_noise, t_975,
)

MIN_CHANGE = 0.05  # a move smaller than this is never a change point (it stays in the spread)
MAX_LOG_RATIO = 690.0  # ln of the largest ratio written (e^690 ≈ 1e300 is finite, e^710 overflows)


@dataclass(frozen=True)
class ChangePoint:
    """A run whose figure lay beyond the noise of the runs of its configuration before it: the
    start of a new segment (``series_noise``)."""

    index: int  # its position in the series (time order)
    run_id: str | None
    ratio: float  # its figure ÷ the median of the segment before it
    bound: float | None  # the relative bound it lay beyond; None: the series had < MIN_DF df (MAX_BOUND)

    def text(self, what: str = "", why: bool = True) -> str:
        """``c=16 moved -59% at run X (beyond its noise ±4.0%): a configuration change?`` (``why``
        False: without the parenthesis, ``beyond()`` gives it)."""
        who = f"run {self.run_id}" if self.run_id else f"run #{self.index + 1}"
        lead = f"{what} moved" if what else "moved"
        because = f" ({self.beyond()})" if why else ""
        return f"{lead} {(self.ratio - 1) * 100:+.0f}% at {who}{because}: a configuration change?"

    def beyond(self) -> str:
        """What it moved beyond: the series' noise, or ±25% while that was not yet known."""
        return (f"beyond its noise ±{self.bound * 100:.1f}%" if self.bound is not None
                else f"more than ±{MAX_BOUND * 100:.0f}% before its noise was known")


@dataclass(frozen=True)
class SeriesNoise:
    """The run-to-run noise of one configuration's figure over its runs in time order, split at its
    change points (module docstring): ``rel_sd`` is the pooled within-segment sd of ``ln(figure)``
    with ``df`` degrees of freedom (None with none)."""

    values: tuple[float, ...]
    run_ids: tuple[str | None, ...]
    segments: tuple[tuple[int, ...], ...]  # indices into values, in time order
    change_points: tuple[ChangePoint, ...]
    rel_sd: float | None
    df: int
    left_out: int = 0  # runs judged by a comparison, left out of the spread (``series_noise``)

    @property
    def runs(self) -> int:
        return len(self.values)

    def noise(self, key: str | None = None) -> FigureNoise | None:
        """One more run's 95% half-width, ``t(0.975, df) · rel_sd`` (``spread_noise``)."""
        return (spread_noise(self.rel_sd, self.runs, self.df, key, len(self.segments), self.left_out)
                if self.df >= 1 else None)

    def text(self, key: str | None = None) -> str:
        """Its basis in the one sentence (``history_text``)."""
        return history_text(self.runs, self.rel_sd, self.df, key, len(self.segments), self.left_out)

    def last_segment(self) -> tuple[float, ...]:
        return tuple(self.values[i] for i in self.segments[-1]) if self.segments else ()


def _exp(x: float) -> float:
    """``e^x`` held to a finite float: two imported figures of one configuration 1e-300 and 1e300
    apart are a change point of ratio ~1e300, not an OverflowError for the whole history."""
    return math.exp(min(x, MAX_LOG_RATIO))


def _median(xs: Sequence[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2.0


def _pooled(logs: Sequence[float], segments: Sequence[Sequence[int]]) -> tuple[float | None, int]:
    return pooled_sd([[logs[i] for i in seg] for seg in segments])


def series_noise(values: Sequence[float], run_ids: Sequence[str | None] | None = None,
                 judged: Iterable[str] = ()) -> SeriesNoise | None:
    """Split one configuration's figures (one per run, in time order) at its change points and pool
    the spread within the segments (module docstring "Change points"). ``judged``: the runs a
    comparison judges; two of them in one segment are left out of its spread (a spread never holds
    the difference it judges: ``SeriesNoise.left_out`` counts them), while in separate segments each
    stays in its own (their difference is a change point, not spread). None without a positive
    value."""
    pairs = [(float(v), (run_ids[i] if run_ids is not None else None)) for i, v in enumerate(values)
             if v is not None and math.isfinite(float(v)) and float(v) > 0]
    if not pairs:
        return None
    vals = [v for v, _ in pairs]
    ids = [r for _, r in pairs]
    logs = [math.log(v) for v in vals]
    segments: list[list[int]] = [[0]]
    cps: list[ChangePoint] = []
    for i in range(1, len(vals)):
        seg = segments[-1]
        centre = _median([logs[k] for k in seg])
        move = logs[i] - centre
        sd, df = _pooled(logs, segments)
        if sd is not None and df >= MIN_DF:
            bound = t_975(df) * sd * math.sqrt(1.0 + 1.0 / len(seg))
            limit: float | None = bound
        else:
            bound, limit = math.log1p(MAX_BOUND), None
        if abs(move) > max(bound, math.log1p(MIN_CHANGE)):
            cps.append(ChangePoint(i, ids[i], _exp(move), None if limit is None else math.expm1(limit)))
            segments.append([i])
        else:
            seg.append(i)
    judged = set(judged)
    spread_segments = []
    left_out = 0
    for seg in segments:
        inside = [i for i in seg if ids[i] is not None and ids[i] in judged]
        if len(inside) >= 2:
            spread_segments.append([i for i in seg if i not in inside])
            left_out += len(inside)
        else:
            spread_segments.append(seg)
    sd, df = _pooled(logs, spread_segments)
    return SeriesNoise(values=tuple(vals), run_ids=tuple(ids), segments=tuple(tuple(s) for s in segments),
                       change_points=tuple(cps), rel_sd=sd, df=df, left_out=left_out)
