"""The one fake ``pynvml`` module object of the test suite (sensor, doctor, tune, sampler bench).

A ``FakeNvml`` instance stands in for the ``pynvml`` module; each ``FakeGPU`` holds scripted values:

- **sensing** (``telemetry/nvml.py``): a cumulative energy counter (mJ) advanced by ``advance(s)``
  at ``power_mw`` (or, with ``update_period_s``, on the driver's own refresh grid, as the H200's
  ~100 ms), fields 185/186 and the memory scope, a sample buffer, aux gauges. As on the H200 (driver
  580), the memory scope (scopeId 2) answers only on field 185, the 1 s average: ``mem_scope_fields``
  names the fields that answer it (``(186,)`` or ``(185, 186)`` for other drivers); any other field
  with the memory scope, and any field with scope 1 (module), answers NOT_SUPPORTED;
- **doctor's read-only checks**: power limits (mW), persistence, clocks, clock event reasons,
  temperature (a fixed value, or ``temperature_curve``: a scripted curve over the fake's clock) and its
  slowdown threshold, ECC mode and counts, remapped rows;
- **tune's GPU settings**: power limit constraints (``min_mw``/``max_mw``), supported clocks,
  ``nvmlDeviceSetPowerManagementLimit`` (refused outside the constraints, as NVML does),
  ``nvmlDeviceSetGpuLockedClocks`` / ``nvmlDeviceResetGpuLockedClocks``. With ``persist=PATH`` the
  settable state lives in a JSON file, as it lives on the device: a process killed mid-trial leaves
  it changed, and a fresh FakeNvml on the same PATH (another process) sees it.

Every call is recorded in ``calls`` (in order) so a test can count reads or assert that no ``Set``
function was called. ``unsupported`` names functions (or ``field:F[:scope]``) that raise
NVMLError_NotSupported; ``fail_next[fn] = err`` makes the next call of ``fn`` raise ``err``.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from types import SimpleNamespace

NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_LIBRARY_NOT_FOUND = 12


class NVMLError(Exception):
    def __init__(self, value: int, text: str = ""):
        super().__init__(text or f"NVML error {value}")
        self.value = value


class NVMLError_NotSupported(NVMLError):  # noqa: N801  (pynvml's name)
    def __init__(self):
        super().__init__(NVML_ERROR_NOT_SUPPORTED, "Not Supported")


@dataclass
class FakeGPU:
    name: str = "NVIDIA H200"
    # sensing
    power_mw: int = 300_000
    avg_mw: int | None = None  # field 185 (1 s average); None: power_mw - 10 W
    mem_power_mw: int = 48_000
    energy_mj: int = 1_000_000
    mem_scope_fields: tuple = (185,)
    samples: list = field(default_factory=list)  # (timestamp_us, mW)
    uuid: str | None = None
    mem_clock: int = 3201
    util: SimpleNamespace = field(default_factory=lambda: SimpleNamespace(gpu=97, memory=55))
    mem: SimpleNamespace = field(default_factory=lambda: SimpleNamespace(
        total=143_771_000_000, used=70_000_000_000, free=73_771_000_000))
    pstate: int = 0
    # limits, state and health (doctor)
    enforced_mw: int = 700_000
    default_mw: int = 700_000
    management_mw: int = 700_000
    persistence: int = 1
    sm_clock: int = 1980
    max_sm_clock: int = 1980
    reasons: int = 0x1  # clock event reasons: GPU idle (nothing throttles)
    temperature: int = 41
    # a scripted temperature curve: °C as a function of the FakeNvml clock (s), read as an integer as
    # NVML gives it; None: ``temperature``
    temperature_curve: object = None
    slowdown_c: int = 87
    ecc_mode: tuple = (1, 1)
    volatile_unc: int = 0
    aggregate_unc: int = 0
    remapped: tuple = (0, 0, False, False)
    # settable (tune)
    min_mw: int = 100_000
    max_mw: int = 700_000
    mem_clocks: tuple = (3201, 1593)
    graphics_clocks: tuple = (1980, 1785, 1590, 1395, 1200, 1005, 810, 615, 345)
    locked_clocks: tuple | None = None  # (min, max) MHz while locked

    def __post_init__(self):
        if self.avg_mw is None:
            self.avg_mw = self.power_mw - 10_000
        if self.uuid is None:
            self.uuid = f"GPU-{abs(hash(self.name)) % 10**8:08d}"
        self.mem_scope_fields = tuple(self.mem_scope_fields)


class FakeNvml:
    NVMLError = NVMLError
    NVMLError_NotSupported = NVMLError_NotSupported
    NVML_ERROR_INVALID_ARGUMENT = NVML_ERROR_INVALID_ARGUMENT
    NVML_ERROR_NOT_SUPPORTED = NVML_ERROR_NOT_SUPPORTED
    NVML_ERROR_NO_PERMISSION = NVML_ERROR_NO_PERMISSION
    NVML_ERROR_NOT_FOUND = NVML_ERROR_NOT_FOUND
    NVML_FI_DEV_POWER_AVERAGE = 185
    NVML_FI_DEV_POWER_INSTANT = 186
    NVML_POWER_SCOPE_MEMORY = 2
    NVML_TOTAL_POWER_SAMPLES = 0
    NVML_TEMPERATURE_GPU = 0
    NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1
    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2
    NVML_FEATURE_ENABLED = 1
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
    NVML_VOLATILE_ECC = 0
    NVML_AGGREGATE_ECC = 1

    def __init__(self, gpus=None, unsupported=(), init_error=None, driver="580.65.06", cuda=13000,
                 update_period_s=None, persist: str | None = None, clock=None):
        self.gpus = gpus if gpus is not None else [FakeGPU()]
        self.unsupported = set(unsupported)
        self.init_error = init_error
        self.driver = driver
        self.cuda = cuda
        self.inits = 0
        self.calls: list[str] = []
        self.fail_next: dict[str, Exception] = {}
        self.update_period_s = update_period_s  # if set, values refresh on this grid (like the driver's 100 ms)
        self.clock = clock or time.perf_counter  # seconds; a test may drive a scripted clock instead
        self._tick = None
        self.persist = persist  # JSON file holding the settable state (survives the process)
        if persist and os.path.exists(persist):
            with open(persist) as f:
                for g, st in zip(self.gpus, json.load(f)):
                    g.enforced_mw = g.management_mw = st["power_mw"]
                    g.locked_clocks = tuple(st["locked"]) if st["locked"] else None

    # ------------------------------------------------------------ helpers for tests

    def advance(self, seconds: float) -> None:
        for g in self.gpus:
            g.energy_mj += int(g.power_mw * seconds)

    def _c(self, fn: str) -> None:
        if self.update_period_s:
            k = int(self.clock() / self.update_period_s)
            if self._tick is not None and k != self._tick:
                self.advance(self.update_period_s * (k - self._tick))
                for g in self.gpus:
                    g.power_mw += 1000
            self._tick = k
        self.calls.append(fn)
        if fn in self.fail_next:
            raise self.fail_next.pop(fn)
        if fn in self.unsupported:
            raise NVMLError_NotSupported()

    def _save(self) -> None:
        if self.persist:
            with open(self.persist + ".tmp", "w") as f:
                json.dump([{"power_mw": g.management_mw, "locked": g.locked_clocks} for g in self.gpus], f)
            os.replace(self.persist + ".tmp", self.persist)

    # ------------------------------------------------------------ system

    def nvmlInit(self):
        self._c("nvmlInit")
        if self.init_error is not None:
            raise self.init_error
        self.inits += 1

    def nvmlShutdown(self):
        self._c("nvmlShutdown")
        self.inits -= 1

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

    def nvmlDeviceGetUUID(self, h):
        self._c("nvmlDeviceGetUUID")
        return h.uuid

    # ------------------------------------------------------------ power and energy

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        self._c("nvmlDeviceGetTotalEnergyConsumption")
        return h.energy_mj

    def nvmlDeviceGetPowerUsage(self, h):
        self._c("nvmlDeviceGetPowerUsage")
        return h.power_mw

    def nvmlDeviceGetFieldValues(self, h, ids):
        self._c("nvmlDeviceGetFieldValues")
        out = []
        for fid in ids:
            f, scope = fid if isinstance(fid, tuple) else (fid, 0)
            key = f"field:{f}" + (f":{scope}" if scope else "")
            refused = key in self.unsupported or (scope == 2 and f not in h.mem_scope_fields) or scope not in (0, 2)
            ret = NVML_ERROR_NOT_SUPPORTED if refused else 0
            val = {"field:186": h.power_mw, "field:185": h.avg_mw}.get(key, h.mem_power_mw if scope == 2 else 0)
            out.append(SimpleNamespace(fieldId=f, scopeId=scope, timestamp=0, latencyUsec=0, valueType=1,
                                       nvmlReturn=ret, value=SimpleNamespace(uiVal=val, dVal=float(val))))
        return out

    def nvmlDeviceGetSamples(self, h, stype, last_ts):
        self._c("nvmlDeviceGetSamples")
        new = [s for s in h.samples if s[0] > last_ts]
        if not new:
            raise NVMLError(NVML_ERROR_NOT_FOUND)
        return 1, [SimpleNamespace(timeStamp=t, sampleValue=SimpleNamespace(uiVal=v)) for t, v in new]

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        self._c("nvmlDeviceGetEnforcedPowerLimit")
        return h.enforced_mw

    def nvmlDeviceGetPowerManagementDefaultLimit(self, h):
        self._c("nvmlDeviceGetPowerManagementDefaultLimit")
        return h.default_mw

    def nvmlDeviceGetPowerManagementLimit(self, h):
        self._c("nvmlDeviceGetPowerManagementLimit")
        return h.management_mw

    # ------------------------------------------------------------ state and health

    def nvmlDeviceGetTemperature(self, h, sensor):
        self._c("nvmlDeviceGetTemperature")
        if callable(h.temperature_curve):
            return int(round(h.temperature_curve(self.clock())))
        return h.temperature

    def nvmlDeviceGetTemperatureThreshold(self, h, t):
        self._c("nvmlDeviceGetTemperatureThreshold")
        return h.slowdown_c

    def nvmlDeviceGetClockInfo(self, h, t):
        self._c("nvmlDeviceGetClockInfo")
        return h.sm_clock if t == self.NVML_CLOCK_SM else h.mem_clock

    def nvmlDeviceGetMaxClockInfo(self, h, t):
        self._c("nvmlDeviceGetMaxClockInfo")
        return h.max_sm_clock

    def nvmlDeviceGetUtilizationRates(self, h):
        self._c("nvmlDeviceGetUtilizationRates")
        return h.util

    def nvmlDeviceGetMemoryInfo(self, h):
        self._c("nvmlDeviceGetMemoryInfo")
        return h.mem

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        self._c("nvmlDeviceGetCurrentClocksEventReasons")
        return h.reasons

    def nvmlDeviceGetPerformanceState(self, h):
        self._c("nvmlDeviceGetPerformanceState")
        return h.pstate

    def nvmlDeviceGetPersistenceMode(self, h):
        self._c("nvmlDeviceGetPersistenceMode")
        return h.persistence

    def nvmlDeviceGetEccMode(self, h):
        self._c("nvmlDeviceGetEccMode")
        return h.ecc_mode

    def nvmlDeviceGetTotalEccErrors(self, h, etype, ctype):
        self._c("nvmlDeviceGetTotalEccErrors")
        return h.volatile_unc if ctype == 0 else h.aggregate_unc

    def nvmlDeviceGetRemappedRows(self, h):
        self._c("nvmlDeviceGetRemappedRows")
        return h.remapped

    # ------------------------------------------------------------ settings (tune)

    def nvmlDeviceGetPowerManagementLimitConstraints(self, h):
        self._c("nvmlDeviceGetPowerManagementLimitConstraints")
        return (h.min_mw, h.max_mw)

    def nvmlDeviceSetPowerManagementLimit(self, h, mw):
        self._c("nvmlDeviceSetPowerManagementLimit")
        if not h.min_mw <= mw <= h.max_mw:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT, "Invalid Argument")
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
