"""Energy per request: conservation, and recovery against a known per-token model."""

import numpy as np
import pytest

from tests.fakes.scripted_sensor import build_log, counter_channel
from wattbench.accounting.boundaries import boundary_totals
from wattbench.accounting.request_energy import roll_up, split_request_energy
from wattbench.core.errors import UserError
from wattbench.core.schema import RequestRecord

S = 1_000_000_000
MS = 1_000_000
IDLE_W = 80.0
E_PREFILL = 0.004  # J per prompt token (truth)
E_DECODE = 0.25  # J per output token (truth)


def scripted_run(seed=7, n_req=120, span_s=40.0, tenants=("acme", "globex", "initech")):
    """Requests with known token times, and a meter whose energy follows the per-token model.

    The energy counter is idle power × time plus each prompt's prefill energy deposited evenly over
    the request's time to first token, plus each output token's decode energy at its chunk; it is
    sampled every 100 ms, like NVML's counter.
    """
    rng = np.random.default_rng(seed)
    recs, truth, events = [], {}, []
    for i in range(n_req):
        sent = int(rng.uniform(0.5, span_s - 6) * S)
        ttft = int(rng.uniform(80, 300) * MS)
        n_in = int(rng.integers(50, 2000))
        n_out = int(rng.integers(20, 160))
        itl = int(rng.uniform(15, 35) * MS)
        first = sent + ttft
        chunks = [first + k * itl for k in range(n_out)]
        tenant = tenants[i % len(tenants)]
        recs.append(RequestRecord(id=i, level=0, sent_ns=sent, first_token_ns=first, last_token_ns=chunks[-1],
                                  end_ns=chunks[-1] + MS, chunk_ns=chunks, input_tokens=n_in, output_tokens=n_out,
                                  tenant=tenant, tags=["batch"] if i % 4 == 0 else [], model="m"))
        truth[i] = E_PREFILL * n_in + E_DECODE * n_out
        for k in range(10):  # prefill: spread over the time to first token
            events.append((sent + (k + 0.5) * ttft / 10, E_PREFILL * n_in / 10))
        events.extend((c, E_DECODE) for c in chunks)
    recs.append(RequestRecord(id=n_req, level=0, sent_ns=S, ok=False, error="http_500"))
    ev_t = np.array([t for t, _ in events])
    ev_e = np.array([e for _, e in events])
    grid = np.arange(0, span_s + 1, 0.1)
    cum = np.array([IDLE_W * t + ev_e[ev_t <= t * S].sum() for t in grid])
    log = build_log((counter_channel("gpu.energy"), grid, cum))
    return recs, truth, log


def energy_fn(log):
    def f(a, b):
        t = boundary_totals(log, a, b).get("accelerator")
        return None if t is None else t.energy_j
    return f


def test_conservation_dynamic_and_gross():
    recs, truth, log = scripted_run()
    t0, t1 = 1 * S, 38 * S
    gross = energy_fn(log)(t0, t1)
    re = split_request_energy(recs, "accelerator", t0, t1, energy_fn(log), gross, IDLE_W)
    assert re.basis == "dynamic"
    assert sum(re.energy_j.values()) == pytest.approx(gross - IDLE_W * 37.0, rel=1e-9)
    assert re.total_j == pytest.approx(gross - IDLE_W * 37.0, rel=1e-9)
    assert len(re.energy_j) == 120  # the failed request did no work and gets none
    gi = split_request_energy(recs, "accelerator", t0, t1, energy_fn(log), gross, IDLE_W, attribute_idle=True)
    assert gi.basis == "gross" and gi.idle_attributed
    assert sum(gi.energy_j.values()) == pytest.approx(gross, rel=1e-9)
    # idle goes by time in flight: the difference per request is proportional to it
    extra = {i: gi.energy_j[i] - re.energy_j[i] for i in re.energy_j}
    r0, r1 = recs[0], recs[1]
    inflight = lambda r: min(r.end_ns, t1) - max(r.sent_ns, t0)  # noqa: E731
    assert extra[0] / extra[1] == pytest.approx(inflight(r0) / inflight(r1), rel=1e-9)
    no_idle = split_request_energy(recs, "accelerator", t0, t1, energy_fn(log), gross, None)
    assert no_idle.basis == "gross" and sum(no_idle.energy_j.values()) == pytest.approx(gross, rel=1e-9)


def test_recovers_each_requests_energy_from_a_known_per_token_model():
    recs, truth, log = scripted_run()
    t0, t1 = 0, 40 * S  # the whole run: every request's work lies inside
    gross = energy_fn(log)(t0, t1)
    re = split_request_energy(recs, "accelerator", t0, t1, energy_fn(log), gross, IDLE_W, update_period_s=0.1)
    assert re.interval_s == pytest.approx(1.0, rel=1e-9) and re.weighting == "prefill_decode", re.weighting_reason
    assert re.fit["j_per_decode_token"] == pytest.approx(E_DECODE, rel=0.05)
    err = np.array([re.energy_j[i] / truth[i] - 1 for i in truth])
    # documented tolerance (docs/accounting.md): every request within 10%, the median within 2%
    assert np.abs(err).max() < 0.10
    assert np.median(np.abs(err)) < 0.02
    # roll-up by tenant: each tenant's total within 3% of its truth, and the tenants add to the total
    tenants = roll_up(recs, re.energy_j, lambda r: [r.tenant] if r.tenant else [])
    for t, d in tenants.items():
        want = sum(truth[r.id] for r in recs if r.tenant == t)
        assert d["energy_j"] == pytest.approx(want, rel=0.03)
    assert sum(d["energy_j"] for d in tenants.values()) == pytest.approx(re.total_j, rel=1e-12)
    tags = roll_up(recs, re.energy_j, lambda r: list(r.tags))
    assert list(tags) == ["batch"] and tags["batch"]["requests"] == 30


def test_unreliable_split_falls_back_to_tokens_and_says_why():
    """A meter that does not follow the tokens (flat power): the fit is unreliable, the weights are tokens."""
    recs, _, _ = scripted_run(n_req=30)
    grid = np.arange(0, 41, 0.1)
    log = build_log((counter_channel("gpu.energy"), grid, 200.0 * grid))
    f = energy_fn(log)
    re = split_request_energy(recs, "accelerator", 0, 40 * S, f, f(0, 40 * S), IDLE_W, interval_s=0.5)
    assert re.weighting == "tokens"
    assert re.weighting_reason.startswith("the prefill/decode split is unreliable: ")
    assert sum(re.energy_j.values()) == pytest.approx(120.0 * 40, rel=1e-9)
    assert "weighted by tokens" in re.method


def test_nothing_to_split_is_a_sentence():
    recs, _, log = scripted_run(n_req=5)
    f = energy_fn(log)
    with pytest.raises(UserError, match="no request produced tokens inside the window"):
        split_request_energy(recs, "accelerator", 39 * S, 40 * S, f, f(39 * S, 40 * S), IDLE_W)
    with pytest.raises(UserError, match="not above idle"):
        split_request_energy(recs, "accelerator", 0, 40 * S, f, 10.0, IDLE_W)


def test_conservation_holds_for_any_requests_and_meter():
    """Property: whatever the requests and the meter, the shares add up to the basis energy."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    req = st.tuples(st.floats(0.0, 9.0), st.floats(0.01, 1.0), st.integers(0, 500), st.integers(1, 60),
                    st.floats(0.001, 0.2), st.booleans())

    @settings(max_examples=60, deadline=None)
    @given(st.lists(req, min_size=1, max_size=25), st.lists(st.floats(0.0, 500.0), min_size=3, max_size=3),
           st.sampled_from([None, 50.0]), st.booleans())
    def check(reqs, watts, idle_w, attribute_idle):
        recs = []
        for i, (sent, ttft, n_in, n_out, itl, chunked) in enumerate(reqs):
            s = int(sent * S)
            first = s + int(ttft * S)
            chunks = [first + int(k * itl * S) for k in range(n_out)]
            recs.append(RequestRecord(id=i, level=0, sent_ns=s, first_token_ns=first, last_token_ns=chunks[-1],
                                      end_ns=chunks[-1], chunk_ns=chunks if chunked else [], input_tokens=n_in,
                                      output_tokens=n_out))
        grid = np.arange(0, 13.01, 0.1)
        power = np.where(grid < 4, watts[0], np.where(grid < 8, watts[1], watts[2])) + 60.0
        cum = np.concatenate([[0.0], np.cumsum(0.5 * (power[1:] + power[:-1]) * 0.1)])
        log = build_log((counter_channel("gpu.energy"), grid, cum))
        f = energy_fn(log)
        t0, t1 = 0, 12 * S
        gross = f(t0, t1)
        try:
            re = split_request_energy(recs, "accelerator", t0, t1, f, gross, idle_w, attribute_idle=attribute_idle)
        except UserError as e:  # only the documented refusals
            assert "no request produced tokens" in str(e) or "not above idle" in str(e)
            return
        want = gross if (idle_w is None or attribute_idle) else gross - idle_w * 12.0
        assert sum(re.energy_j.values()) == pytest.approx(want, rel=1e-9, abs=1e-9)
        assert all(v >= 0 for v in re.energy_j.values())

    check()


def test_default_interval():
    from wattbench.accounting.request_energy import default_interval_s

    assert default_interval_s(40.0, 0.1) == pytest.approx(1.0, rel=1e-9)  # ten 100 ms meter periods
    assert default_interval_s(40.0, 0.5) == pytest.approx(5.0, rel=1e-9)  # a slow meter: ten of its periods
    assert default_interval_s(4.0, 0.1) == pytest.approx(0.5, rel=1e-9)  # a short window: eighths
    assert default_interval_s(1200.0, 0.1) == pytest.approx(3.0, rel=1e-9)  # a long window: at most 400 intervals
