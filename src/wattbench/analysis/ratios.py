"""One pair of levels, baseline and candidate: its ratios, decomposed as platform claims are, their
confidence intervals, ``metrics/noise.judge``'s word on the per-kW ratio, and the answer line that
says them — what ``compare``, ``regress`` and ``wattbench ab`` (``analysis/ab``) print for a pair.

For a candidate against the baseline at one level::

    per_kw_ratio     = throughput_ratio / power_ratio
    throughput_ratio = tput_candidate / tput_baseline        (output tokens/s)
    power_ratio      = power_candidate / power_baseline      (average power at the boundary)
    j_per_output_token_ratio = power_ratio / throughput_ratio = 1 / per_kw_ratio

**One direction**: every ratio, stored and printed, is candidate ÷ baseline (``B/A``), as in the
side-by-side table, so "a 700 W platform at 95% of a 1400 W platform's throughput" stores
``per_kw_ratio`` 1.90, ``throughput_ratio`` 0.95, ``power_ratio`` 0.50 and reads ``per kW: 1.90× =
throughput 0.95× ÷ power 0.50×``. Files written before this direction was one (no
``ratio_direction`` field) stored ``power_ratio`` and ``power_ci`` as baseline ÷ candidate;
``upgrade_ratio_direction`` turns such a document's decompositions into this direction, and the
models that hold decompositions (``Comparison``, ``PairedComparison``) apply it when they read one.

**One ratio, one definition**: every ratio is read from :func:`figures.reported_figures` — the trial
means with ``--trials`` — so the ratio in an answer line is the ratio in its table. The per-kW ratio
is the ratio of the two per-kW figures; throughput ÷ power equals it exactly for single
measurements and to second order (the trials' covariance) with trials.

**One verdict** (``judge_noise``: ``metrics/noise.judge``): each pair's per-kW ratio (throughput
without energy) reads ``beyond noise``, ``within noise`` or ``inconclusive`` with its noise basis
(``figure_noise``: each side's noise as a repeat of its run would see it); ``compare`` and
``regress`` print the same answer line for the same pair (``answer_line``), and each judged figure's
basis once (``noise_bases``).

Confidence intervals (when both levels carry trials, see :mod:`wattbench.analysis.figures`) are
propagated on the log scale with the delta method: for a ratio ``R = m_b / m_a`` of independent
means with CI half-widths ``h_a``, ``h_b`` at the same confidence level,
``w = sqrt((h_a/m_a)² + (h_b/m_b)²)`` and the CI is ``[R·e^-w, R·e^w]``. The per-kW ratio uses
the trials' own per-kW CIs when present (they carry the within-run correlation of throughput and
power); otherwise it combines the throughput and power CIs, treating them as independent
(conservative when they are positively correlated, as they usually are).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable, Literal, TypeGuard

from pydantic import BaseModel

from wattbench.analysis.figures import reported_figures
from wattbench.core.numbers import fmt_ratio, fmt_ratio_estimate
from wattbench.core.schema import FigureKey, LevelResult, Result
from wattbench.metrics.drift import figure_drift
from wattbench.metrics.figure_noise import (FigureNoise, ratio_interval, repeat_noise, spread_noise, trials_noise,
                                            with_client, with_drift)
from wattbench.metrics.noise import INCONCLUSIVE, Judgement, judge
from wattbench.metrics.saturation import client_bias
from wattbench.results.headline import TrialCI, trial_ci

# (result, level, figure name at the boundary) -> the run-to-run noise of that configuration's figure
# in the history store (``results/store_noise``: split at change points), or (relative sd, runs), or None
HistorySpread = Callable[[Result, LevelResult, str], "FigureNoise | tuple[float | None, int] | None"]

# the direction of every stored ratio; a document that holds decompositions writes it as ``ratio_direction``
RATIO_DIRECTION: Literal["candidate/baseline"] = "candidate/baseline"

# figures whose log-scale noise is another's: J/token = power / throughput, the inverse of per kW
SAME_LOG_NOISE = {"j_per_output_token": "output_tokens_per_s_per_kw"}


class RatioCI(BaseModel):
    low: float
    high: float
    confidence: float | None = None
    method: str = "log-ratio delta method"


class NoiseVerdict(BaseModel):
    """``metrics/noise.judge``'s word on one ratio (``word``); ``within`` True/False, None when
    inconclusive. ``basis_text`` names the noise basis (within-run trials, history of key K, df)."""

    figure: str  # the ratio judged: output_tokens_per_s_per_kw, or output_tokens_per_s without energy
    ratio: float
    low: float | None = None
    high: float | None = None
    within: bool | None = None
    basis: str = "unknown"  # trials | history | trials+history | unknown
    word: str = INCONCLUSIVE  # beyond noise | within noise | inconclusive
    basis_text: str = ""
    bound: float | None = None  # the ratio's relative half-width e^w - 1
    df: int | None = None
    why: str = ""  # inconclusive: why
    todo: str = ""  # inconclusive: what to do

    @classmethod
    def of(cls, figure: str, jd: Judgement) -> "NoiseVerdict":
        within = True if jd.within else False if jd.beyond else None
        return cls(figure=figure, ratio=jd.ratio, low=jd.low, high=jd.high, within=within, basis=jd.basis,
                   word=jd.word, basis_text=jd.basis_text, bound=jd.bound, df=jd.df, why=jd.why, todo=jd.todo)

    def judgement(self) -> Judgement:
        return Judgement(self.word, self.ratio, self.low, self.high, self.bound, self.df, self.basis,
                         self.basis_text, self.why, self.todo)

    def text(self) -> str:
        """``per kW 0.50×: beyond noise (noise ±5.3% from history of key …, 5 runs, 3 df)``; an
        inconclusive one says why (what to do is said once, ``todo``)."""
        name = "per kW" if self.figure == "output_tokens_per_s_per_kw" else "throughput"
        if self.word == INCONCLUSIVE:
            return f"{name} {fmt_ratio(self.ratio)}: inconclusive — {self.why}"
        return f"{name} {fmt_ratio(self.ratio)}: {self.judgement().text()}"


class Decomposition(BaseModel):
    """The per-kW ratio of one candidate against the baseline at one level."""

    candidate: str  # run id
    boundary: str
    per_kw_ratio: float | None = None
    throughput_ratio: float | None = None
    power_ratio: float | None = None  # candidate power / baseline power
    j_per_output_token_ratio: float | None = None  # candidate / baseline (below 1 is better)
    # candidate / baseline gCO2e per million output tokens (both runs need --carbon-intensity)
    carbon_per_million_output_tokens_ratio: float | None = None
    per_kw_ci: RatioCI | None = None
    throughput_ci: RatioCI | None = None
    power_ci: RatioCI | None = None
    noise: NoiseVerdict | None = None  # the per-kW ratio (throughput without energy) against the noise

    def text(self) -> str:
        """One line, every ratio as stored: candidate ÷ baseline (per kW = throughput ÷ power)."""
        if self.per_kw_ratio is None or not self.power_ratio:
            return "per kW: not available (missing throughput or power)"
        per_kw, iv = (fmt_ratio_estimate(self.per_kw_ratio, self.per_kw_ci.low, self.per_kw_ci.high)
                      if self.per_kw_ci is not None else (fmt_ratio(self.per_kw_ratio), ""))
        s = (f"per kW: {per_kw} = throughput {fmt_ratio(self.throughput_ratio)} ÷ "
             f"power {fmt_ratio(self.power_ratio)}")
        if self.per_kw_ci is not None:
            conf = f"{self.per_kw_ci.confidence:.0%} " if self.per_kw_ci.confidence else ""
            s += f" ({conf}CI {iv}×)"
        if self.carbon_per_million_output_tokens_ratio is not None:
            s += f"; carbon per million output tokens {fmt_ratio(self.carbon_per_million_output_tokens_ratio)}"
        return s


def _positive(x: Any) -> TypeGuard[float]:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def upgrade_decomposition(d: Any) -> Any:
    """A decomposition as a document without ``ratio_direction`` stored it (``power_ratio`` and
    ``power_ci`` baseline ÷ candidate), in this direction: the power ratio inverted and its interval
    inverted end for end (``[1/high, 1/low]``); a power ratio that cannot be inverted (zero, not a
    number) becomes None. Anything but a mapping (a ``Decomposition`` already built) is returned as
    it is; every other field of a decomposition was candidate ÷ baseline already."""
    if not isinstance(d, dict):
        return d
    out = dict(d)
    if "power_ratio" in out and out["power_ratio"] is not None:
        out["power_ratio"] = 1.0 / out["power_ratio"] if _positive(out["power_ratio"]) else None
    ci = out.get("power_ci")
    if isinstance(ci, dict):
        low, high = ci.get("low"), ci.get("high")
        out["power_ci"] = ({**ci, "low": 1.0 / high, "high": 1.0 / low}
                           if _positive(low) and _positive(high) else None)
    return out


def upgrade_ratio_direction(data: Any, levels_key: str, decompositions_key: str) -> Any:
    """A document (``Comparison``, ``PairedComparison``) as read, in this direction: without
    ``ratio_direction`` it was written when ``power_ratio`` was baseline ÷ candidate, so each of its
    levels' decompositions (``levels[].<decompositions_key>``: a list, or one) is upgraded
    (``upgrade_decomposition``) and the field set; with it, or not a mapping, it is returned as it is.
    The models apply it before they validate, so a file of either direction reads in this one."""
    if not isinstance(data, dict) or "ratio_direction" in data:
        return data
    levels = data.get(levels_key)
    if isinstance(levels, list):
        up = []
        for lv in levels:
            if isinstance(lv, dict) and decompositions_key in lv:
                ds = lv[decompositions_key]
                lv = {**lv, decompositions_key: [upgrade_decomposition(d) for d in ds] if isinstance(ds, list)
                      else upgrade_decomposition(ds)}
            up.append(lv)
        data = {**data, levels_key: up}
    return {**data, "ratio_direction": RATIO_DIRECTION}


def log_ratio_ci(value: float, a: TrialCI, b: TrialCI) -> RatioCI:
    """CI of a ratio whose numerator/denominator CIs are ``a`` and ``b`` (order does not matter;
    ``metrics/figure_noise.ratio_interval``)."""
    low, high = ratio_interval(value, a.rel_half_width, b.rel_half_width)
    conf = a.confidence if a.confidence == b.confidence else None
    return RatioCI(low=low, high=high, confidence=conf)


def combine_log_cis(value: float, parts: list[RatioCI]) -> RatioCI:
    """CI of a product of independent ratios, each with a log-symmetric CI (its log half-width
    ``ln(high / low) / 2``; ``metrics/figure_noise.ratio_interval``)."""
    low, high = ratio_interval(value, *(math.log(p.high / p.low) / 2.0 for p in parts))
    confs = {p.confidence for p in parts}
    return RatioCI(low=low, high=high, confidence=confs.pop() if len(confs) == 1 else None)


def ratio_of(num: float | None, den: float | None) -> float | None:
    """``num / den``; None when either is missing or ``den`` is zero."""
    if num is None or den is None or den == 0:
        return None
    return num / den


def decompose(baseline: LevelResult, candidate: LevelResult, boundary: str, candidate_id: str) -> Decomposition:
    """The ratios of one pair at ``boundary``, every one from ``headline`` (the table's figures)."""
    fa, fb = reported_figures(baseline, boundary), reported_figures(candidate, boundary)
    t = ratio_of(fb["output_tokens_per_s"], fa["output_tokens_per_s"])
    p = ratio_of(fb["avg_power_w"], fa["avg_power_w"])
    per_kw = ratio_of(fb["output_tokens_per_s_per_kw"], fa["output_tokens_per_s_per_kw"])
    if per_kw is None:
        per_kw = ratio_of(t, p)
    d = Decomposition(candidate=candidate_id, boundary=boundary, per_kw_ratio=per_kw, throughput_ratio=t,
                      power_ratio=p,
                      j_per_output_token_ratio=ratio_of(fb["j_per_output_token"], fa["j_per_output_token"]),
                      carbon_per_million_output_tokens_ratio=ratio_of(fb["carbon_g_per_million_output_tokens"],
                                                                    fa["carbon_g_per_million_output_tokens"]))
    ta, tb = trial_ci(baseline, "output_tokens_per_s", boundary), trial_ci(candidate, "output_tokens_per_s", boundary)
    if t is not None and ta and tb:
        d.throughput_ci = log_ratio_ci(t, ta, tb)
    pa, pb = trial_ci(baseline, "avg_power_w", boundary), trial_ci(candidate, "avg_power_w", boundary)
    if p is not None and pa and pb:
        d.power_ci = log_ratio_ci(p, pa, pb)
    ka = trial_ci(baseline, "output_tokens_per_s_per_kw", boundary)
    kb = trial_ci(candidate, "output_tokens_per_s_per_kw", boundary)
    if per_kw is not None:
        if ka and kb:
            d.per_kw_ci = log_ratio_ci(per_kw, ka, kb)
        elif d.throughput_ci and d.power_ci:
            d.per_kw_ci = combine_log_cis(per_kw, [d.throughput_ci, d.power_ci])
    return d


def figure_noise(result: Result, level: LevelResult, figure: str, boundary: str | None,
                 history: HistorySpread | None) -> FigureNoise | None:
    """One side's noise of ``figure`` (``metrics/noise.py``) as a repeat of its run would see it:
    its trials' CI and the history's run-to-run noise of its configuration (J/token: the per-kW
    figure's, the same on the log scale), the wider counting; never the trials' alone — without a
    history, the run-to-run floor where it is wider (``metrics.figure_noise.repeat_noise``). A figure
    the level marks as biased by its own load generator (``metrics.saturation.client_bias``) carries
    that mark, and its judgement reads inconclusive (``metrics.noise.judge``)."""
    ci = trial_ci(level, figure, boundary)
    drift = figure_drift(level.stationarity, figure, boundary)
    tn = trials_noise(ci.mean, ci.low, ci.high, ci.n, drift=drift) if ci is not None else with_drift(None, drift)
    hn = None
    if history is not None:
        name = SAME_LOG_NOISE.get(figure, figure)
        got = history(result, level, FigureKey(name, boundary).text())
        if isinstance(got, FigureNoise):
            hn = got
        elif got is not None:
            hn = spread_noise(got[0], got[1])
    return with_client(repeat_noise(tn, hn), client_bias(level, figure, boundary))


def judge_noise(ratio: float | None, figure: str, base: Result, a: LevelResult, cand: Result, b: LevelResult,
                boundary: str | None, history: HistorySpread | None,
                sides: tuple[str, str] = ("A", "B")) -> NoiseVerdict | None:
    """``metrics/noise.judge`` on the ratio ``b ÷ a`` of ``figure`` (None without a ratio)."""
    if ratio is None or not ratio > 0:
        return None
    jd = judge(ratio, figure_noise(base, a, figure, boundary, history),
               figure_noise(cand, b, figure, boundary, history), sides=sides)
    return NoiseVerdict.of(figure, jd)


def answer_line(level: str, pair: str, d: Decomposition | None, nv: NoiseVerdict | None,
                throughput_ratio: float | None = None) -> str:
    """One pair's answer: ``c=16: B/A per kW 0.41× (0.38–0.44), beyond noise = throughput 0.22× ÷
    power 0.53×`` (without energy: ``c=16: B/A throughput 0.22× (…), within noise``)."""
    def judged(ratio: float) -> str:
        """The ratio and its interval at one precision, and the word."""
        if nv is None:
            return f"{fmt_ratio(ratio)}, inconclusive (no ratio)"
        if nv.low is None or nv.high is None or nv.word == INCONCLUSIVE:
            return f"{fmt_ratio(ratio)}, {nv.word}" + (f" ({nv.why})" if nv.word == INCONCLUSIVE else "")
        r, iv = fmt_ratio_estimate(ratio, nv.low, nv.high)
        return f"{r} ({iv}), {nv.word}"
    if d is not None:
        if d.per_kw_ratio is None:
            return f"{level}: {pair} per kW not available (missing throughput or power)"
        s = f"{level}: {pair} per kW {judged(d.per_kw_ratio)}"
        if d.throughput_ratio is not None and d.power_ratio:
            s += f" = throughput {fmt_ratio(d.throughput_ratio)} ÷ power {fmt_ratio(d.power_ratio)}"
        return s
    if throughput_ratio is None:
        return f"{level}: {pair} throughput not available"
    return f"{level}: {pair} throughput {judged(throughput_ratio)} (no energy compared)"


def noise_bases(verdicts: Iterable[NoiseVerdict | None]) -> dict[str, str]:
    """Each judged figure's noise basis in the words ``judge`` was given it (``basis_text``: for a
    history, ``metrics/figure_noise.history_text``, the sentence ``history noise`` prints for the same
    configuration), the first of each figure, in order; ``noise unknown`` where no basis was known.
    ``compare`` and ``regress`` print these once, below their answer lines."""
    out: dict[str, str] = {}
    for nv in verdicts:
        if nv is None or nv.figure in out or nv.basis == "drift":
            continue
        out[nv.figure] = nv.basis_text or ("noise unknown: no trials and no history of this configuration"
                                           if nv.basis == "unknown" else nv.basis)
    return out
