"""``accounting.level.account_level``: one level's figures and verdict from a load outcome and a
telemetry log built from arrays (no clock, no sleep): exact energies, the verdict's rules, the
backlog test, what is said without a meter or /metrics."""

from __future__ import annotations

import pytest

from tests.fakes.scripted_sensor import build_log, grid, power_channel
from wattbench.accounting.level import LevelContext, account_level, count_source, oversaturation
from wattbench.core.load_types import LevelOutcome, LevelSpec
from wattbench.core.schema import LoadStats, RequestRecord

S = 1_000_000_000


def _rec(i, sent_s, first_s, end_s, out=10, inp=20, ok=True, warmup=False):
    if not ok:
        return RequestRecord(id=i, level=0, sent_ns=int(sent_s * S), end_ns=int(end_s * S), ok=False,
                             error="http_500", warmup=warmup)
    n = out
    chunks = [int((first_s + (end_s - first_s) * k / max(n - 1, 1)) * S) for k in range(n)]
    return RequestRecord(id=i, level=0, sent_ns=int(sent_s * S), first_token_ns=chunks[0], last_token_ns=chunks[-1],
                         end_ns=int(end_s * S), chunk_ns=chunks, output_tokens=out, input_tokens=inp, warmup=warmup)


def _outcome(records, t0_s, t1_s, steady=None, stopped_early=None):
    s0, s1 = steady if steady else (None, None)
    return LevelOutcome(records=records, start_ns=int(t0_s * S), end_ns=int(t1_s * S),
                        steady_start_ns=None if s0 is None else int(s0 * S),
                        steady_end_ns=None if s1 is None else int(s1 * S), load=LoadStats(),
                        stopped_early=stopped_early)


def _spec(mode="concurrency", value=2):
    return LevelSpec(index=0, mode=mode, value=value, num_requests=4)


def _log(power_w=400.0, a_s=0.0, b_s=10.0):
    ts = grid(a_s, b_s, 0.05)
    return build_log((power_channel("p"), ts, [power_w] * len(ts)))


def _four_requests():
    return [_rec(i, 1.0 + i, 1.1 + i, 2.0 + i) for i in range(4)]  # 1 s each, back to back: 1 .. 5 s


def test_energy_is_power_times_the_window_and_the_steady_window_is_accounted_apart():
    out = _outcome(_four_requests(), 1.0, 5.0, steady=(2.0, 4.0))
    lv = account_level(3, _spec(), out, LevelContext(log=_log(400.0)), "usage")
    e = lv.energy["accelerator"]
    assert lv.index == 3 and lv.label == "concurrency=2"
    assert lv.window.duration_s == pytest.approx(4.0)
    assert e.energy_j == pytest.approx(400.0 * 4.0, rel=1e-6)
    assert lv.throughput.output_tokens == 40
    assert e.j_per_output_token == pytest.approx(1600.0 / 40, rel=1e-6)
    assert lv.steady_window.duration_s == pytest.approx(2.0)
    assert lv.energy_steady["accelerator"].energy_j == pytest.approx(800.0, rel=1e-6)
    assert lv.energy_unavailable_reason is None


def test_without_a_meter_the_level_says_so_and_has_no_energy():
    lv = account_level(0, _spec(), _outcome(_four_requests(), 1.0, 5.0), LevelContext(log=None, engine="vllm"),
                       "usage")
    assert lv.energy == {}
    assert lv.energy_unavailable_reason == "no power meter (see the run's verdict)"
    assert lv.server_metrics.available is False and "(vllm)" in lv.server_metrics.reason


def test_a_level_without_a_window_has_no_energy_and_the_reason_names_it():
    recs = [_rec(0, 1.0, 0, 1.0, ok=False)]
    lv = account_level(0, _spec(), _outcome(recs, 1.0, 1.0), LevelContext(log=_log()), "usage")
    assert lv.energy == {} and "no measurement window" in lv.energy_unavailable_reason


@pytest.mark.parametrize("n_failed, verdict", [(1, "warn"), (3, "invalid")])
def test_failed_requests_warn_and_a_majority_failed_is_invalid(n_failed, verdict):
    recs = [_rec(i, 1.0 + i, 1.1 + i, 2.0 + i, ok=i >= n_failed) for i in range(4)]
    lv = account_level(0, _spec(), _outcome(recs, 1.0, 5.0), LevelContext(log=_log()), "usage")
    share = n_failed / 4
    assert f"{verdict}: {n_failed} of 4 failed: http_500 {n_failed} ({share:.0%})" in lv.validity.reasons
    assert lv.validity.verdict == verdict


def test_a_level_stopped_by_the_over_saturation_guard_is_marked():
    out = _outcome(_four_requests(), 1.0, 5.0, stopped_early="over-saturated: queue grew")
    lv = account_level(0, _spec(), out, LevelContext(log=_log()), "usage")
    assert lv.stopped_early == "over-saturated: queue grew"
    assert any("level stopped early, over-saturated" in r for r in lv.validity.reasons)


def test_open_loop_backlog_that_grows_is_oversaturated_and_a_drained_one_is_not():
    # rate level: one request sent every 0.1 s for 10 s; growing: each takes 0.1 s longer than the last
    growing = [_rec(i, 0.1 * i, 0.1 * i + 0.05, 0.1 * i + 0.2 + 0.1 * i) for i in range(100)]
    steady = [_rec(i, 0.1 * i, 0.1 * i + 0.05, 0.1 * i + 0.2) for i in range(100)]
    # the window while requests are still being sent (after it, a finite run drains)
    sat = oversaturation(_spec("rate", 10), _outcome(growing, 0.0, 9.9))
    ok = oversaturation(_spec("rate", 10), _outcome(steady, 0.0, 9.9))
    assert sat.oversaturated and not ok.oversaturated
    lv = account_level(0, _spec("rate", 10), _outcome(growing, 0.0, 9.9),
                       LevelContext(log=None), "usage")
    assert lv.oversaturation.oversaturated is True
    assert any(r.startswith("warn: over-saturated:") for r in lv.validity.reasons)
    # a closed loop's backlog is capped by its concurrency: not judged without the server's queue
    assert oversaturation(_spec("concurrency", 2), _outcome(growing, 0.0, 20.0)) is None


def test_count_source_is_missing_when_a_completed_request_has_no_usage():
    recs = _four_requests()
    assert count_source(recs) == "usage"
    recs[2].output_tokens = None
    assert count_source(recs) == "missing"
