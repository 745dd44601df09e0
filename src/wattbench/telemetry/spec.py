"""``--sensor SPEC`` strings -> sensor instances.

A spec is ``KIND`` or ``KIND:ARGS``; ARGS is a comma list of positional items and ``key=value``
options. Every kind accepts ``interval=SECONDS`` (its poll period). See ``FORMS``. Each kind has one
builder (``SENSOR_KINDS``, the registry).
"""

from __future__ import annotations

import json
import math
import re
from typing import Callable

from wattbench.core.errors import UserError
from wattbench.telemetry import hwmon, jetson, rapl
from wattbench.telemetry.base import BOUNDARIES, Sensor
from wattbench.telemetry.amd import AmdSensor
from wattbench.telemetry.const import ConstSensor
from wattbench.telemetry.estimate import CpuEstimateSensor
from wattbench.telemetry.external import CommandSensor, FileSensor
from wattbench.telemetry.ipmi import IpmiSensor
from wattbench.telemetry.nvidia_smi import NvidiaSmiSensor
from wattbench.telemetry.nvml import NvmlSensor
from wattbench.telemetry.prometheus import DcgmSensor, PromQuerySensor
from wattbench.telemetry.redfish import RedfishSensor

FORMS = [
    "nvml", "nvml:0,1", "nvml:0,samples=off",
    "nvidia-smi", "nvidia-smi:0,1,interval_ms=100", "nvidia-smi:oneshot",
    "rapl", "rapl:root=/sys/class/powercap", "rapl:package,dram",
    "ipmi", "ipmi:lan=HOST,user=USER[,password_file=FILE]",
    "redfish:https://BMC[,chassis=ID][,insecure][,ca=FILE][,creds=FILE]",
    "dcgm:http://HOST:9400/metrics[,gpu=0][,Hostname=NODE][,boundary=accelerator]",
    "prom:http://PROM:9090,query=EXPR[,boundary=node]",
    "jetson", "jetson:root=PATH",
    "hwmon", "hwmon:name=ina226,channel=power1,boundary=node[,max_uj=N][,root=PATH]",
    "amd", "amd:0,1",
    "cmd:/path/prog,arg1,arg2[,boundary=wall]", 'cmd:["/path/prog","arg1"]',
    "file:PATH[,boundary=wall]",
    "const:BOUNDARY=WATTS (e.g. const:node=700)",
    "estimate:cpu[,tdp=W][,idle=W]",
]
# how to give a run without energy a meter, in one phrase (the answer line of such a run, the HTML)
SENSOR_FIX = "--sensor const:node=WATTS (a wall meter's reading), nvml, rapl, ipmi or estimate:cpu (a model)"


def _bad(spec: str, why: str) -> UserError:
    return UserError(f"bad --sensor {spec!r}: {why}; accepted forms: {' | '.join(FORMS)}")


def _split(args: str) -> tuple[list[str], dict[str, str]]:
    pos, opts = [], {}
    for tok in (t.strip() for t in args.split(",")) if args else []:
        if not tok:
            continue
        if "=" in tok and re.match(r"^[A-Za-z_][A-Za-z0-9_.-]*=", tok):
            k, v = tok.split("=", 1)
            opts[k] = v
        else:
            pos.append(tok)
    return pos, opts


def _num(spec: str, key: str, v: str, positive: bool = True) -> float:
    try:
        x = float(v)
    except ValueError:
        raise _bad(spec, f"{key}={v!r} is not a number") from None
    if positive and not x > 0 or x != x:
        raise _bad(spec, f"{key} must be > 0")
    if math.isinf(x):  # ``inf``, or ``1e400`` that reads as it: no meter reads it, no sum survives it
        raise _bad(spec, f"{key}={v} is not a finite number")
    return x


def _indices(spec: str, items: list[str]) -> list[int] | None:
    if not items:
        return None
    try:
        out = [int(x) for x in items]
    except ValueError:
        raise _bad(spec, f"GPU indices must be integers, got {','.join(items)}") from None
    if any(i < 0 for i in out):
        raise _bad(spec, "GPU indices must be >= 0")
    return out


def _boundary(spec: str, b: str) -> str:
    if b not in BOUNDARIES:
        raise _bad(spec, f"unknown boundary {b!r} (one of {', '.join(BOUNDARIES)})")
    return b


def _unknown(spec: str, opts: dict[str, str], allowed: set[str]) -> None:
    extra = sorted(set(opts) - allowed - {"interval"})
    if extra:
        raise _bad(spec, f"unknown option {extra[0]!r}")


def parse_sensor_spec(spec: str) -> Sensor:
    """Build the sensor a spec names (not opened) with its kind's builder (``SENSOR_KINDS``). Raise
    UserError for a bad spec."""
    s = (spec or "").strip()
    if not s:
        raise _bad(spec, "empty")
    kind, _, args = s.partition(":")
    kind = kind.strip().lower()
    if kind not in KINDS:
        raise _bad(spec, f"unknown sensor kind {kind!r}")
    return SENSOR_KINDS[kind](s, args)


# ------------------------------------------------------------ one builder per kind
# A builder takes the spec (for its error lines), the positional items and the key=value options
# (``interval`` is applied after it) and returns the sensor, not opened.


def _nvml(spec: str, pos: list[str], opts: dict[str, str]) -> Sensor:
    """``nvml[:0,1][,samples=off][,aux=SECONDS]``."""
    _unknown(spec, opts, {"samples", "aux"})
    samples = opts.get("samples", "on").lower() not in ("off", "0", "false", "no")
    aux = _num(spec, "aux", opts["aux"]) if "aux" in opts else 1.0
    return NvmlSensor(indices=_indices(spec, pos), samples=samples, aux_every_s=aux)


def _nvidia_smi(spec: str, pos: list[str], opts: dict[str, str]) -> Sensor:
    """``nvidia-smi[:0,1][,oneshot][,interval_ms=N]``."""
    _unknown(spec, opts, {"interval_ms"})
    oneshot = "oneshot" in pos
    pos = [p for p in pos if p != "oneshot"]
    ms = int(_num(spec, "interval_ms", opts["interval_ms"])) if "interval_ms" in opts else 100
    return NvidiaSmiSensor(indices=_indices(spec, pos), interval_ms=ms, stream=not oneshot)


def _rapl(spec: str, pos: list[str], opts: dict[str, str]) -> Sensor:
    """``rapl[:package,dram][,root=PATH]``."""
    _unknown(spec, opts, {"root"})
    return rapl.RaplSensor(root=opts.get("root", rapl.DEFAULT_ROOT), domains=pos or None)


def _ipmi(spec: str, pos: list[str], opts: dict[str, str]) -> Sensor:
    """``ipmi[:lan=HOST,user=USER[,password_file=FILE][,interface=I]]`` (the local BMC without lan=)."""
    _unknown(spec, opts, {"lan", "host", "user", "password_file", "interface"})
    if pos:
        raise _bad(spec, f"unexpected {pos[0]!r}")
    host = opts.get("lan") or opts.get("host")
    if ("user" in opts or "password_file" in opts) and not host:
        raise _bad(spec, "user/password_file need lan=HOST")
    return IpmiSensor(host=host, user=opts.get("user"), password_file=opts.get("password_file"),
                      interface=opts.get("interface", "lanplus"))


def _redfish(spec: str, pos: list[str], opts: dict[str, str]) -> Sensor:
    """``redfish:URL[,chassis=ID][,insecure][,ca=FILE][,creds=FILE]``."""
    _unknown(spec, opts, {"chassis", "ca", "creds"})
    flags = {p for p in pos if p in ("insecure",)}
    urls = [p for p in pos if p not in flags]
    if len(urls) != 1:
        raise _bad(spec, "give the BMC's URL, e.g. redfish:https://10.0.0.5")
    return RedfishSensor(urls[0], chassis=opts.get("chassis"), verify_tls="insecure" not in flags,
                         ca_file=opts.get("ca"), cred_file=opts.get("creds"))


def _dcgm(spec: str, pos: list[str], opts: dict[str, str]) -> Sensor:
    """``dcgm:URL[,LABEL=VALUE…][,boundary=B]``: any other option is a label matcher."""
    if len(pos) != 1 or not pos[0].startswith(("http://", "https://")):
        raise _bad(spec, "give the exporter's URL, e.g. dcgm:http://host:9400/metrics")
    url = pos[0] if "/" in pos[0].split("://", 1)[1] else pos[0] + "/metrics"
    boundary = _boundary(spec, opts.pop("boundary", "accelerator"))
    opts.pop("interval", None)
    matchers = {k: v.strip('"') for k, v in opts.items()}
    return DcgmSensor(url, matchers=matchers, boundary=boundary)


def _jetson(spec: str, pos: list[str], opts: dict[str, str]) -> Sensor:
    """``jetson[:root=PATH]``."""
    _unknown(spec, opts, {"root"})
    return jetson.JetsonSensor(root=opts.get("root", jetson.DEFAULT_ROOT))


def _amd(spec: str, pos: list[str], opts: dict[str, str]) -> Sensor:
    """``amd[:0,1]``."""
    _unknown(spec, opts, set())
    return AmdSensor(indices=_indices(spec, pos))


def _file(spec: str, pos: list[str], opts: dict[str, str]) -> Sensor:
    """``file:PATH[,boundary=B]`` (default boundary: wall)."""
    _unknown(spec, opts, {"boundary"})
    if len(pos) != 1:
        raise _bad(spec, "give one file path, e.g. file:/var/log/pdu.csv")
    return FileSensor(pos[0], boundary=_boundary(spec, opts.get("boundary", "wall")))


def _const(spec: str, pos: list[str], opts: dict[str, str]) -> Sensor:
    """``const:BOUNDARY=WATTS``: a declared figure."""
    decl = {k: v for k, v in opts.items() if k != "interval"}
    if pos or len(decl) != 1:
        raise _bad(spec, "give exactly one BOUNDARY=WATTS, e.g. const:node=700")
    ((b, w),) = decl.items()
    watts = _num(spec, b, w, positive=False)
    if watts < 0:
        raise _bad(spec, f"{b}={w}: watts must be >= 0")
    return ConstSensor(_boundary(spec, b), watts)


def _estimate(spec: str, pos: list[str], opts: dict[str, str]) -> Sensor:
    """``estimate:cpu[,tdp=W][,idle=W][,uncertainty=PCT]``: a model, not a meter."""
    _unknown(spec, opts, {"tdp", "idle", "uncertainty"})
    if pos != ["cpu"]:
        raise _bad(spec, "only estimate:cpu exists")
    return CpuEstimateSensor(
        tdp_w=_num(spec, "tdp", opts["tdp"]) if "tdp" in opts else None,
        idle_w=_num(spec, "idle", opts["idle"], positive=False) if "idle" in opts else None,
        uncertainty_pct=_num(spec, "uncertainty", opts["uncertainty"]) if "uncertainty" in opts else 30.0,
    )


def _hwmon(spec: str, pos: list[str], opts: dict[str, str]) -> Sensor:
    """``hwmon[:NAME][,name=NAME][,channel=STEM|LABEL][,boundary=B][,max_uj=N][,root=PATH]``."""
    _unknown(spec, opts, {"name", "channel", "boundary", "max_uj", "root"})
    if len(pos) > 1 or (pos and "name" in opts):
        raise _bad(spec, "give one device name, e.g. hwmon:name=ina226")
    chip = opts.get("name") or (pos[0] if pos else None)
    for k in ("name", "channel", "root"):
        if k in opts and not opts[k].strip():
            raise _bad(spec, f"{k}= is empty")
    boundary = _boundary(spec, opts["boundary"]) if "boundary" in opts else None
    max_uj = _num(spec, "max_uj", opts["max_uj"]) if "max_uj" in opts else None
    return hwmon.HwmonSensor(root=opts.get("root", hwmon.DEFAULT_ROOT), chip=chip, channel=opts.get("channel"),
                       boundary=boundary, max_uj=max_uj)


def _tail_opts(spec: str, tokens: list[str], keys: set[str]) -> tuple[list[str], dict[str, str]]:
    """Peel trailing ``key=value`` tokens whose key is in ``keys``."""
    opts: dict[str, str] = {}
    while tokens and re.match(r"^(%s)=" % "|".join(map(re.escape, sorted(keys))), tokens[-1].strip()):
        k, v = tokens.pop().strip().split("=", 1)
        opts[k] = v
    return tokens, opts


def _cmd(spec: str, args: str) -> Sensor:
    a = args.strip()
    opts: dict[str, str] = {}
    if a.startswith("["):
        try:
            argv = json.loads(a)
        except json.JSONDecodeError as e:
            raise _bad(spec, f"the JSON list does not parse ({e.msg})") from None
        if not isinstance(argv, list) or not all(isinstance(x, str) for x in argv):
            raise _bad(spec, "the JSON form must be a list of strings")
    else:
        argv, opts = _tail_opts(spec, a.split(",") if a else [], {"boundary", "interval", "timeout"})
        argv = [x for x in argv if x != ""]
    if not argv:
        raise _bad(spec, "give the program to run")
    s = CommandSensor(argv, boundary=_boundary(spec, opts.get("boundary", "wall")),
                      timeout_s=_num(spec, "timeout", opts["timeout"]) if "timeout" in opts else 5.0)
    if "interval" in opts:
        s.poll_interval_s = _num(spec, "interval", opts["interval"])
    return s


def _prom(spec: str, args: str) -> Sensor:
    tokens = args.split(",") if args else []
    if not tokens or not tokens[0].strip().startswith(("http://", "https://")):
        raise _bad(spec, "give the Prometheus server's URL first, e.g. prom:http://prom:9090,query=EXPR")
    url = tokens.pop(0).strip()
    rest, opts = _tail_opts(spec, tokens, {"boundary", "interval"})
    joined = ",".join(rest)
    if not joined.startswith("query="):
        raise _bad(spec, "give query=EXPR (a PromQL expression yielding watts)")
    query = joined[len("query="):]
    if not query.strip():
        raise _bad(spec, "the query is empty")
    s = PromQuerySensor(url, query, boundary=_boundary(spec, opts.get("boundary", "node")))
    if "interval" in opts:
        s.poll_interval_s = _num(spec, "interval", opts["interval"])
    return s


def _items(build: Callable[[str, list[str], dict[str, str]], Sensor]) -> Callable[[str, str], Sensor]:
    """The builder of a comma-list kind as a builder from its arguments: the items and options
    split, ``interval=`` read first (its error before the kind's) and applied to the sensor built."""
    def from_args(spec: str, args: str) -> Sensor:
        pos, opts = _split(args)
        interval = _num(spec, "interval", opts["interval"]) if "interval" in opts else None
        sensor = build(spec, pos, opts)
        if interval is not None:
            sensor.poll_interval_s = interval
        return sensor

    return from_args


# The registry: each kind with its builder from (spec, arguments), in the order KINDS lists them.
# cmd and prom read their arguments themselves (a command line, a PromQL expression: not a plain
# comma list) and apply interval= themselves.
SENSOR_KINDS: dict[str, Callable[[str, str], Sensor]] = {
    "nvml": _items(_nvml), "nvidia-smi": _items(_nvidia_smi), "rapl": _items(_rapl), "ipmi": _items(_ipmi),
    "redfish": _items(_redfish), "dcgm": _items(_dcgm), "prom": _prom, "jetson": _items(_jetson),
    "hwmon": _items(_hwmon), "amd": _items(_amd), "cmd": _cmd, "file": _items(_file), "const": _items(_const),
    "estimate": _items(_estimate),
}
KINDS = list(SENSOR_KINDS)
