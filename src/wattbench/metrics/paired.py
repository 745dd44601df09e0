"""A ratio measured in pairs: the interval of ``B / A`` from A and B measured alternately
(``wattbench ab``; docs/compare.md "A paired A/B measurement"). Pure functions.

**The design.** A and B are measured one after the other in a counterbalanced order, one *block*
of two pairs at a time: ``A B B A``, then ``A B B A`` again … (``order``). Pair ``k`` is the k-th
measurement of each side. Drift common to both (a server, a GPU, a host that slows or warms over
minutes) moves both members of a pair alike, so it falls out of the pair's ratio; and what is left
of it — the side measured second in a pair sees the drift of one slot more — has the opposite sign
in the two pairs of a block (``A B`` then ``B A``), so a linear drift of the log figure cancels
exactly over every whole block. That is why pairs are only ever added a whole block at a time.

**The interval** (``paired_ratio``): each pair's log ratio ``d_k = ln(b_k / a_k)``; their mean
``d̄`` over ``n`` pairs and sample standard deviation ``s``; the ratio ``R = e^d̄`` with the 95%
Student-t interval ``[R·e^-h, R·e^h]``, ``h = t(0.975, n − 1) · s / sqrt(n)``, on ``n − 1``
degrees of freedom. The spread *between pairs* is the noise: it contains every source of variation
that a pair does not share (the trials' own noise, a drift that is not common to both sides),
and none that it does.

**Uneven spacing.** The cancellation is exact for evenly spaced trials; a slower side's longer trials
and drains space them unevenly. Given each trial's time, the pairs are adjusted for the drift both
sides share (``common_drift_per_s``: one slope of the log figure against time, each side about its
own mean), at the cost of one more degree of freedom (``n − 2``).

**A drift of one side** (``PairedRatio.trend``, ``drifts``): the pairs cancel a drift both sides
share, never one that only one side has (a server that warms, fills a cache or throttles while the
other holds still): then the pairs' ratios themselves move, and their spread is not noise around
one ratio. So the pairs' ratios (each adjusted for the common drift as above) are trended over the
pairs in pair order with ``metrics/drift.trials_trend`` — the Theil–Sen slope with Sen's 99%
interval, on the log scale like every relative trend (the slope of the pairs' log ratios ``d_k``,
their change ``exp(slope · span) − 1``, above −100% however steep), the one trend of every drift
call — and the ratio *drifts* when that interval excludes 0 (``Trend.moves``). A drifting ratio is never judged within or beyond noise (``analysis/ab.py`` carries it to
``metrics/noise.judge``) and is never precise enough to stop on (``precision``: ``LevelPrecision``
with ``drifting``). Below ``metrics/drift.MIN_POINTS`` (4) pairs the trend has no interval: no
drift call is made, the ratio is judged on its interval alone.

**The decomposition** follows compare's (``analysis/ratios.Decomposition``): per kW = throughput
÷ power, pair by pair; since each pair's per-kW log ratio is its throughput log ratio minus its
power log ratio, the three geometric means divide exactly: ``per kW = throughput ÷ power``, each
``B ÷ A``.

**The precision stop** (``precise_enough``, ``precision``): ``run --trials auto``'s rule
(``metrics/precision.LevelPrecision``, ``auto_stop``) with the pairs as its trials: blocks are added
until every level's per-kW ratio has a relative half-width ``e^h − 1`` within the asked precision,
or a budget ends. With fewer than ``MIN_PAIRS`` pairs there is no interval (``MIN_DF`` of
``metrics/noise``: fewer than 2 degrees of freedom is never an answer).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from wattbench.metrics.drift import Trend, trials_trend
from wattbench.metrics.figure_noise import MIN_DF, FigureNoise
from wattbench.metrics.precision import LevelPrecision, measurements_needed
from wattbench.metrics.trials import t_ppf

CONFIDENCE = 0.95
BLOCK = ("A", "B", "B", "A")  # one block: two pairs, the second in the opposite order
PAIRS_PER_BLOCK = 2
MIN_PAIRS = MIN_DF + 1  # fewer pairs give fewer than MIN_DF degrees of freedom (MIN_PAIRS + 1 with the drift adjusted)
DEFAULT_PRECISION_PCT = 2.0


def order(blocks: int) -> list[str]:
    """The counterbalanced order of ``blocks`` blocks: ``A B B A`` each (``BLOCK``)."""
    return [side for _ in range(max(0, blocks)) for side in BLOCK]


def pair_sides(pair: int) -> tuple[str, str]:
    """Which side pair ``pair`` (0-based) measures first and second: ``A B`` for an even pair, ``B A``
    for an odd one."""
    first = BLOCK[2 * (pair % PAIRS_PER_BLOCK)]
    return (first, "B" if first == "A" else "A")


def blocks_for(pairs: int) -> int:
    """Whole blocks that hold at least ``pairs`` pairs."""
    return max(1, math.ceil(pairs / PAIRS_PER_BLOCK))


@dataclass(frozen=True)
class PairedRatio:
    """``B / A`` from ``n`` pairs: the geometric mean of the pairs' ratios and its 95% interval
    (``low``/``high``, None below ``MIN_PAIRS``); ``log_half_width`` ``h``; ``rel_half_width``
    ``e^h − 1`` (the precision reached); ``sd_log``: one pair's log ratio's standard deviation."""

    ratio: float
    n: int
    low: float | None = None
    high: float | None = None
    log_half_width: float | None = None
    sd_log: float | None = None
    df_used: int | None = None  # None: n − 1 (no drift adjustment)
    # the pairs' ratios over the pairs (module docstring "A drift of one side"); None below 2 pairs
    trend: Trend | None = None

    @property
    def drifts(self) -> bool:
        """The pairs' ratio moves over the pairs by more than its noise (``Trend.moves``, 99%)."""
        return self.trend is not None and self.trend.moves

    @property
    def df(self) -> int:
        return self.n - 1 if self.df_used is None else self.df_used

    @property
    def rel_half_width(self) -> float | None:
        return None if self.log_half_width is None else math.exp(self.log_half_width) - 1.0

    def noise(self) -> FigureNoise | None:
        """The interval as ``metrics/noise.judge`` reads a ratio's two sides: half of its log
        variance on each (``judge``'s ``w = sqrt(h_a² + h_b²)`` is then the pairs' own ``h``), on
        the pairs' degrees of freedom. None without an interval."""
        if self.log_half_width is None:
            return None
        return FigureNoise(self.log_half_width / math.sqrt(2.0), "pairs", self.n,
                           f"paired A/B ({self.n} pairs, {self.df} df)", self.df)


def _usable(x: float | None) -> bool:
    return x is not None and math.isfinite(x) and x > 0


def common_drift_per_s(a: Sequence[float], b: Sequence[float], ta: Sequence[float], tb: Sequence[float]
                       ) -> float | None:
    """The drift both sides share, per second of the log figure: the least-squares slope of ``ln``
    figure against time with one level per side (each side's values about its own mean, pooled);
    None when the times do not spread."""
    num = den = 0.0
    for ys, ts in ((a, ta), (b, tb)):
        if len(ys) < 2:
            continue
        ly = [math.log(y) for y in ys]
        my, mt = sum(ly) / len(ly), sum(ts) / len(ts)
        num += sum((t - mt) * (y - my) for t, y in zip(ts, ly))
        den += sum((t - mt) ** 2 for t in ts)
    return num / den if den > 0 else None


def paired_ratio(a: Sequence[float | None], b: Sequence[float | None], ta: Sequence[float | None] | None = None,
                 tb: Sequence[float | None] | None = None) -> PairedRatio | None:
    """``B / A`` from the pairs ``(a[k], b[k])`` (module docstring). A pair with a side that measured
    nothing (None, zero or not finite) is left out; None when no pair is left.

    With the trials' times (``ta``, ``tb``: each trial's window midpoint, seconds on one clock) the
    pairs are also adjusted for the drift both sides share: each pair's log ratio less the common
    drift (``common_drift_per_s``) times the time between its two trials. Whole ``A B B A`` blocks
    cancel a linear drift exactly only when the trials are evenly spaced; a slower side's longer
    trials (and drains) space them unevenly, and the adjustment removes what that leaves. The slope
    costs one degree of freedom: ``n − 2``."""
    keep = [k for k, (x, y) in enumerate(zip(a, b)) if _usable(x) and _usable(y)]
    n = len(keep)
    if n == 0:
        return None
    logs = [math.log(b[k] / a[k]) for k in keep]  # type: ignore[operator]
    df = n - 1
    if ta is not None and tb is not None and n >= MIN_PAIRS and all(
            ta[k] is not None and tb[k] is not None for k in keep):
        xa, xb = [a[k] for k in keep], [b[k] for k in keep]
        sa, sb = [float(ta[k]) for k in keep], [float(tb[k]) for k in keep]  # type: ignore[arg-type]
        slope = common_drift_per_s(xa, xb, sa, sb)  # type: ignore[arg-type]
        if slope is not None:
            logs = [d - slope * (u - v) for d, u, v in zip(logs, sb, sa)]
            df = n - 2
    mean = sum(logs) / n
    if n < 2:
        return PairedRatio(ratio=math.exp(mean), n=n)
    # the ratios in pair order, a pair that measured nothing left out with its index kept
    by_pair: list[float | None] = [None] * (keep[-1] + 1)
    for k, d in zip(keep, logs):
        by_pair[k] = math.exp(d)
    tr = trials_trend(by_pair)
    sd = math.sqrt(sum((d - mean) ** 2 for d in logs) / (n - 1))
    if df < MIN_DF:  # t(0.975, 1) = 12.7: no interval worth giving
        return PairedRatio(ratio=math.exp(mean), n=n, sd_log=sd, df_used=df, trend=tr)
    h = t_ppf(0.5 + CONFIDENCE / 2, df) * sd / math.sqrt(n)
    return PairedRatio(ratio=math.exp(mean), n=n, low=math.exp(mean - h), high=math.exp(mean + h), log_half_width=h,
                       sd_log=sd, df_used=df, trend=tr)


def precision(ratio: PairedRatio | None, precision_pct: float) -> LevelPrecision:
    """The ratio's precision against the one asked, in ``--trials auto``'s terms
    (``metrics/precision.LevelPrecision``: the pairs as its trials, the ratio's relative 95% half-width as
    its reached precision, the pairs in all that would reach the target from the spread seen —
    ``measurements_needed`` on the pairs' degrees of freedom, rounded up to whole blocks). A ratio that
    drifts over the pairs (``PairedRatio.drifts``) has no precision to reach: never ``met``, and no
    count of pairs would reach it (``needed`` None)."""
    target = precision_pct / 100.0
    if ratio is None:
        return LevelPrecision(target=target, reached=None, trials=0, needed=None)
    reached = ratio.rel_half_width
    needed = measurements_needed(ratio.n, reached, target, df=ratio.df) \
        if reached is not None and not ratio.drifts else None
    if needed is not None:
        needed = PAIRS_PER_BLOCK * blocks_for(needed)
    return LevelPrecision(target=target, reached=reached, trials=ratio.n, needed=needed, drifting=ratio.drifts)


def precise_enough(ratio: PairedRatio | None, precision_pct: float) -> bool:
    """Whether the ratio's 95% relative half-width is within ``precision_pct`` percent on at least
    ``MIN_PAIRS`` pairs and the ratio does not drift over the pairs (``LevelPrecision.met``: the stop rule of ``ab --precision``, as of
    ``run --trials auto``)."""
    return precision(ratio, precision_pct).met


def pairs_needed(ratio: PairedRatio | None, precision_pct: float) -> int | None:
    """How many pairs in all the observed spread says the asked precision takes, in whole blocks;
    None without a spread (an estimate: the pairs to come are taken to spread as those seen)."""
    return precision(ratio, precision_pct).needed
