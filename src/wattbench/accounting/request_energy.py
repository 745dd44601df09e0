"""Energy per request: a level window's energy split over the requests that did its work.

An **estimate** (every figure is labelled so): the meters see the whole machine, not requests. The
rule, per boundary, over one window ``[start_ns, end_ns]``:

1. **Intervals.** The window is cut into intervals of ``interval_s``; each interval's energy ``E_i``
   comes from the boundary's meter (``energy_fn``). The **basis** is the window's *dynamic* energy
   (gross − idle power × time) when the idle power is known, else its *gross* energy. Interval
   dynamic energies below zero (meter noise around idle) count as 0, and all interval energies are
   scaled so they sum exactly to the window's basis energy as accounted for the level.
2. **Work per interval.** A request's prompt tokens are its work in the interval holding its first
   token (prefill ends just before it); its output tokens are spread evenly over its content chunk
   arrivals (evenly between first and last token when chunks were not kept) — the same rule as
   ``attribution.intervals_from_records``. Only work inside the window counts (warm-up leftovers
   get the share of their tokens inside it).
3. **Weights.** Work is weighted by the prefill/decode split — ``w = e_p · prefill + e_d · decode``
   with J per prefill/decode token fitted on this window's intervals (``attribution.fit_prefill_decode``
   on the basis energy) — when that fit is ``ok``; otherwise every token weighs the same
   (``weighting = "tokens"``, with the fit's reasons in ``weighting_reason``).
4. **Split.** Each interval's energy goes to the requests that worked in it, in proportion to their
   weight there. Energy of intervals in which no request worked (gaps, the drain's tail) is spread
   over all requests in proportion to their weight over the window.
5. **Idle** (``attribute_idle``): the window's idle energy (idle power × duration) is split in
   proportion to each request's time in flight inside the window (sent to end); the per-request
   energies then sum to the gross energy.

**Conservation**: the per-request energies sum to the window's basis energy (dynamic, or gross when
idle is attributed or unknown) up to float rounding; tested. The split is exact when every
interval's energy is a weighted sum of the work done in it and the intervals are short against the
requests; the recovery tolerance against a known per-token model is in ``docs/accounting.md``.

Roll-ups (:func:`roll_up`) sum the per-request energies by tenant, tag, model and target.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np

from wattbench.accounting.attribution import fit_prefill_decode
from wattbench.errors import UserError
from wattbench.results.schema import EnergyShare, RequestAttribution

MIN_INTERVALS = 8  # fewer intervals than this and the window is one interval per 1/8 of it
MAX_INTERVALS = 400  # a long window gets longer intervals (each costs one boundary accounting, ~7 ms)


def _get(rec, name):
    return rec.get(name) if isinstance(rec, Mapping) else getattr(rec, name, None)


@dataclass
class RequestEnergy:
    """The split of one boundary's window energy over requests (see the module docstring)."""

    boundary: str
    energy_j: dict[int, float]  # request id -> J
    basis: str  # dynamic | gross
    weighting: str  # prefill_decode | tokens
    weighting_reason: str | None
    idle_attributed: bool
    interval_s: float
    total_j: float  # the window energy split (sum of energy_j)
    fit: dict | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def method(self) -> str:
        w = ("weighted by the prefill/decode split fitted on the window" if self.weighting == "prefill_decode"
             else "weighted by tokens (prefill and decode tokens alike)")
        s = f"{self.basis} energy per {self.interval_s:g} s interval split over the requests working in it, {w}"
        if self.idle_attributed:
            s += "; idle energy split by time in flight"
        return s


def work_per_interval(records: Sequence, edges: np.ndarray) -> tuple[list, np.ndarray, np.ndarray]:
    """Per request (rows) and interval (columns): prompt tokens and output tokens done inside it.

    Returns ``(ids, prefill, decode)``; only records with a first token and token counts count.
    """
    t0, t1, n = int(edges[0]), int(edges[-1]), edges.size - 1
    recs = [r for r in records if _get(r, "first_token_ns") is not None
            and ((_get(r, "input_tokens") or 0) > 0 or (_get(r, "output_tokens") or 0) > 0)]
    pre = np.zeros((len(recs), n))
    dec = np.zeros((len(recs), n))

    def bins(ts) -> np.ndarray:
        ts = np.asarray(ts, dtype=np.int64)
        inside = (ts >= t0) & (ts <= t1)
        return np.minimum(np.searchsorted(edges, ts[inside], side="right") - 1, n - 1)

    for k, r in enumerate(recs):
        ft = _get(r, "first_token_ns")
        b = bins([ft])
        if b.size:
            pre[k, b[0]] += _get(r, "input_tokens") or 0
        out = _get(r, "output_tokens") or 0
        if out <= 0:
            continue
        chunks = _get(r, "chunk_ns") or []
        if chunks:
            np.add.at(dec[k], bins(chunks), out / len(chunks))
        else:
            lt = _get(r, "last_token_ns") or ft
            ts = [ft] * out if lt == ft else np.linspace(ft, lt, out).astype(np.int64)
            np.add.at(dec[k], bins(ts), 1.0)
    return [_get(r, "id") for r in recs], pre, dec


def _edges(start_ns: int, end_ns: int, interval_s: float) -> np.ndarray:
    step = int(round(interval_s * 1e9))
    n = max(1, int(math.ceil((end_ns - start_ns) / step)))
    e = start_ns + step * np.arange(n + 1, dtype=np.int64)
    e[-1] = end_ns
    return e


def default_interval_s(duration_s: float, update_period_s: float | None = None) -> float:
    """Ten meter update periods (at least 1 s; longer when the window would need more than 400
    intervals), or an eighth of a short window.

    A meter smears energy over its update period across interval edges; intervals many periods
    long keep that smear small (the recovery test: 0.25 s intervals on a 100 ms counter put single
    requests 20–35% off, 1 s intervals under 10%). Inside an interval the split follows the work.
    """
    want = max(1.0, 10.0 * (update_period_s or 0.1), duration_s / MAX_INTERVALS)
    return max(0.1, min(want, duration_s / MIN_INTERVALS))


def split_request_energy(records: Sequence, boundary: str, start_ns: int, end_ns: int,
                         energy_fn: Callable[[int, int], float | None], window_energy_j: float,
                         idle_power_w: float | None, *, interval_s: float | None = None,
                         attribute_idle: bool = False, update_period_s: float | None = None) -> RequestEnergy:
    """Split one boundary's window energy over ``records`` (see the module docstring).

    ``window_energy_j`` is the window's gross energy as accounted for the level (the figure the
    per-request energies must add up to, with or without idle). Raises ``UserError`` with a
    sentence when nothing can be split (no work in the window, no energy).
    """
    if end_ns <= start_ns:
        raise UserError("the window is empty, so there is no energy to split over requests")
    dur = (end_ns - start_ns) / 1e9
    interval_s = interval_s or default_interval_s(dur, update_period_s)
    edges = _edges(start_ns, end_ns, interval_s)
    dt = np.diff(edges) / 1e9
    ids, pre, dec = work_per_interval(records, edges)
    if not ids or (pre.sum() + dec.sum()) <= 0:
        raise UserError("no request produced tokens inside the window, so its energy cannot be split over requests")
    basis = "dynamic" if idle_power_w is not None else "gross"
    idle_j = idle_power_w * dur if idle_power_w is not None else 0.0
    target = window_energy_j - idle_j
    if target <= 0:
        raise UserError(f"the window's dynamic energy is {target:.3g} J (not above idle), so there is no work "
                        f"energy to split over requests")
    e = np.array([energy_fn(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])], dtype=float)
    known = np.isfinite(e)
    if not known.any():
        raise UserError("no interval of the window has a measured energy, so it cannot be split over requests")
    e = np.where(known, e, 0.0)
    if idle_power_w is not None:
        e = e - idle_power_w * dt
    e = np.clip(e, 0.0, None)
    if not known.all():  # unmeasured intervals: their share follows the work, like work-free intervals
        e[~known] = 0.0
    notes = []
    if e.sum() <= 0:
        e = np.ones_like(e) * known
        notes.append("no interval rose above idle: the dynamic energy is spread by work over the window")
    e = e / e.sum() * target

    weighting, reason, fit = "tokens", None, None
    P, D = pre.sum(axis=0), dec.sum(axis=0)
    try:
        fit = fit_prefill_decode(e[known], P[known], D[known], dt[known], fit_idle=basis == "gross")
        if fit["status"] == "ok":
            weighting = "prefill_decode"
        else:
            reason = "the prefill/decode split is unreliable: " + "; ".join(fit["reasons"])
    except UserError as ex:
        reason = f"the prefill/decode split could not be fitted: {ex}"
    if weighting == "prefill_decode":
        w = fit["j_per_prefill_token"] * pre + fit["j_per_decode_token"] * dec
    else:
        w = pre + dec
    col = w.sum(axis=0)
    total_w = w.sum(axis=1)
    share = np.divide(w, col, out=np.zeros_like(w), where=col > 0) @ e
    orphan = float(e[col <= 0].sum())
    if orphan > 0:
        share = share + orphan * total_w / total_w.sum()
    if attribute_idle and idle_power_w is not None:
        share = share + _idle_share(records, ids, start_ns, end_ns) * idle_j
    out = {i: float(v) for i, v in zip(ids, share)}
    return RequestEnergy(boundary, out, "gross" if (attribute_idle or basis == "gross") else "dynamic", weighting,
                         reason, bool(attribute_idle and idle_power_w is not None), float(interval_s),
                         float(share.sum()), fit, notes)


def _idle_share(records: Sequence, ids: list, start_ns: int, end_ns: int) -> np.ndarray:
    """Each request's fraction of the summed time in flight inside the window (sent to end)."""
    by_id = {_get(r, "id"): r for r in records}
    t = np.zeros(len(ids))
    for k, i in enumerate(ids):
        r = by_id[i]
        a = _get(r, "sent_ns")
        b = _get(r, "end_ns") or _get(r, "last_token_ns") or a
        t[k] = max(0, min(b, end_ns) - max(a, start_ns))
    if t.sum() <= 0:
        return np.full(len(ids), 1.0 / len(ids))
    return t / t.sum()


def split_by_tokens(energy_j: Mapping[str, float], tokens: Mapping[str, float]) -> dict[str, dict[str, float]]:
    """One span's energy per boundary split over groups (models) by their tokens in it (an estimate).

    Used by the monitor, which sees per-model token counters but not requests: prompt and output
    tokens weigh alike (the documented fallback when no prefill/decode fit is at hand). Groups
    without tokens get none; with no tokens at all the result is empty.
    """
    total = sum(max(0.0, t) for t in tokens.values())
    if total <= 0:
        return {}
    return {g: {b: e * max(0.0, t) / total for b, e in energy_j.items()} for g, t in tokens.items()}


def roll_up(records: Sequence, energy_j: Mapping[int, float], key: Callable[[object], Sequence[str]]) -> dict:
    """Sum per-request energies by group: ``key(record)`` gives the groups a request belongs to.

    Each group: ``requests``, ``energy_j``, ``output_tokens``, ``j_per_output_token``, ``share`` (of
    the total split). A request in several groups (several tags) counts in each.
    """
    total = sum(energy_j.values())
    groups: dict[str, dict] = {}
    for r in records:
        i = _get(r, "id")
        if i not in energy_j:
            continue
        for g in key(r):
            d = groups.setdefault(g, {"requests": 0, "energy_j": 0.0, "output_tokens": 0})
            d["requests"] += 1
            d["energy_j"] += energy_j[i]
            d["output_tokens"] += _get(r, "output_tokens") or 0
    for d in groups.values():
        d["j_per_output_token"] = d["energy_j"] / d["output_tokens"] if d["output_tokens"] else None
        d["share"] = d["energy_j"] / total if total > 0 else None
    return dict(sorted(groups.items(), key=lambda kv: -kv[1]["energy_j"]))


def _groups(r, attr: str) -> list[str]:
    v = _get(r, attr)
    if attr == "tags":
        return [str(t) for t in (v or [])]
    return [str(v) if v not in (None, "") else "(none)"]


def attribute_level(level, records: Sequence, energy_fn_for: Callable[[str], Callable[[int, int], float | None]],
                    *, attribute_idle: bool = False) -> None:
    """Split each measured boundary's full-window energy of ``level`` over ``records``.

    Sets ``energy_j`` / ``energy_method`` on each record that did work in the window and
    ``level.attribution[boundary]`` (``RequestAttribution``: totals and roll-ups by tenant, tag,
    model and target). A boundary whose energy cannot be split gets its ``unavailable_reason``.
    """
    w = level.window
    if w is None or w.duration_s <= 0:
        return
    for b, be in level.energy.items():
        if be.energy_j is None:
            continue
        try:
            re = split_request_energy(records, b, w.start_ns, w.end_ns, energy_fn_for(b), be.energy_j,
                                      be.idle_power_w, attribute_idle=attribute_idle,
                                      update_period_s=be.update_period_s)
        except UserError as e:
            level.attribution[b] = RequestAttribution(boundary=b, unavailable_reason=str(e))
            continue
        method = re.method
        for r in records:
            i = _get(r, "id")
            if i in re.energy_j:
                r.energy_j[b] = re.energy_j[i]
                r.energy_method[b] = method
        n = len(re.energy_j)

        def shares(attr: str) -> dict:
            return {k: EnergyShare(**d) for k, d in roll_up(records, re.energy_j, lambda r: _groups(r, attr)).items()}

        targets = shares("target")
        level.attribution[b] = RequestAttribution(
            boundary=b, method=method, basis=re.basis, weighting=re.weighting, weighting_reason=re.weighting_reason,
            idle_attributed=re.idle_attributed, interval_s=re.interval_s, requests=n, energy_j=re.total_j,
            j_per_prefill_token=re.fit["j_per_prefill_token"] if re.weighting == "prefill_decode" else None,
            j_per_decode_token=re.fit["j_per_decode_token"] if re.weighting == "prefill_decode" else None,
            mean_energy_j_per_request=re.total_j / n if n else None,
            by_tenant=shares("tenant"), by_tag=shares("tags"), by_model=shares("model"),
            by_target=targets if len(targets) > 1 else {},
        )
