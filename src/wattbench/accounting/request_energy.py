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
from array import array
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence, TypeAlias

import numpy as np

from wattbench.accounting.attribution import fit_prefill_decode
from wattbench.accounting.boundaries import contains_work
from wattbench.core.errors import UserError
from wattbench.core.recordset import NONE, RecordSet, as_record_set
from wattbench.core.schema import EnergyShare, LevelResult, RequestAttribution, RequestRecord

MIN_INTERVALS = 8  # fewer intervals than this and the window is one interval per 1/8 of it
MAX_INTERVALS = 400  # a long window gets longer intervals (each costs one boundary accounting, ~7 ms)


# the records a split reads: a record set, or records or their mappings (a requests.jsonl's lines)
Records: TypeAlias = "RecordSet | Iterable[RequestRecord | Mapping[str, Any]]"
# one roll-up attribute's groups (``_group_codes``): rows (None: one group per record), codes, names, tokens
GroupCodes: TypeAlias = "tuple[np.ndarray | None, np.ndarray, list[str], np.ndarray]"


def _get(rec: RequestRecord | Mapping[str, Any], name: str) -> Any:
    return rec.get(name) if isinstance(rec, Mapping) else getattr(rec, name, None)


@dataclass
class RequestEnergy:
    """The split of one boundary's window energy over requests (see the module docstring)."""

    boundary: str
    rows: np.ndarray  # the requests that got a share: their rows in the record set (int64)
    ids: np.ndarray  # their ids
    share_j: np.ndarray  # their energies (J), aligned with ``rows``
    basis: str  # dynamic | gross
    weighting: str  # prefill_decode | tokens
    weighting_reason: str | None
    idle_attributed: bool
    interval_s: float
    total_j: float  # the window energy split (sum of share_j)
    fit: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def energy_j(self) -> dict[int, float]:
        """Request id -> J (a dict: for tests and small sets; the arrays are the result)."""
        return {int(i): float(v) for i, v in zip(self.ids, self.share_j)}

    @property
    def method(self) -> str:
        w = ("weighted by the prefill/decode split fitted on the window" if self.weighting == "prefill_decode"
             else "weighted by tokens (prefill and decode tokens alike)")
        s = f"{self.basis} energy per {self.interval_s:g} s interval split over the requests working in it, {w}"
        if self.idle_attributed:
            s += "; idle energy split by time in flight"
        return s


WORK_BLOCK_ROWS = 1024  # requests per block of the work matrices (a block is WORK_BLOCK_ROWS × intervals)
TOKENS_PER_GROUP = 1 << 20  # spread output tokens (no chunk stamps) in groups of about this many


def _work_blocks(rs: RecordSet, edges: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Block by block: ``(rows, prefill, decode)`` for the requests of the block that count (a first
    token and some tokens): their row numbers in ``rs`` and their tokens per interval (one matrix
    row each, one column per interval). Memory: one block and its chunk stamps at a time."""
    t0, t1, n = int(edges[0]), int(edges[-1]), edges.size - 1

    def bins(ts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        inside = (ts >= t0) & (ts <= t1)
        return inside, np.minimum(np.searchsorted(edges, ts[inside], side="right") - 1, n - 1)

    for start, block, off, stamps in rs.iter_chunks(WORK_BLOCK_ROWS):
        ft, inp, out = block["first_token_ns"], block["input_tokens"], block["output_tokens"]
        sel = np.flatnonzero((ft != NONE) & ((inp > 0) | (out > 0)))
        m = sel.size
        if not m:
            continue
        pre = np.zeros((m, n))
        dec = np.zeros((m, n))
        ft, inp, out = ft[sel], np.maximum(inp[sel], 0), np.maximum(out[sel], 0)
        inside, b = bins(ft)
        pre[np.flatnonzero(inside), b] += inp[inside]
        nch = block["n_chunks"][sel]
        flat = dec.reshape(-1)
        # output tokens spread evenly over the chunk stamps (in stamp order, as np.add.at per request did)
        chunked = np.flatnonzero((out > 0) & (nch > 0))
        if chunked.size:
            k = np.repeat(chunked, nch[chunked])
            ts = stamps[_ranges(off[sel[chunked]], nch[chunked])]
            inside, b = bins(ts)
            np.add.at(flat, k[inside] * n + b, (out[k] / nch[k])[inside])
        # no chunk stamps: evenly between first and last token (np.linspace's points, truncated)
        plain = np.flatnonzero((out > 0) & (nch == 0))
        if plain.size:
            lt = block["last_token_ns"][sel][plain]
            lt = np.where((lt == NONE) | (lt == 0), ft[plain], lt)
            same = lt == ft[plain]
            j = plain[same]
            inside, b = bins(ft[j])
            np.add.at(flat, j[inside] * n + b, out[j][inside].astype(np.float64))
            _spread(flat, n, plain[~same], ft[plain][~same], lt[~same], out[plain][~same], bins)
        yield start + sel, pre, dec


def _ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Concatenated ``arange(s, s + c)`` for each start and count."""
    total = int(counts.sum())
    ends = np.cumsum(counts)
    out: np.ndarray = np.arange(total) - np.repeat(ends - counts, counts) + np.repeat(starts, counts)
    return out


def _spread(flat: np.ndarray, n: int, rows: np.ndarray, ft: np.ndarray, lt: np.ndarray, out: np.ndarray,
            bins: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]) -> None:
    """Count ``out`` tokens per request at ``np.linspace(ft, lt, out).astype(int64)`` into ``flat``
    (row-major, ``n`` columns), in groups of at most about ``TOKENS_PER_GROUP`` tokens."""
    a = 0
    while a < rows.size:
        c = np.cumsum(out[a:])
        b = a + max(1, int(np.searchsorted(c, TOKENS_PER_GROUP, side="right")))
        r, f, l, o = rows[a:b], ft[a:b].astype(np.float64), lt[a:b].astype(np.float64), out[a:b]
        k = np.repeat(np.arange(r.size), o)
        idx = (np.arange(int(o.sum())) - np.repeat(np.cumsum(o) - o, o)).astype(np.float64)
        step = np.where(o > 1, (l - f) / np.maximum(o - 1, 1), 0.0)  # linspace: y = arange * step + start
        y = idx * step[k] + f[k]
        last = np.cumsum(o)[o > 1] - 1
        y[last] = l[o > 1]  # and the last point is the stop exactly
        inside, bb = bins(y.astype(np.int64))
        flat += np.bincount(r[k][inside] * n + bb, minlength=flat.size)
        a = b


def work_per_interval(records: Records, edges: np.ndarray) -> tuple[list[int], np.ndarray, np.ndarray]:
    """Per request (rows) and interval (columns): prompt tokens and output tokens done inside it.

    Returns ``(ids, prefill, decode)``; only records with a first token and token counts count.
    The whole matrix (requests × intervals): for tests and small sets; the split itself works
    block by block (``_work_blocks``).
    """
    rs = as_record_set(records)
    blocks = list(_work_blocks(rs, edges))
    n = edges.size - 1
    rows = np.concatenate([b[0] for b in blocks]) if blocks else np.zeros(0, dtype=np.int64)
    ids = rs.columns("id")["id"][rows].tolist()
    if not blocks:
        return ids, np.zeros((0, n)), np.zeros((0, n))
    return ids, np.concatenate([b[1] for b in blocks]), np.concatenate([b[2] for b in blocks])


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


def split_request_energy(records: Records, boundary: str, start_ns: int, end_ns: int,
                         energy_fn: Callable[[int, int], float | None], window_energy_j: float,
                         idle_power_w: float | None, *, interval_s: float | None = None,
                         attribute_idle: bool = False, update_period_s: float | None = None) -> RequestEnergy:
    """Split one boundary's window energy over ``records`` (a ``RecordSet``, or a list of records
    or mappings; see the module docstring).

    ``window_energy_j`` is the window's gross energy as accounted for the level (the figure the
    per-request energies must add up to, with or without idle). Raises ``UserError`` with a
    sentence when nothing can be split (no work in the window, no energy). Memory: the work is
    read block by block (three passes); what is held per request is a few numbers (the result).
    """
    if end_ns <= start_ns:
        raise UserError("the window is empty, so there is no energy to split over requests")
    rs = as_record_set(records)
    dur = (end_ns - start_ns) / 1e9
    interval_s = interval_s or default_interval_s(dur, update_period_s)
    edges = _edges(start_ns, end_ns, interval_s)
    dt = np.diff(edges) / 1e9
    n = edges.size - 1
    # pass 1: the work per interval (summed over requests in record order, as a matrix's column sums)
    P, D, row_blocks = np.zeros(n), np.zeros(n), []
    for r, pre, dec in _work_blocks(rs, edges):
        P, D = _add_rows(P, pre), _add_rows(D, dec)
        row_blocks.append(r)
    rows = np.concatenate(row_blocks) if row_blocks else np.zeros(0, dtype=np.int64)
    if not rows.size or (P.sum() + D.sum()) <= 0:
        raise UserError("no request produced tokens inside the window, so its energy cannot be split over requests")
    basis = "dynamic" if idle_power_w is not None else "gross"
    idle_j = idle_power_w * dur if idle_power_w is not None else 0.0
    target = window_energy_j - idle_j
    if target <= 0:
        raise UserError(f"the window's dynamic energy is {target:.3g} J (not above idle), so there is no work "
                        f"energy to split over requests")
    e, known, notes = _interval_energy(edges, dt, energy_fn, idle_power_w, target)

    weighting, reason, fit = "tokens", None, None
    try:
        fit = fit_prefill_decode(e[known], P[known], D[known], dt[known], fit_idle=basis == "gross")
        if fit["status"] == "ok":
            weighting = "prefill_decode"
        else:
            reason = "the prefill/decode split is unreliable: " + "; ".join(fit["reasons"])
    except UserError as ex:
        reason = f"the prefill/decode split could not be fitted: {ex}"

    def weights(pre: np.ndarray, dec: np.ndarray) -> np.ndarray:
        w: np.ndarray
        if weighting == "prefill_decode" and fit is not None:  # the fit is there when it weighs
            w = fit["j_per_prefill_token"] * pre + fit["j_per_decode_token"] * dec
        else:
            w = pre + dec
        return w

    # pass 2: each interval's summed weight, each request's weight over the window
    col, total_w, k = np.zeros(n), np.empty(rows.size), 0
    for _, pre, dec in _work_blocks(rs, edges):
        w = weights(pre, dec)
        col = _add_rows(col, w)
        total_w[k: k + len(w)] = w.sum(axis=1)
        k += len(w)
    # pass 3: each interval's energy to the requests working in it, by weight
    share, k = np.empty(rows.size), 0
    for _, pre, dec in _work_blocks(rs, edges):
        w = weights(pre, dec)
        share[k: k + len(w)] = np.divide(w, col, out=np.zeros_like(w), where=col > 0) @ e
        k += len(w)
    orphan = float(e[col <= 0].sum())
    if orphan > 0:
        share = share + orphan * total_w / total_w.sum()
    if attribute_idle and idle_power_w is not None:
        share = share + _idle_share(rs, rows, start_ns, end_ns) * idle_j
    return RequestEnergy(boundary, rows, rs.columns("id")["id"][rows], share,
                         "gross" if (attribute_idle or basis == "gross") else "dynamic", weighting,
                         reason, bool(attribute_idle and idle_power_w is not None), float(interval_s),
                         float(share.sum()), fit, notes)


def _add_rows(acc: np.ndarray, block: np.ndarray) -> np.ndarray:
    """``acc`` plus the rows of ``block`` one after the other: the float sums a whole matrix's
    ``sum(axis=0)`` gives (numpy adds the rows in order), block by block."""
    out: np.ndarray = np.concatenate([acc[None, :], block]).sum(axis=0)
    return out


def _interval_energy(edges: np.ndarray, dt: np.ndarray, energy_fn: Callable[[int, int], float | None],
                     idle_power_w: float | None, target: float) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Each interval's basis energy, scaled to sum to ``target``; which were measured; notes."""
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
    notes: list[str] = []
    if e.sum() <= 0:
        e = np.ones_like(e) * known
        notes.append("no interval rose above idle: the dynamic energy is spread by work over the window")
    return e / e.sum() * target, known, notes


def _idle_share(rs: RecordSet, rows: np.ndarray, start_ns: int, end_ns: int) -> np.ndarray:
    """Each request's fraction of the summed time in flight inside the window (sent to end)."""
    c = rs.columns("sent_ns", "last_token_ns", "end_ns")
    a = c["sent_ns"][rows]
    b = np.where((c["end_ns"][rows] == NONE) | (c["end_ns"][rows] == 0), c["last_token_ns"][rows], c["end_ns"][rows])
    b = np.where((b == NONE) | (b == 0), a, b)
    t = np.maximum(0, np.minimum(b, end_ns) - np.maximum(a, start_ns)).astype(np.float64)
    if t.sum() <= 0:
        return np.full(rows.size, 1.0 / rows.size)
    out: np.ndarray = t / t.sum()
    return out


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


def roll_up(records: Sequence[RequestRecord | Mapping[str, Any]], energy_j: Mapping[int, float],
            key: Callable[[object], Sequence[str]]) -> dict[str, dict[str, Any]]:
    """Sum per-request energies by group: ``key(record)`` gives the groups a request belongs to.

    Each group: ``requests``, ``energy_j``, ``output_tokens``, ``j_per_output_token``, ``share`` (of
    the total split). A request in several groups (several tags) counts in each.
    """
    total = sum(energy_j.values())
    groups: dict[str, dict[str, Any]] = {}
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


def _groups(r: RequestRecord | Mapping[str, Any], attr: str) -> list[str]:
    return _group_names(_get(r, attr), attr)


def _group_names(v: Any, attr: str) -> list[str]:
    """The roll-up groups of a record whose ``attr`` is ``v``: its tags, or the value ("(none)" if unset)."""
    if attr == "tags":
        return [str(t) for t in (v or [])]
    return [str(v) if v not in (None, "") else "(none)"]


def attribute_level(level: LevelResult, records: Sequence[RequestRecord] | RecordSet,
                    energy_fn_for: Callable[[str], Callable[[int, int], float | None]],
                    *, attribute_idle: bool = False) -> None:
    """Split the full-window energy of each measured boundary of ``level`` that contains the work
    (``accounting.boundaries`` rule 10: not the HBM rail, not the host of a GPU server) over ``records``.

    Gives each record that did work in the window its ``energy_j`` / ``energy_method`` for the
    boundary (on a ``RecordSet`` as ``annotate_entry``-d entries, written with the records; on a
    list, set on the record objects), and sets ``level.attribution[boundary]``
    (``RequestAttribution``: totals and roll-ups by tenant, tag, model and target). A boundary whose
    energy cannot be split gets its ``unavailable_reason``.
    """
    w = level.window
    if w is None or w.duration_s <= 0:
        return
    rs = as_record_set(records)
    groups: dict[str, GroupCodes] | None = None
    for b, be in level.energy.items():
        if be.energy_j is None or not contains_work(b, level.energy):  # boundaries rule 10
            continue
        try:
            re = split_request_energy(rs, b, w.start_ns, w.end_ns, energy_fn_for(b), be.energy_j,
                                      be.idle_power_w, attribute_idle=attribute_idle,
                                      update_period_s=be.update_period_s)
        except UserError as e:
            level.attribution[b] = RequestAttribution(boundary=b, unavailable_reason=str(e))
            continue
        method = re.method
        fit = re.fit if re.weighting == "prefill_decode" else None  # its weights, where they weighed the split
        energy = np.zeros(len(rs))
        energy[re.rows] = re.share_j
        present = np.zeros(len(rs), dtype=bool)
        present[re.rows] = True
        if isinstance(records, RecordSet):
            records.annotate_entry("energy_j", b, energy, present)
            records.annotate_entry("energy_method", b, method, present)
        else:
            for k in re.rows.tolist():
                records[k].energy_j[b] = float(energy[k])
                records[k].energy_method[b] = method
        n = int(re.rows.size)
        groups = groups or _group_codes(rs)
        total = sum(map(float, re.share_j))  # as summing the per-request dict's values did

        def shares(attr: str) -> dict[str, EnergyShare]:
            return {k: EnergyShare(**d) for k, d in _roll_up_coded(groups[attr], energy, present, total).items()}

        targets = shares("target")
        level.attribution[b] = RequestAttribution(
            boundary=b, method=method, basis=re.basis, weighting=re.weighting, weighting_reason=re.weighting_reason,
            idle_attributed=re.idle_attributed, interval_s=re.interval_s, requests=n, energy_j=re.total_j,
            j_per_prefill_token=fit["j_per_prefill_token"] if fit is not None else None,
            j_per_decode_token=fit["j_per_decode_token"] if fit is not None else None,
            mean_energy_j_per_request=re.total_j / n if n else None,
            by_tenant=shares("tenant"), by_tag=shares("tags"), by_model=shares("model"),
            by_target=targets if len(targets) > 1 else {},
        )


ROLL_UP_ATTRS = ("tenant", "tags", "model", "target")


def _group_codes(rs: RecordSet) -> dict[str, GroupCodes]:
    """Per roll-up attribute, in one pass over the records: ``(rows, codes, names, output_tokens)``
    — one entry per (record, group) in record order (``rows`` None: one group per record, the
    record's row; tags: one per tag), the group names, and each record's output tokens."""
    tables: dict[str, tuple[dict[str, int], array[int], array[int]]] = {
        a: ({}, array("i"), array("i")) for a in ROLL_UP_ATTRS}
    for i, d in enumerate(rs.iter_dicts()):
        for a in ROLL_UP_ATTRS:
            names, rows, codes = tables[a]
            for g in _group_names(d.get(a), a):
                if a == "tags":
                    rows.append(i)
                codes.append(names.setdefault(g, len(names)))
    out_tok = np.maximum(rs.columns("output_tokens")["output_tokens"], 0)
    return {a: (np.frombuffer(rows, dtype=np.int32) if a == "tags" else None,
                np.frombuffer(codes, dtype=np.int32), list(names), out_tok)
            for a, (names, rows, codes) in tables.items()}


def _roll_up_coded(group: GroupCodes, energy: np.ndarray, present: np.ndarray, total: float
                   ) -> dict[str, dict[str, Any]]:
    """``roll_up`` over coded groups (``_group_codes``): the same sums, added in record order."""
    rows, codes, names, out_tok = group
    if rows is None:
        rows = np.flatnonzero(present)
        codes = codes[rows]
    else:
        keep = present[rows]
        rows, codes = rows[keep], codes[keep]
    if not rows.size:
        return {}
    e = np.zeros(len(names))
    np.add.at(e, codes, energy[rows])  # one by one in record order: the float sums roll_up makes
    tok = np.zeros(len(names), dtype=np.int64)
    np.add.at(tok, codes, out_tok[rows])
    reqs = np.bincount(codes, minlength=len(names))
    uniq, first = np.unique(codes, return_index=True)
    groups: dict[str, dict[str, Any]] = {}
    for c in uniq[np.argsort(first, kind="stable")].tolist():
        ej, ot = float(e[c]), int(tok[c])
        groups[names[c]] = {"requests": int(reqs[c]), "energy_j": ej, "output_tokens": ot,
                            "j_per_output_token": ej / ot if ot else None, "share": ej / total if total > 0 else None}
    return dict(sorted(groups.items(), key=lambda kv: -kv[1]["energy_j"]))
