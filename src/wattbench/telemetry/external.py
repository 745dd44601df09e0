"""External meters, for ``wall``-boundary figures (or any boundary you name).

* ``CommandSensor`` — a program that prints watts (first number on its output), run each poll
  as an argv list (never a shell string) with a timeout. Spec: ``cmd:/path/prog,arg1,arg2`` or
  ``cmd:["/path/prog","arg"]``.
* ``FileSensor`` — a CSV or JSONL file a wall meter or PDU logger appends to: lines
  ``unix_time_s,watts`` (a header line is skipped) or ``{"t": unix_time_s, "w": watts}``. The file
  is tailed from where it ended at open (its last complete line before that is read too, so the
  series has a value at the start); wall timestamps are mapped onto the run's monotonic clock
  with a ``ClockAnchor`` taken at open. A truncated/rotated file is re-read from its start.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from wattbench.core.secret_scope import clip
from wattbench.core.clock import ClockAnchor, now_ns
from wattbench.core.errors import SensorError, UserError
from wattbench.telemetry.base import BOUNDARIES, Channel, Reading, Sensor

NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def _check_boundary(boundary: str) -> str:
    if boundary not in BOUNDARIES:
        raise UserError(f"unknown boundary {boundary!r}; use one of {', '.join(BOUNDARIES)}")
    return boundary


class CommandSensor(Sensor):
    name = "cmd"

    def __init__(self, argv: list[str], boundary: str = "wall", timeout_s: float = 5.0,
                 poll_interval_s: float = 1.0) -> None:
        if not argv or not all(isinstance(a, str) and a for a in argv):
            raise UserError("cmd: give the program and its arguments as a list, e.g. cmd:/usr/local/bin/meter,--watts")
        self.argv = list(argv)
        self.boundary = _check_boundary(boundary)
        self.timeout_s = timeout_s
        self.poll_interval_s = poll_interval_s
        self.cid = f"cmd.{self.boundary}"

    def _run(self) -> float:
        try:
            p = subprocess.run(self.argv, capture_output=True, text=True, timeout=self.timeout_s)
        except FileNotFoundError:
            raise SensorError(f"cmd: program {self.argv[0]!r} not found", "give the full path of an executable") from None
        except PermissionError:
            raise SensorError(f"cmd: {self.argv[0]!r} is not executable", f"`chmod +x {self.argv[0]}`") from None
        except subprocess.TimeoutExpired:
            raise SensorError(f"cmd: {self.argv[0]} took more than {self.timeout_s:g} s",
                              "make it print one reading and exit") from None
        if p.returncode != 0:
            tail = (p.stderr or p.stdout).strip().splitlines()[-1:] or [""]
            raise SensorError(f"cmd: {self.argv[0]} exited {p.returncode}: {clip(tail[0], 200)}")
        m = NUMBER.search(p.stdout)
        if not m:
            raise SensorError(f"cmd: {self.argv[0]} printed no number: {clip(p.stdout.strip(), 100)!r}",
                              "make it print the watts, e.g. `412.5`")
        return float(m.group(0))

    def open(self) -> list[Channel]:
        self._run()
        return [Channel(id=self.cid, sensor=self.name, kind="power", quantity="power", unit="W",
                        boundary=self.boundary, device=Path(self.argv[0]).name, source=" ".join(self.argv),
                        primary=True)]

    def read(self) -> list[Reading]:
        a = now_ns()
        w = self._run()
        b = now_ns()
        return [Reading((a + b) // 2, self.cid, w)]


def parse_meter_line(line: str) -> tuple[float, float] | None:
    """``(unix_time_s, watts)`` from one CSV or JSONL line; None for a header or blank line."""
    line = line.strip()
    if not line:
        return None
    if line.startswith("{"):
        try:
            d = json.loads(line)
            return float(d["t"]), float(d["w"])
        except (ValueError, KeyError, TypeError):
            return None
    parts = [p.strip() for p in re.split(r"[,;\t]", line)]
    if len(parts) < 2:
        return None
    try:
        return float(parts[0]), float(parts[1])
    except ValueError:
        return None  # a header


class FileSensor(Sensor):
    name = "file"

    def __init__(self, path: str | Path, boundary: str = "wall", poll_interval_s: float = 0.5) -> None:
        self.path = Path(path)
        self.boundary = _check_boundary(boundary)
        self.poll_interval_s = poll_interval_s
        self.cid = f"file.{self.boundary}"
        self.anchor: ClockAnchor | None = None
        self._pos = 0
        self._buf = ""
        self._last_t: float | None = None

    def open(self) -> list[Channel]:
        if not self.path.exists():
            raise SensorError(f"file: {self.path} does not exist", "start the meter's logger first, or fix the path")
        try:
            data = self.path.read_bytes()
        except PermissionError:
            raise SensorError(f"file: cannot read {self.path}", f"`chmod a+r {self.path}`") from None
        self.anchor = ClockAnchor.take()
        end = data.rfind(b"\n") + 1  # tail from the last complete line
        start = data.rfind(b"\n", 0, max(end - 1, 0)) + 1
        self._pos = start
        return [Channel(id=self.cid, sensor=self.name, kind="power", quantity="power", unit="W",
                        boundary=self.boundary, device=self.path.name, source=str(self.path), primary=True,
                        notes="wall-clock timestamps mapped onto the run clock")]

    def read(self) -> list[Reading]:
        size = self.path.stat().st_size
        if size < self._pos:  # truncated or rotated
            self._pos, self._buf = 0, ""
        with self.path.open("rb") as f:
            f.seek(self._pos)
            chunk = f.read()
        self._pos += len(chunk)
        text = self._buf + chunk.decode(errors="replace")
        lines = text.split("\n")
        self._buf = lines.pop()  # incomplete last line waits for its newline
        assert self.anchor is not None, "open() first"
        out = []
        for line in lines:
            tw = parse_meter_line(line)
            if tw is None:
                continue
            t, w = tw
            if self._last_t is not None and t <= self._last_t:
                continue
            self._last_t = t
            out.append(Reading(self.anchor.to_mono_ns(int(round(t * 1e9))), self.cid, w))
        return out
