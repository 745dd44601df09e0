import pytest

from tests.fakes.scripted_sensor import ScriptedSensor, Trace, build_log, step_trace
from wattbench.accounting.window import account_window
from wattbench.telemetry.base import TelemetryLog

S = 1_000_000_000


class FakeClock:
    def __init__(self):
        self.t = 1_000 * S

    def __call__(self):
        return self.t


def play(sensor, clock, until_s, step_s):
    log = TelemetryLog()
    log.add_channels(sensor.open())
    n = round(until_s / step_s)
    for _ in range(n + 1):
        try:
            log.add(sensor.read())
        except OSError:
            pass
        clock.t += round(step_s * S)
    return log


def test_trace_energy_is_exact():
    tr = step_trace([(0, 100), (5, 300)])
    assert tr.energy(1, 9) == pytest.approx(1600.0, abs=1e-9)
    assert tr(4.999) == 100 and tr(5.0) == 300
    ramp = Trace([(0, 0), (10, 1000)])
    assert ramp.energy(2, 7) == pytest.approx(2250.0, rel=1e-9)


def test_scripted_sensor_through_accounting_with_wrap_reset_and_gap():
    clock = FakeClock()
    tr = Trace([(0, 200), (20, 200)])
    sen = ScriptedSensor(tr, clock=clock, max_value=700.0, resets_at_s=[12.05], gaps_s=[(15.0, 16.5)],
                         energy_fn=lambda t: tr.energy(0, t), update_period_s=0.1)
    log = play(sen, clock, 20.0, 0.1)
    t0 = clock.t - round(20.1 * S)
    acc = account_window(log, t0 + 1 * S, t0 + 19 * S, output_tokens=360, total_tokens=720, idle=None,
                         price_per_kwh=0.1, pue=1.0)
    g = acc.energy["accelerator"]
    # true energy 200 W x 18 s; the reset interval is filled from the power channel (200 W)
    assert g.energy_j == pytest.approx(3600.0, abs=1e-6)
    assert g.resets == 1
    # 700 J range: wraps at 3.5, 7, 10.5 s; the reset at 12.05 s restarts from 0, wrapping again at
    # 15.55 s, inside the 15..16.5 s gap (and the reset is not mistaken for a wrap)
    assert g.wraps == 4
    assert g.largest_gap_s == pytest.approx(1.6)
    assert g.cross_check.diff_pct == pytest.approx(0.0, abs=1e-9)
    assert acc.validity.verdict == "warn"


def test_build_log_units():
    from tests.fakes.scripted_sensor import power_channel

    log = build_log((power_channel("p"), [0.5, 1.25], [10, 20]))
    assert log.series("p") == ([500_000_000, 1_250_000_000], [10.0, 20.0])


def test_scripted_sensor_on_the_real_clock():
    import time

    tr = Trace([(0, 100), (100, 100)])
    sen = ScriptedSensor(tr)  # default clock: time.perf_counter_ns
    log = TelemetryLog()
    log.add_channels(sen.open())
    for _ in range(4):
        log.add(sen.read())
        time.sleep(0.005)
    t, v = log.series("scripted.energy")
    for ti, vi in zip(t, v):
        assert vi == pytest.approx(100.0 * (ti - sen.t_open_ns) / 1e9, rel=1e-9)
    tp, vp = log.series("scripted.power")
    assert tp == t and vp == [100.0] * 4
