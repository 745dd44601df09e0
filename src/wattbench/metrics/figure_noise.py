"""A figure's noise: how far a repeat of one measured figure may fall by noise alone, from what it
rests on (pure functions; the judgement of a ratio that reads it is ``metrics/noise.judge``;
docs/compare.md "Noise").

**A figure's noise** is a relative 95% half-width ``h`` of the figure as measured (``FigureNoise``),
with its degrees of freedom ``df``, from the best basis available, in this order:

1. ``trials`` — the level's ``--trials`` mean and its CI (``metrics/trials.trial_interval``: on the
   log scale for a positive figure): ``h = t(0.975, n-1) · s_ln / sqrt(n)``, the interval's log
   half-width ``ln(high / low) / 2`` (``metrics/trials.rel_half_width``; the same reading for an
   older file's Student-t interval, to first order ``t · s / sqrt(n) / mean``), ``n − 1`` df — the
   same log scale the ratio's interval ``R·e^±w`` is built on. It measures the noise *inside one
   run* only.
2. ``history`` — the run-to-run spread of one configuration key in the history store
   (``metrics/series_noise``): one value per run, in time order, split at **change points**; the spread
   is the within-segment standard deviation of ``ln(figure)`` pooled over the segments,
   ``Σ (m_i − 1)`` df, and one more run's 95% half-width is ``h = t(0.975, df) · s``. It contains
   engine restarts, server history and everything else that differs between runs of one
   configuration; where both exist the wider one counts (``combine``): a trial CI narrower than
   the run-to-run spread says nothing about the next run.
   Trials inside one run share its slow state (the server's, the device's): their interval stands
   for the noise *inside* the run, not for what a repeat of the run would see. So a comparison of
   runs never counts the trials' alone (``repeat_noise``): with a history, the wider of the two
   counts, and where the history's is wider the judgement says the trials share a slow state;
   without one, the **run-to-run floor** counts where it is wider — one run's relative sd across
   runs on one server, at least ``RUN_TO_RUN_FLOOR_REL_SD`` (2.3%, the least the H200 showed:
   2.3–4.6% across runs against 1.4% within one), a 95% half-width of ``z · 2.3% = 4.5%`` (a stated
   constant, not estimated: the normal quantile; the degrees of freedom stay the trials').
3. ``bound`` — for a single measurement with neither, where a rule needs a figure anyway (the
   history check, the ``--optimize`` plateau), a bound derived from data: ``single_level_noise``
   (4 df). ``compare`` and ``regress`` never use it: without trials or history they say
   "inconclusive" and how to measure the noise.

**A spread of zero** (every run or trial gave the same figure: sd 0%) measures no noise (``ZERO_REL``:
``history_text`` says ``sd 0%``, ``metrics/noise.judge`` reads it as inconclusive).

**A ratio** ``R = b / a`` of two figures with noise ``h_a`` and ``h_b`` has the interval
``[R·e^-w, R·e^w]`` with ``w = sqrt(h_a² + h_b²)`` (the log-ratio delta method:
``ratio_interval``, the one place it is computed — ``metrics/noise.judge`` and ``repeat_check``,
``analysis/ratios.log_ratio_ci`` and ``analysis/regress`` call it; a product of independent
ratios the same way, with each part's log half-width); when only one side's noise is known it
stands for both (``w = sqrt(2)·h``); its degrees of freedom are the fewer of the two sides'.

**The single-level bound** (``single_level_noise``): on the H200, five 20 s trials of
one level in one run gave 5,378 tok/s per kW with a 95% CI of 5,317–5,439, a relative standard
deviation of one trial of ``s = 0.91%`` (CI half-width 1.13% = t(0.975, 4) · s / sqrt(5)). A single
measurement's 95% half-width with that ``s`` estimated from 4 degrees of freedom is
``t(0.975, 4) · s = 2.5%`` at 20 s; shorter windows are assumed noisier as ``1/sqrt(duration)``
(2 s: 8.0%), capped at ``SINGLE_LEVEL_CAP`` (10%). A ratio of two single levels of 20 s is then
within noise up to ±3.6% — far below the 16–34% the server's history moved the figure by.

The rule's thresholds live here, beside the noise they bound: ``MIN_DF`` (fewer degrees of freedom
are inconclusive), ``MAX_BOUND`` (a ratio's bound wider than ±25% is inconclusive) and
``MIN_HISTORY_RUNS`` (a history's spread from fewer runs has too few degrees of freedom).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Iterable, Sequence

from wattbench.metrics.trials import rel_half_width, t_ppf

# H200, transformers serve, llama-1b, c=64, 5 trials of 20 s in one run:
# mean 5,378 tok/s per kW, 95% CI 5,317-5,439 -> one trial's relative sd 0.91%
H200_TRIAL_REL_SD = 0.0091
H200_TRIAL_DF = 4
H200_TRIAL_WINDOW_S = 20.0
SINGLE_LEVEL_CAP = 0.10
CONFIDENCE = 0.95
MIN_HISTORY_RUNS = 3  # a spread from two runs has one degree of freedom: t(0.975, 1) = 12.7
MIN_DF = 2  # a noise basis with fewer degrees of freedom is inconclusive
MAX_BOUND = 0.25  # a ratio whose bound (e^w - 1) is wider than this is inconclusive

# one run's relative sd of a figure across runs on one server, the least measured (H200, transformers
# serve, llama-1b: 2.3-4.6% across runs, 1.4% within a run): the run-to-run part no trials can see
RUN_TO_RUN_FLOOR_REL_SD = 0.023
Z_975 = 1.959963984540054  # the normal 97.5th percentile: a stated constant has no estimation error
ZERO_REL = 1e-9  # a relative spread this small is zero (identical figures, up to float rounding of their mean)


def t_975(df: int) -> float:
    """The Student-t quantile of a two-sided ``CONFIDENCE`` interval with ``df`` degrees of freedom."""
    return t_ppf(0.5 + CONFIDENCE / 2, df)


@dataclass(frozen=True)
class FigureNoise:
    """The relative 95% half-width of one figure as measured, what it rests on and its degrees of
    freedom (None: not known — only the documented ``bound`` counts as enough then)."""

    rel_half_width: float
    basis: str  # "trials" | "history" | "bound" | "repeats" | "floor" (and "+"-joined: ``combine``, ``repeat_noise``)
    n: int | None = None  # trials, or runs for "history"
    detail: str = ""  # the basis in words, e.g. "within-run trials (3 trials, 2 df)"
    df: int | None = None
    # how many measurements the figure is the mean of (trials: n; history and bound: one run) and
    # what one is called: what ``measurements_needed`` counts in (None: ``count()`` reads the basis)
    measured: int | None = None
    unit: str = ""
    # the figure moved while it was measured (``metrics.drift.figure_drift``): its words and what to
    # do; a drifting figure is never judged within or beyond noise (``judge``)
    drift: str = ""
    drift_todo: str = ""
    # the side's load generator was judged to bias this figure (``metrics.saturation.client_bias``:
    # its host held the client's event loop, or an open loop fell behind): its words and what to do;
    # a figure the run itself marks as biased is never judged within or beyond noise (``judge``)
    client: str = ""
    client_todo: str = ""

    def pct(self) -> str:
        return f"±{self.rel_half_width * 100:.1f}%"

    def known(self) -> bool:
        """Whether it bounds anything: a finite half-width (``no_spread`` has none)."""
        return math.isfinite(self.rel_half_width) or self.basis == "drift"

    def dof(self) -> int | None:
        """Its degrees of freedom (the documented single-level bound: ``H200_TRIAL_DF``)."""
        if self.df is not None:
            return self.df
        return H200_TRIAL_DF if self.basis == "bound" else None

    def count(self) -> tuple[int, str]:
        """How many measurements the figure is the mean of, and what one is called: a trials mean
        is ``n`` trials; a history's spread or the single-level bound is the noise of one run."""
        if self.measured is not None:
            return self.measured, self.unit or "runs"
        if self.basis == "trials":
            return max(1, self.n or 1), "trials"
        return 1, "runs"


def trials_noise(mean: float | None, ci_low: float | None, ci_high: float | None,
                 n: int | None = None, *, drift: tuple[str, str] | None = None) -> FigureNoise | None:
    """From a trials mean and its 95% CI (``TrialsBlock`` figures): its noise is the interval's log
    half-width ``ln(high / low) / 2`` (``metrics.trials.rel_half_width``: a positive figure's
    interval is built on the log scale, so this is exactly its ``w``), ``n − 1`` degrees of freedom.
    ``drift``: the level's drift of this figure (``metrics.drift.figure_drift``), carried to
    ``judge``, which then says inconclusive and why."""
    h = rel_half_width(mean, ci_low, ci_high)
    if mean is None or h is None or not mean:
        return with_drift(None, drift)
    df = n - 1 if n else None
    detail = f"within-run trials ({n} trials, {df} df)" if n else "within-run trials"
    return with_drift(FigureNoise(h, "trials", n, detail, df, n, "trials"), drift)


def with_drift(noise: FigureNoise | None, drift: tuple[str, str] | None) -> FigureNoise | None:
    """``noise`` marked with a figure's drift (``metrics.drift.figure_drift``: words, what to do);
    a drift with no noise known is still carried (``judge`` reads the drift first)."""
    if not drift:
        return noise
    words, todo = drift
    if noise is None:
        return FigureNoise(math.nan, "drift", None, "drift", 0, drift=words, drift_todo=todo)
    return replace(noise, drift=words, drift_todo=todo)


def with_client(noise: FigureNoise | None, bias: tuple[str, str] | None) -> FigureNoise | None:
    """``noise`` marked with what the side's client did to the figure (``metrics.saturation.client_bias``:
    words, what to do); carried with no noise known too (``judge`` reads it first, as a drift)."""
    if not bias:
        return noise
    words, todo = bias
    if noise is None:
        return FigureNoise(math.nan, "client", None, "client", 0, client=words, client_todo=todo)
    return replace(noise, client=words, client_todo=todo)


def history_text(runs: int, rel_sd: float | None, df: int, key: str | None = None, segments: int = 1,
                 left_out: int = 0) -> str:
    """The one sentence naming a configuration's run-to-run noise basis, the same in ``history
    noise``, ``compare``, ``regress`` and the ``--json`` ``basis_text``: ``history of key
    1e41ee5fdb9cdb02: 4 runs, sd 1.4%, 3 df`` (``5 runs in 2 segments`` across change points;
    ``sd —`` without a degree of freedom); a comparison that left the runs it judges out of the
    spread (``series_noise``) says so: ``4 runs, the 2 compared left out: sd 1.2%, 1 df``."""
    of = f" of key {key}" if key else ""
    segs = f" in {segments} segments" if segments > 1 else ""
    if left_out:
        segs += f", the {left_out} compared left out:"
    else:
        segs += ","
    if rel_sd is None or not math.isfinite(rel_sd):
        sd = "sd —"
    else:
        sd = "sd 0%" if rel_sd <= ZERO_REL else f"sd {rel_sd * 100:.1f}%"
    return f"history{of}: {runs} run{'s' if runs != 1 else ''}{segs} {sd}, {df} df"


def pooled_sd(groups: Iterable[Sequence[float]]) -> tuple[float | None, int]:
    """The standard deviation pooled over groups of values, each about its own mean
    (``sqrt(Σ (x - mean_g)² / Σ (m_g - 1))``), and its degrees of freedom ``Σ (m_g - 1)``; a group
    of one value adds none; (None, 0) when no group has two. Given ``ln(figure)``, the relative sd
    of one figure: the history's spread within its segments (``metrics/series_noise``) and a
    plateau's spread of repeated measurements (``metrics/plateau.pooled_repeat_sd``)."""
    ss, df = 0.0, 0
    for g in groups:
        if len(g) < 2:
            continue
        m = sum(g) / len(g)
        ss += sum((v - m) ** 2 for v in g)
        df += len(g) - 1
    return (math.sqrt(ss / df), df) if df else (None, 0)


def spread_noise(rel_sd: float | None, runs: int | None, df: int | None = None,
                 key: str | None = None, segments: int = 1, left_out: int = 0) -> FigureNoise | None:
    """From the run-to-run spread of a configuration (relative sd of ``ln(figure)``, ``df`` degrees of
    freedom; default ``runs − 1``): one more run's 95% half-width ``t(0.975, df) · rel_sd``, its
    basis said by ``history_text``. None without a degree of freedom (``judge`` reads fewer than
    ``MIN_DF`` as inconclusive)."""
    if df is None and runs is not None:
        df = runs - 1 if runs >= MIN_HISTORY_RUNS else 0
    if rel_sd is None or runs is None or not df or df < 1 or not math.isfinite(rel_sd) or rel_sd < 0:
        return None
    return FigureNoise(t_975(df) * rel_sd, "history", runs, history_text(runs, rel_sd, df, key, segments, left_out),
                       df, 1, "runs")


def no_spread(text: str, runs: int) -> FigureNoise:
    """A configuration's history that has runs but no degree of freedom to spread over (fewer than
    two runs left in any segment): no bound (an infinite half-width, 0 df), its sentence
    (``history_text``) kept so a judgement says what the history holds (``judge``)."""
    return FigureNoise(math.inf, "history", runs, text, 0, 1, "runs")


def repeat_noise(trials: FigureNoise | None, history: FigureNoise | None) -> FigureNoise | None:
    """The noise a repeat of a run would see in a figure, from its trials' noise and its
    configuration's run-to-run noise in the history (module docstring, "Trials inside one run"):
    the wider counts, and never the trials' alone — without a history, the run-to-run floor
    (``RUN_TO_RUN_FLOOR_REL_SD``, ``z · sd``, the trials' degrees of freedom) where it is wider.
    The basis says which counted and why (``detail``). A history without a degree of freedom
    (``no_spread``) counts for nothing; where nothing else is known it is returned, so that the
    judgement names it (its runs, and why it has no spread) instead of "noise unknown"."""
    if history is not None and not history.known():
        if trials is None:
            return history
        history = None
    t = trials if trials is not None and trials.basis != "drift" else None
    if t is None or history is not None:
        out = combine(trials, history)
        if out is not None and t is not None and history is not None and history.rel_half_width > t.rel_half_width:
            out = replace(out, detail=f"{history.detail}, wider than the within-run trials' {t.pct()}: the "
                                      "trials share the run's slow state, so the run-to-run spread counts")
        return out
    floor = Z_975 * RUN_TO_RUN_FLOOR_REL_SD
    if floor <= t.rel_half_width:
        return trials
    # more trials do not narrow a run-to-run part: what would is more runs of the configuration
    return replace(t, rel_half_width=floor, basis="trials+floor", measured=1, unit="runs",
                   detail=(f"run-to-run floor ±{floor * 100:.1f}% over the within-run trials' {t.pct()} ({t.detail}): "
                           "trials inside one run share its slow state and no history of this configuration says "
                           f"how much a repeat moves, so the least measured run-to-run sd "
                           f"({RUN_TO_RUN_FLOOR_REL_SD * 100:g}%) counts"))


def single_level_noise(window_s: float | None) -> FigureNoise:
    """The documented bound for one measurement of ``window_s`` seconds (module docstring)."""
    w = window_s if window_s and window_s > 0 else H200_TRIAL_WINDOW_S
    sd = H200_TRIAL_REL_SD * math.sqrt(max(1.0, H200_TRIAL_WINDOW_S / w))
    h = min(SINGLE_LEVEL_CAP, t_975(H200_TRIAL_DF) * sd)
    return FigureNoise(h, "bound", None, f"one {w:.0f} s level, from the H200 within-run spread", H200_TRIAL_DF,
                       1, "runs")


def combine(*parts: FigureNoise | None) -> FigureNoise | None:
    """The wider of the known noises of one figure (trials and history: see the module docstring)."""
    given = [p for p in parts if p is not None]
    drift = next(((p.drift, p.drift_todo) for p in given if p.drift), None)
    known = [p for p in given if p.basis != "drift"]
    if not known:
        return with_drift(None, drift)
    widest = max(known, key=lambda p: p.rel_half_width)
    order = ("trials", "floor", "history", "bound", "repeats")
    bases = sorted({x for p in known for x in p.basis.split("+")},
                   key=lambda b: order.index(b) if b in order else len(order))
    measured, unit = widest.count()
    return with_drift(FigureNoise(widest.rel_half_width, "+".join(bases), widest.n, widest.detail, widest.dof(),
                                  measured, unit), drift)


def ratio_half_width(*rel_half_widths: float) -> float:
    """``w = sqrt(Σ h²)``: the log half-width of a ratio (or a product of independent ratios)
    whose parts have relative (or log) 95% half-widths ``h`` (module docstring)."""
    return math.sqrt(sum(h * h for h in rel_half_widths))


def ratio_interval(ratio: float, *rel_half_widths: float) -> tuple[float, float]:
    """``(R·e^-w, R·e^w)`` with ``w = ratio_half_width(*rel_half_widths)``: the interval of a
    ratio ``R`` of figures with those relative 95% half-widths (the log-ratio delta method)."""
    w = ratio_half_width(*rel_half_widths)
    return ratio * math.exp(-w), ratio * math.exp(w)


def prediction_noise(values: Sequence[float], repeats: int = 1) -> FigureNoise | None:
    """The relative 95% half-width of the mean of ``repeats`` new measurements around the mean of
    ``values`` (a Student-t prediction interval, ``t(0.975, n-1) · s · sqrt(1/n + 1/repeats)``,
    ``n − 1`` df): how far a repeat of a level may fall from its trials by noise alone. Needs two
    values."""
    vals = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    n = len(vals)
    if n < 2:
        return None
    mean = sum(vals) / n
    if not mean:
        return None
    sd = math.sqrt(sum((v - mean) ** 2 for v in vals) / (n - 1))
    h = t_975(n - 1) * sd * math.sqrt(1.0 / n + 1.0 / max(1, repeats)) / abs(mean)
    return FigureNoise(h, "trials", n, f"prediction interval of {n} trials, {n - 1} df", n - 1, n, "trials")
