"""How a level and a set of levels are named in every report: ``c=64``, ``r=4/s``, ``r=inf``,
``c=1,2,32``; a stored label shortened (``concurrency=8`` → ``c=8``). Nothing here computes a figure."""

from __future__ import annotations

from collections.abc import Iterable

from wattbench.core.numbers import MISSING, fmt
from wattbench.core.schema import LevelResult, Result
from wattbench.accounting.findings import level_order
from wattbench.accounting.level_findings import in_flight_finding
from wattbench.config.shared import DEFAULT_CURRENCY


def load_label(mode: str | None, value: float | None, max_in_flight: int | None = None) -> str:
    """``c=64`` (concurrency), ``r=4/s`` or ``r=inf`` (rate, ``c≤N`` when capped); ``–`` without a value."""
    if value is None:
        return MISSING
    if mode == "rate":
        out = "r=inf" if value == float("inf") else f"r={value:g}/s"
        return out + (f" c≤{max_in_flight}" if max_in_flight else "")
    if mode == "concurrency":
        return f"c={value:g}"
    return f"{mode or ''} {value:g}".strip()


def short_label(level: LevelResult) -> str:
    """``c=64`` for concurrency 64, ``r=4/s`` for 4 requests/s, ``r=inf`` for all at once; a
    suffix of the stored label (``prefill-heavy``) is kept. Trace levels keep their label."""
    ld = level.load
    if ld.mode == "concurrency" and ld.target_concurrency is not None:
        base, canon = load_label("concurrency", ld.target_concurrency), f"concurrency={ld.target_concurrency}"

        if in_flight_finding(level) is not None:  # far below its label: the achieved figure beside it
            base += f" (got {fmt(ld.mean_in_flight, kind='load')})"
    elif ld.mode == "rate" and ld.target_rate_rps is not None:
        r = ld.target_rate_rps
        base = load_label("rate", r, ld.max_in_flight)
        canon = "rate=inf" if r == float("inf") else f"rate={r:g}"
    else:
        return level.label
    rest = level.label[len(canon):].strip() if level.label.startswith(canon) else ""
    return f"{base} {rest}" if rest else base


def levels_text(result: Result, indices: Iterable[int]) -> str:
    """Levels named compactly in the order given: ``c=1,2,32``, ``r=2,4/s``; other labels (a
    suffix such as ``prefill-heavy``, a trace) as their short labels, joined by commas."""
    by_index = {lv.index: lv for lv in result.levels}
    lvs = [by_index[i] for i in indices if i in by_index]
    if not lvs:
        return ""
    groups: dict[str, tuple[list[str], list[str]]] = {}  # suffix -> (concurrencies, rates)
    other = []
    for lv in lvs:
        label, ld = short_label(lv), lv.load
        base = (load_label("concurrency", ld.target_concurrency) if ld.mode == "concurrency" else
                load_label("rate", ld.target_rate_rps) if ld.mode == "rate" and not ld.max_in_flight else None)
        suffix = label[len(base):] if base and label.startswith(base) else None
        if suffix is not None and suffix and not suffix.startswith(" "):
            suffix = None  # "c=64 (got 7.2)" keeps its own label
        if base is None or suffix is None:
            other.append(label)
            continue
        cs, rs = groups.setdefault(suffix.strip(), ([], []))
        if ld.mode == "concurrency":
            cs.append(f"{ld.target_concurrency:g}")
        else:
            rs.append("inf" if ld.target_rate_rps == float("inf") else f"{ld.target_rate_rps:g}")
    parts = []
    for suffix, (cs, rs) in sorted(groups.items(), key=lambda kv: kv[0] != ""):  # plain levels first
        tail = f" {suffix}" if suffix else ""
        if cs:
            parts.append("c=" + ",".join(cs) + tail)
        if rs:
            parts.append("r=" + ",".join(rs) + ("" if rs == ["inf"] else "/s") + tail)
    return ", ".join(parts + other)


def short_label_text(label: str) -> str:
    return label.replace("concurrency=", "c=").replace("rate=", "r=")


def in_load_order(result: Result) -> Result:
    """The run with its levels in load order (``accounting.findings.level_order``: concurrency, then
    rate, each ascending; a level measured again right after its first measurement; a trace's
    levels as measured), as every table of a run shows them: an ``--optimize`` search measures 8,
    128, 32, and a table in that order put c=128 between c=8 and c=32. The result itself is
    unchanged (a copy, sharing the levels)."""
    levels = sorted(result.levels, key=level_order)
    if [lv.index for lv in levels] == [lv.index for lv in result.levels]:
        return result
    return result.model_copy(update={"levels": levels})


def cost_currency(result: Result) -> str:
    """The currency a run's costs are in: its ``--currency`` (``config/shared.py``; USD by default), named
    beside every cost a report shows, since ``--price-per-kwh`` is a number in it."""
    cur = result.config.currency
    return cur if cur and cur.strip() else DEFAULT_CURRENCY
