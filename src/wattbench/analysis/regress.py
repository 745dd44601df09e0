"""The regression gate: does a run hold every check against a baseline?

Check syntax (``docs/compare.md``): a comma list of ``METRIC:SIGN AMOUNT[UNIT]``::

    j_per_output_token:+5%         fails when J/output token rises more than 5%
    output_tokens_per_s:-3%        fails when throughput falls more than 3%
    ttft_p99_ms:+20ms              fails when p99 TTFT rises more than 20 ms (absolute)
    failed_pct:+1pp                fails when the failed share rises more than 1 percentage point
    avg_power_w:+25W               absolute, in the metric's unit (W/kW, J/mJ, ms/s, pp)

The sign names the bad direction. Every check is evaluated at every matched level.

Noise rule (``metrics/noise.judge``, the one compare, ``--optimize`` and ``tune`` use). Each
side's noise is the wider of its trials' CI (``--trials``) and its configuration's run-to-run noise
in the history store (split at change points; J/token reads the per-kW figure's, the same on the
log scale; without a history, never the trials' alone: ``metrics/figure_noise.repeat_noise``). Each check
carries ``judge``'s word for its change (``CheckOutcome.word``) — the word ``compare`` prints for
the same pair, boundary and figure — and the report leads with ``compare``'s answer line for each
pair. The word answers "did it change?"; the gate answers "did it regress by more than the
limit?", on the change's 95% interval:

- relative check: with ``R = candidate / baseline`` and ``w = sqrt(n_a² + n_b²)`` (each side's
  relative 95% half-width), the change's interval is ``[R·e^-w − 1, R·e^w − 1]``; absolute check:
  ``change ± sqrt((n_a·a)² + (n_b·b)²)`` (one side's noise standing for both where only one is
  known, as in ``judge``). Read in the check's bad direction (``+``: a rise; ``−``: a fall), its
  end nearest no change is ``bound`` and its far end ``worst``:

- **fail** — the whole interval lies beyond the limit: ``bound > threshold`` (a ``−%`` check:
  ``1 − R·e^w > threshold``). The miss reported is ``bound − threshold``, and the line names the
  interval's end it was judged on.
- **pass** — the interval excludes a regression larger than the limit: ``worst <= threshold`` (a
  ``−%`` check: ``R·e^-w >= 1 − threshold``; a ``+%`` check: ``R·e^w <= 1 + threshold``). A pass
  inside the noise says ``within noise``; one beyond it in the good direction (or by less than the
  limit) says ``beyond noise``.
- **inconclusive** — anything else, with why and what would settle it on the check's line:
  the noise cannot decide (``judge`` says inconclusive: noise unknown, fewer than 2 degrees of
  freedom, a bound over ±25%, a drifting figure: its reason, and ``settle_text``'s figures at the
  limit where the noise is known), or the interval reaches past the limit on one side only — then
  either the noise is wider than the limit (``noise ±18.0% (…) is wider than the 3% limit``: it
  cannot tell a change of that size from none), and what would settle it is the smallest effect
  the current noise resolves and how many more trials or runs of each side would resolve the limit
  (``metrics/precision.settle_for`` at the limit), or the noise is narrower but the change lies within
  it of the limit, and what would settle it is the precision of that distance. The advice in words
  (more trials, more runs, …) is said once for the report (``RegressReport.todo``).

A gate never passes what it cannot see: a run whose noise is wider than its limit is
``inconclusive``, never ``pass … within noise``, and a change beyond the limit inside that noise is
never a ``fail`` (its false alarms stay at the 95% interval's one-sided 2.5%). ``strict`` judges
the change itself, as if there were no noise: ``fail`` beyond the limit, else ``pass``, never
``inconclusive``.

The report's verdict (``RegressReport.verdict``): ``fail`` when a check fails or a matched level is
left out, else ``inconclusive`` when a check is, else ``pass``; ``wattbench regress`` exits 1, 6
(``core.errors.EXIT_INCONCLUSIVE``) or 0 (README, "Exit codes").

A level that measured nothing, or lacks the boundary, fails with one line naming it and why.
"""

from __future__ import annotations

import math
import re
from typing import Literal

from pydantic import BaseModel, Field

from wattbench.analysis.comparability import Incomparability, check_levels, check_runs, refusal_message
from wattbench.analysis.level_pairs import left_out_reason, match_levels, resolve_boundary, short_key
from wattbench.analysis.ratios import (HistorySpread, NoiseVerdict, answer_line, decompose, figure_noise, judge_noise,
                                       noise_bases)
from wattbench.analysis.diagnose import Diagnosis, diagnose
from wattbench.analysis.figures import METRIC_NAMES, reported_figures, metric_suggestions, select_window, steady_trials_note
from wattbench.results.headline import trial_ci
from wattbench.core.errors import UserError
from wattbench.metrics.drift import figure_drift
from wattbench.metrics.figure_noise import FigureNoise, trials_noise, with_client, with_drift
from wattbench.metrics.noise import BEYOND, INCONCLUSIVE, MORE_DATA, NARROWER, WITHIN, judge
from wattbench.metrics.precision import settle_for, wider_text
from wattbench.metrics.saturation import client_bias
from wattbench.core.numbers import fmt
from wattbench.core.schema import LevelResult, Result

DEFAULT_CHECKS = "j_per_output_token:+5%,output_tokens_per_s:-3%"

# unit suffix -> (metric name suffix it applies to, factor to the metric's unit)
_UNITS: dict[str, tuple[tuple[str, ...], float]] = {
    "ms": (("_ms",), 1.0),
    "s": (("_ms",), 1000.0),
    "w": (("_w",), 1.0),
    "kw": (("_w",), 1000.0),
    "j": (("_j", "j_per_output_token", "j_per_token"), 1.0),
    "mj": (("_j", "j_per_output_token", "j_per_token"), 1e-3),
    "pp": (("_pct",), 1.0),
}

_CHECK_RE = re.compile(r"^\s*([a-z0-9_]+)\s*:\s*([+-])\s*([0-9]*\.?[0-9]+)\s*(%|[a-zA-Z]+)?\s*$")


class RegressCheck(BaseModel):
    """One check of ``--checks``: ``output_tokens_per_s:-3%`` (``parse_checks``)."""

    metric: str
    direction: Literal["+", "-"]  # the bad direction
    kind: Literal["relative", "absolute"]
    threshold: float  # a fraction (relative) or in the metric's unit (absolute)
    text: str

    def describe_threshold(self) -> str:
        if self.kind == "relative":
            return f"{self.direction}{self.threshold * 100:g}%"
        return f"{self.direction}{self.threshold:g}"


class CheckOutcome(BaseModel):
    check: RegressCheck
    level: str
    baseline: float | None = None
    candidate: float | None = None
    change: float | None = None  # relative fraction or absolute, candidate vs baseline
    change_ci: list[float] | None = None  # [low, high] of the change when trials exist
    bound: float | None = None  # the change in the bad direction at the CI end nearest zero
    worst: float | None = None  # the change in the bad direction at the CI's far end (pass: within the limit)
    # core.severity.CheckStatus less warn (a gate), plus inconclusive: the noise cannot tell (module docstring)
    status: Literal["pass", "fail", "inconclusive", "skip"] = "pass"
    miss: float | None = None  # how far beyond the threshold (same kind/unit as the threshold)
    noise_aware: bool = False
    within_noise: bool | None = None  # the change's noise interval includes no change (None: noise unknown)
    noise_basis: str | None = None  # trials | history | trials+history
    word: str = INCONCLUSIVE  # metrics/noise.judge: beyond noise | within noise | inconclusive
    noise: NoiseVerdict | None = None
    message: str = ""
    why: str = ""  # inconclusive: why the gate cannot decide
    settle: str = ""  # inconclusive: what would settle it, in figures (metrics/precision.settle_for)
    advice: str = ""  # inconclusive: what to do, in words (said once for the report: ``RegressReport.todo``)


class LeftOut(BaseModel):
    """A matched level that cannot be checked: it measured nothing, or lacks the boundary."""

    level: str
    reason: str

    def line(self) -> str:
        return f"{self.level}: left out — {self.reason}"


class RegressReport(BaseModel):
    run_id: str
    baseline_id: str
    boundary: str | None = None  # None: no boundary common to the levels that measured; energy checks skip
    window: Literal["full", "steady"] = "full"
    checks: list[RegressCheck]
    outcomes: list[CheckOutcome] = Field(default_factory=list)
    incomparable: list[Incomparability] = Field(default_factory=list)
    forced: bool = False
    strict: bool = False  # --strict: a change inside the noise fails like any other
    findings: list[Diagnosis] = Field(default_factory=list)
    unmatched: list[str] = Field(default_factory=list)
    left_out: list[LeftOut] = Field(default_factory=list)  # each fails the gate
    answers: list[str] = Field(default_factory=list)  # compare's answer line for each pair
    todo: str | None = None  # what to do about the inconclusive checks, in words, said once
    # each judged figure's noise basis, said once (``analysis/ratios.noise_bases``)
    noise_bases: dict[str, str] = Field(default_factory=dict)

    @property
    def failed(self) -> list[CheckOutcome]:
        return [o for o in self.outcomes if o.status == "fail"]

    @property
    def inconclusive(self) -> list[CheckOutcome]:
        return [o for o in self.outcomes if o.status == "inconclusive"]

    @property
    def verdict(self) -> Literal["pass", "fail", "inconclusive"]:
        """``fail`` when a check fails or a matched level is left out; else ``inconclusive`` when a
        check cannot be decided; else ``pass`` (module docstring)."""
        if self.failed or self.left_out:
            return "fail"
        return "inconclusive" if self.inconclusive else "pass"

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"


def parse_checks(spec: str) -> list[RegressCheck]:
    """Parse ``metric:+5%,metric:-3%,ttft_p99_ms:+20ms``; UserError naming a bad item."""
    if spec is None or not str(spec).strip():
        raise UserError("no checks given; e.g. --fail-on j_per_output_token:+5%,output_tokens_per_s:-3%")
    out = []
    for item in str(spec).split(","):
        if not item.strip():
            continue
        m = _CHECK_RE.match(item)
        if not m:
            raise UserError(f"check {item.strip()!r} is not METRIC:+N% or METRIC:-N% (or an absolute amount "
                            "like ttft_p99_ms:+20ms); e.g. j_per_output_token:+5%")
        metric, sign, amount, unit = m.group(1), m.group(2), float(m.group(3)), m.group(4)
        if metric not in METRIC_NAMES:
            close = metric_suggestions(metric)
            hint = f"; did you mean {', '.join(close)}" if close else "; see docs/compare.md for the metric names"
            raise UserError(f"check {item.strip()!r}: unknown metric {metric!r}{hint}")
        if unit == "%":
            out.append(RegressCheck(metric=metric, direction=sign, kind="relative", threshold=amount / 100.0,
                             text=item.strip()))
            continue
        factor = 1.0
        if unit:
            u = _UNITS.get(unit.lower())
            if u is None or not any(metric.endswith(sfx) or metric == sfx for sfx in u[0]):
                raise UserError(f"check {item.strip()!r}: unit {unit!r} does not fit metric {metric!r}; use % for "
                                "a relative change or the metric's own unit (ms/s, W/kW, J/mJ, pp)")
            factor = u[1]
        out.append(RegressCheck(metric=metric, direction=sign, kind="absolute", threshold=amount * factor,
                         text=item.strip()))
    if not out:
        raise UserError("no checks given; e.g. --fail-on j_per_output_token:+5%,output_tokens_per_s:-3%")
    return out


def _fmt(check: RegressCheck, x: float) -> str:
    """A change in the one number format (``core/numbers.py``): ``-9.69%`` or ``+12.3``."""
    if check.kind == "relative":
        return f"{x * 100:+.2f}%"
    return ("+" if x >= 0 else "") + fmt(x)


def _noise(result: Result | None, level: LevelResult, metric: str, boundary: str | None,
           history: HistorySpread | None) -> FigureNoise | None:
    """One side's relative noise of ``metric`` (``analysis/ratios.figure_noise``)."""
    if result is None:
        ci = trial_ci(level, metric, boundary)
        drift = figure_drift(level.stationarity, metric, boundary)
        tn = trials_noise(ci.mean, ci.low, ci.high, ci.n, drift=drift) if ci is not None else with_drift(None, drift)
        return with_client(tn, client_bias(level, metric, boundary))
    return figure_noise(result, level, metric, boundary, history)


SIDES = ("the baseline", "the run")


def evaluate(check: RegressCheck, a: LevelResult, b: LevelResult, boundary: str | None, label: str, *,
             base: Result | None = None, cand: Result | None = None, history: HistorySpread | None = None,
             strict: bool = False) -> CheckOutcome:
    """One check at one level pair: ``judge``'s word for the change and the gate's verdict on its
    interval against the limit (module docstring)."""
    va, vb = reported_figures(a, boundary)[check.metric], reported_figures(b, boundary)[check.metric]
    out = CheckOutcome(check=check, level=label, baseline=va, candidate=vb)
    if va is None or vb is None:
        out.status = "skip"
        out.message = f"{check.metric} not measured at {label} in {'the baseline' if va is None else 'the run'}"
        return out
    if check.kind == "relative" and va == 0:
        out.status = "skip"
        out.message = f"{check.metric} is 0 in the baseline at {label}; a relative change is undefined"
        return out
    sgn = 1.0 if check.direction == "+" else -1.0
    na, nb = _noise(base, a, check.metric, boundary, history), _noise(cand, b, check.metric, boundary, history)
    if na is not None or nb is not None:
        out.noise_basis = "+".join(dict.fromkeys(x for n in (na, nb) if n is not None for x in n.basis.split("+")))
    # an inconclusive judgement says what would resolve the check's own limit (a relative one; else the default)
    aim = check.threshold if check.kind == "relative" and check.threshold > 0 else None
    jd = judge(vb / va if va else None, na, nb, sides=SIDES, precision=aim)
    out.word = jd.word
    out.noise = NoiseVerdict.of(check.metric, jd)
    out.within_noise = True if jd.word == WITHIN else False if jd.word == BEYOND else None
    if check.kind == "relative":
        out.change = vb / va - 1.0
        if jd.low is not None and jd.high is not None:
            out.change_ci = [jd.low - 1.0, jd.high - 1.0]
    else:
        out.change = vb - va
        ha, hb = (na or nb), (nb or na)  # one side's noise stands for both, as in judge
        if ha is not None and hb is not None and ha.known() and hb.known() and ha.basis != "drift":
            hw = math.sqrt((ha.rel_half_width * abs(va)) ** 2 + (hb.rel_half_width * abs(vb)) ** 2)
            out.change_ci = [out.change - hw, out.change + hw]
    point = sgn * out.change
    # the noise can decide (judge's word is not inconclusive) and the interval bounds the change
    out.noise_aware = jd.word != INCONCLUSIVE and out.change_ci is not None
    if out.noise_aware and out.change_ci is not None:
        lo, hi = out.change_ci
        out.bound, out.worst = (lo, hi) if sgn > 0 else (-hi, -lo)
    else:
        out.bound = point
    what = f"{check.metric} {fmt(va)} -> {fmt(vb)} ({_fmt(check, out.change)}"
    limit = check.describe_threshold()
    iv = (f"[{_fmt(check, out.change_ci[0])}, {_fmt(check, out.change_ci[1])}]" if out.change_ci is not None
          else "")
    if strict:  # the change itself, as if there were no noise
        word = jd.word if jd.word != INCONCLUSIVE else f"inconclusive: {jd.why}"
        if point > check.threshold:
            out.status, out.miss = "fail", point - check.threshold
            out.message = (f"{check.text} at {label}: {what}, {word}); limit {limit}, missed by "
                           f"{_fmt(check, out.miss).lstrip('+')} (--strict: judged on the change itself)")
        else:
            out.status = "pass"
            out.message = f"{check.text} holds at {label}: {what}, {word}) (--strict: judged on the change itself)"
        return out
    if not out.noise_aware:  # the noise cannot decide: judge's reason, and its figures at the limit
        out.status, out.why = "inconclusive", jd.why or "noise unknown"
        out.settle, out.advice = jd.settle, jd.advice or MORE_DATA
        out.message = f"{check.text} at {label}: {what}, inconclusive: {out.why})" + (
            f"; {out.settle}" if out.settle else "")
        return out
    assert out.bound is not None and out.worst is not None
    if out.bound > check.threshold:  # the whole interval lies beyond the limit
        out.status, out.miss = "fail", out.bound - check.threshold
        out.message = (f"{check.text} at {label}: {what}, {jd.word} {iv}); limit {limit}, missed by "
                       f"{_fmt(check, out.miss).lstrip('+')} (judged on {_fmt(check, sgn * out.bound)}, the 95% "
                       "interval's end nearest no change: the change is at least that)")
        return out
    if out.worst <= check.threshold:  # the interval excludes a change beyond the limit
        out.status = "pass"
        out.message = (f"{check.text} holds at {label}: {what}, {jd.word} {iv}: its 95% interval excludes a change "
                       f"beyond {limit})")
        return out
    # the interval reaches past the limit on one side only: no pass, no fail
    out.status, out.advice = "inconclusive", NARROWER
    out.why, precision = _straddle(check, out, va, jd.bound)
    out.settle, _ = settle_for(jd.bound, na, nb, precision, jd.df, SIDES)
    out.message = (f"{check.text} at {label}: {what}, interval {iv}); inconclusive: {out.why}"
                   + (f"; {out.settle}" if out.settle else ""))
    return out


def _straddle(check: RegressCheck, out: CheckOutcome, va: float, bound: float | None) -> tuple[str, float]:
    """Why an interval that reaches past the limit on one side only cannot decide, and the precision
    (a relative 95% half-width of the ratio, for ``settle_for``) that would: the limit itself where
    the noise is wider than it, else the distance of the change from the limit (module docstring)."""
    assert out.change is not None and out.change_ci is not None
    t, sgn = check.threshold, (1.0 if check.direction == "+" else -1.0)
    basis = out.noise.basis_text if out.noise is not None else ""
    if check.kind == "relative":
        noise, limit_rel, noise_text, limit_text = bound or 0.0, t, f"±{(bound or 0.0) * 100:.1f}%", f"{t * 100:g}%"
        edge = 1.0 + sgn * t  # the limit's ratio
        near = math.expm1(abs(math.log1p(out.change) - math.log(edge))) if edge > 0 else math.inf
    else:  # in the figure's unit; relative to the baseline for what would settle it
        half = (out.change_ci[1] - out.change_ci[0]) / 2.0
        scale = abs(va) if va else math.inf
        noise, limit_rel, noise_text, limit_text = half / scale, t / scale, f"±{fmt(half)}", check.text
        near = abs(sgn * out.change - t) / scale
    if noise > limit_rel:
        why = wider_text(noise_text, basis, f"{limit_text} limit")
        return why + ": it cannot tell a change of that size from none", round(limit_rel, 4)
    why = (f"the change lies within its noise ({noise_text}) of the {limit_text} limit: it can neither rule "
           "out nor show a change beyond it")
    return why, max(round(near, 4), 1e-4)


def regress(result: Result, baseline: Result, checks: str | list[RegressCheck] = DEFAULT_CHECKS,
            boundary: str | None = None, force: bool = False,
            match: Literal["key", "index"] = "key", window: Literal["full", "steady"] = "full",
            history: HistorySpread | None = None, strict: bool = False) -> RegressReport:
    """Evaluate ``checks`` on every level of ``result`` matched to one of ``baseline``.

    ``history``: the run-to-run noise of a configuration (``analysis/ratios.HistorySpread``);
    ``strict``: judge the change itself, not the end of its noise interval nearest no change. A
    matched level that measured nothing or lacks the boundary is left out and fails the gate."""
    parsed = parse_checks(checks) if isinstance(checks, str) else list(checks)
    if not parsed:
        raise UserError("no checks given")
    if result.run_id == baseline.run_id:
        raise UserError(f"the baseline is the run itself ({result.run_id}): every check would hold by "
                        "construction; give an earlier run, a tag or a baseline name")
    steady_notes = [n for r in (baseline, result) for n in [steady_trials_note(r)] if n] if window == "steady" else []
    result, baseline = select_window(result, window), select_window(baseline, window)
    bnd = resolve_boundary([baseline, result], boundary)
    pairs, unmatched = match_levels(baseline, result, match)
    if not pairs:
        raise UserError(f"no load level of {result.run_id} matches one of baseline {baseline.run_id} "
                        f"({', '.join(lv.label for lv in baseline.levels)} vs "
                        f"{', '.join(lv.label for lv in result.levels)})")
    left: list[LeftOut] = []
    usable = []
    for a, b in pairs:
        why = [x for x in (left_out_reason(baseline.run_id, a, bnd), left_out_reason(result.run_id, b, bnd)) if x]
        if why:
            left.append(LeftOut(level=short_key(b), reason="; ".join(why)))
        else:
            usable.append((a, b))
    problems = check_runs(baseline, result)
    for a, b in usable:
        problems.extend(check_levels(a, b, bnd))
    blocking = [p for p in problems if p.category != "setup"]
    if blocking and not force:
        raise UserError(refusal_message(blocking, "run and its baseline"))
    report = RegressReport(run_id=result.run_id, baseline_id=baseline.run_id, boundary=bnd, window=window,
                           checks=parsed, strict=strict, incomparable=problems, forced=force, unmatched=unmatched,
                           left_out=left)
    answered: list[NoiseVerdict | None] = []
    for a, b in usable:  # compare's answer line for each pair: the same judgement, the same word
        if bnd is not None:
            d = decompose(a, b, bnd, result.run_id)
            d.noise = judge_noise(d.per_kw_ratio, "output_tokens_per_s_per_kw", baseline, a, result, b, bnd, history,
                                  sides=("the baseline", "the run"))
            report.answers.append(answer_line(short_key(b), "run/baseline", d, d.noise))
            answered.append(d.noise)
        else:
            fa, fb = reported_figures(a, None)["output_tokens_per_s"], reported_figures(b, None)["output_tokens_per_s"]
            t = fb / fa if fa and fb is not None else None
            nv = judge_noise(t, "output_tokens_per_s", baseline, a, result, b, None, history,
                             sides=("the baseline", "the run"))
            report.answers.append(answer_line(short_key(b), "run/baseline", None, nv, t))
            answered.append(nv)
    for check in parsed:
        outs = [evaluate(check, a, b, bnd, b.label, base=baseline, cand=result, history=history, strict=strict)
                for a, b in usable]
        if outs and all(o.status == "skip" for o in outs) and not left:
            raise UserError(f"check {check.text!r}: {check.metric} is not measured in both runs at any matched "
                            f"level ({outs[0].message})")
        report.outcomes.extend(outs)
    # what to do, in words, once (each inconclusive check's line says why and its own figures)
    report.todo = "; ".join(dict.fromkeys(o.advice for o in report.outcomes if o.status == "inconclusive"
                                          and o.advice)) or None
    report.noise_bases = noise_bases(answered + [o.noise for o in report.outcomes if o.status != "skip"])
    if report.todo and steady_notes:  # the steady reading lost the trials' noise: say why first
        report.todo = "; ".join(steady_notes) + "; " + report.todo
    report.findings = diagnose(baseline, result, usable, bnd)
    return report
