"""The run-to-run spread of a configuration's figure across the history (issue 24): the complete
runs that measured it, their invalid levels left out, one value per run. ``HistoryStore.noise`` and
``noise_table`` read it; ``metrics/noise.py`` judges with it."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from typing import Any

# the levels a spread is estimated from: complete runs (not `agree`), levels not invalid, with a configuration key
NOISE_SQL = ("SELECT l.run_id, l.config_key, l.config, l.figure_name, l.figure, r.created_at FROM levels l "
             "JOIN runs r ON r.run_id = l.run_id WHERE r.kind = 'run' AND r.status = 'complete' "
             "AND l.verdict != 'invalid' AND l.config_key IS NOT NULL")


@dataclass
class Spread:
    """The run-to-run spread of one configuration's figure (``HistoryStore.noise``): one value per
    run (a run's levels of the configuration averaged), ``rel_sd`` their relative standard deviation
    (ddof 1)."""

    config_key: str
    config: dict[str, Any]
    figure: str
    runs: int
    mean: float
    rel_sd: float | None  # None with one run
    low: float
    high: float
    run_ids: list[str] = field(default_factory=list)
    last_created_at: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def spread_of(key: str, rows: list[sqlite3.Row]) -> Spread | None:
    per_run: dict[str, list[float]] = {}
    created: dict[str, str | None] = {}
    config, figure = None, None
    for r in rows:
        if r["figure"] is None:
            continue
        per_run.setdefault(r["run_id"], []).append(float(r["figure"]))
        created[r["run_id"]] = r["created_at"]
        config, figure = r["config"], r["figure_name"]
    if not per_run:
        return None
    vals = [sum(v) / len(v) for v in per_run.values()]
    n = len(vals)
    mean = sum(vals) / n
    sd = (sum((v - mean) ** 2 for v in vals) / (n - 1)) ** 0.5 if n > 1 else None
    return Spread(config_key=key, config=json.loads(config or "{}"), figure=figure or "", runs=n, mean=mean,
                  rel_sd=(sd / mean if sd is not None and mean else None), low=min(vals), high=max(vals),
                  run_ids=sorted(per_run, key=lambda rid: created.get(rid) or ""),
                  last_created_at=max((c for c in created.values() if c), default=None))


def spread(conn: sqlite3.Connection, config_key: str, exclude_runs: tuple[str, ...] | list[str] = ()) -> Spread | None:
    """The spread of one configuration's figure across the complete runs that measured it (their
    invalid levels left out), without ``exclude_runs`` (the runs being judged: a spread must
    not be estimated from the very runs it judges)."""
    rows = [r for r in conn.execute(NOISE_SQL + " AND l.config_key = ?", (config_key,))
            if r["run_id"] not in set(exclude_runs)]
    return spread_of(config_key, rows)


def spread_table(conn: sqlite3.Connection, min_runs: int = 2, model: str | None = None, engine: str | None = None,
                 gpu: str | None = None) -> list[Spread]:
    """Every configuration measured by ``min_runs`` runs or more, most runs first (text filters:
    case-insensitive substrings of the model, engine and machine of the configuration)."""
    groups: dict[str, list[sqlite3.Row]] = {}
    for r in conn.execute(NOISE_SQL + " ORDER BY l.config_key"):
        groups.setdefault(r["config_key"], []).append(r)
    out = []
    for key, rows in groups.items():
        sp = spread_of(key, rows)
        if sp is None or sp.runs < min_runs:
            continue
        c = sp.config
        machine = json.dumps(c.get("machine", {})).lower()
        eng = json.dumps(c.get("engine", {})).lower()
        if (model and model.lower() not in str(c.get("model") or "").lower()) or (
                engine and engine.lower() not in eng) or (gpu and gpu.lower() not in machine):
            continue
        out.append(sp)
    out.sort(key=lambda sp: (-sp.runs, sp.config_key))
    return out
