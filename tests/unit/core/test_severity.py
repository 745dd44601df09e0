"""The one severity scale (``core/severity.py``) and how a check's outcome reads on it."""

from __future__ import annotations

from wattbench.analysis.diagnose import Diagnosis
from wattbench.core.schema import Finding, FindingKind
from wattbench.core.severity import CHECK_STATUSES, SEVERITY_ORDER, Severity, status_severity
from wattbench.doctor.check import Check


def test_the_scale_is_ordered_mildest_first_and_written_as_its_word():
    assert [s.value for s in SEVERITY_ORDER] == ["note", "estimate", "warn", "invalid"]
    assert Finding(kind=FindingKind.GAP, severity="warn", text="x").model_dump(mode="json")["severity"] == "warn"
    assert Diagnosis(id="x", severity="note", message="m").severity is Severity.NOTE


def test_a_check_outcome_maps_onto_the_scale():
    assert {s: status_severity(s) for s in CHECK_STATUSES} == {
        "pass": None, "skip": Severity.NOTE, "warn": Severity.WARN, "fail": Severity.INVALID}
    assert Check("env.x", "environment", "fail", "m").severity is Severity.INVALID
