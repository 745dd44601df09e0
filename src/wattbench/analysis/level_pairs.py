"""Which levels of two runs are compared, and at which boundary: levels paired by their load
(``match_levels``: by concurrency/rate, or in order), the boundary chosen (``resolve_boundary``: the
one asked, else the headline rule over the levels that measured something), and why a level is left
out (``left_out_reason``); ``short_key`` names a level in an answer line (``c=16``, ``r=2/s``).

**Partial runs**: a level that measured nothing, or lacks the compared boundary's power, is named
and left out (``left_out_reason``); the boundary is chosen over the levels that measured
something, so every other level keeps its energy and per-kW ratios. ``compare``, ``compare
--at-slo``, ``regress`` and ``wattbench ab`` pair and leave out levels by these rules.
"""

from __future__ import annotations

from wattbench.accounting.boundaries import outside_work_note
from wattbench.accounting.level_findings import measured_something
from wattbench.core.errors import UserError
from wattbench.core.schema import FindingKind, LevelResult, Result
from wattbench.results.headline import common_headline_boundary, describe_key, level_key, per_token

def short_key(level: LevelResult) -> str:
    """``c=16`` / ``r=2/s``: a level's name in an answer line."""
    mode, value = level_key(level)
    if value is None:
        return str(mode)
    return f"c={value:g}" if mode == "concurrency" else f"r={value:g}/s"


def match_levels(a: Result, b: Result, match: str) -> tuple[list[tuple[LevelResult, LevelResult]], list[str]]:
    """Pairs of (baseline level, candidate level) and descriptions of the unmatched ones."""
    if match == "index":
        n = min(len(a.levels), len(b.levels))
        pairs = [(a.levels[i], b.levels[i]) for i in range(n)]
        un = [f"{b.run_id}: level {i} ({lv.label}) has no counterpart" for i, lv in enumerate(b.levels[n:], n)]
        un += [f"{a.run_id}: level {i} ({lv.label}) has no counterpart" for i, lv in enumerate(a.levels[n:], n)]
        return pairs, un
    by_key: dict[tuple[str, float | None], LevelResult] = {}
    for lv in b.levels:
        by_key.setdefault(level_key(lv), lv)
    pairs, un, used = [], [], set()
    for lv in a.levels:
        k = level_key(lv)
        if k in by_key:
            pairs.append((lv, by_key[k]))
            used.add(k)
        else:
            un.append(f"{a.run_id}: {describe_key(k)} not in {b.run_id}")
    for lv in b.levels:
        k = level_key(lv)
        if k not in used:
            un.append(f"{b.run_id}: {describe_key(k)} not in {a.run_id}")
    return pairs, un


def _has_power(lv: LevelResult) -> bool:
    return any(e.avg_power_w is not None for e in lv.energy.values())


def left_out_reason(run_id: str, lv: LevelResult, boundary: str | None) -> str | None:
    """Why a level cannot be compared at ``boundary`` (None: it can): it measured nothing, or it
    has no power at the boundary."""
    if not measured_something(lv):
        why = next((f.text for f in lv.validity.findings if f.kind == FindingKind.NO_COMPLETED), None)
        return f"run {run_id} measured nothing at {short_key(lv)} ({why or 'no measured request completed'})"
    if boundary is not None:
        e = lv.energy.get(boundary)
        if e is None or e.avg_power_w is None:
            have = sorted(b for b, x in lv.energy.items() if x.avg_power_w is not None)
            return (f"run {run_id} has no {boundary} power at {short_key(lv)} (it measured: "
                    f"{', '.join(have) or 'none'}{'; ' + lv.energy_unavailable_reason if lv.energy_unavailable_reason and not have else ''})")
    return None


def resolve_boundary(results: list[Result], boundary: str | None) -> str | None:
    """The boundary to compare at: the one asked, else the headline rule over every level that
    measured something and some power (``results.headline``: a whole boundary that contains the
    work, measured first, outer first — never the HBM rail); a level without it is left out by
    name (``left_out_reason``), never every level's energy. None (none common) compares latency
    and throughput only."""
    usable = [lv for r in results for lv in r.levels if measured_something(lv) and _has_power(lv)]
    if boundary is None:
        return common_headline_boundary(usable) if usable else None
    seen = False
    for r in results:
        for lv in r.levels:
            if boundary in lv.energy and not per_token(boundary, lv.energy):
                raise UserError(f"{boundary} has no tokens-per-kW figure in run {r.run_id} ("
                                f"{outside_work_note(boundary, lv.energy)}); compare at a boundary that "
                                "contains the devices doing the work (accelerator, node, wall), or leave "
                                "--boundary out")
            e = lv.energy.get(boundary)
            seen = seen or (e is not None and e.avg_power_w is not None)
    if not seen:
        have = sorted({b for lv in usable for b, x in lv.energy.items() if x.avg_power_w is not None})
        raise UserError(f"no level of these runs has {boundary} power (they measured: {', '.join(have) or 'none'}); "
                        "choose a boundary the runs measured — different boundaries are never compared")
    return boundary
