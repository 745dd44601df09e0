"""The HTML report in headless Chromium: no console errors, plots render, injected scripts stay inert,
nothing is fetched from the network, and the screenshot shows a real page."""

from __future__ import annotations

import pytest

from tests.fakes.browser import find_chromium, inspect_page, png_stats
from tests.fakes.report_runs import write_run
from wattbench.core.numbers import fmt
from wattbench.report.data import RunData
from wattbench.report.html import render_html
from wattbench.core.schema import TrialsBlock

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(find_chromium() is None, reason="chromium not installed (apt-get install -y chromium)"),
]

ALL_PLOTS_DRAWN = (
    "document.querySelectorAll('script.plot-data').length > 0 && "
    "document.querySelectorAll('.js-plotly-plot').length === document.querySelectorAll('script.plot-data').length && "
    "Array.from(document.querySelectorAll('.js-plotly-plot')).every(p => p.querySelector('.main-svg'))"
)
CHECKS = {
    "plot_divs": "document.querySelectorAll('.js-plotly-plot').length",
    "plot_specs": "document.querySelectorAll('script.plot-data').length",
    "main_svgs": "document.querySelectorAll('.js-plotly-plot .main-svg').length",
    "traces": "document.querySelectorAll('.js-plotly-plot .trace').length",
    "pwned": "typeof window.__pwned",
    "script_elements": "document.scripts.length",
    "text": "document.body.innerText",
    "legend_text": "Array.from(document.querySelectorAll('.legendtext')).map(e => e.textContent).join('\\n')",
    "pre_text": "Array.from(document.querySelectorAll('pre')).map(e => e.textContent).join('\\n')",
    "xtitles": "Array.from(document.querySelectorAll('.g-xtitle')).map(e => e.textContent)",
    "first_banner": "document.querySelector('.banner') && document.querySelector('.banner').textContent",
    "first_plot_below_banner": "document.querySelector('.banner').getBoundingClientRect().top < "
                               "document.querySelector('.js-plotly-plot').getBoundingClientRect().top",
}


def _check(path, shot):
    rep = inspect_page(path, wait_js=ALL_PLOTS_DRAWN, evaluate=CHECKS, screenshot=shot)
    assert rep.errors() == []
    assert all(u.startswith(("file://", "data:", "blob:", "about:")) for u in rep.requests), rep.requests
    v = rep.values
    assert v["plot_divs"] == v["plot_specs"] >= 1
    assert v["main_svgs"] >= v["plot_divs"]
    assert v["traces"] > v["plot_divs"]
    assert v["pwned"] == "undefined"
    stats = png_stats(shot)
    assert stats["width"] == 1400 and stats["height"] == 1000
    assert stats["colors"] > 20 and 0.02 < stats["nonwhite_fraction"] < 0.98
    return rep


def test_single_run_report_in_chromium(tmp_path):
    run = RunData(write_run(tmp_path / "run"))
    html = render_html([run], tmp_path / "report.html")
    rep = _check(html, tmp_path / "report.png")
    v = rep.values
    assert v["plot_divs"] == 1 + 3 + 5  # efficiency curve, 3 timelines, latency, throughput, tok/s/kW, Pareto, idle/dynamic
    # injected text is shown as text, in HTML and inside plots
    assert "<script>window.__pwned=1;alert(1)</script> tell me a story" in v["pre_text"]
    assert "concurrency=16 </script><script>window.__pwned=3</script>" in v["text"]
    assert 'model_name="tiny-<script>window.__pwned=4</script>-model"' in v["legend_text"]
    assert v["first_banner"].startswith("run-report-fake: INVALID")
    assert v["first_plot_below_banner"] is True
    assert "time since run start (s)" in v["xtitles"]


def test_no_energy_and_comparison_report_in_chromium(tmp_path):
    a = RunData(write_run(tmp_path / "a"))
    b = RunData(write_run(tmp_path / "b", energy=False, run_id="run-noenergy", slo=False))
    html = render_html([a, b], tmp_path / "cmp.html")
    rep = _check(html, tmp_path / "cmp.png")
    assert "energy unavailable: no sensors: --no-sensors was given" in rep.values["text"]
    assert "Comparison of runs" in rep.values["text"]


def _with_trials(result):
    """The fake run with a trials block on level c=4 (hand-written figures: the ground truth shown)."""
    lv = result.levels[1]
    lv.trials = TrialsBlock.model_validate({"n": 3, "confidence": 0.95, "figures": {
        "output_tokens_per_s": {"mean": 240.0, "ci_low": 230.0, "ci_high": 250.0, "n": 3},
        "output_tokens_per_s_per_kw@accelerator": {"mean": 1700.0, "ci_low": 1600.0, "ci_high": 1800.0, "n": 3},
        "j_per_output_token@accelerator": {"mean": 0.6, "ci_low": 0.55, "ci_high": 0.65, "n": 3},
        "output_tokens_per_s_per_kw@node": {"mean": 420.0, "ci_low": 400.0, "ci_high": 440.0, "n": 3},
        "j_per_output_token@node": {"mean": 2.4, "ci_low": 2.3, "ci_high": 2.5, "n": 3},
        "goodput_per_kw@node": {"mean": 410.0, "ci_low": 390.0, "ci_high": 430.0, "n": 3},
        "ttft_p99_ms": {"mean": 88.0, "ci_low": 80.0, "ci_high": 96.0, "n": 3},
    }})
    return result


def test_first_screen_answers_the_run(tmp_path):
    """Within the first 1000 px: the answer as one big figure — the goodput tok/s per kW of
    the best level under the SLO at the headline boundary, the trials' mean with its CI — with its
    level and verdict; the run's verdict with the notes collapsed under one line; the efficiency–load
    curve led by goodput per kW (the SLO-bound curve), with tok/s per kW, J/token and p99 TTFT against
    concurrency and CI bars from the trials; and the table of levels. The timelines only below."""
    from wattbench.report import summary as S
    from wattbench.analysis.figures import reported_figures
    from wattbench.report.labels import short_label
    from wattbench.report.notes import note_lines
    from wattbench.results.rundir import write_result

    d = write_run(tmp_path / "run")
    run = RunData(d)
    r = _with_trials(run.result)
    write_result(d, r)
    run = RunData(d)
    html = render_html([run], tmp_path / "report.html")
    best = S.best_under_slo(run.result)
    assert best is not None and best[0] is not None
    rep = inspect_page(html, wait_js=ALL_PLOTS_DRAWN, screenshot=tmp_path / "first.png", evaluate={
        "curve_top": "document.querySelector('.js-plotly-plot').getBoundingClientRect().top",
        "curve_bottom": "document.querySelector('.js-plotly-plot').getBoundingClientRect().bottom",
        "curve_title": "document.querySelector('.js-plotly-plot .gtitle').textContent",
        "curve_ytitles": "Array.from(document.querySelectorAll('.js-plotly-plot')[0].querySelectorAll('.g-ytitle,"
                         " .g-y2title, .g-y3title')).map(e => e.textContent)",
        "error_bars": "document.querySelectorAll('.js-plotly-plot')[0].querySelectorAll('g.errorbar').length",
        "answer": "document.querySelector('.answer').textContent",
        "summary_top": "document.querySelector('table.summary').getBoundingClientRect().top",
        "timeline_top": "Array.from(document.querySelectorAll('.js-plotly-plot .gtitle'))"
                        ".find(e => e.textContent.endsWith('timeline')).getBoundingClientRect().top",
        "trials_text": "document.querySelector('table.trials').innerText",
        "banner": "document.querySelector('.banner').textContent",
        "hero_big": "document.querySelector('.hero .big').textContent",
        "hero_unit": "document.querySelector('.hero .unit').textContent",
        "hero_where": "document.querySelector('.hero .where').textContent",
        "hero_ci": "document.querySelector('.hero .ci') && document.querySelector('.hero .ci').textContent",
        "hero_bottom": "document.querySelector('.hero').getBoundingClientRect().bottom",
        "hero_font_px": "parseFloat(getComputedStyle(document.querySelector('.hero .big')).fontSize)",
        "body_font_px": "parseFloat(getComputedStyle(document.body).fontSize)",
        "notes_open": "document.querySelector('.banner details.notes').open",
        "notes_summary": "document.querySelector('.banner details.notes summary').textContent",
        "notes_items": "document.querySelectorAll('.banner details.notes li').length",
        "notes_heads": "Array.from(document.querySelectorAll('.banner details.notes .note-head'))"
                       ".map(e => e.textContent)",
        "notes_list_visible": "document.querySelector('.banner details.notes ul').checkVisibility()",
        "legend": "Array.from(document.querySelectorAll('.js-plotly-plot')[0].querySelectorAll('.legendtext'))"
                  ".map(e => e.textContent)",
    })
    assert rep.errors() == []
    v = rep.values
    assert v["banner"].startswith("run-report-fake: INVALID")
    assert v["answer"].startswith(best[1])
    h = S.headline(run.result)
    assert h.level is best[0] and h.boundary == "node" and h.name == "goodput_per_kw"
    want = (410.0, "390–430") if h.level is run.result.levels[1] else (
        reported_figures(h.level, h.boundary)["goodput_per_kw"], None)  # as stored: the level ran no trials
    assert v["hero_big"] == fmt(want[0])
    assert v["hero_unit"] == "goodput tok/s per kW (node)"
    assert h.why == f"{short_label(best[0])}: the best level under the SLO ttft_p99=120ms,tpot_p99=20ms"
    assert v["hero_where"] == f"{h.why} · efficiency verdict {h.level.validity.verdict}"
    assert "410 goodput tok/s/kW (node)" in v["answer"]  # the answer line quotes the same mean
    if want[1]:
        assert v["hero_ci"] == f"mean of 3 trials, 95% CI {want[1]}"
    assert v["hero_font_px"] >= 2.5 * v["body_font_px"]  # big
    assert v["hero_bottom"] < v["curve_top"]
    notes = note_lines(run.result)  # one line per distinct finding, levels in numeric order
    assert v["notes_open"] is False and v["notes_list_visible"] is False  # collapsed
    counts = ", ".join(f"{sum(n.severity == sev for n in notes)} {sev}" for sev in ("invalid", "warn", "note")
                       if any(n.severity == sev for n in notes))
    assert v["notes_summary"] == f"{len(notes)} notes ({counts})" and v["notes_items"] == len(notes)
    assert v["notes_heads"] == [sev for sev in ("invalid", "warn", "note") if any(n.severity == sev for n in notes)]
    assert v["curve_title"] == "Efficiency against load"
    assert v["curve_ytitles"] == ["goodput and output tokens/s per kW", "J per output token", "p99 TTFT (ms)"]
    assert v["legend"][0] == "goodput tok/s per kW, node (met the SLO)"
    assert v["error_bars"] >= 3  # c=4's CI on tok/s/kW, J/tok and TTFT
    assert 0 < v["curve_top"] < v["curve_bottom"] <= 1000
    assert v["summary_top"] < 1000 < v["timeline_top"]
    assert "230–250" in v["trials_text"] and "400–440" in v["trials_text"]  # at the headline boundary, node
