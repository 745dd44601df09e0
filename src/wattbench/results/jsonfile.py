"""JSON files from outside, read within bounds: a size cap before anything is read and a nesting
cap before anything is parsed.

Every JSON file wattbench reads back — a run's ``result.json`` (``rundir``), a load generator's
result files (``tools/``) — may have been edited, cut, or made to hurt: a 3 GB file is held whole
by ``json.loads`` (and several times over by the objects it builds); a 100,000-deep array raises
``RecursionError`` in the parser, and one just under the parser's own limit raises it later, in
whatever walks the data (a report, a deep copy, pydantic). So:

* ``read_bounded`` refuses a file larger than its cap from ``fstat`` (no byte of it is read) and
  reads at most the cap (a file that grows while read is cut there and refused);
* ``json_depth`` counts the nesting of a JSON text without parsing it (strings taken out first,
  as they may hold brackets; then a running sum of the brackets, in numpy: ~0.1 s per 64 MiB);
* ``loads_bounded`` refuses a text nested deeper than ``MAX_DEPTH`` before ``json.loads`` sees it.

The errors are ``ValueError``s with a short reason; callers turn them into one line naming the file.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import stat

# deeper than any file wattbench or the load generators it reads write (result.json: ~8; a GuideLLM
# benchmarks.json: ~9), far below the ~1000 at which Python's parser and every recursive walker fail
MAX_DEPTH = 64

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


class TooLarge(ValueError):
    pass


def json_depth(data: bytes | str) -> int:
    """The deepest nesting of arrays/objects in a JSON text (0 for a scalar), without parsing it.
    Brackets inside strings do not count; a text that is not JSON gives some number (the parser
    then says what is wrong)."""
    b = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if b"[" not in b and b"{" not in b:
        return 0
    brackets = _STRING.sub(b"", b).translate(None, _NOT_BRACKETS)
    if not brackets:
        return 0
    a = np.frombuffer(brackets, dtype=np.uint8)
    steps = np.where((a == 0x5B) | (a == 0x7B), 1, -1).astype(np.int32)
    return max(0, int(np.cumsum(steps).max()))


def loads_bounded(data: bytes | str, max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads`` of a text nested at most ``max_depth`` deep; ``ValueError`` otherwise (a
    ``json.JSONDecodeError`` for a text that is not JSON)."""
    depth = json_depth(data)
    if depth > max_depth:
        raise ValueError(f"nested {depth} levels deep (at most {max_depth} are read)")
    try:
        return json.loads(data)
    except RecursionError:  # not reachable below MAX_DEPTH; kept so no caller ever sees one
        raise ValueError(f"nested too deep (at most {max_depth} levels are read)") from None


def read_bounded(path: str | os.PathLike, max_bytes: int) -> bytes:
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
