"""JSON text from outside, parsed within one nesting rule: every reader of untrusted JSON — a run's
``result.json`` read back (``results/jsonfile.py``), a server's probe answers (``server/detect``,
``server/identity``), a value given on the command line (``--extra-body``) — counts the nesting
before anything is parsed.

A 100,000-deep array raises ``RecursionError`` in Python's parser, and one just under the parser's
own limit raises it later, in whatever walks the data (a report, a deep copy, pydantic). So:

* ``json_depth`` counts the nesting of a JSON text without parsing it (strings taken out first,
  as they may hold brackets; then a running sum of the brackets, in numpy: ~0.1 s per 64 MiB);
* ``loads_bounded`` refuses a text nested deeper than ``MAX_DEPTH`` before ``json.loads`` sees it;
* ``MAX_EMBEDDED_DEPTH``: how deep a value from outside that wattbench *stores* inside its own files
  may nest (a ``--extra-body``, a setting a server exposes): ``result.json`` puts such a value a few
  levels down (``config.extra_body``, ``server.effective_config``), so one at most this deep leaves
  the file within ``MAX_DEPTH`` and wattbench never writes a file it will not read back;
* ``clip_value`` makes any parsed value such a value: nesting cut at a depth, lists and objects at a
  count, strings by the caller's rule.

The errors are ``ValueError``s with a short reason; callers turn them into one line naming the
file, the flag or the probe.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable

import numpy as np

from wattbench.core.secret_scope import clip

# deeper than any file wattbench or the load generators it reads write (result.json: ~8; a GuideLLM
# benchmarks.json: ~9), far below the ~1000 at which Python's parser and every recursive walker fail
MAX_DEPTH = 64
# a stored outside value's own nesting: result.json holds it at most ~4 levels down, so 16 leaves
# 44 levels of room under MAX_DEPTH (an OpenAI request body or an engine's settings nest 2-4 deep)
MAX_EMBEDDED_DEPTH = 16

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


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


def loads_bounded(data: bytes | str, max_depth: int = MAX_DEPTH, **loads_kw: Any) -> Any:
    """``json.loads`` of a text nested at most ``max_depth`` deep; ``ValueError`` otherwise (a
    ``json.JSONDecodeError`` for a text that is not JSON). ``loads_kw`` go to ``json.loads``."""
    depth = json_depth(data)
    if depth > max_depth:
        raise ValueError(f"nested {depth} levels deep (at most {max_depth} are read)")
    try:
        return json.loads(data, **loads_kw)
    except RecursionError:  # not reachable below MAX_DEPTH; kept so no caller ever sees one
        raise ValueError(f"nested too deep (at most {max_depth} levels are read)") from None


def value_depth(v: Any) -> int:
    """The nesting of a parsed JSON value (0 for a scalar), walked without recursion."""
    deepest, stack = 0, [(v, 0)]
    while stack:
        o, d = stack.pop()
        if isinstance(o, dict):
            stack.extend((x, d + 1) for x in o.values())
        elif isinstance(o, (list, tuple)):
            stack.extend((x, d + 1) for x in o)
        else:
            deepest = max(deepest, d)
            continue
        deepest = max(deepest, d + 1)
    return deepest


def _cut_200(s: str) -> str:
    return clip(s, 200)  # scrubbed of the registered secrets, then cut


def clip_value(v: Any, max_depth: int = 2, max_items: int = 32, cut: Callable[[str], str] = _cut_200) -> Any:
    """``v`` (a parsed JSON value) within bounds: strings (object keys too) through ``cut`` (the
    caller's rule: a server's text is scrubbed before it is cut), lists and objects cut to their first
    ``max_items`` entries, and nested at most ``max_depth`` deep (``value_depth``): a list or object
    that would nest deeper is left out of its parent (a container at ``max_depth`` 0 is None). Walks at
    most ``max_depth`` levels: never deeper than the caller allows."""
    if isinstance(v, str):
        return cut(v)
    if not isinstance(v, (dict, list, tuple)):
        return v
    if max_depth <= 0:
        return None

    def fits(x: Any) -> bool:
        return max_depth > 1 or not isinstance(x, (dict, list, tuple))

    if isinstance(v, dict):
        return {cut(str(k)): clip_value(x, max_depth - 1, max_items, cut)
                for k, x in list(v.items())[:max_items] if fits(x)}
    return [clip_value(x, max_depth - 1, max_items, cut) for x in list(v[:max_items]) if fits(x)]
