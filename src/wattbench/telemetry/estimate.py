"""Estimated CPU power when no CPU meter exists: ``--sensor estimate:cpu[,tdp=W][,idle=W]``.

power = idle_w + (tdp_w − idle_w) × utilization, utilization from ``psutil.cpu_percent`` (all
CPUs, since the previous poll). TDP: given, or looked up from the ``/proc/cpuinfo`` model name in
``TDP_TABLE`` (per socket, × sockets). ``idle_w`` defaults to ``IDLE_FRACTION`` × TDP.
Labelled ``method="estimate"`` with ``uncertainty_pct`` (default 30 %): real CPUs draw far from
linear in utilization (turbo, AVX, memory-bound stalls), so this is a placeholder figure for a
boundary nobody meters, never mixed silently with measured ones.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable

from wattbench.core.clock import now_ns
from wattbench.core.errors import UserError
from wattbench.telemetry.base import Channel, Reading, Sensor

# Vendor TDP per socket (W), from the vendors' product pages. Substring match on the model name.
TDP_TABLE: dict[str, float] = {
    "EPYC 9965": 500, "EPYC 9755": 500, "EPYC 9754": 360, "EPYC 9654": 360, "EPYC 9554": 360,
    "EPYC 9454": 290, "EPYC 9354": 280, "EPYC 7763": 280, "EPYC 7742": 225, "EPYC 7543": 225,
    "EPYC 7413": 180, "Xeon Platinum 8592+": 350, "Xeon Platinum 8580": 350, "Xeon Platinum 8490H": 350,
    "Xeon Platinum 8480+": 350, "Xeon Platinum 8480C": 350, "Xeon Platinum 8468": 350,
    "Xeon Platinum 8462Y+": 300, "Xeon Platinum 8380": 270, "Xeon Platinum 8358": 250,
    "Xeon Gold 6448Y": 225, "Xeon Gold 6338": 205, "Xeon 6980P": 500, "Xeon 6972P": 500,
    "Neoverse-V2": 250,  # NVIDIA Grace (72 cores) module CPU+LPDDR budget is 250 W per CPU
}
IDLE_FRACTION = 0.3
DEFAULT_UNCERTAINTY_PCT = 30.0
# When the CPU model's TDP is unknown: a per-logical-CPU assumption (server CPUs run ~3–12 W per
# hardware thread at full load) and a wider uncertainty.
FALLBACK_W_PER_CPU = 8.0
FALLBACK_UNCERTAINTY_PCT = 60.0


def cpu_model_and_sockets(cpuinfo: str | Path = "/proc/cpuinfo") -> tuple[str | None, int]:
    try:
        text = Path(cpuinfo).read_text()
    except OSError:
        return None, 1
    model = None
    m = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
    if m:
        model = m.group(1).strip()
    sockets = len(set(re.findall(r"^physical id\s*:\s*(\d+)$", text, re.M))) or 1
    return model, sockets


def lookup_tdp_w(model: str | None) -> float | None:
    if not model:
        return None
    norm = " ".join(re.sub(r"\((R|TM|tm|r)\)", " ", model).split())
    for key in sorted(TDP_TABLE, key=len, reverse=True):
        if key in norm:
            return TDP_TABLE[key]
    return None


class CpuEstimateSensor(Sensor):
    name = "estimate:cpu"

    def __init__(self, tdp_w: float | None = None, idle_w: float | None = None,
                 uncertainty_pct: float = DEFAULT_UNCERTAINTY_PCT, cpuinfo: str | Path = "/proc/cpuinfo",
                 cpu_percent: Callable[[], float] | None = None, poll_interval_s: float | None = None) -> None:
        if tdp_w is not None and tdp_w <= 0:
            raise UserError(f"estimate:cpu: tdp must be > 0 W, got {tdp_w}")
        if idle_w is not None and idle_w < 0:
            raise UserError(f"estimate:cpu: idle must be >= 0 W, got {idle_w}")
        self.tdp_w = tdp_w
        self.idle_w = idle_w
        self.uncertainty_pct = uncertainty_pct
        self.cpuinfo = cpuinfo
        self._cpu_percent = cpu_percent
        self.model: str | None = None
        if poll_interval_s is not None:
            self.poll_interval_s = poll_interval_s

    def open(self) -> list[Channel]:
        model, sockets = cpu_model_and_sockets(self.cpuinfo)
        self.model = model
        source = "given tdp"
        basis = f"TDP {self.tdp_w:g} W given" if self.tdp_w is not None else ""
        if self.tdp_w is None:
            per_socket = lookup_tdp_w(model)
            if per_socket is None:
                # No TDP known (e.g. a VM's slice of a server CPU): assume FALLBACK_W_PER_CPU per
                # logical CPU this machine sees, with a wide uncertainty. Labelled in the source.
                import os

                cpus = os.cpu_count() or 1
                self.tdp_w = FALLBACK_W_PER_CPU * cpus
                self.uncertainty_pct = max(self.uncertainty_pct, FALLBACK_UNCERTAINTY_PCT)
                basis = f"{FALLBACK_W_PER_CPU:g} W per logical CPU × {cpus} assumed"
                source = (f"no TDP known for {model!r}: {basis} "
                          "(give the real figure with `--sensor estimate:cpu,tdp=WATTS`)")
            else:
                self.tdp_w = per_socket * sockets
                source = f"TDP table: {model} × {sockets} socket(s)"
                basis = f"TDP {per_socket:g} W × {sockets} socket{'s' if sockets != 1 else ''} from the TDP table"
        if self.idle_w is None:
            self.idle_w = IDLE_FRACTION * self.tdp_w
        if self.idle_w > self.tdp_w:
            raise UserError(f"estimate:cpu: idle {self.idle_w} W exceeds tdp {self.tdp_w} W")
        if self._cpu_percent is None:
            import psutil  # type: ignore[import-untyped]  # psutil ships no stubs (types-psutil is not a dependency)

            self._cpu_percent = lambda: psutil.cpu_percent(interval=None)
        self._cpu_percent()  # psutil's first call only sets the reference point
        return [Channel(
            id="estimate.cpu", sensor=self.name, kind="power", quantity="power", unit="W", boundary="cpu",
            device=model or "cpu", source=f"idle {self.idle_w:g} W + ({self.tdp_w:g} − idle) × utilization; {source}",
            method="estimate", primary=True, uncertainty_pct=self.uncertainty_pct,
            # the assumption in a few words: the estimate finding and the answer line quote it
            # (accounting.validity.estimate_findings)
            notes=f"estimate from CPU utilization: {basis}",
        )]

    def read(self) -> list[Reading]:
        assert self._cpu_percent is not None and self.tdp_w is not None and self.idle_w is not None, "open() first"
        util = max(0.0, min(100.0, float(self._cpu_percent()))) / 100.0
        return [Reading(now_ns(), "estimate.cpu", self.idle_w + (self.tdp_w - self.idle_w) * util)]
