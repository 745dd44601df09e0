"""NVIDIA GPUs through NVML (``nvidia-ml-py``, loaded by ``nvml_device.load_nvml``).

Per GPU, channels (ids ``nvml.gpu<i>.<quantity>``):

* ``energy`` — ``nvmlDeviceGetTotalEnergyConsumption`` (mJ since driver load -> J), counter,
  boundary ``accelerator``, the primary figure.
* ``power_instant`` — field 186 ``NVML_FI_DEV_POWER_INSTANT`` (mW -> W), power, not primary.
* ``power_avg`` — field 185 ``NVML_FI_DEV_POWER_AVERAGE`` (a 1 s average), power, not primary.
* ``power`` — ``nvmlDeviceGetPowerUsage``, only where field 186 is not supported (older GPUs).
* ``memory_power`` — the board's memory (HBM) power, boundary ``accelerator_memory``: field 186
  with ``scopeId=NVML_POWER_SCOPE_MEMORY`` where the driver answers it, else field 185 with that
  scope (each field and scope probed on its own). The H200 (driver 580) answers only 185 with the
  memory scope — a **1 s average**, equal to ``nvidia-smi -q -d POWER``'s "GPU Memory Power
  Readings" — so that channel has quantity ``power_avg``, update period 1 s, its readings stamped
  at the centre of their averaging second (read time − 0.5 s), and a stated uncertainty of
  ``MEMORY_AVG_UNCERTAINTY_PCT`` (docs/sensors.md says where it comes from).
* ``power_samples`` — NVML's power sample buffer (``nvmlDeviceGetSamples`` with
  ``NVML_TOTAL_POWER_SAMPLES``), drained every ``samples_every_s`` with the last timestamp seen.
  The buffer holds ~2.4 s (119 × ~20 ms samples on H200), so it is drained at least every second.
* aux gauges, read every ``aux_every_s``: temperature, SM/memory clocks, utilization, memory
  used, clock-event (throttle) reasons bitmask, enforced power limit, P-state.

A call that answers ``NVMLError_NotSupported`` at open drops that channel; any other error at
open drops it too and leaves a line in ``warnings``. Where the board has no energy counter, the
instant (or fallback) power channel becomes primary.

Timestamps: each value gets the midpoint of the call that read it (monotonic clock). Sample
buffer timestamps are CPU microseconds on the wall clock; at every drain a ``ClockAnchor`` is
taken and each sample is mapped with ``mono = anchor.mono + (ts_us·1000 − anchor.wall)``. If the
newest sample then lands more than 0.5 s in the future or 5 s in the past (a driver whose sample
clock is not the wall clock), the offset is re-estimated so that the newest sample maps to the
drain time; ``sample_offset_mode`` says which mapping is in use.

The sensor blocks (an energy-counter read costs ~3–5 ms of CPU on an H200, the wait spent
on-CPU in the driver): only the sampler thread calls ``read()``, and the counter is read at most
every ``counter_every_s`` (default ``COUNTER_EVERY_S`` = 0.9 s: under validity's 1 s largest-gap
warning) while the power fields are read at every poll. The counter is cumulative, so reading it
seldom loses no energy; the accounting apportions the delta around a window edge by the power
channel's shape (``accounting/counters.py``). The first read and a read after
``force_full_read()`` (the sampler's closing read) include the counter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from wattbench.core.clock import ClockAnchor, now_ns
from wattbench.core.errors import SensorError
from wattbench.telemetry.base import Channel, Kind, Reading, Sensor
from wattbench.telemetry.nvidia_smi import NvidiaSmiSensor
from wattbench.telemetry.nvml_device import is_not_supported, load_nvml
from wattbench.telemetry.nvml_device import const as _const
from wattbench.telemetry.nvml_device import cuda_version_str as _cuda_version
from wattbench.telemetry.nvml_device import text as _text
from wattbench.telemetry.probe import Found, Machine
from wattbench.core.schema import GPUInfo

if TYPE_CHECKING:
    from wattbench.core.schema import GPUInfo

FI_POWER_AVERAGE = 185
FI_POWER_INSTANT = 186
POWER_SCOPE_MEMORY = 2  # NVML_POWER_SCOPE_MEMORY
TOTAL_POWER_SAMPLES = 0  # NVML_TOTAL_POWER_SAMPLES
COUNTER_EVERY_S = 0.9
AVERAGE_WINDOW_S = 1.0  # field 185 is a trailing 1 s average
# NVML documents no accuracy for the memory scope; on the H200 the board's own 1 s average field
# integrated to 10% less than the energy counter over a 5 s load burst (its lag, DESIGN.md): the
# bound carried for the memory average, whose lag is centred but whose averaging is not undone.
MEMORY_AVG_UNCERTAINTY_PCT = 10.0

_VALUE_ATTR = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}

NVML_FIX = (
    "install the NVIDIA driver and `pip install nvidia-ml-py`, and check that `nvidia-smi` works; "
    "or use `--sensor nvidia-smi`"
)


def field_value(fv: Any) -> float | None:
    """Decode one ``c_nvmlFieldValue_t``; None when that field failed."""
    if getattr(fv, "nvmlReturn", 0) != 0:
        return None
    attr = _VALUE_ATTR.get(getattr(fv, "valueType", 1), "uiVal")
    return float(getattr(fv.value, attr))


def sample_value(value_type: int, sample: Any) -> float:
    attr = _VALUE_ATTR.get(value_type, "uiVal")
    return float(getattr(sample.sampleValue, attr))


class NvmlSensor(Sensor):
    name = "nvml"

    def __init__(
        self,
        indices: list[int] | None = None,
        nvml: Any = None,
        *,
        aux_every_s: float = 1.0,
        samples: bool = True,
        samples_every_s: float = 0.5,
        poll_interval_s: float | None = None,
        counter_every_s: float = COUNTER_EVERY_S,
    ) -> None:
        self.indices = list(indices) if indices is not None else None
        self._nvml_arg = nvml
        self.nvml: Any = None
        self.aux_every_s = aux_every_s
        self.samples = samples
        self.samples_every_s = samples_every_s
        if poll_interval_s is not None:
            self.poll_interval_s = poll_interval_s
        self.warnings: list[str] = []
        self.sample_offset_mode = "wall_anchor"
        self.soft_errors: dict[str, int] = {}
        self.last_soft_error = ""
        self._gpus: list[dict[str, Any]] = []  # per GPU: its handle, channel ids and what it answers (_open_gpu)
        self._initialized = False
        self._last_aux_ns: int | None = None
        self._last_drain_ns: int | None = None
        self.counter_every_s = counter_every_s
        self._next_counter_ns: int | None = None

    # -- open -------------------------------------------------------------------------------
    def open(self) -> list[Channel]:
        nv = self.nvml = load_nvml(self._nvml_arg)
        try:
            nv.nvmlInit()
        except Exception as e:  # NVMLError_LibraryNotFound, DriverNotLoaded ...
            raise SensorError(f"NVML could not initialise: {e}", NVML_FIX) from None
        self._initialized = True
        try:
            count = nv.nvmlDeviceGetCount()
            indices = self.indices if self.indices is not None else list(range(count))
            bad = [i for i in indices if i < 0 or i >= count]
            if bad:
                raise SensorError(
                    f"NVML: GPU index {bad[0]} does not exist (this machine has {count} GPUs: 0..{count - 1})",
                    "pick indices from `nvidia-smi -L`",
                )
            if not indices:
                raise SensorError("NVML sees no GPU", NVML_FIX)
            channels: list[Channel] = []
            for i in indices:
                channels.extend(self._open_gpu(i))
            return channels
        except BaseException:
            self.close()
            raise

    def _probe(self, label: str, fn: Callable[..., Any], *args: Any) -> tuple[bool, Any]:
        try:
            return True, fn(*args)
        except Exception as e:
            if not is_not_supported(self.nvml, e):
                self.warnings.append(f"nvml: {label} unavailable ({e}); channel dropped")
            return False, None

    def _open_gpu(self, i: int) -> list[Channel]:
        nv = self.nvml
        h = nv.nvmlDeviceGetHandleByIndex(i)
        ok, name = self._probe(f"gpu{i} name", nv.nvmlDeviceGetName, h)
        dev = f"gpu{i}"
        device = f"{dev}:{_text(name)}" if ok else dev
        prefix = f"nvml.{dev}"
        g: dict[str, Any] = {"index": i, "handle": h, "prefix": prefix, "fields": [], "aux": []}
        chans: list[Channel] = []

        def ch(q: str, kind: Kind, unit: str, boundary: str | None, source: str, **kw: Any) -> Channel:
            return Channel(
                id=f"{prefix}.{q}", sensor=self.name, kind=kind, quantity=q if kind == "aux" else kw.pop("quantity", q),
                unit=unit, boundary=boundary, device=device, source=source, **kw,
            )

        has_counter, _ = self._probe(f"gpu{i} energy counter", nv.nvmlDeviceGetTotalEnergyConsumption, h)
        g["counter"] = has_counter
        if has_counter:
            chans.append(ch("energy", "counter", "J", "accelerator", "nvmlDeviceGetTotalEnergyConsumption",
                            quantity="energy", resolution=0.001, update_period_s=0.1, primary=True,
                            notes=f"refreshes every ~0.1 s; read every {self.counter_every_s:g} s (each read "
                                  "costs ~3-5 ms of CPU on an H200); edges follow the power channel's shape"))

        # field values, each probed on its own (a scoped id may be refused on older drivers)
        fi_inst = _const(nv, "NVML_FI_DEV_POWER_INSTANT", FI_POWER_INSTANT)
        fi_avg = _const(nv, "NVML_FI_DEV_POWER_AVERAGE", FI_POWER_AVERAGE)
        scope_mem = _const(nv, "NVML_POWER_SCOPE_MEMORY", POWER_SCOPE_MEMORY)
        wanted = [
            ("power_instant", fi_inst, "accelerator", "power", "field 186 NVML_FI_DEV_POWER_INSTANT"),
            ("power_avg", fi_avg, "accelerator", "power_avg", "field 185 NVML_FI_DEV_POWER_AVERAGE (1 s average)"),
        ]
        for q, fid, boundary, quantity, source in wanted:
            ok, vals = self._probe(f"gpu{i} {q}", nv.nvmlDeviceGetFieldValues, h, [fid])
            if not ok or not vals or field_value(vals[0]) is None:
                continue
            g["fields"].append((f"{prefix}.{q}", fid, 0))
            primary = q == "power_instant" and not has_counter
            chans.append(ch(q, "power", "W", boundary, source, quantity=quantity, resolution=0.001,
                            update_period_s=0.1 if q != "power_avg" else AVERAGE_WINDOW_S, primary=primary))
        mem = self._probe_memory_scope(i, h, fi_inst, fi_avg, scope_mem)
        if mem is not None:
            fid, is_avg = mem
            g["fields"].append((f"{prefix}.memory_power", (fid, scope_mem), AVERAGE_WINDOW_S / 2 if is_avg else 0))
            if is_avg:
                chans.append(ch("memory_power", "power", "W", "accelerator_memory",
                                "field 185 NVML_FI_DEV_POWER_AVERAGE with scopeId NVML_POWER_SCOPE_MEMORY "
                                "(1 s average)", quantity="power_avg", resolution=0.001,
                                update_period_s=AVERAGE_WINDOW_S, uncertainty_pct=MEMORY_AVG_UNCERTAINTY_PCT,
                                notes="a trailing 1 s average, stamped at the centre of its second (read time − 0.5 s)"))
            else:
                chans.append(ch("memory_power", "power", "W", "accelerator_memory",
                                "field 186 NVML_FI_DEV_POWER_INSTANT with scopeId NVML_POWER_SCOPE_MEMORY",
                                quantity="power", resolution=0.001, update_period_s=0.1))

        g["power_usage"] = False
        if not any(f[0].endswith(".power_instant") for f in g["fields"]):
            ok, _ = self._probe(f"gpu{i} power usage", nv.nvmlDeviceGetPowerUsage, h)
            if ok:
                g["power_usage"] = True
                chans.append(ch("power", "power", "W", "accelerator", "nvmlDeviceGetPowerUsage", quantity="power",
                                resolution=0.001, primary=not has_counter))

        g["samples_last_ts"] = 0
        g["samples"] = False
        if self.samples:
            stype = _const(nv, "NVML_TOTAL_POWER_SAMPLES", TOTAL_POWER_SAMPLES)
            ok, res = self._probe(f"gpu{i} power sample buffer", nv.nvmlDeviceGetSamples, h, stype, 0)
            if ok:
                g["samples"] = True
                g["samples_type"] = stype
                chans.append(ch("power_samples", "power", "W", "accelerator",
                                "nvmlDeviceGetSamples NVML_TOTAL_POWER_SAMPLES", quantity="power", resolution=0.001,
                                update_period_s=0.02,
                                notes="sample-buffer timestamps mapped from CPU wall µs onto the run clock"))

        aux = [
            ("temperature_c", "C", lambda: nv.nvmlDeviceGetTemperature(h, _const(nv, "NVML_TEMPERATURE_GPU", 0))),
            ("sm_clock_mhz", "MHz", lambda: nv.nvmlDeviceGetClockInfo(h, _const(nv, "NVML_CLOCK_SM", 1))),
            ("mem_clock_mhz", "MHz", lambda: nv.nvmlDeviceGetClockInfo(h, _const(nv, "NVML_CLOCK_MEM", 2))),
            ("gpu_util_pct", "%", lambda: nv.nvmlDeviceGetUtilizationRates(h).gpu),
            ("mem_util_pct", "%", lambda: nv.nvmlDeviceGetUtilizationRates(h).memory),
            ("memory_used_bytes", "B", lambda: nv.nvmlDeviceGetMemoryInfo(h).used),
            ("clock_event_reasons", "bitmask", self._reasons_fn(h)),
            ("power_limit_w", "W", lambda: nv.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0),
            ("pstate", "P", lambda: nv.nvmlDeviceGetPerformanceState(h)),
        ]
        for q, unit, fn in aux:
            if fn is None:
                continue
            ok, _ = self._probe(f"gpu{i} {q}", fn)
            if ok:
                g["aux"].append((f"{prefix}.{q}", fn))
                chans.append(ch(q, "aux", unit, None, "nvml", update_period_s=self.aux_every_s))
        self._gpus.append(g)
        return chans

    def _probe_memory_scope(self, i: int, h: Any, fi_inst: int, fi_avg: int, scope_mem: int) -> tuple[int, bool] | None:
        """The field that reads the memory scope: ``(field id, is a 1 s average)`` or None.

        Each (field, scope) pair is asked on its own: the instant field first, then the 1 s
        average (the only one an H200 answers). A driver that ignores ``scopeId`` answers the
        board's own value: such a pair is refused with a warning."""
        nv = self.nvml
        for fid, is_avg in ((fi_inst, False), (fi_avg, True)):
            ok, vals = self._probe(f"gpu{i} memory power (field {fid}, memory scope)", nv.nvmlDeviceGetFieldValues,
                                   h, [(fid, scope_mem)])
            if not ok or not vals or field_value(vals[0]) is None:
                continue
            ok2, both = self._probe(f"gpu{i} memory power (field {fid})", nv.nvmlDeviceGetFieldValues,
                                    h, [fid, (fid, scope_mem)])
            if ok2 and field_value(both[0]) is not None and field_value(both[0]) == field_value(both[1]):
                self.warnings.append(f"nvml: gpu{i} memory-scope power (field {fid}) equals the board total; "
                                     "the driver ignores the scope, channel dropped")
                continue
            return fid, is_avg
        return None

    def _reasons_fn(self, h: Any) -> Callable[[], Any] | None:
        """Clock-event reasons (driver >= 535), else the older throttle-reasons call."""
        nv = self.nvml
        for name in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"):
            fn = getattr(nv, name, None)
            if fn is None:
                continue
            try:
                fn(h)
            except Exception:
                continue
            answered: Callable[[Any], Any] = fn  # bound here: the loop goes no further
            return lambda: answered(h)
        return None

    # -- read -------------------------------------------------------------------------------
    def read(self) -> list[Reading]:
        nv = self.nvml
        out: list[Reading] = []
        t = now_ns()
        do_aux = self._last_aux_ns is None or t - self._last_aux_ns >= self.aux_every_s * 1e9
        do_samples = self._last_drain_ns is None or t - self._last_drain_ns >= self.samples_every_s * 1e9
        # the poll grid jitters by a few ms: 5% slack keeps a 0.9 s period on every 9th 0.1 s poll
        do_counter = self._next_counter_ns is None or t >= self._next_counter_ns
        if do_counter:
            self._next_counter_ns = t + int(0.95 * self.counter_every_s * 1e9)
        for g in self._gpus:
            h, p = g["handle"], g["prefix"]
            if g["counter"] and do_counter:
                a = now_ns()
                mj = nv.nvmlDeviceGetTotalEnergyConsumption(h)
                b = now_ns()
                out.append(Reading((a + b) // 2, f"{p}.energy", mj / 1000.0))
            if g["fields"]:
                a = now_ns()
                vals = nv.nvmlDeviceGetFieldValues(h, [fid for _, fid, _ in g["fields"]])
                b = now_ns()
                for (cid, _, lag_s), fv in zip(g["fields"], vals):
                    v = field_value(fv)
                    if v is not None:
                        out.append(Reading((a + b) // 2 - int(lag_s * 1e9), cid, v / 1000.0))
            if g["power_usage"]:
                a = now_ns()
                mw = nv.nvmlDeviceGetPowerUsage(h)
                b = now_ns()
                out.append(Reading((a + b) // 2, f"{p}.power", mw / 1000.0))
            # a failing aux gauge or sample drain costs only that value (counted in soft_errors);
            # a failing counter/power read above raises, and the sampler records the gap.
            if g["samples"] and do_samples:
                try:
                    out.extend(self._drain(g))
                except Exception as e:
                    self._soft(f"{p}.power_samples", e)
            if do_aux:
                for cid, fn in g["aux"]:
                    a = now_ns()
                    try:
                        v = fn()
                    except Exception as e:
                        self._soft(cid, e)
                        continue
                    b = now_ns()
                    out.append(Reading((a + b) // 2, cid, float(v)))
        if do_aux:
            self._last_aux_ns = t
        if do_samples:
            self._last_drain_ns = t
        return out

    def force_full_read(self) -> None:
        """Make the next ``read()`` include the energy counter and a drain of the power samples (the
        sampler's closing read, at a window's end and at ``stop``)."""
        self._next_counter_ns = None
        self._last_drain_ns = None

    def _soft(self, cid: str, exc: BaseException) -> None:
        self.soft_errors[cid] = self.soft_errors.get(cid, 0) + 1
        self.last_soft_error = f"{cid}: {type(exc).__name__}: {exc}"

    def _drain(self, g: dict[str, Any]) -> list[Reading]:
        nv = self.nvml
        try:
            vtype, samples = nv.nvmlDeviceGetSamples(g["handle"], g["samples_type"], g["samples_last_ts"])
        except Exception as e:
            if is_not_supported(nv, e) or getattr(e, "value", None) == _const(nv, "NVML_ERROR_NOT_FOUND", 6):
                return []  # no new samples since the last timestamp
            raise
        anchor = ClockAnchor.take()
        new = [s for s in samples if s.timeStamp > g["samples_last_ts"]]
        if not new:
            return []
        new.sort(key=lambda s: s.timeStamp)
        offset_ns = anchor.mono_ns - anchor.wall_ns
        newest_mono = new[-1].timeStamp * 1000 + offset_ns
        if newest_mono > anchor.mono_ns + 500_000_000 or newest_mono < anchor.mono_ns - 5_000_000_000:
            offset_ns = anchor.mono_ns - new[-1].timeStamp * 1000
            self.sample_offset_mode = "newest_at_drain"
        g["samples_last_ts"] = new[-1].timeStamp
        cid = f"{g['prefix']}.power_samples"
        return [Reading(s.timeStamp * 1000 + offset_ns, cid, sample_value(vtype, s) / 1000.0) for s in new]

    def close(self) -> None:
        if self._initialized and self.nvml is not None:
            self._initialized = False
            try:
                self.nvml.nvmlShutdown()
            except Exception:  # shutting down a lost GPU must not hide the run's result
                pass
        self._gpus = []

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "poll_interval_s": self.poll_interval_s,
            "indices": [g["index"] for g in self._gpus] or self.indices,
            "sample_offset_mode": self.sample_offset_mode,
            "soft_errors": dict(self.soft_errors),
        }


def gpu_inventory(nvml: Any = None) -> list[GPUInfo]:
    """Describe every GPU NVML sees (for the result's environment). Empty list if NVML is absent."""
    try:
        nv = load_nvml(nvml)
        nv.nvmlInit()
    except Exception:
        return []

    def opt(fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception:
            return None

    try:
        driver = opt(nv.nvmlSystemGetDriverVersion)
        cuda = opt(nv.nvmlSystemGetCudaDriverVersion)
        out = []
        for i in range(nv.nvmlDeviceGetCount()):
            h = nv.nvmlDeviceGetHandleByIndex(i)
            limit = opt(nv.nvmlDeviceGetEnforcedPowerLimit, h)
            default = opt(nv.nvmlDeviceGetPowerManagementDefaultLimit, h)
            mem = opt(nv.nvmlDeviceGetMemoryInfo, h)
            pstate = opt(nv.nvmlDeviceGetPerformanceState, h)
            name = opt(nv.nvmlDeviceGetName, h)
            uuid = opt(nv.nvmlDeviceGetUUID, h)
            out.append(
                GPUInfo(
                    index=i,
                    name=_text(name) if name is not None else None,
                    uuid=_text(uuid) if uuid is not None else None,
                    driver=_text(driver) if driver is not None else None,
                    cuda_driver=_cuda_version(int(cuda)) if cuda is not None else None,
                    power_limit_w=limit / 1000.0 if limit is not None else None,
                    default_power_limit_w=default / 1000.0 if default is not None else None,
                    memory_total_bytes=int(mem.total) if mem is not None else None,
                    pstate=f"P{int(pstate)}" if pstate is not None else None,
                )
            )
        return out
    finally:
        try:
            nv.nvmlShutdown()
        except Exception:
            pass


def detect(m: Machine) -> Found:
    """NVML where it loads and sees a GPU; else the ``nvidia-smi`` CLI (power polling, no energy
    counter) where it is on the PATH, with a problem line; else nothing (no NVIDIA GPU, usually)."""
    nvml_ok = False
    nvml_err = ""
    try:
        nv = load_nvml(m.nvml)
        nv.nvmlInit()
        try:
            nvml_ok = nv.nvmlDeviceGetCount() > 0
        finally:
            nv.nvmlShutdown()
    except Exception as e:  # SensorError; NVMLError_LibraryNotFound / DriverNotLoaded: no NVIDIA GPU here, usually
        nvml_err = str(e)
    looked = f"NVIDIA GPU ({nvml_err.strip() or 'NVML found no device'}; no nvidia-smi)"
    if nvml_ok:
        return Found([NvmlSensor(nvml=m.nvml)], looked=looked)
    if m.which("nvidia-smi"):
        return Found([NvidiaSmiSensor()], [f"nvml: bindings unusable ({nvml_err or 'no GPU'}); falling back to "
                                           "nvidia-smi (power polling, no energy counter) "
                                           "(fix: `pip install nvidia-ml-py`)"], looked=looked)
    return Found(looked=looked)
