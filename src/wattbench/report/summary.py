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
    plain_c, plain_r, other = [], [], []
    for lv in lvs:
        label, ld = short_label(lv), lv.load
        if ld.mode == "concurrency" and label == load_label("concurrency", ld.target_concurrency):
            plain_c.append(f"{ld.target_concurrency:g}")
        elif ld.mode == "rate" and ld.target_rate_rps is not None and not ld.max_in_flight \
                and label == load_label("rate", ld.target_rate_rps):
            plain_r.append("inf" if ld.target_rate_rps == float("inf") else f"{ld.target_rate_rps:g}")
        else:
            other.append(label)
    parts = []
    if plain_c:
        parts.append("c=" + ",".join(plain_c))
    if plain_r:
        parts.append("r=" + ",".join(plain_r) + ("" if plain_r == ["inf"] else "/s"))
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
    levels, the figures it biases, its estimated effect and basis, then each level's own text."""
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
            where = levels_text(result, f.levels)
            out.append(f"    {where + ': ' if where else ''}{f.text}")
            if f.basis:
                out.append(f"      basis: {f.basis}")
    for w in result.warnings:
        out.append(f"[warn] {w}")
    for p in result.sensor_problems:
        out.append(f"[note] {p}")
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
            g = goodput_cells_raw(lv)
            return (g[0] if g[0] is not None else -1.0, g[1] if g[1] is not None else -1.0)

        chosen = max(ok, key=key) if ok else None
    if chosen is None:
        return None, f"best under SLO {slo}: no level met it"
    c = goodput_cells(chosen)
    per_kw = f"{c.goodput_per_kw} goodput tok/s/kW ({c.boundary}), " if c.boundary else ""
    return chosen, (f"best under SLO {slo}: {short_label(chosen)} — {per_kw}{c.goodput_tok_s} goodput tok/s, "
                    f"{c.met_pct} of requests met it")


def goodput_cells_raw(level: LevelResult) -> tuple[float | None, float | None]:
    """(goodput tok/s per kW at the headline boundary, goodput tok/s) as stored."""
    gp = level.goodput or {}
    hb = F.headline_boundary(level)
    per_kw = ((gp.get("per_kw") or {}).get(hb[0]) or {}) if hb else {}
    return per_kw.get("output_tokens_per_s_per_kw"), gp.get("output_tokens_per_s")


def answer_level(result: Result) -> tuple[LevelResult, str] | None:
    """The level the run's answer quotes, and why: ``--optimize``'s choice; else the best level
    under the SLO; else, of several levels, the one with the most output tokens per kW at its
    headline boundary among those not ``invalid``; a one-level run's level. None without one."""
    lvs = result.levels
    if not lvs:
        return None
    opt = result.optimize
    if opt is not None and opt.best_value is not None:
        hit = next((lv for lv in lvs if F.level_target_value(lv) == opt.best_value), None)
        if hit is not None:
            return hit, "chosen by --optimize"
    best = best_under_slo(result)
    if best is not None:
        return (best[0], "best under the SLO") if best[0] is not None else None
    if len(lvs) == 1:
        return lvs[0], "the run's level"
    ok = [lv for lv in lvs if lv.validity.verdict != "invalid"]

    def per_kw(lv: LevelResult) -> float:
        hb = F.headline_boundary(lv)
        x = hb[1].output_tokens_per_s_per_kw if hb else None
        return x if x is not None else -1.0

    if not ok or all(per_kw(lv) < 0 for lv in ok):
        return None
    top = max(ok, key=per_kw)
    hb = F.headline_boundary(top)
    return top, f"the most output tokens per kW ({hb[0] if hb else 'no boundary'}) of {len(lvs)} levels"


def answer_lines(result: Result) -> list[str]:
    """What the run answers, first: the level it quotes with its headline figures and why, what a
    search chose (and why), the best level under the SLO; for ``wattbench measure``, what ran and
    each level's own figures from the tool."""
    out = []
    pick = answer_level(result)
    if pick is not None:
        lv, why = pick
        out.append(f"answer: {short_label(lv)} — {F.headline(lv)}" + (
            f" ({why})" if why.startswith("the most") else ""))
    out += search_lines(result)
    chose = result.optimize is not None and result.optimize.best_value is not None
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
            slo = slo_text(result)
            why = f"highest {objective} ({F.fmt(score)})" + (f" meeting {slo}" if slo else "")
            out.append(f"optimize: chose {best} — {why}; {opt.reason} (measured: {tried})")
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
