"""The one severity scale: how bad a thing wattbench found is, mildest first.

``note`` — said, changes nothing (below materiality, or nothing to do); ``estimate`` — a figure
rests on a model of power, not a meter; ``warn`` — a figure may be off by more than it should;
``invalid`` — a figure is not a measurement of what it names. A run's findings
(``core.schema.Finding``), a comparison's diagnoses (``analysis.diagnose.Diagnosis``: ``note`` /
``warn`` / ``invalid``) and a check's outcome (below) all read on it. A level's verdict
(``core.schema.Verdict``) is the worst severity of its findings, with ``note`` read as ``valid``.

A check (``wattbench doctor``'s ``doctor.check.Check``, ``wattbench regress``'s
``analysis.regress.CheckOutcome``) has an outcome, ``CheckStatus``: ``pass``, ``warn``, ``fail`` or
``skip`` (the words its output shows). Its severity (``status_severity``): ``pass`` none (nothing
was found), ``skip`` ``note`` (it could not be checked: said, never a warning), ``warn`` ``warn``,
``fail`` ``invalid`` (what it checks does not hold: the exit code says so). ``regress``'s gate has
no ``warn`` and one outcome more, ``inconclusive``: the noise cannot tell whether the check holds
(it says why and what would settle it; exit 6 when no check failed).
"""

from __future__ import annotations

from wattbench.core.words import WordEnum
from typing import Literal


class Severity(WordEnum):
    """The scale, mildest first (``SEVERITY_ORDER``); written as its word (``"warn"``)."""

    NOTE = "note"
    ESTIMATE = "estimate"
    WARN = "warn"
    INVALID = "invalid"


SEVERITY_ORDER: tuple[Severity, ...] = tuple(Severity)

CheckStatus = Literal["pass", "warn", "fail", "skip"]
CHECK_STATUSES: tuple[CheckStatus, ...] = ("pass", "warn", "fail", "skip")
_STATUS_SEVERITY: dict[str, Severity | None] = {"pass": None, "skip": Severity.NOTE, "warn": Severity.WARN,
                                                "fail": Severity.INVALID}


def status_severity(status: CheckStatus) -> Severity | None:
    """A check outcome's severity on the one scale (None for ``pass``: nothing was found)."""
    return _STATUS_SEVERITY[status]
