"""The history database's tables and how a run becomes their rows: the migrations (append a new
one, never edit an old one; ``SCHEMA_VERSION`` is how many there are) and each level's indexed
row (``LEVEL_COLUMNS``, ``level_rows``: the headline figures, the trials' means with ``--trials``,
and the configuration key whose run-to-run spread ``store_noise`` reads). A level's configuration is
stored in two parts: what the run's levels share once in ``runs.config`` (``run_config``), the level's
load and boundary in ``levels.config``."""

from __future__ import annotations

import json
import sqlite3
from typing import Any, Callable

from wattbench.results.headline import headline_boundary, level_key, point
from wattbench.core.schema import LevelResult, Result
from wattbench.results.configuration import configuration, configuration_key, level_figure, run_configuration


def _run_script(conn: sqlite3.Connection, script: str) -> None:
    # statement by statement: executescript() would COMMIT the migration's open transaction
    for stmt in script.split(";"):
        if stmt.strip():
            conn.execute(stmt)


def _m1(conn: sqlite3.Connection) -> None:
    _run_script(
        conn,
        """
        CREATE TABLE runs (
            run_id TEXT PRIMARY KEY,
            kind TEXT NOT NULL DEFAULT 'run',
            path TEXT NOT NULL,
            created_at TEXT,
            registered_at TEXT NOT NULL,
            model TEXT,
            engine TEXT,
            engine_version TEXT,
            gpu TEXT,
            boundaries TEXT NOT NULL DEFAULT '[]',
            status TEXT,
            verdict TEXT,
            wattbench_version TEXT,
            summary TEXT NOT NULL DEFAULT '{}'
        );
        CREATE INDEX runs_created ON runs(created_at);
        CREATE TABLE levels (
            run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
            idx INTEGER NOT NULL,
            label TEXT NOT NULL,
            mode TEXT,
            target REAL,
            output_tokens_per_s REAL,
            ttft_p99_ms REAL,
            tpot_p99_ms REAL,
            boundary TEXT,
            avg_power_w REAL,
            j_per_output_token REAL,
            output_tokens_per_s_per_kw REAL,
            verdict TEXT,
            PRIMARY KEY (run_id, idx)
        );
        CREATE TABLE tags (
            tag TEXT PRIMARY KEY,
            run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
            tagged_at TEXT NOT NULL
        );
        CREATE TABLE baselines (
            name TEXT PRIMARY KEY,
            run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
            set_at TEXT NOT NULL
        );
        """
    )


def _m2(conn: sqlite3.Connection) -> None:
    """Each level's configuration key and the figure whose run-to-run spread the history keeps
    (``results/configuration.py``; ``HistoryStore.noise``). Rows registered before stay NULL until
    their run is registered again (``wattbench history import DIR``)."""
    for col in ("config_key TEXT", "config TEXT", "figure_name TEXT", "figure REAL", "trials INTEGER",
                "window_s REAL"):
        conn.execute(f"ALTER TABLE levels ADD COLUMN {col}")
    conn.execute("CREATE INDEX levels_config ON levels(config_key)")


def _m3(conn: sqlite3.Connection) -> None:
    """What tells runs apart in ``history list``: where the load went (``configuration.target_text``),
    the run's ``--config-label`` and the key of what its levels share (``configuration.run_key``).
    Runs registered before stay NULL until registered again (``wattbench history import DIR``)."""
    for col in ("target TEXT", "config_label TEXT", "config_id TEXT"):
        conn.execute(f"ALTER TABLE runs ADD COLUMN {col}")


RUN_PART_SKIP = ("load", "boundary")  # a level's own part of its configuration; the rest is the run's


def split_configuration(conf: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(the run's part, the level's part)`` of a level's configuration (``configuration.configuration``:
    the run's configuration and the level's load and boundary)."""
    return ({k: v for k, v in conf.items() if k not in RUN_PART_SKIP},
            {k: v for k, v in conf.items() if k in RUN_PART_SKIP})


def _m4(conn: sqlite3.Connection) -> None:
    """The run's configuration once per run (``runs.config``: ``configuration.run_configuration``, the
    server's identity in it, up to 16 KiB) instead of once per level: a level's ``config`` keeps its
    own part (load, boundary), and readers join the two (``store_noise``). Levels registered before are
    split here, so an old database reads as a new one (3 runs of 8 levels of one bloated identity made
    86 MB before identities were capped and stored once)."""
    conn.execute("ALTER TABLE runs ADD COLUMN config TEXT")
    rows = conn.execute("SELECT run_id, idx, config FROM levels WHERE config IS NOT NULL").fetchall()
    runs: dict[str, str] = {}
    for run_id, idx, text in rows:
        try:
            conf = json.loads(text)
        except ValueError:
            continue  # left whole: a reader joins nothing onto it
        if not isinstance(conf, dict):
            continue
        run_part, level_part = split_configuration(conf)
        runs.setdefault(run_id, json.dumps(run_part, sort_keys=True))
        conn.execute("UPDATE levels SET config = ? WHERE run_id = ? AND idx = ?",
                     (json.dumps(level_part, sort_keys=True), run_id, idx))
    conn.executemany("UPDATE runs SET config = ? WHERE run_id = ?", [(c, r) for r, c in runs.items()])


# index = version reached after applying; append new migrations, never edit old ones
MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [_m1, _m2, _m3, _m4]
SCHEMA_VERSION = len(MIGRATIONS)


def run_config(result: Result) -> str:
    """``runs.config``: the run's part of its levels' configuration, as JSON."""
    return json.dumps(run_configuration(result), sort_keys=True)


def gpu_desc(result: Result) -> str | None:
    names = [g.name for g in result.environment.gpus if g.name]
    if not names:
        return None
    uniq = sorted(set(names))
    return ", ".join(f"{names.count(n)}x {n}" for n in uniq)


LEVEL_COLUMNS = ("run_id", "idx", "label", "mode", "target", "output_tokens_per_s", "ttft_p99_ms", "tpot_p99_ms",
                 "boundary", "avg_power_w", "j_per_output_token", "output_tokens_per_s_per_kw", "verdict",
                 "config_key", "config", "figure_name", "figure", "trials", "window_s")


def level_rows(result: Result) -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = []
    for lv in result.levels:
        b = headline_boundary(lv)
        e = lv.energy.get(b) if b else None
        mode, target = level_key(lv)

        def at(name: str, own: float | None, boundary: str | None = None, lv: LevelResult = lv) -> float | None:  # the trials' mean with --trials
            return point(lv, name, boundary, own)

        conf = configuration(result, lv)  # keyed whole; stored split (the run's part once: runs.config)
        fkey, fig = level_figure(lv)
        rows.append((result.run_id, lv.index, lv.label, mode, target,
                     at("output_tokens_per_s", lv.throughput.output_tokens_per_s),
                     at("ttft_p99_ms", lv.latency.ttft_ms.p99), at("tpot_p99_ms", lv.latency.tpot_ms.p99), b,
                     at("avg_power_w", e.avg_power_w, b) if e else None,
                     at("j_per_output_token", e.j_per_output_token, b) if e else None,
                     at("output_tokens_per_s_per_kw", e.output_tokens_per_s_per_kw, b) if e else None,
                     lv.validity.verdict,
                     configuration_key(conf), json.dumps(split_configuration(conf)[1], sort_keys=True), fkey.text(), fig,
                     lv.trials.n if lv.trials is not None else 1, lv.window.duration_s if lv.window else None))
    return rows
