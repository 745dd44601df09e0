"""NVIDIA Jetson power rails: INA3221 monitors through hwmon sysfs.

Files under ``root`` (default ``/sys/bus/i2c/drivers``):
``ina3221*/<bus-addr>/hwmon/hwmon*/in{N}_label`` names a rail, ``curr{N}_input`` is its current
in mA and ``in{N}_input`` its bus voltage in mV; power = mA × mV / 1e6 W. Rails by label:
``VDD_IN`` (the module's input) -> ``node``, primary; ``VDD_GPU_SOC`` -> ``accelerator``, primary;
``VDD_CPU_CV`` -> ``cpu``, primary; any other rail (``VDD_SOC``, ``VDDQ_VDD2_1V8AO``,
``VDD_CPU_GPU_CV`` which mixes CPU and GPU) -> an aux channel in W. ``sum of shunt voltages``
entries are skipped. The INA3221 updates every ~1-8 ms (averaging configured by the driver);
we poll at the sampler's rate. Older L4T (iio ``in_power0_input``) is not read.
"""

from __future__ import annotations

import re
from pathlib import Path

from wattbench.clock import now_ns
from wattbench.errors import SensorError
from wattbench.telemetry.base import Channel, Reading, Sensor

DEFAULT_ROOT = "/sys/bus/i2c/drivers"
RAIL_BOUNDARY = {"VDD_IN": "node", "VDD_GPU_SOC": "accelerator", "VDD_CPU_CV": "cpu"}


class JetsonSensor(Sensor):
    name = "jetson"

    def __init__(self, root: str | Path = DEFAULT_ROOT) -> None:
        self.root = Path(root)
        self._rails: list[tuple[str, Path, Path]] = []

    def open(self) -> list[Channel]:
        labels = sorted(self.root.glob("ina3221*/*/hwmon/hwmon*/in*_label"))
        chans: list[Channel] = []
        for lab in labels:
            m = re.match(r"in(\d+)_label$", lab.name)
            if not m:
                continue
            n = m.group(1)
            try:
                label = lab.read_text().strip()
            except PermissionError:
                raise SensorError(f"Jetson: permission denied reading {lab}", "run as root or `sudo chmod a+r` the hwmon files") from None
            if label.lower().startswith("sum"):
                continue
            curr, volt = lab.parent / f"curr{n}_input", lab.parent / f"in{n}_input"
            if not (curr.exists() and volt.exists()):
                continue
            slug = re.sub(r"[^A-Za-z0-9]+", "_", label).strip("_").lower()
            boundary = RAIL_BOUNDARY.get(label)
            cid = f"jetson.{slug}"
            if any(c.id == cid for c in chans):
                cid = f"jetson.{lab.parent.parent.parent.name}.{slug}"
            chans.append(Channel(
                id=cid, sensor=self.name, kind="power" if boundary else "aux",
                quantity="power" if boundary else "rail_power_w", unit="W", boundary=boundary, device=label,
                resolution=None, source=str(lab.parent), primary=boundary is not None,
            ))
            self._rails.append((cid, curr, volt))
        if not chans:
            raise SensorError(f"Jetson: no INA3221 rail under {self.root}", "this is not a Jetson, or its L4T is too old (needs hwmon ina3221)")
        return chans

    def read(self) -> list[Reading]:
        out = []
        for cid, curr, volt in self._rails:
            a = now_ns()
            ma = float(curr.read_text())
            mv = float(volt.read_text())
            b = now_ns()
            out.append(Reading((a + b) // 2, cid, ma * mv / 1e6))
        return out
