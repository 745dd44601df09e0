"""What a result read back must hold to be shown: the bounds the figures have by construction.

A result wattbench writes never holds a negative energy, token count or duration (energy is a
counter's increase or an integral of power, tokens are counts, durations differences of one
monotonic clock), never NaN or infinity (pydantic writes those as ``null``), and a run id of the
one format (``core/ids.py``; ``agree-`` ids, and short names in hand-made files). A file that
breaks one of these was edited or made to mislead — a negative energy shown as -693 tok/s per kW,
a 5 MB run id — so ``rundir.load_result`` refuses it with one line (``result_problem``) before any
reader (``report``, ``compare``, ``history import``, the planners) shows a figure of it.

Also bounded: the number of levels (``MAX_LEVELS``), so that every reader stays fast (a report of
2,000 levels takes ~3 s; of 20,000 over two minutes).

Checked, per level: the window and steady window, throughput and its token counts, request
counts, the latency statistics, and every energy block (full and steady window, per node, the
memory split's parts): each number finite, and non-negative except the figures that may be
(``ALLOWED_NEGATIVE``: dynamic energy and power, gross minus idle, go below zero when the idle
baseline read higher than the load).
"""

from __future__ import annotations

import math
import re
from typing import Iterator

from pydantic import BaseModel

from wattbench.core.secret_scope import clip
from wattbench.core.schema.level import LevelResult
from wattbench.core.schema.run import Result

MAX_LEVELS = 2000
MAX_RUN_ID_CHARS = 128
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:+-]*")
ALLOWED_NEGATIVE = frozenset({"dynamic_energy_j", "dynamic_power_w"})


def result_problem(result: Result) -> str | None:
    """The first thing wrong with a loaded ``Result`` (one short phrase), or ``None``."""
    rid = result.run_id
    if len(rid) > MAX_RUN_ID_CHARS:
        return f"run_id is {len(rid):,} characters long (at most {MAX_RUN_ID_CHARS})"
    if not RUN_ID.fullmatch(rid):
        return (f"run_id {_show(rid)} holds characters a run id does not (letters, digits and . _ : + - only, "
                "starting with a letter or digit)")
    if len(result.levels) > MAX_LEVELS:
        return f"it holds {len(result.levels):,} levels (at most {MAX_LEVELS:,} are read)"
    for lv in result.levels:
        for where, value in _numbers(lv):
            if not math.isfinite(value):
                return f"level {lv.index}: {where} is {value!r}, not a finite number"
            if value < 0 and not _may_be_negative(where):
                return f"level {lv.index}: {where} is negative ({value:g})"
    for name in ("idle_window", "idle_after_window"):
        w = getattr(result, name, None)
        if w is not None and not (math.isfinite(w.duration_s) and w.duration_s >= 0):
            return f"{name}.duration_s is {w.duration_s!r}, not a non-negative number"
    return None


def _may_be_negative(where: str) -> bool:
    last = where.rsplit(".", 1)[-1]
    return last in ALLOWED_NEGATIVE or (where.startswith("trials.") and "dynamic" in where)


def _show(text: str) -> str:
    return repr(clip(text, 41, "…"))


def _fields(prefix: str, model: BaseModel | None) -> Iterator[tuple[str, float]]:
    """Every int/float field of ``model`` (not bools), by its dotted name."""
    if model is None:
        return
    for name in type(model).model_fields:
        v = getattr(model, name, None)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            yield f"{prefix}.{name}", v


def _numbers(lv: LevelResult) -> Iterator[tuple[str, float]]:
    for name in ("window", "steady_window"):
        w = getattr(lv, name)
        if w is not None:
            yield f"{name}.duration_s", w.duration_s
    yield from _fields("throughput", lv.throughput)
    yield from _fields("throughput.tokens_in_window", lv.throughput.tokens_in_window)
    yield from _fields("throughput.measured_request_tokens", lv.throughput.measured_request_tokens)
    yield from _fields("requests", lv.requests)
    for cls, n in lv.requests.errors.items():
        yield f"requests.errors.{cls}", n
    for stat in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
        yield from _fields(f"latency.{stat}", getattr(lv.latency, stat))
    for block in ("energy", "energy_steady"):
        for b, e in getattr(lv, block).items():
            yield from _fields(f"{block}.{b}", e)
    for node, per in lv.per_node_energy.items():
        for b, e in per.items():
            yield from _fields(f"per_node_energy.{node}.{b}", e)
    if lv.power_split is not None:
        for part, p in lv.power_split.parts.items():
            yield from _fields(f"power_split.parts.{part}", p)
    if lv.trials is not None:
        for name, f in lv.trials.figures.items():
            if f.mean is not None:
                yield f"trials.figures.{name}.mean", f.mean
