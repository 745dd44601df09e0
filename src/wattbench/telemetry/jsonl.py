"""The raw telemetry of a run: ``telemetry.jsonl``.

Line 1, the header::

    {"format": "wattbench.telemetry", "version": 1, "anchor": {"wall_ns":…, "mono_ns":…, "uncertainty_ns":…},
     "channels": [Channel.to_dict(), …]}

then any number of batch lines, one per channel per flush (columnar, compact)::

    {"c": "nvml.gpu0.energy", "t": [mono_ns, …], "v": [value, …]}

and failure lines ``{"failure": {"sensor":…, "t_ns":…, "error":…}}``. Timestamps are the run's
monotonic ns; the anchor maps them to wall time. ``TelemetryWriter.flush(log)`` appends only what
arrived since the previous flush, so calling it after every level keeps the file complete when a
run is interrupted. ``read_telemetry`` rebuilds a ``TelemetryLog``; a torn last line (a crash in
the middle of a write) is ignored.
"""

from __future__ import annotations

import json
from pathlib import Path

from wattbench.clock import ClockAnchor
from wattbench.errors import UserError
from wattbench.telemetry.base import Channel, SensorFailure, TelemetryLog

FORMAT = "wattbench.telemetry"
VERSION = 1


def _dumps(obj) -> str:
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
        n_total = 0
        for cid in list(log.t_ns.keys()):
            ts, vs = log.t_ns[cid], log.values.get(cid, [])
            n = min(len(ts), len(vs))
            start = self._written.get(cid, 0)
            if n > start:
                lines.append(_dumps({"c": cid, "t": ts[start:n], "v": vs[start:n]}))
                self._written[cid] = n
                n_total += n - start
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


def read_header(path: str | Path) -> dict:
    with Path(path).open() as f:
        first = f.readline()
    try:
        header = json.loads(first)
    except json.JSONDecodeError:
        raise UserError(f"{path}: not a wattbench telemetry file (first line is not JSON)") from None
    if header.get("format") != FORMAT:
        raise UserError(f"{path}: not a wattbench telemetry file (format {header.get('format')!r})")
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
    log.add_channels([Channel(**{k: v for k, v in c.items() if k in fields}) for c in header.get("channels", [])])
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
            if "failure" in rec:
                fr = rec["failure"]
                log.failures.append(SensorFailure(sensor=fr["sensor"], t_ns=int(fr["t_ns"]), error=fr["error"]))
                continue
            cid = rec["c"]
            log.t_ns.setdefault(cid, []).extend(int(t) for t in rec["t"])
            log.values.setdefault(cid, []).extend(float(v) for v in rec["v"])
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
