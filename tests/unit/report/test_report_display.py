"""What a user reads after the answer, at 80 and 160 columns (rich ``Console(width=...)``): notes
whole with their fix and a pointer to ``report --notes``, one count of notes on every surface,
tables without orphans or empty columns, replicas per target, ``measure`` in words."""

import re

import pytest
from rich.console import Console

from tests.fakes.results_factory import make_level, make_result
from wattbench.accounting.findings import verdicts
from wattbench.report import summary as S
from wattbench.report.terminal import run_summary
from wattbench.results.schema import Finding

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
    assert want in notes_block(S.note_lines(r), r)
    other = noted_result()
    other.run_id = "run-b"
    v = compare([r, other]).verdicts[0]
    assert (v.warnings, v.notes) == (2, 1)
