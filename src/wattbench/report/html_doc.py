"""The HTML report's building blocks: escaping, plot-JSON cleaning, the page collector and tables.

Escaping rules (the spec is in ``report/html.py``'s docstring): ``e`` for HTML text, ``ptxt`` for plotly
labels, ``script_json`` for JSON inside ``<script>``. Only trace types in ``TRACE_TYPES`` may be drawn:
the inlined partial plotly bundle draws nothing else.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from wattbench.core.numbers import MISSING
from wattbench.report.thin import DEFAULT_MAX_POINTS

TIMELINE_MAX_POINTS = DEFAULT_MAX_POINTS  # per trace, after min/max thinning
ECDF_MAX_POINTS = 1500  # per trace
MAX_TIMELINE_BUCKETS = 2000
PLOT_DECIMALS = 4  # tokens/s buckets per level
PLOT_CONFIG = {"displaylogo": False, "responsive": True, "scrollZoom": False}
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#7f7f7f"]
PLOTLY_BUNDLE = Path(__file__).with_name("assets") / "plotly-basic.min.js"
TRACE_TYPES = frozenset({"scatter", "bar", "pie"})  # what the bundle draws

_JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_JSON_ESCAPE_RE = re.compile("[<>&\u2028\u2029]")


def get_plotlyjs() -> str:
    """The partial plotly.js bundle inlined in every report."""
    return PLOTLY_BUNDLE.read_text(encoding="utf-8")


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


class Doc:
    """Collects HTML parts and numbered plot containers."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.n_plots = 0

    def add(self, s: str) -> None:
        self.parts.append(s)

    def plot(self, data: list[dict[str, Any]], layout: dict[str, Any], height: int = 420) -> None:
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


def table(headers: list[str], rows: Iterable[Iterable[Any]], cls: str = "") -> str:
    head = "".join(f"<th>{e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{e(cls)}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def kv_table(items: Iterable[tuple[str, Any]]) -> str:
    rows = []
    for k, v in items:
        if isinstance(v, (dict, list)):
            v = json.dumps(v, ensure_ascii=False, sort_keys=True, default=str)
        rows.append((k, MISSING if v is None or v == "" else v))
    return table(["field", "value"], rows, "kv")

