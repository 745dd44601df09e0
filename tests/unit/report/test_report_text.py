"""Markdown, terminal and the shared headline."""

from rich.console import Console

from wattbench.report import format as F
from wattbench.core.numbers import fmt, fmt_fraction_pct
from wattbench.report.data import RunData
from wattbench.report.markdown import md, render_markdown
from wattbench.report.terminal import make_progress, progress_fields, run_summary
from wattbench.core.schema import BoundaryEnergy, LevelResult, Latency, Stats, Throughput


def level(**energy):
    return LevelResult(
        index=0, label="concurrency=8",
        throughput=Throughput(output_tokens_per_s=1234.4),
        latency=Latency(ttft_ms=Stats(count=10, p99=180.2)),
        energy=energy,
    )


def test_headline_format():
    lv = level(
        node=BoundaryEnergy(boundary="node", method="power_integral", label="measured", avg_power_w=900.0,
                            output_tokens_per_s_per_kw=1371.0, j_per_output_token=0.73),
        accelerator=BoundaryEnergy(boundary="accelerator", method="counter", label="measured", avg_power_w=410.0,
                                   output_tokens_per_s_per_kw=3010.2, j_per_output_token=0.332),
    )
    # the headline rule: both measured, the outer boundary (the server) is the one quoted
    assert F.headline_line(lv) == "1,234 out tok/s · 0.90 kW (node) · 1,371 tok/s/kW · 0.73 J/tok · p99 TTFT 180 ms"
    del lv.energy["node"]
    assert F.headline_line(lv) == "1,234 out tok/s · 0.41 kW (accelerator) · 3,010 tok/s/kW · 0.33 J/tok · p99 TTFT 180 ms"


def test_headline_prefers_measured_and_names_the_label():
    lv = level(
        accelerator=BoundaryEnergy(boundary="accelerator", method="estimate", label="estimate", avg_power_w=300.0),
        wall=BoundaryEnergy(boundary="wall", method="power_integral", label="measured", avg_power_w=1500.0,
                            output_tokens_per_s_per_kw=822.9, j_per_output_token=1.2),
    )
    assert "1.50 kW (wall)" in F.headline_line(lv)
    only_declared = level(node=BoundaryEnergy(boundary="node", method="declared", label="declared", avg_power_w=2000.0))
    assert "2.00 kW (node, declared)" in F.headline_line(only_declared)
    none = LevelResult(index=1, label="x", energy_unavailable_reason="no sensor found")
    assert "energy unavailable: no sensor found" in F.headline_line(none)


def test_fmt():
    assert [fmt(x) for x in (None, 0, 0.0123, 0.4, 0.41, 1.234, 12.34, 123.4, 1234.5, float("nan"))] == [
        "–", "0", "0.012", "0.40", "0.41", "1.23", "12.3", "123", "1,234", "–"]


def test_markdown_summary(report_run_dir):
    run = RunData(report_run_dir)
    text = render_markdown([run])
    assert text.startswith("### wattbench run `run-report-fake`")
    assert "| | accelerator (measured, counter) | node (measured, power\\_integral) |" in text
    assert "<script>" not in text and "&lt;/script&gt;" in text
    lv = run.result.levels[1]
    assert f"| avg power | {fmt(lv.energy['accelerator'].avg_power_w)} W | {fmt(lv.energy['node'].avg_power_w)} W |" in text
    assert "⚠️ warn" in text and "- c=4: node: window not covered by samples 3.0%" in text
    assert md("a|b_c") == "a\\|b\\_c"


def test_markdown_no_energy(report_noenergy_dir):
    text = render_markdown([RunData(report_noenergy_dir)])
    assert text.count("energy unavailable: no sensors: --no-sensors was given") == 1  # said once
    assert "| avg power" not in text


def render(renderable, width=200):
    c = Console(record=True, width=width, color_system=None)
    c.print(renderable)
    return c.export_text()


def test_terminal_summary(report_run_dir):
    run = RunData(report_run_dir)
    out = render(run_summary(run.result))
    # the answer first, then the verdicts, then the tables
    assert out.index("answer: ") < out.index("verdict: invalid") < out.index("ok/fail")
    for lv in run.result.levels:
        assert fmt(lv.energy["node"].output_tokens_per_s_per_kw) in out
    assert "measured" in out
    # a label with rich markup is shown as typed
    assert "</script><script>window.__pwned=3</script>" in out


def test_terminal_no_energy(report_noenergy_dir):
    out = render(run_summary(RunData(report_noenergy_dir).result))
    assert out.count("energy unavailable: no sensors: --no-sensors was given") == 1


def test_progress_renderable():
    f = progress_fields(1234.0, {"node": 900.0, "accelerator": 412.0})
    assert f == {"tok_s": "1,234 out tok/s", "watts": "412 W (accelerator), 900 W (node)"}
    assert progress_fields()["watts"] == "no power reading"
    c = Console(record=True, width=150, color_system=None)
    p = make_progress(console=c, auto_refresh=False)
    task = p.add_task("concurrency=8", total=500, **progress_fields())
    p.update(task, completed=120, **f)
    c.print(p.get_renderable())
    out = c.export_text()
    assert "120/500" in out and "1,234 out tok/s" in out and "412 W (accelerator)" in out


def test_markdown_slo_columns(report_run_dir):
    run = RunData(report_run_dir)
    text = render_markdown([run])
    assert "SLO ttft\\_p99=120ms,tpot\\_p99=20ms" in text
    head = next(x for x in text.splitlines() if x.startswith("| level |"))
    assert "| SLO | met SLO | goodput tok/s | goodput tok/s/kW node |" in head
    for lv in run.result.levels[:2]:
        row = next(x for x in text.splitlines() if x.startswith(f"| c={lv.load.target_concurrency} |"))
        assert f"| {fmt_fraction_pct(lv.goodput.fraction)} |" in row


def test_shown_notes_keep_the_worst_by_the_one_severity_scale():
    """More notes than a summary shows: it keeps them worst first on the one scale (invalid, warn,
    estimate, note), so a warning is kept before an estimate said earlier, and it says how many it
    left out."""
    from tests.fakes.results_factory import make_result
    from wattbench.core.schema import Finding
    from wattbench.report.notes import MAX_NOTE_LINES, shown_notes

    r = make_result("notes")
    r.validity.findings = [Finding(severity="estimate", text="host power is a model"),
                           Finding(severity="invalid", text="the run is not a measurement")]
    r.warnings = [f"warning {i}" for i in range(MAX_NOTE_LINES)]
    r.sensor_problems = ["a sensor problem"]  # a note
    shown, left = shown_notes(r)
    kept = [n.text.split(" ", 1)[1] for n in shown]
    assert len(shown) == MAX_NOTE_LINES - 1 and left == 2 + MAX_NOTE_LINES + 1 - len(shown)
    assert kept[0] == "the run is not a measurement"  # reading order among the kept
    assert kept[1:] == [f"warning {i}" for i in range(MAX_NOTE_LINES - 2)]
    assert "host power is a model" not in kept and "a sensor problem" not in kept
