"""A fake ``pynvml`` module object: the functions NvmlSensor uses, with scripted values.

Each GPU has a scripted energy counter (mJ) advanced by ``advance(s)`` at ``power_mw``, fields
185/186 and the memory scope, a sample buffer, and aux gauges. As on the H200 (driver 580), the
memory scope (scopeId 2) answers only on field 185, the 1 s average: ``mem_scope_fields`` names the
fields that answer it (``(186,)`` or ``(185, 186)`` for other drivers); any other field with the
memory scope, and any field with scope 1 (module), answers NOT_SUPPORTED. ``unsupported`` names functions that
raise NVMLError_NotSupported (e.g. {"nvmlDeviceGetTotalEnergyConsumption", "field:186:2"}).
"""

from __future__ import annotations

import time
from types import SimpleNamespace

NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_LIBRARY_NOT_FOUND = 12


class NVMLError(Exception):
    def __init__(self, value: int):
        super().__init__(f"NVML error {value}")
        self.value = value


class NVMLError_NotSupported(NVMLError):
    def __init__(self):
        super().__init__(NVML_ERROR_NOT_SUPPORTED)


class FakeGPU:
    def __init__(self, name="NVIDIA H200", power_mw=300_000, mem_power_mw=48_000, energy_mj=1_000_000,
                 mem_scope_fields=(185,)):
        self.name = name
        self.mem_scope_fields = tuple(mem_scope_fields)
        self.uuid = f"GPU-{abs(hash(name)) % 10**8:08d}"
        self.power_mw = power_mw
        self.avg_mw = power_mw - 10_000
        self.mem_power_mw = mem_power_mw
        self.energy_mj = energy_mj
        self.samples: list[tuple[int, int]] = []  # (timestamp_us, mW)
        self.temperature = 41
        self.sm_clock = 1980
        self.mem_clock = 3201
        self.util = SimpleNamespace(gpu=97, memory=55)
        self.mem = SimpleNamespace(total=143_771_000_000, used=70_000_000_000, free=73_771_000_000)
        self.reasons = 0x4
        self.limit_mw = 700_000
        self.default_limit_mw = 700_000
        self.pstate = 0


class FakeNvml:
    NVML_FI_DEV_POWER_AVERAGE = 185
    NVML_FI_DEV_POWER_INSTANT = 186
    NVML_POWER_SCOPE_MEMORY = 2
    NVML_TOTAL_POWER_SAMPLES = 0
    NVML_TEMPERATURE_GPU = 0
    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2
    NVML_ERROR_NOT_SUPPORTED = NVML_ERROR_NOT_SUPPORTED
    NVML_ERROR_NOT_FOUND = NVML_ERROR_NOT_FOUND
    NVMLError = NVMLError
    NVMLError_NotSupported = NVMLError_NotSupported

    def __init__(self, gpus=None, unsupported=(), init_error=None, driver="580.65.06", cuda=13000,
                 update_period_s=None):
        self.gpus = gpus if gpus is not None else [FakeGPU()]
        self.unsupported = set(unsupported)
        self.init_error = init_error
        self.driver = driver
        self.cuda = cuda
        self.inits = 0
        self.calls: dict[str, int] = {}
        self.fail_next: dict[str, Exception] = {}
        self.update_period_s = update_period_s  # if set, values refresh on this grid (like the driver's 100 ms)
        self._tick = None

    # helpers for tests
    def advance(self, seconds: float) -> None:
        for g in self.gpus:
            g.energy_mj += int(g.power_mw * seconds)

    def _check(self, fn: str):
        if self.update_period_s:
            k = int(time.perf_counter() / self.update_period_s)
            if self._tick is not None and k != self._tick:
                self.advance(self.update_period_s * (k - self._tick))
                for g in self.gpus:
                    g.power_mw += 1000
            self._tick = k
        self.calls[fn] = self.calls.get(fn, 0) + 1
        if fn in self.fail_next:
            raise self.fail_next.pop(fn)
        if fn in self.unsupported:
            raise NVMLError_NotSupported()

    # NVML API
    def nvmlInit(self):
        if self.init_error is not None:
            raise self.init_error
        self.inits += 1

    def nvmlShutdown(self):
        self.inits -= 1

    def nvmlDeviceGetCount(self):
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i):
        return self.gpus[i]

    def nvmlDeviceGetName(self, h):
        return h.name

    def nvmlDeviceGetUUID(self, h):
        return h.uuid

    def nvmlSystemGetDriverVersion(self):
        return self.driver

    def nvmlSystemGetCudaDriverVersion(self):
        return self.cuda

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        self._check("nvmlDeviceGetTotalEnergyConsumption")
        return h.energy_mj

    def nvmlDeviceGetPowerUsage(self, h):
        self._check("nvmlDeviceGetPowerUsage")
        return h.power_mw

    def nvmlDeviceGetFieldValues(self, h, ids):
        self._check("nvmlDeviceGetFieldValues")
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
        self._check("nvmlDeviceGetSamples")
        new = [s for s in h.samples if s[0] > last_ts]
        if not new:
            raise NVMLError(NVML_ERROR_NOT_FOUND)
        return 1, [SimpleNamespace(timeStamp=t, sampleValue=SimpleNamespace(uiVal=v)) for t, v in new]

    def nvmlDeviceGetTemperature(self, h, sensor):
        self._check("nvmlDeviceGetTemperature")
        return h.temperature

    def nvmlDeviceGetClockInfo(self, h, t):
        self._check("nvmlDeviceGetClockInfo")
        return h.sm_clock if t == 1 else h.mem_clock

    def nvmlDeviceGetUtilizationRates(self, h):
        self._check("nvmlDeviceGetUtilizationRates")
        return h.util

    def nvmlDeviceGetMemoryInfo(self, h):
        self._check("nvmlDeviceGetMemoryInfo")
        return h.mem

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        self._check("nvmlDeviceGetCurrentClocksEventReasons")
        return h.reasons

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        self._check("nvmlDeviceGetEnforcedPowerLimit")
        return h.limit_mw

    def nvmlDeviceGetPowerManagementDefaultLimit(self, h):
        return h.default_limit_mw

    def nvmlDeviceGetPerformanceState(self, h):
        self._check("nvmlDeviceGetPerformanceState")
        return h.pstate
