"""NVIDIA Jetson power rails: INA3221 monitors through hwmon sysfs — a configuration of ``hwmon``.

Files under ``root`` (default ``/sys/bus/i2c/drivers``):
``ina3221*/<bus-addr>/hwmon/hwmon*/in{N}_label`` names a rail, ``curr{N}_input`` is its current
in mA and ``in{N}_input`` its bus voltage in mV; power = mA × mV / 1e6 W (read by
``HwmonSensor``'s V×I pairs). Rails by label: ``VDD_IN`` (the module's input) -> ``node``, primary;
``VDD_GPU_SOC`` -> ``accelerator``, primary; ``VDD_CPU_CV`` -> ``cpu``, primary; any other rail
(``VDD_SOC``, ``VDDQ_VDD2_1V8AO``, ``VDD_CPU_GPU_CV`` which mixes CPU and GPU) -> an aux channel
in W, without a warning (they are known parts). ``sum of shunt voltages`` entries are skipped. The
INA3221 updates every ~1-8 ms (averaging configured by the driver); we poll at the sampler's rate.
Older L4T (iio ``in_power0_input``) is not read. Channel ids: ``jetson.<rail>``.
"""

from __future__ import annotations

from pathlib import Path

from wattbench.core.errors import SensorError
from wattbench.telemetry.base import Channel
from wattbench.telemetry.hwmon import HwmonSensor, _Chan, _slug
from wattbench.telemetry.probe import Found, Machine

DEFAULT_ROOT = "/sys/bus/i2c/drivers"
RAIL_BOUNDARY = {"VDD_IN": "node", "VDD_GPU_SOC": "accelerator", "VDD_CPU_CV": "cpu"}


class JetsonSensor(HwmonSensor):
    name = "jetson"
    id_prefix = "jetson"
    warn_unknown = False  # VDD_SOC & co. are known parts, listed as aux

    def __init__(self, root: str | Path = DEFAULT_ROOT) -> None:
        super().__init__(root)
        self._ids: set[str] = set()

    def device_dirs(self) -> list[Path]:
        return sorted(self.root.glob("ina3221*/*/hwmon/hwmon*"))

    def scan(self) -> list[_Chan]:
        # only labelled V×I rails (a Jetson's INA3221 reports no powerN)
        return [c for c in super().scan() if c.label and len(c.files) == 2]

    def _pairs(self, chip: str, n: str) -> bool:
        return True  # any labelled rail (scan keeps labelled ones only; the sum channels carry no rail label)

    def classify(self, c: _Chan, siblings: set[str]) -> str | None:
        return RAIL_BOUNDARY.get(c.label)

    def channel_id(self, c: _Chan, unique_chip: bool) -> str:
        cid = f"jetson.{_slug(c.label)}"
        if cid in self._ids:
            cid = f"jetson.{c.hwmon.name}.{_slug(c.label)}"
        self._ids.add(cid)
        return cid

    def open(self) -> list[Channel]:
        self._ids = set()
        if not self.scan():
            raise SensorError(f"Jetson: no INA3221 rail under {self.root}",
                              "this is not a Jetson, or its L4T is too old (needs hwmon ina3221)")
        return super().open()


def detect(m: Machine) -> Found:
    """The Jetson INA3221 rails where ``jetson_root`` has them (``VDD_CPU_CV`` meters the CPU; hwmon's
    ``ina3221`` is the same chip)."""
    root = Path(m.jetson_root or DEFAULT_ROOT)
    if root.is_dir() and any(root.glob("ina3221*/*/hwmon/hwmon*/in*_label")):
        return Found([JetsonSensor(root=root)], cpu_meter=True, reads=("ina3221",), looked="Jetson rails")
    return Found(looked="Jetson rails")
