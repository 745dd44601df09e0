"""Whether a level's figures move while it is measured, and where its warm-up ends: pure functions
over per-second series (docs/accounting.md "Stationarity").

Trend (``theil_sen``)
---------------------
The slope of ``y`` over ``t`` is the Theil–Sen estimate: the median of the pairwise slopes
``(y_j − y_i) / (t_j − t_i)`` over every pair with ``t_j > t_i``; the line passes through the
median of ``y − slope · t``. Its confidence interval is Sen's (1968), distribution-free: with
``N`` pairwise slopes sorted, ``C = z · sqrt(n(n−1)(2n+5)/18)`` (the standard deviation of
Kendall's S), the interval runs from the ``(N − C)/2``-th to the ``(N + C)/2 + 1``-th slope
(1-based, rounded to the nearest). One outlier moves neither the slope nor its interval much,
where a least-squares slope would follow it. A series longer than ``MAX_POINTS`` is averaged in
consecutive groups first (the pairwise slopes grow as n²).

A relative change is fitted on the log scale (``theil_sen(..., log=True)``; ``trend``,
``trials_trend`` and ``rounds_settle`` always): the line is fitted to ``ln y``, so its slope is a
rate (``ln`` per unit of ``t``: −ln 2 / 10 for a series that halves every 10 s) and the change over
a span (``Trend.change``, ``Trend.relative``) is ``exp(slope · span) − 1`` — the last fitted value ÷
the first − 1 — with the interval's ends the same way, ``exp(low · span) − 1 … exp(high · span) − 1``.
Why not the slope of ``y`` itself, relative to its fitted start: a throughput, a power, a per-kW
figure, a J/token or a ratio of two of them is positive, and a straight line through a steep fall
extrapolates through zero — the interval of a −56% fall read −108% … −3%, a negative throughput.
On the log scale every end is above −100% and a change of +100% is as large as one of −50% (slopes
``±ln 2``): a rise and a fall of the same factor read alike, where the linear reading sized a fall
against a start it had already left. ``exp`` is monotone, so whether the interval excludes 0 is the
same question on either scale (``moves``). A log fit leaves out the points whose value is zero,
negative or non-finite (a second in which nothing was produced has no logarithm), and averages a
long series' groups in ``ln y`` (geometric means). So ``4,323 → 3,915 → 3,657`` over three trials
reads −15.4%: the median of the three pairwise log slopes is the first-to-last one,
``ln(3,657 / 4,323) / 2``, and ``exp(2 × that) − 1 = 3,657 / 4,323 − 1``.

A linear fit (``log=False``, the default of ``theil_sen``) keeps the slope in the series' own unit
per unit of ``t`` — the GPU temperature's °C/min (``accounting/thermal.py``), which is not a
relative figure — and has no relative change (``change`` None).

Drift (``Trend.moves``)
-----------------------
A series *moves* when the ``DRIFT_CONFIDENCE`` (99%) interval of its change excludes 0: the
change is larger than the series' own noise. The 99% (not 95%) interval is there because every
level of every run is tested, on several figures: at 95% one steady level in twenty would be
named. Whether a move matters is the materiality rule's (``accounting/drift.py``: a move below
the efficiency bound is a ``note``, at or above it a ``drift`` warning, and a drifting figure is
never judged within or beyond noise: ``metrics/noise.judge``).

The trend of a level's trial figures (``trials_trend``: the trial index as ``t``) gives the words
"drifts −15% over its 3 trials"; with three trials it cannot exclude 0 at 99% on its own (3
pairwise slopes), so the decision rests on the per-second series of the trials together (their
timestamps kept: the slope is per second of the run's clock, the gaps between trials included).

Settling (``rounds_settle``)
----------------------------
``--precondition``'s throughput rule over load rounds (each round's span and output tokens/s): the
rounds of the last window (at least ``SETTLE_MIN_ROUNDS``, spanning most of it) have settled when
their change over the window (the log-scale Theil–Sen slope's, ``exp(slope · window) − 1``) is
within ±``SETTLE_CHANGE_PCT`` % and its interval within ±``SETTLE_SCATTER_PCT`` % (the function's
docstring; docs/accounting.md §10c).

Warm-up (``mser``)
------------------
MSER-5 (White 1997; Franklin & White 2008): the series is averaged in batches of ``MSER_BATCH``
(5) points, ``Z_1 … Z_m``; the truncation point is the ``d`` (0 ≤ d ≤ m/2) that minimises
``Σ_{j>d} (Z_j − Z̄_d)² / (m − d)²`` — the standard error of the mean of what is kept, as if the
kept batches were independent. Dropping a warm-up lowers it (its batches are far from the
mean); dropping steady batches raises it (fewer kept). A level's steady window is checked
against it in ``accounting/drift.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Sequence

import numpy as np
import numpy.typing as npt

from wattbench.core.schema import FigureKey, FigureTrend, Stationarity

DRIFT_CONFIDENCE = 0.99  # the interval of a change that must exclude 0 for a series to move
MAX_POINTS = 600  # a longer series is averaged in consecutive groups before the pairwise slopes
MIN_POINTS = 4  # fewer points: no trend (no interval can exclude 0 with 3 at 99%)
MSER_BATCH = 5  # MSER-5: points per batch
MSER_MIN_BATCHES = 4  # fewer batches: no truncation estimate

__all__ = ["Trend", "theil_sen", "trend", "trials_trend", "mser", "Mser", "DRIFT_CONFIDENCE", "MSER_BATCH",
           "figure_drift", "recorded_trend", "trends_apart", "RoundsSettle", "rounds_settle", "SETTLE_CHANGE_PCT",
           "SETTLE_MIN_ROUNDS", "SETTLE_SCATTER_PCT"]


@dataclass(frozen=True)
class Trend:
    """A Theil–Sen line through a series — through ``ln y`` where ``log`` — and, for a log fit, its
    change over the series' span relative to the fitted start (module docstring). ``low`` / ``high``:
    the ``confidence`` interval of the slope (None where the series is too short for one)."""

    slope: float  # per unit of t (per second for a per-second series, per trial for trials); of ln y where log
    low: float | None
    high: float | None
    start: float  # the fitted value at the first t (in y's unit: exp of the fitted ln y where log)
    span: float  # last t − first t
    n: int  # points the slope rests on (after any averaging)
    confidence: float = DRIFT_CONFIDENCE
    log: bool = False  # fitted to ln y: the slope is a rate, its change exp(slope · span) − 1

    def relative(self, slope: float | None, span: float | None = None) -> float | None:
        """``slope`` (the trend's own, or an end of its interval) as a fraction of change over ``span``
        (the series' own by default): ``exp(slope · span) − 1``, always above −1. None for a linear fit
        (its slope is in the series' unit: a relative change is read from a log fit only)."""
        if slope is None or not self.log:
            return None
        return math.expm1(slope * (self.span if span is None else span))

    @property
    def change(self) -> float | None:
        """The fitted change over the span, a fraction of the fitted start (−0.154: −15.4%)."""
        return self.relative(self.slope)

    @property
    def change_low(self) -> float | None:
        return self.relative(self.low)

    @property
    def change_high(self) -> float | None:
        return self.relative(self.high)

    @property
    def moves(self) -> bool:
        """The interval of the slope excludes 0: the series changes by more than its noise."""
        if self.low is None or self.high is None:
            return False
        return self.low > 0 or self.high < 0


def _z(confidence: float) -> float:
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def _thin(t: np.ndarray, y: np.ndarray, max_points: int) -> tuple[np.ndarray, np.ndarray]:
    """Average consecutive groups so that at most ``max_points`` remain (order kept)."""
    n = t.size
    if n <= max_points:
        return t, y
    groups = np.array_split(np.arange(n), max_points)
    return (np.array([t[g].mean() for g in groups]), np.array([y[g].mean() for g in groups]))


def theil_sen(t: Sequence[float] | npt.NDArray[np.floating], y: Sequence[float] | npt.NDArray[np.floating], confidence: float = DRIFT_CONFIDENCE,
              max_points: int = MAX_POINTS, *, log: bool = False) -> Trend | None:
    """The Theil–Sen slope of ``y`` over ``t`` with Sen's ``confidence`` interval (module
    docstring); of ``ln y`` where ``log`` (a relative change: the points whose ``y`` is not above 0
    are left out too). Points with a non-finite value are left out; None with fewer than two
    distinct ``t``. The interval is None below ``MIN_POINTS`` points."""
    ta = np.asarray(t, dtype=np.float64)
    ya = np.asarray(y, dtype=np.float64)
    ok = np.isfinite(ta) & np.isfinite(ya)
    if log:
        ok &= ya > 0
    ta, ya = ta[ok], ya[ok]
    if log:
        ya = np.log(ya)
    order = np.argsort(ta, kind="stable")
    ta, ya = _thin(ta[order], ya[order], max_points)
    n = ta.size
    if n < 2:
        return None
    i, j = np.triu_indices(n, k=1)
    dt = ta[j] - ta[i]
    keep = dt > 0
    if not keep.any():
        return None
    slopes = np.sort((ya[j] - ya[i])[keep] / dt[keep])
    slope = float(np.median(slopes))
    start = float(np.median(ya - slope * ta)) + slope * float(ta[0])
    if log:
        start = math.exp(start)
    low = high = None
    if n >= MIN_POINTS:
        big_n = slopes.size
        c = _z(confidence) * math.sqrt(n * (n - 1) * (2 * n + 5) / 18.0)
        m1 = int(round((big_n - c) / 2.0))  # 1-based rank of the lower end
        m2 = int(round((big_n + c) / 2.0)) + 1  # 1-based rank of the upper end
        if m1 >= 1 and m2 <= big_n:
            low, high = float(slopes[m1 - 1]), float(slopes[m2 - 1])
    return Trend(slope=slope, low=low, high=high, start=start, span=float(ta[-1] - ta[0]), n=int(n),
                 confidence=confidence, log=log)


def trend(t_s: Sequence[float], values: Sequence[float], confidence: float = DRIFT_CONFIDENCE) -> Trend | None:
    """The relative trend of a per-second series of a positive figure (``t_s`` in seconds on one
    clock): ``theil_sen`` on the log scale (module docstring)."""
    return theil_sen(t_s, values, confidence, log=True)


def trials_trend(values: Sequence[float | None]) -> Trend | None:
    """The trend of a level's trial figures in trial order (a trial with no figure is left out,
    its index kept), on the log scale like every relative trend (module docstring): the words "−15%
    over its 3 trials"."""
    pts = [(float(k), float(v)) for k, v in enumerate(values) if v is not None and math.isfinite(float(v))]
    if len(pts) < 2:
        return None
    return theil_sen([p[0] for p in pts], [p[1] for p in pts], log=True)


@dataclass(frozen=True)
class Mser:
    """MSER-5's truncation point of a series: ``truncate`` points (a multiple of ``MSER_BATCH``)
    are warm-up; ``batches`` the number of batch means it chose among."""

    truncate: int
    batches: int
    statistic: float  # the minimised MSER value


def mser(values: Sequence[float], batch: int = MSER_BATCH) -> Mser | None:
    """MSER-``batch`` truncation of ``values`` (module docstring); None with fewer than
    ``MSER_MIN_BATCHES`` full batches. A trailing partial batch is left out. Ties go to the
    earliest ``d`` (the least truncation)."""
    y = np.asarray([float(v) for v in values], dtype=np.float64)
    if not np.isfinite(y).all():
        return None
    m = y.size // batch
    if m < MSER_MIN_BATCHES:
        return None
    z = y[: m * batch].reshape(m, batch).mean(axis=1)
    best_d, best = 0, math.inf
    for d in range(0, m // 2 + 1):
        tail = z[d:]
        stat = float(np.sum((tail - tail.mean()) ** 2)) / float((m - d) ** 2)
        if stat < best - 1e-12 * max(1.0, abs(best) if math.isfinite(best) else 1.0):
            best_d, best = d, stat
    return Mser(truncate=best_d * batch, batches=m, statistic=best)


# which trend a compared figure follows (``figure_drift``): the per-kW family (J/token is its
# inverse), power, throughput; latency figures have none
_PER_KW_MARKS = ("per_kw", "j_per_", "per_kwh", "tokens_per_j")
_POWER_MARKS = ("power_w", "energy_j")
_TOKEN_MARKS = ("tokens_per_s", "_rps", "requests_per_s")


def _trend_figure(figure: str) -> str | None:
    name = FigureKey.parse(figure).figure
    if any(m in name for m in _PER_KW_MARKS):
        return "output_tokens_per_s_per_kw"
    if any(m in name for m in _POWER_MARKS):
        return "avg_power_w"
    if any(m in name for m in _TOKEN_MARKS):
        return "output_tokens_per_s"
    return None


def recorded_trend(st: Stationarity | None, figure: str, boundary: str | None = None) -> FigureTrend | None:
    """The level's recorded trend (``Stationarity.trends``) of the series a compared ``figure``
    follows, at ``boundary`` for a figure of energy (``figure_drift``'s lookup); None if not recorded."""
    which = _trend_figure(figure) if st is not None else None
    if st is None or which is None:
        return None
    cands = [f for f in st.trends if f.figure == which and (which == "output_tokens_per_s" or f.boundary == boundary)]
    return cands[0] if cands else None


def trends_apart(a: FigureTrend | None, b: FigureTrend | None) -> bool:
    """Whether two series measured over the same span (the two sides of ``ab``) changed by
    different amounts, beyond their noise: their 99% intervals of change do not overlap (a
    conservative test of the difference: a drift both share, however large, is never apart)."""
    if a is None or b is None or None in (a.ci_low_pct, a.ci_high_pct, b.ci_low_pct, b.ci_high_pct):
        return False
    return a.ci_low_pct > b.ci_high_pct or b.ci_low_pct > a.ci_high_pct  # type: ignore[operator]


def figure_drift(st: Stationarity | None, figure: str, boundary: str | None = None) -> tuple[str, str] | None:
    """Whether a level's ``figure`` (a compare/regress name, ``name@boundary`` or with
    ``boundary``) drifts (``Stationarity``, ``accounting/drift.py``): ``(words, what to do)`` —
    ``("drifts −15.4% over its 3 trials (GPU temperature 58→79 °C)", "precondition …")`` — or None.
    The one lookup every noise judgement reads (``metrics/figure_noise.trials_noise``' ``drift``)."""
    if st is None:
        return None
    which = _trend_figure(figure)
    if which is None:
        return None
    if boundary is None:
        boundary = FigureKey.parse(figure).boundary
    cands = [f for f in st.trends if f.figure == which and f.drifting]
    if which != "output_tokens_per_s":
        at = [f for f in cands if f.boundary == boundary] if boundary else cands
        cands = at
    if not cands:
        return None
    f = max(cands, key=lambda x: abs(x.change_pct or 0.0))
    if st.trials > 1 and f.trials_change_pct is not None:
        words = f"drifts {f.trials_change_pct:+.1f}% over its {st.trials} trials"
    else:
        words = f"drifts {f.change_pct or 0.0:+.1f}% over its steady window ({f.span_s or 0.0:.0f} s)"
    if st.cause:
        words += f" ({st.cause})"
    return words, st.todo or "repeat the run, or measure the configurations alternated (A B B A)"


# --precondition's throughput rule (``rounds_settle``; run/prime.precondition applies it with the
# temperature rule, over the window of accounting/thermal.PRECONDITION_WINDOW_S)
SETTLE_CHANGE_PCT = 2.0  # settled: the rounds' fitted change over the window is within ±this %
SETTLE_MIN_ROUNDS = 3  # fewer rounds in the window: no slope is read (a line through two rounds is their noise)
# and the change's 99% interval (where there is one: MIN_POINTS rounds or more) within ±this %: a change
# inside the bound from rounds that scatter several-fold (a loaded CPU's) is luck, not a settled throughput;
# as wide as the noise rule lets a judged ratio's bound be (metrics/figure_noise.MAX_BOUND), so a GPU's
# loads of a few percent scatter settle from a handful of rounds
SETTLE_SCATTER_PCT = 25.0


@dataclass(frozen=True)
class RoundsSettle:
    """Whether the output tokens/s of a series of load rounds has stopped moving (``rounds_settle``):
    the fitted change over ``window_s`` (% of the fitted start; None where no slope was read) with
    its ``DRIFT_CONFIDENCE`` interval (None below ``MIN_POINTS`` rounds), the rounds it rests on and
    how much of the window they span (s)."""

    settled: bool
    change_pct: float | None
    rounds: int
    covered_s: float
    window_s: float
    bound_pct: float
    low_pct: float | None = None
    high_pct: float | None = None
    scatter_pct: float = SETTLE_SCATTER_PCT

    @property
    def moves(self) -> bool:
        """The interval of the change excludes 0: the throughput moved by more than its scatter."""
        return self.low_pct is not None and self.high_pct is not None and (self.low_pct > 0 or self.high_pct < 0)

    def words(self) -> str:
        """The verdict in words: ``output tok/s moved +0.4% over the last 60 s (99% interval -1.1% to +1.9%;
        24 rounds; bound ±2%)``, ``… still rising +6.1% …`` where the interval excludes 0, ``… not
        steady …`` where it holds 0 and is wider than ±``scatter_pct`` (the rounds scatter too much to
        tell), ``… still moving …`` past the bound otherwise, or how little of the window the rounds
        cover."""
        if self.change_pct is None:
            return (f"output tok/s not yet read: the rounds span {self.covered_s:.1f} s of the {self.window_s:g} s "
                    f"window ({self.rounds} rounds, at least {SETTLE_MIN_ROUNDS})")
        ci = (f"{DRIFT_CONFIDENCE:.0%} interval {self.low_pct:+.1f}% to {self.high_pct:+.1f}%; "
              if self.low_pct is not None and self.high_pct is not None else "")
        over = f"over the last {self.window_s:g} s ({ci}{self.rounds} rounds; bound ±{self.bound_pct:g}%)"
        if self.settled:
            return f"output tok/s moved {self.change_pct:+.1f}% {over}"
        if self.moves or self.low_pct is None or self.high_pct is None:
            way = "rising" if self.change_pct > 0 else "falling"
            return f"output tok/s still {way} {self.change_pct:+.1f}% {over}"
        if self.low_pct < -self.scatter_pct or self.high_pct > self.scatter_pct:
            return (f"output tok/s not steady: {self.change_pct:+.1f}% {over}, an interval that holds 0 and is "
                    f"wider than ±{self.scatter_pct:g}%: the loads' throughput scatters too much to tell")
        return f"output tok/s still moving {self.change_pct:+.1f}% {over}, past the bound"


def rounds_settle(starts_s: Sequence[float], ends_s: Sequence[float], tokens_per_s: Sequence[float | None], *,
                  window_s: float, cover: float, bound_pct: float = SETTLE_CHANGE_PCT,
                  min_rounds: int = SETTLE_MIN_ROUNDS, scatter_pct: float = SETTLE_SCATTER_PCT) -> RoundsSettle:
    """``--precondition``'s throughput rule over load rounds in time order (each round's start and
    end in seconds on one clock, and its output tokens/s; a round with None is left out).

    The window is the rounds that end inside the last ``window_s`` before the last round ended —
    the round that straddles the window's start included — and never fewer than ``min_rounds`` (long rounds
    widen it). Settled when (a) the window holds at least ``min_rounds`` rounds, (b) they span (from
    the first one's start to the last one's end) at least ``cover`` × ``window_s``, (c) the
    Theil–Sen slope of their tokens/s over their midpoints, on the log scale (``theil_sen`` with
    ``log``: the median of every pairwise slope of ``ln`` tokens/s, so one slow round — a stray stall
    — moves it little), read as a change over ``window_s`` (``exp(slope · window_s) − 1``, above
    −100% however steep the fall), is within ±``bound_pct`` %: the throughput moves by less than the
    bound per window; and (d) the change's ``DRIFT_CONFIDENCE`` interval (Sen's, from ``MIN_POINTS``
    rounds on, its ends read the same way) lies within ±``scatter_pct`` %: on a loaded host whose rounds
    scatter several-fold a change inside the bound is luck, and is not called settled. The interval
    is kept beside the change, so such a verdict reads as scatter, not as a rise: a change whose
    interval holds 0 is "not steady", one whose interval excludes 0 "still rising" (or falling).
    A change per window, not per round, so a slow warm-up of many short rounds (+0.2% a round, +5% a
    minute) is not settled where "the last three rounds agree" would call it so."""
    pts = [(float(a), float(b), float(v)) for a, b, v in zip(starts_s, ends_s, tokens_per_s)
           if v is not None and math.isfinite(float(v)) and v > 0]
    if not pts:
        return RoundsSettle(False, None, 0, 0.0, window_s, bound_pct)
    last_end = pts[-1][1]
    first = len(pts) - 1
    while first > 0 and (pts[first - 1][1] > last_end - window_s or len(pts) - first < min_rounds):
        first -= 1
    win = pts[first:]
    covered = last_end - win[0][0]
    if len(win) < min_rounds or covered < cover * window_s:
        return RoundsSettle(False, None, len(win), covered, window_s, bound_pct)
    tr = theil_sen([(a + b) / 2.0 for a, b, _ in win], [v for _, _, v in win], log=True)
    change = tr.relative(tr.slope, window_s) if tr is not None else None
    if tr is None or change is None:
        return RoundsSettle(False, None, len(win), covered, window_s, bound_pct)
    low, high = (None if x is None else 100.0 * x for x in (tr.relative(tr.low, window_s), tr.relative(tr.high, window_s)))
    change *= 100.0
    known = low is None or high is None or (low >= -scatter_pct and high <= scatter_pct)
    return RoundsSettle(abs(change) <= bound_pct and known, change, len(win), covered, window_s, bound_pct, low, high,
                        scatter_pct)
