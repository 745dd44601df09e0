"""What every report says about a run, as text: short level labels, the notes (verdict reasons,
warnings, sensor problems) each said once, the SLO and goodput cells, the trials' means and
confidence intervals, and what ``--optimize`` / ``--sweep auto`` chose and why.

The terminal, Markdown and HTML reports all read a run through these functions, so the three say
the same thing in the same words. Nothing here computes a figure: every number is a field of the
result (``LevelResult.goodput``, ``level.trials``, ``result.optimize``, …),
only selected and formatted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from wattbench.report import format as F
from wattbench.results.schema import LevelResult, Result


def load_label(mode: str | None, value: float | None, max_in_flight: int | None = None) -> str:
    """``c=64`` (concurrency), ``r=4/s`` or ``r=inf`` (rate, ``c≤N`` when capped); ``–`` without a value."""
    if value is None:
        return F.MISSING
    if mode == "rate":
        out = "r=inf" if value == float("inf") else f"r={value:g}/s"
        return out + (f" c≤{max_in_flight}" if max_in_flight else "")
    if mode == "concurrency":
        return f"c={value:g}"
    return f"{mode or ''} {value:g}".strip()


def short_label(level: LevelResult) -> str:
    """``c=64`` for concurrency 64, ``r=4/s`` for 4 requests/s, ``r=inf`` for all at once; a
    suffix of the stored label (``prefill-heavy``) is kept. Trace levels keep their label."""
    ld = level.load
    if ld.mode == "concurrency" and ld.target_concurrency is not None:
        base, canon = load_label("concurrency", ld.target_concurrency), f"concurrency={ld.target_concurrency}"
        from wattbench.accounting.level_findings import in_flight_finding

        if in_flight_finding(level) is not None:  # far below its label: the achieved figure beside it
            base += f" (got {ld.mean_in_flight:.1f})"
    elif ld.mode == "rate" and ld.target_rate_rps is not None:
        r = ld.target_rate_rps
        base = load_label("rate", r, ld.max_in_flight)
        canon = "rate=inf" if r == float("inf") else f"rate={r:g}"
    else:
        return level.label
    rest = level.label[len(canon):].strip() if level.label.startswith(canon) else ""
    return f"{base} {rest}" if rest else base


def levels_text(result: Result, indices) -> str:
    """Levels named compactly in the order given: ``c=1,2,32``, ``r=2,4/s``; other labels (a
    suffix such as ``prefill-heavy``, a trace) as their short labels, joined by commas."""
    by_index = {lv.index: lv for lv in result.levels}
    lvs = [by_index[i] for i in indices if i in by_index]
    if not lvs:
        return ""
    groups: dict[str, tuple[list[str], list[str]]] = {}  # suffix -> (concurrencies, rates)
    other = []
    for lv in lvs:
        label, ld = short_label(lv), lv.load
        base = (load_label("concurrency", ld.target_concurrency) if ld.mode == "concurrency" else
                load_label("rate", ld.target_rate_rps) if ld.mode == "rate" and not ld.max_in_flight else None)
        suffix = label[len(base):] if base and label.startswith(base) else None
        if suffix is not None and suffix and not suffix.startswith(" "):
            suffix = None  # "c=64 (got 7.2)" keeps its own label
        if base is None or suffix is None:
            other.append(label)
            continue
        cs, rs = groups.setdefault(suffix.strip(), ([], []))
        if ld.mode == "concurrency":
            cs.append(f"{ld.target_concurrency:g}")
        else:
            rs.append("inf" if ld.target_rate_rps == float("inf") else f"{ld.target_rate_rps:g}")
    parts = []
    for suffix, (cs, rs) in sorted(groups.items(), key=lambda kv: kv[0] != ""):  # plain levels first
        tail = f" {suffix}" if suffix else ""
        if cs:
            parts.append("c=" + ",".join(cs) + tail)
        if rs:
            parts.append("r=" + ",".join(rs) + ("" if rs == ["inf"] else "/s") + tail)
    return ", ".join(parts + other)


def _num(a: float) -> str:
    return f"{a:.0f}" if a >= 10 else f"{a:.1f}" if a >= 0.1 else f"{a:.2f}"


def _pct_text(x: float, signed: bool) -> str:
    return (("+" if x >= 0 else "−") if signed else "") + _num(abs(x)) + "%"


def effect_text(effects, signed: bool) -> str:
    """``+56%``, ``+52–56%``, ``−25% to −20%`` (signed, a range over the levels), ``0.8–1.2%`` (a
    magnitude)."""
    xs = sorted(effects) if signed else sorted(abs(x) for x in effects)
    if not xs:
        return ""
    lo, hi = _pct_text(xs[0], signed), _pct_text(xs[-1], signed)
    if lo == hi:
        return lo
    if not signed:
        return f"{_num(xs[0])}–{hi}"
    if xs[0] >= 0:
        return f"+{_num(xs[0])}–{_num(xs[-1])}%"
    return f"{lo} to {hi}"


def group_text(result: Result, g) -> str:
    """One group of findings as a line: ``c=1,2,32: prompt lengths +56% (no tokenizer)``. The
    effect goes where the summary says ``{effect}`` (a magnitude) or ``{effect:+}`` (signed), else
    after it."""
    summary = g.summary
    signed = "{effect:+}" in summary
    eff = effect_text(g.effects, signed)
    if "{effect" in summary:
        body = summary.replace("{effect:+}", eff).replace("{effect}", eff).replace("  ", " ").strip()
    else:
        body = f"{summary} {eff}".strip() if eff else summary
    where = levels_text(result, g.levels)
    return f"{where}: {body}" if where else body


@dataclass(frozen=True)
class NoteLine:
    severity: str  # note | warn | invalid
    text: str


def note_lines(result: Result) -> list[NoteLine]:
    """Every note of the run once, in reading order: the run's own findings, the warnings and sensor
    problems the run recorded, then one line per distinct level finding with its levels in numeric
    order (``accounting.findings.group_findings``, the one grouping), the worst first."""
    from wattbench.accounting.findings import group_findings

    groups = group_findings(result)
    run_groups = [g for g in groups if not g.levels]
    level_groups = [g for g in groups if g.levels]
    out = [NoteLine(g.severity, group_text(result, g)) for g in run_groups]
    for w in result.warnings:
        out.append(NoteLine("warn", w))
    missing = sorted({F.energy_unavailable_reason(lv) for lv in result.levels if not lv.energy})
    if result.validity.energy != "unavailable":
        for reason in missing:
            where = levels_text(result, [lv.index for lv in result.levels if not lv.energy
                                         and F.energy_unavailable_reason(lv) == reason])
            out.append(NoteLine("warn", f"{where}: energy unavailable: {reason}"))
    for p in result.sensor_problems:
        out.append(NoteLine("note", p))
    out += [NoteLine(g.severity, group_text(result, g)) for g in level_groups]
    seen: set[str] = set()
    uniq = []
    for n in out:
        if n.text not in seen:
            seen.add(n.text)
            uniq.append(n)
    return uniq


def run_notes(result: Result) -> list[str]:
    """Every note of the run once (``note_lines``) as plain lines."""
    return [n.text for n in note_lines(result)]


MAX_NOTE_LINES = 8


def shown_notes(result: Result, width: int | None = None, limit: int = MAX_NOTE_LINES) -> tuple[list[NoteLine], int]:
    """The notes a summary shows: at most ``limit`` lines, each cut to ``width`` columns (with …),
    the worst first; and how many were left out (``wattbench report --notes`` lists them all)."""
    lines = note_lines(result)
    rank = {"invalid": 0, "warn": 1, "note": 2}
    order = sorted(range(len(lines)), key=lambda i: (rank.get(lines[i].severity, 1), i))
    keep = sorted(order[:limit] if len(lines) <= limit else order[:limit - 1])
    out = []
    for i in keep:
        t = NOTE_MARK.get(lines[i].severity, "- ") + lines[i].text
        if width and len(t) > width:
            t = t[:width - 1] + "…"
        out.append(NoteLine(lines[i].severity, t))
    return out, len(lines) - len(keep)


NOTE_MARK = {"invalid": "✗ ", "warn": "! ", "note": "- "}


def more_notes_line(n: int) -> str:
    return f"  … {n} more note{'s' if n != 1 else ''}: wattbench report --notes RUN_DIR"


def verdict_text(result: Result) -> str:
    """``valid (efficiency) · latency warn at c=32``: the run's headline verdict — the efficiency
    figures' — first, then the latency figures'; each names its levels when only some of them are
    not valid."""
    v = result.validity
    from wattbench.accounting.findings import level_order

    order = {lv.index: level_order(lv) for lv in result.levels}

    def text(run_verdict: str, per_level) -> str:
        """``valid``; or, when the levels differ, ``invalid at c=16; warn at c=4`` (worst first)."""
        got = {lv.index: per_level(lv) or "valid" for lv in result.levels}
        if len(set(got.values())) <= 1:
            return run_verdict
        parts = []
        for verdict in ("invalid", "warn"):
            idx = sorted((i for i, x in got.items() if x == verdict), key=order.get)
            if idx:
                parts.append(f"{verdict} at {levels_text(result, idx)}")
        return "; ".join(parts) if parts else run_verdict

    out = f"{text(v.verdict, lambda lv: lv.validity.verdict)} (efficiency)"
    if v.latency is not None:
        out += f" · latency {text(v.latency, lambda lv: lv.validity.latency)}"
    if v.energy == "unavailable":
        out += " · energy unavailable"
    return out


def notes_full_lines(result: Result) -> list[str]:
    """Every finding in full (``wattbench report --notes``): per distinct finding its severity,
    levels, the figures it biases, its estimated effect and basis, then each level's own text where
    it says more than the head (an older file's findings, and any without a short form, are their
    head: said once)."""
    from wattbench.accounting.findings import group_findings

    out = [f"{result.run_id}: {verdict_text(result)}"]
    for g in group_findings(result):
        head = f"[{g.severity}] {group_text(result, g)}"
        out.append(head)
        meta = []
        if g.figures:
            meta.append("biases " + ", ".join(g.figures))
        if g.findings and g.findings[0].bound_pct is not None:
            meta.append(f"material from {g.findings[0].bound_pct:g}%")
        if meta:
            out.append("    " + "; ".join(meta))
        for f in g.findings:
            if f.text != g.summary:  # a finding without a short form (an older file's) is the head itself
                where = levels_text(result, f.levels)
                out.append(f"    {where + ': ' if where else ''}{f.text}")
            if f.basis:
                out.append(f"      basis: {f.basis}")
    for w in result.warnings:
        out.append(f"[warn] {w}")
    for p in result.sensor_problems:
        out.append(f"[note] {p}")
    return out


# ---------------------------------------------------------------- configuration

# settings of the launched engine: they apply only when wattbench started the server (no --target)
ENGINE_KEYS = ("engine", "engine_model", "engine_args", "device")


def applied_config(result: Result) -> list[tuple[str, Any]]:
    """The run's configuration as it applied, sorted by key: the engine launch settings only when
    wattbench launched the engine (a ``--target`` run talked to a server it did not start), the
    arrival process only when a level ran open loop (a closed-loop run has no arrivals to shape)."""
    cfg = result.config if isinstance(result.config, dict) else {}
    targeted = bool(cfg.get("target") or cfg.get("targets"))
    open_loop = bool(cfg.get("rate")) or any(lv.load.mode == "rate" for lv in result.levels)
    out = []
    for k, v in sorted(cfg.items()):
        if targeted and k in ENGINE_KEYS:
            continue
        if k == "arrival" and not open_loop:
            continue
        out.append((k, v))
    return out


# ---------------------------------------------------------------- SLO and goodput


def slo_text(result: Result) -> str | None:
    """The run's SLO as given (``ttft_p99=500ms,tpot_p99=50ms``), or None without one."""
    for lv in result.levels:
        slos = (lv.goodput or {}).get("slos")
        if slos:
            return ",".join(f"{s['metric']}_{s['stat']}={s['threshold_ms']:g}ms" for s in slos)
    slo = result.config.get("slo") if isinstance(result.config, dict) else None
    return str(slo) if slo else None


def has_goodput(result: Result) -> bool:
    return any(lv.goodput for lv in result.levels)


@dataclass(frozen=True)
class GoodputCells:
    met_pct: str  # share of the level's requests that met every SLO
    slo: str  # "met" / "missed": the SLO as written, judged over the level
    goodput_tok_s: str
    goodput_per_kw: str  # at the level's headline boundary
    boundary: str | None


def goodput_cells(level: LevelResult) -> GoodputCells:
    gp = level.goodput or {}
    hb = F.headline_boundary(level)
    b = hb[0] if hb else None
    per_kw = ((gp.get("per_kw") or {}).get(b) or {}) if b else {}
    all_met = gp.get("all_met")
    slo = F.MISSING if all_met is None else ("met" if all_met else "missed")
    return GoodputCells(F.fmt_fraction_pct(gp.get("fraction")), slo, F.fmt(gp.get("output_tokens_per_s")),
                        F.fmt(per_kw.get("output_tokens_per_s_per_kw")), b)


def best_under_slo(result: Result) -> tuple[LevelResult | None, str] | None:
    """The level that answers "which load is best under the SLO", with one line saying why; None
    without an SLO. ``--optimize``'s choice when it ran; else, among the levels whose SLO held
    (``goodput["all_met"]``) and whose verdict is not invalid, the one with the most goodput per kW
    at its headline boundary (goodput tok/s where no power was measured)."""
    slo = slo_text(result)
    if not slo:
        return None
    opt = result.optimize
    chosen: LevelResult | None = None
    if opt is not None and opt.best_value is not None:
        chosen = next((lv for lv in result.levels if F.level_target_value(lv) == opt.best_value), None)
    if chosen is None:
        ok = [lv for lv in result.levels if (lv.goodput or {}).get("all_met") and lv.validity.verdict != "invalid"]

        def key(lv: LevelResult) -> tuple[float, float]:
            g = goodput_point(lv)
            return (g[0] if g[0] is not None else -1.0, g[1] if g[1] is not None else -1.0)

        chosen = max(ok, key=key) if ok else None
    if chosen is None:
        return None, f"best under SLO {slo}: no level met it"
    c = goodput_cells(chosen)
    per_kw_v, tok_s = goodput_point(chosen)
    per_kw = f"{F.fmt(per_kw_v)} goodput tok/s/kW ({c.boundary}), " if c.boundary else ""
    mean = " (trial means)" if trials_n(chosen) else ""
    return chosen, (f"best under SLO {slo}: {short_label(chosen)} — {per_kw}{F.fmt(tok_s)} goodput tok/s{mean}, "
                    f"{c.met_pct} of requests met it")


def goodput_cells_raw(level: LevelResult) -> tuple[float | None, float | None]:
    """(goodput tok/s per kW at the headline boundary, goodput tok/s) as stored (the last trial's)."""
    gp = level.goodput or {}
    hb = F.headline_boundary(level)
    per_kw = ((gp.get("per_kw") or {}).get(hb[0]) or {}) if hb else {}
    return per_kw.get("output_tokens_per_s_per_kw"), gp.get("output_tokens_per_s")


def state_line(result: Result) -> str | None:
    """How the run controlled the server's state (issue 24): the priming load and the history
    check, in one line; None when the run did neither."""
    nz = result.noise
    if nz is None:
        return None
    parts = []
    p = nz.priming
    if p is not None:
        at = short_label_text(p.label) if p.label else (f"r={p.value:g}/s" if p.mode == "rate" else f"c={p.value:g}")
        dur = "" if p.duration_s is None else f" in {p.duration_s:.{0 if p.duration_s >= 10 else 1}f} s"
        parts.append(f"primed at {at}: {p.completed}/{p.requests} requests{dur}, not measured")
    h = nz.history_check
    if h is not None and h.verdict != "unknown" and h.ratio is not None:
        state = "beyond noise" if h.verdict == "warn" else "within noise"
        parts.append(f"history check {short_label_text(h.level)}: {h.ratio - 1:+.1%} {state} (±{h.bound_pct:.1f}%)")
    if nz.engine_starts:
        parts.append(f"{len(nz.engine_starts)} engine starts")
    return "; ".join(parts) or None


def short_label_text(label: str) -> str:
    return label.replace("concurrency=", "c=").replace("rate=", "r=")


def goodput_point(level: LevelResult) -> tuple[float | None, float | None]:
    """(goodput tok/s per kW at the headline boundary, goodput tok/s) as the headline quotes them:
    the trials' means with ``--trials`` (``results.headline.point``), else as stored."""
    from wattbench.results.headline import point

    per_kw, tok_s = goodput_cells_raw(level)
    hb = F.headline_boundary(level)
    return (point(level, "goodput_per_kw", hb[0], per_kw) if hb else per_kw,
            point(level, "goodput_output_tokens_per_s", None, tok_s))


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


def headline(result: Result) -> Headline | None:
    """The figure the reports lead with (``results.headline`` picks the boundary and the value): the
    best level under the SLO (``best_under_slo``: ``--optimize``'s choice when it ran) with its goodput
    per kW; without an SLO, the level ``--optimize`` recommends, else the level with the most output
    tokens per kW at its headline boundary (a one-level run: that level), not ``invalid`` ones where
    another exists. None without levels."""
    from wattbench.results.headline import point, trial_ci

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
            hb = F.headline_boundary(x)
            v = point(x, "output_tokens_per_s_per_kw", hb[0], hb[1].output_tokens_per_s_per_kw) if hb else None
            return -1.0 if v is None else v

        pool = [x for x in lvs if x.validity.verdict != "invalid"] or lvs
        lv = max(pool, key=per_kw)
        name, title = "output_tokens_per_s_per_kw", "output tok/s per kW"
        why = ("" if len(lvs) == 1 else f"{short_label(lv)}: the most output tokens per kW of the {len(lvs)} levels"
               + ("" if best is None else f" (no level met the SLO {slo_text(result)})"))
    hb = F.headline_boundary(lv)
    b, be = (hb[0], hb[1]) if hb else (None, None)
    if name == "goodput_per_kw":
        value = goodput_point(lv)[0] if b else None
    else:
        value = point(lv, name, b, be.output_tokens_per_s_per_kw) if be is not None else None
    ci = trial_ci(lv, name, b) if b else None
    return Headline(lv, why, b, be.label if be is not None else None, name, title, value,
                    (ci.low, ci.high) if ci else None, ci.n if ci else None, lv.validity.verdict)


def answer_line(result: Result) -> str | None:
    """``answer: c=4 — 2,086 output tok/s per kW (node, declared) · valid``: the run's headline
    figure (``headline``) with its boundary (the trials' mean and CI under ``--trials``) and its
    level's efficiency verdict; None without levels."""
    h = headline(result)
    if h is None:
        return None
    where = "" if h.boundary is None else f" ({h.boundary}" + (
        f", {h.label}" if h.label and h.label != "measured" else "") + ")"
    figure = f"{F.fmt(h.value)} {h.title}{where}" if h.boundary else "no energy measured"
    if h.ci is not None:
        figure += f", mean of {h.trials} trials (95% CI {F.fmt(h.ci[0])}–{F.fmt(h.ci[1])})"
    return f"answer: {short_label(h.level)} — {figure} · {h.verdict}"


def answer_lines(result: Result) -> list[str]:
    """What the run answers, first: the headline figure with its boundary and verdict, what was
    chosen and why (a search, the best level under the SLO, the most efficient level), how the
    server's state was controlled; for ``wattbench measure``, what ran and each level's own figures
    from the tool."""
    out = []
    first = answer_line(result)
    if first is not None:
        out.append(first)
    out += search_lines(result)
    h = headline(result)
    chose = result.optimize is not None and result.optimize.best_value is not None
    if h is not None and h.why and h.name != "goodput_per_kw" and not chose:  # the most efficient level
        out.append(h.why)
    st = state_line(result)
    if st:
        out.append(st)
    best = best_under_slo(result)
    if best is not None and not chose:  # --optimize's line already names the best level
        out.append(best[1])
    return out + measure_lines(result)


def measure_lines(result: Result) -> list[str]:
    """``wattbench measure``: the tool and where windows and tokens came from, then per level the
    tool's own figures (labelled as the tool's) and the server counter's count beside the tool's."""
    m = result.measure
    if m is None:
        return []
    tool = " ".join(x for x in (m.tool, m.tool_version) if x)
    out = [f"measured around {tool} (exit {m.exit_code if m.exit_code is not None else 'none: stopped'}): "
           f"windows from the {m.window_source}, tokens from the {m.token_source}"
           + (f"; {m.clock.source_clock} clock, ±{F.fmt(m.clock.uncertainty_ns / 1e3)} us" if m.clock else "")]
    for lv in result.levels:
        t = lv.tool
        if t is None:
            continue
        figs = ", ".join(f"{k} {F.fmt(v)}" for k, v in t.figures.items() if v is not None)
        if figs:
            out.append(f"{short_label(lv)}: {t.tool}'s own figures: {figs}")
        if t.server_output_tokens is not None and t.tool_output_tokens is not None:
            out.append(f"{short_label(lv)}: output tokens in the window: {F.fmt(t.tool_output_tokens)} from the tool's "
                       f"records, {F.fmt(t.server_output_tokens)} ± {F.fmt(t.server_output_tokens_error)} from the "
                       "server's counter")
    return out


# ---------------------------------------------------------------- trials


# (figure name in the trials block, display name, is it read at a boundary)
TRIAL_FIGURES: list[tuple[str, str, bool]] = [
    ("output_tokens_per_s", "out tok/s", False),
    ("output_tokens_per_s_per_kw", "tok/s/kW", True),
    ("j_per_output_token", "J/tok", True),
    ("avg_power_w", "W", True),
    ("ttft_p99_ms", "TTFT p99 ms", False),
    ("tpot_p50_ms", "TPOT p50 ms", False),
    ("goodput_per_kw", "goodput tok/s/kW", True),
    ("goodput_fraction", "met SLO", False),
]


@dataclass(frozen=True)
class TrialCell:
    name: str  # display name
    mean: str
    ci: str  # "980–1,020"
    n: int | None


def trials_n(level: LevelResult) -> int | None:
    return level.trials.n if level.trials is not None else None


def trial_cells(level: LevelResult) -> list[TrialCell]:
    """Mean and 95% CI of each headline figure over the level's trials (empty without trials)."""
    from wattbench.analysis.figures import trial_ci

    if trials_n(level) is None:
        return []
    hb = F.headline_boundary(level)
    b = hb[0] if hb else None
    out = []
    for name, title, at_boundary in TRIAL_FIGURES:
        ci = trial_ci(level, name, b if at_boundary else None)
        if ci is None:
            continue
        if name == "goodput_fraction":
            mean, ci_txt = F.fmt_fraction_pct(ci.mean), f"{F.fmt_fraction_pct(ci.low)}–{F.fmt_fraction_pct(ci.high)}"
        else:
            mean, ci_txt = F.fmt(ci.mean), f"{F.fmt(ci.low)}–{F.fmt(ci.high)}"
        out.append(TrialCell(title, mean, ci_txt, ci.n))
    return out


def any_trials(result: Result) -> bool:
    return any(trials_n(lv) for lv in result.levels)


def _n_text(result: Result) -> str:
    n = {trials_n(lv) for lv in result.levels} - {None}
    return f"{n.pop()} trials" if len(n) == 1 else "trials"


def last_trial_title(result: Result) -> str | None:
    """Above the level table of a run with trials: its figures are the last trial's."""
    return f"last of {_n_text(result)} (means and 95% CIs below)" if any_trials(result) else None


def trials_title(result: Result) -> str:
    return f"mean and 95% CI over {_n_text(result)}"


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
        tried = ", ".join(_level_by_value(result, v) for v in measured)
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
            why = f"highest {objective} ({F.fmt(score)})" + (f" meeting {slo}" if slo else "")
            if opt.recommended_value is not None and opt.plateau:
                rec = _level_by_value(result, opt.recommended_value)
                flat = ", ".join(_level_by_value(result, v) for v in opt.plateau)
                again = " and ".join(_level_by_value(result, v) for v in opt.remeasured)
                out.append(f"optimize: recommends {rec} — {opt.recommend_reason}; best {best}: {why}; within noise "
                           f"of it: {flat} ({again} measured twice; measured: {tried})")
            else:
                out.append(f"optimize: chose {best} — {why}; {opt.reason} (measured: {tried})")
            if opt.top_of_ladder:
                out.append(f"optimize: {best} is the top of the ladder searched: a higher load may be better "
                           "(widen it with --concurrency/--rate or --max-concurrency)")
    sweep = result.sweep
    if sweep is not None:
        measured = sweep.measured_values
        last = _level_by_value(result, measured[-1]) if measured else F.MISSING
        knee = sweep.knee_value
        knee_txt = f"; knee at {_level_by_value(result, knee)}" if knee is not None else ""
        out.append(f"sweep auto: stopped at {last} — {sweep.reason or 'no reason recorded'}{knee_txt}")
    return out


# ---------------------------------------------------------------- level tables


@dataclass
class Column:
    """One column of a level table: a short header (lines joined by newlines) and one cell per level."""

    header: str
    cells: list[str]
    justify: str = "right"
    kind: str = ""  # how a renderer may colour it: verdict | slo | ci | label:<measured|declared|estimate>
    styles: list[str] | None = None  # per-cell terminal style, when the column sets its own
    max_width: int | None = None  # longer cells fold onto more lines (the level label only)

    @property
    def width(self) -> int:
        w = max([len(x) for x in self.header.split("\n")] + [len(c) for c in self.cells])
        return min(w, self.max_width) if self.max_width else w


# Boundary names in table headers, where width is short (the full name is in the notes and docs).
SHORT_BOUNDARY = {"accelerator": "accel", "accelerator_memory": "accel-mem"}


def short_boundary(b: str) -> str:
    return SHORT_BOUNDARY.get(b, b)


def _boundary_label(result: Result, b: str) -> str:
    labels = {lv.energy[b].label for lv in result.levels if b in lv.energy}
    return "/".join(sorted(labels))


def level_columns(result: Result) -> list[Column]:
    """Every per-level figure of the summary, one figure per cell, in reading order: load and
    latency, SLO and goodput (with ``--slo``), then power and efficiency per boundary."""
    lvs = result.levels
    cols = [
        Column("verdict", [lv.validity.verdict for lv in lvs], "left", "verdict"),
        Column("ok/fail", [f"{lv.requests.completed}/{lv.requests.failed}" for lv in lvs]),
        Column("out\ntok/s", [F.fmt(lv.throughput.output_tokens_per_s) for lv in lvs]),
        Column("TTFT\np50 ms", [F.fmt(lv.latency.ttft_ms.p50) for lv in lvs]),
        Column("TTFT\np99 ms", [F.fmt(lv.latency.ttft_ms.p99) for lv in lvs]),
        Column("TPOT\np50 ms", [F.fmt(lv.latency.tpot_ms.p50) for lv in lvs]),
    ]
    if has_goodput(result):
        g = [goodput_cells(lv) for lv in lvs]
        bs = {x.boundary for x in g if x.boundary}
        where = f"\n{short_boundary(bs.pop())}" if len(bs) == 1 else ""
        cols += [
            Column("SLO", [x.slo for x in g], "left", "slo"),
            Column("met\nSLO", [x.met_pct for x in g]),
            Column("goodput\ntok/s", [x.goodput_tok_s for x in g]),
            Column("goodput\ntok/s/kW" + where, [x.goodput_per_kw for x in g]),
        ]
    for b in F.result_boundaries(result):
        label = _boundary_label(result, b)
        sb = short_boundary(b)

        def cells(attr: str, b: str = b) -> list[str]:
            return [F.fmt(getattr(lv.energy[b], attr)) if b in lv.energy else F.MISSING for lv in lvs]

        cols.append(Column(f"W\n{sb}\n{label}", cells("avg_power_w"), kind=f"label:{label}"))
        if F.has_per_token(result, b):
            cols += [
                Column(f"tok/s/kW\n{sb}\n{label}", cells("output_tokens_per_s_per_kw"), kind=f"label:{label}"),
                Column(f"J/tok\n{sb}\n{label}", cells("j_per_output_token"), kind=f"label:{label}"),
            ]
        else:  # a part (the HBM rail; the host of a GPU server): its share, no per-token figure
            shares = [part_share(lv, b) for lv in lvs]
            ofs = {o for _, o in shares if o}
            if ofs:
                of = short_boundary(ofs.pop()) if len(ofs) == 1 else "whole"
                cols.append(Column(f"share\n{sb}\nof {of}", [F.fmt_fraction_pct(x) if x is not None else F.MISSING
                                                           for x, _ in shares], kind=f"label:{label}"))
    return cols


def part_share(level: LevelResult, boundary: str) -> tuple[float | None, str | None]:
    """(share, of what) of a part at one level (``results.headline.parts``)."""
    for p in F.parts(level):
        if p.boundary == boundary:
            return p.share, p.of
    return None, None


def part_lines(result: Result) -> list[str]:
    """The parts of each level in words, after the tables: ``c=8: memory (accel-mem) 59.5 W, 22% of
    the accelerator; host 210 W (estimate; not in a measured whole)``, and the metered server lower
    bound where there is one. Nothing for a level without parts."""
    out = []
    for lv in result.levels:
        said = []
        for p in F.parts(lv):
            if p.boundary == "accelerator_memory" and lv.power_split is not None:
                continue  # where the board's watts went has its own line
            lab = lv.energy[p.boundary].label
            txt = f"{p.boundary} {F.fmt(p.avg_power_w)} W" + ("" if lab == "measured" else f" ({lab})")
            if p.share is not None:
                txt += f", {F.fmt_fraction_pct(p.share)} of {p.of}"
            said.append(txt)
        lb = F.server_lower_bound(lv)
        if lb is not None:
            watts, used = lb
            said.append(f"server ≥ {F.fmt(watts)} W ({' + '.join(used)}, a lower bound: fans and PSU losses "
                        "are not metered)")
        if said:
            out.append(f"{short_label(lv)}: parts — " + "; ".join(said))
    return out


# The figures users of `vllm bench serve`, AIPerf and GuideLLM read (issue 25): request rate, the
# achieved load, and every latency as mean, p50, p90, p95, p99. One list for the wide terminal table,
# `wattbench report --json` and the CSV (report/csv.py names its columns from it).
SERVING_LATENCY = ("ttft", "tpot", "itl", "e2e")
SERVING_STATS = ("mean", "p50", "p90", "p95", "p99")


def serving_figures(level: LevelResult) -> dict[str, float | None]:
    """A level's request rate, achieved load and latency statistics, as stored (the last trial's with
    ``--trials``): ``requests_per_s``, ``output_tokens_per_s``, ``total_tokens_per_s``,
    ``achieved_rate_rps`` (open loop), ``mean_in_flight`` (the achieved concurrency), and
    ``<ttft|tpot|itl|e2e>_<mean|p50|p90|p95|p99>_ms``."""
    t, ld = level.throughput, level.load
    out: dict[str, float | None] = {
        "requests_per_s": t.requests_per_s, "output_tokens_per_s": t.output_tokens_per_s,
        "total_tokens_per_s": t.total_tokens_per_s, "achieved_rate_rps": ld.achieved_rate_rps,
        "mean_in_flight": ld.mean_in_flight,
    }
    for kind in SERVING_LATENCY:
        st = getattr(level.latency, f"{kind}_ms")
        for stat in SERVING_STATS:
            out[f"{kind}_{stat}_ms"] = getattr(st, stat)
    return out


def serving_columns(result: Result) -> list[Column]:
    """The wide table's requests and latency (``serving_figures``): req/s, the achieved load (rate, or
    mean in flight for a closed loop), then TTFT, TPOT, ITL and E2E as mean, p50, p90, p95, p99 (ms)."""
    lvs = result.levels
    figs = [serving_figures(lv) for lv in lvs]

    def achieved(lv: LevelResult, f: dict) -> str:
        if lv.load.mode == "rate" and f["achieved_rate_rps"] is not None:
            return f"{F.fmt(f['achieved_rate_rps'])}/s"
        return F.fmt(f["mean_in_flight"])

    cols = [Column("req/s", [F.fmt(f["requests_per_s"]) for f in figs]),
            Column("achieved\nload", [achieved(lv, f) for lv, f in zip(lvs, figs)])]
    for kind in SERVING_LATENCY:
        for stat in SERVING_STATS:
            cols.append(Column(f"{kind.upper()}\n{stat}", [F.fmt(f[f"{kind}_{stat}_ms"]) for f in figs]))
    return cols


def serving_title(result: Result) -> str:
    return "requests and latency (ms), as vllm bench serve, AIPerf and GuideLLM report them" + (
        f" — {last_trial_title(result)}" if any_trials(result) else "")


def trial_columns(result: Result) -> list[Column]:
    """Mean and 95% CI of each headline figure over trials: two columns per figure."""
    lvs = result.levels
    per_level = [{c.name: c for c in trial_cells(lv)} for lv in lvs]
    names = [t for _, t, _ in TRIAL_FIGURES if any(t in d for d in per_level)]
    cols = [Column("trials", [str(trials_n(lv) or F.MISSING) for lv in lvs])]
    for name in names:
        head = name.replace(" ", "\n", 1) if len(name) > 8 else name
        cols.append(Column(f"{head}\nmean", [(d[name].mean if name in d else F.MISSING) for d in per_level]))
        cols.append(Column("95% CI", [d[name].ci if name in d else F.MISSING for d in per_level], kind="ci"))
    return cols
