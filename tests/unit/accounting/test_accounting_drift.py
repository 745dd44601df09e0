"""A level's stationarity (``accounting/drift.py``): the per-second series from records and a power
log built from arrays (exact figures), the drift finding judged by the materiality bound (a change
of 1.01% warns, 0.99% is a note), its cause from the recorded thermal, queue and lag, the trial in
another thermal state, and the warm-up estimate's bound (1.01× the bound is named, 0.99× is not)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.fakes.scripted_sensor import build_log, grid, power_channel
from wattbench.accounting import drift as adrift
from wattbench.accounting.drift import (
    mser_estimate_s,
    stationarity,
    stationarity_findings,
    steady_series,
    warmup_bound_s,
    warmup_finding,
)
from wattbench.accounting.findings import EFFICIENCY_MATERIAL_PCT
from wattbench.core.recordset import as_record_set
from wattbench.core.schema import (
    FindingKind,
    LevelResult,
    LoadStats,
    RequestRecord,
    ServerMetrics,
    SteadySeries,
    Thermal,
    Window,
)

S = 1_000_000_000


def _stream(i: int, first_s: float, rate_per_s: float, n: int) -> RequestRecord:
    chunks = [int((first_s + k / rate_per_s) * S) for k in range(n)]
    return RequestRecord(id=i, level=0, sent_ns=int((first_s - 0.05) * S), first_token_ns=chunks[0],
                         last_token_ns=chunks[-1], end_ns=chunks[-1], chunk_ns=chunks, output_tokens=n,
                         input_tokens=8)


def test_the_series_holds_each_seconds_tokens_and_power():
    # two streams of 50 tokens/s each over 0..10 s; the meter reads 200 W, then 400 W from 5 s
    recs = as_record_set([_stream(0, 0.01, 50.0, 500), _stream(1, 0.01, 50.0, 500)])  # no token on an edge
    ts = grid(0.0, 12.0, 0.05)
    log = build_log((power_channel("p"), ts, [200.0 if t < 5.0 else 400.0 for t in ts]))
    s = steady_series(recs, log, Window(start_ns=1 * S, end_ns=9 * S, duration_s=8.0, kind="steady"))
    assert s.bucket_s == pytest.approx(1.0)
    assert len(s.t_s) == 8 and s.t_s[0] == pytest.approx(1.5)
    assert s.output_tokens_per_s == pytest.approx([100.0] * 8)
    p = s.power_w["accelerator"]
    assert p[:3] == pytest.approx([200.0] * 3, rel=1e-3) and p[5:] == pytest.approx([400.0] * 3, rel=1e-3)


def test_a_window_shorter_than_a_bucket_has_no_series():
    recs = as_record_set([_stream(0, 0.0, 50.0, 50)])
    assert steady_series(recs, None, Window(start_ns=0, end_ns=S // 2, duration_s=0.5, kind="steady")) is None


def _trial(k: int, tok: list[float], power: float = 300.0, temp: float | None = None, clock: float | None = None,
           seconds_apart: float = 30.0, capping: list[str] | None = None, lag_p99: float | None = None,
           waiting: float | None = None) -> LevelResult:
    t0 = k * seconds_apart
    lv = LevelResult(index=0, label="concurrency=4", trial=k)
    lv.series = SteadySeries(bucket_s=1.0, t_s=[t0 + i + 0.5 for i in range(len(tok))], output_tokens_per_s=tok,
                             power_w={"node": [power] * len(tok)})
    th = {}
    if temp is not None:
        th["max_temperature_c"] = temp
    if clock is not None:
        th["mean_sm_clock_mhz"] = clock
    if capping:
        th["capping_reasons_seen"] = capping
    if th:
        lv.thermal = Thermal.model_validate(th)
    if lag_p99 is not None:
        lv.load = LoadStats.model_validate({"client_loop_lag_ms": {"count": 10, "p99": lag_p99}})
    if waiting is not None:
        lv.server_metrics = ServerMetrics(available=True, mean_waiting_requests=waiting, mean_running_requests=4.0)
    return lv


def _drifting_trials(total_change: float, **kw) -> list[LevelResult]:
    """Three trials of 20 s, 30 s apart, whose tokens/s move by ``total_change`` from the first second
    of the first to the last second of the last at a steady rate (geometric: ln tokens/s is a line,
    so the log-scale trend reads ``total_change`` exactly; no noise: the interval is the slope)."""
    t_first, t_last = 0.5, 2 * 30.0 + 19.5
    out = []
    for k in range(3):
        ts = [k * 30.0 + i + 0.5 for i in range(20)]
        out.append(_trial(k, [1000.0 * (1.0 + total_change) ** ((t - t_first) / (t_last - t_first)) for t in ts],
                          **{n: v[k] for n, v in kw.items()}))
    return out


def test_a_drift_at_the_materiality_bound_warns_and_just_below_it_is_a_note():
    bound = EFFICIENCY_MATERIAL_PCT / 100.0
    above = stationarity(_drifting_trials(-1.01 * bound))
    below = stationarity(_drifting_trials(-0.99 * bound))
    tok_above = next(f for f in above.trends if f.figure == "output_tokens_per_s")
    tok_below = next(f for f in below.trends if f.figure == "output_tokens_per_s")
    assert tok_above.change_pct == pytest.approx(-1.01 * EFFICIENCY_MATERIAL_PCT, rel=1e-9)
    assert tok_above.moves and tok_above.drifting
    assert tok_below.moves and not tok_below.drifting
    sev_above = {f.severity for f in stationarity_findings(above) if f.kind == FindingKind.DRIFT}
    sev_below = {f.severity for f in stationarity_findings(below) if f.kind == FindingKind.DRIFT}
    assert sev_above == {"warn"} and sev_below == {"note"}


def test_a_drift_names_its_size_its_cause_and_what_to_do():
    trials = _drifting_trials(-0.15, temp=[61.0, 72.0, 83.0], clock=[1980.0, 1900.0, 1755.0],
                              capping=[None, None, ["sw_thermal_slowdown"]])
    st = stationarity(trials)
    kw = next(f for f in st.trends if f.figure == "output_tokens_per_s_per_kw")
    assert kw.boundary == "node" and kw.drifting
    # the trials' steady means: each the mean of 0.85^((t − 0.5)/79) over its 20 seconds t0 + 0.5 … t0 + 19.5
    # (t0 = 0, 30, 60) — a geometric series each, so 30 s apart they stand in the ratio 0.85^(30/79): the
    # trial figures' log-scale trend reads 0.85^(60/79) − 1 = −11.6%, the per-second one −15.0%
    means = [sum(1000.0 * 0.85 ** ((t0 + i) / 79.0) for i in range(20)) / 20 for t0 in (0.0, 30.0, 60.0)]
    assert kw.trial_values == pytest.approx([m / 0.3 for m in means])
    assert kw.trials_change_pct == pytest.approx((means[2] / means[0] - 1.0) * 100.0, rel=1e-9)
    assert kw.trials_change_pct == pytest.approx(100.0 * (0.85 ** (60.0 / 79.0) - 1.0), rel=1e-9)
    assert kw.change_pct == pytest.approx(-15.0, rel=1e-9)
    assert "GPU temperature 61→83 °C" in st.cause and "SM clock 1,980→1,755 MHz" in st.cause
    assert "sw_thermal_slowdown" in st.cause and "--precondition" in st.todo
    power = next(f for f in st.trends if f.figure == "avg_power_w")
    assert not power.moves and not power.drifting  # a constant 300 W does not move
    text = next(f.text for f in stationarity_findings(st) if f.kind == FindingKind.DRIFT and f.basis == kw.figure)
    assert f"output tokens/s per kW (node) drifts {kw.trials_change_pct:+.1f}% over its 3 trials" in text
    assert "-11.6%" in text and "fitted -15.0%" in text


def test_the_queue_and_the_clients_lag_are_named_as_causes():
    st = stationarity(_drifting_trials(-0.05, waiting=[0.0, 3.0, 6.0], lag_p99=[5.0, 8.0, 120.0]))
    assert "server waiting requests 0.0→6.0" in st.cause and "client loop lag p99 120 ms in trial 3" in st.cause
    assert "--cooldown" in st.todo and "--workers" in st.todo


def test_a_steady_level_has_no_cause_and_no_finding():
    st = stationarity([_trial(k, [1000.0] * 20) for k in range(3)])
    assert st.cause is None and not any(f.moves for f in st.trends)
    assert stationarity_findings(st) == []


def test_a_trial_in_another_thermal_state_is_named():
    trials = [_trial(k, [1000.0] * 20, temp=t, clock=c) for k, (t, c) in
              enumerate([(70.0, 1900.0), (70.0, 1890.0), (70.0 + adrift.TEMP_STATE_C, 1900.0)])]
    idx, words = adrift.other_state(trials)
    assert idx == [2] and "trial 3: 75 °C against the trials' median 70 °C" in words
    just_below = [_trial(k, [1000.0] * 20, temp=t) for k, t in enumerate([70.0, 70.0, 70.0 + 0.99 * adrift.TEMP_STATE_C])]
    assert adrift.other_state(just_below)[0] == []
    clocked = [_trial(k, [1000.0] * 20, clock=c) for k, c in enumerate([1900.0, 1900.0, 1900.0 * (1 - 1.01 * adrift.CLOCK_STATE)])]
    assert adrift.other_state(clocked)[0] == [2]
    st = stationarity(trials)
    assert any(f.kind == FindingKind.THERMAL_STATE and f.severity == "warn" for f in stationarity_findings(st))


def test_the_warm_up_estimate_is_named_past_its_bound_only():
    full = Window(start_ns=0, end_ns=30 * S, duration_s=30.0, kind="full")
    steady = Window(start_ns=2 * S, end_ns=22 * S, duration_s=20.0, kind="steady")
    bound = warmup_bound_s(22.0)
    assert bound == pytest.approx(2.2)
    recs = as_record_set([])
    assert warmup_finding(recs, full, steady, 2.0 + 0.99 * bound) is None
    assert warmup_finding(recs, full, steady, 2.0 - 0.99 * bound) is None
    later = warmup_finding(recs, full, steady, 2.0 + 1.01 * bound)
    earlier = warmup_finding(recs, full, steady, 2.0 - 1.01 * bound + 0.0)
    assert later is not None and later.kind == FindingKind.WARMUP_ESTIMATE
    assert earlier is not None and earlier.severity == "note"
    assert warmup_bound_s(5.0) == pytest.approx(1.0)  # one MSER batch at least


def test_mser_over_records_finds_a_ramp_the_steady_window_left_in():
    # 8 streams begin 0.5 s apart (a ramp to 8 × 50 tokens/s at 3.5 s) and run to 20 s; the steady
    # window is given as starting at 0 s: MSER-5 puts the end of the warm-up near the ramp's end
    recs = as_record_set([_stream(i, 0.5 * i, 50.0, int((20.0 - 0.5 * i) * 50)) for i in range(8)])
    full = Window(start_ns=0, end_ns=20 * S, duration_s=20.0, kind="full")
    steady = Window(start_ns=0, end_ns=20 * S, duration_s=20.0, kind="steady")
    est = mser_estimate_s(recs, full, steady)
    assert 2.0 <= est <= 4.0
    f = warmup_finding(recs, full, steady, est)
    assert f is not None and f.effect_pct is not None and f.effect_pct < -EFFICIENCY_MATERIAL_PCT
    assert f.severity == "warn"
    assert np.isfinite(f.effect_pct)


def test_the_trend_is_read_after_the_warm_up_estimate():
    s = SteadySeries(bucket_s=1.0, t_s=[10.5, 11.5, 12.5, 13.5], output_tokens_per_s=[100.0, 200.0, 300.0, 300.0],
                     power_w={"node": [1.0, 2.0, 3.0, 4.0]})
    full = Window(start_ns=10 * S, end_ns=20 * S, duration_s=10.0, kind="full")
    cut = adrift.trim_warmup(s, full, 2.0)  # the warm-up ends 2 s in: the buckets ending by then go
    assert cut.t_s == pytest.approx([12.5, 13.5], abs=1e-12)
    assert cut.output_tokens_per_s == pytest.approx([300.0, 300.0], rel=1e-12)
    assert cut.power_w == {"node": pytest.approx([3.0, 4.0], rel=1e-12)}
    assert adrift.trim_warmup(s, full, None) is s and adrift.trim_warmup(s, full, 0.0) is s


def test_a_trial_that_measured_nothing_is_not_counted_among_the_trials_read():
    trials = _drifting_trials(-0.05)
    trials[1].series = None  # measured nothing: no series
    st = stationarity(trials)
    assert st.trials == 2
    tok = next(f for f in st.trends if f.figure == "output_tokens_per_s")
    assert len(tok.trial_values) == 2 and tok.drifting
