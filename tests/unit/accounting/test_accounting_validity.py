import numpy as np
import pytest

from tests.fakes.scripted_sensor import aux_channel, build_log, counter_channel, grid, power_channel
from wattbench.accounting.window import account_window, level_validity
from wattbench.accounting.validity import combine
from wattbench.accounting.findings import Finding, worst
from wattbench.core.schema import LoadStats, Validity
from wattbench.telemetry.base import SensorFailure

S = 1_000_000_000


def acc_of(*series, t0=0, t1=100 * S, failures=()):
    log = build_log(*series, failures=failures)
    return account_window(log, t0, t1, output_tokens=100, total_tokens=200, idle=None, price_per_kwh=0.1, pue=1.0)


def ctr(t, watts=200.0, **kw):
    t = np.asarray(t)
    return (counter_channel("c", update_period_s=0.1, **kw), t, watts * t)


T = grid(0, 100, 0.1)


def drop(t, a, b):
    return t[(t <= a + 1e-9) | (t >= b - 1e-9)]


def test_clean_window_is_valid():
    v = acc_of(ctr(T)).validity
    assert v == Validity(verdict="valid", latency="valid", findings=[])


def test_coverage_warn_and_invalid():
    a = acc_of(ctr(drop(T, 10, 18)))  # 8 s of 100 s uncovered -> 0.92
    assert a.validity.verdict == "warn"
    assert "warn: accelerator: sample coverage 0.92 < 0.95" in a.reasons
    a = acc_of(ctr(drop(T, 10, 35)))  # 0.75
    assert a.validity.verdict == "invalid"
    assert "invalid: accelerator: sample coverage 0.75 < 0.8" in a.reasons
    assert a.energy["accelerator"].energy_j == pytest.approx(20000.0)  # counter still exact across the gap


def test_largest_gap_over_one_second_warns_even_with_good_coverage():
    a = acc_of(ctr(drop(T, 50, 51.5)))
    assert a.energy["accelerator"].coverage == pytest.approx(0.985)
    assert a.reasons == ["warn: accelerator: largest sample gap 1.50 s > 1 s"]


def test_counter_reset_warns():
    v = np.where(T < 50.05, 200.0 * T, 200.0 * (T - 50.05))
    a = acc_of((counter_channel("c", update_period_s=0.1), T, v))
    assert a.reasons == ["warn: accelerator: energy counter reset 1 time(s) in the window"]


@pytest.mark.parametrize("pw,verdict,pct", [(190.0, "valid", None), (184.0, "warn", "8.0"), (160.0, "invalid", "20.0")])
def test_counter_vs_integral(pw, verdict, pct):
    a = acc_of(ctr(T), (power_channel("p", update_period_s=0.1), T, np.full(len(T), pw)))
    assert a.validity.verdict == verdict
    if pct:
        assert f"disagree by {pct}%" in a.reasons[0]


def test_window_too_short_for_the_meter():
    a = acc_of(ctr(T), t0=10 * S, t1=round(10.5 * S))
    assert a.validity.verdict == "warn"
    assert "5.0 meter update periods (< 10)" in a.reasons[0]
    a = acc_of(ctr(T), t0=10 * S, t1=round(10.2 * S))
    assert a.validity.verdict == "invalid"


def test_sensor_failure_in_window_warns_outside_does_not():
    f_in = SensorFailure("nvml", 50 * S, "NVMLError_Unknown")
    f_out = SensorFailure("rapl", 200 * S, "EACCES")
    a = acc_of(ctr(T), failures=[f_in, f_in, f_out])
    assert a.reasons == ["warn: sensor nvml failed 2 time(s) in the window (first: NVMLError_Unknown)"]


@pytest.mark.parametrize("bits,fires", [(0x4, True), (0x8, True), (0x20, True), (0x40, True), (0x80, True),
                                        (0x1, False), (0x2, False), (0x10, False), (0x100, False)])
def test_throttle_bits(bits, fires):
    reasons = (aux_channel("r", "clock_event_reasons"), [10.0, 20.0, 30.0, 40.0], [0, bits, 0, 0])
    a = acc_of(ctr(T), reasons)
    assert (a.validity.verdict == "warn") == fires
    if fires:
        assert "in 25% of samples" in a.reasons[0]


def test_no_energy_for_boundary_warns():
    a = acc_of((counter_channel("c", update_period_s=0.1), [1.0], [5.0]))
    assert a.validity.verdict == "warn"
    assert a.reasons[0].startswith("warn: accelerator: no energy could be computed")


def test_load_rules():
    ok = LoadStats(mode="rate", target_rate_rps=10.0, achieved_rate_rps=9.5)
    assert level_validity(None, load=ok, token_source="usage").verdict == "valid"
    slow = LoadStats(mode="rate", target_rate_rps=10.0, achieved_rate_rps=8.0)
    v = level_validity(None, load=slow)
    assert v.reasons == ["warn: achieved rate 8 req/s is -20.0% from the target 10 (> 10%): the level did not offer "
                         "the load asked for"]  # arrivals unknown (n not given): the 10% rule alone
    # the client's own timing is judged with the latencies (validity.client_findings), not here
    sat = LoadStats(saturated=True, saturation_reasons=["client CPU 97%"])
    assert level_validity(None, load=sat).reasons == []
    assert level_validity(None, token_source="approx").verdict == "warn"
    assert level_validity(None, token_source="tokenizer").verdict == "valid"


def test_level_validity_combines_energy_and_load_worst_wins():
    a = acc_of(ctr(drop(T, 10, 35)))
    v = level_validity(a, load=LoadStats(mode="rate", target_rate_rps=10.0, achieved_rate_rps=8.0),
                       token_source="approx")
    assert v.verdict == "invalid" and v.latency == "warn"  # coverage: energy; the rate: every figure
    assert len(v.reasons) == 4  # coverage, largest gap, rate, tokens


def test_combine_and_worst():
    v = combine([Finding(severity="warn", text="a", figures=("energy",)),
                 Finding(severity="warn", text="a", figures=("energy",)),
                 Finding(severity="invalid", text="b", figures=("ttft",))])
    assert v.verdict == "warn" and v.latency == "invalid" and v.reasons == ["warn: a", "invalid: b"]
    # an older file's reasons: severity read, figures unknown, so they count for both verdicts
    w = worst(Validity(verdict="warn", reasons=["warn: x"]), Validity(),
              Validity(verdict="warn", reasons=["warn: x", "warn: y"]))
    assert w.verdict == "warn" and w.latency == "warn" and w.reasons == ["warn: x", "warn: y"]
    assert {f.kind for f in w.findings} == {"legacy"}
    # a note leaves both verdicts valid
    n = combine([Finding(kind="small_sample", severity="note", text="p99 from 32", figures=("ttft",))])
    assert (n.verdict, n.latency, n.reasons, len(n.notes)) == ("valid", "valid", [], 1)
