"""The per-level timeline plot of the HTML report: power per sensor channel, requests in flight,
server running/waiting/KV cache and output tokens/s, on one shared time axis.

The tokens/s and in-flight series come from ``wattbench.metrics.timeline``; here they are only thinned.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from wattbench.report import format as F
from wattbench.core.numbers import fmt
from wattbench.report.data import RunData
from wattbench.report.html_doc import COLORS, MAX_TIMELINE_BUCKETS, TIMELINE_MAX_POINTS, Doc, ptxt
from wattbench.report.thin import thin_series
from wattbench.core.schema import LevelResult, RequestRecord
from wattbench.telemetry.base import BOUNDARIES
from wattbench.accounting.counters import counter_power_w
from wattbench.metrics.timeline import in_flight_steps, output_tokens_per_s_buckets

# One Plotly trace as the page's JSON carries it.
Trace = dict[str, Any]
# Monotonic ns -> the plot's x axis (seconds into the level's window).
ToX = Callable[[np.ndarray], np.ndarray]


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


def _window_of(run: RunData, lv: LevelResult, recs: Sequence[RequestRecord]) -> tuple[int, int] | None:
    """The span the timeline draws: the level's window; with ``--trials``, from its first trial's
    first request to the end of its last (``lv.window`` is the last trial's alone, so power and load
    of every trial are drawn, not the last trial's only)."""
    if lv.window is not None and recs and lv.trials is not None and lv.trials.n > 1:
        ends = [r.end_ns or r.last_token_ns or r.sent_ns for r in recs]
        return min(lv.window.start_ns, min(r.sent_ns for r in recs)), max(lv.window.end_ns, max(ends))
    if lv.window is not None:
        return lv.window.start_ns, lv.window.end_ns
    if recs:
        ends = [r.end_ns or r.last_token_ns or r.sent_ns for r in recs]
        return min(r.sent_ns for r in recs), max(ends)
    return None


def timeline(doc: Doc, run: RunData, lv: LevelResult, color_of: dict[str, str]) -> None:
    """The level's timeline plot (four stacked rows sharing the time axis) and its caption."""
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

    power = _power_traces(run, lo, hi, color_of, xs)
    server, n_server, n_kv = _server_traces(run, lo, hi, xs)
    data = power + _idle_traces(run, lo, hi, xs) + _in_flight_traces(recs, xs) + server
    data += _tokens_per_s_traces(recs, lo, hi, xs)
    marked = (lv.window.start_ns, lv.window.end_ns) if lv.window is not None else (s, end)  # the window measured
    layout = _layout(lv, marked, xs, len(power), n_server, n_kv)
    doc.plot(data, layout, height=820)
    trials = (f"All {lv.trials.n} trials are drawn; the window and steady band marked are the last trial's. "
              if lv.trials is not None and lv.trials.n > 1 else "")
    doc.add('<p class="caption">' + trials + 'Dotted verticals: the level\'s measurement window; green band: steady state. '
            "Power is drawn per sensor channel (min/max-preserving thinning); tokens/s spreads each request's "
            "output tokens over its stream chunks (evenly from first to last token in a run written without "
            "--keep-chunks).</p>")


def _power_traces(run: RunData, lo: int, hi: int, color_of: dict[str, str], xs: ToX) -> list[Trace]:
    """One line per power channel in [lo, hi]; a counter channel only where its device has no power channel."""
    data: list[Trace] = []
    tel = run.telemetry
    have_power: set[tuple[str | None, str]] = set()
    chans = list(tel.channels.values())
    for ch in chans:
        if ch.kind == "power":
            have_power.add((ch.boundary, ch.device))
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
    return data


def _idle_traces(run: RunData, lo: int, hi: int, xs: ToX) -> list[Trace]:
    """A dotted horizontal line per boundary at its measured idle power."""
    data: list[Trace] = []
    for b, info in run.result.idle.items():
        pw = info.power_w
        if pw is not None:
            data.append({"type": "scatter", "mode": "lines", "x": [xs(np.array([lo]))[0], xs(np.array([hi]))[0]],
                         "y": [pw, pw], "name": ptxt(f"idle {b} ({fmt(pw)} W)"), "legendgroup": "power",
                         "line": {"dash": "dot", "width": 1, "color": "#888"}, "xaxis": "x", "yaxis": "y"})
    return data


def _in_flight_traces(recs: Sequence[RequestRecord], xs: ToX) -> list[Trace]:
    """Client-side requests in flight, as a step line on the requests row."""
    data: list[Trace] = []
    it, ic = in_flight_steps(recs)
    if it.size:
        it, ic = thin_series(it, ic, TIMELINE_MAX_POINTS)
        data.append({"type": "scatter", "mode": "lines", "line": {"shape": "hv", "width": 1.3, "color": "#444"},
                     "x": xs(it), "y": ic, "name": "client: requests in flight", "xaxis": "x", "yaxis": "y2"})
    return data


def _server_traces(run: RunData, lo: int, hi: int, xs: ToX) -> tuple[list[Trace], int, int]:
    """Scraped server running / waiting / KV-cache series in [lo, hi], and how many of each row were drawn."""
    data: list[Trace] = []
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
    return data, n_server, n_kv


def _tokens_per_s_traces(recs: Sequence[RequestRecord], lo: int, hi: int, xs: ToX) -> list[Trace]:
    """Output tokens/s in buckets (at most ``MAX_TIMELINE_BUCKETS``), from ``metrics.timeline``."""
    data: list[Trace] = []
    bucket_s = max(1.0, (hi - lo) / 1e9 / MAX_TIMELINE_BUCKETS)
    bt, tps = output_tokens_per_s_buckets(recs, lo, hi, bucket_s)
    if bt.size:
        data.append({"type": "scatter", "mode": "lines", "line": {"shape": "hv", "width": 1.3, "color": "#2ca02c"},
                     "x": xs(bt), "y": tps, "name": ptxt(f"output tokens/s ({bucket_s:g} s buckets)"),
                     "xaxis": "x", "yaxis": "y4"})
    return data


def _layout(lv: LevelResult, window: tuple[int, int], xs: ToX, n_power: int, n_server: int, n_kv: int) -> dict[str, Any]:
    """Four stacked y axes, notes on empty rows, the measurement window and steady-state band."""
    s, end = window
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
        # placed on the page, in the middle of the power row: an axis without a trace is not drawn,
        # so "y domain" put the label over the requests row below it
        mid = sum(domains[0]) / 2
        annotations.append({"text": ptxt(f"energy unavailable: {reason}"), "xref": "paper", "yref": "paper",
                            "x": 0.5, "y": mid, "xanchor": "center", "yanchor": "middle", "showarrow": False,
                            "font": {"color": "#888"}})
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
    return layout
