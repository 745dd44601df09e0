"""The SQLite history store: an embedded index of run directories, with tags and baselines.

The store holds no measurements of its own: ``result.json`` in each run directory is the truth.
It indexes each run (id, path, model, engine, GPU, boundaries, status, verdict, kind) and each
level's headline figures so ``history list`` needs no file reads, and it names runs:

- a **tag** points at one run; it is unique like a git tag and moves only with ``force``;
- a **baseline** is a name (``main``, ``h200-vllm``) pointing at the run a gate compares against.

A reference (``ref``) is, in this order: an existing run directory or result file, an exact run
id, a tag, a baseline name, or a unique prefix of a run id.

Default location: ``platformdirs.user_data_dir("wattbench")/history.sqlite3``; ``$WATTBENCH_DB``
or an explicit path overrides it. The database runs in WAL mode with a busy timeout, and every
write is one ``BEGIN IMMEDIATE`` transaction, so several processes may register runs at once.

The tables, their migrations and a run's level rows are in ``store_schema``; the run-to-run spread of
a configuration's figure (``noise``, ``noise_table``) in ``store_noise``.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence
import random
from datetime import datetime

import platformdirs

from wattbench.core.errors import UserError
from wattbench.results.agreement import AGREEMENT_FILE, load_agreement
from wattbench.results.headline import measured_boundaries
from wattbench.results.recovery import listed_status
from wattbench.results.rundir import RESULT_FILE, load_result
from wattbench.core.schema import Result
from wattbench.results.store_noise import Spread, spread, spread_table
from wattbench.results.store_schema import (LEVEL_COLUMNS, MIGRATIONS, SCHEMA_VERSION, gpu_desc, level_rows,
                                            run_config)
from wattbench.core.secret_scope import registered
from wattbench.config.shared import name_problem
from wattbench.results.configuration import run_key, target_text

# kernel filesystems: what lies there is made by the kernel as it is read, never a run (/proc/self's
# tree is endless in practice); /dev's devices are refused as not regular files
KERNEL_FILESYSTEMS = (Path("/proc"), Path("/sys"))


DB_ENV = "WATTBENCH_DB"
DB_FILENAME = "history.sqlite3"
BUSY_TIMEOUT_S = 30.0
MIN_PREFIX = 4
# the fewest characters ``history list`` shortens a run id to (``HistoryStore.short_ids``): the
# date, so a shortened id still says the day the run began
SHORT_ID_MIN = 8
# a run's levels by load, as every report shows them (report.labels.in_load_order): concurrency, then
# rate, each ascending, a level's re-measurement after it; others (a trace) as measured
LOAD_ORDER = ("CASE mode WHEN 'concurrency' THEN 0 WHEN 'rate' THEN 1 ELSE 2 END, "
              "CASE WHEN mode IN ('concurrency', 'rate') THEN target ELSE idx END, idx")


def default_db_path() -> Path:
    env = os.environ.get(DB_ENV)
    if env:
        return Path(env).expanduser()

    return Path(platformdirs.user_data_dir("wattbench")) / DB_FILENAME


def _utc_now_iso() -> str:
    # a calendar stamp for "when registered", never used as an interval
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


# ------------------------------------------------------------------ schema and migrations


@dataclass
class RunRecord:
    run_id: str
    kind: str
    path: str
    created_at: str | None
    registered_at: str
    model: str | None
    engine: str | None
    engine_version: str | None
    gpu: str | None
    boundaries: list[str]
    status: str | None
    verdict: str | None
    wattbench_version: str | None
    summary: dict[str, Any] = field(default_factory=dict)
    target: str | None = None  # where the load went (configuration.target_text); None: registered before
    config_label: str | None = None  # --config-label
    config_id: str | None = None  # configuration.run_key: equal for runs of one configuration
    tags: list[str] = field(default_factory=list)
    baselines: list[str] = field(default_factory=list)
    levels: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def _retry_locked(fn: Callable[[], Any], timeout_s: float = BUSY_TIMEOUT_S) -> Any:
    """Run ``fn`` again while SQLite answers "database is locked" without waiting.

    The busy timeout covers ordinary lock waits, but SQLite returns SQLITE_BUSY at once, without
    calling the busy handler, when waiting could deadlock: two processes that both read a fresh
    (rollback-journal) database and both ask to switch it to WAL, or to migrate it. One of them
    must back off and retry; this does, with a growing pause, for up to ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    pause = 0.005
    while True:
        try:
            return fn()
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) and "busy" not in str(e):
                raise
            if time.monotonic() >= deadline:
                raise
            time.sleep(pause * (1 + random.random()))
            pause = min(pause * 2, 0.25)


def _verdict(result: Result) -> str:
    """The verdict indexed for a run: never ``valid`` without a finished level."""
    return result.validity.verdict if result.levels else "invalid"


class HistoryStore:
    """A connection to one history database. Use as a context manager or call ``close()``."""

    def __init__(self, path: str | os.PathLike[str] | None = None, create: bool = True):
        self.path = Path(path).expanduser() if path else default_db_path()
        if not self.path.exists():
            if not create:
                raise UserError(f"{self.path}: no history database here (run `wattbench history import DIR` or "
                                "`wattbench run` to create one, or pass --db)")
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise UserError(f"{self.path.parent}: cannot create the history directory ({e.strerror})") from None
        try:
            self.conn = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_S, isolation_level=None)
            self.conn.row_factory = sqlite3.Row
            self.conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            _retry_locked(self._enable_wal)
            self.conn.execute("PRAGMA foreign_keys = ON")
            _retry_locked(self._migrate)
        except sqlite3.DatabaseError as e:
            raise UserError(f"{self.path}: not a usable wattbench history database ({e})") from None

    @staticmethod
    def check_usable(path: str | os.PathLike[str] | None = None) -> Path:
        """Refuse, without writing anything, a history database that ``HistoryStore(path)`` could
        not open: a file that is not SQLite (or is damaged), a schema newer than this wattbench,
        or a missing file whose directory cannot be created. A run checks its ``--db`` with this
        before anything starts, so a bad one is one line and exit 2, not a run that is kept but
        not registered. Returns the path."""
        p = Path(path).expanduser() if path else default_db_path()
        if not p.exists():
            probe = p.parent
            while not probe.exists() and probe.parent != probe:
                probe = probe.parent
            if not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK):
                raise UserError(f"--db {p}: cannot create the history database there ({probe} is not a writable "
                                "directory); give another --db or --no-register")
            return p
        if p.is_dir():
            raise UserError(f"--db {p}: is a directory; give the history database file (or --no-register)")
        if not p.is_file():  # /dev/null took every run and kept none; a FIFO blocks
            raise UserError(f"--db {p}: not a regular file (a device, a FIFO or a socket); give the history database "
                            "file (or --no-register)")
        try:
            conn = sqlite3.connect(f"file:{p}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)
            try:
                conn.execute("SELECT name FROM sqlite_master LIMIT 1").fetchall()
                has_meta = conn.execute("SELECT name FROM sqlite_master WHERE type='table' AND name='schema_meta'"
                                        ).fetchone()
                row = conn.execute("SELECT version FROM schema_meta").fetchone() if has_meta else None
            finally:
                conn.close()
        except sqlite3.DatabaseError as e:
            raise UserError(f"--db {p}: not a usable wattbench history database ({e}); move it away, give another "
                            "--db, or run with --no-register") from None
        if row is not None and int(row[0]) > SCHEMA_VERSION:
            raise UserError(f"--db {p}: history schema version {row[0]} is newer than this wattbench "
                            f"({SCHEMA_VERSION}); upgrade wattbench or give another --db")
        return p

    # -------------------------------------------------------------- plumbing

    def _enable_wal(self) -> None:
        if str(self.conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
            self.conn.execute("PRAGMA journal_mode = WAL")

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "HistoryStore":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def schema_version(self) -> int:
        row = self.conn.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name='schema_meta'").fetchone()
        if row is None:
            return 0
        row = self.conn.execute("SELECT version FROM schema_meta").fetchone()
        return int(row[0]) if row else 0

    def _migrate(self) -> None:
        with self._tx() as c:
            c.execute("CREATE TABLE IF NOT EXISTS schema_meta (version INTEGER NOT NULL)")
            row = c.execute("SELECT version FROM schema_meta").fetchone()
            current = int(row[0]) if row else 0
            if row is None:
                c.execute("INSERT INTO schema_meta(version) VALUES (0)")
            if current > SCHEMA_VERSION:
                raise UserError(f"{self.path}: history schema version {current} is newer than this wattbench "
                                f"({SCHEMA_VERSION}); upgrade wattbench")
            for version in range(current, SCHEMA_VERSION):
                MIGRATIONS[version](c)
                c.execute("UPDATE schema_meta SET version = ?", (version + 1,))

    # -------------------------------------------------------------- writing

    def register(self, result: Result, run_dir: str | os.PathLike[str], kind: str = "run",
                 summary: dict[str, Any] | None = None) -> RunRecord:
        """Index a run (re-registering updates it). Tags in ``result.tags`` are applied when free.
        ``summary``: what the caller adds for ``history list`` (the run's headline figure, which the
        reports' rule picks: ``report.summary.history_summary``)."""
        path = str(Path(run_dir).resolve())
        bnds: list[str] = []
        for lv in result.levels:
            for b in measured_boundaries(lv):
                if b not in bnds:
                    bnds.append(b)
        notes: list[str] = []
        scrub = registered().obj  # the registered secrets (a run's key, wherever a server echoed it)
        with self._tx() as c:
            c.execute(
                """INSERT INTO runs(run_id, kind, path, created_at, registered_at, model, engine, engine_version,
                       gpu, boundaries, status, verdict, wattbench_version, summary, target, config_label, config_id,
                       config)
                   VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)
                   ON CONFLICT(run_id) DO UPDATE SET kind=excluded.kind, path=excluded.path,
                       created_at=excluded.created_at, model=excluded.model, engine=excluded.engine,
                       engine_version=excluded.engine_version, gpu=excluded.gpu, boundaries=excluded.boundaries,
                       status=excluded.status, verdict=excluded.verdict,
                       wattbench_version=excluded.wattbench_version, summary=excluded.summary,
                       target=excluded.target, config_label=excluded.config_label, config_id=excluded.config_id,
                       config=excluded.config""",
                scrub((result.run_id, kind, path, result.created_at, _utc_now_iso(),
                       result.served_model, result.server.engine, result.server.version,
                       gpu_desc(result), json.dumps(bnds), result.status, _verdict(result),
                       result.wattbench_version, json.dumps(summary or {}), target_text(result), result.config_label,
                       run_key(result), run_config(result))),
            )
            c.execute("DELETE FROM levels WHERE run_id = ?", (result.run_id,))
            c.executemany(f"INSERT INTO levels ({', '.join(LEVEL_COLUMNS)}) VALUES "
                          f"({', '.join('?' * len(LEVEL_COLUMNS))})", [scrub(row) for row in level_rows(result)])
            for tag in result.tags:
                row = c.execute("SELECT run_id FROM tags WHERE tag = ?", (tag,)).fetchone()
                if row is None:
                    c.execute("INSERT INTO tags VALUES (?,?,?)", (tag, result.run_id, _utc_now_iso()))
                elif row[0] != result.run_id:
                    notes.append(f"tag {tag!r} already names run {row[0]}; not moved "
                                 f"(use `wattbench history tag {result.run_id} {tag} --force`)")
        rec = self.get(result.run_id)
        rec.notes = notes
        return rec

    def register_agreement(self, agreement: Any, run_dir: str | os.PathLike[str]) -> RunRecord:
        """Index an output-agreement run (kind ``agree``); its summary holds the headline metrics."""
        path = str(Path(run_dir).resolve())
        t = agreement.targets
        m = agreement.metrics
        summary = {"targets": [f"{x.model} @ {x.base_url}" for x in t],
                   "exact_match_rate": m.exact_match_rate, "token_agreement": m.token_agreement,
                   "token_basis": m.token_basis, "prompts": m.prompts,
                   "structured_valid_rate": [m.structured_valid_rate_a, m.structured_valid_rate_b]}
        with self._tx() as c:
            c.execute(
                """INSERT INTO runs(run_id, kind, path, created_at, registered_at, model, status, verdict,
                       wattbench_version, summary) VALUES (?,?,?,?,?,?,?,?,?,?)
                   ON CONFLICT(run_id) DO UPDATE SET path=excluded.path, model=excluded.model,
                       summary=excluded.summary""",
                (agreement.run_id, "agree", path, agreement.created_at, _utc_now_iso(),
                 " vs ".join(x.model for x in t), "complete", None, agreement.wattbench_version,
                 json.dumps(summary)),
            )
        return self.get(agreement.run_id)

    def import_dirs(self, paths: Sequence[str | os.PathLike[str]],
                    summarize: Callable[[Result], dict[str, Any]] | None = None) -> tuple[list[RunRecord], list[str]]:
        """Register every run directory (a directory holding result.json) under ``paths``
        (``summarize``: each run's ``summary``, as ``register`` takes it).

        Returns the registered records and one problem line per directory that could not be read
        (a corrupt result.json does not stop the rest of the import) or that holds no result.
        A path that is neither a regular file nor a directory (``/dev/null``, a FIFO, a socket) or
        lies in a kernel filesystem (``/proc``, ``/sys``, ``/dev``: ``/proc/self``) is a
        ``UserError`` before anything is read: it holds no run, and a FIFO would block the read.
        """
        records, problems = [], []
        for p in paths:
            root = Path(p)
            try:
                mode = root.stat().st_mode
            except FileNotFoundError:
                raise UserError(f"{root}: no such file or directory") from None
            except OSError as e:
                raise UserError(f"{root}: cannot be read ({e.strerror}); give a run directory or its result.json") \
                    from None
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                raise UserError(f"{root}: not a regular file or a directory (a FIFO, socket or device holds no run); "
                                "give a run directory or its result.json")
            if any(root.resolve().is_relative_to(k) for k in KERNEL_FILESYSTEMS):
                raise UserError(f"{root}: in a kernel filesystem ({root.resolve().parts[1]}), which holds no run; "
                                "give a run directory or its result.json")
            if stat.S_ISREG(mode):
                files = [root]
            else:
                files = sorted(list(root.rglob(RESULT_FILE)) + list(root.rglob(AGREEMENT_FILE)))
                if not files:
                    problems.append(f"{root}: no {RESULT_FILE} in it or below; not a run directory")
            for f in files:
                try:
                    if f.name == AGREEMENT_FILE:
                        records.append(self.register_agreement(load_agreement(f), f.parent))
                        continue
                    res = load_result(f)
                except UserError as e:
                    problems.append(str(e))
                    continue
                if not res.levels:  # a run stopped before its first level (or bad input) measured nothing
                    problems.append(f"{f}: no finished level (status {res.status}); not registered")
                    continue
                clash = self._run_id_clash(res.run_id, f.parent)
                if clash is not None:
                    problems.append(clash)
                    continue
                records.append(self.register(res, f.parent, summary=summarize(res) if summarize else None))
        return records, problems

    def _run_id_clash(self, run_id: str, run_dir: Path) -> str | None:
        """Why a directory cannot be imported under ``run_id``: the id already names another run
        directory that is still there (re-pointing it would silently move the run, its tags and its
        baselines to other data). ``None`` when the id is free, names this directory, or names a
        directory that no longer holds a result (a run that was moved)."""
        row = self.conn.execute("SELECT path FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        if row is None:
            return None
        old, new = Path(row[0]), Path(run_dir).resolve()
        if old == new or not (old / RESULT_FILE).exists():
            return None
        return (f"{new}: run id {run_id} already names the run in {old}; not imported (that run, its tags and "
                "baselines are unchanged): a copy of a run directory cannot be registered beside it")

    def tag(self, ref: str, tag: str, force: bool = False) -> RunRecord:
        _check_name(tag, "tag")
        rec = self.get(ref)
        with self._tx() as c:
            row = c.execute("SELECT run_id FROM tags WHERE tag = ?", (tag,)).fetchone()
            if row is not None and row[0] != rec.run_id and not force:
                raise UserError(f"tag {tag!r} already names run {row[0]}; pass --force to move it to {rec.run_id}")
            c.execute("INSERT INTO tags VALUES (?,?,?) ON CONFLICT(tag) DO UPDATE SET run_id=excluded.run_id, "
                      "tagged_at=excluded.tagged_at", (tag, rec.run_id, _utc_now_iso()))
        return self.get(rec.run_id)

    def untag(self, tag: str) -> None:
        with self._tx() as c:
            if c.execute("DELETE FROM tags WHERE tag = ?", (tag,)).rowcount == 0:
                raise UserError(f"no tag {tag!r} in {self.path}")

    def set_baseline(self, name: str, ref: str) -> RunRecord:
        _check_name(name, "baseline name")
        rec = self.get(ref)
        with self._tx() as c:
            c.execute("INSERT INTO baselines VALUES (?,?,?) ON CONFLICT(name) DO UPDATE SET run_id=excluded.run_id, "
                      "set_at=excluded.set_at", (name, rec.run_id, _utc_now_iso()))
        return self.get(rec.run_id)

    # -------------------------------------------------------------- reading

    def _record(self, row: sqlite3.Row, full: bool = True) -> RunRecord:
        rid = row["run_id"]
        rec = RunRecord(
            run_id=rid, kind=row["kind"], path=row["path"], created_at=row["created_at"],
            registered_at=row["registered_at"], model=row["model"], engine=row["engine"],
            engine_version=row["engine_version"], gpu=row["gpu"], boundaries=json.loads(row["boundaries"]),
            status=listed_status(row["status"], row["path"]), verdict=row["verdict"],
            wattbench_version=row["wattbench_version"],
            summary=json.loads(row["summary"] or "{}"),
            target=row["target"], config_label=row["config_label"], config_id=row["config_id"],
        )
        rec.tags = [r[0] for r in self.conn.execute("SELECT tag FROM tags WHERE run_id=? ORDER BY tag", (rid,))]
        rec.baselines = [r[0] for r in self.conn.execute(
            "SELECT name FROM baselines WHERE run_id=? ORDER BY name", (rid,))]
        if full:
            rec.levels = [dict(r) for r in self.conn.execute(
                "SELECT * FROM levels WHERE run_id=? ORDER BY " + LOAD_ORDER, (rid,))]
            for lv in rec.levels:
                lv.pop("run_id", None)
        return rec

    def _by_id(self, run_id: str) -> RunRecord | None:
        row = self.conn.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        return self._record(row) if row else None

    def short_ids(self, run_ids: list[str], min_len: int = SHORT_ID_MIN) -> dict[str, str]:
        """Each run id shortened the way git shortens a commit: its shortest prefix of at least
        ``min_len`` characters that no other run id in the history begins with, and that is no tag
        or baseline name, so ``get`` resolves it to this run. An id that is a prefix of another's
        stays whole."""
        every = sorted(r[0] for r in self.conn.execute("SELECT run_id FROM runs"))
        names = {r[0] for r in self.conn.execute("SELECT tag FROM tags UNION SELECT name FROM baselines")}
        at = {rid: i for i, rid in enumerate(every)}

        def common(a: str, b: str) -> int:
            n = 0
            while n < min(len(a), len(b)) and a[n] == b[n]:
                n += 1
            return n

        out: dict[str, str] = {}
        for rid in run_ids:
            i = at.get(rid)
            if i is None:
                out[rid] = rid
                continue
            shared = max([common(rid, every[j]) for j in (i - 1, i + 1) if 0 <= j < len(every)] + [0])
            n = max(min_len, MIN_PREFIX, shared + 1)
            while n < len(rid) and rid[:n] in names:
                n += 1
            out[rid] = rid[:n]
        return out

    def get(self, ref: str) -> RunRecord:
        """Resolve a reference: run directory/result path, run id, tag, baseline, unique id prefix."""
        ref = str(ref)
        p = Path(ref).expanduser()
        if p.exists():
            d = (p.parent if p.is_file() else p).resolve()
            row = self.conn.execute("SELECT * FROM runs WHERE path = ?", (str(d),)).fetchone()
            if row is not None:
                return self._record(row)
            res = load_result(p)
            rec = self._by_id(res.run_id)
            if rec is not None:
                return rec
            raise UserError(f"{p}: run {res.run_id} is not in the history {self.path} "
                            "(`wattbench history import` it first)")
        rec = self._by_id(ref)
        if rec is not None:
            return rec
        for table, col in (("tags", "tag"), ("baselines", "name")):
            row = self.conn.execute(f"SELECT run_id FROM {table} WHERE {col} = ?", (ref,)).fetchone()
            if row is not None:
                rec = self._by_id(row[0])
                if rec is not None:
                    return rec
        if len(ref) >= MIN_PREFIX:
            like = ref.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            rows = self.conn.execute("SELECT run_id FROM runs WHERE run_id LIKE ? ESCAPE '\\' LIMIT 6",
                                     (like,)).fetchall()
            if len(rows) == 1:
                return self._by_id(rows[0][0])  # type: ignore[return-value]
            if len(rows) > 1:
                raise UserError(f"{ref!r} is ambiguous: it begins {', '.join(r[0] for r in rows[:5])}"
                                f"{' …' if len(rows) > 5 else ''}; give more of the run id")
        raise UserError(f"{ref!r}: no such run directory, run id, tag or baseline (history: {self.path})")

    def list_runs(self, model: str | None = None, engine: str | None = None, gpu: str | None = None,
                  tag: str | None = None, kind: str | None = None, status: str | None = None,
                  since: str | None = None, limit: int | None = None, target: str | None = None,
                  label: str | None = None) -> list[RunRecord]:
        """Runs, newest first. Text filters are case-insensitive substrings; ``since`` an ISO date
        (or date and time); ``kind`` ``run`` or ``agree``. Anything else is refused, not ignored."""
        if kind is not None and kind not in RUN_KINDS:
            raise UserError(f"--kind {kind!r}: choose one of {', '.join(RUN_KINDS)}")
        if since is not None:
            try:
                datetime.fromisoformat(since)
            except ValueError:
                raise UserError(f"--since {since!r}: give an ISO date like 2026-11-01 (or 2026-11-01T09:00)") from None
        where, args = [], []
        for col, val in (("model", model), ("engine", engine), ("gpu", gpu), ("target", target),
                         ("config_label", label)):
            if val:
                where.append(f"lower(coalesce({col}, '')) LIKE ?")
                args.append(f"%{val.lower()}%")
        if kind:
            where.append("kind = ?")
            args.append(kind)
        if status:  # "crashed" is indexed as "running" (recovery.listed_status decides on reading)
            where.append("status = ?")
            args.append("running" if status == "crashed" else status)
        if since:
            where.append("created_at >= ?")
            args.append(since)
        if tag:
            where.append("run_id IN (SELECT run_id FROM tags WHERE tag = ?)")
            args.append(tag)
        sql = "SELECT * FROM runs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created_at DESC, run_id DESC"
        if limit and status not in ("running", "crashed"):
            sql += f" LIMIT {int(limit)}"
        recs = [self._record(r, full=False) for r in self.conn.execute(sql, args)]
        if status in ("running", "crashed"):
            recs = [r for r in recs if r.status == status][:limit or None]
        return recs

    def tags(self) -> dict[str, str]:
        return {r[0]: r[1] for r in self.conn.execute("SELECT tag, run_id FROM tags ORDER BY tag")}

    # -------------------------------------------------------------- noise

    def noise(self, config_key: str, exclude_runs: tuple[str, ...] | list[str] = (),
              figure: str | None = None, judged: tuple[str, ...] | list[str] = ()) -> Spread | None:
        """The noise of one configuration's figure across the complete runs that measured it, split
        at its change points (``store_noise.spread``; ``figure``: one of its stored figures, default
        the key's own; ``judged``: the runs a comparison judges)."""
        return spread(self.conn, config_key, exclude_runs, figure, judged)

    def noise_table(self, min_runs: int = 2, model: str | None = None, engine: str | None = None,
                    gpu: str | None = None) -> list[Spread]:
        """Every configuration measured by ``min_runs`` runs or more (``store_noise.spread_table``)."""
        return spread_table(self.conn, min_runs, model, engine, gpu)

    def baselines(self) -> dict[str, str]:
        return {r[0]: r[1] for r in self.conn.execute("SELECT name, run_id FROM baselines ORDER BY name")}


RUN_KINDS = ("run", "agree")


def _check_name(name: str, what: str) -> None:
    msg = name_problem(name, what)
    if msg:
        raise UserError(msg)


def resolve_run_path(ref: str, db: str | os.PathLike[str] | None = None) -> Path:
    """The run directory a reference names. A path on disk needs no database; anything else is
    looked up in the history (which must already exist: a lookup never creates one)."""
    p = Path(ref).expanduser()
    if p.exists():
        return p
    db_path = Path(db).expanduser() if db else default_db_path()
    if not db_path.exists():
        raise UserError(f"{ref}: no such run directory, and no history database at {db_path} to look it up "
                        "as a run id, tag or baseline")
    with HistoryStore(db_path, create=False) as store:
        rec = store.get(ref)
    run_dir = Path(rec.path)
    if not run_dir.exists():
        raise UserError(f"{ref}: the history points at {run_dir}, which no longer exists (moved or deleted?)")
    return run_dir


def load_ref(ref: str, db: str | os.PathLike[str] | None = None) -> Result:
    """Load the Result a reference names."""
    return load_result(resolve_run_path(ref, db))


def register_run_dir(run_dir: str | os.PathLike[str], result: Result | None = None,
                     db: str | os.PathLike[str] | None = None) -> RunRecord:
    """Register a written run directory in the history (the runner calls this after each write)."""
    res = result if result is not None else load_result(run_dir)
    with HistoryStore(db) as store:
        return store.register(res, run_dir)
