"""The unit of ``wattbench doctor``: a check with a status, a message and a fix.

A ``Check`` is one check of the doctor (a run's findings are ``core.schema.Finding``): ``id``
(stable, dotted: ``env.gpu0.power_limit``), ``group`` (``environment``, ``server``, ``checklist``,
``troubleshoot``), ``status`` (``pass``, ``warn``, ``fail``, ``skip``: ``core.severity.CheckStatus``;
its ``severity`` on the one scale), a one-line ``message`` saying what was seen, a ``fix`` saying
what to do (empty when nothing is to be done) and ``data`` (the raw figures, for ``--json``).
A ``DoctorReport`` is the ordered list of checks; its exit code is 1 when any check failed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from wattbench.core.severity import CHECK_STATUSES, CheckStatus, Severity, status_severity

GROUPS: tuple[str, ...] = ("environment", "server", "checklist", "troubleshoot")


@dataclass
class Check:
    id: str
    group: str
    status: CheckStatus
    message: str
    fix: str = ""
    data: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in CHECK_STATUSES:
            raise ValueError(f"check {self.id}: status {self.status!r} is not one of {CHECK_STATUSES}")

    @property
    def severity(self) -> Severity | None:
        """The outcome on the one severity scale (``core.severity.status_severity``)."""
        return status_severity(self.status)

    def to_dict(self) -> dict[str, Any]:
        """The check as ``--json`` writes it: its fields and its ``severity`` on the one scale
        (null for ``pass``), so a script reads a doctor check and a run's finding the same way."""
        sev = self.severity
        return {**asdict(self), "severity": None if sev is None else sev.value}


@dataclass
class DoctorReport:
    checks: list[Check] = field(default_factory=list)
    target: str | None = None
    run_dir: str | None = None

    def add(self, checks: list[Check] | Check) -> None:
        self.checks.extend([checks] if isinstance(checks, Check) else checks)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {s: 0 for s in CHECK_STATUSES}
        for c in self.checks:
            out[c.status] += 1
        return out

    @property
    def failed(self) -> bool:
        return any(c.status == "fail" for c in self.checks)

    @property
    def exit_code(self) -> int:
        return 1 if self.failed else 0

    def by_id(self, check_id: str) -> Check | None:
        return next((c for c in self.checks if c.id == check_id), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "run_dir": self.run_dir,
            "counts": self.counts(),
            "ok": not self.failed,
            "checks": [c.to_dict() for c in self.checks],
        }
