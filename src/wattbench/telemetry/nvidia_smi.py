"""NVIDIA GPUs through the ``nvidia-smi`` CLI, for machines where the NVML bindings cannot load.

Streaming mode (default): one long-running
``nvidia-smi --query-gpu=index,timestamp,power.draw,… --format=csv,noheader,nounits -lms 100``
child (argv list) whose lines a reader thread queues; ``read()`` drains the queue and never
blocks. One-shot mode (``stream=False``) runs the query once per poll. Values ``[N/A]``,
``N/A`` and ``[Not Supported]`` are skipped. Power only (no energy counter): ``power.draw.instant``
is primary where the driver knows it, else ``power.draw`` (a 1 s average on recent drivers).
Each line is stamped with nvidia-smi's own timestamp (local wall time, ms) mapped onto the run
clock through a ``ClockAnchor``, unless it is more than 1 s from the line's arrival time, in
which case the arrival time is used.
"""

from __future__ import annotations

import datetime as _dt
import queue
import subprocess
import threading

from wattbench.core.secret_scope import clip
from wattbench.core.clock import ClockAnchor, now_ns
from wattbench.core.errors import SensorError
from wattbench.telemetry.base import Channel, Kind, Reading, Sensor

# (query field, channel quantity, kind, unit, boundary)
FIELDS: list[tuple[str, str, Kind, str, str | None]] = [
    ("power.draw.instant", "power_instant", "power", "W", "accelerator"),
    ("power.draw", "power_draw", "power", "W", "accelerator"),
    ("power.draw.average", "power_avg", "power", "W", "accelerator"),
    ("temperature.gpu", "temperature_c", "aux", "C", None),
    ("clocks.sm", "sm_clock_mhz", "aux", "MHz", None),
    ("clocks.mem", "mem_clock_mhz", "aux", "MHz", None),
    ("utilization.gpu", "gpu_util_pct", "aux", "%", None),
    ("utilization.memory", "mem_util_pct", "aux", "%", None),
    ("memory.used", "memory_used_bytes", "aux", "B", None),
    ("clocks_event_reasons.active", "clock_event_reasons", "aux", "bitmask", None),
    ("power.limit", "power_limit_w", "aux", "W", None),
    ("pstate", "pstate", "aux", "P", None),
]
BASE_FIELDS = ["power.draw", "temperature.gpu", "clocks.sm", "clocks.mem", "utilization.gpu",
               "utilization.memory", "memory.used", "power.limit", "pstate"]
MISSING = {"[n/a]", "n/a", "[not supported]", "not supported", "", "[unknown error]"}
FIX = "install the NVIDIA driver (it ships nvidia-smi) and check that `nvidia-smi` runs"


def parse_value(field: str, text: str) -> float | None:
    t = text.strip()
    if t.lower() in MISSING:
        return None
    try:
        if field == "pstate":
            return float(t.lstrip("Pp"))
        if field == "clocks_event_reasons.active":
            return float(int(t, 16))
        v = float(t)
    except ValueError:
        return None
    if field == "memory.used":
        v *= 1024 * 1024  # MiB
    return v


def parse_timestamp(text: str) -> float | None:
    """nvidia-smi's ``YYYY/MM/DD HH:MM:SS.mmm`` (local time) -> unix seconds."""
    try:
        return _dt.datetime.strptime(text.strip(), "%Y/%m/%d %H:%M:%S.%f").timestamp()
    except ValueError:
        return None


class NvidiaSmiSensor(Sensor):
    name = "nvidia-smi"

    def __init__(self, indices: list[int] | None = None, interval_ms: int = 100, stream: bool = True,
                 exe: str = "nvidia-smi", timeout_s: float = 10.0) -> None:
        self.indices = indices
        self.interval_ms = interval_ms
        self.stream = stream
        self.exe = exe
        self.timeout_s = timeout_s
        self.fields: list[str] = [f[0] for f in FIELDS]
        if not stream:
            self.poll_interval_s = 1.0
        else:
            self.poll_interval_s = max(0.1, interval_ms / 1000.0)
        self.anchor: ClockAnchor | None = None
        self._proc: subprocess.Popen[str] | None = None
        self._queue: queue.Queue[tuple[int, str | None]] = queue.Queue()  # (arrival ns, line; None at its end)
        self._thread: threading.Thread | None = None
        self._ids: dict[tuple[int, str], str] = {}

    def _argv(self, fields: list[str], loop: bool) -> list[str]:
        a = [self.exe, "--query-gpu=" + ",".join(["index", "timestamp"] + fields), "--format=csv,noheader,nounits"]
        if self.indices is not None:
            a.append("--id=" + ",".join(str(i) for i in self.indices))
        if loop:
            a += ["-lms", str(int(self.interval_ms))]
        return a

    def _once(self, fields: list[str]) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run(self._argv(fields, False), capture_output=True, text=True, timeout=self.timeout_s)
        except FileNotFoundError:
            raise SensorError("nvidia-smi not found", FIX) from None
        except subprocess.TimeoutExpired:
            raise SensorError(f"nvidia-smi did not answer within {self.timeout_s:g} s", FIX) from None

    def open(self) -> list[Channel]:
        p = self._once(self.fields)
        if p.returncode != 0 and "not a valid field" in (p.stdout + p.stderr).lower():
            self.fields = list(BASE_FIELDS)  # an older driver: only the long-standing fields
            p = self._once(self.fields)
        if p.returncode != 0:
            msg = (p.stderr.strip() or p.stdout.strip()).splitlines()
            raise SensorError(f"nvidia-smi failed: {clip(msg[-1], 200) if msg else p.returncode}", FIX)
        self.anchor = ClockAnchor.take()
        meta = {f[0]: f for f in FIELDS}
        chans: list[Channel] = []
        rows = [r for r in (self._split(line) for line in p.stdout.splitlines()) if r]
        if not rows:
            raise SensorError("nvidia-smi lists no GPU", FIX)
        for row in rows:
            idx = int(row[0])
            present = {f: parse_value(f, v) is not None for f, v in zip(self.fields, row[2:])}
            primary_field = "power.draw.instant" if present.get("power.draw.instant") else "power.draw"
            for f in self.fields:
                if not present.get(f):
                    continue
                _, q, kind, unit, boundary = meta[f]
                cid = f"nvidia_smi.gpu{idx}.{q}"
                self._ids[(idx, f)] = cid
                chans.append(Channel(
                    id=cid, sensor=self.name, kind=kind, quantity=("power_avg" if q == "power_avg" else
                                                                    "power" if kind == "power" else q),
                    unit=unit, boundary=boundary, device=f"gpu{idx}", resolution=0.01 if kind == "power" else None,
                    update_period_s=self.interval_ms / 1000.0 if self.stream else None,
                    source=f"nvidia-smi {f}", primary=f == primary_field,
                ))
        if self.stream:
            self._start_stream()
        return chans

    @staticmethod
    def _split(line: str) -> list[str] | None:
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 3 or not parts[0].isdigit():
            return None
        return parts

    def _start_stream(self) -> None:
        try:
            self._proc = subprocess.Popen(self._argv(self.fields, True), stdout=subprocess.PIPE,
                                          stderr=subprocess.DEVNULL, text=True, bufsize=1)
        except FileNotFoundError:
            raise SensorError("nvidia-smi not found", FIX) from None
        out, q = self._proc.stdout, self._queue
        assert out is not None  # stdout=PIPE

        def pump() -> None:
            for line in out:
                q.put((now_ns(), line))
            q.put((now_ns(), None))

        self._thread = threading.Thread(target=pump, name="wattbench-nvidia-smi", daemon=True)
        self._thread.start()

    def _parse(self, arrival_ns: int, line: str) -> list[Reading]:
        row = self._split(line)
        if row is None or len(row) < 2 + len(self.fields):
            return []
        idx = int(row[0])
        t = arrival_ns
        ts = parse_timestamp(row[1])
        if ts is not None and self.anchor is not None:
            mapped = self.anchor.to_mono_ns(int(ts * 1e9))
            if abs(mapped - arrival_ns) < 1_000_000_000:
                t = mapped
        out = []
        for f, v in zip(self.fields, row[2:]):
            cid = self._ids.get((idx, f))
            val = parse_value(f, v)
            if cid is not None and val is not None:
                out.append(Reading(t, cid, val))
        return out

    def read(self) -> list[Reading]:
        if not self.stream:
            a = now_ns()
            p = self._once(self.fields)
            b = now_ns()
            if p.returncode != 0:
                raise SensorError(f"nvidia-smi exited {p.returncode}")
            out = []
            for line in p.stdout.splitlines():
                out.extend(self._parse((a + b) // 2, line))
            return out
        out = []
        ended = False
        while True:
            try:
                arrival, text = self._queue.get_nowait()
            except queue.Empty:
                break
            if text is None:
                ended = True
                break
            out.extend(self._parse(arrival, text))
        if ended:
            code = self._proc.wait() if self._proc else None
            self._restart_note = f"nvidia-smi stream ended (exit {code}); restarted"
            self._start_stream()
            if not out:
                raise SensorError(self._restart_note)
        return out

    def close(self) -> None:
        p, self._proc = self._proc, None
        if p is not None and p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout=2)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if self._thread is not None:
            self._thread.join(timeout=2)
            self._thread = None
