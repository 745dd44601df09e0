import html
import json
import re

import pytest

from tests.fakes.report_runs import INJECT_DETAIL, INJECT_LABEL, INJECT_MODEL, write_run
from wattbench.report import format as F
from wattbench.core.numbers import fmt, fmt_fraction_pct
from wattbench.report.data import RunData
from wattbench.report.html import build_html, render_html, write_run_html
from wattbench.report.html_doc import TIMELINE_MAX_POINTS, script_json


def plot_specs(text):
    return [json.loads(m) for m in re.findall(r'<script type="application/json" class="plot-data"[^>]*>(.*?)</script>',
                                              text, re.S)]


def without_plotlyjs(text):
    """The page minus the inlined plotly.js (which is in <head>, alone in its script element)."""
    head, body = text.split("</head>", 1)
    assert head.count("<script") == 1
    return body


@pytest.fixture(scope="module")
def page(report_run_dir):
    return build_html([RunData(report_run_dir)])


def test_script_json_cannot_break_out():
    s = script_json({"a": "</script><!-- & \u2028"})
    assert "<" not in s and ">" not in s and "&" not in s and "\u2028" not in s
    assert json.loads(s) == {"a": "</script><!-- & \u2028"}


def test_injected_text_is_escaped(page):
    # the only <script> elements: plotly.js, one JSON block per plot, the boot script
    n_plots = len(plot_specs(page))
    assert len(re.findall(r"<script\b", without_plotlyjs(page), re.I)) == n_plots + 1
    body = without_plotlyjs(page)
    assert "<script>window.__pwned" not in body and "<img src=x" not in body
    # every mention of the injected flag is inside escaped text
    for m in re.finditer(r"window\.__pwned", body):
        before = body[max(0, m.start() - 30):m.start()]
        assert "&lt;script&gt;" in before or "\\u0026lt;script\\u0026gt;" in before or 'onerror=' in before
    assert "&lt;script&gt;window.__pwned=1;alert(1)&lt;/script&gt;" in page  # the prompt, as text
    assert "&lt;img src=x onerror=" in page
    assert INJECT_LABEL not in page and INJECT_MODEL not in page and INJECT_DETAIL not in page


def test_offline_no_external_resources(page):
    page = without_plotlyjs(page)
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)\s*=", page, re.I)
    assert "cdn.plot.ly" not in page
    assert "@import" not in page and "fonts.googleapis" not in page


def test_validity_comes_first_and_numbers_from_result(page, report_run_dir):
    r = RunData(report_run_dir).result
    assert page.index('id="validity"') < page.index('class="plot"')
    assert page.index("INVALID") < page.index("Levels")
    for lv in r.levels:
        assert html.escape(F.headline_line(lv)) in page
        assert f"{fmt(lv.throughput.output_tokens_per_s)} out tok/s" in page
        assert fmt(lv.energy["node"].output_tokens_per_s_per_kw) in page
    assert "c=4: node: window not covered by samples 3.0%" in page  # the grouped note, first screen
    assert "node: sample coverage 0.97 &lt; 0.99" in page  # the level's own text, in its detail


def test_plots_present_and_labelled(page, report_run_dir):
    specs = plot_specs(page)
    titles = [s["layout"].get("title", {}).get("text", "") for s in specs]
    assert sum("timeline" in t for t in titles) == 3
    assert any("Latency distributions" in t for t in titles)
    assert any("per kW vs load" in t for t in titles)
    assert any("Efficiency vs latency" in t for t in titles)
    assert any("Idle vs dynamic" in t for t in titles)
    tl = next(s for s in specs if "concurrency=1: timeline" in s["layout"]["title"]["text"])
    assert tl["layout"]["xaxis"]["title"]["text"] == "time since run start (s)"
    assert tl["layout"]["yaxis"]["title"]["text"] == "power (W)"
    names = [t["name"] for t in tl["data"]]
    assert any(n.startswith("accelerator · nvml0.power") for n in names)
    assert any(n.startswith("node · ipmi.node") for n in names)
    assert "client: requests in flight" in names
    assert any("num_requests_running" in n and "&lt;script&gt;" in n for n in names)
    # KV cache fraction is drawn as percent
    kv = next(t for t in tl["data"] if "gpu_cache_usage" in t["name"])
    assert max(kv["y"]) > 1.0
    # SLO lines from goodput["slos"] on the Pareto chart
    par = next(s for s in specs if "Efficiency vs latency" in s["layout"]["title"]["text"])
    assert sorted(sh["x0"] for sh in par["layout"]["shapes"]) == pytest.approx([20.0, 120.0], rel=1e-9)


def test_idle_dynamic_bars_equal_result(page, report_run_dir):
    r = RunData(report_run_dir).result
    bars = next(s for s in plot_specs(page) if "Idle vs dynamic" in s["layout"]["title"]["text"])
    idle = next(t for t in bars["data"] if t["name"].startswith("idle"))
    dyn = next(t for t in bars["data"] if t["name"].startswith("dynamic"))
    want_idle = [lv.energy[b].idle_energy_j for lv in r.levels for b in ("accelerator", "node")]
    want_dyn = [lv.energy[b].dynamic_energy_j for lv in r.levels for b in ("accelerator", "node")]
    assert idle["y"] == pytest.approx(want_idle)
    assert dyn["y"] == pytest.approx(want_dyn)


def test_no_energy_run_says_so(report_noenergy_dir):
    page = build_html([RunData(report_noenergy_dir)])
    assert page.count("energy unavailable: no sensors: --no-sensors was given") >= 3
    titles = [s["layout"].get("title", {}).get("text", "") for s in plot_specs(page)]
    assert not any("per kW" in t or "Idle vs dynamic" in t or "Efficiency vs latency" in t for t in titles)
    assert any("Output throughput vs load" in t for t in titles)


def test_long_run_is_thinned_without_losing_the_spike(tmp_path):
    d = write_run(tmp_path / "long", level_s=400, min_output_tokens=200, max_output_tokens=400)
    run = RunData(d)
    page = build_html([run])
    t, v = run.telemetry.series("nvml0.power")
    spike = max(v)
    drawn = []
    for s in plot_specs(page):
        for tr in s["data"]:
            if tr.get("name", "").startswith("accelerator · nvml0.power"):
                assert len(tr["y"]) <= TIMELINE_MAX_POINTS
                drawn += tr["y"]
    assert round(spike, 4) in drawn
    # plotly.js is ~4.6 MB; the rest of a 20 min run stays well under 2 MB
    assert len(page.encode()) < 4.8e6 + 2e6


def test_multi_run_comparison(report_run_dir, report_noenergy_dir, tmp_path):
    out = render_html([RunData(report_run_dir), RunData(report_noenergy_dir)], tmp_path / "x" / "cmp.html")
    text = out.read_text()
    assert 'id="comparison"' in text
    titles = [s["layout"].get("title", {}).get("text", "") for s in plot_specs(text)]
    assert "Output tokens/s per kW vs load, per run and boundary" in titles
    cmp = next(s for s in plot_specs(text) if s["layout"]["title"]["text"] == "Output tokens/s vs load, per run")
    assert [t["name"] for t in cmp["data"]] == ["run-report-fake", "run-noenergy"]


def test_write_run_html_into_run_dir(report_run_dir, tmp_path):
    import shutil

    d = tmp_path / "r"
    shutil.copytree(report_run_dir, d)
    p = write_run_html(d)
    assert p == d / "report.html" and 1_200_000 < p.stat().st_size <= 1_500_000  # size goal: at most 1.5 MB


def test_minimal_result_without_side_files_or_levels(tmp_path):
    from wattbench.core.schema import ClockInfo, LevelResult, Result

    def write(levels):
        d = tmp_path / f"r{len(levels)}"
        d.mkdir()
        r = Result(wattbench_version="0.1.0", run_id="bare", created_at="2026-01-01T00:00:00Z",
                   clock=ClockInfo(anchor_wall_ns=1, anchor_mono_ns=1), levels=levels, status="interrupted",
                   status_detail="Ctrl-C")
        (d / "result.json").write_text(r.model_dump_json())
        return d

    page = build_html([RunData(write([]))])
    assert "status interrupted: Ctrl-C" in page
    lv = LevelResult(index=0, label="rate=2", energy_unavailable_reason="no sensors")
    lv.load.mode = "rate"
    lv.load.target_rate_rps = 2.0
    run = RunData(write([lv]))
    page = build_html([run])
    assert "rate=2: no window and no requests; no timeline" in page
    assert "energy unavailable: no sensors" in page
    assert any("requests.jsonl is missing" in n for n in run.notes)
    assert page.index("requests.jsonl is missing") < page.index('class="run"')


def test_slo_goodput_shown_as_figures_not_json(page, report_run_dir):
    """--slo: the share meeting the SLO, goodput and goodput per kW as table cells, the SLO per level
    as a table — no raw goodput JSON in the page."""
    body = without_plotlyjs(page)
    assert '"per_slo"' not in body and "&quot;per_slo&quot;" not in body
    r = RunData(report_run_dir).result
    for lv in r.levels:
        g = lv.goodput
        assert f"<td class=\"num\">{fmt_fraction_pct(g.fraction)}</td>" in body
        assert fmt(g.per_kw_at("accelerator")) in body
    assert "SLO per level" in body and "SLO ttft_p99=120ms,tpot_p99=20ms" in body


def test_a_gpu_run_plots_no_tokens_per_kw_of_a_part_and_shows_host_once():
    """A past defect, on the committed H200 llama.cpp run (written before the rule): its result.json holds
    17,159 tok/s/kW at the HBM rail and 16,112 at the CPU estimate beside the board's 4,807 (c=16).
    Read back, the HTML plots tokens per kW of the board only, and the host (= the cpu estimate) is
    one row of each energy table."""
    from pathlib import Path

    d = Path(__file__).resolve().parents[3] / "docs" / "validation-data" / "h200-llamacpp-beside-embedded"
    page = build_html([RunData(d)])
    specs = plot_specs(page)
    per_kw = [t for s in specs if "per kW" in json.dumps(s["layout"].get("title", {}))
              or any("tok/s/kW" in str(t.get("hovertemplate", "")) for t in s["data"]) for t in s["data"]]
    names = " ".join(str(t.get("name", "")) for t in per_kw)
    assert "accelerator (measured)" in names
    assert "accelerator_memory" not in names and "host" not in names and "cpu" not in names
    energy_tables = re.findall(r'<table class="energy">(.*?)</table>', page, re.S)
    assert energy_tables
    for t in energy_tables:
        rows = re.findall(r"<tr><td>([a-z_]+)</td>", t)
        assert "host" in rows and "cpu" not in rows and rows.count("host") == 1
        assert "17,159" not in t and "16,112" not in t  # withheld on read: parts have no tok/s/kW


def test_report_of_two_runs_says_what_compare_answers(report_run_dir, tmp_path):
    """A past defect: ``report A B --html`` had no A-vs-B section. It now leads the comparison with
    the lines ``wattbench compare A B`` answers with, word for word."""
    import html as _html

    from tests.fakes.report_runs import write_run
    from wattbench.analysis.compare import compare
    from wattbench.report.comparison import answer_lines
    from wattbench.report.data import RunData
    from wattbench.report.html import build_html

    other = write_run(tmp_path / "run-b", run_id="run-other", seed=7)
    runs = [RunData(report_run_dir), RunData(other)]
    page = build_html(runs)
    want = answer_lines(compare([r.result for r in runs]))
    assert len(want) >= 2 and want[0].startswith("A = baseline ")
    section = page.split('<section id="comparison">')[1].split("</section>")[0]
    assert "<h3>A vs B (as `wattbench compare` answers)</h3>" in section
    for line in want:
        assert f"<li>{_html.escape(line)}</li>" in section
