"""Compare runs level by level: ``compare(results) -> Comparison``.

The first result is the baseline. For each other result, each level it shares with the baseline
(``analysis/level_pairs``: paired by load, at one boundary; a level that measured nothing or lacks
the boundary's power is named and left out) reads as one answer line: its per-kW ratio decomposed
into throughput ÷ power, with its interval and ``metrics/noise.judge``'s word (``analysis/ratios``:
the one definition of each ratio and its verdict, which ``regress`` and ``wattbench ab`` print too).
Beside the answer lines: the side-by-side figures (``SIDE_BY_SIDE``), the runs' comparability
(``analysis/comparability``: refused unless forced), the diagnosis of what differs
(``analysis/diagnose``), each run's verdicts, and each run at its best under one SLO
(``analysis/at_slo``, ``--at-slo``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from wattbench.accounting.findings import note_counts
from wattbench.analysis.at_slo import AtSLO, RecordsOf, compare_at_slo
from wattbench.analysis.comparability import Incomparability, check_levels, check_runs, refusal_message
from wattbench.analysis.diagnose import Diagnosis, diagnose
from wattbench.analysis.figures import reported_figures, select_window, steady_trials_note
from wattbench.analysis.level_pairs import left_out_reason, match_levels, resolve_boundary, short_key
from wattbench.analysis.ratios import (RATIO_DIRECTION, Decomposition, HistorySpread, NoiseVerdict, answer_line,
                                       decompose, judge_noise, noise_bases, ratio_of, upgrade_ratio_direction)
from wattbench.core.errors import UserError
from wattbench.core.schema import Result
from wattbench.metrics.noise import INCONCLUSIVE
from wattbench.results.headline import describe_key, level_key, trial_ci

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


class Comparison(BaseModel):
    """``compare``'s answer (``--json``, ``--out``). Every ratio in it is candidate ÷ baseline
    (``ratio_direction``); a file written without that field stored ``power_ratio`` baseline ÷
    candidate and reads in this direction (``analysis/ratios.upgrade_ratio_direction``)."""

    run_ids: list[str]
    ratio_direction: Literal["candidate/baseline"] = RATIO_DIRECTION
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

    @model_validator(mode="before")
    @classmethod
    def _read_ratio_direction(cls, data: Any) -> Any:
        return upgrade_ratio_direction(data, "levels", "decompositions")


NO_ENERGY_WARNING = ("no power boundary was measured at every level that measured something: latency and "
                     "throughput are compared, energy and per-kW figures are not (check each run's sensors)")

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
                t = ratio_of(row.figures[i]["output_tokens_per_s"], row.figures[0]["output_tokens_per_s"])
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
