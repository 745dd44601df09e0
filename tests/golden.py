"""Golden outputs: small JSON files under ``tests/fixtures/golden/`` holding what a function computed
on fixed inputs, so that a change in its figures fails a test without keeping a copy of old code.

Each file says, in its ``about`` field, why its figures are right (the hand-checked case or the
ground-truth property tests beside it pin the rule; the golden file pins every other figure), and in
``regenerate`` how to write it again. A golden file is regenerated only on purpose, when a rule is
meant to change: ``WATTBENCH_REGEN_GOLDEN=1 python -m pytest <the test file>`` rewrites the files
its tests check (the tests then fail, so that a regeneration is never silent); review the diff.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

GOLDEN_DIR = Path(__file__).resolve().parent / "fixtures" / "golden"
REGEN_ENV = "WATTBENCH_REGEN_GOLDEN"


def _plain(x):
    """JSON-ready: numpy scalars and arrays as Python numbers and lists, tuples as lists."""
    if hasattr(x, "tolist"):
        return _plain(x.tolist())
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return repr(x)  # "nan", "inf": JSON has no spelling for them
    return x


def _diff(got, want, path: str, rel: float, out: list[str]) -> None:
    if len(out) > 20:
        return
    if isinstance(want, dict) and isinstance(got, dict):
        if list(got) != list(want):
            out.append(f"{path}: keys {list(got)[:8]} != {list(want)[:8]}")
            return
        for k in want:
            _diff(got[k], want[k], f"{path}.{k}", rel, out)
    elif isinstance(want, list) and isinstance(got, list):
        if len(got) != len(want):
            out.append(f"{path}: length {len(got)} != {len(want)}")
            return
        for i, (g, w) in enumerate(zip(got, want)):
            _diff(g, w, f"{path}[{i}]", rel, out)
    elif isinstance(want, float) and isinstance(got, (int, float)) and not isinstance(got, bool):
        if not math.isclose(got, want, rel_tol=rel, abs_tol=1e-12):
            out.append(f"{path}: {got!r} != {want!r}")
    elif got != want or type(got) is not type(want):
        out.append(f"{path}: {got!r} != {want!r}")


def check_part(name: str, key: str, got, *, about: str, regenerate: str, rel: float = 1e-9) -> None:
    """Assert ``got`` (JSON-able after numpy → lists) equals part ``key`` of the golden file
    ``name``.json: strings, ints, booleans and structure exactly, floats to ``rel`` (float sums may
    round differently across BLAS builds and thread counts; a rule change moves figures by far more).
    With ``WATTBENCH_REGEN_GOLDEN`` set, write that part instead (run without ``-n``: parts of one
    file are merged in place) and fail, so that a regeneration is never silent."""
    path = GOLDEN_DIR / f"{name}.json"
    data = json.loads(json.dumps(_plain(got)))
    if os.environ.get(REGEN_ENV):
        doc = json.loads(path.read_text()) if path.exists() else {}
        parts = doc.get("data", {})
        parts[key] = data
        doc = {"about": about, "regenerate": regenerate, "data": dict(sorted(parts.items()))}
        path.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
        raise AssertionError(f"{path} part {key!r} regenerated ({REGEN_ENV} is set): review its diff, "
                             f"then run without it")
    parts = json.loads(path.read_text())["data"]
    assert key in parts, f"{path.name} has no part {key!r}: regenerate it ({regenerate})"
    out: list[str] = []
    _diff(data, parts[key], key, rel, out)
    assert not out, f"differs from the golden {path.name} (first differences):\n" + "\n".join(out)
