"""Every command's ``--help`` page, as a user reads it at 100 columns on a plain terminal, is kept
under ``tests/fixtures/help/`` (one file per command, ``plan_tco.txt`` for ``wattbench plan tco``),
so a change in how options are declared cannot silently change a flag, its default, its help or
the order the page lists them. A page changes only on purpose: ``WATTBENCH_REGEN_GOLDEN=1 python
-m pytest tests/e2e/test_cli_help_golden.py`` rewrites the files (the tests then fail, so that a
regeneration is never silent); review the diff and say why in the commit."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from wattbench.cli.main import build_command

HELP_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "help"
REGEN_ENV = "WATTBENCH_REGEN_GOLDEN"


def _commands(cmd, path=()):
    yield path, cmd
    for name, sub in getattr(cmd, "commands", {}).items():
        yield from _commands(sub, (*path, name))


CLI = build_command()
PAGES = [path for path, _ in _commands(CLI)]


def _file(path: tuple[str, ...]) -> Path:
    return HELP_DIR / (("_".join(path) or "wattbench") + ".txt")


def test_every_page_has_a_golden_file():
    want = {_file(p).name for p in PAGES}
    have = {f.name for f in HELP_DIR.glob("*.txt")}
    assert want == have, (sorted(want - have), sorted(have - want))


@pytest.mark.parametrize("path", PAGES, ids=lambda p: " ".join(p) or "wattbench")
def test_help_page_unchanged(path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("TERM", "dumb")
    try:
        code = CLI.main(args=[*path, "--help"], prog_name="wattbench", standalone_mode=True)
    except SystemExit as e:
        code = e.code
    got = capsys.readouterr()
    assert (code or 0) == 0, got.err
    page = got.out
    f = _file(path)
    if os.environ.get(REGEN_ENV):
        f.write_text(page)
        pytest.fail(f"rewrote {f.name}: review the diff")
    assert page == f.read_text(), f"wattbench {' '.join(path)} --help changed (see {f})"
