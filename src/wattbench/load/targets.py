"""Several targets from one load level: replicas, or a load balancer and its backends.

``run_level_multi(spec, targets, requests, on_progress, weights)`` runs one level of
``load/level.py`` against a list of ``TargetSpec``:

- closed loop: the ``N`` streams are dealt over the targets (stream ``k`` to ``route(k)``), so
  each target gets its share of the concurrency (``N/T`` each with equal weights); a stream
  stays on its target for the whole level;
- open loop and trace: the request with index ``k`` goes to ``route(k)``; the arrivals keep their
  absolute times, only their destination changes;
- ``route`` is round robin with equal weights, else a smooth weighted round robin (the sequence
  nginx uses: every target is picked ``weight/sum`` of the time, spread evenly, no bursts);
- a session stays on the target of its first turn (its KV cache lives there).

Every record carries ``target`` = the base URL it went to. ``per_target_summary(records, start_ns,
end_ns)`` gives the per-target statistics, computed exactly like the total
(``metrics.latency.summarize_level``) over the same window, so per-target throughputs add up to
the total and per-target latency samples are a partition of the total's.
"""

from __future__ import annotations

from typing import Callable, Iterable, Sequence

import numpy as np

from wattbench.core.errors import UserError
from wattbench.load.executor import LoadProgress
from wattbench.load.level import run_level
from wattbench.core.load_types import LevelOutcome, LevelSpec
from wattbench.core.target import TargetSpec
from wattbench.metrics.latency import summarize_level
from wattbench.core.recordset import NONE, RecordSet, as_record_set
from wattbench.core.schema import RequestRecord, TargetStats
from wattbench.workload.base import RequestSpec

__all__ = ["run_level_multi", "per_target_summary", "weighted_route", "check_targets"]


def check_targets(targets: Sequence[TargetSpec], weights: Sequence[float] | None = None) -> list[float]:
    """Refuse an empty list, a target given twice and bad weights; return the weights."""
    if not targets:
        raise UserError("no target given: pass at least one --target URL")
    seen: set[str] = set()
    for t in targets:
        if t.base_url in seen:
            raise UserError(f"--target {t.base_url} is given twice; give each replica once (use weights to favour one)")
        seen.add(t.base_url)
    if weights is None:
        return [1.0] * len(targets)
    w = [float(x) for x in weights]
    if len(w) != len(targets):
        raise UserError(f"{len(w)} target weights for {len(targets)} targets; give one weight per --target")
    if any(not (x > 0 and x != float("inf")) for x in w):
        raise UserError(f"target weights must be positive finite numbers, got {list(weights)}")
    return w


def weighted_route(weights: Sequence[float]) -> Callable[[int], int]:
    """``route(k)`` -> target index, smooth weighted round robin (deterministic).

    Each step adds every target's weight to its credit, picks the largest credit (lowest index on
    a tie) and takes the total weight off it. Over any ``m`` consecutive picks target ``i`` is
    picked ``m·w_i/W`` times give or take one; equal weights give plain round robin.
    """
    w = [float(x) for x in weights]
    total = sum(w)
    credit = [0.0] * len(w)
    seq: list[int] = []

    def route(k: int) -> int:
        while len(seq) <= k:
            for i, x in enumerate(w):
                credit[i] += x
            best = max(range(len(w)), key=lambda i: (credit[i], -i))
            credit[best] -= total
            seq.append(best)
        return seq[k]

    return route


def run_level_multi(
    spec: LevelSpec,
    targets: Sequence[TargetSpec],
    requests: Iterable[RequestSpec] | Callable[[int], RequestSpec],
    on_progress: Callable[[LoadProgress], None] | None = None,
    weights: Sequence[float] | None = None,
) -> LevelOutcome:
    """Run one level against several targets (see module doc); records carry ``target``."""
    w = check_targets(targets, weights)  # run_level refuses a concurrency below len(targets)
    return run_level(spec, list(targets), requests, on_progress, route=weighted_route(w))


def per_target_summary(
    records: Iterable[RequestRecord] | RecordSet, start_ns: int, end_ns: int, targets: Sequence[str] = ()
) -> dict[str, TargetStats]:
    """Per-target requests, latency and throughput over the level window ``[start_ns, end_ns]``.

    Keyed by base URL (records without ``target`` under ``""``); every name in ``targets`` is
    present even when it got no record (an idle replica shows as zero, not as missing). Each
    target's figures come from the set's columns restricted to its rows (no per-target copy).
    """
    rs = as_record_set(records)
    codes = rs.columns("target")["target"]
    labels = rs.labels("target")
    names: dict[str, list[int]] = {t: [] for t in targets}  # name -> the target codes grouped under it
    for code in np.unique(codes).tolist():
        names.setdefault((labels[code] if code != NONE else None) or "", []).append(code)
    out: dict[str, TargetStats] = {}
    for name in sorted(names):
        req, lat, thr = summarize_level(rs, start_ns, end_ns, select=np.isin(codes, names[name]))
        out[name] = TargetStats(requests=req, latency=lat, throughput=thr)
    return out
