"""The NVML device layer against the fake NVML module (never a real GPU): each method's unit
conversion, the typed error for a refused or missing call, the set/reset calls landing on the fake
board, and that ``pynvml`` is imported by one module of the package only."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.fakes.fake_nvml import FakeGPU, FakeNvml
from wattbench.telemetry.nvml_device import Nvml, NvmlCallError

SRC = Path(__file__).resolve().parents[3] / "src" / "wattbench"


def _dev(**kw: object) -> tuple[FakeNvml, Nvml]:
    fake = FakeNvml(gpus=[FakeGPU(**kw)])  # type: ignore[arg-type]
    nv = Nvml(fake)
    nv.init()
    return fake, nv


def test_reads_convert_to_si_units() -> None:
    _, nv = _dev(enforced_mw=612_345, default_mw=700_000, management_mw=650_500, min_mw=123_456, max_mw=700_000,
                 sm_clock=1410, max_sm_clock=1980, reasons=0x4 | 0x1, temperature=63, slowdown_c=90,
                 persistence=0, ecc_mode=(1, 0), volatile_unc=2, aggregate_unc=7)
    assert nv.device_count() == 1
    assert nv.driver_version() == "580.65.06"
    assert nv.cuda_driver_version() == "13.0"
    d = nv.device(0)
    assert d.name() == "NVIDIA H200"
    assert d.memory_total_bytes() == 143_771_000_000
    assert d.enforced_power_limit_w() == pytest.approx(612.345)
    assert d.default_power_limit_w() == pytest.approx(700.0)
    assert d.power_limit_w() == pytest.approx(650.5)
    assert d.power_limit_constraints_w() == pytest.approx((123.456, 700.0))
    assert (d.sm_clock_mhz(), d.max_sm_clock_mhz()) == (1410, 1980)
    assert d.clock_event_reasons() == 0x5
    assert (d.temperature_c(), d.slowdown_temperature_c()) == (63, 90)
    assert d.persistence_mode_on() is False
    assert d.ecc_enabled() is True
    assert d.uncorrected_ecc_errors(volatile=True) == 2
    assert d.uncorrected_ecc_errors(volatile=False) == 7
    assert d.supported_memory_clocks_mhz() == [3201, 1593]
    assert max(d.supported_graphics_clocks_mhz(3201)) == 1980


def test_refused_and_missing_calls_raise_the_typed_error() -> None:
    fake, nv = _dev()
    fake.unsupported.add("nvmlDeviceGetEnforcedPowerLimit")
    d = nv.device(0)
    with pytest.raises(NvmlCallError, match="NVMLError_NotSupported") as e:
        d.enforced_power_limit_w()
    assert e.value.not_supported and e.value.call == "nvmlDeviceGetEnforcedPowerLimit"
    fake.fail_next["nvmlDeviceGetTemperature"] = fake.NVMLError(4, "Insufficient Permissions")
    with pytest.raises(NvmlCallError, match="NVMLError: Insufficient Permissions") as e:
        d.temperature_c()
    assert not e.value.not_supported
    del FakeNvml.nvmlDeviceGetCurrentClocksEventReasons  # older bindings: the throttle-reasons call
    try:
        with pytest.raises(NvmlCallError, match="nvmlDeviceGetCurrentClocksThrottleReasons not in these"):
            d.clock_event_reasons()
    finally:
        FakeNvml.nvmlDeviceGetCurrentClocksEventReasons = _EVENT_REASONS  # type: ignore[attr-defined]


_EVENT_REASONS = FakeNvml.nvmlDeviceGetCurrentClocksEventReasons


def test_set_and_reset_reach_the_board_in_nvml_units() -> None:
    fake, nv = _dev()
    d = nv.device(0)
    d.set_power_limit_w(432.1)
    assert fake.gpus[0].management_mw == 432_100
    assert d.power_limit_w() == pytest.approx(432.1)
    d.lock_sm_clocks_mhz(1200, 1200)
    assert fake.gpus[0].locked_clocks == (1200, 1200)
    d.reset_locked_clocks()
    assert fake.gpus[0].locked_clocks is None
    with pytest.raises(fake.NVMLError):  # a refused change comes through as the driver's error
        d.set_power_limit_w(50)


def test_pynvml_is_imported_by_one_module_only() -> None:
    importers = []
    for p in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(p.read_text(), str(p))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n.split(".")[0] == "pynvml" for n in names):
                importers.append(p.relative_to(SRC).as_posix())
    assert importers == ["telemetry/nvml_device.py"]
