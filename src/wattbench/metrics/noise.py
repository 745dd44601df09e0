"""When a difference is noise: the one rule ``compare``, ``regress``, ``--optimize``, ``tune`` and
the run's history check use (pure functions; docs/compare.md "Noise").

**One judgement, three words** (``judge``): a ratio ``R = b / a`` of two figures is

- ``beyond noise`` — its noise interval excludes 1;
- ``within noise`` — its interval contains 1, and the noise is fine enough to say so;
- ``inconclusive`` — the noise cannot decide: it is unknown, or it rests on fewer than ``MIN_DF``
  (2) degrees of freedom (t(0.975, 1) = 12.7: one more run lands anywhere), or the ratio's bound
  ``e^w − 1`` is wider than ±``MAX_BOUND`` (25%), or wider than the effect the caller must resolve
  (``effect``: a margin it must resolve), or a side's figure **drifts** (``FigureNoise.drift``:
  its level moved while it was measured, ``metrics.drift.figure_drift``; read first: no interval
  stands for a repeat of a moving series). The judgement then says why and what to do (more
  trials, longer levels, more runs; for a drift, its recorded cause and what it calls for) — never
  "within noise", and no plateau rests on it.

Every caller — ``compare``, ``regress``, the ``--optimize`` plateau (``plateau``,
``measured_plateau``), ``tune``'s margins (``margin``) and the history check (``repeat_check``) —
takes its word from ``judge``; ``Judgement.text`` names the noise basis. ``regress`` prints the
same word for the same pair, and gates on the interval against its limit (``analysis/regress``:
``pass`` only when the interval excludes a change beyond the limit, ``fail`` when it lies wholly
beyond, else ``inconclusive``, with ``wider_text`` and ``settle_for``'s sentences).

**A figure's noise** is a relative 95% half-width ``h`` of the figure as measured (``FigureNoise``),
with its degrees of freedom ``df``, from the best basis available, in this order:

1. ``trials`` — the level's ``--trials`` mean and its CI (``metrics/trials.trial_interval``: on the
   log scale for a positive figure): ``h = t(0.975, n-1) · s_ln / sqrt(n)``, the interval's log
   half-width ``ln(high / low) / 2`` (``metrics/trials.rel_half_width``; the same reading for an
   older file's Student-t interval, to first order ``t · s / sqrt(n) / mean``), ``n − 1`` df — the
   same log scale the ratio's interval ``R·e^±w`` is built on. It measures the noise *inside one
   run* only.
2. ``history`` — the run-to-run spread of one configuration key in the history store
   (``series_noise``): one value per run, in time order, split at **change points**; the spread
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

**A spread of zero** (every run or trial gave the same figure: sd 0%) measures no noise — a figure
that never moves between measurements is fixed by something else (a declared or modelled power), not
proven noise-free: ``judge`` reads it as inconclusive and says so (``ZERO_SPREAD``).

**A ratio** ``R = b / a`` of two figures with noise ``h_a`` and ``h_b`` has the interval
``[R·e^-w, R·e^w]`` with ``w = sqrt(h_a² + h_b²)`` (the log-ratio delta method:
``ratio_interval``, the one place it is computed — ``judge``, ``repeat_check``,
``analysis/compare.log_ratio_ci`` and ``analysis/regress`` call it; a product of independent
ratios the same way, with each part's log half-width); when only one side's noise is known it
stands for both (``w = sqrt(2)·h``); its degrees of freedom are the fewer of the two sides'.

**The single-level bound** (``single_level_noise``): on the H200, five 20 s trials of
one level in one run gave 5,378 tok/s per kW with a 95% CI of 5,317–5,439, a relative standard
deviation of one trial of ``s = 0.91%`` (CI half-width 1.13% = t(0.975, 4) · s / sqrt(5)). A single
measurement's 95% half-width with that ``s`` estimated from 4 degrees of freedom is
``t(0.975, 4) · s = 2.5%`` at 20 s; shorter windows are assumed noisier as ``1/sqrt(duration)``
(2 s: 8.0%), capped at ``SINGLE_LEVEL_CAP`` (10%). A ratio of two single levels of 20 s is then
within noise up to ±3.6% — far below the 16–34% the server's history moved the figure by.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Iterable, Sequence, TypedDict

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
MIN_CHANGE = 0.05  # a move smaller than this is never a change point (it stays in the spread)
MAX_LOG_RATIO = 690.0  # ln of the largest ratio written (e^690 ≈ 1e300 is finite, e^710 overflows)

# one run's relative sd of a figure across runs on one server, the least measured (H200, transformers
# serve, llama-1b: 2.3-4.6% across runs, 1.4% within a run): the run-to-run part no trials can see
RUN_TO_RUN_FLOOR_REL_SD = 0.023
Z_975 = 1.959963984540054  # the normal 97.5th percentile: a stated constant has no estimation error

BEYOND = "beyond noise"
WITHIN = "within noise"
INCONCLUSIVE = "inconclusive"
WORDS = (BEYOND, WITHIN, INCONCLUSIVE)

# what to do when the noise cannot decide (one text for every caller)
MORE_DATA = ("measure the noise: --trials 3 or more (within a run), or repeat the runs (3+ runs of one "
             "configuration: `wattbench history noise`)")
DRIFT_TODO = "repeat the run, or measure the configurations alternated (A B B A) so drift common to both cancels"
NARROWER = "more trials (--trials N), longer levels (--duration) or more runs of each configuration"
ZERO_SPREAD = ("its measurements gave one figure (sd 0%): a spread of zero measures no noise (the figure is fixed by "
               "something other than the measurement, e.g. a declared or estimated power), so it cannot say within "
               "or beyond noise")
ZERO_REL = 1e-9  # a relative spread this small is zero (identical figures, up to float rounding of their mean)
ZERO_TODO = "measure with a power meter (--sensor), or with --trials 3 or more of a figure that varies"


def _t(df: int) -> float:
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


@dataclass(frozen=True)
class Judgement:
    """``judge``'s answer for one ratio: the word, the interval, the noise basis in words, and for
    ``inconclusive`` why and what to do."""

    word: str  # BEYOND | WITHIN | INCONCLUSIVE
    ratio: float
    low: float | None = None
    high: float | None = None
    bound: float | None = None  # the interval's relative half-width e^w - 1
    df: int | None = None
    basis: str = "unknown"  # trials | history | trials+history | bound | repeats | unknown
    basis_text: str = ""  # the noise basis in words
    why: str = ""  # inconclusive: the reason
    todo: str = ""  # inconclusive: what to do (with ``settle_text``'s figures where the noise is known)
    settle: str = ""  # the part of ``todo`` that is ``settle_text``'s figures (empty where the noise is unknown)
    # inconclusive with a known noise: what each side needs to resolve ``precision`` (``ratio_needs``)
    needs: tuple["Need", ...] = ()
    precision: float | None = None

    @property
    def beyond(self) -> bool:
        return self.word == BEYOND

    @property
    def within(self) -> bool:
        return self.word == WITHIN

    @property
    def inconclusive(self) -> bool:
        return self.word == INCONCLUSIVE

    @property
    def advice(self) -> str:
        """``todo`` without ``settle``'s figures: what to do in words, for a caller that says the
        figures per line (one per limit) and the advice once (``analysis/regress``)."""
        if self.settle and self.todo.startswith(self.settle):
            return self.todo[len(self.settle):].lstrip("; ")
        return self.todo

    def interval(self, digits: int = 2) -> str:
        """``0.38–0.44`` (empty when no interval)."""
        if self.low is None or self.high is None:
            return ""
        return f"{self.low:.{digits}f}–{self.high:.{digits}f}"

    def noise_text(self) -> str:
        """The noise basis with its bound: ``noise ±4.1% from within-run trials (3 trials, 2 df)``."""
        if self.bound is None:
            return "noise unknown"
        return f"noise ±{self.bound * 100:.1f}% from {self.basis_text or self.basis}"

    def text(self) -> str:
        """The word with its reason: ``beyond noise (noise ±4.1% from …)`` or ``inconclusive: … ; more
        trials …``."""
        if self.word == INCONCLUSIVE:
            return f"{INCONCLUSIVE}: {self.why}; {self.todo}"
        return f"{self.word} ({self.noise_text()})"


class _Interval(TypedDict):
    """The part of a ``Judgement`` every answer with a noise shares."""

    ratio: float
    low: float
    high: float
    bound: float
    df: int | None
    basis: str
    basis_text: str


def judge(ratio: float | None, a: FigureNoise | None, b: FigureNoise | None = None, *,
          effect: float | None = None, precision: float | None = None,
          sides: tuple[str, str] = ("A", "B")) -> Judgement:
    """The one judgement of a ratio ``b / a`` of two figures with noises ``a`` and ``b`` (one side
    unknown: the other stands for both). ``effect``: the smallest relative change the caller must
    resolve (a limit, a margin); a "within noise" whose bound is wider reads inconclusive.

    ``beyond noise``: the interval ``[R·e^-w, R·e^w]`` excludes 1; ``within noise``: it contains 1;
    ``inconclusive``: no noise, fewer than ``MIN_DF`` degrees of freedom, a bound wider than
    ``MAX_BOUND``, or (within) wider than ``effect`` (module docstring). An inconclusive judgement
    with a known noise says what would settle it (``settle_text``): the smallest effect the noise
    resolves, and how many more trials or runs of each side would resolve ``precision`` (default:
    ``effect``, else ``DEFAULT_PRECISION``). A side whose figure drifts (``FigureNoise.drift``) makes
    it inconclusive first, naming the side (``sides``: how the caller calls ``a`` and ``b``)."""
    r = float(ratio) if ratio is not None else float("nan")
    if not (r > 0 and math.isfinite(r)):
        return Judgement(INCONCLUSIVE, r, why="no ratio (a figure is missing or zero)",
                         todo="measure the figure in both runs")
    known = [p for p in (a, b) if p is not None]
    drifting = [(side, p) for side, p in zip(sides, (a, b)) if p is not None and p.drift]
    if drifting:  # a series that moves is not noise: no interval stands for a repeat of it
        return Judgement(INCONCLUSIVE, r, basis="drift",
                         why="; ".join(f"{side} {p.drift}" for side, p in drifting),
                         todo="; ".join(dict.fromkeys(p.drift_todo or DRIFT_TODO for _, p in drifting)))
    if not known:
        return Judgement(INCONCLUSIVE, r, why="noise unknown", todo=MORE_DATA)
    unbounded = [p for p in known if not p.known()]
    if unbounded:  # a history of too few runs to have a spread: named, never "noise unknown"
        text = "; ".join(dict.fromkeys(p.detail or p.basis for p in unbounded))
        return Judgement(INCONCLUSIVE, r, basis="+".join(dict.fromkeys(p.basis for p in unbounded)),
                         basis_text=text, df=0, why=f"noise from 0 degrees of freedom ({text}), fewer than {MIN_DF}",
                         todo=MORE_DATA)
    ha = known[0].rel_half_width  # a, else b
    hb = known[-1].rel_half_width  # b, else a
    if not ratio_half_width(ha, hb) > ZERO_REL:  # every side's spread is zero: no noise was measured
        basis_text = "; ".join(dict.fromkeys(p.detail or p.basis for p in known))
        return Judgement(INCONCLUSIVE, r, basis="+".join(dict.fromkeys(p.basis for p in known)),
                         basis_text=basis_text, df=min((p.dof() or 0) for p in known),
                         why=f"{basis_text}: {ZERO_SPREAD}", todo=ZERO_TODO)
    bases: list[str] = []
    for p in known:
        for x in p.basis.split("+"):
            if x not in bases:
                bases.append(x)
    details = list(dict.fromkeys(p.detail or p.basis for p in known))
    dfs = [d for d in (p.dof() for p in known) if d is not None]
    df = min(dfs) if len(dfs) == len(known) else None
    lo, hi = ratio_interval(r, ha, hb)
    bound = math.exp(ratio_half_width(ha, hb)) - 1.0
    j = _Interval(ratio=r, low=lo, high=hi, bound=bound, df=df, basis="+".join(bases),
                  basis_text="; ".join(details))
    aim = precision if precision is not None else abs(effect) if effect else DEFAULT_PRECISION
    settle, needs = settle_for(bound, a, b, aim, df, sides)
    todo = f"{settle}; {NARROWER}" if settle else NARROWER
    more = {"needs": needs, "precision": aim, "settle": settle}
    if df is None or df < MIN_DF:
        dft = "unknown degrees of freedom" if df is None else f"{df} degree{'s' if df != 1 else ''} of freedom"
        return Judgement(INCONCLUSIVE, why=f"noise from {dft} ({j['basis_text']}), fewer than {MIN_DF}",
                         todo=todo, **more, **j)  # type: ignore[arg-type]
    if bound > MAX_BOUND:
        return Judgement(INCONCLUSIVE, why=f"noise ±{bound * 100:.1f}% ({j['basis_text']}) is wider than "
                         f"±{MAX_BOUND * 100:.0f}%", todo=todo, **more, **j)  # type: ignore[arg-type]
    if lo <= 1.0 <= hi:
        if effect is not None and bound > abs(effect):
            why = wider_text(bound, j["basis_text"], f"{abs(effect) * 100:g}% it must resolve")
            return Judgement(INCONCLUSIVE, why=why, todo=todo, **more, **j)  # type: ignore[arg-type]
        return Judgement(WITHIN, **j)
    return Judgement(BEYOND, **j)


@dataclass(frozen=True)
class RatioNoise:
    """A ratio with its noise interval and ``judge``'s word; ``within`` is True, False, or None when
    the judgement is inconclusive."""

    ratio: float
    low: float | None
    high: float | None
    within: bool | None
    basis: str  # "trials", "history", "trials+history", "bound", "unknown"
    word: str = INCONCLUSIVE
    judgement: Judgement | None = None

    def text(self, digits: int = 2) -> str:
        f = f"{{:.{digits}f}}"
        if self.judgement is not None and self.word == INCONCLUSIVE:
            return f"{f.format(self.ratio)}× {self.judgement.text()}"
        iv = f"{f.format(self.low)}–{f.format(self.high)}×"
        if self.within:
            return f"within noise ({f.format(self.ratio)}×, interval {iv} includes 1; {self.basis})"
        return f"{f.format(self.ratio)}× beyond noise (interval {iv}, {self.basis})"


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
    return FigureNoise(_t(df) * rel_sd, "history", runs, history_text(runs, rel_sd, df, key, segments, left_out),
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
    h = min(SINGLE_LEVEL_CAP, _t(H200_TRIAL_DF) * sd)
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


# ------------------------------------------------------------------ precision: how many more

DEFAULT_PRECISION = 0.02  # the 95% half-width ``--trials auto`` measures to, and a comparison's default aim
AUTO_MIN_TRIALS = MIN_DF + 1  # a half-width from fewer degrees of freedom never counts as reached
DEFAULT_MAX_TRIALS = 10  # ``--trials auto``'s budget of trials per level when no --max-trials is given
MAX_NEEDED = 100_000  # beyond this many measurements the answer is "more than is practical": None


def measurements_needed(n: int, rel_half_width: float, target: float, df: int | None = None) -> int | None:
    """How many measurements in all would bring the 95% relative half-width of their mean from
    ``rel_half_width`` (now, of the mean of ``n``) to ``target`` or less, from the spread observed.

    The spread of one measurement is ``s = h · sqrt(n) / t(0.975, df)`` (``df``: ``n − 1`` unless
    given — a history's spread is the noise of one run, ``n = 1``, with the history's degrees of
    freedom); ``m`` measurements have ``t(0.975, df + m − n) · s / sqrt(m)``. The answer is the
    smallest ``m >= n`` that reaches ``target``: about ``n · (h / target)²`` with the t-quantile at
    the new degrees of freedom. ``n`` itself when ``h`` is already within ``target``. None when
    the spread is unknown (``df < 1``, a half-width or target not positive and finite) or more than
    ``MAX_NEEDED`` would be needed."""
    dof = n - 1 if df is None else df
    if n < 1 or dof < 1 or not (math.isfinite(rel_half_width) and rel_half_width >= 0):
        return None
    if not (math.isfinite(target) and target > 0):
        return None
    if rel_half_width <= target:
        return n
    s = rel_half_width * math.sqrt(n) / _t(dof)
    z = 1.959963984540054  # t(0.975, df) >= z for every df: (z·s/target)² is a lower bound on m
    # from that bound the answer is a few steps on: t(0.975, df) ≈ z + 2.4/df, so the (t/z)² the
    # bound leaves out adds about 2.4 measurements whatever the count
    m = max(n + 1, math.floor((z * s / target) ** 2))
    while m <= MAX_NEEDED:
        if _t(dof + m - n) * s / math.sqrt(m) <= target:
            return m
        m += 1
    return None


@dataclass(frozen=True)
class Need:
    """What one side of a judgement needs to resolve a precision: ``now`` measurements of it (its
    ``unit``: trials, runs), ``needed`` in all (None: its spread is unknown, or past ``MAX_NEEDED``)."""

    side: str  # "A", "B", or "" where one noise stands for both
    unit: str
    now: int
    needed: int | None

    @property
    def more(self) -> int | None:
        return None if self.needed is None else max(0, self.needed - self.now)

    def text(self) -> str:
        """``4 more trials of B (7 in all)``; ``B: more than 100,000 runs``; ``B: its spread is unknown``."""
        of = f" of {self.side}" if self.side else " of each side"
        if self.needed is None:
            return f"{self.unit}{of}: an unknown number (its spread is unknown or past {MAX_NEEDED:,})"
        unit = self.unit[:-1] if self.more == 1 and self.unit.endswith("s") else self.unit
        return f"{self.more} more {unit}{of} ({self.needed} in all)"


def ratio_needs(a: FigureNoise | None, b: FigureNoise | None, precision: float,
                sides: tuple[str, str] = ("A", "B")) -> tuple[Need, ...]:
    """What each side of a ratio ``b / a`` (``sides``: what the caller calls them) needs for the
    ratio's bound ``e^w − 1`` to reach ``precision``: ``w = sqrt(h_a² + h_b²)``, so each side is
    asked for ``ln(1 + precision) / sqrt(2)`` (``measurements_needed``), and for the ``MIN_DF``
    degrees of freedom the noise rule needs at least; one side's noise standing for both asks the
    same of each. A side whose noise is the run-to-run floor (``repeat_noise``) needs at least
    ``MIN_HISTORY_RUNS`` runs: what replaces the floor is a history that measures the spread."""
    known = [(name, p) for name, p in zip(sides, (a, b)) if p is not None]
    per_side = math.log1p(precision) / math.sqrt(2)
    out = []
    for name, p in known:
        now, unit = p.count()
        df = p.dof()
        needed = measurements_needed(now, p.rel_half_width, per_side, df)
        if needed is not None and df is not None:
            needed = max(needed, now + max(0, MIN_DF - df))  # fewer than MIN_DF df never decide
        if needed is not None and "floor" in p.basis.split("+"):
            # the run-to-run floor stands in until a history measures the spread: that takes runs
            needed = max(needed, MIN_HISTORY_RUNS)
        out.append(Need(name if len(known) == 2 else "", unit, now, needed))
    return tuple(out)


def settle_text(bound: float | None, needs: Sequence[Need], precision: float) -> str:
    """What would settle an inconclusive judgement: the smallest effect the current noise resolves
    (the ratio's bound: a ratio further than it from 1 reads beyond noise) and what each side needs
    to resolve ``precision``. Empty without a bound."""
    if bound is None or not math.isfinite(bound):
        return ""
    lead = f"the current noise resolves only effects beyond ±{bound * 100:.1f}%"
    if not needs:
        return lead
    return f"{lead}; to resolve ±{precision * 100:g}%: " + ", ".join(n.text() for n in needs)


def settle_for(bound: float | None, a: FigureNoise | None, b: FigureNoise | None, precision: float,
               df: int | None, sides: tuple[str, str] = ("A", "B")) -> tuple[str, tuple[Need, ...]]:
    """What would settle a judgement of ``b / a`` whose ratio's bound is ``bound`` at ``precision``:
    ``settle_text``'s sentence (empty when the degrees of freedom are unknown: no count can be
    said) and each side's ``Need`` (``ratio_needs``). ``judge`` says it for every inconclusive
    judgement with a known noise; ``analysis/regress`` for a check whose interval reaches past its
    limit, at the precision that limit asks."""
    needs = ratio_needs(a, b, precision, sides)
    return (settle_text(bound, needs, precision) if df is not None else ""), needs


def wider_text(bound: float, basis_text: str, what: str) -> str:
    """Why a noise cannot resolve an effect: ``noise ±18.0% (history of key …) is wider than the 3%
    limit`` (``what``: ``3% limit``, ``2% it must resolve``)."""
    return f"noise ±{bound * 100:.1f}% ({basis_text}) is wider than the {what}"


@dataclass(frozen=True)
class LevelPrecision:
    """A level's headline precision against the one asked: the relative 95% half-width of its
    trials' mean (``reached``; None with fewer than two trials that measured), how many trials it
    rests on, and how many in all would reach ``target`` (``measurements_needed``)."""

    target: float
    reached: float | None
    trials: int
    needed: int | None
    drifting: bool = False  # a drifting series has no precision to reach: never ``met``

    @property
    def met(self) -> bool:
        """Reached: at least ``AUTO_MIN_TRIALS`` trials (2 degrees of freedom: the noise rule's
        least), a half-width at or within ``target``, and no drift."""
        return (not self.drifting and self.reached is not None and self.trials >= AUTO_MIN_TRIALS
                and self.reached <= self.target)

    @property
    def more(self) -> int | None:
        if self.met:
            return 0
        if self.needed is None:
            return None
        return max(self.needed, AUTO_MIN_TRIALS) - self.trials


def level_precision(trials: int, rel_half_width: float | None, target: float, *,
                    drifting: bool = False) -> LevelPrecision:
    """``LevelPrecision`` of a level whose ``trials`` trials that measured give a headline mean of
    relative 95% half-width ``rel_half_width`` (None: fewer than two)."""
    needed = (measurements_needed(trials, rel_half_width, target)
              if rel_half_width is not None and trials >= 2 else None)
    return LevelPrecision(target=target, reached=rel_half_width, trials=trials, needed=needed, drifting=drifting)


REACHED, MAX_TRIALS, MAX_TIME, NOTHING = "reached", "max trials", "max time", "nothing measured"


def auto_stop(levels: Sequence[LevelPrecision], rounds: int, *, max_trials: int,
              elapsed_s: float = 0.0, max_time_s: float | None = None,
              round_s: float | None = None) -> str | None:
    """``--trials auto``'s stop rule, asked after each round: ``REACHED`` when every level's
    precision is ``met``; ``MAX_TRIALS`` after ``max_trials`` rounds; ``MAX_TIME`` when another
    round (``round_s``: the last one's seconds) would end past ``max_time_s`` of measuring
    (``elapsed_s`` so far); else None: measure another round. ``NOTHING`` when no level measured
    anything (a server that fails every request gives no spread to measure to)."""
    if not levels:
        return NOTHING
    if all(lv.met for lv in levels):
        return REACHED
    if rounds >= max_trials:
        return MAX_TRIALS
    if max_time_s is not None and elapsed_s + (round_s or 0.0) > max_time_s:
        return MAX_TIME
    return None


def ratio_noise(ratio: float, a: FigureNoise | None, b: FigureNoise | None, *,
                effect: float | None = None) -> RatioNoise:
    """The interval of ``ratio`` = b / a and ``judge``'s word for it (module docstring)."""
    jd = judge(ratio, a, b, effect=effect)
    if jd.low is None:
        return RatioNoise(ratio, None, None, None, "unknown", INCONCLUSIVE, jd)
    within = True if jd.word == WITHIN else False if jd.word == BEYOND else None
    return RatioNoise(ratio, jd.low, jd.high, within, jd.basis, jd.word, jd)


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
    h = _t(n - 1) * sd * math.sqrt(1.0 / n + 1.0 / max(1, repeats)) / abs(mean)
    return FigureNoise(h, "trials", n, f"prediction interval of {n} trials, {n - 1} df", n - 1, n, "trials")


@dataclass(frozen=True)
class RepeatCheck:
    """A level measured again later in the run (the history check): first vs repeat, with
    ``judge``'s word (``beyond_noise`` is ``word == "beyond noise"``)."""

    first: float
    repeat: float
    ratio: float  # repeat / first
    low: float | None  # None: the judgement had no interval (a ratio that is not finite)
    high: float | None
    beyond_noise: bool
    basis: str
    bound_pct: float  # the noise allowed, as a percentage of the first figure
    word: str = WITHIN
    judgement: Judgement | None = None


def repeat_check(first: Sequence[float], repeat: Sequence[float], window_s: float | None,
                 repeat_window_s: float | None = None, *, drift: tuple[str, str] | None = None,
                 precision: float | None = None) -> RepeatCheck | None:
    """Whether a repeat of a level differs from its first measurement by more than noise
    (``judge``: with 2 trials the prediction interval has 1 df and the check is inconclusive).

    With two or more first measurements (trials), the repeat's mean must lie in their prediction
    interval (``prediction_noise``); with one, in the single-level bounds of both windows
    (``single_level_noise``, ``w = sqrt(h_first² + h_repeat²)``; ``repeat_window_s`` None: the
    same window). ``drift``: the level drifted (``metrics.drift.figure_drift``): inconclusive, with
    why. None when either side has no figure."""
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
        noise = pn
    else:
        s = single_level_noise(window_s)
        rw = single_level_noise(repeat_window_s if repeat_window_s else window_s)
        basis = (f"bound for {s.detail}" if rw.rel_half_width == s.rel_half_width
                 else f"bound for one {window_s or 0:.0f} s and one {repeat_window_s:.0f} s level")
        noise = FigureNoise(ratio_half_width(s.rel_half_width, rw.rel_half_width), "bound", None, basis,
                            H200_TRIAL_DF)
    # the prediction interval (or the two bounds) is already the whole ratio's half-width
    jd = judge(ratio, with_drift(FigureNoise(noise.rel_half_width / math.sqrt(2), noise.basis, noise.n,
                                             noise.detail, noise.df, noise.measured, noise.unit), drift),
               precision=precision)
    return RepeatCheck(first=mf, repeat=mr, ratio=ratio, low=jd.low, high=jd.high,
                       beyond_noise=jd.word == BEYOND, basis=noise.detail,
                       bound_pct=(jd.bound or 0.0) * 100.0, word=jd.word, judgement=jd)


@dataclass
class Plateau:
    """The levels whose score is within noise of the best, and the one recommended. A level whose
    judgement against the best is inconclusive is never on the plateau (``inconclusive`` lists it)."""

    best: float  # the value (load level) with the highest mean score
    values: list[float]  # every value on the plateau, ascending (the best among them)
    recommended: float
    reason: str
    scores: dict[float, float] | None = None  # value -> its (mean) score
    noise: dict[float, FigureNoise] | None = None  # value -> the noise of its (mean) score
    inconclusive: list[float] = field(default_factory=list)  # values the noise cannot place
    judgements: dict[float, Judgement] = field(default_factory=dict)  # value -> judge(best ÷ its score)


def plateau(points: Iterable[tuple[float, float, FigureNoise | None]], *, higher_is_better: bool = True,
            prefer: str = "lowest") -> Plateau | None:
    """Every point ``(value, score, noise)`` that ``judge`` calls within noise of the best one's
    (best ÷ score), and the recommended value: the lowest load on the plateau
    (``prefer="lowest"``: the same efficiency within noise with the most latency headroom). A point
    the judgement calls inconclusive (unknown noise, < 2 df, a bound over ±25%) is never on it."""
    pts = [(float(v), float(s), n) for v, s, n in points if s is not None and math.isfinite(s) and s > 0]
    if not pts:
        return None
    sign = 1.0 if higher_is_better else -1.0
    bv, bs, bn = max(pts, key=lambda p: (sign * p[1], -p[0]))
    on, unsure, jds = [], [], {}
    for v, s, n in pts:
        if v == bv:
            on.append(v)
            continue
        jd = judge(bs / s if higher_is_better else s / bs, n, bn)
        jds[v] = jd
        if jd.word == WITHIN:
            on.append(v)
        elif jd.word == INCONCLUSIVE:
            unsure.append(v)
    on.sort()
    unsure.sort()
    rec = on[0] if prefer == "lowest" else bv
    if rec == bv:
        reason = "the best score" + ("; no other level is within noise of it" if len(on) == 1 else "")
        if unsure:
            jd = jds[unsure[0]]
            reason += (f"; {', '.join(f'{u:g}' for u in unsure)} inconclusive against it ({jd.why}: "
                       f"{jd.todo})")
    else:
        reason = (f"the lowest load within noise of the best ({bv:g}): the same efficiency with the most "
                  "latency headroom")
    return Plateau(best=bv, values=on, recommended=rec, reason=reason, scores={v: s for v, s, _ in pts},
                   noise={v: n for v, _, n in pts if n is not None}, inconclusive=unsure, judgements=jds)


def margin(pl: Plateau, a: float, b: float, *, higher_is_better: bool = True) -> RatioNoise | None:
    """``a``'s score over ``b``'s (for a lower-is-better score, ``b`` over ``a``: above 1 means ``a``
    is better) with ``judge``'s word on the plateau's per-value noise (``within`` None: inconclusive)."""
    sc, nz = pl.scores or {}, pl.noise or {}
    if a not in sc or b not in sc or not sc[a] or not sc[b]:
        return None
    r = sc[a] / sc[b] if higher_is_better else sc[b] / sc[a]
    return ratio_noise(r, nz.get(b), nz.get(a))


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
        cands = [FigureNoise(bound.rel_half_width / math.sqrt(m), "bound", m, bound.detail, H200_TRIAL_DF, m,
                             "measurements")]
        if sd is not None:
            cands.append(FigureNoise(_t(df) * sd / math.sqrt(m), "repeats", m,
                                     f"repeat spread sd {sd * 100:.1f}% ({df} df)", df, m, "measurements"))
        given = [tn for _, _, tn in ms if tn is not None]
        cands += [tn for tn in given if tn.basis != "drift"]
        drift = next(((tn.drift, tn.drift_todo) for tn in given if tn.drift), None)
        widest = max(cands, key=lambda c: c.rel_half_width)
        if drift is not None:
            widest = replace(widest, drift=drift[0], drift_todo=drift[1])
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
    ss, df = 0.0, 0
    for seg in segments:
        if len(seg) < 2:
            continue
        vals = [logs[i] for i in seg]
        m = sum(vals) / len(vals)
        ss += sum((v - m) ** 2 for v in vals)
        df += len(vals) - 1
    return (math.sqrt(ss / df), df) if df else (None, 0)


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
            bound = _t(df) * sd * math.sqrt(1.0 + 1.0 / len(seg))
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
