"""Every example in a command's --help survives the help formatter at 80 columns, line for line, so
it can be copied and pasted (a past defect: click re-wrapped the monitor and tune examples, splitting
``--axis max-`` from ``num-seqs``). An example is a line of the help text that starts with
``wattbench`` or ``sudo wattbench``, and the ``\\``-continued lines after it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from wattbench.cli.main import build_command


def _commands():
    root = build_command()
    out = []

    def walk(cmd, path):
        if getattr(cmd, "commands", None):
            for name, sub in cmd.commands.items():
                walk(sub, [*path, name])
        out.append((path, cmd))

    walk(root, [])
    return out


def _examples(help_text: str) -> list[str]:
    lines, keep, cont = [], [], False
    for raw in (help_text or "").splitlines():
        s = raw.strip()
        if s.startswith(("wattbench ", "sudo wattbench ")) or cont:
            keep.append(s)
        cont = bool(keep) and s.endswith("\\") and (s in keep)
        if not cont and keep:
            lines += keep
            keep = []
    return lines + keep


COMMANDS = [(p, c) for p, c in _commands() if _examples(c.help)]


def test_there_are_examples_to_check():
    names = {" ".join(p) for p, _ in COMMANDS}
    assert {"monitor", "tune", "doctor", "plan", "run"} <= names


@pytest.mark.parametrize("path,cmd", COMMANDS, ids=[" ".join(p) for p, _ in COMMANDS])
def test_help_examples_are_kept_line_for_line_at_80_columns(path, cmd):
    res = subprocess.run([sys.executable, "-m", "wattbench", *path, "--help"], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "COLUMNS": "80"})
    assert res.returncode == 0, res.stderr
    shown = [ln.strip() for ln in res.stdout.splitlines()]
    for ex in _examples(cmd.help):
        assert ex in shown, f"{' '.join(path)}: example line re-wrapped: {ex!r}"
    for ln in res.stdout.splitlines():
        if ln.strip().startswith(("wattbench ", "sudo wattbench ", "--")) and ln.startswith("    "):
            assert len(ln) <= 80, ln
