"""Energy per request, carbon and the run's intervals from a ``RecordSet`` in bounded memory (issue 17):
the new block-by-block code against the old per-request code (copied below as the reference) on
randomized records (warm-up, failed, chunked and not, several tenants, tags, models, targets), as a
list and as a spilled ``RecordSet``.

Such comparisons prove a refactor, not correctness (a rule wrong in both is not seen): each one
names, in its docstring, the test that checks the same rule against figures worked out by hand."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Callable, Mapping, Sequence

import numpy as np
import pytest

from wattbench.accounting.attribution import Intervals, fit_prefill_decode, intervals_from_records
from wattbench.accounting.carbon import apply_carbon
from wattbench.accounting.request_energy import (
    RequestEnergy,
    _edges,
    attribute_level,
    default_interval_s,
    split_request_energy,
    work_per_interval,
)
from wattbench.errors import UserError
from wattbench.metrics import carbon as co2
from wattbench.results import rundir
from wattbench.results.recordset import RecordSet
from wattbench.results.schema import EnergyShare, RequestAttribution, RequestRecord

S = 1_000_000_000
MS = 1_000_000


def _get(rec, name):
    return rec.get(name) if isinstance(rec, Mapping) else getattr(rec, name, None)


# ---------------------------------------------------------------- the old code (the reference)

@dataclass
class OldEnergy:
    boundary: str
    energy_j: dict
    basis: str
    weighting: str
    weighting_reason: str | None
    idle_attributed: bool
    interval_s: float
    total_j: float
    fit: dict | None = None
    notes: list = field(default_factory=list)

    @property
    def method(self) -> str:
        w = ("weighted by the prefill/decode split fitted on the window" if self.weighting == "prefill_decode"
             else "weighted by tokens (prefill and decode tokens alike)")
        s = f"{self.basis} energy per {self.interval_s:g} s interval split over the requests working in it, {w}"
        if self.idle_attributed:
            s += "; idle energy split by time in flight"
        return s


def old_work_per_interval(records: Sequence, edges: np.ndarray) -> tuple[list, np.ndarray, np.ndarray]:
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


def old_split_request_energy(records: Sequence, boundary: str, start_ns: int, end_ns: int,
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
    ids, pre, dec = old_work_per_interval(records, edges)
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
        share = share + old_idle_share(records, ids, start_ns, end_ns) * idle_j
    out = {i: float(v) for i, v in zip(ids, share)}
    return OldEnergy(boundary, out, "gross" if (attribute_idle or basis == "gross") else "dynamic", weighting,
                         reason, bool(attribute_idle and idle_power_w is not None), float(interval_s),
                         float(share.sum()), fit, notes)


def old_idle_share(records: Sequence, ids: list, start_ns: int, end_ns: int) -> np.ndarray:
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


def old_roll_up(records: Sequence, energy_j: Mapping[int, float], key: Callable[[object], Sequence[str]]) -> dict:
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


def old_groups(r, attr: str) -> list[str]:
    v = _get(r, attr)
    if attr == "tags":
        return [str(t) for t in (v or [])]
    return [str(v) if v not in (None, "") else "(none)"]


def old_attribute_level(level, records: Sequence, energy_fn_for: Callable[[str], Callable[[int, int], float | None]],
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
            re = old_split_request_energy(records, b, w.start_ns, w.end_ns, energy_fn_for(b), be.energy_j,
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
            return {k: EnergyShare(**d) for k, d in old_roll_up(records, re.energy_j, lambda r: old_groups(r, attr)).items()}

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


def old_intervals_from_records(records: Sequence, energy_series_fn: Callable[[int, int], float | None],
                           interval_s: float, start_ns: int | None = None, end_ns: int | None = None,
                           ) -> Intervals:
    """Per-interval energy and token counts from client records (see the module docstring).

    ``energy_series_fn(t0_ns, t1_ns)`` returns the energy (J) of one boundary over that span of the
    run's clock (None where it cannot: that interval is dropped). Counted: the
    tokens of every stream that produced any, warm-up and failed ones included (the energy of an
    interval paid for them too; the same rule as ``metrics.window_tokens``: a stream without
    usage counts its chunks). The span defaults to first send .. last token of the measured,
    successful requests.
    """
    if not interval_s > 0:
        raise UserError(f"attribution interval must be > 0 s, got {interval_s}")
    ok = [r for r in records if _get(r, "ok") and not _get(r, "warmup") and _get(r, "first_token_ns") is not None]
    if not ok:
        raise UserError("no successful requests with a first token: nothing to attribute")
    t0 = start_ns if start_ns is not None else min(_get(r, "sent_ns") for r in ok)
    t1 = end_ns if end_ns is not None else max((_get(r, "last_token_ns") or _get(r, "first_token_ns")) for r in ok)
    streams = [r for r in records if _get(r, "first_token_ns") is not None]
    step = int(round(interval_s * 1e9))
    n = max(1, int(math.ceil((t1 - t0) / step)))
    edges = t0 + step * np.arange(n + 1, dtype=np.int64)
    pre = np.zeros(n)
    dec = np.zeros(n)

    def bin_of(t: int) -> int | None:
        if t < t0 or t > edges[-1]:
            return None
        return min(n - 1, int((t - t0) // step))

    for r in streams:
        ft = _get(r, "first_token_ns")
        b = bin_of(ft)
        inp = _get(r, "input_tokens") or _get(r, "requested_input_tokens") or 0
        if b is not None:
            pre[b] += inp
        chunks = _get(r, "chunk_ns") or []
        out = _get(r, "output_tokens")
        out = (len(chunks) or 1) if out is None else out
        if out <= 0:
            continue
        if chunks:
            share = out / len(chunks)
            for c in chunks:
                bc = bin_of(c)
                if bc is not None:
                    dec[bc] += share
        else:
            lt = _get(r, "last_token_ns") or ft
            if out == 1 or lt == ft:
                if b is not None:
                    dec[b] += out
            else:
                ts = np.linspace(ft, lt, out)
                for tok_t in ts:
                    bc = bin_of(int(tok_t))
                    if bc is not None:
                        dec[bc] += 1.0
    energy = np.full(n, np.nan)
    for i in range(n):
        e = energy_series_fn(int(edges[i]), int(edges[i + 1]))
        if e is not None and math.isfinite(e):
            energy[i] = e
    keep = ~np.isnan(energy)
    return Intervals(edges[:-1][keep], np.full(int(keep.sum()), step / 1e9), energy[keep], pre[keep], dec[keep])


# ---------------------------------------------------------------- randomized records and a meter

E_PREFILL, E_DECODE, IDLE_W = 0.004, 0.25, 80.0
TARGETS = ("http://a:8000", "http://b:8000")


def random_records(seed: int, n: int = 400, span_s: float = 30.0) -> list[RequestRecord]:
    rng = np.random.default_rng(seed)
    recs = []
    for i in range(n):
        sent = int(rng.uniform(0.0, span_s - 3) * S)
        kind = rng.random()
        n_in = int(rng.integers(0, 3000)) if rng.random() > 0.05 else 0
        n_out = int(rng.integers(1, 200))
        first = sent + int(rng.uniform(30, 400) * MS)
        itl = int(rng.uniform(5, 40) * MS)
        chunks = [first + k * itl + int(rng.integers(0, MS)) for k in range(max(1, n_out // int(rng.choice([1, 1, 4]))))]
        chunks.sort()
        d = dict(id=i, level=0, worker=int(rng.integers(0, 4)), sent_ns=sent, warmup=bool(sent < 2 * S),
                 tenant=[None, "acme", "globex", "", "initech"][i % 5],
                 tags=[["batch"], [], ["a", "b"], ["b"], ["a", "a"]][int(rng.integers(0, 5))],
                 model=["m1", "m2", None][int(rng.integers(0, 3))], target=TARGETS[int(rng.integers(0, 2))])
        if kind < 0.05:  # failed before any token
            d.update(ok=False, error="connect", end_ns=sent + MS)
        elif kind < 0.10:  # failed mid-stream: tokens counted from its chunks
            d.update(ok=False, error="disconnect", first_token_ns=first, last_token_ns=chunks[len(chunks) // 2],
                     chunk_ns=chunks[: len(chunks) // 2 + 1], input_tokens=None, output_tokens=None,
                     requested_input_tokens=n_in)
        elif kind < 0.45:  # chunk stamps kept
            d.update(first_token_ns=first, last_token_ns=chunks[-1], end_ns=chunks[-1] + MS, chunk_ns=chunks,
                     input_tokens=n_in, output_tokens=n_out)
        elif kind < 0.55:  # no chunk stamps and no last token
            d.update(first_token_ns=first, input_tokens=n_in, output_tokens=n_out, end_ns=first + 3 * MS)
        else:  # no chunk stamps: spread between first and last token
            last = first + itl * (n_out - 1)
            d.update(first_token_ns=first, last_token_ns=last, end_ns=None if kind > 0.9 else last + MS,
                     input_tokens=n_in, output_tokens=n_out if kind < 0.97 else 1)
        recs.append(RequestRecord(**d))
    return recs


def meter(recs, flat: bool = False) -> Callable[[int, int], float]:
    """Energy over [a, b): idle power × time, plus (unless flat) each prompt's energy at its first token
    and each output token's at its chunk (or its first token)."""
    ev_t, ev_e = [], []
    for r in recs:
        if r.first_token_ns is None:
            continue
        ev_t.append(r.first_token_ns)
        ev_e.append(E_PREFILL * (r.input_tokens or 0))
        for c in r.chunk_ns or [r.first_token_ns]:
            ev_t.append(c)
            ev_e.append(E_DECODE * (r.output_tokens or 1) / max(1, len(r.chunk_ns)))
    order = np.argsort(ev_t)
    t, cum = np.array(ev_t)[order], np.concatenate([[0.0], np.cumsum(np.array(ev_e)[order])])

    def f(a: int, b: int) -> float:
        work = 0.0 if flat else cum[np.searchsorted(t, b)] - cum[np.searchsorted(t, a)]
        return (IDLE_W + (150.0 if flat else 0.0)) * (b - a) / S + work
    return f


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    """Blocks of 37 requests, so that every test crosses block boundaries (the default is 1024)."""
    import wattbench.accounting.request_energy as m

    monkeypatch.setattr(m, "WORK_BLOCK_ROWS", 37)
    monkeypatch.setattr(m, "TOKENS_PER_GROUP", 500)


def as_set(recs):
    rs = RecordSet.from_records(recs, spill_bytes=2000)
    assert rs.spilled
    return rs


WINDOWS = [(2 * S, 28 * S, None), (2 * S, 28 * S, 0.25), (5 * S, 9 * S, None), (0, 31 * S, 40.0)]


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("window", WINDOWS)
def test_work_per_interval_is_the_old_one_exactly(seed, window):
    """Refactor check, not a truth: the new code equals the old code copied in this file. What is right is
    checked by hand in test_work_per_interval_by_hand (below)."""
    recs = random_records(seed, n=1500 if seed == 1 else 400)
    t0, t1, iv = window
    edges = _edges(t0, t1, iv or default_interval_s((t1 - t0) / 1e9, 0.1))
    want = old_work_per_interval(recs, edges)
    for got in (work_per_interval(recs, edges), work_per_interval(as_set(recs), edges)):
        assert got[0] == want[0]
        assert np.array_equal(got[1], want[1]) and np.array_equal(got[2], want[2])


@pytest.mark.parametrize("seed", [3, 4])
@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("idle_w,attribute_idle,flat", [(IDLE_W, False, False), (IDLE_W, True, False),
                                                        (None, False, False), (IDLE_W, False, True)])
def test_split_matches_the_old_split(seed, window, idle_w, attribute_idle, flat):
    """Refactor check, not a truth: the new code equals the old code copied in this file. What is right is
    checked by hand in tests/unit/accounting/test_request_energy.py (conservation, recovery of a known
    per-token model)."""
    recs = random_records(seed)
    t0, t1, iv = window
    f = meter(recs, flat)
    args = (t0, t1, f, f(t0, t1), idle_w)
    kw = dict(interval_s=iv, attribute_idle=attribute_idle, update_period_s=0.1)
    want = old_split_request_energy(recs, "accelerator", *args, **kw)
    for records in (recs, as_set(recs)):
        got = split_request_energy(records, "accelerator", *args, **kw)
        # the same fit from the same token sums: identical figures and labels
        assert (got.basis, got.weighting, got.weighting_reason, got.idle_attributed, got.interval_s, got.notes) == \
            (want.basis, want.weighting, want.weighting_reason, want.idle_attributed, want.interval_s, want.notes)
        assert got.fit == want.fit
        assert got.method == want.method
        # the same requests; energies equal up to the rounding of the matrix product (BLAS: its last
        # bit depends on the thread count and row blocking, in the old code as in the new)
        assert list(got.energy_j) == list(want.energy_j)
        a, b = np.array(list(got.energy_j.values())), np.array(list(want.energy_j.values()))
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12 * want.total_j)
        assert got.total_j == pytest.approx(want.total_j, rel=1e-13)
    if window[:2] == (2 * S, 28 * S) and idle_w is not None:  # both weightings are exercised
        assert want.weighting == ("tokens" if flat else "prefill_decode")


def _level(recs, f, boundaries=("accelerator", "node")):
    w = SimpleNamespace(start_ns=2 * S, end_ns=28 * S, duration_s=26.0)
    energy = {b: SimpleNamespace(energy_j=f(w.start_ns, w.end_ns) * (1 + k), idle_power_w=IDLE_W * (1 + k),
                                 update_period_s=0.1, carbon_intensity_g_per_kwh=400.0)
              for k, b in enumerate(boundaries)}
    energy["cpu"] = SimpleNamespace(energy_j=None, idle_power_w=None, update_period_s=None)  # not measured
    return SimpleNamespace(window=w, energy=energy, attribution={}, energy_steady={}, steady_window=None,
                           requests=SimpleNamespace(completed=len(recs)))


def _fn_for(f):
    return lambda b: (lambda a, c: f(a, c) * (2.0 if b == "node" else 1.0))


@pytest.mark.parametrize("seed", [5, 6])
@pytest.mark.parametrize("attribute_idle", [False, True])
def test_attribute_level_and_carbon_on_a_spilled_set_match_the_old_code(seed, attribute_idle):
    """Refactor check, not a truth: the new code equals the old code copied in this file. What is right is
    checked by hand in test_attribute_level_splits_and_rolls_up_by_hand (below)."""
    recs = random_records(seed)
    f = meter(recs)
    old_recs, list_recs = [r.model_copy(deep=True) for r in recs], [r.model_copy(deep=True) for r in recs]
    old_lv, list_lv, set_lv = _level(recs, f), _level(recs, f), _level(recs, f)
    old_attribute_level(old_lv, old_recs, _fn_for(f), attribute_idle=attribute_idle)
    attribute_level(list_lv, list_recs, _fn_for(f), attribute_idle=attribute_idle)
    rs = as_set(recs)
    attribute_level(set_lv, rs, _fn_for(f), attribute_idle=attribute_idle)
    for lv, records in ((old_lv, old_recs), (list_lv, list_recs), (set_lv, rs)):
        # the per-request part of apply_carbon (the window figures need an intensity series)
        apply_carbon(SimpleNamespace(**{**vars(lv), "window": None}), records, None, 0, 0, _fn_for(f), 1.2)
    back = list(rs)
    assert [r.id for r in back] == [r.id for r in recs]
    assert set(old_lv.attribution) == {"accelerator", "node"}
    for b in old_lv.attribution:
        want = old_lv.attribution[b]
        for lv in (list_lv, set_lv):
            _same_attribution(lv.attribution[b], want)
    for o, li, s in zip(old_recs, list_recs, back):
        assert list(o.energy_j) == list(li.energy_j) == list(s.energy_j)
        for b in o.energy_j:
            assert li.energy_j[b] == s.energy_j[b]  # list and set: the same computation
            assert s.energy_j[b] == pytest.approx(o.energy_j[b], rel=1e-12, abs=1e-15)
            assert s.carbon_g[b] == li.carbon_g[b] == co2.carbon_g(s.energy_j[b], 400.0, 1.2)
        assert o.energy_method == li.energy_method == s.energy_method
        assert list(o.carbon_g) == list(s.carbon_g)
    # the roll-ups from the coded groups are exactly the old roll_up over the same per-request figures
    for b, att in set_lv.attribution.items():
        per_id = {r.id: r.energy_j[b] for r in back if b in r.energy_j}
        for attr, got in (("tenant", att.by_tenant), ("tags", att.by_tag), ("model", att.by_model)):
            want = old_roll_up(back, per_id, lambda r: old_groups(r, attr))
            assert list(got) == list(want)
            for g, d in want.items():
                assert got[g].model_dump(exclude={"carbon_g"}) == EnergyShare(**d).model_dump(exclude={"carbon_g"})


def _same_attribution(got: RequestAttribution, want: RequestAttribution) -> None:
    g, w = got.model_dump(), want.model_dump()
    for k in ("boundary", "method", "basis", "weighting", "weighting_reason", "idle_attributed", "interval_s",
              "requests", "j_per_prefill_token", "j_per_decode_token", "unavailable_reason"):
        assert g[k] == w[k], k
    assert g["energy_j"] == pytest.approx(w["energy_j"], rel=1e-13)
    for k in ("by_tenant", "by_tag", "by_model", "by_target"):
        assert list(g[k]) == list(w[k]), k  # the same groups in the same order
        for name in w[k]:
            a, b = g[k][name], w[k][name]
            assert (a["requests"], a["output_tokens"]) == (b["requests"], b["output_tokens"])
            for x in ("energy_j", "share", "j_per_output_token", "carbon_g"):
                assert a[x] == pytest.approx(b[x], rel=1e-12), (k, name, x)


def test_a_boundary_that_cannot_be_split_says_why_on_a_set():
    recs = random_records(7, n=30)
    lv = _level(recs, meter(recs))
    lv.window = SimpleNamespace(start_ns=40 * S, end_ns=41 * S, duration_s=1.0)  # after every request
    rs = as_set(recs)
    attribute_level(lv, rs, _fn_for(meter(recs)))
    assert "no request produced tokens" in lv.attribution["accelerator"].unavailable_reason
    assert all(r.energy_j == {} for r in rs)


def test_annotate_entry_merges_dict_fields_and_leaves_the_rest():
    recs = random_records(8, n=50)
    rs = as_set(recs)
    v = np.arange(50, dtype=float) / 7
    rs.annotate_entry("energy_j", "node", v, np.arange(50) % 3 == 0)
    rs.annotate_entry("energy_j", "accelerator", v * 2, np.arange(50) % 2 == 0)
    rs.annotate_entry("energy_method", "node", "how", np.arange(50) % 3 == 0)
    c = np.full(50, np.nan)
    c[::4] = 1.5
    rs.annotate_entry("carbon_g", "node", c, np.arange(50) % 2 == 0)
    for i, r in enumerate(rs):
        want = {}
        if i % 3 == 0:
            want["node"] = v[i]
        if i % 2 == 0:
            want["accelerator"] = v[i] * 2
        assert r.energy_j == want and list(r.energy_j) == list(want)
        assert r.energy_method == ({"node": "how"} if i % 3 == 0 else {})
        assert r.carbon_g == ({"node": 1.5 if i % 4 == 0 else None} if i % 2 == 0 else {})
    ent = rs.entry("energy_j", "node")
    assert ent[0] is v and rs.entry("energy_j", "gpu") is None and rs.entry("tags", "x") is None
    with pytest.raises(ValueError):
        rs.annotate_entry("energy_j", "x", np.zeros(3))


@pytest.mark.parametrize("seed", [9, 10])
@pytest.mark.parametrize("span", [(None, None), (3 * S, 20 * S)])
def test_intervals_from_records_streams_the_same_figures(tmp_path, seed, span):
    """Refactor check, not a truth: the new code equals the old code copied in this file. What is right is
    checked by hand in
    tests/unit/accounting/test_attribution.py::test_intervals_from_records_and_fit_recover_truth."""
    recs = random_records(seed)
    f = meter(recs)
    want = old_intervals_from_records(recs, f, 0.7, *span)
    rundir.append_requests(tmp_path, recs)
    one_pass = rundir.iter_requests(tmp_path)  # a one-shot iterator is enough when the span is given
    sources = [recs, as_set(recs), _Reread(tmp_path)] + ([one_pass] if span[0] is not None else [])
    for src in sources:
        got = intervals_from_records(src, f, 0.7, *span)
        for k in ("start_ns", "duration_s", "energy_j", "prefill_tokens", "decode_tokens"):
            assert np.array_equal(getattr(got, k), getattr(want, k)), k


class _Reread:
    def __init__(self, d):
        self.d = d

    def __iter__(self):
        return rundir.iter_requests(self.d)


def test_intervals_from_records_refuses_without_a_measured_request():
    recs = [r for r in random_records(11, n=60) if r.warmup or not r.ok]
    with pytest.raises(UserError, match="no successful requests"):
        intervals_from_records(recs, meter(recs), 1.0)
    with pytest.raises(UserError, match="no successful requests"):
        intervals_from_records(iter(recs), meter(recs), 1.0, 0, 30 * S)


def test_iter_requests_keeps_the_damage_rules(tmp_path):
    recs = random_records(12, n=5)
    rundir.append_requests(tmp_path, recs)
    path = tmp_path / rundir.REQUESTS_FILE
    good = path.read_bytes()
    assert [r.id for r in rundir.iter_requests(tmp_path)] == [r.id for r in recs]
    path.write_bytes(good + b'{"id": 9, "lev')  # torn last line: a note with its number, the rest read
    notes: list[str] = []
    assert len(list(rundir.iter_requests(tmp_path, notes))) == 5
    assert notes == [f"{rundir.REQUESTS_FILE}: last line 6 is truncated (run stopped while writing); skipped"]
    with pytest.raises(UserError, match="line 6: not valid JSON"):
        list(rundir.iter_requests(tmp_path))
    lines = good.split(b"\n")
    path.write_bytes(b"\n".join(lines[:2] + [b"{oops"] + lines[2:]))  # damage inside: always an error
    with pytest.raises(UserError, match="line 3: not valid JSON"):
        list(rundir.iter_requests(tmp_path, []))
    path.write_bytes(b"\n".join(lines[:1] + [b'{"id": "\xff"}'] + lines[1:]))
    with pytest.raises(UserError, match=f"line 2: not UTF-8 text .* at byte {len(lines[0]) + 9}"):
        list(rundir.iter_requests(tmp_path, []))
    path.write_bytes(b"\n".join(lines[:1] + [b"[1, 2]"] + lines[1:]))
    with pytest.raises(UserError, match="line 2: expected a JSON object"):
        list(rundir.iter_requests(tmp_path, []))
    notes = []
    assert list(rundir.iter_requests(tmp_path / "nowhere", notes)) == [] and "missing" in notes[0]


def test_the_runs_regression_intervals_read_requests_jsonl_as_a_stream(tmp_path):
    """Refactor check, not a truth: the new code equals the old code copied in this file. What is right is
    checked by hand in
    tests/unit/accounting/test_attribution.py::test_intervals_from_records_and_fit_recover_truth.
    run.analyses._intervals (client timing): the run's requests.jsonl read twice, one record at a
    time, gives the intervals the old whole-file read did."""
    from wattbench.run import analyses

    recs = random_records(13)
    rundir.append_requests(tmp_path, recs[:200])
    rundir.append_requests(tmp_path, recs[200:])
    f = meter(recs)
    levels = [SimpleNamespace(window=SimpleNamespace(duration_s=d)) for d in (11.0, 13.0)]
    session = SimpleNamespace(scraper=None, run_dir=tmp_path, result=SimpleNamespace(levels=levels))
    got, source = analyses._intervals(session, f)
    want = old_intervals_from_records(rundir.load_requests(tmp_path), f, interval_s=max(0.5, 24.0 / 120))
    assert source == "client timing" and len(got) == len(want) > 20
    for k in ("start_ns", "duration_s", "energy_j", "prefill_tokens", "decode_tokens"):
        assert np.array_equal(getattr(got, k), getattr(want, k)), k


def test_requests_jsonl_is_the_same_from_a_set_as_from_a_list(tmp_path):
    """What run/level.py writes after attribute + carbon: the same bytes whether the level's records
    were a list (fields set on the objects) or a spilled RecordSet (annotate_entry-d entries)."""
    recs = random_records(14)
    f = meter(recs)
    list_recs, rs = [r.model_copy(deep=True) for r in recs], as_set(recs)
    for records, d in ((list_recs, tmp_path / "list"), (rs, tmp_path / "set")):
        lv = _level(recs, f)
        attribute_level(lv, records, _fn_for(f))
        apply_carbon(SimpleNamespace(**{**vars(lv), "window": None}), records, None, 0, 0, _fn_for(f), 1.2)
        rundir.append_requests(d, records)
    text = (tmp_path / "set" / rundir.REQUESTS_FILE).read_bytes()
    assert text == (tmp_path / "list" / rundir.REQUESTS_FILE).read_bytes()
    assert b'"energy_j":{"accelerator":' in text and b'"carbon_g":{"accelerator":' in text


# ------------------------------------------------------------------ hand-derived truths
# The comparisons with the old code above prove a refactor (the new code computes what the old one
# did), not that either is right; these fix what the rules say on records small enough to work out
# by hand (accounting/request_energy.py's module docstring, rules 2, 4 and the roll-ups).


def test_work_per_interval_by_hand():
    """Rule 2 on three 1 s intervals: prompt tokens land in the interval holding the first token,
    output tokens at their chunk arrivals (a chunk of several tokens spreads them evenly over
    itself), only what lies inside the window counts, a request without a first token does none."""
    def r(i, sent_s, chunks_s, out, inp, **kw):
        ch = [int(c * S) for c in chunks_s]
        return RequestRecord(id=i, level=0, sent_ns=int(sent_s * S), first_token_ns=ch[0] if ch else None,
                             last_token_ns=ch[-1] if ch else None, end_ns=(ch[-1] if ch else int(sent_s * S)) + MS,
                             chunk_ns=ch, output_tokens=out, input_tokens=inp, **kw)

    recs = [
        r(0, 0.1, [0.5, 1.2, 1.8, 2.5], out=4, inp=100),  # one token a chunk
        r(1, 0.2, [1.5, 2.2], out=6, inp=30),  # three tokens a chunk
        r(2, -1.0, [-0.5, 0.5], out=2, inp=50, warmup=True),  # a warm-up leftover: prefill before the window
        RequestRecord(id=3, level=0, sent_ns=int(0.3 * S), ok=False, error="http_500"),  # no work
    ]
    edges = np.array([0, 1, 2, 3], dtype=np.int64) * S
    for records in (recs, RecordSet.from_records(recs)):
        ids, prefill, decode = work_per_interval(records, edges)
        assert ids == [0, 1, 2]
        np.testing.assert_array_equal(prefill, [[100, 0, 0], [0, 30, 0], [0, 0, 0]])
        np.testing.assert_array_equal(decode, [[1, 2, 1], [0, 3, 3], [1, 0, 0]])


def test_attribute_level_splits_and_rolls_up_by_hand():
    """Rules 4 and the roll-ups: a flat 100 W meter over a 10 s window (1,000 J, no idle known, so
    the gross energy is split) and two requests working evenly through it, 30 and 10 tokens: every
    interval's energy goes 3:1, so 750 J and 250 J, rolled up by tenant, model and target as such;
    carbon at 400 gCO2e/kWh is J / 3.6e6 × 400."""
    def r(i, n_tokens, tenant, target):
        ch = [int((0.05 + 9.9 * k / (n_tokens - 1)) * S) for k in range(n_tokens)]
        return RequestRecord(id=i, level=0, sent_ns=0, first_token_ns=ch[0], last_token_ns=ch[-1], end_ns=ch[-1],
                             chunk_ns=ch, output_tokens=n_tokens, input_tokens=0, tenant=tenant, model="m",
                             target=target)

    recs = [r(0, 30, "acme", "http://a"), r(1, 10, "globex", "http://b")]
    w = SimpleNamespace(start_ns=0, end_ns=10 * S, duration_s=10.0)
    lv = SimpleNamespace(window=w, attribution={}, energy_steady={}, steady_window=None,
                         requests=SimpleNamespace(completed=2),
                         energy={"accelerator": SimpleNamespace(energy_j=1000.0, idle_power_w=None, update_period_s=0.1,
                                                                carbon_intensity_g_per_kwh=400.0)})
    flat = lambda b: (lambda a, c: 100.0 * (c - a) / S)  # noqa: E731
    rs = RecordSet.from_records(recs)
    attribute_level(lv, rs, flat)
    apply_carbon(SimpleNamespace(**{**vars(lv), "window": None}), rs, None, 0, 0, flat, 1.0)
    att = lv.attribution["accelerator"]
    assert att.energy_j == pytest.approx(1000.0, rel=1e-9) and att.weighting == "tokens"
    back = {x.id: x for x in rs}
    assert back[0].energy_j["accelerator"] == pytest.approx(750.0, rel=1e-9)
    assert back[1].energy_j["accelerator"] == pytest.approx(250.0, rel=1e-9)
    assert back[0].carbon_g["accelerator"] == pytest.approx(750.0 / 3.6e6 * 400.0, rel=1e-9)
    assert {k: v.energy_j for k, v in att.by_tenant.items()} == pytest.approx({"acme": 750.0, "globex": 250.0})
    assert {k: v.energy_j for k, v in att.by_target.items()} == pytest.approx({"http://a": 750.0, "http://b": 250.0})
    assert att.by_model["m"].energy_j == pytest.approx(1000.0) and att.by_model["m"].requests == 2
    assert att.by_tenant["acme"].j_per_output_token == pytest.approx(750.0 / 30)
    assert att.by_tenant["acme"].share == pytest.approx(0.75)
