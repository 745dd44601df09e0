"""The answer of a paired A/B measurement (``wattbench ab``), in compare's words.

Both runs of an ``ab`` hold the same ``PairedRun`` block (``Result.noise.paired``): per level, each
pair's throughput, power and per-kW figure of both sides at one boundary. The answer is built from
the pairs alone (``metrics/paired.paired_ratio``: the geometric mean of the pairs' ratios and its
Student-t interval over the pairs), never from the two runs' trial CIs: a drift common to both
sides falls out of each pair and, over whole ``A B B A`` blocks, out of the mean.

Each level reads as compare's answer line (``analysis/ratios.answer_line``) with compare's
``Decomposition`` (per kW = throughput ÷ power, B over A) and ``metrics/noise.judge``'s word on the
per-kW ratio, its noise the pairs' interval (``PairedRatio.noise``); then the precision reached
against the one asked and, short of it, the pairs the observed spread says it takes.

**A drift of one side** (docs/compare.md "A paired A/B measurement"): the pairs cancel a drift both
sides share, not one that only one side has — then the pairs' ratios move themselves, and their
spread around one mean is not noise. The level's ratio *drifts* when either (1) the pairs' ratios
move over the pairs (``PairedRatio.drifts``: ``metrics/drift.trials_trend`` of the ratios in pair
order, Sen's 99% interval excluding 0; below ``metrics/drift.MIN_POINTS`` (4) pairs there is no
interval and no drift call from the pairs), or (2) the two sides' own per-second series of the
figure (each run's recorded ``Stationarity`` trend at the level's boundary, the finer reading of the
same drift) changed by amounts whose 99% intervals do not overlap (``metrics/drift.trends_apart``).
A drift common to both sides is neither: it stays judged. A drifting ratio is never judged within
or beyond noise: the drift is carried to ``metrics/noise.judge`` (``with_drift``), which says
``inconclusive``; the why names the ratio's change over the pairs and each side's own change with
its interval (the recorded per-second trend, else the trend of its pairs' values) and the drifting
side's recorded cause — ``B/A changes +12.8% over the 16 pairs: A holds -0.3% (-2.0% to +1.5%), B
drifts +18.9% (+6.3% to +30.9%; no recorded cause: …); a drift of one side, which the pairs do not
cancel``; the todo says to precondition or warm the drifting side and
measure again — or, where that side was preconditioned (its ``noise.precondition``), to give its
``--precondition-max`` longer when it ended unsettled, or to warm longer or repeat when it drifted
after settling — (and the side's own recorded remedy, when its cause has one). The precision asked is
then not reached (``metrics/paired.precision``), whatever the interval's width.

**The shared meter** (docs/compare.md "A paired A/B measurement"): ``ab`` reads both sides with
the same meters, so every trial's energy holds the other side's draw while it idles (two servers on
one GPU, or two GPUs inside one ``accelerator`` or ``node`` boundary). The ratio is of those gross
figures: it compares "the machine with both resident, serving A" with "… serving B". The meters'
idle power with both resident and neither loaded is measured before the first pair and again after
each block of pairs (``PairedRun.idle_series``); per level, at its boundary, the series' mean, its
range and the mean's share of each side's mean power are shown (``IdleDraw``), so a reader sees how
much of each figure is the idle side's, and the line says the ratio includes that draw. An idle
series that moves by more than its noise (``metrics/drift.trend``, on the log scale: its 99% interval
of the change excludes 0, which takes six windows or more) is named with its change. A run written before the series was
measured shows the one reading before the first pair.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from wattbench.accounting.drift import figure_trend
from wattbench.analysis.ratios import (RATIO_DIRECTION, Decomposition, NoiseVerdict, RatioCI, answer_line,
                                       upgrade_ratio_direction)
from wattbench.core.errors import UserError
from wattbench.core.numbers import fmt, fmt_pct_against
from wattbench.core.schema import FigureTrend, PairedLevel, PairedRun, Preconditioning, Result, Stationarity
from wattbench.metrics.drift import recorded_trend, trend, trends_apart, trials_trend
from wattbench.metrics.figure_noise import with_drift
from wattbench.metrics.noise import DRIFT_TODO, INCONCLUSIVE, judge
from wattbench.metrics.paired import PairedRatio, paired_ratio, pairs_needed, precise_enough

PAIR = "B/A"
PAIRED_CI = "paired t over the pairs' log ratios"


class PairedAnswer(BaseModel):
    """One level's paired answer: the pairs counted, the decomposition with its interval, the word,
    the precision reached (the per-kW ratio's 95% relative half-width, %) and the pairs it would
    take to reach the one asked; ``answer``: compare's answer line."""

    key: str
    label: str
    boundary: str | None = None
    pairs: int = 0
    decomposition: Decomposition | None = None
    throughput_ratio: float | None = None  # without energy: the throughput's paired ratio
    noise: NoiseVerdict | None = None
    precision_reached_pct: float | None = None
    pairs_needed: int | None = None  # for the precision asked, from the spread seen (None: reached or unknown)
    answer: str = ""
    precision_line: str = ""


class IdleDraw(BaseModel):
    """The shared meter's idle series at one level's boundary (both servers resident, neither
    loaded): how many windows, their mean and range (W), the mean's share of each side's mean power
    (0.42: 42%), and the series' change over the pairs (%, Theil–Sen on the log scale) with whether it moved by more
    than its noise (``drifts``)."""

    key: str
    boundary: str
    windows: int
    mean_w: float
    low_w: float
    high_w: float
    share_a: float | None = None
    share_b: float | None = None
    change_pct: float | None = None
    drifts: bool = False


class PairedComparison(BaseModel):
    """``ab``'s answer: the two runs (A, then B), the order they were measured in, the precision
    asked and why it stopped, the shared meter's idle power, and one answer per level. Every ratio
    is B ÷ A (``ratio_direction``); a file written without that field stored ``power_ratio`` A ÷ B
    and reads in this direction (``analysis/ratios.upgrade_ratio_direction``)."""

    run_ids: list[str]
    ratio_direction: Literal["candidate/baseline"] = RATIO_DIRECTION
    letters: list[str] = Field(default_factory=lambda: ["A", "B"])
    sequence: list[str] = Field(default_factory=list)
    precision_pct: float | None = None
    stopped: str = ""
    shared_idle_power_w: dict[str, float] = Field(default_factory=dict)
    idle_series: dict[str, list[tuple[float, float]]] = Field(default_factory=dict)
    idle: list[IdleDraw] = Field(default_factory=list)
    idle_lines: list[str] = Field(default_factory=list)
    levels: list[PairedAnswer] = Field(default_factory=list)
    todo: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _read_ratio_direction(cls, data: Any) -> Any:
        return upgrade_ratio_direction(data, "levels", "decomposition")


def _ci(r: PairedRatio | None) -> RatioCI | None:
    if r is None or r.low is None or r.high is None:
        return None
    return RatioCI(low=r.low, high=r.high, confidence=0.95, method=PAIRED_CI)


def _pct(x: float) -> str:
    return f"{x:+.1f}%"


def _side_trend(rec: FigureTrend | None, figure: str, boundary: str | None,
                values: list[float | None]) -> FigureTrend | None:
    """A side's own change (%) with its 99% interval and whether it moves: its recorded per-second
    trend, else the trend of its pairs' values in pair order, in the form a level records it
    (``accounting.drift.figure_trend``)."""
    if rec is not None and rec.change_pct is not None:
        return rec
    return figure_trend(figure, boundary, trials_trend(values))


def ratio_drift(lv: PairedLevel, headline: PairedRatio, figure: str,
                stationarity: tuple[Stationarity | None, Stationarity | None] = (None, None),
                preconditioned: tuple[Preconditioning | None, Preconditioning | None] = (None, None)
                ) -> tuple[str, str] | None:
    """The level's ratio drift (module docstring "A drift of one side"): ``(words, what to do)`` in
    ``metrics/drift.figure_drift``'s form, or None when the ratio holds (or too few pairs to tell).
    ``preconditioned``: each side's ``--precondition`` record, which what to do reads: a drifting
    side that was not preconditioned is told to be; one whose preconditioning reached its limit
    unsettled, to give it longer; one that drifted after it settled, to warm longer or repeat."""
    recs = [recorded_trend(st, figure, lv.boundary) for st in stationarity]
    if not headline.drifts and not trends_apart(recs[0], recs[1]):
        return None
    per_kw = figure == "output_tokens_per_s_per_kw"
    series = (lv.a_per_kw, lv.b_per_kw) if per_kw else (lv.a_tokens_per_s, lv.b_tokens_per_s)
    sides, moved = [], []
    for side, rec, values, st in zip(("A", "B"), recs, series, stationarity):
        ch = _side_trend(rec, figure, lv.boundary, values)
        if ch is None or ch.change_pct is None:
            continue
        change, low, high, moves = ch.change_pct, ch.ci_low_pct, ch.ci_high_pct, ch.moves
        interval = f"{_pct(low)} to {_pct(high)}" if low is not None and high is not None else ""
        cause = ""
        if moves:
            moved.append((side, st))
            if rec is not None and rec.drifting and st is not None and st.cause:  # its recorded series drifts
                cause = st.cause
        note = "; ".join(x for x in (interval, cause) if x)
        sides.append(f"{side} {'drifts' if moves else 'holds'} {_pct(change)}" + (f" ({note})" if note else ""))
    tr = headline.trend
    ratio_change = tr.change if tr is not None else None
    head = f"changes {_pct(100.0 * ratio_change)} over the {headline.n} pairs" if ratio_change is not None else \
        f"moves over the {headline.n} pairs"
    if moved:
        tail = "a drift of one side, which the pairs do not cancel" if len(moved) == 1 else \
            "the sides drift apart, which the pairs do not cancel"
    else:
        tail = "neither side's own series moves by more than its noise, but their ratio does"
    words = f"{head}: {', '.join(sides)}; {tail}" if sides else f"{head}; {tail}"
    pcs = dict(zip(("A", "B"), preconditioned))
    plain = [side for side, _ in moved if pcs[side] is None] if moved else ["both sides"]
    todo = []
    if plain:
        todo.append(f"precondition {' and '.join(plain)} (--precondition) or warm {'it' if len(plain) == 1 else 'them'} "
                    f"until {'its' if len(plain) == 1 else 'their'} series settles (a longer --warmup), then measure "
                    "again")
    for side, _ in moved:
        pc = pcs[side]
        if pc is not None and not pc.settled:
            todo.append(f"{side}'s --precondition ended unsettled after {pc.duration_s or 0.0:.0f} s: give it longer "
                        "(--precondition-max), then measure again")
        elif pc is not None:
            todo.append(f"{side} drifted after --precondition settled it ({pc.duration_s or 0.0:.0f} s): warm it "
                        "longer (a longer --precondition-max or --warmup) or repeat the pairs")
    for _, st in moved:
        if st is not None and st.todo and st.todo != DRIFT_TODO and st.todo not in todo:
            todo.append(st.todo)
    return words, "; ".join(todo)


def paired_level(lv: PairedLevel, precision_pct: float | None,
                 stationarity: tuple[Stationarity | None, Stationarity | None] = (None, None),
                 preconditioned: tuple[Preconditioning | None, Preconditioning | None] = (None, None)
                 ) -> PairedAnswer:
    """One level's answer from its pairs (module docstring); ``stationarity``: A's and B's recorded
    trends of the level (``LevelResult.stationarity``), the sides' own drift; ``preconditioned``:
    each side's ``--precondition`` record (``ratio_drift``'s what to do)."""
    out = PairedAnswer(key=lv.key, label=lv.label, boundary=lv.boundary)
    times = (lv.a_time_s or None, lv.b_time_s or None)
    t = paired_ratio(lv.a_tokens_per_s, lv.b_tokens_per_s, *times)
    if lv.boundary is not None:
        k = paired_ratio(lv.a_per_kw, lv.b_per_kw, *times)
        p = paired_ratio(lv.a_power_w, lv.b_power_w, *times)  # B power ÷ A power, as compare stores it
        d = Decomposition(candidate="B", boundary=lv.boundary, per_kw_ratio=k.ratio if k else None,
                          throughput_ratio=t.ratio if t else None, power_ratio=p.ratio if p else None,
                          per_kw_ci=_ci(k), throughput_ci=_ci(t), power_ci=_ci(p))
        headline = k
    else:
        d, headline = None, t
    out.pairs = headline.n if headline is not None else 0
    figure = "output_tokens_per_s_per_kw" if d is not None else "output_tokens_per_s"
    drift = ratio_drift(lv, headline, figure, stationarity, preconditioned) if headline is not None else None
    if headline is not None:
        noise = headline.noise()
        nv = NoiseVerdict.of(figure, judge(headline.ratio, with_drift(noise, drift), noise, sides=(PAIR, PAIR)))
        if noise is None and drift is None:
            nv.why = (f"{headline.n} pair{'s' if headline.n != 1 else ''} measured both sides: an interval needs "
                      "3 or more (2 degrees of freedom)")
            nv.todo = "more pairs: --pairs 4 or --precision PCT"
        out.noise = nv
        if d is not None:
            d.noise = nv
    out.decomposition = d
    out.throughput_ratio = t.ratio if t else None
    out.answer = answer_line(lv.key, PAIR, d, out.noise, out.throughput_ratio)
    reached = headline.rel_half_width if headline is not None else None
    out.precision_reached_pct = None if reached is None else reached * 100.0
    what = "per kW" if d is not None else "throughput"
    if reached is None:
        out.precision_line = f"{lv.key}: {out.pairs} pairs, no interval on the {what} ratio yet"
    else:
        out.precision_line = f"{lv.key}: ±{fmt_pct_against(reached * 100.0, precision_pct)} reached on the {what} " \
                             f"ratio from " \
                             f"{out.pairs} pairs"
    if precision_pct is not None:
        if drift is not None:
            out.precision_line += f", not the ±{precision_pct:g}% asked: the ratio drifts, no count of pairs settles it"
        elif precise_enough(headline, precision_pct):
            out.precision_line += f" (asked ±{precision_pct:g}%)"
        else:
            out.pairs_needed = pairs_needed(headline, precision_pct)
            more = (f"; about {out.pairs_needed} pairs would reach it at the spread seen" if out.pairs_needed
                    else "")
            out.precision_line += f", short of the ±{precision_pct:g}% asked{more}"
    return out


def _mean_power(powers: list[float | None]) -> float | None:
    vals = [x for x in powers if x]
    return sum(vals) / len(vals) if vals else None


def idle_draw(lv: PairedLevel, series: list[tuple[float, float]]) -> IdleDraw | None:
    """The idle series' summary at ``lv``'s boundary (module docstring); None without a window."""
    if not series or lv.boundary is None:
        return None
    watts = [w for _, w in series]
    mean = sum(watts) / len(watts)
    pa, pb = _mean_power(lv.a_power_w), _mean_power(lv.b_power_w)
    tr = trend([t for t, _ in series], watts) if len(series) >= 2 else None
    change = tr.change if tr is not None else None
    return IdleDraw(key=lv.key, boundary=lv.boundary, windows=len(series), mean_w=mean, low_w=min(watts),
                    high_w=max(watts), share_a=mean / pa if pa else None, share_b=mean / pb if pb else None,
                    change_pct=None if change is None else 100.0 * change, drifts=bool(tr is not None and tr.moves))


def _watts(x: float) -> str:
    """Whole watts from 10 W up (``95``, ``1,250``), three figures below (``5.31``)."""
    return f"{x:,.0f}" if abs(x) >= 10 else fmt(x)


def idle_line(d: IdleDraw) -> str:
    """``c=16: the shared meter's idle at accelerator (both servers resident, neither loaded), 5
    windows before and between the blocks: mean 125 W (120–131 W), 42% of A's and 43% of B's power;
    the ratio includes the idle side's draw (each side's power is the whole meter's)``."""
    shares = [f"{x:.0%} of {side}'s" for side, x in (("A", d.share_a), ("B", d.share_b)) if x is not None]
    windows = "1 window before the first pair" if d.windows == 1 else \
        f"{d.windows} windows before and between the blocks"
    spread = f" ({_watts(d.low_w)}–{_watts(d.high_w)} W)" if d.windows > 1 else ""
    drift = ""
    if d.drifts and d.change_pct is not None:
        drift = f"; the idle draw drifts {d.change_pct:+.1f}% over the pairs, more than its noise"
    return (f"{d.key}: the shared meter's idle at {d.boundary} (both servers resident, neither loaded), {windows}: "
            f"mean {_watts(d.mean_w)} W{spread}, {' and '.join(shares) or 'part of each side'} power{drift}; the ratio "
            f"includes the idle side's draw at {d.boundary} (each side's power is the whole meter's)")


def check_pair(a: Result, b: Result) -> tuple[PairedRun, PairedRun]:
    """The two runs' paired blocks, checked to be the two sides of one ``ab`` (one line otherwise)."""
    pa = a.noise.paired if a.noise else None
    pb = b.noise.paired if b.noise else None
    if pa is None or pb is None:
        missing = a.run_id if pa is None else b.run_id
        raise UserError(f"run {missing} was not measured by `wattbench ab` (no pairs in it); compare two runs with "
                        "`wattbench compare`")
    if pa.other_run_id != b.run_id or pb.other_run_id != a.run_id or pa.role != "A" or pb.role != "B":
        raise UserError(f"runs {a.run_id} and {b.run_id} are not the A and B of one `wattbench ab`")
    return pa, pb


def paired_compare(a: Result, b: Result) -> PairedComparison:
    """``ab``'s answer from its two runs (A first)."""
    pa, _ = check_pair(a, b)
    cmp = PairedComparison(run_ids=[a.run_id, b.run_id], sequence=list(pa.sequence), precision_pct=pa.precision_pct,
                           stopped=pa.stopped, shared_idle_power_w=dict(pa.shared_idle_power_w),
                           idle_series={b: list(v) for b, v in pa.idle_series.items()})
    for lv in pa.levels:
        st = tuple(next((x.stationarity for x in r.levels if x.index == lv.index), None) for r in (a, b))
        pcs = tuple(r.noise.precondition if r.noise is not None else None for r in (a, b))
        ans = paired_level(lv, pa.precision_pct, (st[0], st[1]), (pcs[0], pcs[1]))
        cmp.levels.append(ans)
        draw = idle_draw(lv, pa.idle_series.get(lv.boundary, [])) if lv.boundary else None
        if draw is not None:
            cmp.idle.append(draw)
            cmp.idle_lines.append(idle_line(draw))
            continue
        idle = pa.shared_idle_power_w.get(lv.boundary) if lv.boundary else None
        if idle is not None:
            shares = []
            for side, powers in (("A", lv.a_power_w), ("B", lv.b_power_w)):
                vals = [x for x in powers if x]
                if vals:
                    shares.append(f"{idle / (sum(vals) / len(vals)):.0%} of {side}'s")
            cmp.idle_lines.append(
                f"{lv.key}: the shared meter's idle {fmt(idle)} W at {lv.boundary} (both servers resident, neither "
                f"loaded) is {' and '.join(shares) or 'part of each side'} power: each side's figures include the "
                "idle side's draw")
    cmp.todo = next((x.noise.todo for x in cmp.levels if x.noise is not None and x.noise.word == INCONCLUSIVE
                     and x.noise.todo), None)
    return cmp

