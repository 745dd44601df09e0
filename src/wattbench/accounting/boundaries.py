"""Per-boundary energy totals, without double counting.

Channel choice, per boundary and device (docs/accounting.md, "Boundaries"):

1. Only ``counter`` and ``power`` channels whose ``boundary`` is set take part.
2. Within a boundary only the most trustworthy method present is used: measured > declared >
   estimate. (A CPU estimate is never added to a measured RAPL figure; it is dropped with a note.)
3. Per device: a primary counter, else a primary power channel, else any counter, else any power
   channel (instant ``power`` before ``power_avg``; then the FINER update period — on an H200 the
   20 ms sample buffer integrated to within 0.2% of the counter under a bursty load where the
   100 ms instant field read 14% low (docs/validation.md); then the id). A channel that yields no
   energy in the window (no readings) falls through to the next.
4. Devices are summed (8 GPUs -> ``accelerator``). Channels of one boundary are never added to a
   boundary that contains it (``CONTAINS``): every boundary is computed from its own channels,
   except the two composites below.
5. ``host``: a measured host meter when present; otherwise ``cpu + dram`` plus a declared/estimated
   ``host`` overhead channel (``const:host=W``), method ``sum(...)``.
6. ``facility``: a facility meter when present; otherwise, when ``pue > 1``, the outermost
   boundary present among ``cluster``, ``wall``, ``node`` (measured preferred) × PUE, method ``pue``.
7. ``label`` is the least trustworthy part: measured < declared < estimate.
8. Where a device has a counter and a measured power channel, both are kept: ``cross_check`` holds
   the counter energy, the power integral and ``diff_pct = 100 × (integral − counter) / counter``
   per device and summed (``core.schema.DeviceCrossCheck``, ``CrossCheck``; None where no device has
   both); the counter remains the figure. A power channel whose coverage is below
   ``CROSS_MIN_COVERAGE`` is listed but not used to judge the counter (uncertainty, validity).

10. **Per-token figures belong to boundaries that contain the work** (``contains_work``). The devices
    doing the work are the accelerators when the window metered any (``accelerator`` or its rail
    ``accelerator_memory``), else the CPU. Tokens per kW, J/token, tokens per kWh, cost and carbon
    per token or request are computed only for a boundary that is, or contains, that device
    (``PER_TOKEN_FIGURES``); any other boundary — the HBM rail, or ``cpu``, ``dram``, ``host`` on a
    GPU server — keeps its energy and power (a part is shown with its share of a whole) and says
    why in its notes (the H200 llama.cpp run in docs/validation-data, written before the rule: 4,807
    tok/s per kW at the board, 17,159 at its HBM rail, 16,112 at the CPU estimate).
    ``withhold_outside_work`` applies the rule to a level read from an older ``result.json``.

``node`` and ``wall`` are never synthesised from their parts: a sum of metered parts misses fans,
PSU losses and the rest of the board, and would be a misleading per-kW figure.

9. ``cluster`` (logs merged from several nodes, channels carrying ``node``): a cluster meter when
   present; otherwise the sum over nodes of each node's outermost measured boundary: ``wall``,
   else ``node``, else the outermost disjoint boundaries it has (``accelerator`` for a GPU-only
   node; ``accelerator`` + ``host`` where both are metered), method ``sum(<boundaries used>)``; the notes say
   which boundary each node gave. A node whose figure is missing withholds the total.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
import numpy as np

from wattbench.accounting.counters import counter_energy
from wattbench.accounting.integrate import PowerIntegral, power_energy
from wattbench.accounting.sampling import DEFAULT_GAP_FACTOR, power_stats, sum_polylines, window_polyline
from wattbench.accounting.uncertainty import combine_pct, meter_pct, sum_pct
from wattbench.core.schema import CrossCheck, DeviceCrossCheck, FigureKey, LevelResult, PowerChannelCheck
from wattbench.telemetry.base import BOUNDARIES, CONTAINS, Channel, TelemetryLog

METHOD_RANK = {"measured": 0, "declared": 1, "estimate": 2}
# What someone buys power for: a board, a host, a server, a cluster, a wall socket, a building. The
# other boundaries are parts of one: accelerator_memory a rail of the board, cpu and dram of the host.
WHOLE_BOUNDARIES = ("accelerator", "host", "node", "cluster", "wall", "facility")
# BoundaryEnergy figures that divide by tokens or requests (rule 10: only where the work is)
PER_TOKEN_FIGURES = ("j_per_output_token", "j_per_token", "output_tokens_per_s_per_kw", "tokens_per_kwh",
                     "output_tokens_per_kwh", "cost_per_million_output_tokens",
                     "carbon_g_per_million_output_tokens", "carbon_g_per_request")


def work_device(boundaries: Iterable[str]) -> str:
    """The boundary of the devices doing the work (rule 10): ``accelerator`` when any accelerator
    boundary was metered, else ``cpu``."""
    return "accelerator" if {"accelerator", "accelerator_memory"} & set(boundaries) else "cpu"


def contains_work(boundary: str, boundaries: Iterable[str]) -> bool:
    """Whether ``boundary`` is, or contains, the devices doing the work among ``boundaries`` (the
    boundaries the window metered)."""
    work = work_device(boundaries)
    return boundary == work or work in CONTAINS.get(boundary, frozenset())


def outside_work_note(boundary: str, boundaries: Iterable[str]) -> str:
    """The note on a boundary without per-token figures: what it leaves out."""
    work = work_device(boundaries)
    if work in CONTAINS and boundary in CONTAINS[work]:
        return (f"{boundary} is a part of the {work}: its power and share are shown; tokens per kW and "
                f"J/token are figures of the {work}")
    return (f"{boundary} excludes the {'accelerators' if work == 'accelerator' else 'CPU'} doing the work: "
            "its power and share are shown; tokens per kW and J/token are not figures of it")


def withhold_outside_work(level: LevelResult) -> bool:
    """Rule 10 on a level read from an older ``result.json`` (a ``LevelResult``, changed in place):
    per-token figures of boundaries outside the work are set to None in both windows, their goodput
    per kW, per-request roll-ups and trial figures dropped, and the note added. True when anything
    changed."""
    changed = False
    for energy in (level.energy, level.energy_steady):
        names = list(energy)
        for b, be in energy.items():
            if contains_work(b, names):
                continue
            had = [f for f in PER_TOKEN_FIGURES if getattr(be, f) is not None]
            for f in had:
                setattr(be, f, None)
            note = outside_work_note(b, names)
            if had and note not in be.notes:
                be.notes.append(note)
            changed = changed or bool(had)
    names = list(level.energy)
    if level.goodput is not None:
        for b in [b for b in level.goodput.per_kw if not contains_work(b, names)]:
            del level.goodput.per_kw[b]
            changed = True
    for b in [b for b in level.attribution if not contains_work(b, names)]:
        del level.attribution[b]
        changed = True
    if level.trials is not None:
        for key in list(level.trials.figures):
            fk = FigureKey.parse(key)
            if fk.boundary and fk.figure in PER_TOKEN_FIGURES + ("goodput_per_kw",) and not contains_work(fk.boundary, names):
                del level.trials.figures[key]
                changed = True
    return changed
LABELS = ("measured", "declared", "estimate")
FACILITY_SOURCES = ("cluster", "wall", "node")
CROSS_MIN_COVERAGE = 0.95  # a power channel below this coverage is not used to judge a counter


@dataclass
class DeviceEnergy:
    device: str
    channel: str
    method: str  # counter | power_integral | declared | estimate
    label: str
    energy_j: float | None
    coverage: float
    largest_gap_s: float
    gaps: int
    resets: int
    wraps: int
    update_period_s: float
    edge_error_j: float
    fill_interp_j: float
    uncertainty_pct: float | None
    uncertainty_parts: dict[str, float]
    cross_check: DeviceCrossCheck | None
    poly_t_ns: np.ndarray
    poly_w: np.ndarray
    notes: list[str] = field(default_factory=list)


@dataclass
class BoundaryTotal:
    boundary: str
    method: str
    label: str
    energy_j: float | None
    duration_s: float
    devices: list[str]
    channels: list[str]
    coverage: float | None
    largest_gap_s: float | None
    gaps: int
    resets: int
    wraps: int
    update_period_s: float
    uncertainty_pct: float | None
    cross_check: CrossCheck | None
    poly_t_ns: np.ndarray
    poly_w: np.ndarray
    parts: list[DeviceEnergy] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    composite: bool = False  # built from other boundaries (host sum, facility × PUE)

    @property
    def avg_power_w(self) -> float | None:
        return None if self.energy_j is None or self.duration_s <= 0 else self.energy_j / self.duration_s

    def power_stats(self) -> dict[str, float | None]:
        if len(self.poly_w) == 0:
            return {"p95_power_w": None, "p99_power_w": None, "max_power_w": None}
        return dict(power_stats(self.poly_t_ns, self.poly_w))


def _worst_label(labels: Sequence[str]) -> str:
    return max(labels, key=LABELS.index) if labels else "measured"


def _channel_method(ch: Channel) -> str:
    if ch.method in ("declared", "estimate"):
        return ch.method
    return "counter" if ch.kind == "counter" else "power_integral"


def _period(ch: Channel) -> float:
    return ch.update_period_s if ch.update_period_s else float("inf")


def _choice_key(ch: Channel) -> tuple[int, bool, float, str]:
    tier = (0 if ch.kind == "counter" else 1) if ch.primary else (2 if ch.kind == "counter" else 3)
    return (tier, ch.quantity != "power" and ch.kind == "power", _period(ch), ch.id)


def _cross_key(ch: Channel) -> tuple[bool, bool, float, str]:
    return (not ch.primary, ch.quantity != "power", _period(ch), ch.id)


def candidates(log: TelemetryLog, boundary: str) -> tuple[dict[str, list[Channel]], list[str]]:
    """Per-device candidate channels of a boundary (best first) and notes on dropped channels."""
    chans = [c for c in log.channels.values() if c.boundary == boundary and c.kind in ("counter", "power")]
    if not chans:
        return {}, []
    best = min(METHOD_RANK.get(c.method, 0) for c in chans)
    notes = [
        f"{c.id} ({c.method}) not used: a {LABELS[best]} channel exists for {boundary}"
        for c in chans
        if METHOD_RANK.get(c.method, 0) != best
    ]
    by_dev: dict[str, list[Channel]] = {}
    for c in chans:
        if METHOD_RANK.get(c.method, 0) == best:
            by_dev.setdefault(c.device, []).append(c)
    return {d: sorted(cs, key=_choice_key) for d, cs in sorted(by_dev.items())}, notes


def _power_integral(log: TelemetryLog, ch: Channel, t0: int, t1: int, gap_factor: float) -> PowerIntegral:
    t, v = log.series(ch.id)
    return power_energy(t, v, t0, t1, update_period_s=ch.update_period_s, gap_factor=gap_factor,
                        declared=ch.method == "declared")


def device_energy(
    log: TelemetryLog, ch: Channel, others: list[Channel], t0: int, t1: int, gap_factor: float = DEFAULT_GAP_FACTOR
) -> DeviceEnergy:
    """Energy of one device from channel ``ch``; ``others``: the device's other channels of the
    same boundary (measured power channels among them give the cross-check and reset fill)."""
    t, v = log.series(ch.id)
    method = _channel_method(ch)
    cross: DeviceCrossCheck | None = None
    notes: list[str] = []
    if ch.kind == "counter":
        powers = sorted((o for o in others if o.kind == "power" and o.method == "measured"), key=_cross_key)
        fill = shape = None
        if powers:
            pch = powers[0]

            def fill(a: int, b: int, _p: Channel = pch) -> float | None:
                r = _power_integral(log, _p, a, b, gap_factor)
                return r.energy_j if r.samples > 0 else None

            def shape(a: int, b: int, _p: Channel = pch) -> float | None:
                # the edges of a seldom-read counter follow the power channel where it covers them
                r = _power_integral(log, _p, a, b, gap_factor)
                return r.energy_j if r.coverage >= CROSS_MIN_COVERAGE else None

        r = counter_energy(t, v, t0, t1, max_value=ch.max_value, update_period_s=ch.update_period_s,
                           gap_factor=gap_factor, fill=fill, shape=shape)
        notes += r.notes
        poly_t, poly_w = (window_polyline(r.power_t_ns, r.power_w, t0, t1) if len(r.power_w)
                          else (np.zeros(0, dtype=np.int64), np.zeros(0)))
        if powers and r.energy_j is not None:
            ints = {p.id: _power_integral(log, p, t0, t1, gap_factor) for p in powers}
            first = ints[powers[0].id]
            if first.energy_j is not None:
                cross = DeviceCrossCheck(counter_j=r.energy_j, power_integral_j=first.energy_j,
                                         power_channel=powers[0].id, diff_pct=_diff_pct(r.energy_j, first.energy_j),
                                         power_coverage=first.coverage)
                others_x = {
                    pid: PowerChannelCheck(power_integral_j=pi.energy_j, diff_pct=_diff_pct(r.energy_j, pi.energy_j))
                    for pid, pi in ints.items()
                    if pid != powers[0].id and pi.energy_j is not None
                }
                if others_x:
                    cross.others = others_x
                # the instant power channel shows peaks better than a counter's per-period average
                if first.coverage >= CROSS_MIN_COVERAGE:
                    poly_t, poly_w = first.poly_t_ns, first.poly_w
        energy, cov, lg, gaps, period = r.energy_j, r.coverage, r.largest_gap_s, r.gaps, r.update_period_s
        edge, fill_interp, resets, wraps = r.edge_error_j, r.fill_interp_j, r.resets, r.wraps
    else:
        power = _power_integral(log, ch, t0, t1, gap_factor)
        notes += power.notes
        energy, cov, lg = power.energy_j, power.coverage, power.largest_gap_s
        gaps, period = power.gaps, power.update_period_s
        edge, fill_interp, resets, wraps = power.edge_error_j, 0.0, 0, 0
        poly_t, poly_w = power.poly_t_ns, power.poly_w
    # a poorly covered power channel says little about the counter: its disagreement is shown but
    # neither enters the uncertainty nor the validity verdict
    trusted = cross is not None and cross.power_coverage >= CROSS_MIN_COVERAGE
    u, parts = combine_pct(energy, meter_pct=meter_pct(ch), edge_error_j=edge, coverage=cov, fill_interp_j=fill_interp,
                           cross_diff_pct=cross.diff_pct if cross is not None and trusted else None)
    return DeviceEnergy(
        device=ch.device, channel=ch.id, method=method, label=ch.method, energy_j=energy, coverage=cov,
        largest_gap_s=lg, gaps=gaps, resets=resets, wraps=wraps, update_period_s=period, edge_error_j=edge,
        fill_interp_j=fill_interp, uncertainty_pct=u, uncertainty_parts=parts, cross_check=cross,
        poly_t_ns=poly_t, poly_w=poly_w, notes=notes,
    )


def _diff_pct(counter_j: float | None, integral_j: float | None) -> float | None:
    if counter_j is None or integral_j is None or counter_j == 0:
        return None
    return 100.0 * (integral_j - counter_j) / counter_j


def _merge_cross(parts: list[DeviceEnergy]) -> CrossCheck | None:
    both = [(p, x, x.diff_pct) for p in parts if (x := p.cross_check) is not None and x.diff_pct is not None]
    if not both:
        return None
    c = sum(x.counter_j for _, x, _ in both)
    i = sum(x.power_integral_j for _, x, _ in both)
    return CrossCheck(
        counter_j=c, power_integral_j=i, diff_pct=_diff_pct(c, i),
        max_abs_device_diff_pct=max((abs(d) for _, x, d in both if x.power_coverage >= CROSS_MIN_COVERAGE),
                                    default=None),
        devices={p.device or p.channel: x for p, x, _ in both},
    )


def _total(boundary: str, method: str, parts: Sequence[DeviceEnergy | BoundaryTotal], t0: int, t1: int,
           notes: list[str]) -> BoundaryTotal:
    """Sum of parts (DeviceEnergy or BoundaryTotal)."""
    dur = (t1 - t0) / 1e9
    missing = [(p.device or "?") if isinstance(p, DeviceEnergy) else p.boundary for p in parts if p.energy_j is None]
    energy = None if missing or not parts else float(sum(p.energy_j for p in parts if p.energy_j is not None))
    if missing:
        notes = notes + [f"no energy for {', '.join(missing)}: {boundary} total withheld"]
    polys = [(p.poly_t_ns, p.poly_w) for p in parts if len(p.poly_w)]
    pt, pw = sum_polylines(polys, t0, t1) if len(polys) == len(parts) and polys else (np.zeros(0, np.int64), np.zeros(0))
    devices: list[str] = []
    channels: list[str] = []
    for p in parts:
        if isinstance(p, DeviceEnergy):
            devices.append(p.device)
            channels.append(p.channel)
            notes = notes + p.notes
        else:
            devices += p.devices
            channels += p.channels
    return BoundaryTotal(
        boundary=boundary, method=method, label=_worst_label([p.label for p in parts]), energy_j=energy,
        duration_s=dur, devices=devices, channels=channels,
        coverage=min((p.coverage for p in parts if p.coverage is not None), default=None),
        largest_gap_s=max((p.largest_gap_s for p in parts if p.largest_gap_s is not None), default=None),
        gaps=sum(p.gaps for p in parts), resets=sum(p.resets for p in parts), wraps=sum(p.wraps for p in parts),
        update_period_s=max((p.update_period_s for p in parts), default=0.0),
        uncertainty_pct=sum_pct([(p.energy_j, p.uncertainty_pct) for p in parts]) if energy is not None else None,
        cross_check=_merge_cross([q for p in parts for q in ([p] if isinstance(p, DeviceEnergy) else p.parts)]),
        poly_t_ns=pt, poly_w=pw, parts=[q for p in parts for q in ([p] if isinstance(p, DeviceEnergy) else p.parts)],
        notes=notes,
    )


def direct_boundary(log: TelemetryLog, boundary: str, t0: int, t1: int, gap_factor: float = DEFAULT_GAP_FACTOR
                    ) -> BoundaryTotal | None:
    """A boundary from its own channels only."""
    by_dev, notes = candidates(log, boundary)
    if not by_dev:
        return None
    parts: list[DeviceEnergy] = []
    for dev, chans in by_dev.items():
        chosen = None
        for ch in chans:
            de = device_energy(log, ch, [c for c in chans if c.id != ch.id], t0, t1, gap_factor)
            if de.energy_j is not None:
                chosen = de
                break
            notes.append(f"{ch.id}: no energy in the window; next channel tried")
            chosen = chosen or de
        assert chosen is not None  # a device is listed with at least one channel
        parts.append(chosen)
    methods = sorted({p.method for p in parts})
    method = methods[0] if len(methods) == 1 else f"sum({','.join(methods)})"
    return _total(boundary, method, parts, t0, t1, notes)


def _node_log(log: TelemetryLog, node: str) -> TelemetryLog:
    """A view of ``log`` with one node's channels (series shared, not copied)."""
    sub = TelemetryLog()
    for cid, ch in log.channels.items():
        if ch.node == node:
            sub.channels[cid] = ch
            sub.t_ns[cid], sub.values[cid] = log.series(cid)
    return sub


def node_cover(totals: dict[str, BoundaryTotal]) -> list[BoundaryTotal]:
    """A node's outermost boundaries: ``wall``, else ``node``, else those that no other present
    boundary contains (measured ones preferred over declared/estimated)."""
    present = [t for b, t in totals.items() if b not in ("cluster", "facility")]
    measured = [t for t in present if t.label == "measured"]
    pool = measured or present
    for b in ("wall", "node"):
        for t in pool:
            if t.boundary == b:
                return [t]
    names = {t.boundary for t in pool}
    return [t for t in pool if not any(t.boundary in CONTAINS[o] for o in names if o != t.boundary)]


def cluster_total(log: TelemetryLog, t0: int, t1: int, gap_factor: float = DEFAULT_GAP_FACTOR
                  ) -> BoundaryTotal | None:
    """``cluster`` as the sum of every node's outermost boundaries (rule 9); None without nodes."""
    nodes = sorted({c.node for c in log.channels.values() if c.node})
    if not nodes:
        return None
    parts: list[BoundaryTotal] = []
    said: list[str] = []
    for n in nodes:
        cover = node_cover(_local_totals(_node_log(log, n), t0, t1, gap_factor)[0])
        if cover:
            parts += cover
            said.append(f"{n}: {' + '.join(t.boundary for t in cover)}")
        else:
            said.append(f"{n}: no power channel")
    if not parts:
        return None
    used = sorted({t.boundary for t in parts}, key=BOUNDARIES.index)
    notes = [f"cluster = sum over {len(nodes)} node(s) of each node's outermost boundary ({'; '.join(said)})"]
    if len(used) > 1:
        notes.append(f"nodes were metered at different boundaries ({', '.join(used)}): the cluster figure "
                     "covers less than a wall/node meter on the nodes measured further in")
    tot = _total("cluster", f"sum({','.join(used)})", parts, t0, t1, notes)
    tot.composite = True
    return tot


def boundary_totals(
    log: TelemetryLog, t0: int, t1: int, *, pue: float = 1.0, gap_factor: float = DEFAULT_GAP_FACTOR
) -> dict[str, BoundaryTotal]:
    """Every boundary that the log can give, in ``BOUNDARIES`` order."""
    out, direct = _local_totals(log, t0, t1, gap_factor)
    sources = {b: direct.get(b) for b in FACILITY_SOURCES}
    if "cluster" not in out:
        cl = cluster_total(log, t0, t1, gap_factor)
        if cl is not None:
            out["cluster"] = sources["cluster"] = cl

    fac = direct.get("facility")
    if fac is None and pue > 1.0:
        present = [s for s in (sources.get(b) for b in FACILITY_SOURCES) if s is not None]
        measured = [s for s in present if s.label == "measured"]
        pool = measured or present
        src = pool[0] if pool else None
        if src is not None:
            f = _total("facility", "pue", [src], t0, t1, [f"facility = {src.boundary} × PUE {pue:g}"])
            f.energy_j = None if src.energy_j is None else src.energy_j * pue
            f.poly_w = src.poly_w * pue
            f.cross_check = None
            f.composite = True
            out["facility"] = f
    return {b: out[b] for b in BOUNDARIES if b in out}


def _local_totals(log: TelemetryLog, t0: int, t1: int, gap_factor: float
                  ) -> tuple[dict[str, BoundaryTotal], dict[str, BoundaryTotal | None]]:
    """Direct boundaries plus the ``host`` composite (rules 1–8 without ``facility``), and the
    direct ones alone."""
    direct = {b: direct_boundary(log, b, t0, t1, gap_factor) for b in BOUNDARIES}
    out: dict[str, BoundaryTotal] = {b: t for b, t in direct.items() if t is not None}

    host = direct.get("host")
    if host is None or host.label != "measured":
        inner = [t for t in (direct.get(b) for b in sorted(CONTAINS["host"])) if t is not None]
        if inner:
            parts = inner + ([host] if host is not None else [])
            names = [p.boundary if p.boundary != "host" else p.label for p in parts]
            notes = [] if direct.get("dram") is not None else ["host = cpu only: dram not metered"]
            if direct.get("cpu") is None:
                notes.append("host = dram only: cpu not metered")
            out["host"] = _total("host", f"sum({','.join(names)})", parts, t0, t1, notes)
            out["host"].composite = True
    return out, direct
