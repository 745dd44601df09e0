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
  stands for a repeat of a moving series), or a side's run marks the figure as biased by its own
  load generator (``FigureNoise.client``, ``metrics.saturation.client_bias``: a host that held the
  client's event loop stretches a closed loop's every hand-off, and moves the figure as far as a
  change of configuration would). The judgement then says why and what to do (more
  trials, longer levels, more runs; for a drift, its recorded cause and what it calls for) — never
  "within noise", and no plateau rests on it.

Every caller — ``compare``, ``regress``, the ``--optimize`` plateau (``metrics/plateau``:
``measured_plateau``), ``tune``'s margins (``margin``) and the history check (``repeat_check``) —
takes its word from ``judge``; ``Judgement.text`` names the noise basis. ``regress`` prints the
same word for the same pair, and gates on the interval against its limit (``analysis/regress``:
``pass`` only when the interval excludes a change beyond the limit, ``fail`` when it lies wholly
beyond, else ``inconclusive``, with ``metrics/precision``'s ``wider_text`` and ``settle_for`` sentences).

**A spread of zero** (every run or trial gave the same figure: sd 0%) measures no noise — a figure
that never moves between measurements is fixed by something else (a declared or modelled power), not
proven noise-free: ``judge`` reads it as inconclusive and says so (``ZERO_SPREAD``).

The rule's parts, one module each (``metrics/``): ``figure_noise`` — a figure's noise
(``FigureNoise``) from its basis (trials, the history's spread, the run-to-run floor, the
single-level bound), the ratio's interval (``ratio_interval``) and the rule's thresholds
(``MIN_DF``, ``MAX_BOUND``); ``series_noise`` — a configuration's run-to-run spread in the history,
split at change points; ``precision`` — how many more measurements a precision needs, what would
settle an inconclusive judgement, and ``--trials auto``'s stop rule; ``plateau`` — the levels within
noise of the best. This module holds the judgement itself (``judge``, ``ratio_noise``) and the
history check's repeat test (``repeat_check``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence, TypedDict

from wattbench.metrics.figure_noise import (H200_TRIAL_DF, MAX_BOUND, MIN_DF, ZERO_REL, FigureNoise, prediction_noise,
                                            ratio_half_width, ratio_interval, single_level_noise, with_drift)
from wattbench.metrics.precision import DEFAULT_PRECISION, Need, settle_for, wider_text

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
ZERO_TODO = "measure with a power meter (--sensor), or with --trials 3 or more of a figure that varies"


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
    advice: str = ""  # inconclusive: what to do, in words
    settle: str = ""  # inconclusive with a known noise: ``settle_text``'s figures (empty where the noise is unknown)
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
    def todo(self) -> str:
        """What to do: ``settle``'s figures, then ``advice``. A caller that says the figures per line
        (one per limit) and the advice once reads the two apart (``analysis/regress``)."""
        return "; ".join(x for x in (self.settle, self.advice) if x)

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
    it inconclusive first, naming the side (``sides``: how the caller calls ``a`` and ``b``); so does a
    side whose own load generator biased the figure (``FigureNoise.client``: a host that held the
    client moves the figure as much as a change of configuration would)."""
    r = float(ratio) if ratio is not None else float("nan")
    if not (r > 0 and math.isfinite(r)):
        return Judgement(INCONCLUSIVE, r, why="no ratio (a figure is missing or zero)",
                         advice="measure the figure in both runs")
    known = [p for p in (a, b) if p is not None]
    drifting = [(side, p) for side, p in zip(sides, (a, b)) if p is not None and p.drift]
    if drifting:  # a series that moves is not noise: no interval stands for a repeat of it
        return Judgement(INCONCLUSIVE, r, basis="drift",
                         why="; ".join(f"{side} {p.drift}" for side, p in drifting),
                         advice="; ".join(dict.fromkeys(p.drift_todo or DRIFT_TODO for _, p in drifting)))
    held = [(side, p) for side, p in zip(sides, (a, b)) if p is not None and p.client]
    if held:  # the run marks the figure as biased by its own load generator: not the server's figure
        return Judgement(INCONCLUSIVE, r, basis="client",
                         why="; ".join(f"{side}'s {p.client}" for side, p in held),
                         advice="; ".join(dict.fromkeys(p.client_todo for _, p in held)))
    if not known:
        return Judgement(INCONCLUSIVE, r, why="noise unknown", advice=MORE_DATA)
    unbounded = [p for p in known if not p.known()]
    if unbounded:  # a history of too few runs to have a spread: named, never "noise unknown"
        text = "; ".join(dict.fromkeys(p.detail or p.basis for p in unbounded))
        return Judgement(INCONCLUSIVE, r, basis="+".join(dict.fromkeys(p.basis for p in unbounded)),
                         basis_text=text, df=0, why=f"noise from 0 degrees of freedom ({text}), fewer than {MIN_DF}",
                         advice=MORE_DATA)
    ha = known[0].rel_half_width  # a, else b
    hb = known[-1].rel_half_width  # b, else a
    if not ratio_half_width(ha, hb) > ZERO_REL:  # every side's spread is zero: no noise was measured
        basis_text = "; ".join(dict.fromkeys(p.detail or p.basis for p in known))
        return Judgement(INCONCLUSIVE, r, basis="+".join(dict.fromkeys(p.basis for p in known)),
                         basis_text=basis_text, df=min((p.dof() or 0) for p in known),
                         why=f"{basis_text}: {ZERO_SPREAD}", advice=ZERO_TODO)
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
    more = {"needs": needs, "precision": aim, "settle": settle, "advice": NARROWER}
    if df is None or df < MIN_DF:
        dft = "unknown degrees of freedom" if df is None else f"{df} degree{'s' if df != 1 else ''} of freedom"
        return Judgement(INCONCLUSIVE, why=f"noise from {dft} ({j['basis_text']}), fewer than {MIN_DF}",
                         **more, **j)  # type: ignore[arg-type]
    if bound > MAX_BOUND:
        return Judgement(INCONCLUSIVE, why=f"noise ±{bound * 100:.1f}% ({j['basis_text']}) is wider than "
                         f"±{MAX_BOUND * 100:.0f}%", **more, **j)  # type: ignore[arg-type]
    if lo <= 1.0 <= hi:
        if effect is not None and bound > abs(effect):
            why = wider_text(bound, j["basis_text"], f"{abs(effect) * 100:g}% it must resolve")
            return Judgement(INCONCLUSIVE, why=why, **more, **j)  # type: ignore[arg-type]
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


def ratio_noise(ratio: float, a: FigureNoise | None, b: FigureNoise | None, *,
                effect: float | None = None) -> RatioNoise:
    """The interval of ``ratio`` = b / a and ``judge``'s word for it (module docstring)."""
    jd = judge(ratio, a, b, effect=effect)
    if jd.low is None:
        return RatioNoise(ratio, None, None, None, "unknown", INCONCLUSIVE, jd)
    within = True if jd.word == WITHIN else False if jd.word == BEYOND else None
    return RatioNoise(ratio, jd.low, jd.high, within, jd.basis, jd.word, jd)


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
