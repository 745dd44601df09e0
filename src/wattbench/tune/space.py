"""The search space of ``wattbench tune``: named axes, their values, conditions between them.

An *axis* is an engine argument (``max-num-seqs``, ``cb-use-cuda-graph`` …) or a GPU setting
(``power-limit`` in W, ``sm-clocks`` in MHz, see :mod:`wattbench.tune.gpu`) with a list of values.
A *configuration* gives each active axis one value. The value ``default`` (or ``null``) leaves the
argument out: the engine's own default. ``true``/``false`` are switches: ``true`` gives ``--NAME``,
``false`` gives ``--no-NAME`` where the engine has that form, else nothing.

Sources, in order of use:

- ``--axis NAME=V1,V2,…`` (repeatable);
- a YAML/JSON space file::

      axes:
        max-num-seqs: [64, 128, 256]
        max-num-batched-tokens: {min: 2048, max: 16384, factor: 2}   # 2048, 4096, 8192, 16384
        cb-max-memory-percent: {min: 0.3, max: 0.9, step: 0.2}      # 0.3, 0.5, 0.7, 0.9
        cb-max-batch-tokens: {values: [2048, 8192], when: {cb-use-cuda-graph: true}}
        cb-use-cuda-graph: [false, true]

  ``when`` makes an axis active only in configurations where the named axes take one of the given
  values (a value or a list); elsewhere the argument is left out;
- the built-in space of the engine (:data:`BUILTIN_SPACES`) when neither is given.

Configurations are the cartesian product of the active axes, deduplicated after conditions; the
order is deterministic (axes in the order given, values in the order given).
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Mapping, Sequence
from typing import Any, TypeGuard

from wattbench.core.secret_scope import clip
from wattbench.core.errors import UserError
from wattbench.core.errors import not_a_file_reason
from wattbench.core.schema.recorded_config import AxisValue  # one value of an axis (or DEFAULT)
from wattbench.results.jsonfile import loads_bounded, read_bounded
from wattbench.results.tune import SpaceRecord

GPU_AXES = ("power-limit", "sm-clocks")

# What a space may hold, checked before anything is enumerated (a space is tried one engine start per
# configuration: even the largest cap here is weeks of tuning). A million-value axis, or 30 axes of
# 10 values, hung the tune for minutes while it listed them; a YAML file of nested aliases (a
# "billion laughs") expanded to 666 MB.
MAX_AXIS_VALUES = 1000  # values of one axis (a range: its count, computed before it is listed)
MAX_CONFIGURATIONS = 10_000  # the product of the axes' value counts
MAX_SPACE_FILE_BYTES = 64 << 10  # a space file is a few lines; the pure-Python safe loader reads 64 KiB in ~1 s
MAX_YAML_ALIASES = 64  # a space file may reuse a value with an anchor; not build one from thousands
MAX_SPACE_NODES = 20_000  # values, lists and mappings of the file once its aliases are expanded (5x the written cap)
MAX_VALUE_CHARS = 256
MAX_SPACE_SCALARS = 4000  # values written in the file (the loader is pure Python: ~1 s for 64 KiB of them)
MAX_SPACE_DEPTH = 16  # axes: NAME: {when: {A: [..]}} is 4 deep
DEFAULT = "default"  # the value that leaves an argument out

# Engine arguments worth trying, per engine. Switches name their "off" form where the engine has one.
BUILTIN_SPACES: dict[str, dict[str, list[AxisValue]]] = {
    "vllm": {
        "max-num-seqs": [64, 128, 256],
        "max-num-batched-tokens": [2048, 8192, 16384],
        "enable-chunked-prefill": [True, False],
        "enforce-eager": [False, True],
    },
    "transformers": {
        "cb-use-cuda-graph": [False, True],
        "cb-max-batch-tokens": [DEFAULT, 2048, 8192],
        "cb-max-memory-percent": [DEFAULT, 0.5, 0.8],
        "cb-block-size": [DEFAULT, 64],
    },
    "sglang": {
        "max-running-requests": [64, 128, 256],
        "chunked-prefill-size": [2048, 8192],
        "disable-cuda-graph": [False, True],
        "mem-fraction-static": [DEFAULT, 0.8],
    },
    "llamacpp": {
        "parallel": [4, 8, 16],
        "batch-size": [512, 2048],
        "ubatch-size": [256, 512],
    },
}
# switches whose "off" form is --no-NAME (argparse BooleanOptionalAction in the engine)
NEGATABLE = {"cb-use-cuda-graph", "enable-chunked-prefill"}


@dataclass
class Axis:
    name: str
    values: list[AxisValue]
    # axis name -> the values of that (earlier) axis under which this one is tried; load_space_file
    # checks each is one of that axis's values
    when: dict[str, list[object]] = field(default_factory=dict)

    @property
    def is_gpu(self) -> bool:
        return self.name in GPU_AXES

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"values": list(self.values)}
        if self.when:
            d["when"] = {k: list(v) for k, v in self.when.items()}
        return d


@dataclass
class Space:
    axes: list[Axis]
    source: str = "builtin"

    def names(self) -> list[str]:
        return [a.name for a in self.axes]

    def record(self) -> SpaceRecord:
        """The space as ``tune.json`` keeps it (``TuneResult.space``)."""
        return SpaceRecord.model_validate({"source": self.source, "axes": {a.name: a.to_dict() for a in self.axes}})

    def active(self, axis: Axis, config: Mapping[str, Any]) -> bool:
        return all(config.get(k) in vs for k, vs in axis.when.items())

    def resolve(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """A configuration with inactive axes (and ``default`` values) dropped."""
        out: dict[str, Any] = {}
        for a in self.axes:  # conditions only refer to axes before them (checked at load)
            if a.name in raw and self.active(a, out | {k: raw[k] for k in raw if k not in out}):
                v = raw[a.name]
                if v is not None and v != DEFAULT:
                    out[a.name] = v
        return out

    def configurations(self) -> list[dict[str, Any]]:
        """Every distinct configuration (cartesian product, conditions applied), in a fixed order."""
        seen, out = set(), []
        for combo in itertools.product(*[a.values for a in self.axes]):
            cfg = self.resolve(dict(zip(self.names(), combo)))
            key = config_key(cfg)
            if key not in seen:
                seen.add(key)
                out.append(cfg)
        return out

    def size(self) -> int:
        return len(self.configurations())


def check_size(space: Space, where: str) -> None:
    """One line when the space holds more configurations than a tune can try, counted by
    multiplying the axes' value counts — before any is listed."""
    n = 1
    for a in space.axes:
        n *= len(a.values)
        if n > MAX_CONFIGURATIONS:
            total = math.prod(len(x.values) for x in space.axes)
            size = f"{total:,}" if total < 10**12 else f"about 1e{len(str(total)) - 1}"
            raise UserError(f"{where}: {len(space.axes)} axes of {', '.join(str(len(x.values)) for x in space.axes[:6])}"
                            f"{', …' if len(space.axes) > 6 else ''} values make {size} configurations, more than "
                            f"the {MAX_CONFIGURATIONS:,} a tune tries; use fewer axes or values")


def config_key(config: Mapping[str, Any]) -> str:
    """A stable identity of a configuration (sorted JSON)."""
    return json.dumps({k: config[k] for k in sorted(config)}, sort_keys=True, default=str)


def parse_value(text: str) -> AxisValue:
    t = text.strip()
    low = t.lower()
    if low in ("true", "on", "yes"):
        return True
    if low in ("false", "off", "no"):
        return False
    if low in (DEFAULT, "null", "none"):
        return DEFAULT
    try:
        return int(t)
    except ValueError:
        pass
    try:
        v = float(t)
        if math.isfinite(v):
            return v
    except ValueError:
        pass
    return t


def parse_axis(text: str) -> Axis:
    """``NAME=V1,V2,…`` -> Axis. NAME without leading dashes."""
    if "=" not in text:
        raise UserError(f"--axis {text!r}: expected NAME=V1,V2,… e.g. --axis max-num-seqs=64,128,256")
    name, vals = text.split("=", 1)
    name = name.strip().lstrip("-")
    if vals.count(",") >= MAX_AXIS_VALUES:
        raise UserError(f"--axis {name[:40]}: more than {MAX_AXIS_VALUES} values; use fewer")
    values = [parse_value(v) for v in vals.split(",") if v.strip()]
    return _axis(name, values, {}, f"--axis {text!r}")


def _axis(name: str, values: Sequence[object], when: Mapping[str, object], where: str) -> Axis:
    if not name or not all(c.isalnum() or c in "-_" for c in name):
        raise UserError(f"{where}: axis name {_short(name)} must be an engine flag name like max-num-seqs")
    if not values:
        raise UserError(f"{where}: axis {name} has no values")
    if len(values) > MAX_AXIS_VALUES:
        raise UserError(f"{where}: axis {name} has {len(values):,} values, more than {MAX_AXIS_VALUES}; use fewer")
    vals: list[AxisValue] = []
    seen: set[tuple[bool, AxisValue]] = set()
    for given in values:
        v = DEFAULT if given is None else given
        if isinstance(v, float) and not math.isfinite(v):
            raise UserError(f"{where}: axis {name}: value {v!r} is not a finite number")
        if not isinstance(v, (str, int, float, bool)):
            raise UserError(f"{where}: axis {name}: value {_short(v)} is not a number, a word, true/false or default")
        if isinstance(v, str) and len(v) > MAX_VALUE_CHARS:
            raise UserError(f"{where}: axis {name}: a value of {len(v):,} characters (at most {MAX_VALUE_CHARS})")
        key = (type(v) is bool, v)
        if key not in seen:
            seen.add(key)
            vals.append(v)
    if name in GPU_AXES:
        for v in vals:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
                raise UserError(f"{where}: {name} values must be positive numbers ({'W' if name == 'power-limit' else 'MHz'}), got {v!r}")
    return Axis(name, vals, {k: (list(w) if isinstance(w, list) else [w]) for k, w in when.items()})


def _number(v: object) -> TypeGuard[int | float]:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _range(name: str, spec: Mapping[str, object], where: str) -> list[AxisValue]:
    """The values of ``{min, max, step}`` or ``{min, max, factor}``: finite, ordered, at most
    ``MAX_AXIS_VALUES`` of them (counted before they are listed)."""
    lo, hi = spec.get("min"), spec.get("max")
    if not _number(lo) or not _number(hi) or hi < lo:
        raise UserError(f"{where}: axis {name}: a range needs finite numbers min <= max, got min={_short(lo)} "
                        f"max={_short(hi)}")
    if "factor" in spec:
        f = spec["factor"]
        if not _number(f) or f <= 1 or lo <= 0:
            raise UserError(f"{where}: axis {name}: factor must be a finite number > 1 with min > 0")
        count = (math.log(hi) - math.log(lo)) / math.log(f)
        n = int(math.floor(count + 1e-9)) + 1 if math.isfinite(count) else MAX_AXIS_VALUES + 1
        if n > MAX_AXIS_VALUES:
            raise UserError(f"{where}: axis {name}: range gives {n:,} values (at most {MAX_AXIS_VALUES}); "
                            "use a larger factor")
        out: list[AxisValue] = []
        v = lo
        while v <= hi * (1 + 1e-9) and len(out) < n:
            out.append(int(round(v)) if isinstance(lo, int) and isinstance(f, int) else v)
            v *= f
        return out
    step = spec.get("step")
    if not _number(step) or step <= 0:
        raise UserError(f"{where}: axis {name}: a range needs a finite step > 0 or factor > 1")
    count = (hi - lo) / step
    if not math.isfinite(count) or count + 1 > MAX_AXIS_VALUES:
        raise UserError(f"{where}: axis {name}: range gives more than {MAX_AXIS_VALUES} values; use a coarser step")
    n = int(math.floor(count + 1e-9)) + 1
    ints = all(isinstance(x, int) for x in (lo, hi, step))
    return [lo + i * step if ints else round(lo + i * step, 10) for i in range(n)]


def _short(v: object) -> str:
    return clip(repr(v), 61, "…")


def _parse_space_text(p: Path) -> Any:
    """The space file's data: at most ``MAX_SPACE_FILE_BYTES``, UTF-8, JSON (nesting capped) or
    YAML through the safe loader with at most ``MAX_YAML_ALIASES`` aliases and at most
    ``MAX_SPACE_NODES`` values once they are expanded; one line otherwise."""
    try:
        raw = read_bounded(p, MAX_SPACE_FILE_BYTES)
    except OSError as e:
        raise UserError(f"space file {p}: cannot be read ({e.strerror or e})") from None
    except ValueError as e:
        raise UserError(f"space file {p}: {e}; a space file is a few lines") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError(f"space file {p}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    try:
        if p.suffix.lower() == ".json":
            data = loads_bounded(text)
        else:
            import yaml  # type: ignore[import-untyped]  # PyYAML ships no stubs (types-PyYAML is not a dependency)

            loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: fast, and refuses deep nesting
            aliases = depth = scalars = 0
            for event in yaml.parse(text, Loader=loader):  # events only: nothing is built yet
                if isinstance(event, yaml.ScalarEvent):
                    scalars += 1
                    if scalars > MAX_SPACE_SCALARS:
                        raise UserError(f"space file {p}: more than {MAX_SPACE_SCALARS:,} values; a space is a few "
                                        "axes of a few values")
                elif isinstance(event, yaml.AliasEvent):
                    aliases += 1
                    if aliases > MAX_YAML_ALIASES:
                        raise UserError(f"space file {p}: more than {MAX_YAML_ALIASES} YAML aliases (*name); "
                                        "write the values out")
                elif isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                    depth += 1
                    if depth > MAX_SPACE_DEPTH:
                        raise UserError(f"space file {p}: nested more than {MAX_SPACE_DEPTH} levels deep")
                elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                    depth -= 1
            data = yaml.safe_load(text)
    except UserError:
        raise
    except Exception as e:  # noqa: BLE001 - any parse error is bad input
        msg = clip(" ".join(str(e).split()), 200) or type(e).__name__
        raise UserError(f"space file {p}: cannot parse ({msg})") from None
    _check_expanded_size(data, p)
    return data


def _check_expanded_size(data: Any, p: Path) -> None:
    """Count the file's values as the loader expanded them (an alias counted each time it is
    used), stopping at the cap: a document of nested aliases is refused without being walked."""
    stack, n = [data], 0
    while stack:
        x = stack.pop()
        n += 1
        if n > MAX_SPACE_NODES:
            raise UserError(f"space file {p}: it expands to more than {MAX_SPACE_NODES:,} values (YAML aliases?); "
                            "a space is a few axes of a few values")
        if isinstance(x, Mapping):
            stack.extend(x.keys())
            stack.extend(x.values())
        elif isinstance(x, (list, tuple)):
            stack.extend(x)


def load_space_file(path: str | Path) -> Space:
    """A YAML/JSON space file (see the module docstring)."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise UserError(f"space file {p}: {not_a_file_reason(p)}")
    data = _parse_space_text(p)
    if not isinstance(data, Mapping) or not isinstance(data.get("axes"), Mapping) or not data["axes"]:
        raise UserError(f"space file {p}: expected a mapping with 'axes: {{NAME: [values] | {{min, max, step}}}}'")
    axes: list[Axis] = []
    for name, spec in data["axes"].items():
        where = f"space file {p}"
        when: dict[str, object] = {}
        if isinstance(spec, Mapping):
            w = spec.get("when") or {}
            if not isinstance(w, Mapping):
                raise UserError(f"{where}: axis {_short(name)}: 'when' must map axis names to values")
            when = {str(k): v for k, v in w.items()}
            if "values" in spec:
                if not isinstance(spec["values"], list):
                    raise UserError(f"{where}: axis {_short(name)}: 'values' must be a list")
                values = list(spec["values"])
            else:
                values = _range(str(name), spec, where)
        elif isinstance(spec, list):
            values = spec
        else:
            values = [spec]
        axes.append(_axis(str(name), values, when, where))
    _check_conditions(axes, str(p))
    space = Space(axes, source=str(p))
    check_size(space, f"space file {p}")
    return space


def _check_conditions(axes: list[Axis], where: str) -> None:
    seen: dict[str, Axis] = {}
    for a in axes:
        for k, vs in a.when.items():
            if k not in seen:
                raise UserError(f"{where}: axis {a.name} has a condition on {k!r}, which is not an axis listed before it")
            for v in vs:
                if v not in seen[k].values:
                    raise UserError(f"{where}: axis {a.name}: condition {k}={v!r} is not one of {k}'s values")
        seen[a.name] = a


def build_space(engine: str, axes: list[str] | None = None, space_file: str | None = None,
                power_limits_w: list[float] | None = None, sm_clocks_mhz: list[int] | None = None) -> Space:
    """The space from ``--axis``/``--space``/the built-in one, plus the GPU axes."""
    if axes and space_file:
        raise UserError("give --axis or --space, not both")
    if space_file:
        space = load_space_file(space_file)
    elif axes:
        parsed = [parse_axis(a) for a in axes]
        names = [a.name for a in parsed]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise UserError(f"--axis {sorted(dup)[0]} given twice; list all its values in one --axis")
        space = Space(parsed, source="--axis")
    else:
        if engine not in BUILTIN_SPACES:
            raise UserError(f"no built-in space for engine {engine!r}; give --axis NAME=V1,V2")
        space = Space([Axis(n, list(v)) for n, v in BUILTIN_SPACES[engine].items()], source=f"builtin:{engine}")
    for name, vals in (("power-limit", power_limits_w), ("sm-clocks", sm_clocks_mhz)):
        if vals:
            if name in space.names():
                raise UserError(f"{name} given both as an axis and as --{name}; use one")
            space.axes.append(_axis(name, list(vals), {}, f"--{name}"))
    check_size(space, "--space" if space_file else "--axis" if axes else "the built-in space")
    return space


def engine_args(config: Mapping[str, Any]) -> list[str]:
    """The engine argv for a configuration's engine axes (GPU axes excluded)."""
    out: list[str] = []
    for name, v in config.items():
        if name in GPU_AXES or v is None or v == DEFAULT:
            continue
        flag = f"--{name}"
        if v is True:
            out.append(flag)
        elif v is False:
            if name in NEGATABLE:
                out.append(f"--no-{name}")
        else:
            out += [flag, _fmt(v)]
    return out


def gpu_settings(config: Mapping[str, Any]) -> dict[str, float]:
    """The configuration's GPU axes: ``{"power_limit_w": …, "sm_clock_mhz": …}`` (absent = untouched)."""
    out = {}
    if config.get("power-limit") not in (None, DEFAULT):
        out["power_limit_w"] = float(config["power-limit"])
    if config.get("sm-clocks") not in (None, DEFAULT):
        out["sm_clock_mhz"] = int(config["sm-clocks"])
    return out


def _fmt(v: object) -> str:
    return repr(v) if isinstance(v, float) else str(v)


def describe(config: Mapping[str, Any]) -> str:
    """A short label: ``max-num-seqs=128 enforce-eager`` ('engine defaults' when empty)."""
    if not config:
        return "engine defaults"
    parts = []
    for k, v in config.items():
        parts.append(k if v is True else f"no-{k}" if v is False else f"{k}={v}")
    return " ".join(parts)
