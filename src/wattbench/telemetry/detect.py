"""Which meters does this machine have? ``autodetect()`` and ``inventory()``.

``autodetect()`` runs each sensor module's probe, its ``detect(machine)`` (``PROBES``), in order:
NVML (else the ``nvidia-smi`` CLI when NVML cannot load), RAPL (powercap), Jetson INA3221 rails,
AMD GPUs (``amdsmi``, only where ``/dev/kfd`` exists), hwmon power/energy channels
(``/sys/class/hwmon``: INA monitors, ACPI power meters, GPU and CPU drivers' energy), and IPMI
DCMI through ``ipmitool`` when ``/dev/ipmi0`` exists. hwmon devices another sensor already reads
are skipped, so one meter is never counted twice: ``ina3221`` when the Jetson sensor is used,
``amdgpu`` when ``amdsmi`` is, ``amd_energy`` when RAPL is. Each probe is cheap (NVML: init,
count, shutdown; RAPL: read one ``energy_uj``). What cannot be used becomes a human line with
its fix in ``problems``; meters simply absent from the machine (no GPU, not a Jetson) are not
problems.

The CPU estimate is *not* added automatically unless ``estimate_cpu=True``: an estimate is not
a measurement, and a run that silently gains a 30 %-uncertain CPU figure would read as
measured. When RAPL is unusable a problem line says how to get CPU power (grant RAPL access,
or opt in with ``--sensor estimate:cpu``).

``inventory(specs, measure_s)`` opens the sensors (the specs, or autodetected ones), reads each
once, then polls fast for ``measure_s`` and measures each channel's update period (median time
between value changes). The ``wattbench sensors`` command only renders what it returns.
"""

from __future__ import annotations

import shutil
import statistics
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from wattbench.core.clock import now_ns
from wattbench.core.errors import SensorError
from wattbench.telemetry.amd import detect as detect_amd
from wattbench.telemetry.base import Channel, Sensor
from wattbench.telemetry.estimate import CpuEstimateSensor
from wattbench.telemetry.hwmon import detect as detect_hwmon
from wattbench.telemetry.ipmi import detect as detect_ipmi
from wattbench.telemetry.jetson import detect as detect_jetson
from wattbench.telemetry.nvml import detect as detect_nvml
from wattbench.telemetry.probe import Found, Machine
from wattbench.telemetry.rapl import detect as detect_rapl
from wattbench.telemetry.sampler import period_of
from wattbench.telemetry.spec import parse_sensor_spec


# The probes, in order: each sensor module's ``detect``. A probe later in the list skips the hwmon
# devices an earlier one's sensors read.
PROBES: tuple[Callable[[Machine], Found], ...] = (
    detect_nvml, detect_rapl, detect_jetson, detect_amd, detect_hwmon, detect_ipmi)


def autodetect(
    *,
    nvml: Any = None,
    powercap_root: str | Path | None = None,
    jetson_root: str | Path | None = None,
    hwmon_root: str | Path | None = None,
    ipmi_device: str | Path = "/dev/ipmi0",
    kfd_device: str | Path = "/dev/kfd",
    which: Callable[[str], str | None] = shutil.which,
    estimate_cpu: bool = False,
    read_text: Callable[[Path], str] | None = None,
) -> tuple[list[Sensor], list[str]]:
    """The meters this machine has (each probe of ``PROBES``, in order), and a line with its fix for
    each that cannot be used (module doc); the CPU estimate where no CPU meter was found and
    ``estimate_cpu``; one line naming what was looked for where nothing was found. The roots and
    devices are where each probe looks; ``read_text`` reads the RAPL and hwmon files (None: the
    file itself; a test passes a reader that denies, as for a non-root user)."""
    machine = Machine(nvml=nvml, powercap_root=powercap_root, jetson_root=jetson_root, hwmon_root=hwmon_root,
                      ipmi_device=ipmi_device, kfd_device=kfd_device, which=which, read_text=read_text)
    found: list[Found] = []
    for probe in PROBES:
        found.append(probe(replace(machine, taken=tuple(d for f in found for d in f.reads))))
    sensors = [s for f in found for s in f.sensors]
    problems = [p for f in found for p in f.problems]
    if not any(f.cpu_meter for f in found):  # the CPU estimate: opt-in only
        if estimate_cpu:
            sensors.append(CpuEstimateSensor())
        elif any(f.cpu_unreadable for f in found):
            problems.append("cpu: no CPU power meter readable (fix: grant RAPL access as above, "
                            "or opt in to an estimate with `--sensor estimate:cpu[,tdp=W]`)")
    if not sensors and not problems:
        problems.append("no power meter found: looked for " + "; ".join(f.looked for f in found)
                        + " (fix: add --sensor, e.g. const:node=WATTS for a declared figure, "
                        "estimate:cpu for a CPU estimate, or a wall meter with file:PATH)")
    return sensors, problems


def _update_period(times: list[int], values: list[float]) -> tuple[float | None, int]:
    change_t = [t for (t, v), (_, pv) in zip(zip(times[1:], values[1:]), zip(times, values)) if v != pv]
    gaps = [(b - a) / 1e9 for a, b in zip(change_t, change_t[1:])]
    return (statistics.median(gaps) if gaps else None), len(change_t)


def inventory(specs: list[str] | None = None, measure_s: float = 1.5,
              **autodetect_kw: Any) -> list[dict[str, Any]]:
    """One dict per channel (``"type": "channel"``) and per problem (``"type": "problem"``).

    Channel dicts: the Channel's fields, ``value`` (first read), ``read_ms`` (cost of one
    read() of its sensor), ``measured_update_s`` (median time between value changes while
    polled fast for ``measure_s``; None when the value did not change twice), ``changes``.
    """
    sensors: list[Sensor]
    problems: list[str]
    if specs:
        sensors, problems = [parse_sensor_spec(s) for s in specs], []
    else:
        sensors, problems = autodetect(**autodetect_kw)
    out: list[dict[str, Any]] = []
    opened: list[tuple[Sensor, list[Channel]]] = []
    for s in sensors:
        if hasattr(s, "aux_every_s"):
            s.aux_every_s = 0.0  # measure the aux gauges' own refresh, not our throttle
        if hasattr(s, "counter_every_s"):
            s.counter_every_s = 0.0  # likewise the energy counter's
        try:
            chans = s.open()
        except SensorError as e:
            problems.append(f"{s.name}: {e}")
            try:
                s.close()
            except Exception:
                pass
            continue
        problems.extend(getattr(s, "warnings", []) or [])
        opened.append((s, chans))
    try:
        series: dict[str, tuple[list[int], list[float]]] = {}
        first: dict[str, float] = {}
        cost: dict[str, list[int]] = {}
        fails: dict[str, str] = {}
        fast = {id(s): (period_of(s, 0.1) / 5 if period_of(s, 0.1) >= 0.5 else 0.01) for s, _ in opened}
        due = {id(s): 0 for s, _ in opened}
        t_end = now_ns() + int(measure_s * 1e9)
        while True:
            t = now_ns()
            for s, _ in opened:
                if t < due[id(s)]:
                    continue
                a = now_ns()
                try:
                    rs = s.read()
                except Exception as e:
                    fails.setdefault(s.name, f"{type(e).__name__}: {e}")
                    rs = []
                cost.setdefault(s.name, []).append(now_ns() - a)
                due[id(s)] = a + int(fast[id(s)] * 1e9)
                for r in rs:
                    first.setdefault(r.channel, r.value)
                    ts, vs = series.setdefault(r.channel, ([], []))
                    ts.append(r.t_ns)
                    vs.append(r.value)
            if now_ns() >= t_end:
                break
            time.sleep(0.002)
        for s, chans in opened:
            c_ns = cost.get(s.name, [])
            for c in chans:
                ts, vs = series.get(c.id, ([], []))
                period, changes = _update_period(ts, vs)
                d = c.to_dict()
                d.update(type="channel", value=first.get(c.id), read_ms=(statistics.median(c_ns) / 1e6) if c_ns else None,
                         measured_update_s=period, changes=changes, reads=len(ts), measure_s=measure_s)
                out.append(d)
            if s.name in fails:
                problems.append(f"{s.name}: read failed: {fails[s.name]}")
    finally:
        for s, _ in opened:
            try:
                s.close()
            except Exception:
                pass
    out.extend({"type": "problem", "problem": p} for p in problems)
    return out
