"""CPU package and DRAM energy through the Linux powercap sysfs (Intel RAPL, AMD's RAPL).

Zones under ``root`` (default ``/sys/class/powercap``): ``intel-rapl:N`` (a package) and
``intel-rapl:N:M`` (its subzones, told apart by their ``name``: ``dram``, ``core``, ``uncore``);
AMD exposes the same layout (``intel-rapl:N`` on recent kernels, ``amd-rapl:N`` on some).
``intel-rapl-mmio:*`` zones duplicate the package counter and are skipped.

Channels (ids ``rapl.<zone>``): ``energy_uj`` µJ -> J counters; ``max_value`` from
``max_energy_range_uj`` so accounting unwraps. Boundaries: package -> ``cpu`` (primary),
``dram`` -> ``dram`` (primary), ``psys`` -> ``host`` (primary), ``core``/``uncore`` -> ``cpu``
(not primary: they are inside the package figure).

Since Linux 5.10 ``energy_uj`` is readable by root only (CVE-2020-8694); a permission error
names the fix.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable

from wattbench.core.clock import now_ns
from wattbench.core.errors import SensorError
from wattbench.telemetry.base import Channel, Reading, Sensor
from wattbench.telemetry.probe import Found, Machine

DEFAULT_ROOT = "/sys/class/powercap"
ZONE_RE = re.compile(r"^(intel-rapl|amd-rapl):(\d+)(?::(\d+))?$")
PERMISSION_FIX = (
    "grant read access: `sudo chmod a+r /sys/class/powercap/intel-rapl:*/energy_uj "
    "/sys/class/powercap/intel-rapl:*:*/energy_uj` (until reboot), or a udev rule "
    "(SUBSYSTEM==\"powercap\", RUN+=\"/bin/chmod a+r /sys%p/energy_uj\"), or run as root"
)


def _zone_key(name: str) -> tuple[str, int, int]:
    """Sort key of a zone directory name ZONE_RE matches (the callers pass only those)."""
    m = ZONE_RE.match(name)
    assert m is not None
    return (m.group(1), int(m.group(2)), int(m.group(3)) if m.group(3) is not None else -1)


class RaplSensor(Sensor):
    name = "rapl"

    def __init__(self, root: str | Path = DEFAULT_ROOT, domains: list[str] | None = None, *,
                 read_text: Callable[[Path], str] | None = None) -> None:
        self.root = Path(root)
        self._read_fn = read_text  # None: the file, stripped (tests pass a reader that denies)
        self.domains = set(domains) if domains else None
        self._zones: list[tuple[str, Path]] = []

    def _read_text(self, path: Path) -> str:
        """The one place files are read (the ``read_text`` seam: tests simulate PermissionError when root)."""
        if self._read_fn is not None:
            return self._read_fn(path)
        with open(path) as f:
            return f.read().strip()

    def open(self) -> list[Channel]:
        if not self.root.is_dir():
            raise SensorError(f"RAPL: {self.root} does not exist", "this kernel/CPU exposes no powercap RAPL zones")
        zones = sorted((p for p in self.root.iterdir() if ZONE_RE.match(p.name)), key=lambda p: _zone_key(p.name))
        if not zones:
            raise SensorError(f"RAPL: no intel-rapl/amd-rapl zone under {self.root}",
                              "load the driver: `sudo modprobe intel_rapl_common` (Intel) or use a kernel >= 5.8 (AMD)")
        chans: list[Channel] = []
        for z in zones:
            try:
                name = self._read_text(z / "name")
            except OSError:
                name = z.name
            if self.domains and not any(name.startswith(d) for d in self.domains):
                continue
            try:
                self._read_text(z / "energy_uj")
            except PermissionError:
                raise SensorError(f"RAPL: permission denied reading {z / 'energy_uj'}", PERMISSION_FIX) from None
            except FileNotFoundError:
                continue
            try:
                max_j = int(self._read_text(z / "max_energy_range_uj")) / 1e6
            except (OSError, ValueError):
                max_j = None
            sub = _zone_key(z.name)[2] >= 0
            if name.startswith("package") or (not sub and name not in ("psys",)):
                boundary, primary, quantity = "cpu", True, "energy"
            elif name == "dram":
                boundary, primary, quantity = "dram", True, "energy"
            elif name == "psys":
                boundary, primary, quantity = "host", True, "energy"
            else:  # core, uncore: parts of the package figure
                boundary, primary, quantity = "cpu", False, f"energy_{name}"
            device = name if not sub else f"{z.name.split(':')[0]}:{z.name.split(':')[1]}/{name}"
            chans.append(Channel(
                id=f"rapl.{z.name}", sensor=self.name, kind="counter", quantity=quantity, unit="J",
                boundary=boundary, device=device, resolution=1e-6, update_period_s=0.001,
                source=str(z / "energy_uj"), primary=primary, max_value=max_j,
            ))
            self._zones.append((f"rapl.{z.name}", z / "energy_uj"))
        if not chans:
            raise SensorError(f"RAPL: no readable zone under {self.root}" + (
                f" matching {sorted(self.domains)}" if self.domains else ""), "check `ls /sys/class/powercap`")
        return chans

    def read(self) -> list[Reading]:
        out = []
        for cid, path in self._zones:
            a = now_ns()
            uj = int(self._read_text(path))
            b = now_ns()
            out.append(Reading((a + b) // 2, cid, uj / 1e6))
        return out

    def close(self) -> None:
        self._zones = []


def detect(m: Machine) -> Found:
    """RAPL where ``powercap_root`` has a zone whose ``energy_uj`` can be read (it meters the CPU;
    hwmon's ``amd_energy`` reads the same counters); a problem line with the fix where it cannot."""
    root = Path(m.powercap_root or DEFAULT_ROOT)
    zones = sorted(p for p in root.glob("*-rapl:*") if ZONE_RE.match(p.name)) if root.is_dir() else []
    looked = f"RAPL ({root} {'has no readable zone' if root.is_dir() else 'absent'})"
    if not zones:
        return Found(looked=looked)
    try:
        RaplSensor(root=root, read_text=m.read_text)._read_text(zones[0] / "energy_uj")
    except PermissionError:
        return Found(problems=[f"rapl: permission denied reading {zones[0] / 'energy_uj'} (fix: {PERMISSION_FIX})"],
                     cpu_unreadable=True, looked=looked)
    except OSError as e:
        return Found(problems=[f"rapl: cannot read {zones[0] / 'energy_uj'}: {e}"], cpu_unreadable=True, looked=looked)
    return Found([RaplSensor(root=root, read_text=m.read_text)], cpu_meter=True, reads=("amd_energy",), looked=looked)
