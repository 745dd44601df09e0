"""The first screen of the HTML report: what the run answers, before any detail.

Per run: the answer as one big figure (``summary.headline``: goodput tok/s per kW of the best level
under the SLO, else output tok/s per kW of the most efficient level, at the headline boundary, the
trials' mean with its CI), its level and verdict; the run's verdict with every note once, collapsed;
what ``--optimize``/``--sweep auto`` chose (``report/summary.py`` words them, as in the terminal and
Markdown); the efficiency–load curve (goodput tok/s per kW under an SLO — the curve to choose a load
by — with output tokens/s per kW and joules per output token against concurrency or rate, per
boundary that contains the work, and p99 TTFT beside them; trial means with their 95% CIs as error
bars), the table of levels and the trials table. Every number is a field of the result.
"""

from __future__ import annotations

from typing import Any

from wattbench.analysis.figures import reported_figures
from wattbench.results.headline import trial_ci
from wattbench.report import format as F
from wattbench.core.numbers import fmt, fmt_uncertain
from wattbench.report import summary as S
from wattbench.report.goodput import has_goodput, slo_text
from wattbench.report.labels import short_label
from wattbench.report.notes import NoteLine, note_lines, verdict_text
from wattbench.report.tables import Column, trial_columns
from wattbench.report.trials import any_trials, last_trial_title, trials_title
from wattbench.report.data import RunData
from wattbench.core.schema import LevelResult, Result
from wattbench.report.html_doc import COLORS, e, ptxt
from wattbench.report.html_plots import by_load, run_energy_reason, slo_thresholds, x_of_levels
from wattbench.report.notes import count_text
from wattbench.report.tables import level_rows

VERDICT_CLASS = {"valid": "ok", "estimate": "est", "warn": "warn", "invalid": "bad"}


def columns_table(key: list[str], cols: list[Column], cls: str) -> str:
    """An HTML table from ``summary.Column``s."""
    head = "<th>level</th>" + "".join(f"<th>{'<br>'.join(e(x) for x in c.header.split(chr(10)))}</th>"
                                      for c in cols)
    rows = []
    for i, label in enumerate(key):
        tds = [f"<td>{e(label)}</td>"]
        for c in cols:
            cls_td = ""
            if c.kind == "verdict":
                cls_td = f' class="{VERDICT_CLASS.get(c.cells[i], "")}"'
            elif c.kind == "slo":
                cls_td = ' class="ok"' if c.cells[i] == "met" else ' class="warn"'
            elif c.justify == "right":
                cls_td = ' class="num"'
            tds.append(f"<td{cls_td}>{e(c.cells[i])}</td>")
        rows.append("<tr>" + "".join(tds) + "</tr>")
    return (f'<div class="scroll"><table class="{e(cls)}"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>')


def _error_bars(levels: list[LevelResult], name: str, boundary: str | None) -> dict[str, Any] | None:
    """Plotly ``error_y`` from the trials' 95% CIs around the stored value (None without trials)."""
    plus: list[float | None] = []
    minus: list[float | None] = []
    any_ci = False
    for lv in levels:
        ci = trial_ci(lv, name, boundary)
        if ci is None:
            plus.append(None)
            minus.append(None)
            continue
        any_ci = True
        plus.append(ci.high - ci.mean)
        minus.append(ci.mean - ci.low)
    if not any_ci:
        return None
    return {"type": "data", "symmetric": False, "array": plus, "arrayminus": minus, "thickness": 1.2, "width": 4}


def efficiency_curve(doc: Any, run: RunData, best: LevelResult | None) -> None:
    """tok/s per kW, J per output token and p99 TTFT against the load, side by side."""
    r = by_load(run.result)  # points joined in load order, not in the order they were measured
    x, xtitle = x_of_levels(r)
    text = [ptxt(short_label(lv)) for lv in r.levels]
    # a part (the HBM rail, the host of a GPU server) has no tokens per kW: its power is elsewhere
    bounds = [b for b in F.result_boundaries(r) if F.has_per_token(r, b)]
    data: list[dict[str, Any]] = []
    panels = [("x", "y"), ("x2", "y2"), ("x3", "y3")]
    h = S.headline(r)
    if has_goodput(r) and h is not None and h.boundary is not None:
        # the SLO-bound curve: tokens per kW of the requests that met every SLO, at the headline boundary
        gb = h.boundary
        ys = [reported_figures(lv, gb)["goodput_per_kw"] if gb in lv.energy else None
              for lv in r.levels]
        tr: dict[str, Any] = {
              "type": "scatter", "mode": "lines+markers", "x": x, "y": ys, "text": text,
              "name": ptxt(f"goodput tok/s per kW, {gb} (met the SLO)"), "legendgroup": "goodput",
              "line": {"color": "#2ca02c", "width": 3}, "marker": {"size": 9}, "xaxis": "x", "yaxis": "y",
              "hovertemplate": "%{text}: %{y:,.3~g} goodput tok/s/kW<extra>" + ptxt(gb) + "</extra>"}
        eb = _error_bars(r.levels, "goodput_per_kw", gb)
        if eb:
            tr["error_y"] = eb
        data.append(tr)
    for i, b in enumerate(bounds):
        labels = "/".join(sorted({lv.energy[b].label for lv in r.levels if b in lv.energy}))
        color = COLORS[i % len(COLORS)]
        for (name, unit), (xa, ya) in zip(
                [("output_tokens_per_s_per_kw", "tok/s/kW"), ("j_per_output_token", "J/tok")], panels[:2]):
            ys = [reported_figures(lv, b)[name] if b in lv.energy else None for lv in r.levels]
            tr = {"type": "scatter", "mode": "lines+markers", "x": x, "y": ys, "text": text,
                  "name": ptxt(f"{b} ({labels})"), "legendgroup": b, "showlegend": xa == "x",
                  "line": {"color": color}, "xaxis": xa, "yaxis": ya,
                  "hovertemplate": "%{text}: %{y:,.3~g} " + unit + "<extra>" + ptxt(b) + "</extra>"}
            eb = _error_bars(r.levels, name, b)
            if eb:
                tr["error_y"] = eb
            data.append(tr)
    if not bounds:  # no energy: two panels, throughput and latency, not two empty thirds
        panels = [("x", "y"), ("x2", "y2")]
        ys = [reported_figures(lv, None)["output_tokens_per_s"] for lv in r.levels]
        data.append({"type": "scatter", "mode": "lines+markers", "x": x, "y": ys, "text": text,
                     "name": "output tokens/s", "line": {"color": COLORS[0]}, "xaxis": "x", "yaxis": "y",
                     "hovertemplate": "%{text}: %{y:,.3~g} tok/s<extra></extra>"})
    tx, ty = panels[-1]
    ttft = [reported_figures(lv, None)["ttft_p99_ms"] for lv in r.levels]
    tr = {"type": "scatter", "mode": "lines+markers", "x": x, "y": ttft, "text": text, "name": "p99 TTFT",
          "line": {"color": "#555", "dash": "dot"}, "xaxis": tx, "yaxis": ty,
          "hovertemplate": "%{text}: %{y:,.1f} ms<extra>p99 TTFT</extra>"}
    eb = _error_bars(r.levels, "ttft_p99_ms", None)
    if eb:
        tr["error_y"] = eb
    data.append(tr)
    titles = [("goodput and output " if has_goodput(r) else "output ") + "tokens/s per kW", "J per output token",
              "p99 TTFT (ms)"] if bounds else ["output tokens/s", "p99 TTFT (ms)"]
    layout: dict[str, Any] = {"title": {"text": "Efficiency against load" + (
        "" if bounds else f" (energy unavailable: {run_energy_reason(r)})"), "x": 0.01},
        "legend": {"orientation": "h", "y": -0.25}}
    doms = [(0.0, 0.29), (0.355, 0.645), (0.71, 1.0)] if bounds else [(0.0, 0.46), (0.54, 1.0)]
    shapes = []
    for k, ((xa, ya), dom, title) in enumerate(zip(panels, doms, titles), start=1):
        sx = "" if k == 1 else str(k)
        layout[f"xaxis{sx}"] = {"domain": list(dom), "title": {"text": xtitle}, "anchor": ya}
        layout[f"yaxis{sx}"] = {"title": {"text": title}, "rangemode": "tozero", "anchor": xa}
    slo = slo_thresholds(r)
    if "ttft_ms" in slo:
        shapes.append({"type": "line", "xref": f"{tx} domain", "yref": ty, "x0": 0, "x1": 1, "y0": slo["ttft_ms"],
                       "y1": slo["ttft_ms"], "line": {"color": "#d62728", "dash": "dash", "width": 1.5}})
    if best is not None and best in r.levels:
        bx = x[r.levels.index(best)]
        for xa, _ in panels:
            shapes.append({"type": "line", "xref": xa, "yref": f"{'y' + xa[1:]} domain", "x0": bx, "x1": bx,
                           "y0": 0, "y1": 1, "line": {"color": "#2ca02c", "width": 2}})
    layout["shapes"] = shapes
    doc.plot(data, layout, height=400)
    cap = "Each point a load level; trial means with 95% CI bars where the level ran trials."
    if has_goodput(r):
        cap += (" Thick green line: goodput per kW, the output tokens/s of the requests that met every SLO per kW"
                " — the curve to choose a load by; the thin lines count every token.")
    if "ttft_ms" in slo:
        cap += " Red dashed line: the TTFT SLO."
    if best is not None:
        cap += f" Green line: {short_label(best)}, the best level under the SLO."
    doc.add(f'<p class="caption">{cap}</p>')


def hero(r: Result) -> str:
    """The first thing on the page: the run's answer as one big figure (``summary.headline``), with
    its boundary, its level and why, its verdict, and the level's headline line beneath."""
    h = S.headline(r)
    if h is None:
        return ""
    cls = VERDICT_CLASS.get(h.verdict, "warn")
    if h.unanswered is not None:  # the run's question has no answer: no level's figure in its place
        return (f'<div class="hero warn"><div class="big">no answer</div><div class="unit">{e(h.unanswered)}</div>'
                f'<div class="where">run verdict <strong class="verdict">{e(r.validity.verdict)}</strong></div></div>')
    if h.boundary is None and not any(lv.energy for lv in r.levels):  # no efficiency answer: say how to get one
        return (f'<div class="hero {VERDICT_CLASS.get(r.validity.verdict, "warn")}"><div class="big">no efficiency answer</div><div class="unit">'
                f'{e(S.NO_ENERGY_ANSWER.split("; ", 1)[1])}</div><div class="where">energy unavailable · '
                f'efficiency verdict <strong class="verdict">{e(r.validity.verdict)}</strong></div></div>')
    if h.boundary is None:
        big, unit = "–", f"energy unavailable: {F.energy_unavailable_reason(h.level)}"
    else:
        u = S.meter_pct(h)  # a declared meter's (or an estimate's) stated ±%, as the answer line says it
        big = fmt_uncertain(h.value, u if h.label == "estimate" else None)  # an estimate at its ±%'s digits
        where = h.boundary if h.label == "measured" else f"{h.boundary}, {h.label}" + (
            f" ±{fmt(u, kind='effect')}%" if u is not None else "")
        unit = f"{h.title} ({where})"
    ci = ""
    if h.ci is not None:
        ci = f'<div class="ci">mean of {h.trials} trials, 95% CI {e(fmt(h.ci[0]))}–{e(fmt(h.ci[1]))}</div>'
        wm = S.with_meter(h)
        if wm is not None:
            ci = (f'<div class="ci">mean of {h.trials} trials, 95% CI {e(fmt(h.ci[0]))}–{e(fmt(h.ci[1]))} from the '
                  f'trials; {e(fmt(wm[1]))}–{e(fmt(wm[2]))} (±{e(fmt(wm[0], kind="effect"))}%) with the meter</div>')
    if h.measurements:  # --optimize's choice: the mean of its measurements, the score it was chosen by
        ci = f'<div class="ci">mean of its {h.measurements} measurements</div>'
    return (f'<div class="hero {cls}"><div class="big">{e(big)}</div><div class="unit">{e(unit)}</div>{ci}'
            f'<div class="where">{e(h.why or short_label(h.level))} · efficiency verdict '
            f'<strong class="verdict">{e(h.verdict)}</strong></div>'
            f'<div class="headline">{e(F.headline_line(h.level))}</div></div>')


NOTE_CLASS = {"invalid": "bad", "warn": "warn", "estimate": "est", "note": "info"}


def notes_block(notes: list[NoteLine], result: Any = None, extra: int = 0) -> str:
    """Every note once — ``summary.note_lines``: one line per distinct finding with its levels in
    numeric order (the one grouping, ``accounting.findings.group_findings``) — grouped by severity,
    the worst first, and collapsed under one line that counts them (open it to read them): the
    run's count (``report.notes.count_text``, the summary's and ``compare``'s), and the ``extra``
    notes the report itself adds (a file it could not read)."""
    if not notes:
        return ""
    order = ("invalid", "warn", "estimate", "note")
    groups = {sev: [n for n in notes if n.severity == sev] for sev in order}
    groups["note"] += [n for n in notes if n.severity not in order]
    counts = ", ".join(f"{len(groups[sev])} {sev}" for sev in order if groups[sev])
    body = ""
    for sev in order:
        if groups[sev]:
            items = "".join(f'<li class="{NOTE_CLASS.get(sev, "")}">{e(n.text)}</li>' for n in groups[sev])
            body += f'<p class="note-head">{e(sev)}</p><ul>{items}</ul>'
    if result is not None:
        head = count_text(result) or "no notes of the run"
        if extra:
            head += f" + {extra} from reading its files"
        return f'<details class="notes"><summary>{e(head)}</summary>{body}</details>'
    return (f'<details class="notes"><summary>{len(notes)} note{"s" if len(notes) != 1 else ""} '
            f"({e(counts)})</summary>{body}</details>")


def overview(doc: Any, run: RunData) -> None:
    """The run's first screen: the answer as one big figure with its verdict, the notes (collapsed),
    the goodput-per-kW curve against load, then the level table and the trials."""
    r = run.result
    v = r.validity
    cls = VERDICT_CLASS.get(v.verdict, "warn")
    lines = note_lines(r)
    said = {n.text for n in lines}
    extra = [NoteLine("note", n) for n in run.notes if n not in said]  # + the reader's notes
    notes = [*lines, *extra]
    status = "" if r.status == "complete" else f" · status {e(r.status)}" + (
        f": {e(r.status_detail)}" if r.status_detail else "")
    slo = slo_text(r)
    doc.add(hero(r))
    doc.add(f'<div class="banner {cls}"><strong>{e(r.run_id)}: {e(v.verdict.upper())}</strong>'
            f" · {e(verdict_text(r))}{status}"
            + (f" · SLO {e(slo)}" if slo else "") + notes_block(notes, r, len(extra)) + "</div>")
    first = S.answer_line(r)  # the hero above says it, big
    answers = [a for a in S.answer_lines(r) if a != first]
    if answers:
        doc.add('<div class="answer">' + "".join(f"<p>{e(a)}</p>" for a in answers) + "</div>")
    if not r.levels:
        doc.note("no load level was measured")
        return
    best = S.best_under_slo(r)
    efficiency_curve(doc, run, best[0] if best else None)
    key = [short_label(lv) for lv in r.levels]
    if any_trials(r):
        doc.add(f'<p class="caption">Levels, {e(last_trial_title(r))}.</p>')

    doc.add(columns_table(*level_rows(r), "summary"))  # each replica's row under its level's total
    if any_trials(r):
        doc.add(f"<h4>{e(trials_title(r).capitalize())}</h4>"
                + columns_table(key, trial_columns(r), "trials"))
