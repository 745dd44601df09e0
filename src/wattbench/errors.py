"""Errors a user can act on.

A ``UserError`` is turned by the CLI into one line on stderr and exit code 2 (bad input,
unreachable target, missing dependency). Its message names what is wrong and what to do.
Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations


class WattbenchError(Exception):
    """Base class for wattbench's own errors."""

    exit_code = 1


class UserError(WattbenchError):
    """Bad input or environment: one clear line, exit code 2."""

    exit_code = 2


class TargetError(UserError):
    """The target server is unreachable, not OpenAI-compatible, or refuses the model."""


class SensorError(WattbenchError):
    """A sensor could not be opened or read. ``fix`` says what to do about it."""

    def __init__(self, message: str, fix: str = ""):
        super().__init__(message + (f" ({fix})" if fix else ""))
        self.fix = fix


class EngineError(UserError):
    """An engine could not be started; carries the tail of its log."""

    def __init__(self, message: str, log_tail: str = ""):
        super().__init__(message)
        self.log_tail = log_tail


class Interrupted(WattbenchError):
    """The run was interrupted (SIGINT/SIGTERM); what was measured is kept."""

    exit_code = 130
