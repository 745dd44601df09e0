"""The raw telemetry of a run: ``telemetry.jsonl``.

Line 1, the header::

    {"format": "wattbench.telemetry", "version": 1, "anchor": {"wall_ns":…, "mono_ns":…, "uncertainty_ns":…},
     "channels": [Channel.to_dict(), …]}

then batch lines of readings, ``{"r": [[t_ns, channel_id, value], …]}`` (at most ``BATCH_ROWS``
rows a line), and failure lines ``{"failure": {"sensor":…, "t_ns":…, "error":…}}``. Readers
also accept single readings ``{"t_ns": int, "c": channel_id, "v": value}`` and later
``{"channels": […]}`` lines that add channels (the same format ``wattbench.report`` reads).
Timestamps are the run's monotonic ns; the anchor maps them to wall time.

``TelemetryWriter.flush(log)`` appends only what arrived since the previous flush, so calling it
after every level keeps the file complete when a run is interrupted. ``read_telemetry``
rebuilds a ``TelemetryLog``; a torn last line (a crash in the middle of a write) is ignored.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from wattbench.core.clock import ClockAnchor
from wattbench.core.errors import UserError
from wattbench.telemetry.base import Channel, SensorFailure, TelemetryLog

FORMAT = "wattbench.telemetry"
VERSION = 1
BATCH_ROWS = 5000


def _dumps(obj: object) -> str:
    try:
        import orjson

        return orjson.dumps(obj).decode()
    except ImportError:
        return json.dumps(obj, separators=(",", ":"))


class TelemetryWriter:
    def __init__(self, path: str | Path, channels: list[Channel], anchor: ClockAnchor | None = None) -> None:
        self.path = Path(path)
        self.channels = list(channels)
        self.anchor = anchor
        self._written: dict[str, int] = {}
        self._failures_written = 0
        header = {"format": FORMAT, "version": VERSION, "channels": [c.to_dict() for c in self.channels]}
        if anchor is not None:
            header["anchor"] = {"wall_ns": anchor.wall_ns, "mono_ns": anchor.mono_ns,
                                "uncertainty_ns": anchor.uncertainty_ns}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("w") as f:
            f.write(_dumps(header) + "\n")

    def flush(self, log: TelemetryLog) -> int:
        """Append every reading and failure in ``log`` not yet written; return readings written.

        Safe while the sampler thread keeps appending: each channel is cut at the length of the
        shorter of its two lists as seen now.
        """
        lines: list[str] = []
        rows: list[list[object]] = []
        n_total = 0
        for cid in list(log.t_ns.keys()):
            ts, vs = log.t_ns[cid], log.values.get(cid, [])
            n = min(len(ts), len(vs))
            start = self._written.get(cid, 0)
            for i in range(start, n):
                rows.append([ts[i], cid, vs[i]])
                if len(rows) >= BATCH_ROWS:
                    lines.append(_dumps({"r": rows}))
                    rows = []
            if n > start:
                self._written[cid] = n
                n_total += n - start
        if rows:
            lines.append(_dumps({"r": rows}))
        failures = log.failures
        nf = len(failures)
        for f in failures[self._failures_written:nf]:
            lines.append(_dumps({"failure": {"sensor": f.sensor, "t_ns": f.t_ns, "error": f.error}}))
        self._failures_written = nf
        if lines:
            with self.path.open("a") as fh:
                fh.write("\n".join(lines) + "\n")
        return n_total


def write_telemetry(path: str | Path, log: TelemetryLog, anchor: ClockAnchor | None = None) -> Path:
    """Write a whole log at once."""
    w = TelemetryWriter(path, list(log.channels.values()), anchor)
    w.flush(log)
    return w.path


def read_header(path: str | Path) -> dict[str, Any]:
    with Path(path).open() as f:
        first = f.readline()
    try:
        header = json.loads(first)
    except json.JSONDecodeError:
        raise UserError(f"{path}: not a wattbench telemetry file (first line is not JSON)") from None
    if not isinstance(header, dict) or header.get("format", FORMAT) != FORMAT or "channels" not in header:
        raise UserError(f"{path}: not a wattbench telemetry file (its first line must hold the channels)")
    if header.get("version", 0) > VERSION:
        raise UserError(f"{path}: telemetry version {header['version']} is newer than this wattbench; upgrade it")
    return header


def read_telemetry(path: str | Path) -> TelemetryLog:
    """Read ``telemetry.jsonl`` back into a TelemetryLog (batches merged in time order per channel)."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"{path}: no such telemetry file")
    header = read_header(path)
    log = TelemetryLog()
    fields = set(Channel.__dataclass_fields__)

    def channels(dicts: list[dict[str, Any]] | None) -> list[Channel]:
        return [Channel(**{k: v for k, v in c.items() if k in fields}) for c in dicts or []]

    log.add_channels(channels(header.get("channels", [])))

    def add(t: int | float, c: str, v: float | None) -> None:
        if v is None:
            return
        log.t_ns.setdefault(c, []).append(int(t))
        log.values.setdefault(c, []).append(float(v))

    with path.open() as f:
        f.readline()
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                break  # torn last line from an interrupted write
            if "r" in rec:
                for t, c, v in rec["r"]:
                    add(t, c, v)
            elif "failure" in rec:
                fr = rec["failure"]
                log.failures.append(SensorFailure(sensor=fr["sensor"], t_ns=int(fr["t_ns"]), error=fr["error"]))
            elif "channels" in rec:
                log.add_channels(channels(rec["channels"]))
            elif "t_ns" in rec and "c" in rec:
                add(rec["t_ns"], rec["c"], rec.get("v"))
    for cid, ts in log.t_ns.items():  # sample-buffer drains can interleave; keep series sorted
        if any(b < a for a, b in zip(ts, ts[1:])):
            pairs = sorted(zip(ts, log.values[cid]))
            log.t_ns[cid] = [p[0] for p in pairs]
            log.values[cid] = [p[1] for p in pairs]
    return log


def read_anchor(path: str | Path) -> ClockAnchor | None:
    a = read_header(path).get("anchor")
    if not a:
        return None
    return ClockAnchor(wall_ns=int(a["wall_ns"]), mono_ns=int(a["mono_ns"]), uncertainty_ns=int(a["uncertainty_ns"]))
