"""The monitor's history file: JSON lines appended and flushed as they come.

Line types: ``meta`` (first line of each start: target, sensors, windows, wall-clock anchor),
``span`` (one per accounted span: time, energy and power per boundary, tokens, state, window
figures), ``segment`` (an idle/loaded segment when it closes), ``summary`` (at a clean stop).
Times: ``t_s`` seconds since the monitor started (monotonic clock) and ``wall`` (ISO 8601 UTC
from the start's wall-clock anchor). With ``max_bytes`` the file rotates: ``FILE`` -> ``FILE.1``
… up to ``backups`` old files.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import stat
from pathlib import Path
from typing import Any, BinaryIO

from wattbench.core.clock import ClockAnchor
from wattbench.core.errors import UserError
from wattbench.core.secret_scope import registered


def _clean(x: Any) -> Any:
    if isinstance(x, float):
        return round(x, 6) if x == x and x not in (float("inf"), float("-inf")) else None
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    return x


class HistoryWriter:
    def __init__(self, path: str | Path, *, max_bytes: int | None = None, backups: int = 3,
                 anchor: ClockAnchor | None = None) -> None:
        self.path = Path(path)
        if self.path.is_dir():
            raise UserError(f"--history {self.path} is a directory; give a file path")
        if not self.path.parent.exists():
            raise UserError(f"--history {self.path}: folder {self.path.parent} does not exist")
        if max_bytes is not None and max_bytes <= 0:
            raise UserError("history rotation size must be > 0 bytes")
        self.max_bytes = max_bytes
        self.backups = backups
        self.anchor = anchor or ClockAnchor.take()
        self.lines = 0
        self.rotations = 0
        self.failed: str | None = None  # why the last write failed (the file stays as it was)
        self.created = not os.path.lexists(self.path)  # this writer made the file
        self._f = _open_regular(self.path)

    def wall(self, t_ns: int) -> str:
        w = self.anchor.to_wall_ns(t_ns)
        return _dt.datetime.fromtimestamp(w / 1e9, tz=_dt.timezone.utc).isoformat(timespec="milliseconds")

    def write(self, obj: dict[str, Any]) -> bool:
        """Append one line; False (and ``failed`` says why) when it cannot be written — a full
        disk, a file made read-only — after which nothing more is written: the caller stops, its
        figures kept, instead of a traceback."""
        if self.failed is not None:
            return False
        # the registered secrets (key, URL credentials) scrubbed string by string, wherever a server
        # echoed them (a /metrics label that became a by_model key, an error)
        line = registered().json_text(json.dumps(_clean(obj), separators=(",", ":"), default=str)) + "\n"
        data = line.encode("utf-8")
        try:
            if self.max_bytes is not None and self._f.tell() + len(data) > self.max_bytes and self._f.tell() > 0:
                self._rotate()
            start = self._f.tell()
            try:
                view = memoryview(data)
                while view:  # unbuffered: a short write is retried, a failed one raises here
                    n = self._f.write(view)
                    view = view[n or 0:]
            except OSError:
                # a line cut short (the disk filled mid-write) is taken back: the file stays JSON lines
                os.ftruncate(self._f.fileno(), start)
                raise
        except OSError as e:
            self.failed = f"--history {self.path}: cannot write it ({e.strerror or type(e).__name__})"
            return False
        self.lines += 1
        return True

    def _rotate(self) -> None:
        self._f.close()
        for i in range(self.backups - 1, 0, -1):
            src = Path(f"{self.path}.{i}")
            if src.exists():
                os.replace(src, f"{self.path}.{i + 1}")
        if self.backups > 0:
            os.replace(self.path, f"{self.path}.1")
        else:
            self.path.unlink()
        self._f = _open_regular(self.path)
        self.rotations += 1

    def close(self) -> None:
        if not self._f.closed:
            try:
                self._f.close()
            except OSError:  # the flush of a full disk: already said by the failed write
                pass


    def discard_if_new_and_empty(self) -> None:
        """Remove the file if this writer created it and wrote nothing (a start refused after it
        was opened)."""
        self.close()
        if self.created and self.lines == 0:
            with contextlib.suppress(OSError):
                if self.path.stat().st_size == 0:
                    self.path.unlink()


def _open_regular(path: Path) -> BinaryIO:
    """``path`` opened to append, refused in one line unless it is a regular file (or new): a FIFO
    with no reader would block the monitor forever, a device (``/dev/full``) fails every write.
    Opened without blocking and checked on the open descriptor, so a path swapped in between
    cannot slip through."""
    try:  # /proc/x, a read-only or immutable folder, a FIFO with no reader: one line before the monitor starts
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0),
                     0o644)
    except OSError as e:
        raise UserError(f"--history {path}: cannot write it ({e.strerror or type(e).__name__}); give a "
                        "writable file") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UserError(f"--history {path} is not a regular file (a pipe, socket or device); give a file path")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "ab", buffering=0)
