"""Every committed result file (``docs/validation-data``: the ``result.json`` files and those inside
the ``.tgz`` archives; the version-1 fixtures) still loads through the one loader
(``report.data.load_runs`` → ``results.rundir.load_result``) and renders the same summary, byte for
byte: the terminal summary, the Markdown report and ``wattbench report --json``'s document (the
last two by their SHA-256). The
golden file was written by the code before the result schema's dict blocks became models, so a
schema change that reads an old file differently fails here (``tests/golden.py`` says how to
regenerate, on purpose only)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
from pathlib import Path

import pytest
from rich.console import Console

from tests import golden
from wattbench.core.schema import Result
from wattbench.report import format as F
from wattbench.report import summary as S
from wattbench.report.data import load_runs
from wattbench.report.markdown import render_markdown
from wattbench.report.tables import level_json
from wattbench.report.terminal import run_summary

ROOT = Path(__file__).resolve().parents[3]
GOLDEN = "committed_results"
ABOUT = ("The summaries of every committed result file (terminal, Markdown, report --json), as the code "
         "rendered them before the result schema's dict blocks became models: a file that loads "
         "differently renders differently.")
REGEN = "WATTBENCH_REGEN_GOLDEN=1 python -m pytest tests/unit/results/test_results_committed_files.py"


def _sources() -> list[tuple[str, Path | None]]:
    """(name, archive) for each committed result: archives by path, plain files with None."""
    out: list[tuple[str, Path | None]] = []
    for tgz in sorted((ROOT / "docs" / "validation-data").rglob("*.tgz")):
        with tarfile.open(tgz) as tf:
            for m in tf.getmembers():
                if m.isfile() and m.name.endswith("result.json"):
                    out.append((f"{tgz.relative_to(ROOT)}:{m.name}", tgz))
    for plain in sorted(list((ROOT / "docs" / "validation-data").rglob("result.json"))
                        + list((ROOT / "tests" / "fixtures" / "results_v1").rglob("result.json"))):
        out.append((str(plain.relative_to(ROOT)), None))
    return out


def _run_dir(name: str, archive: Path | None, tmp: Path) -> Path:
    """The run directory of ``name`` under ``tmp``: the archive's members beside its result.json."""
    if archive is None:
        return (ROOT / name).parent
    member = name.split(":", 1)[1]
    parent = member.rsplit("/", 1)[0] + "/" if "/" in member else ""
    with tarfile.open(archive) as tf:
        keep = [m for m in tf.getmembers() if m.isfile() and m.name.startswith(parent)
                and "/" not in m.name[len(parent):]]
        for m in keep:
            data = tf.extractfile(m)
            assert data is not None
            (tmp / m.name[len(parent):]).write_bytes(data.read())
    return tmp


def _document(data: list) -> list[dict]:
    """What ``wattbench report --json`` prints of each run: the answer, its parts, each level's headline."""
    return [{"status": d.result.status, "verdict": d.result.validity.verdict,
             "reasons": list(d.result.validity.reasons), "answer": S.answer_line(d.result),
             **S.history_summary(d.result), "not_measured": S.unmeasured_levels(d.result),
             "levels": [{"index": lv.index, "label": lv.label, "verdict": lv.validity.verdict,
                         "headline": F.headline_line(lv), **level_json(lv)} for lv in d.result.levels]}
            for d in data]


def _render(run_dir: Path) -> dict[str, str]:
    data = load_runs([run_dir])
    buf = io.StringIO()
    console = Console(file=buf, width=140, color_system=None, force_terminal=False, legacy_windows=False)
    for d in data:
        console.print(run_summary(d.result, "RUN"))
    where = str(run_dir)
    md = render_markdown(data).replace(where, "RUN")
    doc = json.dumps(_document(data), indent=1, ensure_ascii=False).replace(where, "RUN")
    # the terminal summary as text (a difference reads in the failure); the longer two by digest
    return {"terminal": buf.getvalue().replace(where, "RUN"),
            "markdown_sha256": hashlib.sha256(md.encode()).hexdigest(),
            "json_sha256": hashlib.sha256(doc.encode()).hexdigest()}


SOURCES = _sources()


def _pinned() -> set[str]:
    path = golden.GOLDEN_DIR / f"{GOLDEN}.json"
    return set(json.loads(path.read_text())["data"]) if path.exists() else set()


@pytest.mark.parametrize("name,archive", SOURCES, ids=[s[0] for s in SOURCES])
def test_committed_result_renders_as_before(name: str, archive: Path | None, tmp_path: Path) -> None:
    got = _render(_run_dir(name, archive, tmp_path))
    if not os.environ.get(golden.REGEN_ENV) and name not in _pinned():
        # committed after the golden was written: it loads and renders (its summary names its run);
        # regenerating pins it
        assert got["terminal"].startswith("wattbench ")
        return
    golden.check_part(GOLDEN, name, got, about=ABOUT, regenerate=REGEN)


def test_every_committed_result_is_checked() -> None:
    assert len(SOURCES) >= 50  # the archives' 53 results and the plain files; a lost glob fails here


def _raw(name: str, archive: Path | None) -> dict:
    if archive is None:
        return json.loads((ROOT / name).read_text())
    with tarfile.open(archive) as tf:
        data = tf.extractfile(name.split(":", 1)[1])
        assert data is not None
        return json.loads(data.read())


@pytest.mark.parametrize("name,archive", SOURCES, ids=[s[0] for s in SOURCES])
def test_typed_blocks_write_back_as_read(name: str, archive: Path | None) -> None:
    """The blocks typed since these files were written (the sensor inventory, the idle baselines,
    the prefill/decode split, the counter-vs-integral checks, the stream batching, the token source,
    the load actors) load into their models and are written back key for key, value for value, as
    the file holds them (an empty cross-check as none)."""
    raw = _raw(name, archive)
    result = Result.model_validate(raw)
    back = json.loads(result.model_dump_json())
    pd_raw = raw.get("prefill_decode") or (raw.get("extra") or {}).get("prefill_decode")
    assert back["sensors"] == raw.get("sensors", [])
    assert back["idle"] == raw.get("idle", {})
    for key, block in (pd_raw or {}).items():  # PrefillDecode writes its three keys, None where absent
        assert back["prefill_decode"][key] == block, key
    assert all(isinstance(s.kind, str) for s in result.sensors)
    if result.idle:
        assert all(b.power_w is not None for b in result.idle.values())
    # the counter-vs-integral checks (an empty one reads as none), the server's stream batching, the
    # workload's token source and a Ray level's load actors, as the file holds them
    checks = 0
    for lv_raw, lv_back, lv in zip(raw.get("levels") or [], back["levels"], result.levels):
        for window in ("energy", "energy_steady"):
            for b, block in (lv_raw.get(window) or {}).items():
                want = block.get("cross_check") or None
                assert lv_back[window][b]["cross_check"] == want, (window, b)
                if want:
                    checks += 1
                    typed = getattr(lv, window)[b].cross_check
                    assert typed is not None and typed.counter_j == want["counter_j"]
                    assert set(typed.devices) == set(want["devices"])
        assert lv_back["load"]["actors"] == (lv_raw.get("load") or {}).get("actors", [])
    assert back["server"]["stream_batching"] == (raw.get("server") or {}).get("stream_batching", {})
    wl_raw = raw.get("workload") or (raw.get("extra") or {}).get("workload")
    if wl_raw is not None:
        assert back["workload"]["tokenizer"] == wl_raw.get("tokenizer", {})
        assert result.workload is not None and result.workload.tokenizer.source == (wl_raw.get("tokenizer") or {}).get("source")
    assert checks == sum(1 for lv in result.levels for w in (lv.energy, lv.energy_steady)
                         for e in w.values() if e.cross_check is not None)


_GOLDEN_RUN = ROOT / "tests" / "fixtures" / "golden" / "run_result.json"


@pytest.mark.parametrize("name,archive", [*SOURCES, (str(_GOLDEN_RUN.relative_to(ROOT)), None)],
                         ids=[s[0] for s in SOURCES] + [str(_GOLDEN_RUN.relative_to(ROOT))])
def test_recorded_config_writes_back_key_for_key_in_order(name: str, archive: Path | None) -> None:
    """The run's configuration (``Result.config``, a ``RecordedConfig`` since these files were
    written) names every key they hold and is written back as the file holds it: the same keys in
    the same order, the same values of the same JSON types (``1.0`` stays ``1.0``), so a file
    re-written by today's wattbench keeps its configuration block byte for byte."""
    raw = _raw(name, archive)
    result = Result.model_validate(raw)
    assert result.config.model_extra == {}, name  # every key a wattbench wrote is a named field
    back = json.loads(result.model_dump_json(indent=2))["config"]
    assert json.dumps(back) == json.dumps(raw["config"])
    assert result.config.model == raw["config"].get("model") and result.config.seed == raw["config"].get("seed")
