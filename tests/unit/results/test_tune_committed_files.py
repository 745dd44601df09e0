"""Every committed ``tune.json`` (docs/validation-data, benches/data, tests/fixtures) loads into
today's models (``results/tune.py``), is written back key for key, value for value, in the order it
was written, and renders the same terminal summary and HTML report, byte for byte, as the code did
before tune.json's blocks became models (the golden file, ``tests/golden.py`` says how to
regenerate, on purpose only)."""

from __future__ import annotations

import hashlib
import io
import json
import os
from pathlib import Path

import pytest
from rich.console import Console

from tests import golden
from wattbench.report.tune import tune_html, tune_summary
from wattbench.results.tune import TrialFigures, load_tune, write_tune

ROOT = Path(__file__).resolve().parents[3]
GOLDEN = "committed_tunes"
ABOUT = ("The terminal summary (80 and 160 columns) and the HTML report of every committed tune.json, as the "
         "code rendered them while tune.json's blocks were dicts: a file that loads differently renders differently.")
REGEN = "WATTBENCH_REGEN_GOLDEN=1 python -m pytest tests/unit/results/test_tune_committed_files.py"
TUNES = sorted(str(p.relative_to(ROOT)) for d in ("docs/validation-data", "benches/data", "tests/fixtures")
               for p in (ROOT / d).rglob("tune.json"))


def test_the_committed_tunes_are_found() -> None:
    assert "docs/validation-data/h200-tune/tune.json" in TUNES  # a lost glob fails here


@pytest.mark.parametrize("name", TUNES)
def test_committed_tune_is_written_back_as_read(name: str, tmp_path: Path) -> None:
    raw = json.loads((ROOT / name).read_text())
    t = load_tune(ROOT / name)
    back = json.loads(t.model_dump_json())
    assert back == raw
    assert json.dumps(back) == json.dumps(raw)  # the same keys in the same order, at every depth
    assert all(isinstance(tr.figures, TrialFigures) for tr in t.trials)  # read as models, not dicts
    write_tune(tmp_path, t)
    assert load_tune(tmp_path) == t


def _render(name: str) -> dict[str, str]:
    t = load_tune(ROOT / name)
    out: dict[str, str] = {}
    for width in (80, 160):
        buf = io.StringIO()
        console = Console(file=buf, width=width, color_system=None, force_terminal=False, legacy_windows=False)
        for r in tune_summary(t):
            console.print(r)
        out[f"terminal_{width}"] = buf.getvalue()
    out["html_sha256"] = hashlib.sha256(tune_html(t).encode()).hexdigest()
    return out


@pytest.mark.parametrize("name", TUNES)
def test_committed_tune_renders_as_before(name: str) -> None:
    got = _render(name)
    assert got["terminal_80"].startswith("wattbench tune")
    if os.environ.get(golden.REGEN_ENV) is None:
        pinned = golden.GOLDEN_DIR / f"{GOLDEN}.json"
        if name not in json.loads(pinned.read_text())["data"]:
            return  # committed after the golden was written: it loads and renders; regenerating pins it
    golden.check_part(GOLDEN, name, got, about=ABOUT, regenerate=REGEN)
