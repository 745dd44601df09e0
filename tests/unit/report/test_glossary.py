"""The glossary: one home for what each report term means (``report/glossary.py``), printed by
``wattbench report --glossary`` within the terminal's width, written out as docs/glossary.md, and
covering every term the run summary points a reader to."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from wattbench.cli.main import build_app
from wattbench.report.glossary import GLOSSARY, glossary_lines, glossary_markdown

ROOT = Path(__file__).resolve().parents[3]

# the words the summary's tables, notes and answer use, each of which must have a definition
SUMMARY_TERMS = ("TTFT", "TPOT", "ITL", "E2E", "goodput", "steady window", "boundary", "declared meter", "estimate",
                 "within noise", "beyond noise", "inconclusive", "drift", "primed", "client saturated", "per kW",
                 "J/tok, J/total", "req/s", "window", "asked, sent", "in flight", "history check", "client loop lag")


def test_docs_glossary_is_the_module_written_out():
    assert (ROOT / "docs" / "glossary.md").read_text() == glossary_markdown(), (
        "docs/glossary.md differs from report/glossary.py: write it again with "
        "python -c 'from wattbench.report.glossary import glossary_markdown; "
        "open(\"docs/glossary.md\", \"w\").write(glossary_markdown())'")


def test_every_summary_term_is_defined_in_one_or_two_sentences():
    terms = {t for t, _ in GLOSSARY}
    for want in SUMMARY_TERMS:
        assert any(t == want or t.startswith(want + " ") for t in terms), want
    assert len(terms) == len(GLOSSARY)  # each term once
    for t, text in GLOSSARY:
        assert 1 <= text.count(". ") + text.endswith(".") <= 3, t  # a sentence or two (an abbreviation aside)


def test_report_glossary_prints_every_term_within_80_columns():
    r = CliRunner().invoke(build_app(), ["report", "--glossary"], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert max(len(x) for x in lines) <= 80
    heads = [x for x in lines if not x.startswith(" ")]
    assert heads == [t for t, _ in GLOSSARY]
    assert lines == glossary_lines(80)


def test_report_without_a_run_or_glossary_says_what_to_give():
    r = CliRunner().invoke(build_app(), ["report"], env={"COLUMNS": "80"})
    assert r.exit_code == 2
    assert "give at least one run directory (or --glossary)" in r.output
