"""What a user reads after the answer, at 80 and 160 columns (rich ``Console(width=...)``): notes
whole with their fix and a pointer to ``report --notes``, one count of notes on every surface,
tables without orphans or empty columns, replicas per target, ``measure`` in words."""

import re

import pytest
from rich.console import Console

from tests.fakes.results_factory import make_level, make_result
from wattbench.accounting.findings import verdicts
from wattbench.report.notes import note_lines
from wattbench.report.terminal import run_summary
from wattbench.core.schema import Finding

FIX = "give --tokenizer PATH (or a server with /tokenize) so prompts come out at the asked length"


def render(renderable, width: int) -> str:
    c = Console(record=True, width=width, color_system=None, file=open("/dev/null", "w"))
    c.print(renderable)
    return c.export_text()


def flat(text: str) -> str:
    return " ".join(text.split())


def noted_result(levels: int = 3):
    """A run whose every level has the same long warn (its fix at the end) and a note."""
    lvs = [make_level(i, value=v) for i, v in enumerate((1, 4, 16)[:levels])]
    for lv in lvs:
        lv.validity = verdicts([
            Finding(kind="prompt_lengths", severity="warn", figures=("prompt_lengths",), effect_pct=-25.0,
                    text=f"input tokens asked 32, the server counted 24 on average (−25%): {FIX}",
                    summary=f"prompt lengths {{effect:+}} (no tokenizer): {FIX}", basis="server usage"),
            Finding(kind="small_sample", severity="note", figures=("ttft",), text="p99 from 64 requests",
                    summary="p99 from < 100 requests (the maximum)")])
    r = make_result(levels=lvs)
    r.validity = verdicts([]).model_copy(update={"verdict": "warn", "latency": "warn"})
    return r


@pytest.mark.parametrize("width", [80, 160])
def test_a_long_note_is_folded_with_its_fix_and_points_to_report_notes(width):
    """Notes were cut at the width with their fix cut off, and nothing said where the rest was."""
    out = render(run_summary(noted_result(), "/runs/r1"), width)
    assert max(len(x.rstrip()) for x in out.splitlines()) <= width
    assert "…" not in out
    assert FIX in flat(out)  # the fix is read, whole
    note_rows = [x for x in out.splitlines() if x.startswith("! c=1,4,16: prompt lengths")]
    assert note_rows, out
    assert "2 notes (1 warn, 1 note), in full: wattbench report --notes /runs/r1" in flat(out)


def test_no_pointer_when_every_note_is_said_whole():
    r = make_result(levels=[make_level(0, value=1)])
    r.levels[0].validity = verdicts([Finding(kind="small_sample", severity="note", figures=("ttft",),
                                             text="p99 from < 100 requests (the maximum)",
                                             summary="p99 from < 100 requests (the maximum)")])
    out = flat(render(run_summary(r), 80))
    assert "p99 from < 100 requests" in out and "report --notes" not in out


def test_one_count_of_notes_in_the_summary_html_and_compare(tmp_path):
    """One run counted 5 notes in the summary, `5 notes (4 warn, 1 note)` in the HTML and
    `6 warn, 2 note` in compare (which counted each level's copy of a finding)."""
    from wattbench.analysis.compare import compare
    from wattbench.report.html_overview import notes_block

    r = noted_result()
    r.warnings = ["the server's /metrics had no token counter"]
    want = "3 notes (2 warn, 1 note)"
    assert want in flat(render(run_summary(r), 160))
    assert want in notes_block(note_lines(r), r)
    other = noted_result()
    other.run_id = "run-b"
    v = compare([r, other]).verdicts[0]
    assert (v.warnings, v.notes) == (2, 1)


def cells_of(out: str, label: str) -> list[list[str]]:
    return [x.split()[len(label.split()):] for x in out.splitlines() if re.match(rf"^{re.escape(label)}\s", x)]


@pytest.mark.parametrize("width", [80, 160])
def test_replicas_have_their_own_rows_under_the_total(width):
    """`-t A -t B`: the README promises per-target figures; the summary showed one total row."""
    from wattbench.core.schema import Latency, Requests, TargetStats, Throughput
    from tests.fakes.results_factory import stats

    lv = make_level(0, value=64, output_tokens_per_s=1500.0)
    lv.per_target = {
        "http://user:hunter2@a.example:8000/v1": TargetStats(
            requests=Requests(completed=40, failed=1), throughput=Throughput(output_tokens_per_s=1000.0),
            latency=Latency(ttft_ms=stats(41.5, 90.25), tpot_ms=stats(7.5))),
        "http://b.example:8001": TargetStats(
            requests=Requests(completed=20), throughput=Throughput(output_tokens_per_s=500.0),
            latency=Latency(ttft_ms=stats(60.5, 130.0), tpot_ms=stats(9.25)))}
    out = render(run_summary(make_result(levels=[lv])), width)
    assert "hunter2" not in out and "user" not in out
    a, b = cells_of(out, "↳ a.example:8000"), cells_of(out, "↳ b.example:8001")
    assert a and b, out
    assert {"40/1", "1,000", "41.5", "90.2", "7.50"} <= set(sum(a, [])) and {"20/0", "500", "60.5", "130", "9.25"} <= set(sum(b, []))
    lines = out.splitlines()
    total = next(i for i, x in enumerate(lines) if x.startswith("c=64 "))
    assert lines[total + 1].startswith("↳ a.example:8000") and lines[total + 2].startswith("↳ b.example:8001")


def test_a_remeasured_label_is_one_row_and_a_folded_one_is_set_apart():
    """`c=128 re-measured` wrapped in the 16-column level column: its second line read as a row."""
    lvs = [make_level(0, value=32), make_level(1, value=128), make_level(2, value=64)]
    lvs[1].label = "concurrency=128 re-measured"
    lvs[2].label = "concurrency=64 " + "x" * 40  # a custom label too long for any column: folded
    out = render(run_summary(make_result(levels=lvs)), 80)
    assert any(x.startswith("c=128 re-measured ") for x in out.splitlines())
    assert not any(x.strip() == "re-measured" or x.startswith("re-measured") for x in out.splitlines())
    lines = out.splitlines()
    i = next(k for k, x in enumerate(lines) if x.startswith("c=64 "))
    assert lines[i - 1].strip() == ""  # a blank line above the folded label's row


def _pack_groups(cols, width, key_width=6):
    from wattbench.report.tables import Column
    from wattbench.report.terminal import pack

    return pack(Column("level", ["x" * key_width], "left"), cols, width)


def test_a_ci_stays_with_its_mean_and_no_table_is_one_column():
    """The trials' `W` header landed in one table and its CI cells in the next; at 80 columns the
    J/tok column made a table of its own."""
    from wattbench.report.tables import level_columns, trial_columns
    from wattbench.core.schema import TrialsBlock

    lvs = [make_level(i, value=v, power_w={"accelerator": 700.0, "node": 1100.0}) for i, v in enumerate((1, 8, 64))]
    figures = {"output_tokens_per_s": (1000.0, 20.0), "output_tokens_per_s_per_kw": (1428.6, 30.0),
               "j_per_output_token": (0.7, 0.01), "avg_power_w": (700.0, 5.0), "ttft_p99_ms": (120.0, 4.0),
               "tpot_p50_ms": (20.0, 0.5)}
    from tests.fakes.results_factory import trials_block

    for lv in lvs:
        lv.trials = TrialsBlock.model_validate(trials_block(figures))
    r = make_result(levels=lvs)
    for width in (80, 100, 160):
        for g in _pack_groups(trial_columns(r), width):
            for k, c in enumerate(g):
                if c.header == "95% CI":
                    assert k > 0 and g[k - 1].header.endswith("mean"), [x.header for x in g]
        groups = _pack_groups(level_columns(r), width)
        assert all(len(g) > 1 for g in groups), [[c.header for c in g] for g in groups]
    out = render(run_summary(r), 80)
    assert max(len(x.rstrip()) for x in out.splitlines()) <= 80


def test_one_latency_stays_in_one_table_at_160_columns():
    """At 160 columns E2E p99 spilled into a third table of its own."""
    from wattbench.report.tables import serving_columns

    lvs = [make_level(i, value=v, e2e_p99_ms=12345.0) for i, v in enumerate((1, 8, 128))]
    r = make_result(levels=lvs)
    groups = _pack_groups(serving_columns(r), 160, key_width=17)
    for kind in ("TTFT", "TPOT", "ITL", "E2E"):
        holding = [i for i, g in enumerate(groups) for c in g if c.header.startswith(kind + "\n")]
        assert len(set(holding)) == 1 and len(holding) == 5, (kind, holding)
    assert all(len(g) > 1 for g in groups)


def test_no_column_of_dashes_without_energy_and_no_one_model_lines():
    """A run without energy printed a table of `–`; one model printed `by model … mock … (100.0%)`
    once per level."""
    from wattbench.core.schema import EnergyShare, RequestAttribution

    lvs = [make_level(i, value=v, goodput_rps=1.0) for i, v in enumerate((1, 4))]
    for lv in lvs:
        lv.energy = {}
    r = make_result(levels=lvs, slo="ttft_p99=200ms")
    out = render(run_summary(r), 160)
    assert "tok/s/kW" not in out and "goodput\ntok/s/kW" not in out
    assert not any(re.fullmatch(r"[\s–]+", x.split(maxsplit=1)[1] if " " in x.strip() else "x")
                   for x in out.splitlines() if x.startswith("c="))
    one = make_result(levels=[make_level(0, value=1)])
    one.levels[0].attribution = {"accelerator": RequestAttribution(
        boundary="accelerator", basis="gross", energy_j=4200.0, requests=10,
        by_model={"mock": EnergyShare(requests=10, energy_j=4200.0, share=1.0)})}
    assert "by model" not in render(run_summary(one), 160)
    two = one.model_copy(deep=True)
    two.levels[0].attribution["accelerator"].by_model = {
        "a": EnergyShare(requests=6, energy_j=3000.0, share=0.714), "b": EnergyShare(requests=4, energy_j=1200.0,
                                                                                   share=0.286)}
    assert "by model" in render(run_summary(two), 160)


def test_markdown_answer_first_label_once_and_no_raw_server_body(tmp_path):
    """report --md put the notes before the answer, wrote `node (declared, declared)` and carried
    a server's raw JSON body (a /tokenize answer) into a warning."""
    from wattbench.core.errors import UserError
    from wattbench.report.data import RunData
    from wattbench.report.markdown import render_markdown
    from wattbench.results.rundir import write_result
    from wattbench.workload.tokenizer import _count_from

    r = noted_result()
    for lv in r.levels:
        for be in lv.energy.values():
            be.label, be.method = "declared", "declared"
    write_result(tmp_path, r)
    text = render_markdown([RunData(tmp_path)])
    assert text.index("answer: ") < text.index("prompt lengths")
    assert "(declared, declared)" not in text and "(declared)" in text
    assert "verdict: warn (efficiency) · latency warn · 2 notes (1 warn, 1 note)" in text
    with pytest.raises(UserError) as e:
        _count_from({"detail": "Not Found", "secret_body": "x" * 500}, "http://h/tokenize")
    assert "x" * 20 not in str(e.value) and "detail, secret_body" in str(e.value)


def test_replica_rows_in_markdown_and_html(tmp_path):
    from wattbench.report.data import RunData
    from wattbench.report.html import render_html
    from wattbench.report.markdown import render_markdown
    from wattbench.results.rundir import write_result
    from wattbench.core.schema import Requests, TargetStats, Throughput

    lv = make_level(0, value=64)
    lv.per_target = {"http://a.example:8000": TargetStats(requests=Requests(completed=40),
                                                          throughput=Throughput(output_tokens_per_s=700.0)),
                     "http://b.example:8001": TargetStats(requests=Requests(completed=20),
                                                          throughput=Throughput(output_tokens_per_s=300.0))}
    write_result(tmp_path, make_result(levels=[lv]))
    md = render_markdown([RunData(tmp_path)])
    assert "| ↳ a.example:8000 |  | 40/0 | 700 |" in md and "| ↳ b.example:8001 |  | 20/0 | 300 |" in md
    page = render_html([RunData(tmp_path)], tmp_path / "r.html").read_text()
    assert "↳ a.example:8000" in page and "↳ b.example:8001" in page


def test_j_per_total_token_stands_beside_j_per_output_token_at_80_and_160_columns():
    """InferenceX's J per total token (input + output) beside J per output token, for each
    boundary, in the summary's level table at 80 and 160 columns, no line wider than the terminal.
    Hand-checked: 1,000 out tok/s for 60 s at 128 out / 256 in per request is 60,000 output and
    468 × 256 = 119,808 input tokens; 700 W × 60 s = 42,000 J: J/tok 0.70, J/total 42,000 /
    179,808 = 0.234; the node's 1,100 W: 1.10 and 0.367 (each as the one formatter writes it)."""
    from wattbench.core.numbers import fmt

    lvs = [make_level(i, value=v, power_w={"accelerator": 700.0, "node": 1100.0}) for i, v in enumerate((1, 8))]
    r = make_result(levels=lvs)
    be = lvs[0].energy["accelerator"]
    assert be.j_per_token * (lvs[0].throughput.output_tokens + lvs[0].throughput.input_tokens) == pytest.approx(
        42_000.0, rel=1e-9)
    for width in (80, 160):
        out = render(run_summary(r), width)
        assert max(len(x.rstrip()) for x in out.splitlines()) <= width, out
        heads = [x.split() for x in out.splitlines()]
        assert any("J/tok" in h and "J/total" in h for h in heads), out  # side by side, one header line
        rows = [x.split() for x in out.splitlines() if x.startswith("c=1 ")]
        cells = [c for row in rows for c in row]
        for jt, jtotal in ((fmt(0.70), fmt(42_000 / 179_808)), (fmt(1.10), fmt(66_000 / 179_808))):
            assert jt in cells and jtotal in cells, (width, rows)
            row = next(r for r in rows if jt in r)
            assert row.index(jtotal) == row.index(jt) + 1, row  # J/total right after J/tok
