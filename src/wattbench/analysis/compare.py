"""Compare runs level by level, with the per-kW ratio decomposed as platform claims are.

The first result is the baseline. For each other result and each matched level::

    per_kw_ratio = throughput_ratio × power_ratio
    throughput_ratio = tput_candidate / tput_baseline        (output tokens/s)
    power_ratio      = power_baseline / power_candidate      (average power at the boundary)

The stored ``power_ratio`` is baseline ÷ candidate (so the product is the per-kW ratio); on screen
every ratio reads candidate ÷ baseline, as in the side-by-side table, so "a 700 W platform at 95% of
a 1400 W platform's throughput" reads ``per kW: 1.90× = throughput 0.95× ÷ power 0.50×``.

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
from typing import Callable, Literal

from pydantic import BaseModel, Field

from wattbench.analysis.comparability import Incomparability, check_levels, check_runs
from wattbench.analysis.diagnose import Finding, diagnose
from wattbench.analysis.figures import (
    TrialCI,
    describe_key,
    headline,
    level_key,
    common_boundary,
    select_window,
    trial_ci,
)
from wattbench.accounting.boundaries import outside_work_note
from wattbench.accounting.findings import note_counts
from wattbench.errors import UserError
from wattbench.metrics.noise import (combine, ratio_interval, ratio_noise, spread_noise, trials_noise,
                                     unknown_noise_hint)
from wattbench.results.headline import per_token
from wattbench.results.schema import LevelResult, Result

# (result, level, figure name at the boundary) -> (relative sd, runs) of that configuration's figure
# across earlier runs (the history store's spread, without the runs being compared), or None
HistorySpread = Callable[[Result, LevelResult, str], "tuple[float | None, int] | None"]

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
    """Is a ratio within noise (``metrics/noise.py``)? ``within`` None: the noise is unknown."""

    figure: str  # the ratio judged: output_tokens_per_s_per_kw, or output_tokens_per_s without energy
    ratio: float
    low: float | None = None
    high: float | None = None
    within: bool | None = None
    basis: str = "unknown"  # trials | history | trials+history | unknown

    def text(self) -> str:
        name = "per kW" if self.figure == "output_tokens_per_s_per_kw" else "throughput"
        if self.within is None:
            return f"{name} {self.ratio:.2f}×: {unknown_noise_hint()}"
        iv = f"{self.low:.2f}–{self.high:.2f}×"
        if self.within:
            return f"{name}: within noise ({self.ratio:.2f}×, its interval {iv} includes 1; noise from {self.basis})"
        return f"{name}: {self.ratio:.2f}×, beyond the noise (interval {iv}; noise from {self.basis})"


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
        s = (f"per kW: {self.per_kw_ratio:.2f}× = throughput {self.throughput_ratio:.2f}× ÷ "
             f"power {1.0 / self.power_ratio:.2f}×")
        if self.per_kw_ci is not None:
            conf = f"{self.per_kw_ci.confidence:.0%} " if self.per_kw_ci.confidence else ""
            s += f" ({conf}CI {self.per_kw_ci.low:.2f}–{self.per_kw_ci.high:.2f}×)"
        if self.carbon_per_million_output_tokens_ratio is not None:
            s += f"; carbon per million output tokens {self.carbon_per_million_output_tokens_ratio:.2f}×"
        return s


class LevelComparison(BaseModel):
    key: str  # e.g. "concurrency=8"
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


class Comparison(BaseModel):
    run_ids: list[str]
    boundary: str | None  # None: no boundary common to every level; latency and throughput only
    match: Literal["key", "index"]
    window: Literal["full", "steady"] = "full"
    levels: list[LevelComparison] = Field(default_factory=list)
    unmatched: list[str] = Field(default_factory=list)
    incomparable: list[Incomparability] = Field(default_factory=list)
    forced: bool = False
    findings: list[Finding] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    verdicts: list[RunVerdict] = Field(default_factory=list)  # one per run, in run order


def log_ratio_ci(value: float, a: TrialCI, b: TrialCI) -> RatioCI:
    """CI of a ratio whose numerator/denominator CIs are ``a`` and ``b`` (order does not matter;
    ``metrics/noise.ratio_interval``)."""
    low, high = ratio_interval(value, a.rel_half_width, b.rel_half_width)
    conf = a.confidence if a.confidence == b.confidence else None
    return RatioCI(low=low, high=high, confidence=conf)


def combine_log_cis(value: float, parts: list[RatioCI]) -> RatioCI:
    """CI of a product of independent ratios, each with a log-symmetric CI (its log half-width
    ``ln(high / low) / 2``; ``metrics/noise.ratio_interval``)."""
    low, high = ratio_interval(value, *(math.log(p.high / p.low) / 2.0 for p in parts))
    confs = {p.confidence for p in parts}
    return RatioCI(low=low, high=high, confidence=confs.pop() if len(confs) == 1 else None)


def _ratio(num: float | None, den: float | None) -> float | None:
    if num is None or den is None or den == 0:
        return None
    return num / den


def decompose(baseline: LevelResult, candidate: LevelResult, boundary: str, candidate_id: str) -> Decomposition:
    fa, fb = headline(baseline, boundary), headline(candidate, boundary)
    t = _ratio(fb["output_tokens_per_s"], fa["output_tokens_per_s"])
    p = _ratio(fa["avg_power_w"], fb["avg_power_w"])
    per_kw = t * p if t is not None and p is not None else None
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
                 history: HistorySpread | None):
    """One side's noise of ``figure`` (``metrics/noise.py``): its trials' CI and the history's
    run-to-run spread of its configuration, the wider counting."""
    ci = trial_ci(level, figure, boundary)
    tn = trials_noise(ci.mean, ci.low, ci.high, ci.n) if ci is not None else None
    hn = None
    if history is not None:
        got = history(result, level, f"{figure}@{boundary}" if boundary else figure)
        if got is not None:
            hn = spread_noise(got[0], got[1])
    return combine(tn, hn)


def judge_noise(ratio: float | None, figure: str, base: Result, a: LevelResult, cand: Result, b: LevelResult,
                boundary: str | None, history: HistorySpread | None) -> NoiseVerdict | None:
    """Whether the ratio ``b ÷ a`` of ``figure`` is within noise (None without a ratio)."""
    if ratio is None or not ratio > 0:
        return None
    rn = ratio_noise(ratio, figure_noise(base, a, figure, boundary, history),
                     figure_noise(cand, b, figure, boundary, history))
    return NoiseVerdict(figure=figure, ratio=ratio, low=rn.low, high=rn.high, within=rn.within, basis=rn.basis)


def match_levels(a: Result, b: Result, match: str) -> tuple[list[tuple[LevelResult, LevelResult]], list[str]]:
    """Pairs of (baseline level, candidate level) and descriptions of the unmatched ones."""
    if match == "index":
        n = min(len(a.levels), len(b.levels))
        pairs = [(a.levels[i], b.levels[i]) for i in range(n)]
        un = [f"{b.run_id}: level {i} ({lv.label}) has no counterpart" for i, lv in enumerate(b.levels[n:], n)]
        un += [f"{a.run_id}: level {i} ({lv.label}) has no counterpart" for i, lv in enumerate(a.levels[n:], n)]
        return pairs, un
    by_key: dict[tuple, LevelResult] = {}
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


NO_ENERGY_WARNING = ("no power boundary was measured at every level of every run: latency and throughput are "
                     "compared, energy and per-kW figures are not (check each run's sensors)")


def resolve_boundary(results: list[Result], boundary: str | None) -> str | None:
    """The boundary to compare at: the one asked, else the headline rule over every level of every
    run (``results.headline``: a whole boundary that contains the work, measured first, outer
    first — never the HBM rail); None (none common) compares latency and throughput only."""
    if boundary is None:
        return common_boundary(results)
    for r in results:
        for lv in r.levels:
            if boundary in lv.energy and not per_token(boundary, lv.energy):
                raise UserError(f"{boundary} has no tokens-per-kW figure in run {r.run_id} ("
                                f"{outside_work_note(boundary, lv.energy)}); compare at a boundary that "
                                "contains the devices doing the work (accelerator, node, wall), or leave "
                                "--boundary out")
            e = lv.energy.get(boundary)
            if e is None or e.avg_power_w is None:
                have = sorted(b for b, x in lv.energy.items() if x.avg_power_w is not None)
                raise UserError(f"run {r.run_id} level {lv.label} has no {boundary} power (it measured: "
                                f"{', '.join(have) or 'none'}); choose a boundary both runs measured — "
                                "different boundaries are never compared")
    return boundary


def refusal_message(problems: list[Incomparability], what: str = "runs") -> str:
    reasons = "; ".join(dict.fromkeys(p.line() for p in problems))
    return f"the {what} are not comparable: {reasons} (pass --force to compare anyway; each is flagged)"


def compare(results: list[Result], force: bool = False, boundary: str | None = None,
            match: Literal["key", "index"] = "key", window: Literal["full", "steady"] = "full",
            history: HistorySpread | None = None) -> Comparison:
    """Compare results[1:] against results[0] level by level at one boundary.

    ``window``: energy figures of the full measurement window or of the steady-state window.
    ``history``: the run-to-run spread of a level's configuration (the CLI reads the history
    store); with it, or with trials, each ratio says whether it is within noise.
    """
    if len(results) < 2:
        raise UserError("compare needs at least two runs")
    results = [select_window(r, window) for r in results]
    for r in results:
        if not r.levels:
            raise UserError(f"run {r.run_id} has no measured levels")
    if match not in ("key", "index"):
        raise UserError(f"match must be 'key' or 'index', got {match!r}")
    bnd = resolve_boundary(results, boundary)
    base = results[0]
    cmp = Comparison(run_ids=[r.run_id for r in results], boundary=bnd, match=match, window=window, forced=force)
    if bnd is None:
        cmp.warnings.append(NO_ENERGY_WARNING)

    per_candidate_pairs = []
    problems: list[Incomparability] = []
    for cand in results[1:]:
        pairs, un = match_levels(base, cand, match)
        if not pairs:
            raise UserError(f"no load level of {cand.run_id} matches one of {base.run_id} by concurrency/rate "
                            f"({', '.join(lv.label for lv in base.levels)} vs "
                            f"{', '.join(lv.label for lv in cand.levels)}); use --match index to pair them "
                            "in order")
        cmp.unmatched.extend(un)
        problems.extend(check_runs(base, cand))
        for a, b in pairs:
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
        row = LevelComparison(key=describe_key(level_key(a)), labels=[lv.label for lv in row_levels],
                              indices=[lv.index for lv in row_levels], figures=[], cis=[], verdicts=[])
        for lv in row_levels:
            h = headline(lv, bnd)
            row.figures.append({k: h[k] for k in SIDE_BY_SIDE})
            cis = {}
            for k in SIDE_BY_SIDE:
                ci = trial_ci(lv, k, bnd)
                if ci is not None:
                    cis[k] = [ci.low, ci.high]
            row.cis.append(cis)
            row.verdicts.append(lv.validity.verdict)
        for (cand, _), lv in zip(per_candidate_pairs, row_levels[1:]):
            if bnd is not None:
                d = decompose(a, lv, bnd, cand.run_id)
                d.noise = judge_noise(d.per_kw_ratio, "output_tokens_per_s_per_kw", base, a, cand, lv, bnd, history)
                row.decompositions.append(d)
            else:
                t = _ratio(lv.throughput.output_tokens_per_s, a.throughput.output_tokens_per_s)
                nv = judge_noise(t, "output_tokens_per_s", base, a, cand, lv, None, history)
                if nv is not None:
                    row.noise.append(nv)
        cmp.levels.append(row)

    for cand, pairs in per_candidate_pairs:
        for f in diagnose(base, cand, pairs, bnd):
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
    return cmp
