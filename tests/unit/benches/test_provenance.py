"""Evidence that says where it came from: every committed data directory carries a PROVENANCE.json
(benches/gpu/provenance.py: the format) naming the script, arguments, commit, device and date that
made it; the shared GPU preamble writes one for each run; and every bench script is referenced from
the docs or from another script, so nothing in benches/ is an orphan nobody can find or re-run."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benches.gpu import provenance  # the repository root is on the tests' path

ROOT = Path(__file__).resolve().parents[3]
DATA_ROOTS = (ROOT / "docs" / "validation-data", ROOT / "benches" / "data")


def _data_dirs() -> list[Path]:
    return sorted(d for root in DATA_ROOTS for d in root.iterdir() if d.is_dir())


def _nearest_provenance(path: Path, top: Path) -> Path | None:
    for d in [path.parent, *path.parent.parents]:
        if (d / "PROVENANCE.json").is_file():
            return d / "PROVENANCE.json"
        if d == top:
            return None
    return None


@pytest.mark.parametrize("data_dir", _data_dirs(), ids=lambda d: str(d.relative_to(ROOT)))
def test_every_data_directory_has_sound_provenance(data_dir):
    own = data_dir / "PROVENANCE.json"
    assert own.is_file(), (
        f"{data_dir.relative_to(ROOT)} has no PROVENANCE.json: write the run's data with "
        "benches/gpu/preamble.sh, or reconstruct it from its logs and git history (\"reconstructed\": true)"
    )
    for f in data_dir.rglob("*"):
        if f.is_file() and f.name != "PROVENANCE.json":
            assert _nearest_provenance(f, data_dir) is not None, f"{f.relative_to(ROOT)}: no PROVENANCE.json above it"
    for p in data_dir.rglob("PROVENANCE.json"):
        doc = json.loads(p.read_text())
        problems = provenance.problems(doc)
        assert not problems, f"{p.relative_to(ROOT)}: " + "; ".join(problems)
        # every file a provenance names as one of its parts is there (a renamed or dropped file
        # would leave the record describing data that is not in the directory)
        for part in doc.get("parts", []):
            for name in part["files"]:
                assert (p.parent / name).exists(), f"{p.relative_to(ROOT)} names {name}, which is not there"


def test_a_record_without_what_it_does_not_know_is_refused():
    good = {
        "format": provenance.FORMAT, "script": "s.sh", "args": [], "commit": None, "device": None,
        "date": "2026-12-01", "reconstructed": True, "unknown": ["commit"], "sources": ["log.txt"],
    }
    assert provenance.problems(good) == []
    for drop in ("unknown", "sources", "commit", "script"):
        bad = {k: v for k, v in good.items() if k != drop}
        assert provenance.problems(bad), drop
    assert provenance.problems({**good, "reconstructed": "yes"})


def _script_names() -> list[Path]:
    return sorted(
        p for d in (ROOT / "benches", ROOT / "benches" / "gpu") for p in d.iterdir()
        if p.is_file() and p.suffix in (".py", ".sh") and p.name != "__init__.py"
    )


def _referring_texts() -> dict[Path, str]:
    texts = {p: p.read_text(errors="replace") for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]}
    for p in _script_names():
        texts[p] = p.read_text(errors="replace")
    return texts


@pytest.mark.parametrize("script", _script_names(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_bench_script_is_referenced_from_the_docs_or_another_script(script):
    # by its file name (with or without its folder), or, for a module, imported by a script beside it
    pattern = re.compile(
        r"(?<![\w./-])(?:benches/(?:gpu/)?)?" + re.escape(script.name) + r"(?![\w-])"
        + (rf"|^\s*(?:from {re.escape(script.stem)} import|import {re.escape(script.stem)}\b)" if script.suffix == ".py" else ""),
        re.MULTILINE,
    )
    where = [p for p, text in _referring_texts().items() if p != script and pattern.search(text)]
    assert where, (
        f"{script.relative_to(ROOT)} is referenced nowhere (README.md, docs/*.md, other bench scripts): "
        "say in the doc that uses its output how to run it, or remove it (git keeps it)"
    )


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("git") is None, reason="needs bash and git")
def test_the_preamble_writes_the_runs_provenance_and_tees_its_log(tmp_path):
    out = tmp_path / "out"
    script = tmp_path / "scenario.sh"
    script.write_text('source benches/gpu/preamble.sh\necho "scenario ran with $# args"\n')
    python_dir = str(Path(sys.executable).parent)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python3").symlink_to(sys.executable)  # the preamble calls python3
    env = {
        **os.environ, "OUT": str(out), "PATH": f"{tmp_path / 'bin'}:{python_dir}:{os.environ.get('PATH', '')}",
        "RUN_WHAT": "a test", "WATTBENCH_API_KEY": "sk-never-recorded",
        # no wheels to install: a checkout may hold the device's (.whl/, built for its Python)
        "WHEEL_DIR": str(tmp_path / "no-wheels"),
    }
    env.pop("WATTBENCH_COMMIT", None)
    done = subprocess.run(
        ["bash", str(script), "-c", "16,64", "two words"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads((out / "PROVENANCE.json").read_text())
    assert provenance.problems(doc) == []
    assert doc["args"] == ["-c", "16,64", "two words"]
    assert doc["reconstructed"] is False
    assert doc["script"].endswith("scenario.sh")
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode == 0:
        assert doc["commit"] == head.stdout.strip()
    assert doc["env"].get("RUN_WHAT") == "a test"
    assert "sk-never-recorded" not in (out / "PROVENANCE.json").read_text()
    assert "scenario ran with 3 args" in (out / "log.txt").read_text()


def test_the_preamble_refuses_to_run_without_an_output_directory(tmp_path):
    script = tmp_path / "scenario.sh"
    script.write_text('source benches/gpu/preamble.sh\necho ran\n')
    env = {k: v for k, v in os.environ.items() if k != "OUT"}
    done = subprocess.run(["bash", str(script)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "OUT is not set" in done.stderr
    assert "ran" not in done.stdout
