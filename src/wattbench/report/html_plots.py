"""Run-wide plot sections of the HTML report: latency ECDF, throughput and efficiency vs load,
the efficiency-latency trade-off, idle vs dynamic energy, power split and per-request energy.

Every number comes from ``result.json`` / the run's side files; plots are shaped here, not computed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from wattbench.report import format as F
from wattbench.core.numbers import MISSING, fmt
from wattbench.report.labels import short_label
from wattbench.report.data import RunData
from wattbench.report.html_doc import COLORS, ECDF_MAX_POINTS, Doc, e, ptxt, table
from wattbench.report.thin import ecdf_points
from wattbench.core.schema import Result
from wattbench.core.errors import UserError
from wattbench.metrics.request_latency import inter_chunk_gaps_ms, per_request_latencies
from wattbench.metrics.slo import parse_slos, SLO
from wattbench.report import attribution as A

def slo_thresholds(result: Result) -> dict[str, float]:
    """SLO thresholds (ms) by figure name (``ttft_ms``, ``tpot_ms``, ``itl_ms``, ``e2e_ms``), from a
    level's ``goodput.slos`` (what ``metrics.slo.goodput`` stores), else the run's ``config.slo`` read
    with the one ``--slo`` parser. Two SLOs on one figure (``ttft_p50``, ``ttft_p99``): the tighter line."""
    slos: list[SLO] = []
    for lv in result.levels:
        for d in lv.goodput.slos if lv.goodput is not None else []:
            slos.append(SLO(d.metric, d.stat, d.threshold_ms))
        if slos:
            break
    if not slos and result.config.slo:
        try:
            slos = parse_slos(result.config.slo)
        except UserError:
            slos = []
    out: dict[str, float] = {}
    for slo in slos:
        key = f"{slo.metric}_ms"
        out[key] = min(out.get(key, slo.threshold_ms), slo.threshold_ms)
    return out


def by_load(result: Result) -> Result:
    """The run with its levels in load order (concurrency or rate, ascending) for a curve against
    load: an ``--optimize`` search measures 8, 128, 32, 64, and joining its points in that order
    draws a zig-zag. Levels of mixed modes or without a value keep the measurement order."""
    vals = [F.level_target_value(lv) for lv in result.levels]
    if any(v is None for v in vals) or len({lv.load.mode for lv in result.levels}) > 1:
        return result
    order = sorted(range(len(vals)), key=lambda i: (vals[i], i))
    return result.model_copy(update={"levels": [result.levels[i] for i in order]})


def x_of_levels(result: Result) -> tuple[list[Any], str]:
    vals = [F.level_target_value(lv) for lv in result.levels]
    modes = {lv.load.mode for lv in result.levels}
    if all(v is not None and math.isfinite(v) for v in vals) and len(modes) == 1:  # rate inf: no place on an axis
        mode = modes.pop()
        return vals, ("concurrency (requests in flight)" if mode == "concurrency" else "offered rate (requests/s)")
    return [ptxt(lv.label) for lv in result.levels], "load level"


# the four ECDF panels' domains on the page: (left, right) columns, (top, bottom) rows
ECDF_DOMAINS = (((0.0, 0.45), (0.55, 1.0)), ((0.6, 1.0), (0.0, 0.4)))


def latency_ecdf(doc: Doc, run: RunData) -> None:
    slo = slo_thresholds(run.result)
    panels = [("ttft_ms", "TTFT (ms)"), ("tpot_ms", "TPOT (ms)"), ("itl_ms", "inter-chunk latency (ms)"),
              ("e2e_ms", "end-to-end latency (ms)")]
    axes = [("x", "y"), ("x2", "y2"), ("x3", "y3"), ("x4", "y4")]
    data: list[dict[str, Any]] = []
    for k, lv in enumerate(by_load(run.result).levels):  # the legend in load order
        recs = [r for r in run.level_requests(lv.index) if r.ok and not r.warmup]
        per = [per_request_latencies(r) for r in recs]
        vals: dict[str, Sequence[float | None]] = {
            "ttft_ms": [p["ttft_ms"] for p in per],
            "tpot_ms": [p["tpot_ms"] for p in per],
            "itl_ms": [g for r in recs for g in inter_chunk_gaps_ms(r)],
            "e2e_ms": [p["e2e_ms"] for p in per],
        }
        color = COLORS[k % len(COLORS)]
        for (key, _), (xa, ya) in zip(panels, axes):
            x, y = ecdf_points(vals[key], ECDF_MAX_POINTS)
            if x.size == 0:
                continue
            data.append({"type": "scatter", "mode": "lines", "line": {"shape": "hv", "color": color}, "x": x, "y": y,
                         "name": ptxt(lv.label), "legendgroup": f"l{k}", "showlegend": key == "ttft_ms",
                         "xaxis": xa, "yaxis": ya, "hovertemplate": "%{x:.1f} ms: %{y:.1%}<extra>" + ptxt(lv.label)
                         + "</extra>"})
    if not data:
        doc.note("no completed requests: no latency distributions")
        return
    no_chunks = not any(r.chunk_ns for lv in run.result.levels for r in run.level_requests(lv.index))
    if no_chunks:
        doc.note("inter-chunk latency needs every chunk's arrival stamp (requests.jsonl written without "
                 "--keep-chunks): run with --keep-chunks to plot it")
    layout: dict[str, Any] = {"title": {"text": "Latency distributions (ECDF per level)", "x": 0.01}}
    if no_chunks:  # the empty quadrant says why it is empty, where the eye looks for the curve (placed on
        # the page: an axis without a trace is not drawn, so its "domain" cannot place a label)
        layout["annotations"] = [{"text": "inter-chunk latency: no curve, as requests.jsonl keeps no chunk "
                                          "stamps<br>(run with --keep-chunks to plot it; its percentiles are "
                                          "in the level tables)", "xref": "paper", "yref": "paper",
                                  "x": ECDF_DOMAINS[0][0][1] / 2, "y": ECDF_DOMAINS[1][1][1] / 2,
                                  "xanchor": "center", "yanchor": "middle", "showarrow": False,
                                  "font": {"color": "#666", "size": 12}}]
    shapes = []
    for i, ((key, title), (xa, ya)) in enumerate(zip(panels, axes), start=1):
        sx = "" if i == 1 else str(i)
        xd, yd = ECDF_DOMAINS[0][(i - 1) % 2], ECDF_DOMAINS[1][(i - 1) // 2]
        layout[f"xaxis{sx}"] = {"title": {"text": title}, "rangemode": "tozero", "domain": list(xd), "anchor": ya}
        layout[f"yaxis{sx}"] = {"title": {"text": "fraction of requests"}, "range": [0, 1.02], "tickformat": ".0%",
                                "domain": list(yd), "anchor": xa}
        if key in slo:
            shapes.append({"type": "line", "xref": xa, "yref": f"{ya} domain", "x0": slo[key], "x1": slo[key], "y0": 0,
                           "y1": 1, "line": {"color": "#d62728", "dash": "dash", "width": 1.5}})
    layout["shapes"] = shapes
    doc.plot(data, layout, height=640)
    if slo:
        doc.add('<p class="caption">Red dashed lines: SLO thresholds '
                + e(", ".join(f"{k} ≤ {fmt(v)}" for k, v in slo.items())) + ".</p>")


def throughput_vs_load(doc: Doc, run: RunData) -> None:
    r = by_load(run.result)
    x, xtitle = x_of_levels(r)
    text = [ptxt(lv.label) for lv in r.levels]
    data: list[dict[str, Any]] = [{"type": "scatter", "mode": "lines+markers", "x": x, "y": [lv.throughput.output_tokens_per_s for lv in r.levels],
             "text": text, "name": "output tokens/s", "hovertemplate": "%{text}: %{y:,.0f} tok/s<extra></extra>"}]
    doc.plot(data, {"title": {"text": "Output throughput vs load", "x": 0.01},
                    "xaxis": {"title": {"text": xtitle}}, "yaxis": {"title": {"text": "output tokens/s"},
                                                                    "rangemode": "tozero"}}, height=380)
    bounds = [b for b in F.result_boundaries(r) if F.has_per_token(r, b)]  # no tokens per kW of a part
    if not bounds:
        doc.unavailable("tokens/s per kW vs load", run_energy_reason(r))
        return
    data = []
    for i, b in enumerate(bounds):
        ys = [lv.energy[b].output_tokens_per_s_per_kw if b in lv.energy else None for lv in r.levels]
        labels = {lv.energy[b].label for lv in r.levels if b in lv.energy}
        data.append({"type": "scatter", "mode": "lines+markers", "x": x, "y": ys, "text": text,
                     "name": ptxt(f"{b} ({'/'.join(sorted(labels))})"), "line": {"color": COLORS[i % len(COLORS)]},
                     "hovertemplate": "%{text}: %{y:,.0f} tok/s/kW<extra>" + ptxt(b) + "</extra>"})
    doc.plot(data, {"title": {"text": "Output tokens/s per kW vs load, per power boundary", "x": 0.01},
                    "xaxis": {"title": {"text": xtitle}},
                    "yaxis": {"title": {"text": "output tokens/s per kW"}, "rangemode": "tozero"}}, height=380)


def run_energy_reason(r: Result) -> str:
    reasons = sorted({F.energy_unavailable_reason(lv) for lv in r.levels if not lv.energy})
    return "; ".join(reasons) or "no levels"


def pareto(doc: Doc, run: RunData) -> None:
    r = by_load(run.result)
    bounds = [b for b in F.result_boundaries(r) if F.has_per_token(r, b)]  # no tokens per kW of a part
    if not bounds:
        doc.unavailable("efficiency–latency trade-off", run_energy_reason(r))
        return
    slo = slo_thresholds(r)
    panels = [("ttft_ms", "p99", "p99 TTFT (ms)"), ("tpot_ms", "p99", "p99 TPOT (ms)")]
    data = []
    for i, b in enumerate(bounds):
        for j, (key, q, _) in enumerate(panels):
            pts = [(getattr(getattr(lv.latency, key), q), lv.energy[b].output_tokens_per_s_per_kw, lv.label)
                   for lv in r.levels if b in lv.energy]
            data.append({"type": "scatter", "mode": "lines+markers+text", "textposition": "top center",
                         "x": [p[0] for p in pts], "y": [p[1] for p in pts], "text": [ptxt(p[2]) for p in pts],
                         "textfont": {"size": 9}, "name": ptxt(b), "legendgroup": b, "showlegend": j == 0,
                         "line": {"color": COLORS[i % len(COLORS)]}, "xaxis": "x" if j == 0 else "x2",
                         "yaxis": "y" if j == 0 else "y2",
                         "hovertemplate": "%{text}<br>%{x:.1f} ms, %{y:,.0f} tok/s/kW<extra>" + ptxt(b) + "</extra>"})
    layout: dict[str, Any] = {"title": {"text": "Efficiency vs latency (each point a load level, in load order)", "x": 0.01},
                              "xaxis": {"domain": [0, 0.47], "title": {"text": panels[0][2]}, "rangemode": "tozero"},
                              "xaxis2": {"domain": [0.53, 1], "title": {"text": panels[1][2]}, "rangemode": "tozero"},
                              "yaxis": {"title": {"text": "output tokens/s per kW"}, "rangemode": "tozero"},
                              "yaxis2": {"anchor": "x2", "rangemode": "tozero"}}
    shapes = []
    for j, (key, _, _) in enumerate(panels):
        if key in slo:
            xa, ya = ("x", "y") if j == 0 else ("x2", "y2")
            shapes.append({"type": "line", "xref": xa, "yref": f"{ya} domain", "x0": slo[key], "x1": slo[key],
                           "y0": 0, "y1": 1, "line": {"color": "#d62728", "dash": "dash", "width": 1.5}})
    layout["shapes"] = shapes
    doc.plot(data, layout, height=440)
    rows = []
    for lv in r.levels:
        gp = lv.goodput
        if gp is None:
            continue
        for name, chk in gp.level.items():
            rows.append((short_label(lv), name, fmt(chk.observed_ms), fmt(chk.threshold_ms),
                         "met" if chk.met else "missed",
                         f"{gp.per_slo.get(name, MISSING)} of {gp.total_requests}"))
    if rows:
        doc.add("<h4>SLO per level</h4>" + table(
            ["level", "SLO", "level figure ms", "bound ms", "held", "requests meeting it"], rows))


def idle_dynamic(doc: Doc, run: RunData) -> None:
    r = run.result
    bounds = F.result_boundaries(r)
    if not bounds:
        doc.unavailable("idle vs dynamic energy", run_energy_reason(r))
        return
    cats_level, cats_b, idle, dyn, gross_only = [], [], [], [], []
    for lv in r.levels:
        for b in bounds:
            be = lv.energy.get(b)
            if be is None:
                continue
            cats_level.append(ptxt(lv.label))
            cats_b.append(ptxt(f"{b} ({be.label})"))
            split = be.idle_energy_j is not None and be.dynamic_energy_j is not None
            idle.append(be.idle_energy_j if split else None)
            dyn.append(be.dynamic_energy_j if split else None)
            gross_only.append(None if split else be.energy_j)
    x = [cats_level, cats_b]
    data = [
        {"type": "bar", "x": x, "y": idle, "name": "idle energy (J)", "marker": {"color": "#bbbbbb"}},
        {"type": "bar", "x": x, "y": dyn, "name": "dynamic energy (J)", "marker": {"color": "#ff7f0e"}},
    ]
    if any(g is not None for g in gross_only):
        data.append({"type": "bar", "x": x, "y": gross_only, "name": "energy, no idle baseline (J)",
                     "marker": {"color": "#1f77b4"}})
    doc.plot(data, {"title": {"text": "Idle vs dynamic energy per boundary (full window)", "x": 0.01},
                    "barmode": "stack", "yaxis": {"title": {"text": "energy (J)"}}}, height=420)


def power_split(doc: Doc, run: RunData) -> None:
    """Memory vs the rest of the board, idle vs dynamic, stacked per level (accounting/split.py)."""
    levels = [lv for lv in run.result.levels if lv.power_split is not None]
    if not levels:
        return  # the board reports no memory power: nothing to show (the energy table says which boundaries exist)
    x = [ptxt(lv.label) for lv in levels]
    splits = [lv.power_split for lv in levels if lv.power_split is not None]  # one per level
    parts = [("memory", "idle", "#9ecae1"), ("memory", "dynamic", "#3182bd"),
             ("rest", "idle", "#fdd0a2"), ("rest", "dynamic", "#e6550d")]
    data: list[dict[str, Any]] = []
    for part, kind, color in parts:
        ys = [getattr(sp.parts[part], f"{kind}_power_w") for sp in splits]
        data.append({"type": "bar", "x": x, "y": ys, "name": f"{part} {kind} (W)", "marker": {"color": color}})
    if any(sp.parts["memory"].idle_power_w is None for sp in splits):
        data = [{"type": "bar", "x": x, "y": [sp.parts[p].avg_power_w for sp in splits],
                 "name": f"{p} (W)", "marker": {"color": c}} for p, c in (("memory", "#3182bd"), ("rest", "#e6550d"))]
    doc.plot(data, {"title": {"text": "Where the board's watts go: memory (HBM) vs the rest, idle vs dynamic "
                              "(average power over the full window)", "x": 0.01},
                    "barmode": "stack", "yaxis": {"title": {"text": "power (W)"}}}, height=400)


def per_request_energy(doc: Doc, run: RunData) -> None:
    """Energy per tenant / tag / model (estimates) and carbon: report/attribution.py arranges them."""
    r = run.result
    split = A.prefill_decode_lines(r)
    if split:
        doc.add('<h3 id="prefill-decode">Prefill vs decode energy</h3>')
        for line in split:
            doc.note(line)
    headers, rows = A.attribution_table(r)
    lines = A.method_lines(r)
    if rows or lines:
        doc.add('<h3 id="energy-per-request">Energy per request, tenant and model (estimates)</h3>')
        for line in lines:
            doc.note(line)
        if rows:
            doc.add(table(headers, rows, "attribution"))
            doc.plot(A.attribution_bars(r), {"title": {"text": "Energy by group per level (estimate)", "x": 0.01},
                                             "barmode": "stack", "yaxis": {"title": {"text": "energy (J)"}}})
    headers, rows = A.carbon_table(r)
    if rows:
        c = r.carbon
        src = (f"{c.g_per_kwh if c else None} gCO2e/kWh" if c is not None and c.source == "constant"
               else f"series {c.source if c else None}")
        doc.add('<h3 id="carbon">Carbon</h3>')
        doc.note(f"grid intensity: {src} (energy-weighted over each window), PUE {c.pue if c is not None else 1.0}")
        doc.add(table(headers, rows, "carbon"))


