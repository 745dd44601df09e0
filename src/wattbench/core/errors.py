"""Errors a user can act on.

A ``UserError`` is turned by the CLI into one line on stderr and exit code 2 (bad input,
unreachable target, missing dependency). Its message names what is wrong and what to do.
Anything else is a bug and keeps its traceback.

Exit codes (README, "Exit codes"): 0 done; 1 a failed check or an internal error; 2 bad input or
environment; 3 the run finished but a level, or one trial of a level, completed no measured request
(that trial has no figure; a level none of whose trials measured is ``invalid``); 4 the target
stopped answering mid-run (``TargetStopped``); 5 ``--strict`` and a figure not ``valid``; 6
``regress``: no check failed, but one is inconclusive (its noise cannot tell whether it holds); 130
interrupted.
"""

from __future__ import annotations

import os
import errno as _errno
import stat


class WattbenchError(Exception):
    """Base class for wattbench's own errors."""

    exit_code = 1


class UserError(WattbenchError):
    """Bad input or environment: one clear line, exit code 2."""

    exit_code = 2


class StorageError(UserError):
    """A write to a run's files failed (disk full, quota, a read-only or immutable directory): one
    line naming the file, the system's reason and what to do; exit code 2. ``errno`` is the failed
    call's error number (None when unknown), ``path`` the file."""

    def __init__(self, path: str | os.PathLike[str], exc: OSError):
        why = exc.strerror or str(exc) or type(exc).__name__
        fix = ("make it writable or choose another --out" if exc.errno in (_errno.EPERM, _errno.EACCES, _errno.EROFS)
               else "free space or choose another --out")
        super().__init__(f"cannot write {path}: {why}; {fix} (files written before are unchanged)")
        self.path = str(path)
        self.errno = exc.errno
        self.reason = why


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


class TargetStopped(WattbenchError):
    """The target stopped answering mid-level (``load/liveness.py``): the level and the run stop,
    every record measured is kept, exit code 4."""

    exit_code = 4


class LevelFailed(WattbenchError):
    """A load worker failed mid-level (a crash, an exception in its loop): the run stops; the
    requests the level completed are kept (``.outcome``) and the level is recorded ``invalid``."""


class Interrupted(WattbenchError):
    """The run was interrupted (SIGINT/SIGTERM); what was measured is kept."""

    exit_code = 130


EXIT_EMPTY_LEVEL = 3
EXIT_STRICT = 5  # --strict: a figure of a complete run is not `valid` (run.benchmark.strict_failures)
EXIT_TARGET_STOPPED = TargetStopped.exit_code
EXIT_INCONCLUSIVE = 6  # regress: no check failed, one could not be decided (analysis.regress.RegressReport.verdict)


def not_a_file_reason(path: str | os.PathLike[str]) -> str:
    """Why ``path`` is not a regular file a command can read, for its one error line: ``no such
    file``, ``a directory, not a file``, or ``not a regular file (a FIFO, a device or a socket)`` —
    a FIFO given to ``-w`` or ``--space`` was reported as missing."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return "no such file"
    if stat.S_ISDIR(mode):
        return "a directory, not a file"
    return "not a regular file (a FIFO, a device or a socket)"
