"""The package runs on the oldest Python ``pyproject.toml`` promises. .ci/run checks ``src/`` with
vermin at the floor (``enum.StrEnum``, ``typing.Required`` and ``tomllib`` are 3.11+; each once broke
the first command on 3.10); these tests keep that check honest: it fails on a newer construct, and
the floor it reads is the one mypy checks at and the README promises."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def floor() -> str:
    text = (ROOT / "pyproject.toml").read_text()
    m = re.search(r'^requires-python\s*=\s*">=\s*(3\.\d+)"', text, re.M)
    assert m, "pyproject.toml names no requires-python floor"
    return m.group(1)


def vermin(*paths: Path) -> subprocess.CompletedProcess:
    # the same arguments as .ci/run's check
    args = ["--no-tips", "--violations", "--eval-annotations", "--no-parse-comments", "-t=%s-" % floor()]
    return subprocess.run([sys.executable, "-c", "import sys, vermin; sys.exit(vermin.main())", *args,
                           *map(str, paths)],
                          capture_output=True, text=True, timeout=300)


def test_the_check_passes_code_the_floor_runs(tmp_path):
    (tmp_path / "old.py").write_text("from enum import Enum\nfrom typing import TypedDict\nx: int | None = None\n")
    assert vermin(tmp_path).returncode == 0


def test_the_check_fails_on_a_construct_newer_than_the_floor(tmp_path):
    (tmp_path / "new.py").write_text("from enum import StrEnum\n")
    out = vermin(tmp_path)
    assert out.returncode != 0 and "StrEnum" in out.stdout


def test_readme_and_mypy_name_the_same_floor():
    f = floor()
    assert f'python_version = "{f}"' in (ROOT / "pyproject.toml").read_text()
    assert f"Python ≥ {f}" in (ROOT / "README.md").read_text()
