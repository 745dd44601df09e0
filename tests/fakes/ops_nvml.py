"""A fake ``pynvml`` module object for ``wattbench doctor``'s read-only GPU checks.

Each ``OpsGPU`` holds the values the doctor reads (power limits in mW, persistence, clocks,
clock event reasons, temperature and its slowdown threshold, ECC mode and counts, remapped rows).
``unsupported`` names functions that raise NVMLError_NotSupported. Every call is recorded in
``calls`` so a test can assert that no ``Set`` function was ever called.

For ``wattbench tune``'s GPU settings it also has the settable parts: the power limit constraints
(``min_mw``/``max_mw``), the supported clocks, ``nvmlDeviceSetPowerManagementLimit`` (refused
outside the constraints, as NVML does), ``nvmlDeviceSetGpuLockedClocks`` /
``nvmlDeviceResetGpuLockedClocks``. With ``persist=PATH`` the settable state lives in a JSON file,
as it lives on the device: a process killed mid-trial leaves it changed, and a fresh FakeNvml on
the same PATH (another process) sees it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field


class NVMLError(Exception):
    def __init__(self, value: int, text: str = ""):
        super().__init__(text or f"NVML error {value}")
        self.value = value


NOT_SUPPORTED = 3


@dataclass
class OpsGPU:
    name: str = "NVIDIA H200"
    enforced_mw: int = 700_000
    default_mw: int = 700_000
    management_mw: int = 700_000
    persistence: int = 1
    sm_clock: int = 1980
    max_sm_clock: int = 1980
    reasons: int = 0x1
    temperature: int = 35
    slowdown_c: int = 87
    ecc_mode: tuple = (1, 1)
    volatile_unc: int = 0
    aggregate_unc: int = 0
    remapped: tuple = (0, 0, False, False)
    min_mw: int = 100_000
    max_mw: int = 700_000
    mem_clocks: tuple = (3201, 1593)
    graphics_clocks: tuple = (1980, 1785, 1590, 1395, 1200, 1005, 810, 615, 345)
    locked_clocks: tuple | None = None  # (min, max) MHz while locked


@dataclass
class FakeNvml:
    gpus: list = field(default_factory=lambda: [OpsGPU()])
    driver: str = "580.65.06"
    cuda: int = 13000
    init_error: Exception | None = None
    unsupported: set = field(default_factory=set)
    calls: list = field(default_factory=list)
    persist: str | None = None  # JSON file holding the settable state (survives the process)

    NVMLError = NVMLError
    NVML_ERROR_INVALID_ARGUMENT = 2
    NVML_ERROR_NO_PERMISSION = 4

    def __post_init__(self):
        if self.persist and os.path.exists(self.persist):
            with open(self.persist) as f:
                for g, st in zip(self.gpus, json.load(f)):
                    g.enforced_mw = g.management_mw = st["power_mw"]
                    g.locked_clocks = tuple(st["locked"]) if st["locked"] else None

    def _save(self):
        if self.persist:
            with open(self.persist + ".tmp", "w") as f:
                json.dump([{"power_mw": g.management_mw, "locked": g.locked_clocks} for g in self.gpus], f)
            os.replace(self.persist + ".tmp", self.persist)

    def nvmlDeviceGetPowerManagementLimitConstraints(self, h):
        self._c("nvmlDeviceGetPowerManagementLimitConstraints")
        return (h.min_mw, h.max_mw)

    def nvmlDeviceSetPowerManagementLimit(self, h, mw):
        self._c("nvmlDeviceSetPowerManagementLimit")
        if not h.min_mw <= mw <= h.max_mw:
            raise NVMLError(self.NVML_ERROR_INVALID_ARGUMENT, "Invalid Argument")
        h.management_mw = h.enforced_mw = int(mw)
        self._save()

    def nvmlDeviceGetSupportedMemoryClocks(self, h):
        self._c("nvmlDeviceGetSupportedMemoryClocks")
        return list(h.mem_clocks)

    def nvmlDeviceGetSupportedGraphicsClocks(self, h, mem):
        self._c("nvmlDeviceGetSupportedGraphicsClocks")
        return list(h.graphics_clocks)

    def nvmlDeviceSetGpuLockedClocks(self, h, lo, hi):
        self._c("nvmlDeviceSetGpuLockedClocks")
        h.locked_clocks = (int(lo), int(hi))
        h.sm_clock = int(hi)
        self._save()

    def nvmlDeviceResetGpuLockedClocks(self, h):
        self._c("nvmlDeviceResetGpuLockedClocks")
        h.locked_clocks = None
        h.sm_clock = h.max_sm_clock
        self._save()

    NVML_ERROR_NOT_SUPPORTED = NOT_SUPPORTED
    NVML_FEATURE_ENABLED = 1
    NVML_CLOCK_SM = 1
    NVML_TEMPERATURE_GPU = 0
    NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
    NVML_VOLATILE_ECC = 0
    NVML_AGGREGATE_ECC = 1

    def _c(self, fn: str):
        self.calls.append(fn)
        if fn in self.unsupported:
            raise NVMLError(NOT_SUPPORTED, "Not Supported")

    def nvmlInit(self):
        self._c("nvmlInit")
        if self.init_error is not None:
            raise self.init_error

    def nvmlShutdown(self):
        self._c("nvmlShutdown")

    def nvmlSystemGetDriverVersion(self):
        self._c("nvmlSystemGetDriverVersion")
        return self.driver

    def nvmlSystemGetCudaDriverVersion(self):
        self._c("nvmlSystemGetCudaDriverVersion")
        return self.cuda

    def nvmlDeviceGetCount(self):
        self._c("nvmlDeviceGetCount")
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i):
        self._c("nvmlDeviceGetHandleByIndex")
        return self.gpus[i]

    def nvmlDeviceGetName(self, h):
        self._c("nvmlDeviceGetName")
        return h.name

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        self._c("nvmlDeviceGetEnforcedPowerLimit")
        return h.enforced_mw

    def nvmlDeviceGetPowerManagementDefaultLimit(self, h):
        self._c("nvmlDeviceGetPowerManagementDefaultLimit")
        return h.default_mw

    def nvmlDeviceGetPowerManagementLimit(self, h):
        self._c("nvmlDeviceGetPowerManagementLimit")
        return h.management_mw

    def nvmlDeviceGetPersistenceMode(self, h):
        self._c("nvmlDeviceGetPersistenceMode")
        return h.persistence

    def nvmlDeviceGetClockInfo(self, h, t):
        self._c("nvmlDeviceGetClockInfo")
        return h.sm_clock

    def nvmlDeviceGetMaxClockInfo(self, h, t):
        self._c("nvmlDeviceGetMaxClockInfo")
        return h.max_sm_clock

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        self._c("nvmlDeviceGetCurrentClocksEventReasons")
        return h.reasons

    def nvmlDeviceGetTemperature(self, h, s):
        self._c("nvmlDeviceGetTemperature")
        return h.temperature

    def nvmlDeviceGetTemperatureThreshold(self, h, t):
        self._c("nvmlDeviceGetTemperatureThreshold")
        return h.slowdown_c

    def nvmlDeviceGetEccMode(self, h):
        self._c("nvmlDeviceGetEccMode")
        return h.ecc_mode

    def nvmlDeviceGetTotalEccErrors(self, h, etype, ctype):
        self._c("nvmlDeviceGetTotalEccErrors")
        return h.volatile_unc if ctype == 0 else h.aggregate_unc

    def nvmlDeviceGetRemappedRows(self, h):
        self._c("nvmlDeviceGetRemappedRows")
        return h.remapped
