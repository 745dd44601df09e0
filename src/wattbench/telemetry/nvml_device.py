"""The one home of NVML: the only module that imports ``pynvml`` (nvidia-ml-py).

``load_nvml(nvml)`` is the seam: a fake module object (``tests/fakes/fake_nvml.py``) or, by
default, ``pynvml``. Everything outside telemetry/ talks to a GPU through ``Nvml`` (the library)
and ``NvmlDevice`` (one handle), whose methods are typed and convert NVML's units in place:

* power: NVML's mW -> W (``*_w`` methods), ``set_power_limit_w`` rounds W to whole mW;
* clocks: MHz as NVML gives them (``*_mhz``), temperatures in °C, memory in bytes;
* the CUDA driver version: NVML's integer (12040) -> ``"12.4"``.

A ``Get`` that the bindings lack or the board refuses raises ``NvmlCallError``: its text is the
driver's own (``"NVMLError_NotSupported: Not Supported"``), ``not_supported`` says whether it was
NVML_ERROR_NOT_SUPPORTED (or a call these bindings do not have). ``Set``/``Reset`` calls let the
driver's error through unchanged (a refused change must stop the caller as it is).

The sensor (``telemetry/nvml.py``) reads the energy counter, field values and the sample buffer
through the module object itself (``Nvml.module``): those calls sit on the sampler's hot path.
"""

from __future__ import annotations

from typing import Any

from wattbench.core.errors import SensorError

NOT_SUPPORTED = 3  # NVML_ERROR_NOT_SUPPORTED


def load_nvml(nvml: Any = None) -> Any:
    """Return the NVML module (the seam for a fake). Raise SensorError when it cannot load."""
    if nvml is not None:
        return nvml
    try:
        import pynvml  # type: ignore[import-untyped]  # nvidia-ml-py ships no stubs or py.typed
    except ImportError as e:
        raise SensorError(f"NVML bindings not importable ({e})", "`pip install nvidia-ml-py`") from None
    return pynvml


def const(nvml: Any, name: str, default: int) -> int:
    """An NVML constant by name, ``default`` (nvml.h's value) where the bindings lack it."""
    return int(getattr(nvml, name, default))


def is_not_supported(nvml: Any, exc: BaseException) -> bool:
    """Whether ``exc`` is NVML's NVML_ERROR_NOT_SUPPORTED."""
    err_cls = getattr(nvml, "NVMLError", None)
    if err_cls is None or not isinstance(exc, err_cls):
        return False
    return getattr(exc, "value", None) == const(nvml, "NVML_ERROR_NOT_SUPPORTED", NOT_SUPPORTED)


def text(x: Any) -> str:
    """NVML's strings are bytes in older bindings."""
    return x.decode() if isinstance(x, bytes) else str(x)


def cuda_version_str(v: int) -> str:
    """NVML's CUDA driver version integer (12040) -> "12.4"."""
    return f"{v // 1000}.{(v % 1000) // 10}"


class NvmlCallError(Exception):
    """An NVML ``Get`` that failed; ``str()`` is ``"<error type>: <driver's text>"``."""

    def __init__(self, call: str, detail: str, not_supported: bool) -> None:
        super().__init__(detail)
        self.call = call
        self.not_supported = not_supported


def _call(nvml: Any, fn: str, *args: Any) -> Any:
    f = getattr(nvml, fn, None)
    if f is None:
        raise NvmlCallError(fn, f"{fn} not in these NVML bindings", True)
    try:
        return f(*args)
    except Exception as e:  # NVMLError_NotSupported, NoPermission, GpuIsLost ...
        raise NvmlCallError(fn, f"{type(e).__name__}: {e}", is_not_supported(nvml, e)) from e


class NvmlDevice:
    """One GPU's handle; every method one NVML call, its result in SI units (see module doc)."""

    def __init__(self, nvml: Any, index: int, handle: Any) -> None:
        self.module = nvml
        self.index = index
        self.handle = handle

    def _get(self, fn: str, *args: Any) -> Any:
        return _call(self.module, fn, self.handle, *args)

    def _c(self, name: str, default: int) -> int:
        return const(self.module, name, default)

    # ---------------------------------------------------------------------- identity, memory
    def name(self) -> str:
        return text(self._get("nvmlDeviceGetName"))

    def memory_total_bytes(self) -> int:
        return int(self._get("nvmlDeviceGetMemoryInfo").total)

    # ---------------------------------------------------------------------- power (W)
    def power_limit_w(self) -> float:
        """The management limit as set (``nvidia-smi -pl``)."""
        return float(self._get("nvmlDeviceGetPowerManagementLimit")) / 1000.0

    def enforced_power_limit_w(self) -> float:
        """The limit in force (the lowest of every constraint)."""
        return float(self._get("nvmlDeviceGetEnforcedPowerLimit")) / 1000.0

    def default_power_limit_w(self) -> float:
        return float(self._get("nvmlDeviceGetPowerManagementDefaultLimit")) / 1000.0

    def power_limit_constraints_w(self) -> tuple[float, float]:
        """The range a power limit may be set to: (min W, max W)."""
        lo, hi = self._get("nvmlDeviceGetPowerManagementLimitConstraints")
        return float(lo) / 1000.0, float(hi) / 1000.0

    # ---------------------------------------------------------------------- clocks (MHz)
    def sm_clock_mhz(self) -> int:
        return int(self._get("nvmlDeviceGetClockInfo", self._c("NVML_CLOCK_SM", 1)))

    def max_sm_clock_mhz(self) -> int:
        return int(self._get("nvmlDeviceGetMaxClockInfo", self._c("NVML_CLOCK_SM", 1)))

    def supported_memory_clocks_mhz(self) -> list[int]:
        return [int(c) for c in self._get("nvmlDeviceGetSupportedMemoryClocks")]

    def supported_graphics_clocks_mhz(self, memory_clock_mhz: int) -> list[int]:
        return [int(c) for c in self._get("nvmlDeviceGetSupportedGraphicsClocks", memory_clock_mhz)]

    def clock_event_reasons(self) -> int:
        """The active clock event ("throttle") reasons bitmask: the driver >= 535 call where the
        bindings have it, else the older throttle-reasons call."""
        fn = ("nvmlDeviceGetCurrentClocksEventReasons" if hasattr(self.module, "nvmlDeviceGetCurrentClocksEventReasons")
              else "nvmlDeviceGetCurrentClocksThrottleReasons")
        return int(self._get(fn))

    # ---------------------------------------------------------------------- thermal, modes, ECC
    def temperature_c(self) -> int:
        return int(self._get("nvmlDeviceGetTemperature", self._c("NVML_TEMPERATURE_GPU", 0)))

    def slowdown_temperature_c(self) -> int:
        return int(self._get("nvmlDeviceGetTemperatureThreshold", self._c("NVML_TEMPERATURE_THRESHOLD_SLOWDOWN", 1)))

    def persistence_mode_on(self) -> bool:
        return int(self._get("nvmlDeviceGetPersistenceMode")) == self._c("NVML_FEATURE_ENABLED", 1)

    def ecc_enabled(self) -> bool:
        """The current ECC mode (NVML answers (current, pending) or one value)."""
        mode = self._get("nvmlDeviceGetEccMode")
        return bool(int(mode[0]) if isinstance(mode, (tuple, list)) else int(mode))

    def uncorrected_ecc_errors(self, *, volatile: bool) -> int:
        """Uncorrected ECC errors since the driver loaded (``volatile``) or in the board's lifetime."""
        counter = (self._c("NVML_VOLATILE_ECC", 0) if volatile else self._c("NVML_AGGREGATE_ECC", 1))
        return int(self._get("nvmlDeviceGetTotalEccErrors", self._c("NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1), counter))

    def remapped_rows(self) -> tuple[Any, ...]:
        """(correctable, uncorrectable, pending, failure) as NVML answers them (older bindings: 3)."""
        rows = self._get("nvmlDeviceGetRemappedRows")
        return tuple(rows) if isinstance(rows, (tuple, list)) else ()

    # ---------------------------------------------------------------------- changes (root)
    def set_power_limit_w(self, watts: float) -> None:
        self.module.nvmlDeviceSetPowerManagementLimit(self.handle, int(round(watts * 1000)))

    def lock_sm_clocks_mhz(self, lo_mhz: int, hi_mhz: int) -> None:
        self.module.nvmlDeviceSetGpuLockedClocks(self.handle, int(lo_mhz), int(hi_mhz))

    def reset_locked_clocks(self) -> None:
        self.module.nvmlDeviceResetGpuLockedClocks(self.handle)


class Nvml:
    """The NVML library (``load_nvml``'s module): init/shutdown, system facts, devices by index."""

    def __init__(self, nvml: Any = None) -> None:
        self.module = load_nvml(nvml)

    def init(self) -> None:
        self.module.nvmlInit()

    def shutdown(self) -> None:
        self.module.nvmlShutdown()

    def device_count(self) -> int:
        return int(_call(self.module, "nvmlDeviceGetCount"))

    def device(self, index: int) -> NvmlDevice:
        return NvmlDevice(self.module, index, self.module.nvmlDeviceGetHandleByIndex(index))

    def driver_version(self) -> str:
        return text(_call(self.module, "nvmlSystemGetDriverVersion"))

    def cuda_driver_version(self) -> str:
        """The CUDA driver API version, ``"12.4"``."""
        return cuda_version_str(int(_call(self.module, "nvmlSystemGetCudaDriverVersion")))
