"""The HTML report's charts as a browser draws them (headless Chromium, measured on the page): an
``--optimize`` run's points joined in load order, a run without energy without empty thirds, the
timeline's "energy unavailable" label in the power row, the ITL quadrant saying why it is empty."""

from __future__ import annotations

import json

import pytest

from tests.fakes.browser import find_chromium, inspect_page, png_stats
from tests.fakes.report_runs import write_run
from wattbench.report.data import RunData
from wattbench.report.html import render_html

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(find_chromium() is None, reason="chromium not installed (apt-get install -y chromium)"),
]

PLOT = "(s => Array.from(document.querySelectorAll('.js-plotly-plot')).find(e => (e.layout.title.text || '').includes(s)))"
# (top, bottom, left, right) on the page of an axis pair's plot area, and of an annotation
AREA = ("((p, ax) => { const f = p._fullLayout, r = p.getBoundingClientRect(), x = f[ax[0]], y = f[ax[1]]; "
        "return [r.top + y._offset, r.top + y._offset + y._length, r.left + x._offset, r.left + x._offset + x._length]; })")
ANN = ("((p, s) => { const a = Array.from(p.querySelectorAll('.annotation')).find(e => e.textContent.includes(s)); "
       "if (!a) return null; const r = a.getBoundingClientRect(); return [r.top, r.bottom, r.left, r.right]; })")
CHECKS = {
    "efficiency": f"(() => {{ const p = {PLOT}('Efficiency'); return p.data.map(t => [t.xaxis, t.x, t.name]); }})()",
    "timeline": f"(() => {{ const p = {PLOT}('timeline'); return [{ANN}(p, 'energy unavailable'), "
                f"{AREA}(p, ['xaxis', 'yaxis2'])]; }})()",
    "ecdf": f"(() => {{ const p = {PLOT}('Latency'); return [{ANN}(p, 'keep-chunks'), {AREA}(p, ['xaxis', 'yaxis']), "
            f"{AREA}(p, ['xaxis4', 'yaxis4'])]; }})()",
    "throughput_x": f"(() => {{ const p = {PLOT}('Output throughput'); return p.data[0].x; }})()",
}


def test_charts_by_load_without_energy_and_chunks(tmp_path):
    d = write_run(tmp_path / "run", energy=False, run_id="run-optimize", slo=False)
    res = json.loads((d / "result.json").read_text())
    res["levels"] = [res["levels"][i] for i in (0, 2, 1)]  # measured out of load order, as --optimize does
    (d / "result.json").write_text(json.dumps(res))
    lines = [json.loads(x) for x in (d / "requests.jsonl").read_text().splitlines()]
    (d / "requests.jsonl").write_text("".join(json.dumps({**x, "chunk_ns": []}) + "\n" for x in lines))  # no --keep-chunks
    html = render_html([RunData(d)], tmp_path / "report.html")
    shot = tmp_path / "top.png"
    rep = inspect_page(html, evaluate=CHECKS, screenshot=shot, wait_js=(
        "typeof Plotly !== 'undefined' && document.querySelectorAll('.js-plotly-plot').length > 3"))
    assert not rep.errors(), rep.errors()
    v = rep.values
    # joined in load order (was 1, 16, 4: a zig-zag), and two panels (throughput, latency), not three
    assert {tuple(x) for _, x, _ in v["efficiency"]} == {(1, 4, 16)}, v["efficiency"]
    assert sorted({ax for ax, _, _ in v["efficiency"]}) == ["x", "x2"]
    assert v["throughput_x"] == [1, 4, 16]
    label, requests_row = v["timeline"]
    assert label is not None and label[1] < requests_row[0]  # above the requests row, in the power row
    note, ttft, e2e = v["ecdf"]
    assert note is not None, "the empty ITL quadrant says why"
    assert note[0] > ttft[1] and note[3] < e2e[2]  # below the TTFT panel, left of the E2E panel: its quadrant
    assert png_stats(shot)["colors"] > 50
