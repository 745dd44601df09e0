"""Whether the target is still answering, judged from the requests as they finish.

A server that dies mid-level does not fail one request: every request after it fails at once
(on a closed loop, thousands per second), and a level that keeps firing only measures its own
connection errors. ``LivenessWatch`` is fed each finished request of one worker; it declares the
target down when

- ``REFUSALS_DOWN`` requests in a row could not connect (``error == "connect"``: connection
  refused, reset or timed out while connecting) with no successful request in between, or
- ``FAILURES_DOWN`` requests in a row lost their connection or could not connect (``disconnect``
  or ``connect``) with no successful request in between: every stream in flight failing, as
  behind a proxy that still accepts connections for a dead server.

Only connection-level failures count: an HTTP error status, a stall or a malformed stream come
from a server that still answers. Five refusals in a row never happen to a live server (a
listening socket accepts; a full backlog times out, it does not refuse), and a dead server
produces them within milliseconds, so the rule trips fast and never on a live target. Dropped
streams do happen to a live server; 32 in a row without one success do not (at a 30 % drop rate,
a chance of 2e-17 at any point of a level).

The level stops sending when it trips; the run stops after recording the level, names the
target and when it stopped answering, and exits with code 4 (README, "Exit codes").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from wattbench.core.schema import RequestRecord

__all__ = ["REFUSALS_DOWN", "FAILURES_DOWN", "LivenessWatch", "TargetDown"]

REFUSALS_DOWN = 5
FAILURES_DOWN = 32
CONNECTION_ERRORS = ("connect", "disconnect")


@dataclass
class TargetDown:
    """Which target stopped answering and when (ns on the run's monotonic clock)."""

    target: str
    last_ok_ns: int | None  # end of the last request that succeeded (None: none did)
    first_failure_ns: int  # the first connection failure of the streak
    refusals: int
    failures: int  # connection failures in the streak (disconnects + refusals)

    def text(self, t0_ns: int) -> str:
        """One line: the target, when it stopped answering (seconds into the level), and why."""
        when = (self.first_failure_ns - t0_ns) / 1e9
        last = ("" if self.last_ok_ns is None
                else f"; last answer {max(0.0, (self.last_ok_ns - t0_ns) / 1e9):.1f} s into the level")
        return (f"the target {self.target} stopped answering {max(0.0, when):.1f} s into the level "
                f"({self.failures} connection failures in a row, {self.refusals} of them refusals{last})")

    def to_dict(self, t0_ns: int) -> dict[str, Any]:
        return {"target": self.target, "stopped_answering_s": max(0.0, (self.first_failure_ns - t0_ns) / 1e9),
                "last_ok_ns": self.last_ok_ns, "first_failure_ns": self.first_failure_ns,
                "refusals": self.refusals, "failures": self.failures}


class LivenessWatch:
    """Fed every finished request of one target; ``down`` is set once the rule trips."""

    def __init__(self, target: str, refusals_down: int = REFUSALS_DOWN, failures_down: int = FAILURES_DOWN):
        self.target = target
        self.refusals_down = refusals_down
        self.failures_down = failures_down
        self.last_ok_ns: int | None = None
        self.streak_start_ns: int | None = None
        self.refusals = 0
        self.failures = 0
        self.down: TargetDown | None = None

    def update(self, rec: RequestRecord) -> TargetDown | None:
        """Feed one finished request; returns the verdict the first time the target is down."""
        if self.down is not None:
            return None
        if rec.ok:
            end = rec.end_ns or rec.sent_ns
            self.last_ok_ns = max(self.last_ok_ns or end, end)
            self.streak_start_ns = None
            self.refusals = self.failures = 0
            return None
        if rec.error not in CONNECTION_ERRORS:
            return None  # the server answered (an HTTP error, a stall, a bad stream)
        broke = rec.end_ns or rec.sent_ns  # when this request saw the connection fail
        self.streak_start_ns = broke if self.streak_start_ns is None else min(self.streak_start_ns, broke)
        self.failures += 1
        if rec.error == "connect":
            self.refusals += 1
        if self.refusals >= self.refusals_down or self.failures >= self.failures_down:
            self.down = TargetDown(self.target, self.last_ok_ns, self.streak_start_ns, self.refusals, self.failures)
            return self.down
        return None
