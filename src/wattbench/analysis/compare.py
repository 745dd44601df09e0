"""Compare runs level by level, with the per-kW ratio decomposed as platform claims are.

The first result is the baseline. For each other result and each matched level::

    per_kw_ratio = throughput_ratio × power_ratio
    throughput_ratio = tput_candidate / tput_baseline        (output tokens/s)
    power_ratio      = power_baseline / power_candidate      (average power at the boundary)

The stored ``power_ratio`` is baseline ÷ candidate (so the product is the per-kW ratio); on screen
every ratio reads candidate ÷ baseline, as in the side-by-side table, so "a 700 W platform at 95% of
a 1400 W platform's throughput" reads ``per kW: 1.90× = throughput 0.95× ÷ power 0.50×``.

**One ratio, one definition**: every ratio is read from :func:`figures.reported_figures` — the trial
means with ``--trials`` — so the ratio in an answer line is the ratio in its table. The per-kW ratio
is the ratio of the two per-kW figures; throughput ÷ power equals it exactly for single
measurements and to second order (the trials' covariance) with trials.

**One verdict** (``metrics/noise.judge``): each pair's per-kW ratio (throughput without energy)
reads ``beyond noise``, ``within noise`` or ``inconclusive`` with its noise basis; ``regress``
prints the same answer line for the same pair (``answer_line``).

**Partial runs**: a level that measured nothing, or lacks the compared boundary's power, is named
and left out (``LevelComparison.left_out``); the boundary is chosen over the levels that measured
something, so every other level keeps its energy and per-kW ratios.

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
from typing import Callable, Iterable, Literal

from pydantic import BaseModel, Field

from wattbench.analysis.comparability import Incomparability, check_levels, check_runs
from wattbench.analysis.diagnose import Diagnosis, diagnose
from wattbench.analysis.figures import reported_figures, ranked_figures, select_window, steady_trials_note
from wattbench.results.headline import TrialCI, describe_key, level_key, trial_ci
from wattbench.accounting.boundaries import outside_work_note
from wattbench.accounting.findings import note_counts
from wattbench.accounting.level_findings import measured_something
from wattbench.core.errors import UserError
from wattbench.metrics.drift import figure_drift
from wattbench.metrics.figure_noise import (FigureNoise, ratio_interval, repeat_noise, spread_noise, trials_noise,
                                            with_drift)
from wattbench.metrics.noise import INCONCLUSIVE, Judgement, judge
from wattbench.results.headline import common_headline_boundary, per_token
from wattbench.core.schema import FigureKey, FindingKind, LevelResult, RequestRecord, Result, SLOBound
from wattbench.core.numbers import fmt_range, fmt_ratio, fmt_ratio_estimate
from wattbench.metrics.slo import SLO, goodput, parse_slos, run_slo_text

# (result, level, figure name at the boundary) -> the run-to-run noise of that configuration's figure
# in the history store (``results/store_noise``: split at change points), or (relative sd, runs), or None
HistorySpread = Callable[[Result, LevelResult, str], "FigureNoise | tuple[float | None, int] | None"]

# figures whose log-scale noise is another's: J/token = power / throughput, the inverse of per kW
SAME_LOG_NOISE = {"j_per_output_token": "output_tokens_per_s_per_kw"}

# the figures shown side by side, in table order
SIDE_BY_SIDE = (
    "output_tokens_per_s",
    "avg_power_w",
    "output_tokens_per_s_per_kw",
    "j_per_output_token",
    "ttft_p50_ms",
    "ttft_p99_ms",
    "tpot_p50_ms",
    "tpot_p99_ms",
    "goodput_rps",
    "goodput_per_kw",
    "failed_pct",
)


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
    power_ratio: float | None = None  # baseline power / candidate power
    j_per_output_token_ratio: float | None = None  # candidate / baseline (below 1 is better)
    # candidate / baseline gCO2e per million output tokens (both runs need --carbon-intensity)
    carbon_per_million_output_tokens_ratio: float | None = None
    per_kw_ci: RatioCI | None = None
    throughput_ci: RatioCI | None = None
    power_ci: RatioCI | None = None
    noise: NoiseVerdict | None = None  # the per-kW ratio (throughput without energy) against the noise

    def text(self) -> str:
        """One line, every ratio in the direction of the table: candidate ÷ baseline (so power
        reads as the candidate's power over the baseline's, and per kW = throughput ÷ power)."""
        if self.per_kw_ratio is None or not self.power_ratio:
            return "per kW: not available (missing throughput or power)"
        per_kw, iv = (fmt_ratio_estimate(self.per_kw_ratio, self.per_kw_ci.low, self.per_kw_ci.high)
                      if self.per_kw_ci is not None else (fmt_ratio(self.per_kw_ratio), ""))
        s = (f"per kW: {per_kw} = throughput {fmt_ratio(self.throughput_ratio)} ÷ "
             f"power {fmt_ratio(1.0 / self.power_ratio)}")
        if self.per_kw_ci is not None:
            conf = f"{self.per_kw_ci.confidence:.0%} " if self.per_kw_ci.confidence else ""
            s += f" ({conf}CI {iv}×)"
        if self.carbon_per_million_output_tokens_ratio is not None:
            s += f"; carbon per million output tokens {fmt_ratio(self.carbon_per_million_output_tokens_ratio)}"
        return s


class LevelComparison(BaseModel):
    key: str  # e.g. "concurrency=8"
    short: str = ""  # e.g. "c=8": the answer line's name of the level
    left_out: str | None = None  # why this level is not compared (it measured nothing, or lacks the boundary)
    answers: list[str] = Field(default_factory=list)  # one answer line per candidate (``answer_line``)
    noise: list[NoiseVerdict] = Field(default_factory=list)  # per candidate; with no boundary (throughput)
    labels: list[str]  # each run's level label
    indices: list[int]
    figures: list[dict[str, float | None]]  # per run, SIDE_BY_SIDE figures at the boundary
    cis: list[dict[str, list[float]]] = Field(default_factory=list)  # per run: figure -> [low, high]
    verdicts: list[str] = Field(default_factory=list)
    decompositions: list[Decomposition] = Field(default_factory=list)  # one per candidate


class RunVerdict(BaseModel):
    """One compared run's verdicts: efficiency (its headline) and latency, per level too, and how
    many findings each level carries (their text: ``wattbench report --notes RUN``)."""

    run_id: str
    verdict: str
    latency: str | None = None
    energy: str | None = None
    levels: dict[str, list[str | None]] = Field(default_factory=dict)  # label -> [efficiency, latency]
    warnings: int = 0
    notes: int = 0


class AtSLO(BaseModel):
    """``compare --at-slo``: each run at its level with the most goodput per kW meeting the SLO."""

    slo: str
    boundary: str | None = None
    levels: list[str | None] = Field(default_factory=list)  # per run: the level chosen (None: none meets)
    goodput_per_kw: list[float | None] = Field(default_factory=list)
    goodput_tokens_per_s: list[float | None] = Field(default_factory=list)
    avg_power_w: list[float | None] = Field(default_factory=list)
    ratio: list[float | None] = Field(default_factory=list)  # per candidate: goodput per kW ÷ the baseline's
    throughput_ratio: list[float | None] = Field(default_factory=list)
    power_ratio: list[float | None] = Field(default_factory=list)  # candidate power ÷ baseline power
    noise: list[NoiseVerdict | None] = Field(default_factory=list)
    lines: list[str] = Field(default_factory=list)  # the sentence (or the refusal), per candidate
    refused: str | None = None  # a run has no level meeting the SLO


class Comparison(BaseModel):
    run_ids: list[str]
    boundary: str | None  # None: no boundary common to every level; latency and throughput only
    match: Literal["key", "index"]
    window: Literal["full", "steady"] = "full"
    levels: list[LevelComparison] = Field(default_factory=list)
    unmatched: list[str] = Field(default_factory=list)
    incomparable: list[Incomparability] = Field(default_factory=list)
    forced: bool = False
    findings: list[Diagnosis] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    verdicts: list[RunVerdict] = Field(default_factory=list)  # one per run, in run order
    letters: list[str] = Field(default_factory=list)  # A, B, C …: the answer lines' names of the runs
    at_slo: AtSLO | None = None
    todo: str | None = None  # what to do about an inconclusive verdict, said once
    # each judged figure's noise basis, said once (``noise_bases``): figure -> the basis sentence
    noise_bases: dict[str, str] = Field(default_factory=dict)


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


def _ratio(num: float | None, den: float | None) -> float | None:
    if num is None or den is None or den == 0:
        return None
    return num / den


def decompose(baseline: LevelResult, candidate: LevelResult, boundary: str, candidate_id: str) -> Decomposition:
    """The ratios of one pair at ``boundary``, every one from ``headline`` (the table's figures)."""
    fa, fb = reported_figures(baseline, boundary), reported_figures(candidate, boundary)
    t = _ratio(fb["output_tokens_per_s"], fa["output_tokens_per_s"])
    p = _ratio(fa["avg_power_w"], fb["avg_power_w"])
    per_kw = _ratio(fb["output_tokens_per_s_per_kw"], fa["output_tokens_per_s_per_kw"])
    if per_kw is None and t is not None and p is not None:
        per_kw = t * p
    d = Decomposition(candidate=candidate_id, boundary=boundary, per_kw_ratio=per_kw, throughput_ratio=t,
                      power_ratio=p,
                      j_per_output_token_ratio=_ratio(fb["j_per_output_token"], fa["j_per_output_token"]),
                      carbon_per_million_output_tokens_ratio=_ratio(fb["carbon_g_per_million_output_tokens"],
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
    history, the run-to-run floor where it is wider (``metrics.figure_noise.repeat_noise``)."""
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
    return repeat_noise(tn, hn)


def judge_noise(ratio: float | None, figure: str, base: Result, a: LevelResult, cand: Result, b: LevelResult,
                boundary: str | None, history: HistorySpread | None,
                sides: tuple[str, str] = ("A", "B")) -> NoiseVerdict | None:
    """``metrics/noise.judge`` on the ratio ``b ÷ a`` of ``figure`` (None without a ratio)."""
    if ratio is None or not ratio > 0:
        return None
    jd = judge(ratio, figure_noise(base, a, figure, boundary, history),
               figure_noise(cand, b, figure, boundary, history), sides=sides)
    return NoiseVerdict.of(figure, jd)


def short_key(level: LevelResult) -> str:
    """``c=16`` / ``r=2/s``: a level's name in an answer line."""
    mode, value = level_key(level)
    if value is None:
        return str(mode)
    return f"c={value:g}" if mode == "concurrency" else f"r={value:g}/s"


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
            s += f" = throughput {fmt_ratio(d.throughput_ratio)} ÷ power {fmt_ratio(1.0 / d.power_ratio)}"
        return s
    if throughput_ratio is None:
        return f"{level}: {pair} throughput not available"
    return f"{level}: {pair} throughput {judged(throughput_ratio)} (no energy compared)"


def match_levels(a: Result, b: Result, match: str) -> tuple[list[tuple[LevelResult, LevelResult]], list[str]]:
    """Pairs of (baseline level, candidate level) and descriptions of the unmatched ones."""
    if match == "index":
        n = min(len(a.levels), len(b.levels))
        pairs = [(a.levels[i], b.levels[i]) for i in range(n)]
        un = [f"{b.run_id}: level {i} ({lv.label}) has no counterpart" for i, lv in enumerate(b.levels[n:], n)]
        un += [f"{a.run_id}: level {i} ({lv.label}) has no counterpart" for i, lv in enumerate(a.levels[n:], n)]
        return pairs, un
    by_key: dict[tuple[str, float | None], LevelResult] = {}
    for lv in b.levels:
        by_key.setdefault(level_key(lv), lv)
    pairs, un, used = [], [], set()
    for lv in a.levels:
        k = level_key(lv)
        if k in by_key:
            pairs.append((lv, by_key[k]))
            used.add(k)
        else:
            un.append(f"{a.run_id}: {describe_key(k)} not in {b.run_id}")
    for lv in b.levels:
        k = level_key(lv)
        if k not in used:
            un.append(f"{b.run_id}: {describe_key(k)} not in {a.run_id}")
    return pairs, un


NO_ENERGY_WARNING = ("no power boundary was measured at every level that measured something: latency and "
                     "throughput are compared, energy and per-kW figures are not (check each run's sensors)")


def _has_power(lv: LevelResult) -> bool:
    return any(e.avg_power_w is not None for e in lv.energy.values())


def left_out_reason(run_id: str, lv: LevelResult, boundary: str | None) -> str | None:
    """Why a level cannot be compared at ``boundary`` (None: it can): it measured nothing, or it
    has no power at the boundary."""
    if not measured_something(lv):
        why = next((f.text for f in lv.validity.findings if f.kind == FindingKind.NO_COMPLETED), None)
        return f"run {run_id} measured nothing at {short_key(lv)} ({why or 'no measured request completed'})"
    if boundary is not None:
        e = lv.energy.get(boundary)
        if e is None or e.avg_power_w is None:
            have = sorted(b for b, x in lv.energy.items() if x.avg_power_w is not None)
            return (f"run {run_id} has no {boundary} power at {short_key(lv)} (it measured: "
                    f"{', '.join(have) or 'none'}{'; ' + lv.energy_unavailable_reason if lv.energy_unavailable_reason and not have else ''})")
    return None


def resolve_boundary(results: list[Result], boundary: str | None) -> str | None:
    """The boundary to compare at: the one asked, else the headline rule over every level that
    measured something and some power (``results.headline``: a whole boundary that contains the
    work, measured first, outer first — never the HBM rail); a level without it is left out by
    name (``left_out_reason``), never every level's energy. None (none common) compares latency
    and throughput only."""
    usable = [lv for r in results for lv in r.levels if measured_something(lv) and _has_power(lv)]
    if boundary is None:
        return common_headline_boundary(usable) if usable else None
    seen = False
    for r in results:
        for lv in r.levels:
            if boundary in lv.energy and not per_token(boundary, lv.energy):
                raise UserError(f"{boundary} has no tokens-per-kW figure in run {r.run_id} ("
                                f"{outside_work_note(boundary, lv.energy)}); compare at a boundary that "
                                "contains the devices doing the work (accelerator, node, wall), or leave "
                                "--boundary out")
            e = lv.energy.get(boundary)
            seen = seen or (e is not None and e.avg_power_w is not None)
    if not seen:
        have = sorted({b for lv in usable for b, x in lv.energy.items() if x.avg_power_w is not None})
        raise UserError(f"no level of these runs has {boundary} power (they measured: {', '.join(have) or 'none'}); "
                        "choose a boundary the runs measured — different boundaries are never compared")
    return boundary


def refusal_message(problems: list[Incomparability], what: str = "runs") -> str:
    reasons = "; ".join(dict.fromkeys(p.line() for p in problems))
    return f"the {what} are not comparable: {reasons} (pass --force to compare anyway; each is flagged)"


LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def compare(results: list[Result], force: bool = False, boundary: str | None = None,
            match: Literal["key", "index"] = "key", window: Literal["full", "steady"] = "full",
            history: HistorySpread | None = None, at_slo: str | None = None,
            records: "RecordsOf | None" = None) -> Comparison:
    """Compare results[1:] against results[0] level by level at one boundary.

    ``window``: energy figures of the full measurement window or of the steady-state window.
    ``history``: the run-to-run noise of a level's configuration (the CLI reads the history
    store); with it, or with trials, each ratio gets ``metrics/noise.judge``'s word.
    ``at_slo``: an SLO (``ttft_p99=…,tpot_p99=…``) to compare each run at its best level under
    (``compare_at_slo``); None: the SLO both runs carry, if they carry the same one.
    ``records``: a run's level's request records, to recompute goodput under an SLO it did not carry.
    """
    if len(results) < 2:
        raise UserError("compare needs at least two runs")
    notes = [n for r in results for n in [steady_trials_note(r)] if n] if window == "steady" else []
    results = [select_window(r, window) for r in results]
    for r in results:
        if not r.levels:
            raise UserError(f"run {r.run_id} has no measured levels")
    if match not in ("key", "index"):
        raise UserError(f"match must be 'key' or 'index', got {match!r}")
    bnd = resolve_boundary(results, boundary)
    base = results[0]
    cmp = Comparison(run_ids=[r.run_id for r in results], boundary=bnd, match=match, window=window, forced=force,
                     letters=[LETTERS[i] if i < len(LETTERS) else str(i) for i in range(len(results))])
    cmp.warnings.extend(notes)
    if bnd is None:
        cmp.warnings.append(NO_ENERGY_WARNING)

    per_candidate_pairs = []
    problems: list[Incomparability] = []
    for cand in results[1:]:
        pairs, un = match_levels(base, cand, match)
        if not pairs and at_slo is None:  # --at-slo compares each run at its own best level: it needs no pair
            raise UserError(f"no load level of {cand.run_id} matches one of {base.run_id} by concurrency/rate "
                            f"({', '.join(lv.label for lv in base.levels)} vs "
                            f"{', '.join(lv.label for lv in cand.levels)}); use --match index to pair them "
                            "in order")
        cmp.unmatched.extend(un)
        problems.extend(check_runs(base, cand))
        for a, b in pairs:
            if bnd is not None and (left_out_reason(base.run_id, a, bnd) or left_out_reason(cand.run_id, b, bnd)):
                problems.extend(p for p in check_levels(a, b, bnd) if p.category != "measurement")
            else:
                problems.extend(check_levels(a, b, bnd))
        per_candidate_pairs.append((cand, pairs))
    if problems and not force:
        raise UserError(refusal_message(problems))
    cmp.incomparable = problems

    # one LevelComparison per baseline level that every candidate matched
    for a in base.levels:
        row_levels = [a]
        for cand, pairs in per_candidate_pairs:
            hit = next((b for x, b in pairs if x is a), None)
            if hit is None:
                break
            row_levels.append(hit)
        if len(row_levels) != len(results):
            continue
        row = LevelComparison(key=describe_key(level_key(a)), short=short_key(a),
                              labels=[lv.label for lv in row_levels],
                              indices=[lv.index for lv in row_levels], figures=[], cis=[], verdicts=[])
        reasons = [x for x in (left_out_reason(r.run_id, lv, bnd) for r, lv in zip(results, row_levels)) if x]
        if reasons:
            row.left_out = "; ".join(reasons)
            row.answers.append(f"{row.short}: left out — {row.left_out}")
            cmp.levels.append(row)
            continue
        for lv in row_levels:
            h = reported_figures(lv, bnd)
            row.figures.append({k: h[k] for k in SIDE_BY_SIDE})
            cis = {}
            for k in SIDE_BY_SIDE:
                ci = trial_ci(lv, k, bnd)
                if ci is not None:
                    cis[k] = [ci.low, ci.high]
            row.cis.append(cis)
            row.verdicts.append(lv.validity.verdict)
        for i, ((cand, _), lv) in enumerate(zip(per_candidate_pairs, row_levels[1:]), 1):
            pair = f"{cmp.letters[i]}/{cmp.letters[0]}"
            if bnd is not None:
                d = decompose(a, lv, bnd, cand.run_id)
                d.noise = judge_noise(d.per_kw_ratio, "output_tokens_per_s_per_kw", base, a, cand, lv, bnd, history)
                row.decompositions.append(d)
                row.answers.append(answer_line(row.short, pair, d, d.noise))
            else:
                t = _ratio(row.figures[i]["output_tokens_per_s"], row.figures[0]["output_tokens_per_s"])
                nv = judge_noise(t, "output_tokens_per_s", base, a, cand, lv, None, history)
                if nv is not None:
                    row.noise.append(nv)
                row.answers.append(answer_line(row.short, pair, None, nv, t))
        cmp.levels.append(row)

    left_out = [row.left_out for row in cmp.levels if row.left_out]
    if cmp.levels and len(left_out) == len(cmp.levels):
        raise UserError(f"no level pair can be compared{' at ' + bnd if bnd else ''}: "
                        f"{'; '.join(left_out)}; choose a boundary both runs measured "
                        "(different boundaries are never compared) or runs whose levels measured something")
    for cand, pairs in per_candidate_pairs:
        usable = [(a, b) for a, b in pairs
                  if not (left_out_reason(base.run_id, a, bnd) or left_out_reason(cand.run_id, b, bnd))]
        for f in diagnose(base, cand, usable, bnd):
            f.evidence.setdefault("candidate", cand.run_id)
            cmp.findings.append(f)
    for r in results:  # each run's verdicts once (its findings stay in the run: report --notes)
        cmp.verdicts.append(RunVerdict(
            run_id=r.run_id, verdict=r.validity.verdict, latency=r.validity.latency, energy=r.validity.energy,
            levels={lv.label: [lv.validity.verdict, lv.validity.latency] for lv in r.levels},
            # the run's notes counted as every report counts them (accounting.findings.note_counts)
            warnings=sum(k for s, k in note_counts(r).items() if s in ("warn", "invalid")),
            notes=sum(k for s, k in note_counts(r).items() if s in ("note", "estimate"))))
        if r.status != "complete":
            cmp.warnings.append(f"run {r.run_id} status {r.status}")
    cmp.at_slo = compare_at_slo(results, at_slo, bnd, history, records, cmp.letters)
    verdicts = [d.noise for row in cmp.levels for d in row.decompositions] + [nv for row in cmp.levels
                                                                              for nv in row.noise]
    if cmp.at_slo is not None:
        verdicts += cmp.at_slo.noise
    cmp.todo = next((nv.todo for nv in verdicts if nv is not None and nv.word == INCONCLUSIVE and nv.todo), None)
    cmp.noise_bases = noise_bases(verdicts)
    return cmp


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


# ---------------------------------------------------------------- each run at its best under one SLO

# (result, level) -> the level's request records (to recompute goodput under another SLO), or None
RecordsOf = Callable[[Result, LevelResult], "list[RequestRecord] | None"]


def _slo_set(slos: Iterable[SLO | SLOBound]) -> frozenset[tuple[str, str, float]]:
    """SLOs (``metrics.slo.SLO`` or the stored ``SLOBound``) as a set of (metric, stat, bound)."""
    return frozenset((s.metric, s.stat, float(s.threshold_ms)) for s in slos)


def slo_goodput(result: Result, lv: LevelResult, slos: list[SLO], boundary: str,
                records: RecordsOf | None) -> tuple[float | None, float | None, float | None, str]:
    """A level's goodput under ``slos`` at ``boundary``: (goodput output tok/s, average power W,
    goodput tok/s per kW, basis), every figure of the window the level is read in (``select_window``)
    by the one rule (``ranked_figures``; ``metrics.slo.goodput_in_window``): the good share of the
    output tokens times the window's output tokens/s and tokens/s per kW. From the level's own
    goodput block when it was measured under these SLOs (its trial means, as the table), else with
    the share recomputed from its request records (``metrics/slo.goodput``); Nones when neither is
    there. A boundary without per-token figures (one that leaves out the devices doing the work) has
    no goodput per kW."""
    f = ranked_figures(lv, boundary, has_slo=True)
    power = f["avg_power_w"]
    gp = lv.goodput
    if gp is not None and gp.slos and _slo_set(gp.slos) == _slo_set(slos):
        return f["goodput_output_tokens_per_s"], power, f["goodput_per_kw"], "the run's own goodput"
    recs = records(result, lv) if records is not None else None
    dur = lv.window.duration_s if lv.window else None
    if not recs or not dur or not power:
        return None, power, None, ""
    share = goodput(recs, slos, dur).good_output_share
    if share is None:
        return None, power, None, ""
    tok, per_kw = f["output_tokens_per_s"], f["output_tokens_per_s_per_kw"]
    return (None if tok is None else share * tok, power, None if per_kw is None else share * per_kw,
            "recomputed from its requests")


def _meets(lv: LevelResult, slos: list[SLO]) -> tuple[bool, str]:
    """Whether a level meets every SLO as written (the level's stat ≤ the bound), and the first miss.
    The stat is the one the table quotes (``reported_figures``: the trials' mean with ``--trials``, not the
    last trial's), so a level is judged on the figure shown beside it."""
    h = reported_figures(lv, None)
    for s in slos:
        v = h.get(f"{s.metric}_{s.stat}_ms")
        if v is None:
            return False, f"{s.name} not measured"
        if v > s.threshold_ms:
            return False, f"{s.name} {v:,.0f} ms > {s.threshold_ms:g} ms"
    return True, ""


def compare_at_slo(results: list[Result], spec: str | None, boundary: str | None, history: HistorySpread | None,
                   records: RecordsOf | None, letters: list[str]) -> AtSLO | None:
    """Each run at its level with the most goodput per kW that meets the SLO ``spec`` (None: the
    SLO every run carries, when they carry the same one; no SLO: None), and each candidate's
    goodput-per-kW ratio to the baseline's, ``throughput T× ÷ power P×``, judged by
    ``metrics/noise.judge``. An explicit ``spec`` a run cannot meet is refused (UserError); an
    implied one says so in ``refused``."""
    explicit = spec is not None
    if spec is None:
        texts = [run_slo_text(r) for r in results]
        if not texts[0] or any(t is None or _slo_set(parse_slos(t)) != _slo_set(parse_slos(texts[0]))
                               for t in texts):
            return None
        spec = texts[0]
    slos = parse_slos(spec)
    if not slos:
        return None
    text = ",".join(str(s) for s in slos)
    out = AtSLO(slo=text, boundary=boundary)

    def refuse(msg: str) -> AtSLO:
        if explicit:
            raise UserError(msg)
        out.refused = msg
        out.lines.append(msg)
        return out

    if boundary is None:
        return refuse(f"at {text}: no power boundary common to the runs' measured levels, so no goodput per kW")
    chosen: list[tuple[LevelResult, float, float, float]] = []  # each run's (level, tok/s, W, per kW)
    for letter, r in zip(letters, results):
        best: tuple[LevelResult, float, float, float] | None = None
        misses: list[str] = []
        missing: list[str] = []
        for lv in r.levels:
            if left_out_reason(r.run_id, lv, boundary):
                continue
            ok, miss = _meets(lv, slos)
            if not ok:
                misses.append(f"{short_key(lv)} {miss}")
                continue
            tok, power, per_kw, _ = slo_goodput(r, lv, slos, boundary, records)
            if per_kw is None:
                missing.append(short_key(lv))
                continue
            if best is None or per_kw > best[3]:
                best = (lv, tok or 0.0, power or 0.0, per_kw)
        if best is None:
            if missing:
                return refuse(f"at {text}: run {r.run_id} ({letter}) has no goodput under this SLO at "
                              f"{', '.join(missing)} and no requests.jsonl to recompute it from; give its run "
                              "directory, or run it with --slo " + text)
            return refuse(f"at {text}: no level of run {r.run_id} ({letter}) meets it ("
                          f"{'; '.join(misses[:3]) or 'no level measured'}); loosen the SLO or measure lower loads")
        chosen.append(best)
    base = chosen[0]
    out.levels = [short_key(c[0]) for c in chosen]
    out.goodput_tokens_per_s = [c[1] for c in chosen]
    out.avg_power_w = [c[2] for c in chosen]
    out.goodput_per_kw = [c[3] for c in chosen]
    for i, c in enumerate(chosen[1:], 1):
        ratio = c[3] / base[3] if base[3] else None
        t = c[1] / base[1] if base[1] else None
        p = c[2] / base[2] if base[2] else None
        out.ratio.append(ratio)
        out.throughput_ratio.append(t)
        out.power_ratio.append(p)
        nv = None
        if ratio:
            nv = NoiseVerdict.of("goodput_per_kw", judge(
                ratio, figure_noise(results[0], base[0], "goodput_per_kw", boundary, None),
                figure_noise(results[i], c[0], "goodput_per_kw", boundary, None)))
        out.noise.append(nv)

        where = f"({letters[0]} at {out.levels[0]}, {letters[i]} at {out.levels[i]})"
        parts = (f": throughput {fmt_ratio(t)} ÷ power {fmt_ratio(p)}" if t is not None and p else "")
        word = "" if nv is None else (f"; {nv.word}" + (f" ({nv.why})" if nv.word == INCONCLUSIVE
                                                         else f" ({fmt_range(nv.low, nv.high, kind='ratio')})"))
        out.lines.append(f"{letters[i]} gives {fmt_ratio(ratio)} the goodput per kW of {letters[0]} at {text}{parts} "
                         f"{where}{word}" if ratio is not None else
                         f"{letters[i]} vs {letters[0]} at {text}: no goodput per kW ratio (a zero figure)")
    return out
