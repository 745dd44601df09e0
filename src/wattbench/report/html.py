"""One self-contained, interactive HTML report for one or more runs.

The file opens offline: plotly.js is inlined once — the partial bundle ``plotly.js-basic``
(scatter and bar traces, 1.2 MB; ``report/assets/README.md`` says where it came from) — no CDN,
no web fonts. Only those trace types may be drawn here. Every number shown comes from ``result.json``; plots are shaped (thinned, sorted)
but not computed here, and the timeline's tokens/s and in-flight series come from
``wattbench.metrics.timeline``.

Escaping: text from prompts, responses, labels, server names, tags and config values goes into
HTML through ``html.escape``; text inside plot JSON is HTML-escaped too (plotly renders entities
as characters, so ``<b>`` in a label shows as ``<b>`` instead of turning into markup), and the
JSON embedded in ``<script type="application/json">`` has ``<``, ``>``, ``&``, U+2028 and U+2029
written as ``\\uXXXX``, so no string can end the script element or open a comment.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from wattbench.report import format as F
from wattbench.report import summary as S
from wattbench.report.data import RunData
from wattbench.report.thin import DEFAULT_MAX_POINTS, ecdf_points, thin_series
from wattbench.results.schema import BoundaryEnergy, LevelResult, Result
from wattbench.telemetry.base import BOUNDARIES

REPORT_FILE = "report.html"
TIMELINE_MAX_POINTS = DEFAULT_MAX_POINTS  # per trace, after min/max thinning
ECDF_MAX_POINTS = 1500  # per trace
MAX_TIMELINE_BUCKETS = 2000
PLOT_DECIMALS = 4  # tokens/s buckets per level
PLOT_CONFIG = {"displaylogo": False, "responsive": True, "scrollZoom": False}
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#7f7f7f"]
VERDICT_CLASS = {"valid": "ok", "warn": "warn", "invalid": "bad"}

_JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_JSON_ESCAPE_RE = re.compile("[<>&\u2028\u2029]")


def e(value: Any) -> str:
    """Any value as escaped HTML text."""
    return html.escape("" if value is None else str(value), quote=True)


def ptxt(value: Any) -> str:
    """Text for a plotly label/legend/hover: entities so plotly shows the characters, not markup."""
    return html.escape("" if value is None else str(value), quote=False)


def script_json(obj: Any) -> str:
    """JSON safe to place inside a ``<script>`` element (no ``</script>``, ``<!--`` or ``&``)."""
    text = json.dumps(obj, ensure_ascii=False, allow_nan=False, separators=(",", ":"), default=_json_default)
    return _JSON_ESCAPE_RE.sub(lambda m: _JSON_ESCAPES[m.group(0)], text)


def _json_default(o: Any) -> Any:
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


def _clean(v: Any) -> Any:
    """NaN/inf -> None (JSON has no NaN); numpy -> lists; recursive.

    Float arrays (plot series) are rounded to ``PLOT_DECIMALS`` places: 0.1 ms on time axes,
    0.0001 W on power, far below what a plot shows, and it halves the size of long reports.
    """
    if isinstance(v, np.ndarray):
        if v.dtype.kind == "f":
            r = np.round(v.astype(float), PLOT_DECIMALS)
            return [None if not np.isfinite(x) else float(x) for x in r]
        return v.tolist()
    if isinstance(v, float):
        return v if np.isfinite(v) else None
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    if isinstance(v, np.generic):
        return _clean(v.item())
    return v


class _Doc:
    """Collects HTML parts and numbered plot containers."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.n_plots = 0

    def add(self, s: str) -> None:
        self.parts.append(s)

    def plot(self, data: list[dict], layout: dict, height: int = 420) -> None:
        self.n_plots += 1
        pid = f"plot-{self.n_plots}"
        base = {
            "height": height,
            "margin": {"l": 70, "r": 30, "t": 50, "b": 60},
            "font": {"family": "system-ui, -apple-system, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif", "size": 12},
            "hovermode": "closest",
            "legend": {"orientation": "h", "y": -0.18},
            "template": None,
            "plot_bgcolor": "#fafafa",
        }
        base.update(layout)
        unknown = {t.get("type", "scatter") for t in data} - TRACE_TYPES
        if unknown:  # the inlined partial bundle would draw nothing for them
            raise ValueError(f"trace types {sorted(unknown)} are not in the report's plotly bundle")
        payload = {"data": _clean(data), "layout": _clean(base)}
        self.add(f'<div class="plot" id="{pid}"></div>')
        self.add(f'<script type="application/json" class="plot-data" data-target="{pid}">{script_json(payload)}</script>')

    def unavailable(self, what: str, reason: str) -> None:
        self.add(f'<p class="unavailable">{e(what)}: energy unavailable: {e(reason)}</p>')

    def note(self, text: str) -> None:
        self.add(f'<p class="note">{e(text)}</p>')


# ---------------------------------------------------------------- tables


def _table(headers: list[str], rows: Iterable[Iterable[Any]], cls: str = "") -> str:
    head = "".join(f"<th>{e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{e(cls)}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _kv_table(items: Iterable[tuple[str, Any]]) -> str:
    rows = []
    for k, v in items:
        if isinstance(v, (dict, list)):
            v = json.dumps(v, ensure_ascii=False, sort_keys=True, default=str)
        rows.append((k, F.MISSING if v is None or v == "" else v))
    return _table(["field", "value"], rows, "kv")


def _level_summary_table(result: Result) -> str:
    headers = ["level", "verdict", "target", "completed", "failed", "out tok/s", "req/s", "duration s",
               "TTFT p50 ms", "TTFT p99 ms", "TPOT p50 ms", "TPOT p99 ms", "ITL p99 ms", "E2E p99 ms", "headline"]
    rows = []
    for lv in result.levels:
        L = lv.latency
        rows.append([lv.label, lv.validity.verdict, F.level_target(lv), lv.requests.completed, lv.requests.failed,
                     F.fmt(lv.throughput.output_tokens_per_s), F.fmt(lv.throughput.requests_per_s),
                     F.fmt(lv.throughput.duration_s), F.fmt(L.ttft_ms.p50), F.fmt(L.ttft_ms.p99), F.fmt(L.tpot_ms.p50),
                     F.fmt(L.tpot_ms.p99), F.fmt(L.itl_ms.p99), F.fmt(L.e2e_ms.p99), F.headline(lv)])
    return _table(headers, rows, "summary")


def _energy_table(energy: dict[str, BoundaryEnergy]) -> str:
    headers = ["boundary", "label", "method", "energy J", "avg W", "p99 W", "max W", "idle W", "dynamic J",
               "J/out tok", "out tok/s/kW", "out tok/kWh", "cost/M out tok", "± %", "coverage", "largest gap s", "notes"]
    rows = []
    for b in F.boundary_order(energy):
        be = energy[b]
        rows.append([b, be.label, be.method, F.fmt(be.energy_j), F.fmt(be.avg_power_w), F.fmt(be.p99_power_w),
                     F.fmt(be.max_power_w), F.fmt(be.idle_power_w), F.fmt(be.dynamic_energy_j),
                     F.fmt(be.j_per_output_token), F.fmt(be.output_tokens_per_s_per_kw),
                     F.fmt(be.output_tokens_per_kwh), F.fmt(be.cost_per_million_output_tokens),
                     F.fmt(be.uncertainty_pct), F.fmt_fraction_pct(be.coverage), F.fmt(be.largest_gap_s),
                     "; ".join(be.notes)])
    return _table(headers, rows, "energy")


# ---------------------------------------------------------------- validity


# ---------------------------------------------------------------- plots


def _slo_thresholds(result: Result) -> dict[str, float]:
    """SLO thresholds (ms) by figure name (``ttft_ms``, ``tpot_ms``, ``itl_ms``, ``e2e_ms``), from a
    level's ``goodput["slos"]`` (what ``metrics.slo.goodput`` stores), else ``config["slo"]`` read
    with the one ``--slo`` parser. Two SLOs on one figure (``ttft_p50``, ``ttft_p99``): the tighter line."""
    from wattbench.errors import UserError
    from wattbench.metrics.slo import SLO, parse_slos

    slos: list[SLO] = []
    for lv in result.levels:
        for d in (lv.goodput or {}).get("slos") or []:
            if isinstance(d, dict) and isinstance(d.get("threshold_ms"), (int, float)):
                slos.append(SLO(str(d.get("metric")), str(d.get("stat")), float(d["threshold_ms"])))
        if slos:
            break
    if not slos and isinstance(result.config.get("slo"), str):
        try:
            slos = parse_slos(result.config["slo"])
        except UserError:
            slos = []
    out: dict[str, float] = {}
    for slo in slos:
        key = f"{slo.metric}_ms"
        out[key] = min(out.get(key, slo.threshold_ms), slo.threshold_ms)
    return out


def _x_of_levels(result: Result) -> tuple[list[Any], str]:
    vals = [F.level_target_value(lv) for lv in result.levels]
    modes = {lv.load.mode for lv in result.levels}
    if all(v is not None for v in vals) and len(modes) == 1:
        mode = modes.pop()
        return vals, ("concurrency (requests in flight)" if mode == "concurrency" else "offered rate (requests/s)")
    return [ptxt(lv.label) for lv in result.levels], "load level"


def _classify_series(name: str) -> str | None:
    """Which timeline row a scraped server series belongs to, from its name."""
    n = name.split("{", 1)[0].lower()
    if "cache_usage" in n or "token_usage" in n or "kv_cache" in n or "cache_usage_perc" in n:
        return "kv"
    if "waiting" in n or "queue_req" in n or n.endswith("queue_size"):
        return "waiting"
    if "running" in n or "batch_current_size" in n:
        return "running"
    return None


def _window_of(run: RunData, lv: LevelResult, recs) -> tuple[int, int] | None:
    if lv.window is not None:
        return lv.window.start_ns, lv.window.end_ns
    if recs:
        ends = [r.end_ns or r.last_token_ns or r.sent_ns for r in recs]
        return min(r.sent_ns for r in recs), max(ends)
    return None


def _timeline(doc: _Doc, run: RunData, lv: LevelResult, color_of: dict[str, str]) -> None:
    from wattbench.metrics.timeline import counter_power_w, in_flight_steps, output_tokens_per_s_buckets

    recs = run.level_requests(lv.index)
    win = _window_of(run, lv, recs)
    if win is None:
        doc.note(f"{lv.label}: no window and no requests; no timeline")
        return
    s, end = win
    pad = max(int(2e9), (end - s) // 20)
    lo, hi = s - pad, end + pad
    t0 = run.t0_ns

    def xs(t: np.ndarray) -> np.ndarray:
        return (np.asarray(t, dtype=np.int64) - t0) / 1e9

    data: list[dict] = []
    tel = run.telemetry
    have_power: set[tuple[str | None, str]] = set()
    chans = list(tel.channels.values())
    for ch in chans:
        if ch.kind == "power":
            have_power.add((ch.boundary, ch.device))
    n_power = 0
    for ch in sorted(chans, key=lambda c: (BOUNDARIES.index(c.boundary) if c.boundary in BOUNDARIES else 99, c.id)):
        t, v = tel.series(ch.id)
        if not t:
            continue
        ta, va = np.asarray(t, dtype=np.int64), np.asarray(v, dtype=float)
        order = np.argsort(ta, kind="stable")
        ta, va = ta[order], va[order]
        m = (ta >= lo) & (ta <= hi)
        if ch.kind == "power":
            ta, va = ta[m], va[m]
            how = ch.quantity or "power"
        elif ch.kind == "counter" and (ch.boundary, ch.device) not in have_power:
            ta, va = counter_power_w(ta[m], va[m], max_value=ch.max_value)
            how = "from energy counter"
        else:
            continue
        if ta.size == 0:
            continue
        ta, va = thin_series(ta, va, TIMELINE_MAX_POINTS)
        label = f"{ch.boundary or 'unbounded'} · {ch.id} ({ch.method}, {how})"
        data.append({"type": "scatter", "mode": "lines", "x": xs(ta), "y": va,
                     "name": ptxt(label), "legendgroup": "power",
                     "line": {"width": 1.3, "color": color_of.setdefault(ch.id, COLORS[len(color_of) % len(COLORS)])},
                     "xaxis": "x", "yaxis": "y", "hovertemplate": "%{y:.1f} W<extra>" + ptxt(ch.id) + "</extra>"})
        n_power += 1
    for b, info in run.result.idle.items():
        pw = info.get("power_w") if isinstance(info, dict) else None
        if isinstance(pw, (int, float)):
            data.append({"type": "scatter", "mode": "lines", "x": [xs(np.array([lo]))[0], xs(np.array([hi]))[0]],
                         "y": [pw, pw], "name": ptxt(f"idle {b} ({F.fmt(pw)} W)"), "legendgroup": "power",
                         "line": {"dash": "dot", "width": 1, "color": "#888"}, "xaxis": "x", "yaxis": "y"})
    # requests in flight (client) and server running / waiting / KV cache
    it, ic = in_flight_steps(recs)
    if it.size:
        it, ic = thin_series(it, ic, TIMELINE_MAX_POINTS)
        data.append({"type": "scatter", "mode": "lines", "line": {"shape": "hv", "width": 1.3, "color": "#444"},
                     "x": xs(it), "y": ic, "name": "client: requests in flight", "xaxis": "x", "yaxis": "y2"})
    n_server = 0
    n_kv = 0
    for name, (st, sv) in sorted(run.server_timeline.items()):
        kind = _classify_series(name)
        if kind is None:
            continue
        m = (st >= lo) & (st <= hi)
        tt, vv = st[m], sv[m]
        if tt.size == 0:
            continue
        if kind == "kv" and vv.size and np.nanmax(vv) <= 1.0:
            vv = vv * 100.0  # fraction 0..1 -> percent (display unit only)
        tt, vv = thin_series(tt, vv, TIMELINE_MAX_POINTS)
        axis = "y3" if kind == "kv" else "y2"
        dash = {"running": "solid", "waiting": "dash", "kv": "solid"}[kind]
        data.append({"type": "scatter", "mode": "lines", "line": {"shape": "hv", "width": 1.2, "dash": dash},
                     "x": xs(tt), "y": vv, "name": ptxt(f"server: {name}"), "xaxis": "x", "yaxis": axis})
        n_kv += kind == "kv"
        n_server += kind != "kv"
    bucket_s = max(1.0, (hi - lo) / 1e9 / MAX_TIMELINE_BUCKETS)
    bt, tps = output_tokens_per_s_buckets(recs, lo, hi, bucket_s)
    if bt.size:
        data.append({"type": "scatter", "mode": "lines", "line": {"shape": "hv", "width": 1.3, "color": "#2ca02c"},
                     "x": xs(bt), "y": tps, "name": ptxt(f"output tokens/s ({bucket_s:g} s buckets)"),
                     "xaxis": "x", "yaxis": "y4"})
    domains = [(0.74, 1.0), (0.49, 0.70), (0.27, 0.45), (0.0, 0.23)]
    titles = ["power (W)", "requests", "KV cache (%)", "output tokens/s"]
    layout: dict[str, Any] = {
        "title": {"text": ptxt(f"{lv.label}: timeline"), "x": 0.01},
        "xaxis": {"anchor": "y4", "title": {"text": "time since run start (s)"}, "showgrid": True},
        "hovermode": "x unified",
        "legend": {"orientation": "h", "y": -0.12},
    }
    for i, (dom, title) in enumerate(zip(domains, titles), start=1):
        key = "yaxis" if i == 1 else f"yaxis{i}"
        layout[key] = {"domain": list(dom), "title": {"text": title}, "rangemode": "tozero", "anchor": "x"}
    annotations = []
    if n_power == 0:
        reason = F.energy_unavailable_reason(lv) if not lv.energy else "no power samples in telemetry.jsonl"
        annotations.append({"text": ptxt(f"energy unavailable: {reason}"), "xref": "paper", "yref": "y domain",
                            "x": 0.5, "y": 0.5, "showarrow": False})
    if n_server == 0:
        annotations.append({"text": "no server metrics scraped", "xref": "paper", "yref": "y2 domain", "x": 0.98,
                            "y": 0.95, "showarrow": False, "font": {"color": "#888"}})
    if n_kv == 0:
        annotations.append({"text": "no KV-cache metric scraped", "xref": "paper", "yref": "y3 domain", "x": 0.5,
                            "y": 0.5, "showarrow": False, "font": {"color": "#888"}})
    layout["annotations"] = annotations
    shapes = []
    if lv.steady_window is not None:
        shapes.append({"type": "rect", "xref": "x", "yref": "paper", "x0": xs(np.array([lv.steady_window.start_ns]))[0],
                       "x1": xs(np.array([lv.steady_window.end_ns]))[0], "y0": 0, "y1": 1,
                       "fillcolor": "rgba(44,160,44,0.07)", "line": {"width": 0}, "layer": "below"})
    for t in (s, end):
        x = xs(np.array([t]))[0]
        shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": x, "x1": x, "y0": 0, "y1": 1,
                       "line": {"color": "#999", "width": 1, "dash": "dot"}})
    layout["shapes"] = shapes
    doc.plot(data, layout, height=820)
    doc.add('<p class="caption">Dotted verticals: the level\'s measurement window; green band: steady state. '
            "Power is drawn per sensor channel (min/max-preserving thinning); tokens/s spreads each request's "
            "output tokens over its stream chunks.</p>")


def _latency_ecdf(doc: _Doc, run: RunData) -> None:
    from wattbench.metrics.request_latency import inter_chunk_gaps_ms, per_request_latencies

    slo = _slo_thresholds(run.result)
    panels = [("ttft_ms", "TTFT (ms)"), ("tpot_ms", "TPOT (ms)"), ("itl_ms", "inter-chunk latency (ms)"),
              ("e2e_ms", "end-to-end latency (ms)")]
    axes = [("x", "y"), ("x2", "y2"), ("x3", "y3"), ("x4", "y4")]
    data: list[dict] = []
    for k, lv in enumerate(run.result.levels):
        recs = [r for r in run.level_requests(lv.index) if r.ok and not r.warmup]
        per = [per_request_latencies(r) for r in recs]
        vals = {
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
    layout: dict[str, Any] = {"title": {"text": "Latency distributions (ECDF per level)", "x": 0.01},
                              "grid": {"rows": 2, "columns": 2, "pattern": "independent"}}
    shapes = []
    for i, ((key, title), (xa, ya)) in enumerate(zip(panels, axes), start=1):
        sx = "" if i == 1 else str(i)
        layout[f"xaxis{sx}"] = {"title": {"text": title}, "rangemode": "tozero"}
        layout[f"yaxis{sx}"] = {"title": {"text": "fraction of requests"}, "range": [0, 1.02], "tickformat": ".0%"}
        if key in slo:
            shapes.append({"type": "line", "xref": xa, "yref": f"{ya} domain", "x0": slo[key], "x1": slo[key], "y0": 0,
                           "y1": 1, "line": {"color": "#d62728", "dash": "dash", "width": 1.5}})
    layout["shapes"] = shapes
    doc.plot(data, layout, height=640)
    if slo:
        doc.add('<p class="caption">Red dashed lines: SLO thresholds '
                + e(", ".join(f"{k} ≤ {F.fmt(v)}" for k, v in slo.items())) + ".</p>")


def _throughput_vs_load(doc: _Doc, run: RunData) -> None:
    r = run.result
    x, xtitle = _x_of_levels(r)
    text = [ptxt(lv.label) for lv in r.levels]
    data = [{"type": "scatter", "mode": "lines+markers", "x": x, "y": [lv.throughput.output_tokens_per_s for lv in r.levels],
             "text": text, "name": "output tokens/s", "hovertemplate": "%{text}: %{y:,.0f} tok/s<extra></extra>"}]
    doc.plot(data, {"title": {"text": "Output throughput vs load", "x": 0.01},
                    "xaxis": {"title": {"text": xtitle}}, "yaxis": {"title": {"text": "output tokens/s"},
                                                                    "rangemode": "tozero"}}, height=380)
    bounds = F.result_boundaries(r)
    if not bounds:
        doc.unavailable("tokens/s per kW vs load", _run_energy_reason(r))
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


def _run_energy_reason(r: Result) -> str:
    reasons = sorted({F.energy_unavailable_reason(lv) for lv in r.levels if not lv.energy})
    return "; ".join(reasons) or "no levels"


def _pareto(doc: _Doc, run: RunData) -> None:
    r = run.result
    bounds = F.result_boundaries(r)
    if not bounds:
        doc.unavailable("efficiency–latency trade-off", _run_energy_reason(r))
        return
    slo = _slo_thresholds(r)
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
        gp = lv.goodput or {}
        for name, chk in (gp.get("level") or {}).items():
            if not isinstance(chk, dict):
                continue
            rows.append((S.short_label(lv), name, F.fmt(chk.get("observed_ms")), F.fmt(chk.get("threshold_ms")),
                         "met" if chk.get("met") else "missed",
                         f"{(gp.get('per_slo') or {}).get(name, F.MISSING)} of {gp.get('total_requests', F.MISSING)}"))
    if rows:
        doc.add("<h4>SLO per level</h4>" + _table(
            ["level", "SLO", "level figure ms", "bound ms", "held", "requests meeting it"], rows))


def _idle_dynamic(doc: _Doc, run: RunData) -> None:
    r = run.result
    bounds = F.result_boundaries(r)
    if not bounds:
        doc.unavailable("idle vs dynamic energy", _run_energy_reason(r))
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


def _power_split(doc: _Doc, run: RunData) -> None:
    """Memory vs the rest of the board, idle vs dynamic, stacked per level (accounting/split.py)."""
    levels = [lv for lv in run.result.levels if lv.power_split is not None]
    if not levels:
        return  # the board reports no memory power: nothing to show (the energy table says which boundaries exist)
    x = [ptxt(lv.label) for lv in levels]
    parts = [("memory", "idle", "#9ecae1"), ("memory", "dynamic", "#3182bd"),
             ("rest", "idle", "#fdd0a2"), ("rest", "dynamic", "#e6550d")]
    data = []
    for part, kind, color in parts:
        ys = [getattr(lv.power_split.parts[part], f"{kind}_power_w") for lv in levels]
        data.append({"type": "bar", "x": x, "y": ys, "name": f"{part} {kind} (W)", "marker": {"color": color}})
    if any(lv.power_split.parts["memory"].idle_power_w is None for lv in levels):
        data = [{"type": "bar", "x": x, "y": [lv.power_split.parts[p].avg_power_w for lv in levels],
                 "name": f"{p} (W)", "marker": {"color": c}} for p, c in (("memory", "#3182bd"), ("rest", "#e6550d"))]
    doc.plot(data, {"title": {"text": "Where the board's watts go: memory (HBM) vs the rest, idle vs dynamic "
                              "(average power over the full window)", "x": 0.01},
                    "barmode": "stack", "yaxis": {"title": {"text": "power (W)"}}}, height=400)


def _per_request_energy(doc: _Doc, run: RunData) -> None:
    """Energy per tenant / tag / model (estimates) and carbon: report/attribution.py arranges them."""
    from wattbench.report import attribution as A

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
            doc.add(_table(headers, rows, "attribution"))
            doc.plot(A.attribution_bars(r), {"title": {"text": "Energy by group per level (estimate)", "x": 0.01},
                                             "barmode": "stack", "yaxis": {"title": {"text": "energy (J)"}}})
    headers, rows = A.carbon_table(r)
    if rows:
        c = r.carbon
        src = (f"{c.g_per_kwh if c else None} gCO2e/kWh" if c is not None and c.source == "constant"
               else f"series {c.source if c else None}")
        doc.add('<h3 id="carbon">Carbon</h3>')
        doc.note(f"grid intensity: {src} (energy-weighted over each window), PUE {c.pue if c is not None else 1.0}")
        doc.add(_table(headers, rows, "carbon"))


def _errors_and_samples(doc: _Doc, run: RunData) -> None:
    rows = []
    for lv in run.result.levels:
        for cls, n in sorted(lv.requests.errors.items()):
            rows.append((lv.label, cls, n))
    if rows:
        doc.add("<h3>Errors</h3>" + _table(["level", "error", "count"], rows))
    failed = [r for r in run.requests if not r.ok][:10]
    if failed:
        doc.add("<details><summary>First failed requests</summary>" + _table(
            ["id", "level", "error", "http status", "detail"],
            [(r.id, r.level, r.error, r.http_status, r.error_detail) for r in failed]) + "</details>")
    samples = [r for r in run.requests if r.output_text or getattr(r, "prompt", None)][:5]
    if samples:
        items = []
        for r in samples:
            prompt = getattr(r, "prompt", None)
            items.append(f"<h4>request {e(r.id)} (level {e(r.level)})</h4>"
                         + (f"<p>prompt</p><pre>{e(prompt)}</pre>" if prompt else "")
                         + (f"<p>response</p><pre>{e(r.output_text)}</pre>" if r.output_text else ""))
        doc.add("<details><summary>Sample prompts and responses</summary>" + "".join(items) + "</details>")


def _inventory(doc: _Doc, run: RunData) -> None:
    r = run.result
    doc.add("<h3>Configuration</h3>" + _kv_table(sorted(r.config.items())))
    env = r.environment
    env_items = [(k, v) for k, v in env.model_dump(mode="json").items() if k not in ("gpus", "packages")]
    doc.add("<h3>Environment</h3>" + _kv_table(env_items))
    if env.gpus:
        keys = ["index", "name", "uuid", "driver", "cuda_driver", "power_limit_w", "default_power_limit_w",
                "memory_total_bytes", "pstate"]
        doc.add(_table(keys, [[getattr(g, k) for k in keys] for g in env.gpus]))
    if env.packages:
        doc.add("<details><summary>Packages</summary>" + _kv_table(sorted(env.packages.items())) + "</details>")
    doc.add("<h3>Server</h3>" + _kv_table(r.server.model_dump(mode="json").items()))
    doc.add("<h3>Sensors</h3>")
    if r.sensors:
        preferred = ["id", "sensor", "boundary", "device", "kind", "quantity", "unit", "method", "primary",
                     "update_period_s", "resolution", "uncertainty_pct", "source", "notes"]
        keys = [k for k in preferred if any(k in s for s in r.sensors)]
        keys += sorted({k for s in r.sensors for k in s} - set(keys))
        doc.add(_table(keys, [[s.get(k) for k in keys] for s in r.sensors]))
    else:
        doc.add('<p class="unavailable">no sensors: energy unavailable: '
                + e("; ".join(r.sensor_problems) or "no sensor inventory in result.json") + "</p>")
    if r.idle:
        rows = []
        for b in F.boundary_order(r.idle):
            info = r.idle[b] if isinstance(r.idle[b], dict) else {"value": r.idle[b]}
            rows.append((b, F.fmt(info.get("power_w")), F.fmt(info.get("duration_s")),
                         json.dumps({k: v for k, v in info.items() if k not in ("power_w", "duration_s")}, default=str)))
        doc.add("<h3>Idle baseline</h3>" + _table(["boundary", "idle power W", "duration s", "other"], rows))


# ---------------------------------------------------------------- comparison


def _comparison(doc: _Doc, runs: list[RunData]) -> None:
    doc.add('<section id="comparison"><h2>Comparison of runs</h2>')
    rows = []
    for run in runs:
        for lv in run.result.levels:
            rows.append((run.run_id, lv.label, lv.validity.verdict, F.headline(lv)))
    doc.add(_table(["run", "level", "verdict", "headline"], rows))
    data = []
    for i, run in enumerate(runs):
        x, _ = _x_of_levels(run.result)
        data.append({"type": "scatter", "mode": "lines+markers", "x": x,
                     "y": [lv.throughput.output_tokens_per_s for lv in run.result.levels],
                     "text": [ptxt(lv.label) for lv in run.result.levels],
                     "name": ptxt(run.run_id), "line": {"color": COLORS[i % len(COLORS)]}})
    doc.plot(data, {"title": {"text": "Output tokens/s vs load, per run", "x": 0.01},
                    "xaxis": {"title": {"text": "load (concurrency or requests/s)"}},
                    "yaxis": {"title": {"text": "output tokens/s"}, "rangemode": "tozero"}}, height=380)
    effi, jtok = [], []
    dashes = ["solid", "dash", "dot", "dashdot", "longdash"]
    for i, run in enumerate(runs):
        x, _ = _x_of_levels(run.result)
        for j, b in enumerate(F.result_boundaries(run.result)):
            common = {"type": "scatter", "mode": "lines+markers", "x": x, "text": [ptxt(lv.label) for lv in run.result.levels],
                      "name": ptxt(f"{run.run_id} · {b}"),
                      "line": {"color": COLORS[i % len(COLORS)], "dash": dashes[j % len(dashes)]}}
            effi.append({**common, "y": [lv.energy[b].output_tokens_per_s_per_kw if b in lv.energy else None
                                         for lv in run.result.levels]})
            jtok.append({**common, "y": [lv.energy[b].j_per_output_token if b in lv.energy else None
                                         for lv in run.result.levels]})
    if effi:
        doc.plot(effi, {"title": {"text": "Output tokens/s per kW vs load, per run and boundary", "x": 0.01},
                        "xaxis": {"title": {"text": "load (concurrency or requests/s)"}},
                        "yaxis": {"title": {"text": "output tokens/s per kW"}, "rangemode": "tozero"}}, height=400)
        doc.plot(jtok, {"title": {"text": "Joules per output token vs load, per run and boundary", "x": 0.01},
                        "xaxis": {"title": {"text": "load (concurrency or requests/s)"}},
                        "yaxis": {"title": {"text": "J per output token"}, "rangemode": "tozero"}}, height=400)
    else:
        doc.add('<p class="unavailable">energy unavailable: none of the runs has energy data</p>')
    doc.add("</section>")


# ---------------------------------------------------------------- page

_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,Helvetica,Arial,sans-serif;margin:0 auto;max-width:1400px;
padding:0 1.2em 3em;color:#222;background:#fff;font-size:14px}
h1{font-size:1.5em;margin:.8em 0 .2em}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.6em}
.meta{color:#555}.banner{border-radius:4px;padding:.5em .8em;margin:.4em 0;border-left:6px solid}
.banner ul{margin:.3em 0 0 1em;padding:0}.banner.level{margin-left:1.5em}
.ok{background:#eef8ee;border-color:#2ca02c}.warn{background:#fff7e6;border-color:#f0a500}
.bad{background:#fdecea;border-color:#d62728}
table{border-collapse:collapse;margin:.5em 0 1em;font-size:12.5px}th,td{border:1px solid #ddd;padding:3px 7px;
text-align:left;vertical-align:top}th{background:#f3f3f3}td{font-variant-numeric:tabular-nums}
table.kv td:first-child{font-weight:600;white-space:nowrap}pre{white-space:pre-wrap;background:#f6f6f6;padding:.5em}
.unavailable{background:#f3f3f3;border:1px dashed #aaa;padding:.8em;color:#444}.caption,.note{color:#555;font-size:12px}
.headline{font-family:ui-monospace,Menlo,Consolas,monospace;background:#f6f8fa;padding:.3em .5em;display:inline-block}
.plot{width:100%;min-height:200px}nav a{margin-right:1em}
.scroll{overflow-x:auto}.answer{font-size:15px;margin:.4em 0}.answer p{margin:.2em 0}td.num{text-align:right}
td.ok{background:#eef8ee}td.warn{background:#fff7e6}td.bad{background:#fdecea}
"""

_BOOT = """
(function(){
  var nodes = document.querySelectorAll('script.plot-data');
  var cfg = %CONFIG%;
  for (var i = 0; i < nodes.length; i++) {
    var spec = JSON.parse(nodes[i].textContent);
    var el = document.getElementById(nodes[i].getAttribute('data-target'));
    Plotly.newPlot(el, spec.data, spec.layout, cfg);
  }
})();
"""


PLOTLY_BUNDLE = Path(__file__).with_name("assets") / "plotly-basic.min.js"
TRACE_TYPES = frozenset({"scatter", "bar", "pie"})  # what the bundle draws


def get_plotlyjs() -> str:
    """The partial plotly.js bundle inlined in every report."""
    return PLOTLY_BUNDLE.read_text(encoding="utf-8")


def build_html(runs: list[RunData]) -> str:
    """The report page as a string."""

    if not runs:
        from wattbench.errors import UserError

        raise UserError("give at least one run directory to report on")
    for run in runs:  # load side files first so their notes reach the validity banners
        run.requests, run.telemetry, run.server_timeline  # noqa: B018
    from wattbench.report.html_overview import overview

    doc = _Doc()
    title = "wattbench report: " + ", ".join(r.run_id for r in runs)
    doc.add(f"<h1>{e(title)}</h1>")
    for run in runs:
        r = run.result
        doc.add(f'<p class="meta">{e(r.run_id)} · created {e(r.created_at)} · status {e(r.status)} · '
                f'server {e(r.server.engine)} {e(r.server.version)} · model {e(r.server.model)} · tags '
                f'{e(", ".join(r.tags) or F.MISSING)} · wattbench {e(r.wattbench_version)}</p>')
    # the first screen: what each run answers (verdict, notes once, choice, efficiency curve, levels)
    doc.add('<section id="validity">')
    for run in runs:
        overview(doc, run)
    doc.add("</section>")
    if len(runs) > 1:
        _comparison(doc, runs)
    for n, run in enumerate(runs):
        r = run.result
        doc.add(f'<section class="run" id="run-{n}"><h2>Run {e(r.run_id)}: levels in detail</h2>')
        for lv in r.levels:
            doc.add(f"<h3>{e(lv.label)}</h3>")
            doc.add(f'<p><span class="headline">{e(F.headline(lv))}</span></p>')
            if lv.validity.reasons:
                doc.add('<ul class="reasons">' + "".join(f"<li>{e(x)}</li>" for x in lv.validity.reasons)
                        + "</ul>")
            if lv.energy:
                doc.add("<h4>Energy, full window</h4>" + _energy_table(lv.energy))
                if lv.energy_steady:
                    doc.add("<h4>Energy, steady state</h4>" + _energy_table(lv.energy_steady))
            else:
                doc.add(f'<p class="unavailable">energy unavailable: {e(F.energy_unavailable_reason(lv))}</p>')
            _timeline(doc, run, lv, {})
        doc.add("<h3>Levels, all figures</h3>")
        doc.add(_level_summary_table(r))
        doc.add("<h3>Latency</h3>")
        _latency_ecdf(doc, run)
        doc.add("<h3>Throughput and efficiency vs load</h3>")
        _throughput_vs_load(doc, run)
        doc.add("<h3>Efficiency–latency trade-off</h3>")
        _pareto(doc, run)
        doc.add("<h3>Idle vs dynamic energy</h3>")
        _idle_dynamic(doc, run)
        _power_split(doc, run)
        _per_request_energy(doc, run)
        _errors_and_samples(doc, run)
        _inventory(doc, run)
        doc.add("</section>")
    boot = _BOOT.replace("%CONFIG%", script_json(PLOT_CONFIG))
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{e(title)}</title><style>{_CSS}</style>"
        f'<script type="text/javascript">{get_plotlyjs()}</script></head><body>'
        + "".join(doc.parts)
        + f"<script>{boot}</script></body></html>\n"
    )


def render_html(runs: list[RunData], path: str | Path) -> Path:
    """Write the self-contained HTML report of ``runs`` to ``path``; return the path."""
    from wattbench.errors import UserError

    path = Path(path)
    text = build_html(runs)
    try:
        if path.parent and not path.parent.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:
        raise UserError(f"cannot write the HTML report to {path}: {exc.strerror or exc}") from None
    return path


def write_run_html(run_dir: str | Path) -> Path:
    """Write ``report.html`` into a run directory (what ``wattbench run`` calls after each level)."""
    run = RunData(run_dir)
    return render_html([run], Path(run_dir) / REPORT_FILE)
