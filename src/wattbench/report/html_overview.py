"""The first screen of the HTML report: what the run answers, before any detail.

Per run: the verdict and every note once, what ``--optimize``/``--sweep auto`` chose and the best
level under the SLO (``report/summary.py`` words them, as in the terminal and Markdown), the
efficiency–load curve (output tokens/s per kW and joules per output token against concurrency or
rate, per boundary, with p99 TTFT beside them; trial means with their 95% CIs as error bars), the
table of levels and the trials table. Every number is a field of the result.
"""

from __future__ import annotations

from typing import Any

from wattbench.analysis.figures import trial_ci
from wattbench.report import format as F
from wattbench.report import summary as S
from wattbench.report.data import RunData
from wattbench.results.schema import LevelResult, Result

VERDICT_CLASS = {"valid": "ok", "warn": "warn", "invalid": "bad"}


def columns_table(key: list[str], cols: list[S.Column], cls: str) -> str:
    """An HTML table from ``summary.Column``s."""
    from wattbench.report.html_doc import e

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


def _error_bars(levels: list[LevelResult], name: str, boundary: str | None) -> dict | None:
    """Plotly ``error_y`` from the trials' 95% CIs around the stored value (None without trials)."""
    plus, minus, any_ci = [], [], False
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


def _trial_or_value(lv: LevelResult, name: str, boundary: str | None, value: float | None) -> float | None:
    """The trials' mean where the level has trials for the figure, else the stored value."""
    ci = trial_ci(lv, name, boundary)
    return ci.mean if ci is not None else value


def efficiency_curve(doc: Any, run: RunData, best: LevelResult | None) -> None:
    """tok/s per kW, J per output token and p99 TTFT against the load, side by side."""
    from wattbench.report.html_doc import COLORS, ptxt
    from wattbench.report.html_plots import run_energy_reason, slo_thresholds, x_of_levels

    r = run.result
    x, xtitle = x_of_levels(r)
    text = [ptxt(S.short_label(lv)) for lv in r.levels]
    bounds = F.result_boundaries(r)
    data: list[dict] = []
    panels = [("x", "y"), ("x2", "y2"), ("x3", "y3")]
    for i, b in enumerate(bounds):
        labels = "/".join(sorted({lv.energy[b].label for lv in r.levels if b in lv.energy}))
        color = COLORS[i % len(COLORS)]
        for (name, attr, unit), (xa, ya) in zip(
                [("output_tokens_per_s_per_kw", "output_tokens_per_s_per_kw", "tok/s/kW"),
                 ("j_per_output_token", "j_per_output_token", "J/tok")], panels[:2]):
            ys = [_trial_or_value(lv, name, b, getattr(lv.energy[b], attr)) if b in lv.energy else None
                  for lv in r.levels]
            tr = {"type": "scatter", "mode": "lines+markers", "x": x, "y": ys, "text": text,
                  "name": ptxt(f"{b} ({labels})"), "legendgroup": b, "showlegend": xa == "x",
                  "line": {"color": color}, "xaxis": xa, "yaxis": ya,
                  "hovertemplate": "%{text}: %{y:,.3~g} " + unit + "<extra>" + ptxt(b) + "</extra>"}
            eb = _error_bars(r.levels, name, b)
            if eb:
                tr["error_y"] = eb
            data.append(tr)
    ttft = [_trial_or_value(lv, "ttft_p99_ms", None, lv.latency.ttft_ms.p99) for lv in r.levels]
    tr = {"type": "scatter", "mode": "lines+markers", "x": x, "y": ttft, "text": text, "name": "p99 TTFT",
          "line": {"color": "#555", "dash": "dot"}, "xaxis": "x3", "yaxis": "y3",
          "hovertemplate": "%{text}: %{y:,.1f} ms<extra>p99 TTFT</extra>"}
    eb = _error_bars(r.levels, "ttft_p99_ms", None)
    if eb:
        tr["error_y"] = eb
    data.append(tr)
    titles = ["output tokens/s per kW", "J per output token", "p99 TTFT (ms)"]
    layout: dict[str, Any] = {"title": {"text": "Efficiency against load" + (
        "" if bounds else f" (energy unavailable: {run_energy_reason(r)})"), "x": 0.01},
        "legend": {"orientation": "h", "y": -0.25}}
    doms = [(0.0, 0.29), (0.355, 0.645), (0.71, 1.0)]
    shapes = []
    for k, ((xa, ya), dom, title) in enumerate(zip(panels, doms, titles), start=1):
        sx = "" if k == 1 else str(k)
        layout[f"xaxis{sx}"] = {"domain": list(dom), "title": {"text": xtitle}, "anchor": ya}
        layout[f"yaxis{sx}"] = {"title": {"text": title}, "rangemode": "tozero", "anchor": xa}
    slo = slo_thresholds(r)
    if "ttft_ms" in slo:
        shapes.append({"type": "line", "xref": "x3 domain", "yref": "y3", "x0": 0, "x1": 1, "y0": slo["ttft_ms"],
                       "y1": slo["ttft_ms"], "line": {"color": "#d62728", "dash": "dash", "width": 1.5}})
    if best is not None and best in r.levels:
        bx = x[r.levels.index(best)]
        for xa in ("x", "x2", "x3"):
            shapes.append({"type": "line", "xref": xa, "yref": f"{'y' + xa[1:]} domain", "x0": bx, "x1": bx,
                           "y0": 0, "y1": 1, "line": {"color": "#2ca02c", "width": 2}})
    layout["shapes"] = shapes
    doc.plot(data, layout, height=400)
    cap = "Each point a load level; trial means with 95% CI bars where the level ran trials."
    if "ttft_ms" in slo:
        cap += " Red dashed line: the TTFT SLO."
    if best is not None:
        cap += f" Green line: {S.short_label(best)}, the best level under the SLO."
    doc.add(f'<p class="caption">{cap}</p>')


def overview(doc: Any, run: RunData) -> None:
    """The run's first screen: verdict, notes, answer, curve, level table, trials."""
    from wattbench.report.html_doc import e

    r = run.result
    v = r.validity
    cls = VERDICT_CLASS.get(v.verdict, "warn")
    notes = [*S.run_notes(r), *(n for n in run.notes if n not in S.run_notes(r))]
    items = "".join(f"<li>{e(x)}</li>" for x in notes)
    status = "" if r.status == "complete" else f" · status {e(r.status)}" + (
        f": {e(r.status_detail)}" if r.status_detail else "")
    slo = S.slo_text(r)
    doc.add(f'<div class="banner {cls}"><strong>{e(r.run_id)}: {e(v.verdict.upper())}</strong>{status}'
            + (f" · SLO {e(slo)}" if slo else "") + (f"<ul>{items}</ul>" if items else "") + "</div>")
    answers = S.answer_lines(r)
    if answers:
        doc.add('<div class="answer">' + "".join(f"<p>{e(a)}</p>" for a in answers) + "</div>")
    if len(r.levels) == 1:
        doc.add(f'<p class="answer"><span class="headline">{e(F.headline(r.levels[0]))}</span></p>')
    if not r.levels:
        doc.note("no load level was measured")
        return
    best = S.best_under_slo(r)
    efficiency_curve(doc, run, best[0] if best else None)
    key = [S.short_label(lv) for lv in r.levels]
    if S.any_trials(r):
        doc.add(f'<p class="caption">Levels, {e(S.last_trial_title(r))}.</p>')
    doc.add(columns_table(key, S.level_columns(r), "summary"))
    if S.any_trials(r):
        doc.add(f"<h4>{e(S.trials_title(r).capitalize())}</h4>"
                + columns_table(key, S.trial_columns(r), "trials"))
