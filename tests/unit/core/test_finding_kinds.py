"""The one table of finding kinds (``core.schema.FindingKind``): what every producer names, what an
older file's unknown kind reads as, and the docs' copy of the table."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from wattbench.core.schema import Finding, FindingKind, Validity

ROOT = Path(__file__).resolve().parents[3]


def test_an_unknown_kind_of_an_older_file_reads_as_legacy_and_is_kept_as_written():
    v = Validity.model_validate({"verdict": "warn", "findings": [
        {"kind": "thermal_drift", "severity": "warn", "text": "GPU warmed up", "figures": ["efficiency"]},
        {"kind": "loop_lag", "severity": "note", "text": "lag"}]})
    old, known = v.findings
    assert old.kind is FindingKind.LEGACY and old.kind_as_written == "thermal_drift"
    assert old.severity == "warn" and old.text == "GPU warmed up" and old.figures == ("efficiency",)
    assert known.kind is FindingKind.LOOP_LAG and not known.model_extra
    back = Validity.model_validate_json(v.model_dump_json())
    assert back.findings[0].model_dump(mode="json")["kind_as_written"] == "thermal_drift"
    assert back == v


def test_a_kind_is_written_as_its_word():
    f = Finding(kind=FindingKind.SMALL_SAMPLE, severity="note", text="x")
    assert f.model_dump(mode="json")["kind"] == "small_sample" and f.kind == "small_sample"
    assert f"{f.kind}" == "small_sample"


def test_every_kind_has_a_meaning_and_a_severity_of_the_scale():
    for k in FindingKind:
        assert k.meaning and k.default_severity in ("note", "estimate", "warn", "invalid"), k
        assert k.value == k.name.lower()


def test_every_producer_names_its_kind_from_the_table():
    """No finding is made with a kind spelt as a string: ``rule``/``judged``/``_energy``/``Finding``
    take a ``FindingKind`` member."""
    bad = []
    for path in (ROOT / "src" / "wattbench").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            if name in ("rule", "judged", "_energy") and node.args and isinstance(node.args[0], ast.Constant):
                bad.append(f"{path.name}:{node.lineno}")
            if name == "Finding":
                for kw in node.keywords:
                    if kw.arg == "kind" and isinstance(kw.value, ast.Constant):
                        bad.append(f"{path.name}:{node.lineno}")
    assert not bad, bad


def test_the_docs_table_is_the_enum():
    text = (ROOT / "docs" / "accounting.md").read_text()
    rows = re.findall(r"^\| `([a-z_]+)` \| `([a-z]+)` \| (.+) \|$", text, re.M)
    assert [(k, s, m) for k, s, m in rows] == [(k.value, k.default_severity, k.meaning) for k in FindingKind]
