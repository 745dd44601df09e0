"""What a report reads from a run directory: ``RunData`` (result + requests + telemetry + server
timeline), each file loaded on first use.

File formats read here (one reader function each, so a format change is one edit):

- ``result.json``: ``wattbench.core.schema.Result``.
- ``requests.jsonl``: one ``RequestRecord`` per line.
- ``telemetry.jsonl``: first line ``{"channels": [Channel dicts]}``, then either one sample per line
  ``{"t_ns": int, "c": channel_id, "v": float}`` or batches ``{"r": [[t_ns, channel_id, v], ...]}``
  (both may be mixed). A later ``{"channels": [...]}`` line adds channels.
- ``server_timeline.jsonl``: one scraped value per line ``{"t_ns": int, "series": name, "v": float}``.

A run that crashed may leave a truncated last line in a JSONL file: it is skipped and noted in
``RunData.notes``. A bad line anywhere else is an error naming the file and line.
"""

from __future__ import annotations

import dataclasses
from functools import cached_property
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np
import orjson

from wattbench.core.errors import UserError
from wattbench.core.schema import RequestRecord, Result
from wattbench.results import rundir
from wattbench.telemetry.base import Channel, TelemetryLog
from wattbench.results.recovery import RecoveredLevel, recover, recovered_how
from wattbench.report.labels import in_load_order

RESULT_FILE = "result.json"
REQUESTS_FILE = "requests.jsonl"
TELEMETRY_FILE = "telemetry.jsonl"
SERVER_TIMELINE_FILE = "server_timeline.jsonl"

_CHANNEL_FIELDS = {f.name for f in dataclasses.fields(Channel)}


def _iter_jsonl(path: Path, notes: list[str]) -> Iterator[tuple[int, Any]]:
    """Yield (line number, parsed object) for each non-empty line; tolerate a truncated last line."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise UserError(f"cannot read {path}: {e.strerror or e}; check the run directory") from None
    lines = raw.split(b"\n")
    last = len(lines)
    while last > 0 and not lines[last - 1].strip():
        last -= 1
    for i in range(last):
        line = lines[i].strip()
        if not line:
            continue
        try:
            yield i + 1, orjson.loads(line)
        except orjson.JSONDecodeError:
            if i == last - 1:
                notes.append(f"{path.name}: last line {i + 1} is truncated (run stopped while writing); skipped")
                return
            raise UserError(
                f"{path}: line {i + 1} is not valid JSON; the file is corrupt (re-run or remove the line)"
            ) from None


def _channel(d: Any, path: Path, lineno: int) -> Channel:
    if not isinstance(d, dict) or "id" not in d:
        raise UserError(f"{path}: line {lineno} has a channel without an id")
    kw = {k: v for k, v in d.items() if k in _CHANNEL_FIELDS}
    kw.setdefault("sensor", "")
    kw.setdefault("kind", "aux")
    kw.setdefault("quantity", "")
    kw.setdefault("unit", "")
    return Channel(**kw)


def read_telemetry(run_dir: Path, notes: list[str]) -> TelemetryLog:
    """Raw sensor samples of ``telemetry.jsonl`` as a ``TelemetryLog`` (empty when absent)."""
    log = TelemetryLog()
    path = run_dir / TELEMETRY_FILE
    if not path.exists():
        notes.append(f"{TELEMETRY_FILE} is missing: no power timeline")
        return log
    t_ns, values = log.t_ns, log.values

    def add(t: Any, c: Any, v: Any, lineno: int) -> None:
        if v is None:
            return
        try:
            ti, vf = int(t), float(v)
        except (TypeError, ValueError):
            raise UserError(f"{path}: line {lineno} has a sample that is not (t_ns, channel, value)") from None
        key = str(c)
        ts = t_ns.get(key)
        if ts is None:
            ts = t_ns[key] = []
            values[key] = []
        ts.append(ti)
        values[key].append(vf)

    for lineno, obj in _iter_jsonl(path, notes):
        if not isinstance(obj, dict):
            raise UserError(f"{path}: line {lineno} is not an object")
        if "channels" in obj:
            log.add_channels([_channel(d, path, lineno) for d in obj["channels"] or []])
        elif "r" in obj:
            for row in obj["r"] or []:
                if not isinstance(row, (list, tuple)) or len(row) != 3:
                    raise UserError(f"{path}: line {lineno} has a batched sample that is not [t_ns, channel, value]")
                add(row[0], row[1], row[2], lineno)
        elif "t_ns" in obj and "c" in obj:
            add(obj["t_ns"], obj["c"], obj.get("v"), lineno)
        # other record types (failures, markers) are not drawn
    return log


def read_server_timeline(run_dir: Path, notes: list[str]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Scraped server series of ``server_timeline.jsonl``: name -> (t_ns, values), time-sorted.
    A torn last line (a run killed while writing) is skipped with a note."""
    path = run_dir / SERVER_TIMELINE_FILE
    if not path.exists():
        return {}
    acc: dict[str, tuple[list[int], list[float]]] = {}
    # format: wattbench.server.metrics.ServerTimeline.to_jsonl (a meta line, then {"t_ns", series: value…})
    for lineno, obj in _iter_jsonl(path, notes):
        if not isinstance(obj, dict):
            raise UserError(f"{path}: line {lineno} is not a JSON object")
        if obj.get("type") == "meta":
            continue
        if "t_ns" not in obj:
            raise UserError(f"{path}: line {lineno} has no t_ns; not a server timeline scrape")
        try:
            t = int(obj["t_ns"])
            for name, v in obj.items():
                if name == "t_ns" or v is None:
                    continue
                ts, vs = acc.setdefault(str(name), ([], []))
                ts.append(t)
                vs.append(float(v))
        except (TypeError, ValueError):
            raise UserError(f"{path}: line {lineno} has a non-numeric time or value") from None
    out = {}
    for name, (ts, vs) in acc.items():
        t_arr = np.asarray(ts, dtype=np.int64)
        order = np.argsort(t_arr, kind="stable")
        out[name] = (t_arr[order], np.asarray(vs, dtype=float)[order])
    return out


class RunData:
    """One run directory as a report sees it. Only ``result`` is read at construction."""

    def __init__(self, run_dir: str | Path):
        self.path = Path(run_dir)
        self.notes: list[str] = []
        if not self.path.is_dir():
            raise UserError(f"{self.path} is not a directory; give a run directory (it holds {RESULT_FILE})")
        # levels by load (report.labels.in_load_order): every report shows them in that order
        self.result: Result = in_load_order(rundir.load_result(self.path))
        # a crashed run's recovered records, said in every report (Markdown and HTML read the notes)
        self.notes.extend(r.text(self.recovered_how) for r in self.recovered)

    @property
    def run_id(self) -> str:
        return self.result.run_id

    @property
    def t0_ns(self) -> int:
        """Time zero of plots: the run's clock anchor (monotonic ns)."""
        return self.result.clock.anchor_mono_ns

    @cached_property
    def requests(self) -> list[RequestRecord]:
        return rundir.load_requests(self.path, notes=self.notes)

    @cached_property
    def recovered(self) -> list[RecoveredLevel]:
        """The finished records a run's spool still holds (``results.recovery.RecoveredLevel``):
        a crashed run's level in progress. Not accounted; reports show them as recovered."""
        return recover(self.path)

    @property
    def recovered_how(self) -> str:
        return recovered_how(self.result, self.path)

    @cached_property
    def telemetry(self) -> TelemetryLog:
        return read_telemetry(self.path, self.notes)

    @cached_property
    def server_timeline(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        return read_server_timeline(self.path, self.notes)

    @cached_property
    def _by_level(self) -> dict[int, list[RequestRecord]]:
        out: dict[int, list[RequestRecord]] = {}
        for r in self.requests:
            out.setdefault(r.level, []).append(r)
        return out

    def level_requests(self, index: int) -> list[RequestRecord]:
        """Requests of one level (warm-up included), in file order."""
        return self._by_level.get(index, [])


def load_runs(paths: Sequence[str | Path]) -> list[RunData]:
    """RunData for each path, in order; UserError on the first missing or corrupt one."""
    if not paths:
        raise UserError("give at least one run directory")
    return [RunData(p) for p in paths]
