import numpy as np
import pytest

from wattbench.accounting.attribution import (cross_check, fit_intervals, fit_prefill_decode,
                                              intervals_from_records, isolating_pair)
from wattbench.core.errors import UserError
from wattbench.core.schema import RequestRecord

E_PREFILL = 0.012  # J per prompt token (truth)
E_DECODE = 0.35  # J per generated token (truth)
IDLE_W = 120.0


def test_regression_recovers_known_coefficients_with_noise():
    rng = np.random.default_rng(1)
    n = 400
    dt = np.full(n, 0.5)
    P = rng.poisson(4000, n) * rng.integers(0, 2, n)  # bursty prefill
    D = rng.integers(50, 1200, n)  # load varies: decode separable from idle power
    E = IDLE_W * dt + E_PREFILL * P + E_DECODE * D + rng.normal(0, 8.0, n)
    f = fit_prefill_decode(E, P, D, dt)
    assert f["j_per_prefill_token"] == pytest.approx(E_PREFILL, rel=0.03)
    assert f["j_per_decode_token"] == pytest.approx(E_DECODE, rel=0.05)
    assert f["idle_power_w"] == pytest.approx(IDLE_W, rel=0.05)
    assert f["r2"] > 0.95 and f["n_intervals"] == n
    assert f["residual_std_j"] == pytest.approx(8.0, rel=0.15)


def test_dynamic_energy_through_origin_and_non_negative():
    rng = np.random.default_rng(2)
    P = rng.integers(0, 5000, 100).astype(float)
    D = rng.integers(100, 800, 100).astype(float)
    E = E_PREFILL * P + E_DECODE * D
    f = fit_prefill_decode(E, P, D, fit_idle=False)
    assert f["j_per_prefill_token"] == pytest.approx(E_PREFILL, rel=1e-9)
    assert f["idle_power_w"] is None
    assert f["status"] == "ok" and f["reasons"] == []
    # a negative true prefill coefficient is clipped to 0: never reported as a bare 0, but unreliable
    E2 = -0.001 * P + E_DECODE * D
    f2 = fit_prefill_decode(E2, P, D, fit_idle=False)
    assert f2["status"] == "unreliable"
    assert f2["j_per_prefill_token"] is None and f2["j_per_decode_token"] is None
    assert f2["unreliable_fit"]["j_per_prefill_token"] == pytest.approx(0.0, rel=1e-9) and f2["unreliable_fit"]["j_per_decode_token"] > 0
    assert any("clamped at 0" in r for r in f2["reasons"])


def test_low_r2_fit_is_unreliable_with_a_sentence():
    """The H200 case (validation part 4): J/decode-token 0.0 and R² 0.13 beside valid figures."""
    rng = np.random.default_rng(3)
    n = 60
    P = rng.integers(0, 5000, n).astype(float)
    D = rng.integers(100, 800, n).astype(float)
    E = 0.001 * P + rng.normal(0, 40.0, n)  # energy barely follows the counts
    f = fit_prefill_decode(E, P, D, fit_idle=False)
    assert f["status"] == "unreliable"
    assert f["r2"] < 0.5
    assert any("R²" in r and "the bar is 0.5" in r for r in f["reasons"])
    assert f["j_per_decode_token"] is None and f["j_per_prefill_token"] is None
    assert all(len(r.split()) >= 6 and "_" not in r for r in f["reasons"])  # sentences, not key names


def test_collinear_counts_and_large_standard_error_are_unreliable():
    from wattbench.accounting.attribution import fit_problems

    rng = np.random.default_rng(4)
    D = rng.integers(100, 800, 80).astype(float)
    P = 10.0 * D + rng.normal(0, 5, 80)  # prompts and outputs move together
    E = E_PREFILL * P + E_DECODE * D + rng.normal(0, 1.0, 80)
    f = fit_prefill_decode(E, P, D, fit_idle=False)
    assert f["status"] == "unreliable"
    assert any("move together" in r for r in f["reasons"])
    se_only = fit_problems({"r2": 0.9, "j_per_prefill_token": 0.01, "se_j_per_prefill_token": 0.02,
                            "j_per_decode_token": 0.3, "se_j_per_decode_token": 0.01, "collinearity": 0.2,
                            "prefill_tokens": 10.0})
    assert se_only == ["J per prefill token (0.01) is smaller than its standard error (0.02)"]


def test_too_few_intervals():
    with pytest.raises(UserError, match="at least"):
        fit_prefill_decode([1, 2, 3], [1, 2, 3], [3, 2, 1], 1.0)


def simulate_requests(rng, n_req=300, span_s=60.0):
    """Requests with known token timing, and the energy they deposit: idle power, each prompt's
    prefill energy at its first token, each output token's decode energy at its chunk."""
    MS = 1_000_000
    recs, events = [], []
    for i in range(n_req):
        sent = int(rng.uniform(0, span_s - 8) * 1e9)
        ttft = int(rng.uniform(50, 400) * MS)
        n_in = int(rng.integers(100, 3000))
        n_out = int(rng.integers(20, 200))
        itl = int(rng.uniform(15, 40) * MS)
        first = sent + ttft
        chunks = [first + k * itl for k in range(n_out)]
        recs.append(RequestRecord(id=i, level=0, sent_ns=sent, first_token_ns=first, last_token_ns=chunks[-1],
                                  end_ns=chunks[-1], chunk_ns=chunks, input_tokens=n_in, output_tokens=n_out))
        events.append((first, E_PREFILL * n_in))
        events.extend((c, E_DECODE) for c in chunks)
    recs.append(RequestRecord(id=n_req, level=0, sent_ns=0, ok=False, error="http_500"))
    ev_t = np.array([t for t, _ in events])
    ev_e = np.array([e for _, e in events])
    order = np.argsort(ev_t)
    ev_t, ev_cum = ev_t[order], np.concatenate([[0.0], np.cumsum(ev_e[order])])

    def energy(t0, t1):
        a = np.searchsorted(ev_t, t0, side="left")
        b = np.searchsorted(ev_t, t1, side="left")
        return IDLE_W * (t1 - t0) / 1e9 + (ev_cum[b] - ev_cum[a]) + rng.normal(0, 2.0)

    return recs, energy


def test_intervals_from_records_and_fit_recover_truth():
    rng = np.random.default_rng(5)
    recs, energy = simulate_requests(rng)
    iv = intervals_from_records(recs, energy, interval_s=1.0)
    assert iv.prefill_tokens.sum() == sum(r.input_tokens for r in recs if r.ok)
    assert iv.decode_tokens.sum() == pytest.approx(sum(r.output_tokens for r in recs if r.ok))
    f = fit_intervals(iv)
    assert f["j_per_prefill_token"] == pytest.approx(E_PREFILL, rel=0.05)
    assert f["j_per_decode_token"] == pytest.approx(E_DECODE, rel=0.05)
    assert f["idle_power_w"] == pytest.approx(IDLE_W, rel=0.05)


def test_intervals_drop_unmeasured_spans_and_spread_without_chunks():
    MS = 1_000_000
    r = RequestRecord(id=0, level=0, sent_ns=0, first_token_ns=100 * MS, last_token_ns=2_900 * MS,
                      input_tokens=50, output_tokens=29)
    iv = intervals_from_records([r], lambda a, b: None if a >= 2_000 * MS else 1.0, interval_s=1.0)
    assert len(iv) == 2
    assert iv.prefill_tokens.tolist() == [50, 0]
    # 29 tokens evenly from 0.1 s to 2.9 s: 100 ms apart -> 9 in [0,1), 10 in [1,2)
    assert iv.decode_tokens.tolist() == [9, 10]


def test_isolating_pair_solves_exactly_and_cross_check():
    pre = {"dynamic_energy_j": E_PREFILL * 200_000 + E_DECODE * 100, "input_tokens": 200_000, "output_tokens": 100}
    dec = {"energy_j": 120.0 * 30 + E_PREFILL * 4000 + E_DECODE * 50_000, "idle_power_w": 120.0,
           "duration_s": 30.0, "input_tokens": 4000, "output_tokens": 50_000}
    p = isolating_pair(pre, dec)
    assert p["j_per_prefill_token"] == pytest.approx(E_PREFILL, rel=1e-9)
    assert p["j_per_decode_token"] == pytest.approx(E_DECODE, rel=1e-9)
    assert p["naive_j_per_prefill_token"] > E_PREFILL  # the one decode token per request inflates it
    cc = cross_check({"j_per_prefill_token": E_PREFILL * 1.1, "j_per_decode_token": E_DECODE}, p)
    assert cc["j_per_prefill_token"]["rel_diff"] == pytest.approx(0.1)
    with pytest.raises(UserError, match="does not separate"):
        isolating_pair({"dynamic_energy_j": 1, "input_tokens": 10, "output_tokens": 1},
                       {"dynamic_energy_j": 2, "input_tokens": 20, "output_tokens": 2})


def test_intervals_from_server_counters_with_a_reset():
    from wattbench.accounting.attribution import intervals_from_counters

    rng = np.random.default_rng(9)
    n = 120
    t = np.cumsum(rng.uniform(0.8e9, 1.2e9, n + 1)).astype(np.int64)
    dp = rng.integers(0, 6000, n).astype(float)
    dg = rng.integers(50, 900, n).astype(float)
    prompt_total = np.concatenate([[1000.0], 1000.0 + np.cumsum(dp)])
    gen_total = np.concatenate([[500.0], 500.0 + np.cumsum(dg)])
    # the server restarted before scrape 60: counters start again from that interval's count
    prompt_total[60:] -= prompt_total[59]
    gen_total[60:] -= gen_total[59]
    energy = {int(t[i]): IDLE_W * (t[i + 1] - t[i]) / 1e9 + E_PREFILL * dp[i] + E_DECODE * dg[i] for i in range(n)}
    iv = intervals_from_counters(t, prompt_total, gen_total, lambda a, b: energy[a] if a != int(t[7]) else None)
    assert len(iv) == n - 1
    assert iv.prefill_tokens.sum() == pytest.approx(dp.sum() - dp[7])
    assert iv.decode_tokens.sum() == pytest.approx(dg.sum() - dg[7])
    f = fit_intervals(iv)
    assert f["j_per_prefill_token"] == pytest.approx(E_PREFILL, rel=1e-6)
    assert f["j_per_decode_token"] == pytest.approx(E_DECODE, rel=1e-6)
    assert f["r2"] == pytest.approx(1.0)


def test_isolating_pair_without_energy_says_why_in_a_sentence():
    """A past defect: the decode-heavy level had no energy and the pair's error text was ``'accelerator'``."""
    from types import SimpleNamespace

    from wattbench.core.schema import BoundaryEnergy, LevelResult, Throughput, Window
    from wattbench.run.plan import prefill_decode_pair

    def level(i, label, energy):
        lv = LevelResult(index=i, label=label, window=Window(start_ns=0, end_ns=10**9, duration_s=1.0),
                         throughput=Throughput(input_tokens=1000, output_tokens=10))
        if energy:
            lv.energy = {"accelerator": BoundaryEnergy(boundary="accelerator", method="counter", energy_j=50.0,
                                                       dynamic_energy_j=20.0)}
        else:
            lv.energy_unavailable_reason = "no completed request in the window"
        return lv

    made = iter([level(0, "concurrency=8 prefill-heavy", True), level(1, "concurrency=8 decode-heavy", False)])
    err = prefill_decode_pair(SimpleNamespace(concurrency=[8]), lambda *a, **k: next(made))["error"]
    assert err == ("the concurrency=8 decode-heavy level has no energy to split "
                   "(no completed request in the window)")


def test_intervals_count_warmup_leftovers_and_cut_streams():
    """The energy of an interval paid for every stream in it: a warm-up stream still generating and a
    stream cut without usage (its chunks counted) add their tokens, as in metrics.window_tokens."""
    MS = 1_000_000
    meas = RequestRecord(id=1, level=0, sent_ns=0, first_token_ns=100 * MS, last_token_ns=1_900 * MS,
                         chunk_ns=[100 * MS, 1_900 * MS], input_tokens=10, output_tokens=4)
    warm = RequestRecord(id=0, level=0, warmup=True, sent_ns=0, first_token_ns=50 * MS, last_token_ns=1_500 * MS,
                         chunk_ns=[50 * MS, 500 * MS, 1_500 * MS], input_tokens=7, output_tokens=6)
    cut = RequestRecord(id=2, level=0, ok=False, error="disconnect", sent_ns=0, first_token_ns=1_200 * MS,
                        last_token_ns=1_300 * MS, chunk_ns=[1_200 * MS, 1_300 * MS], requested_input_tokens=5)
    iv = intervals_from_records([meas, warm, cut], lambda a, b: 1.0, interval_s=1.0, start_ns=0, end_ns=2_000 * MS)
    assert iv.prefill_tokens.tolist() == [17, 5]
    # [0,1): measured 2 + warm-up 4 (2 per chunk); [1,2): measured 2 + warm-up 2 + cut stream 2 (1 per chunk)
    assert iv.decode_tokens.tolist() == [6, 6]
