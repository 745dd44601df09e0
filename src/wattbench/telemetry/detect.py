"""Which meters does this machine have? ``autodetect()`` and ``inventory()``.

``autodetect()`` tries, in order: NVML (else the ``nvidia-smi`` CLI when NVML cannot load),
RAPL (powercap), Jetson INA3221 rails, AMD GPUs (``amdsmi``, only where ``/dev/kfd`` exists),
hwmon power/energy channels (``/sys/class/hwmon``: INA monitors, ACPI power meters, GPU and CPU
drivers' energy), and IPMI DCMI through ``ipmitool`` when ``/dev/ipmi0`` exists. hwmon devices
another sensor already reads are skipped, so one meter is never counted twice: ``ina3221`` when
the Jetson sensor is used, ``amdgpu`` when ``amdsmi`` is, ``amd_energy`` when RAPL is. Each probe is cheap (NVML: init,
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
from pathlib import Path
from typing import Any, Callable

from wattbench.core.clock import now_ns
from wattbench.core.errors import SensorError
from wattbench.telemetry.base import Sensor


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
    """The meters this machine has, and a line with its fix for each that cannot be used (module
    doc). The roots and devices are where each probe looks; ``read_text`` reads the RAPL and
    hwmon files (None: the file itself; a test passes a reader that denies, as for a non-root user)."""
    from wattbench.telemetry import hwmon as _hwmon
    from wattbench.telemetry import jetson as _jetson
    from wattbench.telemetry import rapl as _rapl
    from wattbench.telemetry.nvml import NvmlSensor, load_nvml

    sensors: list[Sensor] = []
    problems: list[str] = []

    # 1. NVIDIA: NVML, else nvidia-smi
    nvml_ok = False
    nvml_err = ""
    try:
        nv = load_nvml(nvml)
        nv.nvmlInit()
        try:
            nvml_ok = nv.nvmlDeviceGetCount() > 0
        finally:
            nv.nvmlShutdown()
    except SensorError as e:
        nvml_err = str(e)
    except Exception as e:  # NVMLError_LibraryNotFound / DriverNotLoaded: no NVIDIA GPU here, usually
        nvml_err = str(e)
    if nvml_ok:
        sensors.append(NvmlSensor(nvml=nvml))
    elif which("nvidia-smi"):
        from wattbench.telemetry.nvidia_smi import NvidiaSmiSensor

        sensors.append(NvidiaSmiSensor())
        problems.append(f"nvml: bindings unusable ({nvml_err or 'no GPU'}); falling back to nvidia-smi "
                        "(power polling, no energy counter) (fix: `pip install nvidia-ml-py`)")

    # 2. RAPL
    root = Path(powercap_root or _rapl.DEFAULT_ROOT)
    zones = sorted(p for p in root.glob("*-rapl:*") if _rapl.ZONE_RE.match(p.name)) if root.is_dir() else []
    cpu_meter = False
    exclude: list[str] = []
    if zones:
        probe = _rapl.RaplSensor(root=root, read_text=read_text)
        try:
            probe._read_text(zones[0] / "energy_uj")
            sensors.append(_rapl.RaplSensor(root=root, read_text=read_text))
            cpu_meter = True
            exclude.append("amd_energy")
        except PermissionError:
            problems.append(f"rapl: permission denied reading {zones[0] / 'energy_uj'} "
                            f"(fix: {_rapl.PERMISSION_FIX})")
        except OSError as e:
            problems.append(f"rapl: cannot read {zones[0] / 'energy_uj'}: {e}")

    # 3. Jetson
    jroot = Path(jetson_root or _jetson.DEFAULT_ROOT)
    if jroot.is_dir() and any(jroot.glob("ina3221*/*/hwmon/hwmon*/in*_label")):
        sensors.append(_jetson.JetsonSensor(root=jroot))
        cpu_meter = True  # VDD_CPU_CV rail
        exclude.append("ina3221")

    # 4. AMD GPUs
    if Path(kfd_device).exists():
        try:
            import amdsmi  # noqa: F401
        except ImportError:
            problems.append("amd: /dev/kfd exists but amdsmi is not importable "
                            "(fix: install ROCm's Python bindings, `pip install amdsmi` matching your ROCm)")
        else:
            from wattbench.telemetry.amd import AmdSensor

            sensors.append(AmdSensor())
            exclude.append("amdgpu")

    # 4b. hwmon power monitors (INA2xx/INA3221, ACPI power_meter, GPU/CPU drivers' energy)
    cpu_meter = _hwmon_probe(Path(hwmon_root or _hwmon.DEFAULT_ROOT), tuple(exclude), sensors, problems,
                             read_text) or cpu_meter

    # 5. IPMI (local BMC)
    if Path(ipmi_device).exists():
        if which("ipmitool"):
            from wattbench.telemetry.ipmi import IpmiSensor

            sensors.append(IpmiSensor())
        else:
            problems.append(f"ipmi: {ipmi_device} exists but ipmitool is missing "
                            "(fix: `sudo apt-get install ipmitool`, then node power is read through DCMI)")

    # 6. CPU estimate: opt-in only
    if not cpu_meter:
        if estimate_cpu:
            from wattbench.telemetry.estimate import CpuEstimateSensor

            sensors.append(CpuEstimateSensor())
        elif zones:
            problems.append("cpu: no CPU power meter readable (fix: grant RAPL access as above, "
                            "or opt in to an estimate with `--sensor estimate:cpu[,tdp=W]`)")
    if not sensors and not problems:
        looked = [
            f"NVIDIA GPU ({nvml_err.strip() or 'NVML found no device'}; no nvidia-smi)",
            f"RAPL ({root} {'has no readable zone' if root.is_dir() else 'absent'})",
            "Jetson rails", f"AMD GPU ({kfd_device} absent)", "hwmon power/energy channels", f"BMC ({ipmi_device} absent)",
        ]
        problems.append("no power meter found: looked for " + "; ".join(looked)
                        + " (fix: add --sensor, e.g. const:node=WATTS for a declared figure, "
                        "estimate:cpu for a CPU estimate, or a wall meter with file:PATH)")
    return sensors, problems


def _hwmon_probe(root: Path, exclude: tuple[str, ...], sensors: list[Sensor], problems: list[str],
                 read_text: Callable[[Path], str] | None = None) -> bool:
    """Add a HwmonSensor when ``root`` has power/energy channels no other sensor reads; return
    whether one of them meters the CPU. Unreadable channels become a problem line with the fix."""
    from wattbench.telemetry.hwmon import HwmonSensor

    probe = HwmonSensor(root=root, exclude=exclude, read_text=read_text)
    if not probe.scan():
        return False
    try:
        chans = probe.open()
    except SensorError as e:
        problems.append(str(e))
        return False
    finally:
        probe.close()
    sensors.append(HwmonSensor(root=root, exclude=exclude, read_text=read_text))
    return any(c.boundary == "cpu" for c in chans)


def _update_period(times: list[int], values: list[float]) -> tuple[float | None, int]:
    change_t = [t for (t, v), (_, pv) in zip(zip(times[1:], values[1:]), zip(times, values)) if v != pv]
    gaps = [(b - a) / 1e9 for a, b in zip(change_t, change_t[1:])]
    return (statistics.median(gaps) if gaps else None), len(change_t)


def inventory(specs: list[str] | None = None, measure_s: float = 1.5, **autodetect_kw) -> list[dict]:
    """One dict per channel (``"type": "channel"``) and per problem (``"type": "problem"``).

    Channel dicts: the Channel's fields, ``value`` (first read), ``read_ms`` (cost of one
    read() of its sensor), ``measured_update_s`` (median time between value changes while
    polled fast for ``measure_s``; None when the value did not change twice), ``changes``.
    """
    from wattbench.telemetry.sampler import period_of
    from wattbench.telemetry.spec import parse_sensor_spec

    if specs:
        sensors, problems = [parse_sensor_spec(s) for s in specs], []
    else:
        sensors, problems = autodetect(**autodetect_kw)
    out: list[dict] = []
    opened: list[tuple[Sensor, list]] = []
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
