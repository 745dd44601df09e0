"""``--window-from FILE``: the windows a command marks for itself, one level per pair.

The command (or a script around the load) appends lines to FILE::

    start 1796125468.531687 decode-heavy     # `echo "start $(date +%s.%N) decode-heavy" >> FILE`
    end   1796125498.102334

``start SECONDS [LABEL]`` opens a window, ``end SECONDS`` closes it; blank lines and ``#`` comments
are skipped. SECONDS is a wall-clock time (``date +%s.%N``, ``time.time()``) or a
``time.perf_counter()`` reading; ``base.place_on_run_clock`` decides which from where the marks fall
against the command's run. Returns ``(label, start_ns, end_ns)`` on the marks' own clock.
"""

from __future__ import annotations

import math
from pathlib import Path

from wattbench.core.secret_scope import clip
from wattbench.core.errors import UserError
from wattbench.results.tools.base import MAX_STAMP_S
from wattbench.results.jsonfile import read_bounded

MAX_BYTES = 16 << 20  # a marker file: two short lines a window


def read_markers(path: Path) -> list[tuple[str, int, int]]:
    what = f"--window-from {path}"
    try:
        lines = read_bounded(Path(path), MAX_BYTES).decode("utf-8").splitlines()
    except OSError as e:
        raise UserError(f"{what}: cannot read it ({e.strerror or e}); did the command write it?") from None
    except UnicodeDecodeError as e:
        raise UserError(f"{what}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except ValueError as e:  # larger than the cap
        raise UserError(f"{what}: it {e}") from None
    out: list[tuple[str, int, int]] = []
    open_: tuple[str, int] | None = None
    for n, raw in enumerate(lines, 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split(None, 2)
        try:
            kind, seconds = parts[0].lower(), float(parts[1])
            if not (math.isfinite(seconds) and 0 <= seconds <= MAX_STAMP_S):
                raise ValueError(parts[1])
            t = int(round(seconds * 1e9))
        except (IndexError, ValueError):
            raise UserError(f"{what}: line {n} {clip(raw.strip(), 80)!r} is not 'start SECONDS [LABEL]' or 'end SECONDS' "
                            "(SECONDS a finite time, 0 or more)") from None
        if kind == "start":
            if open_ is not None:
                raise UserError(f"{what}: line {n} starts a window before the one started earlier ended")
            open_ = (clip(parts[2].strip(), 200) if len(parts) > 2 else f"window {len(out) + 1}", t)
        elif kind == "end":
            if open_ is None:
                raise UserError(f"{what}: line {n} ends a window that was not started")
            if t <= open_[1]:
                raise UserError(f"{what}: line {n} ends its window before it started")
            out.append((open_[0], open_[1], t))
            open_ = None
        else:
            raise UserError(f"{what}: line {n} starts with {clip(parts[0], 40)!r}; use start or end")
    if open_ is not None:
        raise UserError(f"{what}: the window started as {open_[0]!r} has no end line")
    if not out:
        raise UserError(f"{what}: it holds no start/end pair")
    return out
