"""What a run answers, first, in every report: the headline figure with its boundary and verdict
(``headline``, ``answer_line``), what was chosen and why (the best level under the SLO, ``--optimize``,
``--sweep auto``), how the server's state was controlled, what ``wattbench measure`` ran, and the
configuration that applied.

The terminal, Markdown and HTML reports all read a run through this module and its neighbours, so
the three say the same thing in the same words: ``labels`` (level names), ``notes`` (each note once,
the verdict line, ``report --notes``), ``goodput`` (SLO and goodput cells), ``trials`` (the trials'
means and CIs) and ``tables`` (the level tables as columns); each name is imported from its own
module. Nothing here computes a figure: every number is a field of the result
(``LevelResult.goodput``, ``level.trials``, ``result.optimize``, …), only selected and formatted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from pydantic import JsonValue

from wattbench.report import format as F
from wattbench.core.numbers import MISSING, fmt, fmt_estimate, fmt_pct, fmt_pct_against, fmt_signed_pct, fmt_uncertain
from wattbench.core.schema import FindingKind, LevelResult, Result
from wattbench.report.ab import sequence_text
from wattbench.report.goodput import goodput_cells, goodput_point, slo_text
from wattbench.report.labels import levels_text, load_label, short_label, short_label_text
from wattbench.report.trials import trials_n, unmeasured_text
from wattbench.accounting.level_findings import measured_nothing, nothing_measured_why
from wattbench.telemetry.spec import SENSOR_FIX
from wattbench.core.schema import NoiseInfo
from wattbench.results.headline import point, trial_ci

__all__ = [
    "ENGINE_KEYS", "applied_config", "best_under_slo", "state_line", "Headline", "headline", "estimate_text",
    "NO_ENERGY_ANSWER", "meter_pct", "with_meter", "answer_line", "unmeasured_levels", "history_summary", "answer_lines",
    "lead_lines", "context_lines", "measure_lines", "search_lines",
]

# ---------------------------------------------------------------- configuration

# settings of the launched engine: they apply only when wattbench started the server (no --target)
ENGINE_KEYS = ("engine", "engine_model", "engine_args", "device")


def applied_config(result: Result) -> list[tuple[str, JsonValue]]:
    """The run's configuration as it applied, sorted by key: the engine launch settings only when
    wattbench launched the engine (a ``--target`` run talked to a server it did not start), the
    arrival process only when a level ran open loop (a closed-loop run has no arrivals to shape)."""
    cfg = result.config
    targeted = bool(cfg.target or cfg.targets)
    open_loop = bool(cfg.rate) or any(lv.load.mode == "rate" for lv in result.levels)
    out: list[tuple[str, JsonValue]] = []
    for k, v in sorted(cfg.recorded().items()):
        if targeted and k in ENGINE_KEYS:
            continue
        if k == "arrival" and not open_loop:
            continue
        out.append((k, v))
    return out


# ---------------------------------------------------------------- the answer


def best_under_slo(result: Result) -> tuple[LevelResult | None, str] | None:
    """The level that answers "which load is best under the SLO", with one line saying why; None
    without an SLO. ``--optimize``'s choice when it ran; else, among the levels whose SLO held
    (``goodput.all_met``) and whose verdict is not invalid, the one with the most goodput per kW
    at its headline boundary (goodput tok/s where no power was measured)."""
    slo = slo_text(result)
    if not slo:
        return None
    opt = result.optimize
    chosen: LevelResult | None = None
    if opt is not None and opt.best_value is not None:  # its one recommendation, as search_lines words it
        pick = opt.recommended_value if opt.recommended_value is not None else opt.best_value
        chosen = next((lv for lv in result.levels if F.level_target_value(lv) == pick), None)
    if chosen is None:
        ok = [lv for lv in result.levels
              if lv.goodput is not None and lv.goodput.all_met and lv.validity.verdict != "invalid"]

        def key(lv: LevelResult) -> tuple[float, float]:
            g = goodput_point(lv)
            return (g[0] if g[0] is not None else -1.0, g[1] if g[1] is not None else -1.0)

        chosen = max(ok, key=key) if ok else None
    if chosen is None:
        return None, f"best under SLO {slo}: no level met it"
    c = goodput_cells(chosen)
    per_kw_v, tok_s = goodput_point(chosen)
    per_kw = f"{fmt(per_kw_v)} goodput tok/s/kW ({c.boundary}), " if c.boundary else ""
    mean = " (trial means)" if trials_n(chosen) else ""
    return chosen, (f"best under SLO {slo}: {short_label(chosen)} — {per_kw}{fmt(tok_s)} goodput tok/s{mean}, "
                    f"{c.met_pct} of requests met it")


def state_line(result: Result) -> str | None:
    """How the run controlled the server's state: the priming load, ``--precondition``, the history
    check, and how prompt lengths were fitted to the server without a tokenizer, in one line; None
    when the run did none of them."""
    nz = result.noise or NoiseInfo()
    parts = []
    p = nz.priming
    if p is not None:
        at = short_label_text(p.label) if p.label else (f"r={p.value:g}/s" if p.mode == "rate" else f"c={p.value:g}")
        dur = "" if p.duration_s is None else f" in {fmt(p.duration_s)} s"
        parts.append(f"primed at {at}: {p.completed}/{p.requests} requests{dur}, not measured")
    pc = nz.precondition
    if pc is not None:  # not settled: the run's warning says what still moved
        how = " and ".join(pc.rules) or "nothing"
        parts.append(f"preconditioned {fmt(pc.duration_s)} s ({pc.rounds} loads, {how}): "
                     f"{'settled' if pc.settled else 'not settled'}, not measured")
    h = nz.history_check
    # within noise only: beyond noise or inconclusive, the check is a finding of the run (its note
    # line says it once, with its size: accounting.level_findings.history_finding)
    if h is not None and h.verdict == "ok" and h.ratio is not None:
        # an open loop is judged per achieved request/s: the two achieved rates said beside it
        per = (f" per request/s (at {fmt(h.first_rate_rps)} then {fmt(h.repeat_rate_rps)} req/s achieved)"
               if h.first_rate_rps is not None and h.repeat_rate_rps is not None else "")
        parts.append(f"history check {short_label_text(h.level)}: {fmt_signed_pct(100 * (h.ratio - 1))}{per} within "
                     f"noise (±{fmt_pct(h.bound_pct)})")
    if nz.engine_starts:
        parts.append(f"{len(nz.engine_starts)} engine starts")
    cal = result.prompt_calibration  # no tokenizer: prompt lengths fitted to the server's count
    if cal is not None and cal.used:
        parts.append(f"prompts calibrated to the server's token count ({fmt(cal.tokens_per_word)} tokens/word "
                     f"+ {fmt(cal.overhead_tokens)}, {cal.counted} probes)")
    elif cal is not None:
        parts.append("prompts not calibrated: " + cal.reason.split(":", 1)[0])
    return "; ".join(parts) or None


def paired_lines(result: Result) -> list[str]:
    """A run measured as one side of ``wattbench ab``: which side, against which run, in what order,
    and the paired answer as ``ab`` printed it (``PairedRun.answers``); none for any other run."""
    pr = result.noise.paired if result.noise is not None else None
    if pr is None:
        return []
    lines = [f"paired: side {pr.role} of `wattbench ab` with {pr.other_run_id} ({sequence_text(pr.sequence, 8)}; "
             f"stopped at {pr.stopped})"]
    return lines + [f"  {a}" for a in pr.answers]


def precision_line(result: Result) -> str | None:
    """``--trials auto``: what was asked, why the rounds stopped, what they cost, and the precision
    each level reached — ``precision ±2% asked: reached in 6 rounds (12 trials, 15 s): c=2 ±1.8%,
    c=4 ±1.2%``, or where it stopped short, how many more trials would reach it (``Precision``).
    None without ``--trials auto``."""
    auto = result.noise.auto_trials if result.noise is not None else None
    if auto is None:
        return None
    why = {"reached": "reached", "max trials": f"not reached: --max-trials {auto.max_trials} ended it",
           "max time": f"not reached: --max-time {auto.max_time_s or 0:g} s ended it",
           "nothing measured": "no level measured anything"}.get(auto.stopped, auto.stopped or "stopped")
    cost = f"{auto.rounds} round{'s' if auto.rounds != 1 else ''} ({auto.trials} trials, {fmt(auto.seconds)} s)"
    levels = []
    for lv in result.levels:
        p = lv.precision
        if p is None:
            continue
        if p.reached_pct is None:
            levels.append(f"{short_label(lv)} no interval ({p.trials} trial{'s' if p.trials != 1 else ''} measured)")
            continue
        lead = f"{short_label(lv)} ±{fmt_pct_against(p.reached_pct, auto.asked_pct)}"
        if p.met:
            levels.append(lead)
        elif p.drifting:
            levels.append(f"{lead} (it {p.drift or 'drifts'})")
        elif p.more_trials is not None:
            levels.append(f"{lead} (about {p.more_trials} more trial{'s' if p.more_trials != 1 else ''} would "
                          "reach it)")
        else:
            levels.append(lead)
    return f"precision ±{auto.asked_pct:g}% asked: {why} after {cost}" + (": " + ", ".join(levels) if levels else "")


@dataclass(frozen=True)
class Headline:
    """The run's answer as one figure: the level it comes from and why that level, the boundary, the
    figure (goodput tok/s per kW under an SLO, else output tok/s per kW; the trials' mean with its CI
    under ``--trials``) and the level's verdict."""

    level: LevelResult
    why: str
    boundary: str | None
    label: str | None  # measured | declared | estimate
    name: str  # goodput_per_kw | output_tokens_per_s_per_kw
    title: str  # "goodput tok/s per kW" / "output tok/s per kW"
    value: float | None
    ci: tuple[float, float] | None
    trials: int | None
    verdict: str
    # why no level answers the run's question (no level met the SLO, --optimize chose none, every
    # level invalid): the answer line says this instead of a figure; None when a level answers
    unanswered: str | None = None
    # --optimize's choice measured more than once: ``value`` is the mean of these measurements, the
    # score the search chose it by (``SearchOutcome.recommended_score``), not its first measurement
    measurements: int | None = None


def _search_score(result: Result, level: LevelResult, name: str) -> tuple[float, int] | None:
    """The score ``--optimize`` chose ``level`` by — the mean of its measurements — and how many,
    when that score is the figure the answer quotes (``name``: the objective, or goodput per kW
    without an SLO, which is output tokens per kW: ``analysis.figures``); else None."""
    opt = result.optimize
    if opt is None or opt.best_value is None:
        return None
    same = opt.objective == name or (opt.objective == "goodput_per_kw" and name == "output_tokens_per_s_per_kw"
                                     and not slo_text(result))
    v = F.level_target_value(level)
    score = (opt.recommended_score if v == opt.recommended_value else None) or (
        opt.best_score if v == opt.best_value else None)
    if not same or score is None:
        return None
    return score, 1 + sum(1 for x in opt.remeasured if x == v)


def unmeasured_levels(result: Result) -> list[str]:
    """The levels a fixed ladder planned that a run stopped early never measured (the target gone,
    an interrupt, a failed write), as short labels in the order planned: ``["c=8"]``. Empty for a
    complete run, and for a search (``--sweep auto``, ``--optimize``), whose plan is decided as it goes."""
    cfg = result.config
    if result.status == "complete" or cfg.sweep or cfg.optimize:
        return []
    mode = "rate" if cfg.rate else "concurrency"
    planned = [float(v) for v in (cfg.rate or cfg.concurrency)]
    done = {F.level_target_value(lv) for lv in result.levels if lv.load.mode == mode}
    return [load_label(mode, x) for x in planned if x not in done]


def _stop_reason(result: Result) -> str:
    """Why a run stopped before its plan ended, in a few words (the full text is its status detail)."""
    down = next((lv for lv in result.levels if any(f.kind == FindingKind.TARGET_DOWN for f in lv.validity.findings)),
                None)
    if down is not None:
        return f"the target stopped answering during {short_label(down)}"
    if result.status == "interrupted":
        return "interrupted"
    if any(f.kind == FindingKind.RUN_STOPPED for f in result.validity.findings):
        return "a write to its directory failed"
    return f"status {result.status}"


def _unanswered(result: Result, best: tuple[LevelResult | None, str] | None) -> str | None:
    """Why no level answers the run's question, in words, or None (``Headline.unanswered``)."""
    measured = levels_text(result, [lv.index for lv in result.levels])
    opt = result.optimize
    if best is not None and best[0] is None:
        return f"no level met the SLO {slo_text(result)} (measured {measured})"
    if opt is not None and opt.best_value is None:
        return f"--optimize chose no level: {opt.reason or 'no reason recorded'} (measured {measured})"
    if all(lv.validity.verdict == "invalid" for lv in result.levels):
        return f"no level was measured validly ({measured} invalid: see the notes)"
    return None


def headline(result: Result) -> Headline | None:
    """The figure the reports lead with (``results.headline`` picks the boundary and the value): the
    best level under the SLO (``best_under_slo``: ``--optimize``'s choice when it ran) with its goodput
    per kW; without an SLO, the level ``--optimize`` recommends, else the level with the most output
    tokens per kW at its headline boundary (a one-level run: that level), not ``invalid`` ones where
    another exists. None without levels."""
    lvs = result.levels
    if not lvs:
        return None
    best = best_under_slo(result)
    opt = result.optimize
    picked = None if opt is None else (opt.recommended_value if opt.recommended_value is not None
                                       else opt.best_value)
    chosen = next((x for x in lvs if F.level_target_value(x) == picked), None) if picked is not None else None
    if best is not None and best[0] is not None:
        lv, name, title = best[0], "goodput_per_kw", "goodput tok/s per kW"
        chose = result.optimize is not None and result.optimize.best_value is not None
        why = f"{short_label(lv)}: " + ("--optimize's choice" if chose else "the best level") + \
            f" under the SLO {slo_text(result)}"
    elif chosen is not None and best is None:  # --optimize without an SLO: the level it recommends
        lv, name, title = chosen, "output_tokens_per_s_per_kw", "output tok/s per kW"
        why = f"{short_label(lv)}: --optimize's choice"
    else:
        def per_kw(x: LevelResult) -> float:
            hb = F.headline_energy(x)
            v = point(x, "output_tokens_per_s_per_kw", hb[0], hb[1].output_tokens_per_s_per_kw) if hb else None
            return -1.0 if v is None else v

        pool = [x for x in lvs if x.validity.verdict != "invalid"] or lvs
        lv = max(pool, key=per_kw)
        name, title = "output_tokens_per_s_per_kw", "output tok/s per kW"
        measured = any(per_kw(x) >= 0 for x in lvs)  # without energy every level ties at nothing
        why = ("" if len(lvs) == 1 or not measured else
               f"{short_label(lv)}: the most output tokens per kW of the {len(lvs)} levels"
               + ("" if best is None else f" (no level met the SLO {slo_text(result)})"))
    hb = F.headline_energy(lv)
    b, be = (hb[0], hb[1]) if hb else (None, None)
    if name == "goodput_per_kw":
        value = goodput_point(lv)[0] if b else None
    else:
        value = point(lv, name, b, be.output_tokens_per_s_per_kw) if be is not None else None
    ci = trial_ci(lv, name, b) if b else None
    searched = _search_score(result, lv, name) if b else None
    n = None
    if searched is not None and searched[1] > 1:  # the figure the search chose by, not the first measurement's
        value, n, ci = searched[0], searched[1], None
    return Headline(lv, why, b, be.label if be is not None else None, name, title, value,
                    (ci.low, ci.high) if ci else None, ci.n if ci else None, lv.validity.verdict,
                    _unanswered(result, best), n)


# a run without energy has no efficiency answer: it says so, and how to measure one
NO_ENERGY_ANSWER = f"no efficiency answer (energy unavailable); give a power meter with {SENSOR_FIX}"


def estimate_text(h: Headline) -> str:
    """An estimated headline's basis and uncertainty, as the answer line says them: ``estimate from
    CPU utilization: 8 W per logical CPU × 2 assumed, ±60%`` (the level's ``estimate`` finding and
    the boundary's uncertainty, both fields of the result)."""
    f = next((x for x in h.level.validity.findings if x.kind == FindingKind.ESTIMATE and x.basis), None)
    be = h.level.energy.get(h.boundary) if h.boundary else None
    u = be.uncertainty_pct if be is not None else None
    basis = f.basis if f is not None and f.basis else "estimate"
    return basis + ("" if u is None else f", ±{fmt(u, kind='effect')}%")


def meter_pct(h: Headline) -> float | None:
    """The stated uncertainty of a declared or estimated headline figure (the boundary's
    ``uncertainty_pct``: the meter's ±% with the window's own terms, ``accounting/uncertainty.py``),
    None for a measured one (its meter's accuracy is a note of its own, not the answer's)."""
    if h.label not in ("declared", "estimate") or h.boundary is None:
        return None
    be = h.level.energy.get(h.boundary)
    return be.uncertainty_pct if be is not None else None


def with_meter(h: Headline) -> tuple[float, float, float] | None:
    """The headline's range once the meter's stated uncertainty is counted: ``(pct, low, high)``, the
    trials' 95% half-width and the meter's ±% (of the value) added in quadrature — the trials'
    CI alone says how the trials scattered, not how far a declared ±20% meter may be off, which
    every trial shares. None without a stated uncertainty or a value."""
    u = meter_pct(h)
    if u is None or h.value is None:
        return None
    half_ci = (h.ci[1] - h.ci[0]) / 2.0 if h.ci is not None else 0.0
    half = math.sqrt(half_ci ** 2 + (u / 100.0 * h.value) ** 2)
    return 100.0 * half / abs(h.value) if h.value else u, h.value - half, h.value + half


def answer_line(result: Result) -> str | None:
    """``answer: c=4 — 2,086 output tok/s per kW (node, declared) · valid``: the run's headline
    figure (``headline``) with its boundary (the trials' mean and CI under ``--trials``) and its
    level's efficiency verdict; an estimate names its basis and uncertainty (``(host, estimate
    from CPU utilization: 8 W per logical CPU × 2 assumed, ±60%) · estimate``); None without levels."""
    h = headline(result)
    if h is None:
        return None
    dead = unmeasured_text(h.level)
    if measured_nothing(h.level):  # no figure: what happened instead (never "energy unavailable")
        block = h.level.trials
        n = block.n if block is not None else 1
        why = "; ".join(sorted({u.why for u in block.unmeasured if u.why})) if block is not None else ""
        why = why or nothing_measured_why(h.level)
        return (f"answer: {short_label(h.level)} — no figure: "
                + (f"none of its {n} trials measured ({why})" if n > 1 else f"it measured nothing ({why})")
                + f" · {h.verdict}")
    if h.unanswered is not None:  # the run's own question has no answer: never a level's figure in its place
        return f"answer: none — {h.unanswered}"
    if h.boundary is None and not any(lv.energy for lv in result.levels):  # no efficiency answer, and its fix
        return f"answer: {NO_ENERGY_ANSWER} · {result.validity.verdict}"  # the run's: energy unavailable
    u = meter_pct(h)
    where = "" if h.boundary is None else f" ({h.boundary}" + (
        f", {estimate_text(h)}" if h.label == "estimate" else
        f", declared ±{fmt(u, kind='effect')}%" if h.label == "declared" and u is not None else
        f", {h.label}" if h.label and h.label != "measured" else "") + ")"
    wm = with_meter(h) if h.ci is not None else None
    # the figure at the precision of the widest interval said of it (the meter's ± counted)
    value = (fmt_estimate(h.value, wm[1], wm[2])[0] if wm is not None else
             fmt_estimate(h.value, h.ci[0], h.ci[1])[0] if h.ci is not None else
             fmt_uncertain(h.value, u if h.label == "estimate" else None))  # an estimate at its ±%'s digits
    figure = f"{value} {h.title}{where}" if h.boundary else "no energy measured"
    if h.boundary is not None and h.value is None and not h.level.throughput.output_tokens:
        # energy without tokens (``measure`` around a command wattbench cannot count tokens of): what
        # was measured, in words, never a per-kW figure of "–"
        be = h.level.energy[h.boundary]
        dur = h.level.window.duration_s if h.level.window is not None else None
        figure = (f"no tokens counted, so no tokens per kW; energy only: {fmt(be.energy_j)} J, "
                  f"{fmt(be.avg_power_w)} W average over {fmt(dur)} s{where}")
    if h.ci is not None and wm is not None:  # the trials' scatter and the meter's stated ±%, both said
        figure += (f", mean of {h.trials} trials (95% CI {fmt_estimate(h.value, h.ci[0], h.ci[1])[1]} from the "
                   f"trials{F.precision_text(h.level)}; {fmt_estimate(h.value, wm[1], wm[2])[1]}, "
                   f"±{fmt(wm[0], kind='effect')}%, with the meter's "
                   f"±{fmt(u, kind='effect')}%)")
    elif h.ci is not None:
        figure += f", mean of {h.trials} trials ({F.interval_text(h.level, h.ci[0], h.ci[1], h.value)})"
    elif dead is not None and h.value is not None:
        figure += ", from one trial (no interval)"
    if h.measurements:
        figure += f", mean of its {h.measurements} measurements"
    missing = unmeasured_levels(result)
    if missing:  # a run stopped early: the best of the levels it measured, and which it did not
        figure += f"; of {levels_text(result, [lv.index for lv in result.levels])} only ({', '.join(missing)} not measured)"
    if dead is not None:
        figure += f"; {dead}"
    return f"answer: {short_label(h.level)} — {figure} · {h.verdict}"


def history_summary(result: Result) -> dict[str, Any]:
    """What ``history list`` shows of a run beside its target and configuration: the headline figure
    (``headline``: the answer line's level, figure, boundary and verdict), kept in the history's
    ``summary`` when the run is registered. ``{}`` without levels."""
    h = headline(result)
    if h is None:
        return {}
    if h.unanswered is not None:
        return {"headline": {"level": None, "name": h.name, "value": None, "boundary": None, "label": None,
                             "verdict": h.verdict, "unanswered": h.unanswered}}
    return {"headline": {"level": short_label(h.level), "name": h.name, "value": h.value, "boundary": h.boundary,
                         "label": h.label, "verdict": h.verdict}}


def lead_lines(result: Result) -> list[str]:
    """What the run answers, first: the headline figure with its boundary and verdict, what was
    chosen and why (a search, the best level under the SLO, the most efficient level), the precision
    ``--trials auto`` reached, and the levels a run stopped early never measured."""
    out = []
    first = answer_line(result)
    if first is not None:
        out.append(first)
    out += search_lines(result)
    prec = precision_line(result)
    if prec:
        out.append(prec)
    h = headline(result)
    chose = result.optimize is not None and result.optimize.best_value is not None
    if h is not None and h.why and h.name != "goodput_per_kw" and not chose:  # the most efficient level
        out.append(h.why)
    missing = unmeasured_levels(result)
    if missing:
        out.append(f"not measured: {', '.join(missing)} — the run stopped early: {_stop_reason(result)}")
    best = best_under_slo(result)
    # --optimize's line already names the best level; the answer line says that none met the SLO
    if best is not None and not chose and best[0] is not None:
        out.append(best[1])
    return out


def context_lines(result: Result) -> list[str]:
    """How the run was taken, in words: how the server's state was controlled (``state_line``), the
    ``wattbench ab`` pairing, and for ``wattbench measure`` what ran and each level's own figures
    from the tool. The terminal prints these after the tables; the answer comes first."""
    st = state_line(result)
    return ([st] if st else []) + paired_lines(result) + measure_lines(result)


def answer_lines(result: Result) -> list[str]:
    """``lead_lines`` then ``context_lines``: what the run answers, then how it was taken."""
    return lead_lines(result) + context_lines(result)


# what ``MeasureInfo.window_source`` / ``token_source`` mean, in words
WINDOW_SOURCE_TEXT = {"command lifetime": "the command's lifetime", "markers": "the --window-from markers",
                      "tool records": "the tool's request records"}
TOKEN_SOURCE_TEXT = {"server counters": "the server's token counters", "tool records": "the tool's records",
                     "none": "nowhere (no tool result read and no server token counter): energy and power only"}


def measure_lines(result: Result) -> list[str]:
    """``wattbench measure``: the tool and where windows and tokens came from, then per level the
    tool's own figures (labelled as the tool's) and the server counter's count beside the tool's."""
    m = result.measure
    if m is None:
        return []
    tool = " ".join(x for x in (m.tool, m.tool_version) if x)
    out = [f"measured around {'a command' if tool == 'command' else tool} "
           f"(exit {m.exit_code if m.exit_code is not None else 'none: stopped'}): "
           f"windows from {WINDOW_SOURCE_TEXT.get(m.window_source, m.window_source)}, "
           f"tokens from {TOKEN_SOURCE_TEXT.get(m.token_source, m.token_source)}"
           + (f"; {m.clock.source_clock} clock, ±{fmt(m.clock.uncertainty_ns / 1e3)} us" if m.clock else "")]
    for lv in result.levels:
        t = lv.tool
        if t is None:
            continue
        figs = ", ".join(f"{k} {fmt(v)}" for k, v in t.figures.items() if v is not None)
        if figs:
            out.append(f"{short_label(lv)}: {t.tool}'s own figures: {figs}")
        if t.server_output_tokens is not None and t.tool_output_tokens is not None:
            out.append(f"{short_label(lv)}: output tokens in the window: {fmt(t.tool_output_tokens)} from the tool's "
                       f"records, {fmt(t.server_output_tokens)} ± {fmt(t.server_output_tokens_error)} from the "
                       "server's counter")
    return out


# ---------------------------------------------------------------- --optimize / --sweep auto


def _level_by_value(result: Result, value: Any) -> str:
    for lv in result.levels:
        if F.level_target_value(lv) == value:
            return short_label(lv)
    mode = result.levels[0].load.mode if result.levels else "concurrency"
    return f"r={value:g}/s" if mode == "rate" else f"c={value:g}"


def search_lines(result: Result) -> list[str]:
    """What ``--optimize`` chose and why, or where ``--sweep auto`` stopped and why."""
    out = []
    opt = result.optimize
    if opt is not None:
        objective = opt.objective or "objective"
        measured = opt.measured_values
        tried = ", ".join(_level_by_value(result, v) for v in sorted(set(measured)))  # by load, each once
        of = f" of {opt.ladder_size}" if opt.ladder_size else ""
        if opt.best_value is None:
            out.append(f"optimize {objective}: no level chosen — {opt.reason or 'no reason recorded'} "
                       f"(measured {len(measured)}{of}: {tried})")
        else:
            best = _level_by_value(result, opt.best_value)
            score = None
            for v, s in zip(measured, opt.scores):
                if v == opt.best_value:
                    score = s
            if opt.best_score is not None:
                score = opt.best_score  # the mean of its measurements
            slo = slo_text(result)
            why = f"highest {objective} ({fmt(score)})" + (f" meeting {slo}" if slo else "")
            if opt.recommended_value is not None and opt.plateau:
                rec = _level_by_value(result, opt.recommended_value)
                # the levels within noise of the best, the best itself left out (it is "the best")
                others = [v for v in sorted(opt.plateau) if v != opt.best_value]
                flat = ("; within noise of it: " + ", ".join(_level_by_value(result, v) for v in others)
                        if others else "")
                again = " and ".join(_level_by_value(result, v) for v in sorted(set(opt.remeasured)))
                out.append(f"optimize: recommends {rec} — {opt.recommend_reason}; best {best}: {why}{flat} "
                           f"({again} measured twice; measured: {tried})")
            else:
                because = f"; {opt.recommend_reason}" if opt.recommend_reason else ""
                out.append(f"optimize: chose {best} — {why}; {opt.reason}{because} (measured: {tried})")
            if opt.top_of_ladder:
                out.append(f"optimize: {best} is the top of the ladder searched: a higher load may be better "
                           "(widen it with --concurrency/--rate or --max-concurrency)")
    sweep = result.sweep
    if sweep is not None:
        measured = sweep.measured_values
        last = _level_by_value(result, measured[-1]) if measured else MISSING
        knee = sweep.knee_value
        knee_txt = f"; knee at {_level_by_value(result, knee)}" if knee is not None else ""
        out.append(f"sweep auto: stopped at {last} — {sweep.reason or 'no reason recorded'}{knee_txt}")
    return out
