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

Modules: ``html_doc`` (escaping, page collector, tables), ``html_overview`` (the first screen),
``html_timeline`` (per-level timeline), ``html_plots`` (run-wide plots); this one assembles the page.
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

from wattbench.core.secret_scope import clip
from wattbench.report import format as F
from wattbench.core.numbers import MISSING, fmt, fmt_fraction_pct
from wattbench.results.headline import boundary_order, shown_boundaries
from wattbench.report import summary as S
from wattbench.report.labels import cost_currency
from wattbench.report.data import RunData
from wattbench.report.html_doc import (
    COLORS, PLOT_CONFIG, Doc, e, get_plotlyjs, kv_table, ptxt, script_json, table,
)
from wattbench.report.html_plots import (
    idle_dynamic, latency_ecdf, pareto, per_request_energy, power_split, throughput_vs_load, x_of_levels,
)
from wattbench.report.html_timeline import timeline
from wattbench.core.schema import BoundaryEnergy, Result
from wattbench.core.errors import UserError
from wattbench.core.secret_scope import scrub
from wattbench.report.html_overview import overview
from wattbench.results import rundir

REPORT_FILE = "report.html"


def _level_summary_table(result: Result) -> str:
    headers = ["level", "verdict", "target", "completed", "failed", "out tok/s", "req/s", "duration s",
               "TTFT p50 ms", "TTFT p99 ms", "TPOT p50 ms", "TPOT p99 ms", "ITL p99 ms", "E2E p99 ms", "headline"]
    rows = []
    for lv in result.levels:
        L = lv.latency
        rows.append([lv.label, lv.validity.verdict, F.level_target(lv), lv.requests.completed, lv.requests.failed,
                     fmt(lv.throughput.output_tokens_per_s), fmt(lv.throughput.requests_per_s),
                     fmt(lv.throughput.duration_s), fmt(L.ttft_ms.p50), fmt(L.ttft_ms.p99), fmt(L.tpot_ms.p50),
                     fmt(L.tpot_ms.p99), fmt(L.itl_ms.p99), fmt(L.e2e_ms.p99), F.headline_line(lv)])
    return table(headers, rows, "summary")


def _energy_table(energy: dict[str, BoundaryEnergy], currency: str) -> str:
    headers = ["boundary", "label", "method", "energy J", "avg W", "p99 W", "max W", "idle W", "dynamic J",
               "J/out tok", "out tok/s/kW", "out tok/kWh", f"cost/M out tok ({currency})", "± %", "coverage", "largest gap s", "notes"]
    rows = []
    for b in shown_boundaries(energy):  # a boundary equal to another (host = the cpu estimate) once
        be = energy[b]
        e = partial(F.energy_fmt, be)  # an estimate's figures at the digits its ±% allows
        rows.append([b, be.label, be.method, e(be.energy_j), e(be.avg_power_w), e(be.p99_power_w),
                     e(be.max_power_w), e(be.idle_power_w), e(be.dynamic_energy_j),
                     e(be.j_per_output_token), e(be.output_tokens_per_s_per_kw),
                     e(be.output_tokens_per_kwh), e(be.cost_per_million_output_tokens),
                     fmt(be.uncertainty_pct), fmt_fraction_pct(be.coverage), fmt(be.largest_gap_s),
                     "; ".join(be.notes)])
    return table(headers, rows, "energy")


# ---------------------------------------------------------------- validity


# ---------------------------------------------------------------- plots


def _errors_and_samples(doc: Doc, run: RunData) -> None:
    rows = []
    for lv in run.result.levels:
        for cls, n in sorted(lv.requests.errors.items()):
            rows.append((lv.label, cls, n))
    if rows:
        doc.add("<h3>Errors</h3>" + table(["level", "error", "count"], rows))
    failed = [r for r in run.requests if not r.ok][:10]
    if failed:
        doc.add("<details><summary>First failed requests</summary>" + table(
            ["id", "level", "error", "http status", "detail"],
            [(r.id, r.level, r.error, r.http_status, r.error_detail) for r in failed]) + "</details>")
    samples = [r for r in run.requests if r.output_text or getattr(r, "prompt", None)][:5]
    if samples:
        items = []
        for r in samples:
            prompt = getattr(r, "prompt", None)
            items.append(f"<h4>request {e(r.id)} (level {e(r.level)})</h4>"
                         + (f"<p>prompt</p><pre>{e(_sample(prompt))}</pre>" if prompt else "")
                         + (f"<p>response</p><pre>{e(_sample(r.output_text))}</pre>" if r.output_text else ""))
        doc.add("<details><summary>Sample prompts and responses</summary>" + "".join(items) + "</details>")


def _inventory(doc: Doc, run: RunData) -> None:
    r = run.result
    doc.add("<h3>Configuration</h3>" + kv_table(S.applied_config(r)))
    env = r.environment
    env_items = [(k, v) for k, v in env.model_dump(mode="json").items() if k not in ("gpus", "packages")]
    doc.add("<h3>Environment</h3>" + kv_table(env_items))
    if env.gpus:
        keys = ["index", "name", "uuid", "driver", "cuda_driver", "power_limit_w", "default_power_limit_w",
                "memory_total_bytes", "pstate"]
        doc.add(table(keys, [[getattr(g, k) for k in keys] for g in env.gpus]))
    if env.packages:
        doc.add("<details><summary>Packages</summary>" + kv_table(sorted(env.packages.items())) + "</details>")
    doc.add("<h3>Server</h3>" + kv_table(r.server.model_dump(mode="json").items()))
    doc.add("<h3>Sensors</h3>")
    if r.sensors:
        preferred = ["id", "sensor", "boundary", "device", "kind", "quantity", "unit", "method", "primary",
                     "update_period_s", "resolution", "uncertainty_pct", "source", "notes"]
        sensors = [s.model_dump(mode="json") for s in r.sensors]  # the keys each channel was written with
        keys = [k for k in preferred if any(k in s for s in sensors)]
        keys += sorted({k for s in sensors for k in s} - set(keys))
        doc.add(table(keys, [[s.get(k) for k in keys] for s in sensors]))
    else:
        doc.add('<p class="unavailable">no sensors: energy unavailable: '
                + e("; ".join(r.sensor_problems) or "no sensor inventory in result.json") + "</p>")
    if r.idle:
        rows = []
        for b in boundary_order(r.idle):
            info = r.idle[b].model_dump(mode="json")
            rows.append((b, fmt(info.get("power_w")), fmt(info.get("duration_s")),
                         json.dumps({k: v for k, v in info.items() if k not in ("power_w", "duration_s")}, default=str)))
        doc.add("<h3>Idle baseline</h3>" + table(["boundary", "idle power W", "duration s", "other"], rows))


# ---------------------------------------------------------------- comparison


def _answers(runs: list[RunData]) -> tuple[list[str], str | None]:
    """``compare``'s answer lines for the runs, the first the baseline (``report.comparison.answer_lines``:
    who A, B … are, one answer per level pair, the SLO answer); or, where compare refuses the pair,
    no lines and its one-line reason."""
    from wattbench.analysis.compare import compare
    from wattbench.report.comparison import answer_lines

    try:
        cmp = compare([r.result for r in runs])
    except UserError as exc:
        return [], str(exc)
    return answer_lines(cmp), None


def _comparison(doc: Doc, runs: list[RunData]) -> None:
    doc.add('<section id="comparison"><h2>Comparison of runs</h2>')
    lines, refused = _answers(runs)
    from wattbench.analysis.compare import LETTERS

    doc.add("<h3>" + e(" vs ".join(LETTERS[i] if i < len(LETTERS) else str(i) for i in range(len(runs))))
            + " (as `wattbench compare` answers)</h3>")
    if refused is not None:
        doc.add(f'<p class="compare-refused">not compared level by level: {e(refused)}</p>')
    else:
        doc.add('<ul class="compare-answers">' + "".join(f"<li>{e(x)}</li>" for x in lines) + "</ul>")
    rows = []
    for run in runs:
        for lv in run.result.levels:
            rows.append((run.run_id, lv.label, lv.validity.verdict, F.headline_line(lv)))
    doc.add(table(["run", "level", "verdict", "headline"], rows))
    data = []
    for i, run in enumerate(runs):
        x, _ = x_of_levels(run.result)
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
        x, _ = x_of_levels(run.result)
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
.bad{background:#fdecea;border-color:#d62728}.est{background:#eef6fb;border-color:#1f77b4}
table{border-collapse:collapse;margin:.5em 0 1em;font-size:12.5px}th,td{border:1px solid #ddd;padding:3px 7px;
text-align:left;vertical-align:top}th{background:#f3f3f3}td{font-variant-numeric:tabular-nums}
table.kv td:first-child{font-weight:600;white-space:nowrap}pre{white-space:pre-wrap;background:#f6f6f6;padding:.5em}
.unavailable{background:#f3f3f3;border:1px dashed #aaa;padding:.8em;color:#444}.caption,.note{color:#555;font-size:12px}
.headline{font-family:ui-monospace,Menlo,Consolas,monospace;background:#f6f8fa;padding:.3em .5em;display:inline-block}
.plot{width:100%;min-height:200px}nav a{margin-right:1em}
.scroll{overflow-x:auto}.answer{font-size:15px;margin:.4em 0}.answer p{margin:.2em 0}td.num{text-align:right}
td.ok{background:#eef8ee}td.est{background:#eef6fb}td.warn{background:#fff7e6}td.bad{background:#fdecea}
.hero{border-radius:6px;padding:.6em 1em;margin:.6em 0;border-left:8px solid}.hero .big{font-size:3em;font-weight:700;
line-height:1.1;font-variant-numeric:tabular-nums}.hero .unit{font-size:1.2em;color:#333}.hero .ci,.hero .where{color:#444}
.hero .headline{margin-top:.3em}details.notes summary{cursor:pointer;margin-top:.3em}
details.notes .note-head{margin:.3em 0 0;font-weight:600}details.notes li.bad{color:#a31515}
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


def build_html(runs: list[RunData]) -> str:
    """The report page as a string."""

    if not runs:
        raise UserError("give at least one run directory to report on")
    for run in runs:  # load side files first so their notes reach the validity banners
        run.requests, run.telemetry, run.server_timeline  # noqa: B018

    doc = Doc()
    title = "wattbench report: " + ", ".join(r.run_id for r in runs)
    doc.add(f"<h1>{e(title)}</h1>")
    for run in runs:
        r = run.result
        doc.add(f'<p class="meta">{e(r.run_id)} · created {e(r.created_at)} · status {e(r.status)} · '
                f'server {e(r.server.engine)} {e(r.server.version)} · model {e(r.server.model)} · tags '
                f'{e(", ".join(r.tags) or MISSING)} · wattbench {e(r.wattbench_version)}</p>')
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
            doc.add(f'<p><span class="headline">{e(F.headline_line(lv))}</span></p>')
            if lv.validity.reasons:
                doc.add('<ul class="reasons">' + "".join(f"<li>{e(x)}</li>" for x in lv.validity.reasons)
                        + "</ul>")
            if lv.energy:
                doc.add("<h4>Energy, full window</h4>" + _energy_table(lv.energy, cost_currency(r)))
                if lv.energy_steady:
                    doc.add("<h4>Energy, steady state</h4>" + _energy_table(lv.energy_steady, cost_currency(r)))
            else:
                doc.add(f'<p class="unavailable">energy unavailable: {e(F.energy_unavailable_reason(lv))}</p>')
            timeline(doc, run, lv, {})
        doc.add("<h3>Levels, all figures</h3>")
        doc.add(_level_summary_table(r))
        doc.add("<h3>Latency</h3>")
        latency_ecdf(doc, run)
        doc.add("<h3>Throughput and efficiency vs load</h3>")
        throughput_vs_load(doc, run)
        doc.add("<h3>Efficiency–latency trade-off</h3>")
        pareto(doc, run)
        doc.add("<h3>Idle vs dynamic energy</h3>")
        idle_dynamic(doc, run)
        power_split(doc, run)
        per_request_energy(doc, run)
        _errors_and_samples(doc, run)
        _inventory(doc, run)
        doc.add("</section>")

    boot = _BOOT.replace("%CONFIG%", script_json(PLOT_CONFIG))
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{scrub(e(title))}</title><style>{_CSS}</style>"
        f'<script type="text/javascript">{get_plotlyjs()}</script></head><body>'
        + scrub("".join(doc.parts))  # what came from the runs, without the registered secrets (every open scope's)
        + f"<script>{boot}</script></body></html>\n"
    )


def render_html(runs: list[RunData], path: str | Path) -> Path:
    """Write the self-contained HTML report of ``runs`` to ``path``; return the path."""
    path = Path(path)
    rundir.atomic_write_bytes(path, build_html(runs).encode("utf-8"))  # no half-written report, no .tmp left
    return path


def write_run_html(run_dir: str | Path) -> Path:
    """Write ``report.html`` into a run directory (what ``wattbench run`` calls after each level)."""
    run = RunData(run_dir)
    return render_html([run], Path(run_dir) / REPORT_FILE)


SAMPLE_MAX_CHARS = 4_000  # of a sample prompt or response shown in report.html (the whole is in requests.jsonl)


def _sample(text: object) -> str:
    """A sample text as the report shows it: at most ``SAMPLE_MAX_CHARS`` characters, the cut said."""
    text = str(text)
    if len(text) <= SAMPLE_MAX_CHARS:
        return text
    return (clip(text, SAMPLE_MAX_CHARS) + f" … [cut: {fmt(len(text), kind='count')} characters, the first {fmt(SAMPLE_MAX_CHARS, kind='count')} shown; "
            "the rest is in requests.jsonl]")

