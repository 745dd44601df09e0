"""A fake ``pynvml`` module object for ``wattbench doctor``'s read-only GPU checks.

Each ``OpsGPU`` holds the values the doctor reads (power limits in mW, persistence, clocks,
clock event reasons, temperature and its slowdown threshold, ECC mode and counts, remapped rows).
``unsupported`` names functions that raise NVMLError_NotSupported. Every call is recorded in
``calls`` so a test can assert that no ``Set`` function was ever called.
"""

from __future__ import annotations

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


@dataclass
class FakeNvml:
    gpus: list = field(default_factory=lambda: [OpsGPU()])
    driver: str = "580.65.06"
    cuda: int = 13000
    init_error: Exception | None = None
    unsupported: set = field(default_factory=set)
    calls: list = field(default_factory=list)

    NVMLError = NVMLError
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
