"""Energy per request, carbon and the run's intervals from a ``RecordSet`` in bounded memory, on
randomized records (warm-up, failed, chunked and not, several tenants, tags, models, targets), as a
list and as a spilled ``RecordSet`` read in small blocks.

Three kinds of check: properties that must hold whatever the figures (tokens and energy conserved,
shares not negative, a scaled meter scales every share, a list and a spilled set give the same
figures); golden outputs (``tests/fixtures/golden/request_energy_stream.json``: every figure on fixed
seeded inputs, so that any change in them fails; see ``tests/golden.py`` to regenerate); and, at the
end, the rules on records small enough to work out by hand."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Callable

import numpy as np
import pytest

from tests import golden
from wattbench.accounting.attribution import intervals_from_records
from wattbench.accounting.carbon import apply_carbon
from wattbench.accounting.request_energy import (
    _edges,
    attribute_level,
    default_interval_s,
    split_request_energy,
    work_per_interval,
)
from wattbench.core.errors import UserError
from wattbench.metrics import carbon as co2
from wattbench.results import rundir
from wattbench.core.recordset import RecordSet
from wattbench.core.schema import RequestRecord

S = 1_000_000_000
MS = 1_000_000

GOLDEN = "request_energy_stream"
ABOUT = ("What accounting/request_energy.py's work_per_interval, split_request_energy and attribute_level (then "
         "apply_carbon), and attribution.intervals_from_records compute on the seeded records and meter of "
         "tests/unit/accounting/test_request_energy_stream.py (random_records, meter). Written from the block-by-block "
         "code when it was checked equal, figure for figure, to the previous per-request implementation on these "
         "inputs. Why the figures are right: the same file's hand-worked tests (test_work_per_interval_by_hand, "
         "test_attribute_level_splits_and_rolls_up_by_hand) and conservation properties pin the rules; this file "
         "pins every other figure.")
REGEN = "WATTBENCH_REGEN_GOLDEN=1 python -m pytest tests/unit/accounting/test_request_energy_stream.py -k golden"


def _golden(key: str, got) -> None:
    """Check one part of the golden file (each test checks its own key, so a regeneration merges)."""
    golden.check_part(GOLDEN, key, got, about=ABOUT, regenerate=REGEN)


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


def _window_edges(window):
    t0, t1, iv = window
    return _edges(t0, t1, iv or default_interval_s((t1 - t0) / 1e9, 0.1))


def _work_tokens(r) -> tuple[float, float]:
    """A request's prompt and output tokens as the split counts them (rule 2: a first token and
    token counts; a stream that never reported its usage does no work here)."""
    if r.first_token_ns is None:
        return 0.0, 0.0
    return float(r.input_tokens or 0), float(r.output_tokens or 0)


def _stream_tokens(r) -> tuple[float, float]:
    """A stream's tokens as intervals_from_records counts them (a stream without usage counts its
    chunks, its prompt the tokens it asked for)."""
    if r.first_token_ns is None:
        return 0.0, 0.0
    inp = r.input_tokens if r.input_tokens is not None else (r.requested_input_tokens or 0)
    out = r.output_tokens if r.output_tokens is not None else (len(r.chunk_ns or []) or 1)
    return float(inp), float(out)


@pytest.mark.parametrize("interval_s", [0.25, 1.0, 40.0])
def test_work_per_interval_conserves_every_requests_tokens(interval_s):
    """A window holding every request: each request's prompt and output tokens all land in some
    interval, whatever the interval length; a request without a first token does no work; a list and
    a spilled set (read 37 rows at a time) give the same matrices exactly."""
    recs = random_records(2, n=400)
    edges = _edges(0, 40 * S, interval_s)  # the last streams end by ~36 s
    ids, pre, dec = work_per_interval(recs, edges)
    by_id = {r.id: r for r in recs}
    assert ids == [r.id for r in recs if sum(_work_tokens(r)) > 0]
    want = np.array([_work_tokens(by_id[i]) for i in ids])
    np.testing.assert_allclose(pre.sum(axis=1), want[:, 0], rtol=1e-12)
    np.testing.assert_allclose(dec.sum(axis=1), want[:, 1], rtol=1e-12)
    assert (pre >= 0).all() and (dec >= 0).all()
    got = work_per_interval(as_set(recs), edges)
    assert got[0] == ids and np.array_equal(got[1], pre) and np.array_equal(got[2], dec)


@pytest.mark.parametrize("window", WINDOWS)
def test_work_per_interval_inside_a_window_is_the_full_windows_work_cut_there(window):
    """Only work inside the window counts: on a grid that shares its edges with a window holding
    everything, each interval of the narrower window holds exactly that interval's work there."""
    recs = random_records(1, n=300)
    edges = _window_edges(window)
    step = int(edges[1] - edges[0])
    lo, hi = int(edges[0] // step) + 2, int((40 * S - edges[-1]) // step) + 2
    wide = np.concatenate([edges[0] - step * np.arange(lo, 0, -1), edges, edges[-1] + step * np.arange(1, hi)])
    assert wide[0] <= 0 and wide[-1] >= 40 * S
    ids, pre, dec = work_per_interval(recs, edges)
    wids, wpre, wdec = work_per_interval(recs, wide)
    rows = [wids.index(i) for i in ids]
    np.testing.assert_allclose(pre, wpre[rows, lo: lo + edges.size - 1], rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(dec, wdec[rows, lo: lo + edges.size - 1], rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("window", WINDOWS)
def test_work_per_interval_golden(window):
    """Every request's and every interval's work on fixed records, against the golden file."""
    recs = random_records(1, n=150)
    ids, pre, dec = work_per_interval(as_set(recs), _window_edges(window))
    _golden(f"work {window}", {"ids": ids, "prefill_by_request": pre.sum(axis=1), "decode_by_request": dec.sum(axis=1),
                               "prefill_by_interval": pre.sum(axis=0), "decode_by_interval": dec.sum(axis=0)})


SPLITS = [(IDLE_W, False, False), (IDLE_W, True, False), (None, False, False), (IDLE_W, False, True)]


def _split(recs, window, idle_w, attribute_idle, flat, scale=1.0, records=None):
    t0, t1, iv = window
    f = meter(recs, flat)
    g = (lambda a, b: scale * f(a, b))  # noqa: E731
    return split_request_energy(recs if records is None else records, "accelerator", t0, t1, g, g(t0, t1),
                                idle_w, interval_s=iv, attribute_idle=attribute_idle, update_period_s=0.1)


@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("idle_w,attribute_idle,flat", SPLITS)
def test_split_conserves_the_windows_energy(window, idle_w, attribute_idle, flat):
    """Conservation (the module docstring): the per-request energies sum to the window's dynamic
    energy (gross − idle × duration), or to its gross energy when idle is attributed or unknown; no
    share is negative; only requests that worked inside the window get one; a list and a spilled set
    give the same figures."""
    recs = random_records(3)
    t0, t1, _ = window
    got = _split(recs, window, idle_w, attribute_idle, flat)
    gross = meter(recs, flat)(t0, t1)
    basis = gross if (attribute_idle or idle_w is None) else gross - idle_w * (t1 - t0) / 1e9
    assert got.basis == ("dynamic" if basis != gross else "gross")
    assert got.total_j == pytest.approx(basis, rel=1e-12)
    assert sum(got.energy_j.values()) == pytest.approx(basis, rel=1e-12)
    assert all(v >= 0 for v in got.energy_j.values())
    working = {r.id for r in recs if r.first_token_ns is not None and r.first_token_ns <= t1
               and max([r.first_token_ns, r.last_token_ns or 0, *(r.chunk_ns or [])]) >= t0}
    if not got.idle_attributed:  # (idle follows time in flight, work or not)
        assert all(v == 0 for i, v in got.energy_j.items() if i not in working)
    assert got.idle_attributed == (attribute_idle and idle_w is not None)
    on_set = _split(recs, window, idle_w, attribute_idle, flat, records=as_set(recs))
    assert list(on_set.energy_j) == list(got.energy_j)
    np.testing.assert_allclose(on_set.share_j, got.share_j, rtol=1e-12, atol=1e-12 * got.total_j)
    assert (on_set.fit, on_set.method, on_set.notes) == (got.fit, got.method, got.notes)
    if window[:2] == (2 * S, 28 * S) and idle_w is not None:  # both weightings are exercised
        assert got.weighting == ("tokens" if flat else "prefill_decode")


@pytest.mark.parametrize("idle_w,attribute_idle,flat", SPLITS)
def test_split_scales_with_the_meter_and_idle_only_adds(idle_w, attribute_idle, flat):
    """A meter reading k times more (idle power too) gives every request k times its energy, with the
    same weighting; attributing idle only adds to each request's share."""
    recs = random_records(4, n=200)
    window = (2 * S, 28 * S, None)
    one = _split(recs, window, idle_w, attribute_idle, flat)
    k = 3.0
    three = _split(recs, window, None if idle_w is None else k * idle_w, attribute_idle, flat, scale=k)
    assert three.weighting == one.weighting and list(three.energy_j) == list(one.energy_j)
    np.testing.assert_allclose(three.share_j, k * one.share_j, rtol=1e-9, atol=1e-12 * three.total_j)
    if attribute_idle:
        without = _split(recs, window, idle_w, False, flat)
        assert list(without.energy_j) == list(one.energy_j)
        assert (one.share_j >= without.share_j - 1e-12 * one.total_j).all()
        assert one.total_j - without.total_j == pytest.approx(idle_w * 26.0, rel=1e-9)


@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("idle_w,attribute_idle,flat", SPLITS)
def test_split_golden(window, idle_w, attribute_idle, flat):
    """Every request's energy, the labels and the fit on fixed records, against the golden file."""
    recs = random_records(3, n=120)
    got = _split(recs, window, idle_w, attribute_idle, flat, records=as_set(recs))
    _golden(f"split {window} idle_w={idle_w} attribute_idle={attribute_idle} flat={flat}",
            {k: getattr(got, k) for k in ("basis", "weighting", "weighting_reason", "idle_attributed", "interval_s",
                                          "notes", "fit", "method", "total_j", "energy_j")})


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


@pytest.mark.parametrize("attribute_idle", [False, True])
def test_attribute_level_rolls_up_what_it_split_and_carbon_follows(attribute_idle):
    """attribute_level then apply_carbon on a spilled set: each boundary's per-request energies sum
    to its attributed energy; every roll-up (tenant, tag, model, target) is the sum of its requests'
    energies and tokens, and the groups of a partition (tenant, model, target) sum to the whole with
    shares summing to 1; each request's carbon is its energy at the level's intensity × PUE; the
    list and the spilled set give the same figures."""
    recs = random_records(5)
    f = meter(recs)
    list_recs, rs = [r.model_copy(deep=True) for r in recs], as_set(recs)
    list_lv, set_lv = _level(recs, f), _level(recs, f)
    attribute_level(list_lv, list_recs, _fn_for(f), attribute_idle=attribute_idle)
    attribute_level(set_lv, rs, _fn_for(f), attribute_idle=attribute_idle)
    for lv, records in ((list_lv, list_recs), (set_lv, rs)):
        apply_carbon(SimpleNamespace(**{**vars(lv), "window": None}), records, None, 0, 0, _fn_for(f), 1.2)
    back = list(rs)
    assert [r.id for r in back] == [r.id for r in recs]
    assert set(set_lv.attribution) == {"accelerator", "node"}  # cpu: not measured, so not split
    for b, att in set_lv.attribution.items():
        assert att.model_dump() == list_lv.attribution[b].model_dump()
        per = {r.id: r for r in back if b in r.energy_j}
        assert sum(r.energy_j[b] for r in per.values()) == pytest.approx(att.energy_j, rel=1e-12)
        assert att.requests == len(per)
        for r in per.values():
            assert r.carbon_g[b] == co2.carbon_g(r.energy_j[b], 400.0, 1.2)
        for attr, groups in (("tenant", att.by_tenant), ("tags", att.by_tag), ("model", att.by_model),
                             ("target", att.by_target)):
            for name, g in groups.items():
                n = {r.id: _names(r, attr).count(name) for r in per.values()}  # a repeated tag counts twice
                assert g.requests == sum(n.values()), (attr, name)
                assert g.energy_j == pytest.approx(sum(n[i] * r.energy_j[b] for i, r in per.items()), rel=1e-12)
                assert g.output_tokens == sum(n[i] * (r.output_tokens or 0) for i, r in per.items())
            if attr != "tags":  # one group per request
                assert sum(g.energy_j for g in groups.values()) == pytest.approx(att.energy_j, rel=1e-12)
                assert sum(g.share for g in groups.values()) == pytest.approx(1.0, rel=1e-12)
    for li, s in zip(list_recs, back):
        assert li.energy_j == s.energy_j and li.carbon_g == s.carbon_g and li.energy_method == s.energy_method


def _names(r, attr: str) -> list[str]:
    """The groups a record counts in: each of its tags, or its value ("(none)" when unset)."""
    v = getattr(r, attr)
    return [str(t) for t in v or []] if attr == "tags" else [str(v) if v not in (None, "") else "(none)"]


@pytest.mark.parametrize("attribute_idle", [False, True])
def test_attribute_level_golden(attribute_idle):
    """Each boundary's attribution (roll-ups included) and each request's energy, carbon and method
    on fixed records, against the golden file."""
    recs = random_records(5, n=120)
    f = meter(recs)
    lv, rs = _level(recs, f), as_set(recs)
    attribute_level(lv, rs, _fn_for(f), attribute_idle=attribute_idle)
    apply_carbon(SimpleNamespace(**{**vars(lv), "window": None}), rs, None, 0, 0, _fn_for(f), 1.2)
    _golden(f"attribute_level attribute_idle={attribute_idle}",
            {"attribution": {b: a.model_dump() for b, a in lv.attribution.items()},
             "requests": [[r.id, r.energy_j, r.carbon_g] for r in rs],
             "methods": sorted({f"{b}: {m}" for r in rs for b, m in r.energy_method.items()})})


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


@pytest.mark.parametrize("span", [(None, None), (3 * S, 20 * S)])
def test_intervals_from_records_conserve_and_stream_the_same_figures(tmp_path, span):
    """Each interval's energy is the meter's over it; over a span holding every stream, every
    prompt's and output token is counted once; a list, a spilled set, a re-read requests.jsonl and
    (when the span is given) a one-pass iterator give the same arrays exactly."""
    recs = random_records(9)
    f = meter(recs)
    want = intervals_from_records(recs, f, 0.7, *span)
    starts = want.start_ns.astype(np.int64)
    ends = starts + np.round(want.duration_s * 1e9).astype(np.int64)
    np.testing.assert_allclose(want.energy_j, [f(int(a), int(b)) for a, b in zip(starts, ends)], rtol=1e-12)
    wide = intervals_from_records(recs, f, 0.7, 0, 40 * S)
    tokens = np.array([_stream_tokens(r) for r in recs])
    assert wide.prefill_tokens.sum() == pytest.approx(tokens[:, 0].sum(), rel=1e-12)
    assert wide.decode_tokens.sum() == pytest.approx(tokens[:, 1].sum(), rel=1e-12)
    rundir.append_requests(tmp_path, recs)
    one_pass = rundir.iter_requests(tmp_path)  # a one-shot iterator is enough when the span is given
    for src in [as_set(recs), _Reread(tmp_path)] + ([one_pass] if span[0] is not None else []):
        got = intervals_from_records(src, f, 0.7, *span)
        for k in ("start_ns", "duration_s", "energy_j", "prefill_tokens", "decode_tokens"):
            assert np.array_equal(getattr(got, k), getattr(want, k)), k


@pytest.mark.parametrize("span", [(None, None), (3 * S, 20 * S)])
def test_intervals_from_records_golden(span):
    """The intervals of fixed records, against the golden file."""
    recs = random_records(10, n=120)
    got = intervals_from_records(as_set(recs), meter(recs), 0.7, *span)
    _golden(f"intervals {span}", {k: getattr(got, k) for k in
                                  ("start_ns", "duration_s", "energy_j", "prefill_tokens", "decode_tokens")})


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
    """run.analyses._intervals (client timing) reads the run's requests.jsonl (written in two
    appends) one record at a time, twice: the intervals it gives are those of the whole file read at
    once, at the interval length it documents (the levels' duration / 120, at least 0.5 s)."""
    from wattbench.run import analyses

    recs = random_records(13)
    rundir.append_requests(tmp_path, recs[:200])
    rundir.append_requests(tmp_path, recs[200:])
    f = meter(recs)
    levels = [SimpleNamespace(window=SimpleNamespace(duration_s=d)) for d in (11.0, 13.0)]
    session = SimpleNamespace(scraper=None, run_dir=tmp_path, result=SimpleNamespace(levels=levels))
    got, source = analyses._intervals(session, f)
    want = intervals_from_records(rundir.load_requests(tmp_path), f, interval_s=max(0.5, 24.0 / 120))
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
# The properties and golden figures above hold the code to what it computes now, not to what is
# right; these fix what the rules say on records small enough to work out
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


def test_split_spreads_the_energy_of_intervals_without_work_by_weight_over_the_window():
    """Rule 4's gaps: a flat 100 W meter over a 5 s window of 1 s intervals (500 J, no idle known),
    one request of 10 tokens working in [0, 1) s and one of 30 in [3, 4) s: each gets its own
    interval's 100 J, and the 300 J of the three idle intervals go 1:3, so 175 J and 325 J."""
    def r(i, at_s, n):
        ch = [int((at_s + 0.05 + 0.9 * k / (n - 1)) * S) for k in range(n)]
        return RequestRecord(id=i, level=0, sent_ns=int(at_s * S), first_token_ns=ch[0], last_token_ns=ch[-1],
                             end_ns=ch[-1], chunk_ns=ch, output_tokens=n, input_tokens=0)

    recs = [r(0, 0.0, 10), r(1, 3.0, 30)]
    flat = lambda a, c: 100.0 * (c - a) / S  # noqa: E731
    for records in (recs, RecordSet.from_records(recs)):
        got = split_request_energy(records, "accelerator", 0, 5 * S, flat, 500.0, None, interval_s=1.0)
        assert got.weighting == "tokens" and got.basis == "gross"
        assert got.energy_j == pytest.approx({0: 175.0, 1: 325.0}, rel=1e-12)
