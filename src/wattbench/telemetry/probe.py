"""The seam of autodetection: where a sensor module's ``detect(machine)`` looks (``Machine``) and
what it found (``Found``). Each sensor module that can be detected has one ``detect``;
``telemetry.detect.autodetect`` runs them in order and joins what they found."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from wattbench.telemetry.base import Sensor


@dataclass(frozen=True)
class Machine:
    """Where the probes look: the seams for tests (``nvml``: a fake module; the roots and device
    paths; ``which``: the PATH lookup; ``read_text``: the reader of the RAPL and hwmon files, a test
    passes one that denies as for a non-root user; None: the module's default) and ``taken``, the
    hwmon device names a sensor found by an earlier probe already reads (so one meter is never
    counted twice)."""

    nvml: Any = None
    powercap_root: str | Path | None = None
    jetson_root: str | Path | None = None
    hwmon_root: str | Path | None = None
    ipmi_device: str | Path = "/dev/ipmi0"
    kfd_device: str | Path = "/dev/kfd"
    which: Callable[[str], str | None] = shutil.which
    read_text: Callable[[Path], str] | None = None
    taken: tuple[str, ...] = ()


@dataclass
class Found:
    """What one probe found: the sensors to use, a human line with its fix for each meter present
    but unusable, whether a sensor meters the CPU (``cpu_meter``) or a CPU meter is present but
    unreadable (``cpu_unreadable``), the hwmon device names its sensors read (``reads``), and what
    it looked for, for the line that says no meter was found (``looked``)."""

    sensors: list[Sensor] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    cpu_meter: bool = False
    cpu_unreadable: bool = False
    reads: tuple[str, ...] = ()
    looked: str = ""
