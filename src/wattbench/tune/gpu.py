"""GPU power settings as tuning axes: the power limit (W) and locked SM clocks (MHz), via NVML.

Changing them is opt-in (``--allow-gpu-settings``), needs root, and every requested value is
checked against the device's allowed range before anything changes:

- power limit: ``nvmlDeviceGetPowerManagementLimitConstraints`` -> [min, max] mW;
- SM clocks: the graphics clocks ``nvmlDeviceGetSupportedGraphicsClocks`` lists for the highest
  supported memory clock -> [lowest, highest] MHz; locking uses
  ``nvmlDeviceSetGpuLockedClocks(h, MHz, MHz)`` (min = max), undone by
  ``nvmlDeviceResetGpuLockedClocks``.

**Restore protocol.** Before the first change the originals (power limit in mW per device, and
that clocks were not locked by us) go to a *state file* (``$WATTBENCH_GPU_STATE`` or
``/var/lib/wattbench/gpu-settings.json``), written atomically and fsynced. After every trial,
on an exception, on Ctrl-C and on SIGTERM (``GpuSettings`` is a context manager and turns
SIGTERM into SIGINT while active, as ``run`` does) the originals are restored and the state file removed.
A SIGKILL or a crash leaves the state file behind: the next ``wattbench tune`` (before it changes
anything) or ``wattbench doctor --restore`` finds it and restores (:func:`restore_pending`).

NVML cannot tell whether clocks were locked before we started; a restore resets locked clocks to
the driver default, so a machine whose administrator locked clocks by hand gets them unlocked
(the docs say so). ``nvml`` is the seam for a fake module (tests); never a real GPU in tests.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from wattbench.core.errors import UserError
from wattbench.core.interrupt import sigterm_as_ctrl_c
from wattbench.telemetry.nvml_device import Nvml, NvmlDevice

DEFAULT_STATE_PATH = "/var/lib/wattbench/gpu-settings.json"


def state_path(path: str | Path | None = None) -> Path:
    return Path(path or os.environ.get("WATTBENCH_GPU_STATE") or DEFAULT_STATE_PATH).expanduser()


def is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


@dataclass
class DeviceRange:
    index: int
    name: str
    power_min_w: float | None
    power_max_w: float | None
    sm_clock_min_mhz: int | None
    sm_clock_max_mhz: int | None
    power_limit_w: float | None  # current

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _write_atomic(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w") as f:
        json.dump(data, f, indent=2)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class GpuSettings:
    """Set power limits / locked clocks on ``devices`` and put the originals back (see module doc)."""

    def __init__(self, devices: list[int] | None = None, *, nvml: Any = None, state: str | Path | None = None,
                 root: bool | None = None):
        self.nv = Nvml(nvml)
        self.state = state_path(state)
        self.root = is_root() if root is None else root
        self._devices_arg = devices
        self._devices: dict[int, NvmlDevice] = {}
        self._sigterm = contextlib.ExitStack()  # SIGTERM as Ctrl-C while entered (interrupt.py)
        self.current: dict[str, float] = {}
        self._inited = False

    # -------------------------------------------------------------- device access
    def _init(self) -> None:
        if not self._inited:
            self.nv.init()
            self._inited = True
            n = self.nv.device_count()
            idx = self._devices_arg if self._devices_arg is not None else list(range(n))
            for i in idx:
                if not 0 <= i < n:
                    raise UserError(f"GPU {i} does not exist ({n} visible)")
                self._devices[i] = self.nv.device(i)

    def ranges(self) -> list[DeviceRange]:
        self._init()
        out = []
        for i, d in self._devices.items():
            name = d.name()
            pmin: float | None = None
            pmax: float | None = None
            cur: float | None = None
            cmin: int | None = None
            cmax: int | None = None
            with contextlib.suppress(Exception):
                pmin, pmax = d.power_limit_constraints_w()
            with contextlib.suppress(Exception):
                cur = d.power_limit_w()
            with contextlib.suppress(Exception):
                clocks = d.supported_graphics_clocks_mhz(max(d.supported_memory_clocks_mhz()))
                cmin, cmax = min(clocks), max(clocks)
            out.append(DeviceRange(i, name, pmin, pmax, cmin, cmax, cur))
        return out

    def check(self, power_limits_w: list[float], sm_clocks_mhz: list[int]) -> list[DeviceRange]:
        """Refuse (UserError) unless root and every value is inside every device's range."""
        if not (power_limits_w or sm_clocks_mhz):
            return []
        if not self.root:
            raise UserError("changing GPU power limits or clocks needs root: run wattbench tune as root "
                            "(sudo) or drop --power-limit/--sm-clocks")
        rng = self.ranges()
        for r in rng:
            _check_in_range(r, "--power-limit", power_limits_w, r.power_min_w, r.power_max_w, "W",
                            "does not report power limit constraints", "allowed")
            _check_in_range(r, "--sm-clocks", sm_clocks_mhz, r.sm_clock_min_mhz, r.sm_clock_max_mhz, "MHz",
                            "does not list supported clocks", "supported")
        return rng

    # -------------------------------------------------------------- change / restore
    def _record_originals(self) -> None:
        if self.state.exists():
            return  # originals from before an earlier change are already recorded (never overwrite them)
        originals = {}
        for i, d in self._devices.items():
            originals[str(i)] = {"power_limit_mw": int(round(d.power_limit_w() * 1000))}
        _write_atomic(self.state, {"version": 1, "pid": os.getpid(), "devices": originals, "clocks_locked": False})

    def apply(self, settings: dict[str, float]) -> dict[str, float]:
        """Set ``{"power_limit_w", "sm_clock_mhz"}`` (either may be absent) on every device; returns
        what was set. The originals are recorded before the first change."""
        if not settings:
            return {}
        if not self.root:
            raise UserError("changing GPU settings needs root")
        self._init()
        self._record_originals()
        applied: dict[str, float] = {}
        if "sm_clock_mhz" in settings:  # mark before the call: a crash right after must still reset
            data = json.loads(self.state.read_text())
            data["clocks_locked"] = True
            _write_atomic(self.state, data)
        for d in self._devices.values():
            if "power_limit_w" in settings:
                d.set_power_limit_w(settings["power_limit_w"])
                applied["power_limit_w"] = float(settings["power_limit_w"])
            if "sm_clock_mhz" in settings:
                c = int(settings["sm_clock_mhz"])
                d.lock_sm_clocks_mhz(c, c)
                applied["sm_clock_mhz"] = c
        self.current = applied
        return applied

    def restore(self) -> list[str]:
        """Put the recorded originals back and remove the state file; what was done, one line each."""
        if not self.state.exists():
            self.current = {}
            return []
        self._init()
        done = restore_from(self.state, self.nv, self._devices)
        self.current = {}
        return done

    # -------------------------------------------------------------- context: restore on every exit
    def __enter__(self) -> "GpuSettings":
        # as `run` does (interrupt.py): the work stops as on Ctrl-C and __exit__ restores, then puts
        # the caller's SIGTERM handler back (outside the main thread the caller's handlers stay)
        self._sigterm.enter_context(sigterm_as_ctrl_c())
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.restore()
        finally:
            self._sigterm.close()
            if self._inited:
                with contextlib.suppress(Exception):
                    self.nv.shutdown()
                self._inited = False


def restore_from(path: Path, nv: Nvml, opened: dict[int, NvmlDevice] | None = None) -> list[str]:
    """Restore the originals recorded in ``path`` (then remove it); ``opened``: devices already open, by index."""
    try:
        data = json.loads(path.read_text())
        devices = data["devices"]
    except (OSError, ValueError, KeyError) as e:
        raise UserError(f"GPU settings state file {path} is unreadable ({e}); restore the power limit with "
                        "nvidia-smi -pl and the clocks with nvidia-smi -rgc, then remove it") from None
    done = []
    for key, orig in devices.items():
        i = int(key)
        d = (opened or {}).get(i)
        if d is None:
            d = nv.device(i)
        if data.get("clocks_locked"):
            d.reset_locked_clocks()
            done.append(f"GPU {i}: locked clocks reset")
        mw = orig.get("power_limit_mw")
        if mw is not None and round(d.power_limit_w() * 1000) != mw:
            d.set_power_limit_w(int(mw) / 1000)
            done.append(f"GPU {i}: power limit restored to {mw / 1000:g} W")
        elif mw is not None:
            done.append(f"GPU {i}: power limit already {mw / 1000:g} W")
    path.unlink()
    return done


def restore_pending(*, nvml: Any = None, state: str | Path | None = None, root: bool | None = None) -> list[str] | None:
    """If a state file was left behind (a tune killed mid-trial), restore it. None when there was none."""
    p = state_path(state)
    if not p.exists():
        return None
    if not (is_root() if root is None else root):
        raise UserError(f"GPU settings changed by an earlier wattbench tune are still recorded in {p}; "
                        "run `sudo wattbench doctor --restore` to put them back")

    nv = Nvml(nvml)
    nv.init()
    try:
        return restore_from(p, nv)
    finally:
        with contextlib.suppress(Exception):
            nv.shutdown()


def _check_in_range(r: DeviceRange, flag: str, values: Sequence[float], lo: float | None, hi: float | None, unit: str,
                    no_range: str, kind: str) -> None:
    """UserError naming ``flag`` unless GPU ``r`` reports a range [lo, hi] holding every value."""
    for v in values:
        if lo is None or hi is None:
            raise UserError(f"GPU {r.index} ({r.name}) {no_range}; drop {flag}")
        if not lo <= v <= hi:
            raise UserError(f"{flag} {v:g} {unit} is outside GPU {r.index}'s {kind} range "
                            f"{lo:g}-{hi:g} {unit}; give values inside it")
