"""Any board's power monitors through Linux ``hwmon`` sysfs.

Devices: every ``hwmonN`` directory under ``root`` (default ``/sys/class/hwmon``; a subclass may
look elsewhere, see ``jetson.py``), each with a ``name`` file (the driver: ``ina226``, ``ina3221``,
``power_meter``, ``amdgpu``, ``xe`` …) and usually a ``device`` link whose target (``1-0040``,
``0000:03:00.0``, ``ACPI0000:00``) tells two chips of one driver apart across reboots.

Channels, per device (hwmon sysfs ABI, Documentation/hwmon/sysfs-interface.rst):

* ``energyN_input`` µJ -> a ``counter`` in J (preferred where present). The ABI gives no range;
  ``max_uj`` (the spec's option) states one so accounting unwraps a wrap, else a decrease is a
  reset that accounting bridges from the device's power channel (``accounting/counters.py``).
* ``powerN_input`` µW -> ``power`` W (instant); ``powerN_average`` µW -> ``power`` W, quantity
  ``power_avg`` (averaged by the chip or driver over ``powerN_average_interval`` ms).
* ``inN_input`` mV × ``currN_input`` mA -> ``power`` W (µW / 1e6), only where the chip reports
  no ``powerN_*`` of that index (INA3221; INA219/INA226 report ``power1_input`` themselves), and
  only on chips where ``inN`` and ``currN`` are one rail: the INA family (INA3221: 1-3; its
  ``curr4`` is the sum of currents, ``in4`` a shunt voltage in µV) or a chip named with
  ``name=``. Labels ``sum of …`` are skipped.

Labels come from ``powerN_label`` / ``energyN_label`` / ``inN_label`` / ``currN_label`` (ACPI
power meters: ``power1_oem_info``). A channel's ``device`` is ``<name>@<device link>/<label or N>``,
so an ``energyN`` counter and a ``powerN`` gauge of one rail pair up (the counter is the figure,
the gauge cross-checks it and bridges resets) while two rails stay two devices.

Boundaries: the user's ``boundary=`` applies to every selected channel. Without it, the defaults
below (``chip_boundary``); a channel of unknown meaning — an INA on some rail — is read and
listed as an ``aux`` gauge (``rail_power_w``/``rail_energy_j``), not counted, and a warning says
how to count it (``hwmon:name=ina226,channel=power1,boundary=node``). Counting a rail of unknown
meaning as the node would be a wrong figure, the worst bug there is.

* ``power_meter`` (ACPI power meter, ACPI0000): ``node``; on Grace/GH200, whose firmware names
  each meter in ``power1_oem_info``: ``Module Power …`` -> ``node``, ``Grace Power …`` -> ``host``,
  ``CPU Power …`` -> ``cpu``, any other (``SysIO Power …``) -> aux.
* ``amdgpu``: ``accelerator`` (PPT; an APU's ``fastPPT`` is aux beside its ``slowPPT``).
* ``xe``, ``i915``: ``accelerator`` for ``card`` (or unlabelled); ``pkg`` (inside the card) aux.
* ``amd_energy``: ``Esocket*`` -> ``cpu``; ``Ecore*`` (inside the socket) aux.

Permissions: most hwmon attributes are world-readable; some drivers restrict energy counters to
root (``amd_energy``, since CVE-2020-12912). A channel that cannot be read is dropped with a warning
naming the fix when others remain; when none is readable, opening fails with the fix.
"""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from wattbench.core.clock import now_ns
from wattbench.core.errors import SensorError
from wattbench.telemetry.base import Channel, Kind, Reading, Sensor
from wattbench.telemetry.probe import Found, Machine

DEFAULT_ROOT = "/sys/class/hwmon"
ATTR_RE = re.compile(r"^(energy|power|curr)(\d+)_(input|average)$")
PERMISSION_FIX = (
    "grant read access: `sudo chmod a+r /sys/class/hwmon/hwmon*/{power,energy,in,curr}*_{input,average}` "
    "(until reboot), or a udev rule in /etc/udev/rules.d/99-wattbench-hwmon.rules: "
    "SUBSYSTEM==\"hwmon\", RUN+=\"/bin/sh -c 'chmod a+r /sys%p/*_input /sys%p/*_average'\", "
    "or run as root"
)
# The meter's own accuracy where a datasheet states it (TI INA219/INA226/INA3221/INA238: gain
# error <= 0.5 %, plus shunt tolerance and offset at light load: 5 % as for the Jetson rails).
CHIP_PCT = {"ina2": 5.0, "ina3": 5.0, "power_meter": 10.0}


@dataclass
class _Chan:
    """One readable channel of one hwmon device, before it becomes a ``Channel``."""

    chip: str  # the device's ``name``
    key: str  # ``<name>@<device link>`` (stable), or ``<name>@hwmonN``
    hwmon: Path
    stem: str  # ``power1``, ``energy2``, ``curr1`` (a V×I pair)
    index: str
    kind: Kind  # counter | power
    quantity: str  # energy | power | power_avg
    files: tuple[Path, ...]  # one value file, or (in, curr) for a pair
    label: str = ""

    @property
    def rail(self) -> str:
        return self.label or self.index


def _slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", s).strip("_").lower()


def _read_first_line(path: Path) -> str:
    with open(path) as f:
        return f.readline().strip()


def chip_boundary(chip: str, label: str, siblings: set[str]) -> str | None:
    """The boundary a channel of a known chip measures, or None (unknown: listed, not counted).
    ``siblings``: the labels of the device's other channels."""
    lab = label.lower()
    if chip == "power_meter":
        if not label:
            return "node"
        for word, boundary in (("module", "node"), ("grace", "host"), ("cpu", "cpu")):
            if lab.startswith(word):
                return boundary
        return None
    if chip == "amdgpu":
        return None if lab == "fastppt" and "slowPPT" in siblings else "accelerator"
    if chip in ("xe", "i915"):
        return "accelerator" if lab in ("", "card") or (lab == "pkg" and "card" not in siblings) else None
    if chip == "amd_energy":
        return "cpu" if lab.startswith("esocket") else None
    return None


class HwmonSensor(Sensor):
    """``name``/``channel``: fnmatch patterns selecting devices (by ``name``) and channels (by
    stem ``power1``/``energy1``/``curr1`` or by label); ``boundary``: the user's boundary for every
    selected channel; ``max_uj``: the energy counters' range, when the driver wraps."""

    name = "hwmon"
    id_prefix = "hwmon"
    warn_unknown = True  # say how to count a rail of unknown meaning

    def __init__(self, root: str | Path = DEFAULT_ROOT, *, chip: str | None = None, channel: str | None = None,
                 boundary: str | None = None, max_uj: float | None = None, exclude: tuple[str, ...] = (),
                 read_text: Callable[[Path], str] | None = None) -> None:
        self.root = Path(root)
        self._read_fn = read_text  # None: the file's first line (tests pass a reader that denies)
        self.chip = chip
        self.channel = channel
        self.boundary = boundary
        self.max_uj = max_uj
        self.exclude = tuple(exclude)
        self.warnings: list[str] = []
        self._read: list[tuple[str, tuple[Path, ...], float]] = []  # (id, files, scale to SI)

    # -- discovery ------------------------------------------------------------------------------

    def device_dirs(self) -> list[Path]:
        """The hwmon directories to look at (a seam: Jetson looks under the i2c driver's tree)."""
        if not self.root.is_dir():
            return []
        return sorted((p for p in self.root.iterdir() if (p / "name").is_file()),
                      key=lambda p: (len(p.name), p.name))

    def _read_text(self, path: Path) -> str:
        """The one place values are read (the ``read_text`` seam: tests simulate PermissionError when root)."""
        return _read_first_line(path) if self._read_fn is None else self._read_fn(path)

    def _device_key(self, hw: Path, chip: str) -> str:
        dev = hw / "device"
        target = os.path.realpath(dev) if dev.exists() else ""
        return f"{chip}@{os.path.basename(target) if target else hw.name}"

    def _label(self, hw: Path, *stems: str) -> str:
        for stem in stems:
            for suffix in ("_label", "_oem_info"):
                p = hw / f"{stem}{suffix}"
                if p.is_file():
                    try:
                        return _read_first_line(p)
                    except OSError:
                        continue
        return ""

    def scan(self) -> list[_Chan]:
        """Every power/energy channel of every selected device (values not read yet)."""
        out: list[_Chan] = []
        for hw in self.device_dirs():
            try:
                chip = _read_first_line(hw / "name")
            except OSError:
                continue
            if self.chip and not fnmatch.fnmatch(chip, self.chip):
                continue
            if not self.chip and any(fnmatch.fnmatch(chip, x) for x in self.exclude):
                continue
            key = self._device_key(hw, chip)
            files = {p.name for p in hw.iterdir()}
            power_idx = {m.group(2) for f in files if (m := ATTR_RE.match(f)) and m.group(1) == "power"}
            for f in sorted(files):
                m = ATTR_RE.match(f)
                if not m:
                    continue
                what, n, tail = m.groups()
                if what == "energy" and tail == "input":
                    c = _Chan(chip, key, hw, f"energy{n}", n, "counter", "energy", (hw / f,))
                    c.label = self._label(hw, f"energy{n}", f"power{n}")
                elif what == "power":
                    c = _Chan(chip, key, hw, f"power{n}", n, "power", "power" if tail == "input" else "power_avg",
                              (hw / f,))
                    c.label = self._label(hw, f"power{n}", f"in{n}", f"curr{n}")
                elif (what == "curr" and tail == "input" and n not in power_idx and f"in{n}_input" in files
                      and self._pairs(chip, n)):
                    c = _Chan(chip, key, hw, f"curr{n}", n, "power", "power", (hw / f"in{n}_input", hw / f))
                    c.label = self._label(hw, f"in{n}", f"curr{n}")
                    if c.label.lower().startswith("sum"):
                        continue
                else:
                    continue
                out.append(c)
        if self.channel:
            pat = self.channel.lower()
            out = [c for c in out if fnmatch.fnmatch(c.stem, pat) or fnmatch.fnmatch(c.label.lower(), pat)]
        return out

    def _pairs(self, chip: str, n: str) -> bool:
        """Whether ``inN`` × ``currN`` is one rail's power on this chip. True for the INA family
        (INA3221: channels 1-3 only; its ``curr4`` is the sum of currents and ``in4`` a shunt
        voltage) and for any chip the user named; other drivers number voltages and currents
        independently (a PMBus chip's ``in1`` is Vin, ``curr1`` may be Iout)."""
        if chip == "ina3221":
            return n in ("1", "2", "3")
        return chip.startswith("ina") or bool(self.chip)

    # -- channel meaning (seams for configurations such as Jetson) ------------------------------

    def classify(self, c: _Chan, siblings: set[str]) -> str | None:
        return self.boundary or chip_boundary(c.chip, c.label, siblings)

    def channel_id(self, c: _Chan, unique_chip: bool) -> str:
        dev = c.chip if unique_chip else c.key.replace("@", "-")
        tail = c.stem + ("_avg" if c.quantity == "power_avg" else "")
        return f"{self.id_prefix}.{_slug(dev)}.{tail}"

    def _period(self, c: _Chan) -> float | None:
        for p in (c.hwmon / f"{c.stem}_average_interval", c.hwmon / "update_interval"):
            try:
                ms = float(_read_first_line(p))
            except (OSError, ValueError):
                continue
            if ms > 0:
                return ms / 1000.0
        return None

    def _pct(self, chip: str) -> float | None:
        return next((v for k, v in CHIP_PCT.items() if chip.startswith(k)), None)

    # -- the Sensor protocol --------------------------------------------------------------------

    def open(self) -> list[Channel]:
        self._read, self.warnings = [], []
        found = self.scan()
        if not found:
            what = " ".join(x for x in (f"name={self.chip}" if self.chip else "",
                                        f"channel={self.channel}" if self.channel else "") if x)
            raise SensorError(f"{self.name}: no power or energy channel under {self.root}" + (f" matching {what}" if what else ""),
                              "list them with `ls /sys/class/hwmon/*/` and `cat /sys/class/hwmon/*/name`; "
                              "a board's INA monitor needs its driver (`modprobe ina2xx` / `ina3221`) "
                              "and a device-tree or i2c `new_device` entry")
        denied: list[Path] = []
        readable: list[_Chan] = []
        for c in found:
            try:
                for p in c.files:
                    float(self._read_text(p))
            except PermissionError:
                denied.append(c.files[-1])
                continue
            except (OSError, ValueError) as e:  # a disabled INA3221 input reads ENODATA
                self.warnings.append(f"{self.name}: {c.files[-1]} not readable ({type(e).__name__}: {e}); skipped")
                continue
            readable.append(c)
        if denied and (not readable or self.chip or self.channel):
            raise SensorError(f"{self.name}: permission denied reading {denied[0]}"
                              + (f" and {len(denied) - 1} more" if len(denied) > 1 else ""), PERMISSION_FIX)
        if denied:
            self.warnings.append(f"{self.name}: permission denied reading {', '.join(map(str, denied))}; "
                                 f"those channels are not read (fix: {PERMISSION_FIX})")
        if not readable:
            raise SensorError(f"{self.name}: no readable power or energy channel under {self.root}",
                              "see the warnings above, or `cat` the files to see the kernel's error")
        return self._channels(readable)

    def _channels(self, chans: list[_Chan]) -> list[Channel]:
        chips: dict[str, set[str]] = {}
        for c in chans:
            chips.setdefault(c.chip, set()).add(c.key)
        labels: dict[str, set[str]] = {}
        for c in chans:
            labels.setdefault(c.key, set()).add(c.label)
        # per (device, rail): the counter is primary, else the instant power, else the average
        rank = {("counter", "energy"): 0, ("power", "power"): 1, ("power", "power_avg"): 2}
        best: dict[str, int] = {}
        for c in chans:
            r = f"{c.key}/{c.rail}"
            best[r] = min(best.get(r, 9), rank[(c.kind, c.quantity)])
        out: list[Channel] = []
        unknown: list[tuple[str, _Chan]] = []
        for c in chans:
            boundary = self.classify(c, labels[c.key] - {c.label})
            cid = self.channel_id(c, len(chips[c.chip]) == 1)
            scale = 1e-6  # µJ -> J, µW -> W, mV × mA (µW) -> W
            if boundary is None:
                unknown.append((cid, c))
            out.append(Channel(
                id=cid, sensor=self.name, kind=c.kind if boundary else "aux",
                quantity=c.quantity if boundary else ("rail_energy_j" if c.kind == "counter" else "rail_power_w"),
                unit="J" if c.kind == "counter" else "W", boundary=boundary, device=f"{c.key}/{c.rail}",
                update_period_s=self._period(c), source=str(c.hwmon / c.stem) if len(c.files) == 2 else str(c.files[0]),
                primary=boundary is not None and best[f"{c.key}/{c.rail}"] == rank[(c.kind, c.quantity)],
                max_value=self.max_uj / 1e6 if (self.max_uj and c.kind == "counter") else None,
                uncertainty_pct=self._pct(c.chip),
                notes=(f"label {c.label!r}; " if c.label else "") + (
                    "in × curr (mV × mA)" if len(c.files) == 2 else ""),
            ))
            self._read.append((cid, c.files, scale))
        if unknown and self.warn_unknown:
            c0 = unknown[0][1]
            self.warnings.append(
                f"{self.name}: {', '.join(i for i, _ in unknown)} listed but not counted: wattbench does not "
                f"know which boundary that rail measures (fix: say it, e.g. --sensor "
                f"hwmon:name={c0.chip},channel={c0.stem},boundary=node)")
        return out

    def read(self) -> list[Reading]:
        out = []
        for cid, files, scale in self._read:
            a = now_ns()
            v = 1.0
            for p in files:
                v *= float(self._read_text(p))
            b = now_ns()
            out.append(Reading((a + b) // 2, cid, v * scale))
        return out

    def close(self) -> None:
        self._read = []

    def describe(self) -> dict[str, Any]:
        d = super().describe()
        d.update(root=str(self.root), chip=self.chip, channel=self.channel, boundary=self.boundary)
        return d


def detect(m: Machine) -> Found:
    """A HwmonSensor where ``hwmon_root`` has power/energy channels no other sensor reads (``m.taken``
    skipped), metering the CPU where one of them does. Unreadable channels become a problem line
    with the fix."""
    root = Path(m.hwmon_root or DEFAULT_ROOT)
    looked = "hwmon power/energy channels"
    probe = HwmonSensor(root=root, exclude=m.taken, read_text=m.read_text)
    if not probe.scan():
        return Found(looked=looked)
    try:
        chans = probe.open()
    except SensorError as e:
        return Found(problems=[str(e)], looked=looked)
    finally:
        probe.close()
    return Found([HwmonSensor(root=root, exclude=m.taken, read_text=m.read_text)], cpu_meter=any(c.boundary == "cpu" for c in chans),
                 looked=looked)
