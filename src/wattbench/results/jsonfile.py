"""JSON files from outside, read within bounds: a size cap before anything is read and a nesting
cap before anything is parsed.

Every JSON file wattbench reads back — a run's ``result.json`` (``rundir``), a load generator's
result files (``tools/``) — may have been edited, cut, or made to hurt: a 3 GB file is held whole
by ``json.loads`` (and several times over by the objects it builds); a 100,000-deep array raises
``RecursionError`` in the parser, and one just under the parser's own limit raises it later, in
whatever walks the data (a report, a deep copy, pydantic). So:

* ``read_bounded`` refuses a file larger than its cap from ``fstat`` (no byte of it is read) and
  reads at most the cap (a file that grows while read is cut there and refused);
* ``json_depth`` / ``loads_bounded`` (``core/jsontext.py``, the one nesting rule every reader of
  JSON from outside shares, probe answers included) refuse a text nested deeper than ``MAX_DEPTH``
  before ``json.loads`` sees it.

The errors are ``ValueError``s with a short reason; callers turn them into one line naming the file.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from wattbench.core.jsontext import MAX_DEPTH, json_depth, loads_bounded

__all__ = ["MAX_DEPTH", "TooLarge", "json_depth", "loads_bounded", "read_bounded"]


class TooLarge(ValueError):
    pass


def read_bounded(path: str | os.PathLike[str], max_bytes: int) -> bytes:
    """The bytes of a regular file of at most ``max_bytes``; ``TooLarge`` (a ``ValueError``) for a
    larger one, ``OSError`` as ``open`` raises it (``IsADirectoryError`` for a directory)."""
    p = Path(path)
    mode = os.stat(p).st_mode  # FileNotFoundError as open raises it
    if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):  # a FIFO would block the open for ever
        raise ValueError("is not a regular file (a FIFO, socket or device)")
    with open(p, "rb") as f:
        st = os.fstat(f.fileno())
        if st.st_size > max_bytes:
            raise TooLarge(f"is {_size(st.st_size)}, larger than the {_size(max_bytes)} wattbench reads")
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise TooLarge(f"is larger than the {_size(max_bytes)} wattbench reads")
    return data


def _size(n: int) -> str:
    for unit, k in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= k:
            return f"{n / k:.1f} {unit}".replace(".0 ", " ")
    return f"{n} bytes"
