"""Rack density: how many nodes fit a rack's power budget, its cooling class, and what the rack delivers.

Node power is measured where a run exists (p95/p99 at a named boundary, see
``wattbench.planning.measured``) and nameplate otherwise (a ``NodeSpec``: the node's own power, or
accelerator TDP/declared watts × accelerators + host overhead). Then

    usable_w       = rack_kw × 1000 × (1 − headroom_pct / 100)
    nodes_per_rack = floor(usable_w / node_power_w)
    rack_power_w   = nodes_per_rack × node_power_w

Cooling class: ``liquid`` when the populated rack draws more than ``air_max_rack_kw`` or one
accelerator draws more than ``air_max_accelerator_w``; ``air`` otherwise. Defaults (20 kW per rack,
1,000 W per accelerator) and their rationale are in docs/planning.md; both are parameters.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence
from pathlib import Path

from wattbench.config.plan import DEFAULT_AIR_MAX_ACCELERATOR_W, DEFAULT_AIR_MAX_RACK_KW, DEFAULT_PERCENTILE
from wattbench.core.errors import UserError
from wattbench.planning.hardware import HardwareTable, find_gpu
from wattbench.planning.measured import MeasuredNode, measured_node
from wattbench.core.schema import Result
from wattbench.planning.measured import load_run_or_tune



@dataclass(frozen=True)
class CoolingThresholds:
    """Air cooling is assumed up to both limits (inclusive); above either, liquid."""

    air_max_rack_kw: float = DEFAULT_AIR_MAX_RACK_KW
    air_max_accelerator_w: float = DEFAULT_AIR_MAX_ACCELERATOR_W

    def __post_init__(self) -> None:
        if self.air_max_rack_kw <= 0 or self.air_max_accelerator_w <= 0:
            raise UserError("cooling thresholds must be positive (kW per rack, W per accelerator)")


@dataclass
class NodeSpec:
    """A node without a run: nameplate or declared figures.

    Give ``power_w`` (the whole node), or ``accelerator_w`` × ``gpus`` (+ the host overhead), or
    ``gpu`` (a hardware-table name: its TDP is the accelerator watts) × ``gpus``.
    """

    name: str
    power_w: float | None = None
    gpus: int | None = None
    accelerator_w: float | None = None
    gpu: str | None = None
    host_overhead_w: float | None = None
    output_tokens_per_s: float | None = None
    goodput_output_tokens_per_s: float | None = None


SPEC_KEYS = {
    "name": str,
    "power_w": float,
    "gpus": int,
    "accelerator_w": float,
    "gpu": str,
    "host_overhead_w": float,
    "tokens_per_s": float,
    "output_tokens_per_s": float,
    "goodput_tokens_per_s": float,
    "goodput_output_tokens_per_s": float,
}


def parse_node_spec(text: str) -> NodeSpec:
    """``name=X,power_w=1400,gpus=4,tokens_per_s=…`` -> NodeSpec (tokens_per_s = output tokens/s)."""
    fields: dict[str, Any] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        if "=" not in item:
            raise UserError(f"node spec {text!r}: {item!r} is not key=value (keys: {', '.join(SPEC_KEYS)})")
        k, v = (s.strip() for s in item.split("=", 1))
        if k not in SPEC_KEYS:
            raise UserError(f"node spec {text!r}: unknown key {k!r}; use {', '.join(SPEC_KEYS)}")
        try:
            fields[k] = SPEC_KEYS[k](v)
        except ValueError:
            raise UserError(f"node spec {text!r}: {k}={v!r} is not a valid {SPEC_KEYS[k].__name__}") from None
    if "tokens_per_s" in fields:
        fields["output_tokens_per_s"] = fields.pop("tokens_per_s")
    if "goodput_tokens_per_s" in fields:
        fields["goodput_output_tokens_per_s"] = fields.pop("goodput_tokens_per_s")
    fields.setdefault("name", text)
    return NodeSpec(**fields)


@dataclass
class MeasuredNodeRef:
    """A measured run to plan with, and how to read it (see ``measured_node``)."""

    result: Result
    level: int | None = None
    gpus_per_node: int | None = None
    name: str | None = None
    host_overhead_w: float | None = None


@dataclass
class RackRow:
    name: str
    node_power_w: float
    power_source: str
    nodes_per_rack: int
    rack_power_w: float
    unused_w: float
    gpus_per_node: int | None
    gpus_per_rack: int | None
    accelerator_w: float | None
    cooling: str  # air | liquid
    cooling_reasons: list[str]
    rack_output_tokens_per_s: float | None
    rack_goodput_output_tokens_per_s: float | None
    output_tokens_per_s_per_kw: float | None
    run_id: str | None = None
    level_index: int | None = None
    level_label: str | None = None
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # information (which level of a run was read)


@dataclass
class RackPlan:
    rack_kw: float
    headroom_pct: float
    usable_w: float
    boundary: str
    percentile: str
    thresholds: CoolingThresholds
    rows: list[RackRow]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def nodes_per_rack(rack_kw: float, node_power_w: float, headroom_pct: float = 0.0, name: str = "node") -> int:
    """``floor(rack_kw × 1000 × (1 − headroom) / node_power_w)``; a rack smaller than one node is an error."""
    if rack_kw <= 0:
        raise UserError(f"rack power {rack_kw} kW must be positive")
    if not 0 <= headroom_pct < 100:
        raise UserError(f"headroom {headroom_pct}% must be at least 0 and below 100")
    if node_power_w <= 0:
        raise UserError(f"{name}: node power {node_power_w} W is not positive; give the node's power draw in W")
    usable = rack_kw * 1000.0 * (1 - headroom_pct / 100.0)
    n = math.floor(usable / node_power_w + 1e-9)
    if n < 1:
        raise UserError(
            f"{name}: the rack's usable {usable:.0f} W ({rack_kw:g} kW, {headroom_pct:g}% headroom) is smaller "
            f"than one node of {node_power_w:.0f} W; raise --rack-kw or lower the headroom"
        )
    return n


def cooling_class(
    rack_power_w: float, accelerator_w: float | None, thresholds: CoolingThresholds | None = None
) -> tuple[str, list[str]]:
    t = thresholds or CoolingThresholds()
    reasons: list[str] = []
    if rack_power_w > t.air_max_rack_kw * 1000.0:
        reasons.append(f"rack draws {rack_power_w / 1000:.1f} kW > air limit {t.air_max_rack_kw:g} kW")
    if accelerator_w is not None and accelerator_w > t.air_max_accelerator_w:
        reasons.append(f"{accelerator_w:.0f} W per accelerator > air limit {t.air_max_accelerator_w:g} W")
    if reasons:
        return "liquid", reasons
    why = [f"rack {rack_power_w / 1000:.1f} kW ≤ {t.air_max_rack_kw:g} kW"]
    if accelerator_w is not None:
        why.append(f"{accelerator_w:.0f} W per accelerator ≤ {t.air_max_accelerator_w:g} W")
    else:
        why.append("accelerator power unknown (per-accelerator limit not checked)")
    return "air", why


def _spec_node(spec: NodeSpec, host_overhead_w: float | None, hardware: HardwareTable | None) -> MeasuredNode:
    for label, v in (("power_w", spec.power_w), ("accelerator_w", spec.accelerator_w),
                     ("host_overhead_w", spec.host_overhead_w), ("tokens_per_s", spec.output_tokens_per_s),
                     ("goodput_tokens_per_s", spec.goodput_output_tokens_per_s)):
        if v is not None and v < 0:
            raise UserError(f"{spec.name}: {label}={v} is negative; power and throughput must be 0 or more")
    if spec.gpus is not None and spec.gpus < 1:
        raise UserError(f"{spec.name}: gpus={spec.gpus} must be at least 1")
    host = spec.host_overhead_w if spec.host_overhead_w is not None else (host_overhead_w or 0.0)
    if host < 0:
        raise UserError(f"{spec.name}: host overhead {host} W is negative")
    acc_w = spec.accelerator_w
    src_acc = "declared"
    if acc_w is None and spec.gpu is not None:
        acc_w = find_gpu(spec.gpu, hardware).tdp_w
        src_acc = f"nameplate TDP of {find_gpu(spec.gpu, hardware).name}"
    if spec.power_w is not None:
        power = spec.power_w
        src = "declared node power"
    elif acc_w is not None:
        gpus = spec.gpus or 1
        power = acc_w * gpus + host
        src = f"{src_acc} {acc_w:.0f} W × {gpus} + host {host:g} W"
    else:
        raise UserError(f"node spec {spec.name!r} gives no power: add power_w=, accelerator_w= or gpu=")
    return MeasuredNode(
        name=spec.name, run_id="", level_index=-1, level_label="", boundary="nameplate", percentile="",
        node_power_w=power, gpus=spec.gpus or 0, accelerator_w=acc_w, host_overhead_w=host,
        output_tokens_per_s=spec.output_tokens_per_s,
        goodput_output_tokens_per_s=spec.goodput_output_tokens_per_s, verdict="declared",
        power_source=src,
    )


def resolve_node(
    node: NodeSpec | MeasuredNodeRef | Result,
    boundary: str | None,
    percentile: str,
    host_overhead_w: float | None,
    hardware: HardwareTable | None = None,
) -> MeasuredNode:
    if isinstance(node, NodeSpec):
        return _spec_node(node, host_overhead_w, hardware)
    if isinstance(node, Result):
        node = MeasuredNodeRef(result=node)
    if isinstance(node, MeasuredNodeRef):
        return measured_node(
            node.result, level=node.level, boundary=boundary, percentile=percentile,
            gpus_per_node=node.gpus_per_node,
            host_overhead_w=node.host_overhead_w if node.host_overhead_w is not None else host_overhead_w,
            name=node.name,
        )
    raise TypeError(f"not a node: {node!r}")


def plan_rack(
    rack_kw: float,
    nodes: Sequence[NodeSpec | MeasuredNodeRef | Result],
    boundary: str | None = None,
    percentile: str = DEFAULT_PERCENTILE,
    host_overhead_w: float | None = None,
    thresholds: CoolingThresholds | None = None,
    headroom_pct: float = 0.0,
    hardware: HardwareTable | None = None,
) -> RackPlan:
    """One row per platform: node power, nodes per rack, cooling class, rack throughput and goodput."""
    if not nodes:
        raise UserError("no nodes to plan: give at least one --node RESULT or SPEC")
    if host_overhead_w is not None and host_overhead_w < 0:
        raise UserError(f"host overhead {host_overhead_w} W is negative; give 0 or more")
    t = thresholds or CoolingThresholds()
    rows: list[RackRow] = []
    usable = rack_kw * 1000.0 * (1 - headroom_pct / 100.0)
    for node in nodes:
        m = resolve_node(node, boundary, percentile, host_overhead_w, hardware)
        n = nodes_per_rack(rack_kw, m.node_power_w, headroom_pct, name=m.name)
        rack_w = n * m.node_power_w
        cls, reasons = cooling_class(rack_w, m.accelerator_w, t)
        tps = None if m.output_tokens_per_s is None else m.output_tokens_per_s * n
        good = None if m.goodput_output_tokens_per_s is None else m.goodput_output_tokens_per_s * n
        rows.append(RackRow(
            name=m.name,
            node_power_w=m.node_power_w,
            power_source=m.power_source,
            nodes_per_rack=n,
            rack_power_w=rack_w,
            unused_w=rack_kw * 1000.0 - rack_w,
            gpus_per_node=m.gpus or None,
            gpus_per_rack=(m.gpus * n) if m.gpus else None,
            accelerator_w=m.accelerator_w,
            cooling=cls,
            cooling_reasons=reasons,
            rack_output_tokens_per_s=tps,
            rack_goodput_output_tokens_per_s=good,
            output_tokens_per_s_per_kw=None if tps is None else tps / (rack_w / 1000.0),
            run_id=m.run_id or None,
            level_index=m.level_index if m.run_id else None,
            level_label=m.level_label or None,
            warnings=m.warnings,
            notes=m.notes,
        ))
    return RackPlan(rack_kw=rack_kw, headroom_pct=headroom_pct, usable_w=usable, boundary=boundary or "auto",
                    percentile=percentile, thresholds=t, rows=rows)


RUN_KEYS = {"run": str, "level": int, "gpus": int, "gpus_per_node": int, "name": str, "host_overhead_w": float}


def parse_node_arg(text: str) -> NodeSpec | MeasuredNodeRef:
    """A ``--node`` value: a run directory, ``run=DIR,level=2,gpus=8,name=X``, or a NodeSpec string."""
    t = text.strip()
    if "=" not in t or Path(t).expanduser().exists():
        return MeasuredNodeRef(result=load_run_or_tune(t))
    fields = dict(item.split("=", 1) for item in t.split(",") if "=" in item)
    if "run" not in fields:
        return parse_node_spec(t)
    kw: dict[str, Any] = {}
    for k, v in fields.items():
        k = k.strip()
        if k not in RUN_KEYS:
            raise UserError(f"--node {text!r}: unknown key {k!r} for a run; use {', '.join(RUN_KEYS)}")
        try:
            kw[k] = RUN_KEYS[k](v.strip())
        except ValueError:
            raise UserError(f"--node {text!r}: {k}={v!r} is not a valid {RUN_KEYS[k].__name__}") from None
    gpus = kw.pop("gpus", None) or kw.pop("gpus_per_node", None)
    return MeasuredNodeRef(result=load_run_or_tune(kw["run"]), level=kw.get("level"), gpus_per_node=gpus,
                           name=kw.get("name"), host_overhead_w=kw.get("host_overhead_w"))
