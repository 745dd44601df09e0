"""A run that did not finish: how every reader reads it, and what it left behind.

A run writes ``result.json`` with ``status: running`` before its first level and closes it
(``complete``, ``interrupted``, ``failed``) when it ends, however it ends — unless its process is
killed outright (SIGKILL, the kernel's OOM killer, a power cut), which nothing in the process can
catch. ``settle_unfinished`` is the one rule for a result still marked ``running``
(``rundir.load_result`` applies it, so ``report``, ``compare``, ``regress``, ``history import``
and the planners read it the same way):

- a live process still holds the run's lock (``rundir.RunLock``): the run is **in progress**, its
  figures so far are partial;
- nobody holds it: the run **crashed**;

``invalid`` in both cases, with the reason first among the verdict's reasons. The levels in
``result.json`` are complete (each was written when it ended); the level in progress was not.
Its finished records are not lost: they were spooled into the run directory as they finished
(``core/recordset.py``, durable spooling, ``<run>/spool/level-<i>-trial-<k>/records-*/lines``),
and ``recover`` reads them back as ``RecoveredLevel``s — counts, output tokens, TTFT and E2E of the
completed requests — which ``wattbench report`` shows, labelled as recovered from a crashed run.
They are not accounted: the level has no window, so no energy or efficiency figure.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
import errno

from wattbench.core.errors import StorageError
from wattbench.metrics.latency import stats
from wattbench.core.recordset import LINES_FILE, SPOOL_PREFIX, read_spooled_lines
from wattbench.core.schema import Finding, Result
from wattbench.core.schema import FindingKind
from wattbench.core.schema.measures import Stats
from wattbench.accounting.level_findings import write_stop_finding

CRASHED = "the run crashed"
IN_PROGRESS = "the run is still in progress"
RUN_LOCK_FILE = ".running"  # held (flock) by the process writing the run (rundir.RunLock); the kernel drops it with the process
SPOOL_DIR = "spool"  # the records of the level in progress (core/recordset.py, durable spooling)
LEVEL_META_FILE = "level.json"  # what the level in progress is: index, trial, label
REQUESTS_FILE = "requests.jsonl"
# an empty file ``.stopped-<ERRNO>`` (``rundir.close_result``): the run stopped on that write error
# and could not close result.json (the disk still full, the directory read-only) — not a crash
STOPPED_MARKER_PREFIX = ".stopped-"


def stopped_on_write(run_dir: str | os.PathLike[str]) -> StorageError | None:
    """The write error a run left as its ``.stopped-<ERRNO>`` marker (``rundir.close_result``), else None."""
    try:
        names = [p.name for p in Path(run_dir).iterdir() if p.name.startswith(STOPPED_MARKER_PREFIX)]
    except OSError:
        return None
    if not names:
        return None
    code = getattr(errno, names[0][len(STOPPED_MARKER_PREFIX):], None)
    code = code if isinstance(code, int) else errno.EIO
    return StorageError(Path(run_dir) / "result.json", OSError(code, os.strerror(code)))


def level_spool_dir(run_dir: str | os.PathLike[str], index: int, trial: int = 0) -> Path:
    """Where a level's records are spooled while it runs: ``<run>/spool/level-<index>-trial-<trial>``."""
    return Path(run_dir) / SPOOL_DIR / f"level-{index}-trial-{trial}"


def run_in_progress(run_dir: str | os.PathLike[str]) -> bool:
    """Whether a live process holds the run directory's lock (``rundir.RunLock``). False when no
    lock file is there (a finished run, or one written before the lock existed)."""
    import fcntl

    try:
        fd = os.open(Path(run_dir) / RUN_LOCK_FILE, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # also drops a lock taken just now
    return False


@dataclass
class RecoveredLevel:
    """The finished records of a level a crashed run was measuring (not accounted)."""

    index: int
    trial: int
    label: str | None
    path: str  # the spool directory, relative to the run directory
    records: int = 0
    completed: int = 0  # ok, measured (warm-up excluded)
    failed: int = 0  # measured requests that failed
    warmup: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    output_tokens: int = 0  # of the completed requests, from usage
    span_s: float | None = None  # first send to last end over the records
    ttft_ms: Stats | None = None
    e2e_ms: Stats | None = None

    def text(self, how: str = "from a crashed run") -> str:
        """One line: what was recovered (``how``: from a crashed run, from the level in progress, …)
        and that it is not accounted."""
        name = f"level {self.index}" + (f" ({self.label})" if self.label else "") + (
            f" trial {self.trial + 1}" if self.trial else "")
        errs = ", ".join(f"{k} {v}" for k, v in sorted(self.errors.items()))
        parts = [f"{self.records} finished request(s): {self.completed} completed, {self.failed} failed"
                 + (f" ({errs})" if errs else "") + (f", {self.warmup} warm-up" if self.warmup else "")]
        if self.completed:
            parts.append(f"{self.output_tokens:,} output tokens"
                         + (f" over {self.span_s:.3g} s" if self.span_s else ""))
        if self.ttft_ms is not None and self.ttft_ms.count:
            parts.append(f"TTFT p50 {self.ttft_ms.p50:,.1f} ms, p99 {self.ttft_ms.p99:,.1f} ms")
        if self.e2e_ms is not None and self.e2e_ms.count:
            parts.append(f"E2E p50 {self.e2e_ms.p50:,.1f} ms, p99 {self.e2e_ms.p99:,.1f} ms")
        return (f"recovered {how}: {name}: " + "; ".join(parts)
                + f"; not accounted (no window, no energy or efficiency figure); records in {self.path}/")

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "trial": self.trial, "label": self.label, "path": self.path,
                "records": self.records, "completed": self.completed, "failed": self.failed, "warmup": self.warmup,
                "errors": dict(self.errors), "output_tokens": self.output_tokens, "span_s": self.span_s,
                "ttft_ms": self.ttft_ms.model_dump() if self.ttft_ms else None,
                "e2e_ms": self.e2e_ms.model_dump() if self.e2e_ms else None}


def _written(run_dir: Path, levels: set[int]) -> set[tuple[int, int, int]]:
    """(level, trial, id) of the records of ``levels`` already in ``requests.jsonl`` (a crash
    between writing a level's records there and removing its spool leaves them in both). A line
    that does not parse is skipped here: the report's own reading of the file says what is wrong."""
    out: set[tuple[int, int, int]] = set()
    path = run_dir / REQUESTS_FILE
    if not levels or not path.exists():
        return out
    with open(path, "rb") as f:
        for raw in f:
            try:
                d = json.loads(raw)
                if d.get("level") in levels:
                    out.add((int(d["level"]), int(d.get("trial") or 0), int(d["id"])))
            except (ValueError, TypeError, KeyError, AttributeError):
                continue
    return out


def _level_meta(d: Path) -> tuple[int, int, str | None]:
    try:
        meta = json.loads((d / LEVEL_META_FILE).read_text())
        return int(meta["index"]), int(meta.get("trial") or 0), meta.get("label")
    except (OSError, ValueError, KeyError, TypeError):
        parts = d.name.split("-")  # level-<i>-trial-<k>
        try:
            return int(parts[1]), int(parts[3]), None
        except (IndexError, ValueError):
            return -1, 0, None


def recover(run_dir: str | os.PathLike[str]) -> list[RecoveredLevel]:
    """The finished records a run's spool still holds, per level (empty when there is none)."""
    run_dir = Path(run_dir)
    spool = run_dir / SPOOL_DIR
    if not spool.is_dir():
        return []
    dirs = sorted((d for d in spool.iterdir() if d.is_dir()), key=lambda d: _level_meta(d)[:2])
    metas = {d: _level_meta(d) for d in dirs}
    written = _written(run_dir, {m[0] for m in metas.values()})
    out = []
    for d in dirs:
        index, trial, label = metas[d]
        lv = RecoveredLevel(index=index, trial=trial, label=label, path=str(d.relative_to(run_dir)))
        ttft, e2e, first, last = [], [], None, None
        for sub in sorted(p for p in d.iterdir() if p.is_dir() and p.name.startswith(SPOOL_PREFIX)):
            lines = sub / LINES_FILE
            if not lines.exists():
                continue
            for rec in read_spooled_lines(lines):
                if (int(rec.get("level", index)), trial, int(rec.get("id", -1))) in written:
                    continue
                lv.records += 1
                sent, end = rec.get("sent_ns"), rec.get("last_token_ns") or rec.get("end_ns")
                if sent is not None:
                    first = sent if first is None else min(first, sent)
                if end is not None:
                    last = end if last is None else max(last, end)
                if rec.get("warmup"):
                    lv.warmup += 1
                    continue
                if rec.get("ok", True) is False:
                    lv.failed += 1
                    cls = rec.get("error") or "error"
                    lv.errors[cls] = lv.errors.get(cls, 0) + 1
                    continue
                lv.completed += 1
                lv.output_tokens += int(rec.get("output_tokens") or 0)
                if sent is not None and rec.get("first_token_ns") is not None:
                    ttft.append((rec["first_token_ns"] - sent) / 1e6)
                if sent is not None and end is not None:
                    e2e.append((end - sent) / 1e6)
        if not lv.records:
            continue
        lv.span_s = (last - first) / 1e9 if first is not None and last is not None and last > first else None
        lv.ttft_ms = stats(ttft) if ttft else None
        lv.e2e_ms = stats(e2e) if e2e else None
        out.append(lv)
    return out


def recovered_how(result: Result, run_dir: str | os.PathLike[str]) -> str:
    """How a report labels a run's recovered records: from a crashed run, from the level in
    progress (a live run), or from a level that did not finish (a run closed as failed)."""
    if result.status == "running":
        return "from the level in progress" if run_in_progress(run_dir) else "from a crashed run"
    return "from a level that did not finish"


def listed_status(status: str | None, run_dir: str | os.PathLike[str]) -> str | None:
    """A run's status as the history lists it: ``crashed`` for one still marked ``running`` whose
    process is gone (no live lock: the module doc's rule), else the status it was indexed with."""
    if status == "running" and not run_in_progress(run_dir):
        return "crashed"
    return status


def settle_unfinished(result: Result, run_dir: str | os.PathLike[str]) -> Result:
    """The one rule for a result read with ``status: running`` (module doc): the verdict becomes
    ``invalid``, the reason (in progress, or crashed with what its spool holds) goes first."""
    if result.status != "running":
        return result
    run_dir = Path(run_dir)
    if run_in_progress(run_dir):
        reason = (f"{IN_PROGRESS} (its process holds {run_dir / RUN_LOCK_FILE}): the levels listed are "
                  "those finished so far; read it again when it ends")
    elif (err := stopped_on_write(run_dir)) is not None:  # not a crash: read as the closed result would say
        result.status = "failed"
        result.status_detail = f"{err} (the run could not close result.json: the levels listed are those written before)"
        v = result.validity
        v.findings = [write_stop_finding(err, len(result.levels)), *(f for f in v.findings if f.kind != FindingKind.RUN_STOPPED)]
        if v.verdict == "valid":
            v.verdict = "warn"
        return result
    else:
        levels = len(result.levels)
        recovered = recover(run_dir)
        reason = (f"{CRASHED}: result.json still says status 'running' — its process ended (killed, out of "
                  "memory, a power cut, a disk that filled up) before it closed the result; the "
                  f"{levels} level(s) listed are complete, the level in progress was lost")
        if recovered:
            n = sum(r.records for r in recovered)
            reason += (f" but {n} finished request(s) of it were recovered from its spool (shown as such by "
                       "`wattbench report`, not accounted)")
    v = result.validity
    v.verdict = "invalid"
    if v.latency is not None:
        v.latency = "invalid"
    first = Finding(kind=FindingKind.RUN_UNFINISHED, severity="invalid", text=reason,
                    figures=("energy", "efficiency", "throughput", "ttft", "tpot", "itl", "e2e", "goodput", "load"),
                    summary=reason)
    v.findings = [first, *(f for f in v.findings if not f.text.startswith((CRASHED, IN_PROGRESS)))]
    return result
