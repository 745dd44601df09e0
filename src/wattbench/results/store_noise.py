"""The run-to-run noise of a configuration's figure across the history: the complete runs that
measured it, their invalid levels left out, one value per run, in time order, split at its change
points (``metrics/series_noise.series_noise``: a run beyond the series' noise starts a new segment and is
never folded into the spread). ``HistoryStore.noise`` and ``noise_table`` read it;
``metrics/noise.judge`` judges with it.

One spread per (configuration, figure): the key's own figure (``levels.figure``: tokens/s per kW at
the level's boundary, the trials' mean with ``--trials``; output tokens/s without energy), or one of
the level's stored headline figures (``FIGURE_COLUMNS``: output tokens/s, power, J/output token, the
trials' means likewise). ``history noise``, ``compare`` and ``regress`` all read it here, so they
count the same runs and say the basis in one sentence (``metrics/figure_noise.history_text``: where a
comparison leaves the runs it judges out of the spread, the sentence says so)."""

from __future__ import annotations

import json
import math
import sqlite3
from dataclasses import dataclass, field
from typing import Any, Iterable

from wattbench.metrics.figure_noise import FigureNoise
from wattbench.metrics.series_noise import SeriesNoise, series_noise

# the levels a spread is estimated from: complete runs (not `agree`), levels not invalid, with a configuration key
# figures whose spread is read from a level's own column (the key's figure is ``levels.figure``)
FIGURE_COLUMNS = ("output_tokens_per_s", "avg_power_w", "j_per_output_token", "output_tokens_per_s_per_kw")
NOISE_SQL = ("SELECT l.run_id, l.config_key, l.config, r.config AS run_config, l.figure_name, l.figure, r.created_at, "
             "l.output_tokens_per_s, l.avg_power_w, l.j_per_output_token, l.output_tokens_per_s_per_kw, l.boundary "
             "FROM levels l "
             "JOIN runs r ON r.run_id = l.run_id WHERE r.kind = 'run' AND r.status = 'complete' "
             "AND l.verdict != 'invalid' AND l.config_key IS NOT NULL")


@dataclass
class Spread:
    """The run-to-run noise of one configuration's figure (``HistoryStore.noise``): one value per
    run (a run's levels of the configuration averaged), in time order; ``rel_sd`` is the sd of
    ``ln(figure)`` pooled within the segments between change points (``df`` degrees of freedom,
    None with none); ``mean`` is the last segment's (the configuration as it is now)."""

    config_key: str
    config: dict[str, Any]
    figure: str
    runs: int
    mean: float
    rel_sd: float | None  # None without a degree of freedom
    low: float
    high: float
    run_ids: list[str] = field(default_factory=list)
    last_created_at: str | None = None
    df: int = 0
    segment_runs: list[int] = field(default_factory=list)  # runs per segment, in time order
    change_points: list[dict[str, Any]] = field(default_factory=list)  # run_id, ratio, bound
    series: SeriesNoise | None = None

    def noise(self) -> FigureNoise | None:
        """One more run's 95% half-width from this spread (``metrics/figure_noise.spread_noise``)."""
        return self.series.noise(self.config_key) if self.series is not None else None

    def text(self) -> str:
        """The basis in the one sentence every command prints (``metrics/figure_noise.history_text``)."""
        return self.series.text(self.config_key) if self.series is not None else ""

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "series"}


def joined_config(run_part: str | None, level_part: str | None) -> dict[str, Any]:
    """A level's configuration from its two stored parts (``store_schema``: the run's once in
    ``runs.config``, the level's own in ``levels.config``; a row never split has it all)."""
    out: dict[str, Any] = {}
    for text in (run_part, level_part):
        try:
            part = json.loads(text or "{}")
        except ValueError:
            continue
        if isinstance(part, dict):
            out.update(part)
    return out


def figure_of(row: sqlite3.Row, figure: str | None) -> tuple[str | None, float | None]:
    """``(name, value)`` of ``figure`` in one stored level: None → the key's own figure; a name in
    ``FIGURE_COLUMNS`` (at ``@boundary``, the level's headline one) → its column, named as asked."""
    if figure is None:
        return row["figure_name"], row["figure"]
    name, _, boundary = figure.partition("@")
    if name not in FIGURE_COLUMNS or (boundary and row["boundary"] and boundary != row["boundary"]):
        return None, None  # a figure not stored, or stored at another boundary
    if name == "output_tokens_per_s_per_kw" and (row["figure_name"] or "").startswith(name):
        return row["figure_name"], row["figure"]  # the key's figure: read where it is stored
    return figure, row[name]


def spread_of(key: str, rows: list[sqlite3.Row], figure: str | None = None, judged: Iterable[str] = ()) -> Spread | None:
    per_run: dict[str, list[float]] = {}
    created: dict[str, str | None] = {}
    config: dict[str, Any] = {}
    name = None
    for r in rows:
        fname, value = figure_of(r, figure)
        # a figure that is not a positive finite number (0.0: every request failed) is no sample of
        # the configuration's efficiency: left out of the spread, the run count and the range alike
        if value is None or not (math.isfinite(float(value)) and float(value) > 0):
            continue
        per_run.setdefault(r["run_id"], []).append(float(value))
        created[r["run_id"]] = r["created_at"]
        config, name = joined_config(r["run_config"], r["config"]), fname
    if not per_run:
        return None
    order = sorted(per_run, key=lambda rid: (created.get(rid) or "", rid))
    vals = [sum(per_run[rid]) / len(per_run[rid]) for rid in order]
    sn = series_noise(vals, order, judged)
    if sn is None:
        return None
    last = sn.last_segment()
    return Spread(config_key=key, config=config, figure=name or "", runs=len(vals),
                  mean=sum(last) / len(last), rel_sd=sn.rel_sd, low=min(vals), high=max(vals), run_ids=order,
                  last_created_at=max((c for c in created.values() if c), default=None), df=sn.df,
                  segment_runs=[len(s) for s in sn.segments],
                  change_points=[{"run_id": c.run_id, "ratio": c.ratio, "bound": c.bound}
                                 for c in sn.change_points], series=sn)


def spread(conn: sqlite3.Connection, config_key: str, exclude_runs: tuple[str, ...] | list[str] = (),
           figure: str | None = None, judged: Iterable[str] = ()) -> Spread | None:
    """The noise of one configuration's figure across the complete runs that measured it (their
    invalid levels left out): its own figure, or ``figure`` (``figure_of``). ``judged``: the runs a
    comparison judges (``series_noise``: two of them in one segment are left out of its spread);
    ``exclude_runs``: runs left out entirely."""
    rows = [r for r in conn.execute(NOISE_SQL + " AND l.config_key = ?", (config_key,))
            if r["run_id"] not in set(exclude_runs)]
    return spread_of(config_key, rows, figure, judged)


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
