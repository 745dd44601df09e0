"""Rendering of a tune (``tune.json``): the terminal table and the HTML section.

Everything shown comes from the TuneResult (scores, Pareto front, score by axis and the
recommendation are computed in ``wattbench.tune.score``); this module only lays them out. The
HTML is self-contained (inline SVG, no scripts); every text is escaped.
"""

from __future__ import annotations

import html
import shlex

from rich.console import Console, ConsoleOptions, RenderResult
from rich.padding import Padding
from rich.text import Text

from wattbench.results.tune import ParetoTrial, Recommendation, TuneResult

from wattbench.core.numbers import MISSING, fmt, fmt_pct
from wattbench.report.labels import load_label
from wattbench.report.tables import Column
from wattbench.report.terminal import COLUMN_GAP, column_tables

# (header in the terminal, where lines are short; header in HTML)
COLUMN_HEADERS = (("#", "trial"), ("configuration", "configuration"), ("status", "status"), ("load", "load"),
                  ("score", "score"), ("goodput\ntok/s", "goodput tok/s"), ("tok/s/kW", "tok/s/kW"),
                  ("J/tok", "J/tok"), ("TTFT\np99 ms", "p99 TTFT ms"), ("TPOT\np99 ms", "p99 TPOT ms"),
                  ("W", "power W"), ("verdict", "verdict"))
COLUMNS = tuple(h for _, h in COLUMN_HEADERS)
LEFT = {"configuration", "status", "load", "verdict"}
LATENCY_NAMES = {"ttft_p99_ms": "p99 TTFT", "tpot_p99_ms": "p99 TPOT"}
CONFIG_WIDTH = 40  # a longer configuration folds onto more lines (at its spaces)


def _n(v: float | int | None, kind: str = "figure") -> str:
    return fmt(v, kind=kind)


def _score(v: float | int | None) -> str:
    """Scores keep four significant figures (J/token): configurations differ by percents."""
    return fmt(v, kind="precise")


def _xy(v: float) -> str:
    """An SVG coordinate (geometry, not a figure for people)."""
    return str(round(float(v), 1))


def rows(t: TuneResult) -> list[list[str]]:
    """One row of cells per trial, in COLUMNS order; the load as the run summary labels it (``c=64``)."""
    out = []
    for tr in t.trials:
        f = tr.figures
        label = tr.label + (f" (repeat of {tr.repeat_of})" if tr.repeat_of is not None else "")
        if tr.gpu_settings:
            label += " [" + ", ".join(f"{k}={v:g}" for k, v in tr.gpu_settings.items()) + "]"
        out.append([str(tr.index), label, tr.status, load_label(f.load_mode, f.load_value),
                    _score(tr.score), _n(f.goodput_output_tokens_per_s),
                    _n(f.output_tokens_per_s_per_kw), _n(f.j_per_output_token, "precise"),
                    _n(f.ttft_p99_ms), _n(f.tpot_p99_ms), _n(f.avg_power_w), str(f.verdict or MISSING)])
    return out


def columns(t: TuneResult, width: int | None = None) -> tuple[Column, list[Column]]:
    """The trial-number key column and the rest, for ``report.terminal.column_tables``. The
    configuration folds at CONFIG_WIDTH, or is given a line of its own where ``width`` leaves room
    for it beside every other column (one wide table)."""
    rs = rows(t)
    cols = []
    for i, (head, name) in enumerate(COLUMN_HEADERS):
        cols.append(Column(head, [r[i] for r in rs], "left" if name in LEFT else "right",
                           kind="verdict" if name == "verdict" else ""))
    key, rest = cols[0], cols[1:]
    conf = rest[0]
    room = (width or 0) - key.width - sum(c.width + COLUMN_GAP for c in rest[1:]) - COLUMN_GAP
    conf.max_width = max(CONFIG_WIDTH, min(conf.width, room))
    return key, rest


def title(t: TuneResult) -> str:
    return f"wattbench tune · {t.engine} {t.model or ''}".rstrip() + f" · objective {t.objective}" + (
        f" · SLO {t.slo}" if t.slo else "")


def shell_lines(command: str, width: int, indent: int = 2) -> list[str]:
    """A shell command broken at its words into lines of at most ``width`` characters (a word
    longer than that stands alone), indented by ``indent`` (continuations by two more), each line
    but the last ending in `` \\`` so that the lines paste into a shell as one command."""
    words = [w if w == "&&" else shlex.quote(w) for w in shlex.split(command)]
    lines: list[str] = []
    cur = ""
    for w in words:
        pad = indent + (2 if lines else 0)
        if cur and pad + len(cur) + 1 + len(w) + 2 > width:
            lines.append(" " * pad + cur + " \\")
            cur = w
        else:
            cur = f"{cur} {w}" if cur else w
    lines.append(" " * (indent + (2 if lines else 0)) + cur)
    return lines


class TuneSummary:
    """The tune in a terminal, laid out for the console's width when printed: a title,
    the configurations as tables that fit (one wide table at 160 columns, two at 80, each led by the
    trial number), the Pareto front, the recommendation and the command that serves it."""

    def __init__(self, t: TuneResult):
        self.t = t

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        t = self.t
        yield Text(title(t), style="bold")
        key, cols = columns(t, options.max_width)
        for i, tab in enumerate(column_tables(key, cols, options.max_width)):
            yield Text("")
            yield tab
        yield Text("")
        if t.pareto and t.pareto.frontier:
            latency = LATENCY_NAMES.get(t.pareto.latency, t.pareto.latency)
            yield Text(f"Pareto front (goodput per kW vs {latency}): trials "
                       + ", ".join(str(i) for i in t.pareto.frontier))
        rec = t.recommended
        if rec:
            yield Text(f"recommended: trial {rec.trial} — {rec.label}", style="bold")
            yield Padding(Text(rec.summary), (0, 0, 0, 2))
            for line in margin_lines(rec):
                yield Padding(Text(line), (0, 0, 0, 2))
            yield Text("serve it:")
            for line in shell_lines(rec.serve_command, options.max_width):
                yield Text(line, no_wrap=True, overflow="fold")
        else:
            yield Text("no configuration scored (none met the SLO?)", style="bold red")
        precision = precision_line(t)
        if precision:
            yield Text(precision)
        if t.decision and not t.decision.separated:
            yield Text("note: the best two are within the measurement noise, or it cannot tell them apart yet",
                       style="yellow")
        for w in t.warnings:
            yield Text("warning: " + w, style="yellow")


def precision_line(t: TuneResult) -> str | None:
    """``--precision``: ``precision ±2% asked: reached — trial 3 ±1.4% (4 measurements), trial 5 ±1.9%
    (3 measurements)`` (``tune.run.finalist_precision``); None without it."""
    p = t.precision
    if not p:
        return None
    parts = []
    for i, f in p.finalists.items():
        r = f.reached_pct
        parts.append(f"trial {i} " + (f"±{fmt_pct(r)}" if r is not None else "no interval")
                     + f" ({f.measurements} measurements)")
    return f"precision ±{p.asked_pct:g}% asked: {p.stopped or 'not judged'} — " + ", ".join(parts)


def margin_lines(rec: Recommendation) -> list[str]:
    """The recommendation's margin over the runner-up and over the engine defaults, each a ratio of
    scores with its noise interval (``tune/run.conclude``)."""
    out = []
    for m, what in ((rec.margin_over_runner_up, "over the runner-up"), (rec.margin_over_defaults, "over the defaults")):
        if m:
            out.append(f"{what} (trial {m.trial}): {m.text}")
    return out


def tune_summary(t: TuneResult) -> list[TuneSummary]:
    """Rich renderables: the trials tables, the Pareto front, the recommendation."""
    return [TuneSummary(t)]


def _svg_scatter(points: list[ParetoTrial], frontier: list[int], xlabel: str, ylabel: str) -> str:
    if not points:
        return "<p>no trial scored</p>"
    w, h, pad = 520, 300, 50
    xs: list[float] = [p.latency for p in points]
    ys: list[float] = [p.efficiency for p in points]
    x0, x1 = min(xs), max(xs) or 1.0
    y0, y1 = 0.0, max(ys) or 1.0
    if x1 == x0:
        x1 = x0 + 1.0

    def X(v: float) -> float:
        return pad + (v - x0) / (x1 - x0) * (w - 2 * pad)

    def Y(v: float) -> float:
        return h - pad - (v - y0) / (y1 - y0) * (h - 2 * pad)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img">',
             f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" y2="{h - pad}" stroke="#888"/>',
             f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{h - pad}" stroke="#888"/>',
             f'<text x="{w / 2}" y="{h - 10}" text-anchor="middle" font-size="12">{html.escape(xlabel)}</text>',
             f'<text x="12" y="{h / 2}" font-size="12" transform="rotate(-90 12 {h / 2})" text-anchor="middle">{html.escape(ylabel)}</text>']
    front = sorted((p for p in points if p.trial in frontier), key=lambda p: p.latency)
    if len(front) > 1:
        pts = " ".join(f"{_xy(X(p.latency))},{_xy(Y(p.efficiency))}" for p in front)
        parts.append(f'<polyline points="{pts}" fill="none" stroke="#d62728"/>')
    for p in points:
        col = "#d62728" if p.trial in frontier else "#1f77b4"
        parts.append(f'<circle cx="{_xy(X(p.latency))}" cy="{_xy(Y(p.efficiency))}" r="4" fill="{col}">'
                     f'<title>trial {p.trial}: {fmt(p.efficiency)} / {fmt(p.latency)}</title></circle>')
    parts.append(f'<text x="{pad}" y="{pad - 8}" font-size="11">max {fmt(y1)}</text>')
    parts.append(f'<text x="{w - pad}" y="{h - pad + 14}" font-size="11" text-anchor="end">{fmt(x1)}</text>')
    parts.append(f'<text x="{pad}" y="{h - pad + 14}" font-size="11">{fmt(x0)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _svg_bars(row: dict[str, float | None]) -> str:
    vals = [(k, v) for k, v in row.items() if v is not None]
    if not vals:
        return ""
    top = max(v for _, v in vals) or 1.0
    w, bh = 420, 18
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w + 160}" height="{bh * len(vals) + 4}">']
    for i, (k, v) in enumerate(vals):
        y = i * bh + 2
        parts.append(f'<text x="0" y="{y + 13}" font-size="12">{html.escape(k)}</text>'
                     f'<rect x="90" y="{y}" width="{_xy(v / top * w)}" height="{bh - 4}" fill="#1f77b4"/>'
                     f'<text x="{_xy(95 + v / top * w)}" y="{y + 13}" font-size="11">{_score(v)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def tune_section(t: TuneResult) -> str:
    """The tune's HTML section: recommendation, table, Pareto plot, score by axis."""
    e = html.escape
    out = ["<section class='tune'><h2>Tune</h2>",
           f"<p>{e(t.engine)} {e(t.model or '')} — objective <b>{e(t.objective)}</b>"
           + (f", SLO <code>{e(t.slo)}</code>" if t.slo else "") + f", strategy {e(t.strategy)}, "
           f"{len(t.trials)} trials, status {e(t.status)}</p>"]
    rec = t.recommended
    if rec:
        out.append(f"<p><b>Recommended: trial {rec.trial} — {e(rec.label)}</b>: {e(rec.summary)}</p>"
                   + "".join(f"<p>{e(line)}</p>" for line in margin_lines(rec))
                   + f"<pre>{e(rec.serve_command)}</pre>")
    out.append("<table><tr>" + "".join(f"<th>{e(c)}</th>" for c in COLUMNS) + "</tr>")
    for r in rows(t):
        out.append("<tr>" + "".join(f"<td>{e(x)}</td>" for x in r) + "</tr>")
    out.append("</table>")
    if t.pareto:
        out.append(f"<h3>Pareto front: goodput per kW vs {e(t.pareto.latency)}</h3>")
        out.append(_svg_scatter(t.pareto.points, t.pareto.frontier, t.pareto.latency, "goodput tok/s per kW"))
    if t.by_axis:
        out.append(f"<h3>Best {e(t.objective)} by axis value</h3>")
        for name, row in t.by_axis.items():
            out.append(f"<h4>{e(name)}</h4>" + _svg_bars(row))
    out.append("</section>")
    return "".join(out)


def tune_html(t: TuneResult) -> str:
    return ("<!doctype html><html><head><meta charset='utf-8'><title>wattbench tune</title>"
            "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
            "td,th{border:1px solid #ccc;padding:2px 6px;font-size:13px}</style></head><body>"
            + tune_section(t) + "</body></html>")
