"""When a difference is noise: the one rule ``compare``, ``regress``, ``--optimize``, ``tune`` and
the run's history check use (pure functions; docs/compare.md "Noise").

**A figure's noise** is a relative 95% half-width ``h`` of the figure as measured (``FigureNoise``),
from the best basis available, in this order:

1. ``trials`` — the level's ``--trials`` mean and its Student-t CI (``metrics/trials.py``):
   ``h = t(0.975, n-1) · s / sqrt(n) / mean``. It measures the noise *inside one run* only.
2. ``history`` — the run-to-run spread of the same configuration in the history store (k >= 3
   earlier runs, relative standard deviation ``s_r`` of each run's figure, ddof 1): the 95% half-width of
   one more run, ``h = t(0.975, k-1) · s_r``. It contains engine restarts, server history and
   everything else that differs between runs; where both exist the wider one counts
   (``combine``): a trial CI narrower than the run-to-run spread says nothing about the next run.
3. ``bound`` — for a single measurement with neither, where a rule needs a figure anyway (the
   history check, the ``--optimize`` plateau), a bound derived from data: ``single_level_noise``.
   ``compare`` and ``regress`` never use it: without trials or history they say the noise is
   unknown and how to measure it.

**A ratio** ``R = b / a`` of two figures with noise ``h_a`` and ``h_b`` has the interval
``[R·e^-w, R·e^w]`` with ``w = sqrt(h_a² + h_b²)`` (the log-ratio delta method:
``ratio_interval``, the one place it is computed — ``ratio_noise``, ``repeat_check``,
``analysis/compare.log_ratio_ci`` and ``analysis/regress`` call it; a product of independent
ratios the same way, with each part's log half-width); when only one side's noise is known it
stands for both (``w = sqrt(2)·h``). The ratio is **within noise** when its interval contains 1.

**The single-level bound** (``single_level_noise``): on the H200 (issue 24), five 20 s trials of
one level in one run gave 5,378 tok/s per kW with a 95% CI of 5,317–5,439, a relative standard
deviation of one trial of ``s = 0.91%`` (CI half-width 1.13% = t(0.975, 4) · s / sqrt(5)). A single
measurement's 95% half-width with that ``s`` estimated from 4 degrees of freedom is
``t(0.975, 4) · s = 2.5%`` at 20 s; shorter windows are assumed noisier as ``1/sqrt(duration)``
(2 s: 8.0%), capped at ``SINGLE_LEVEL_CAP`` (10%). A ratio of two single levels of 20 s is then
within noise up to ±3.6% — far below the 16–34% the server's history moved the figure by.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

from wattbench.metrics.trials import t_ppf

# H200, transformers serve, llama-1b, c=64, 5 trials of 20 s in one run (issue 24):
# mean 5,378 tok/s per kW, 95% CI 5,317-5,439 -> one trial's relative sd 0.91%
H200_TRIAL_REL_SD = 0.0091
H200_TRIAL_DF = 4
H200_TRIAL_WINDOW_S = 20.0
SINGLE_LEVEL_CAP = 0.10
CONFIDENCE = 0.95
MIN_HISTORY_RUNS = 3  # a spread from two runs has one degree of freedom: t(0.975, 1) = 12.7


@dataclass(frozen=True)
class FigureNoise:
    """The relative 95% half-width of one figure as measured, and what it rests on."""

    rel_half_width: float
    basis: str  # "trials" | "history" | "bound"
    n: int | None = None  # trials, or earlier runs for "history"
    detail: str = ""

    def pct(self) -> str:
        return f"±{self.rel_half_width * 100:.1f}%"


@dataclass(frozen=True)
class RatioNoise:
    """A ratio with its noise interval; ``within`` is None when the noise is unknown."""

    ratio: float
    low: float | None
    high: float | None
    within: bool | None
    basis: str  # "trials", "history", "trials+history", "bound", "unknown"

    def text(self, digits: int = 2) -> str:
        f = f"{{:.{digits}f}}"
        if self.within is None:
            return f"{f.format(self.ratio)}× (noise unknown)"
        iv = f"{f.format(self.low)}–{f.format(self.high)}×"
        if self.within:
            return f"within noise ({f.format(self.ratio)}×, interval {iv} includes 1; {self.basis})"
        return f"{f.format(self.ratio)}× (interval {iv}, {self.basis})"


def trials_noise(mean: float | None, ci_low: float | None, ci_high: float | None,
                 n: int | None = None) -> FigureNoise | None:
    """From a trials mean and its 95% CI (``TrialsBlock`` figures)."""
    if mean is None or ci_low is None or ci_high is None or not mean or ci_high < ci_low:
        return None
    return FigureNoise((ci_high - ci_low) / 2.0 / abs(mean), "trials", n)


def spread_noise(rel_sd: float | None, runs: int | None) -> FigureNoise | None:
    """From the run-to-run spread of ``runs`` earlier runs (relative sd, ddof 1): one more run's
    95% half-width ``t(0.975, runs-1) · rel_sd``. Needs ``MIN_HISTORY_RUNS`` runs."""
    if rel_sd is None or runs is None or runs < MIN_HISTORY_RUNS or not math.isfinite(rel_sd) or rel_sd < 0:
        return None
    return FigureNoise(t_ppf(0.5 + CONFIDENCE / 2, runs - 1) * rel_sd, "history", runs,
                       f"sd {rel_sd * 100:.1f}% over {runs} runs")


def single_level_noise(window_s: float | None) -> FigureNoise:
    """The documented bound for one measurement of ``window_s`` seconds (module docstring)."""
    w = window_s if window_s and window_s > 0 else H200_TRIAL_WINDOW_S
    sd = H200_TRIAL_REL_SD * math.sqrt(max(1.0, H200_TRIAL_WINDOW_S / w))
    h = min(SINGLE_LEVEL_CAP, t_ppf(0.5 + CONFIDENCE / 2, H200_TRIAL_DF) * sd)
    return FigureNoise(h, "bound", None, f"one {w:.0f} s level, from the H200 within-run spread")


def combine(*parts: FigureNoise | None) -> FigureNoise | None:
    """The wider of the known noises of one figure (trials and history: see the module docstring)."""
    known = [p for p in parts if p is not None]
    if not known:
        return None
    widest = max(known, key=lambda p: p.rel_half_width)
    bases = sorted({p.basis for p in known}, key=lambda b: ("trials", "history", "bound").index(b))
    return FigureNoise(widest.rel_half_width, "+".join(bases), widest.n, widest.detail)


def ratio_half_width(*rel_half_widths: float) -> float:
    """``w = sqrt(Σ h²)``: the log half-width of a ratio (or a product of independent ratios)
    whose parts have relative (or log) 95% half-widths ``h`` (module docstring)."""
    return math.sqrt(sum(h * h for h in rel_half_widths))


def ratio_interval(ratio: float, *rel_half_widths: float) -> tuple[float, float]:
    """``(R·e^-w, R·e^w)`` with ``w = ratio_half_width(*rel_half_widths)``: the interval of a
    ratio ``R`` of figures with those relative 95% half-widths (the log-ratio delta method)."""
    w = ratio_half_width(*rel_half_widths)
    return ratio * math.exp(-w), ratio * math.exp(w)


def ratio_noise(ratio: float, a: FigureNoise | None, b: FigureNoise | None) -> RatioNoise:
    """The interval of ``ratio`` = b / a and whether it is within noise (module docstring)."""
    if a is None and b is None or not (ratio > 0 and math.isfinite(ratio)):
        return RatioNoise(ratio, None, None, None, "unknown")
    ha = (a or b).rel_half_width  # type: ignore[union-attr]
    hb = (b or a).rel_half_width  # type: ignore[union-attr]
    bases = []
    for p in (a, b):
        if p is not None:
            for x in p.basis.split("+"):
                if x not in bases:
                    bases.append(x)
    lo, hi = ratio_interval(ratio, ha, hb)
    return RatioNoise(ratio, lo, hi, lo <= 1.0 <= hi, "+".join(bases))


def prediction_noise(values: Sequence[float], repeats: int = 1) -> FigureNoise | None:
    """The relative 95% half-width of the mean of ``repeats`` new measurements around the mean of
    ``values`` (a Student-t prediction interval, ``t(0.975, n-1) · s · sqrt(1/n + 1/repeats)``):
    how far a repeat of a level may fall from its trials by noise alone. Needs two values."""
    vals = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    n = len(vals)
    if n < 2:
        return None
    mean = sum(vals) / n
    if not mean:
        return None
    sd = math.sqrt(sum((v - mean) ** 2 for v in vals) / (n - 1))
    h = t_ppf(0.5 + CONFIDENCE / 2, n - 1) * sd * math.sqrt(1.0 / n + 1.0 / max(1, repeats)) / abs(mean)
    return FigureNoise(h, "trials", n, f"prediction interval of {n} trials")


@dataclass(frozen=True)
class RepeatCheck:
    """A level measured again later in the run (the history check): first vs repeat."""

    first: float
    repeat: float
    ratio: float  # repeat / first
    low: float
    high: float
    beyond_noise: bool
    basis: str
    bound_pct: float  # the noise allowed, as a percentage of the first figure


def repeat_check(first: Sequence[float], repeat: Sequence[float], window_s: float | None,
                 repeat_window_s: float | None = None) -> RepeatCheck | None:
    """Whether a repeat of a level differs from its first measurement by more than noise.

    With two or more first measurements (trials), the repeat's mean must lie in their prediction
    interval (``prediction_noise``); with one, in the single-level bounds of both windows
    (``single_level_noise``, ``w = sqrt(h_first² + h_repeat²)``; ``repeat_window_s`` None: the
    same window). None when either side has no figure."""
    f = [float(v) for v in first if v is not None and math.isfinite(float(v))]
    r = [float(v) for v in repeat if v is not None and math.isfinite(float(v))]
    if not f or not r:
        return None
    mf, mr = sum(f) / len(f), sum(r) / len(r)
    if mf <= 0 or mr <= 0:
        return None
    ratio = mr / mf
    pn = prediction_noise(f, len(r))
    if pn is not None:
        w, basis = pn.rel_half_width, pn.detail
    else:
        s = single_level_noise(window_s)
        r = single_level_noise(repeat_window_s if repeat_window_s else window_s)
        w = ratio_half_width(s.rel_half_width, r.rel_half_width)
        basis = (f"bound for {s.detail}" if r.rel_half_width == s.rel_half_width
                 else f"bound for one {window_s or 0:.0f} s and one {repeat_window_s:.0f} s level")
    lo, hi = ratio_interval(ratio, w)
    return RepeatCheck(first=mf, repeat=mr, ratio=ratio, low=lo, high=hi, beyond_noise=not lo <= 1.0 <= hi,
                       basis=basis, bound_pct=(math.exp(w) - 1.0) * 100.0)


@dataclass
class Plateau:
    """The levels whose score is within noise of the best, and the one recommended."""

    best: float  # the value (load level) with the highest mean score
    values: list[float]  # every value on the plateau, ascending (the best among them)
    recommended: float
    reason: str
    scores: dict[float, float] | None = None  # value -> its (mean) score
    noise: dict[float, FigureNoise] | None = None  # value -> the noise of its (mean) score


def plateau(points: Iterable[tuple[float, float, FigureNoise | None]], *, higher_is_better: bool = True,
            prefer: str = "lowest") -> Plateau | None:
    """Every point ``(value, score, noise)`` whose score is within noise of the best one's
    (``ratio_noise`` of best ÷ score contains 1), and the recommended value: the lowest load on
    the plateau (``prefer="lowest"``: the same efficiency within noise with the most latency
    headroom). A point with unknown noise is on the plateau only when it is the best."""
    pts = [(float(v), float(s), n) for v, s, n in points if s is not None and math.isfinite(s) and s > 0]
    if not pts:
        return None
    sign = 1.0 if higher_is_better else -1.0
    bv, bs, bn = max(pts, key=lambda p: (sign * p[1], -p[0]))
    on = []
    for v, s, n in pts:
        if v == bv:
            on.append(v)
            continue
        rn = ratio_noise(bs / s if higher_is_better else s / bs, n, bn)
        if rn.within:
            on.append(v)
    on.sort()
    rec = on[0] if prefer == "lowest" else bv
    if rec == bv:
        reason = "the best score" + ("; no other level is within noise of it" if len(on) == 1 else "")
    else:
        reason = (f"the lowest load within noise of the best ({bv:g}): the same efficiency with the most "
                  "latency headroom")
    return Plateau(best=bv, values=on, recommended=rec, reason=reason, scores={v: s for v, s, _ in pts},
                   noise={v: n for v, _, n in pts if n is not None})


def margin(pl: Plateau, a: float, b: float, *, higher_is_better: bool = True) -> RatioNoise | None:
    """``a``'s score over ``b``'s (for a lower-is-better score, ``b`` over ``a``: above 1 means ``a``
    is better) with the noise interval of the plateau's per-value noise."""
    sc, nz = pl.scores or {}, pl.noise or {}
    if a not in sc or b not in sc or not sc[a] or not sc[b]:
        return None
    r = sc[a] / sc[b] if higher_is_better else sc[b] / sc[a]
    return ratio_noise(r, nz.get(b), nz.get(a))


def unknown_noise_hint() -> str:
    """What to do when the noise of a comparison is unknown (one text for compare and regress)."""
    return ("noise unknown: measure it with --trials N (within a run), or repeat the runs "
            "(`wattbench history noise` shows the run-to-run spread once a configuration has 3+ runs)")


def pooled_repeat_sd(groups: Iterable[Sequence[float]]) -> tuple[float | None, int]:
    """The relative sd of one measurement pooled over groups of repeated measurements of the same
    thing (on the log scale: ``sqrt(Σ (ln x - mean ln x)² / Σ (m - 1))``), and its degrees of
    freedom; (None, 0) when no group has two values."""
    ss, df = 0.0, 0
    for g in groups:
        vals = [math.log(v) for v in g if v is not None and v > 0 and math.isfinite(v)]
        if len(vals) < 2:
            continue
        m = sum(vals) / len(vals)
        ss += sum((v - m) ** 2 for v in vals)
        df += len(vals) - 1
    return (math.sqrt(ss / df), df) if df else (None, 0)


def measured_plateau(measurements: Sequence[tuple[float, float, float | None, FigureNoise | None]], *,
                     higher_is_better: bool = True, prefer: str = "lowest") -> tuple[Plateau | None, str]:
    """The plateau of a search whose levels were measured once or more (``--optimize`` re-measures
    its best two; ``tune`` its best two configurations): ``measurements`` are ``(value, score,
    window_s, trials_noise)``, several per value when measured again. A value's score is the mean
    of its measurements; its noise the widest of (a) its trials' CI (``trials_noise``), (b) the
    spread of the repeated measurements pooled over every re-measured value
    (``t(0.975, df) · s / sqrt(m)`` for m measurements), (c) the single-level bound for its window
    over ``sqrt(m)``. Returns the plateau and a phrase naming the basis."""
    by: dict[float, list[tuple[float, float | None, FigureNoise | None]]] = {}
    for v, s, w, tn in measurements:
        if s is None or not math.isfinite(s) or s <= 0:
            continue
        by.setdefault(float(v), []).append((float(s), w, tn))
    if not by:
        return None, ""
    sd, df = pooled_repeat_sd([[s for s, _, _ in ms] for ms in by.values()])
    points = []
    bases: list[str] = []
    for v, ms in by.items():
        m = len(ms)
        mean = sum(s for s, _, _ in ms) / m
        windows = [w for _, w, _ in ms if w]
        bound = single_level_noise(min(windows) if windows else None)
        cands = [FigureNoise(bound.rel_half_width / math.sqrt(m), "bound", m, bound.detail)]
        if sd is not None:
            cands.append(FigureNoise(t_ppf(0.5 + CONFIDENCE / 2, df) * sd / math.sqrt(m), "repeats", m,
                                     f"repeat spread sd {sd * 100:.1f}% ({df} df)"))
        cands += [tn for _, _, tn in ms if tn is not None]
        widest = max(cands, key=lambda c: c.rel_half_width)
        if widest.basis not in bases:
            bases.append(widest.basis)
        points.append((v, mean, widest))
    pl = plateau(points, higher_is_better=higher_is_better, prefer=prefer)
    names = {"bound": "the single-level bound", "repeats": "the spread of the re-measured levels",
             "trials": "the trials' CIs"}
    basis = ", ".join(names.get(b, b) for b in bases)
    if sd is not None:
        basis += f" (re-measured spread: sd {sd * 100:.1f}%, {df} df)"
    return pl, basis
