"""An estimate reads as one: a level whose energy rests only on a model of power (``estimate:cpu``)
gets the verdict ``estimate`` with its basis and uncertainty, never ``valid``; a measured figure
(a scripted meter) and a declared one still read ``valid``. The answer line carries the basis."""

from __future__ import annotations

import os

import pytest

import wattbench.telemetry.const as const
import wattbench.telemetry.estimate as est
from tests.fakes.results_factory import make_level, make_result
from tests.fakes.scripted_sensor import ScriptedSensor
from wattbench.accounting.window import account_window
from wattbench.accounting.level_findings import run_validity
from wattbench.report.notes import note_lines, verdict_text
from wattbench.report.summary import answer_line
from wattbench.telemetry.base import TelemetryLog

S = 1_000_000_000


class Clock:
    def __init__(self):
        self.t = 1_000 * S

    def __call__(self):
        return self.t


def _cpuinfo(tmp_path, model="Some Unknown CPU 1234"):
    p = tmp_path / "cpuinfo"
    p.write_text("".join(f"processor\t: {i}\nmodel name\t: {model}\nphysical id\t: 0\n\n" for i in range(2)))
    return p


def _play(sensors, clock, seconds=20.0, step=0.1):
    log = TelemetryLog()
    for s in sensors:
        log.add_channels(s.open())
    for _ in range(round(seconds / step) + 1):
        for s in sensors:
            log.add(s.read())
        clock.t += round(step * S)
    return log


def _estimate_sensor(tmp_path, monkeypatch, clock, cpus=2):
    monkeypatch.setattr(est, "now_ns", clock)
    monkeypatch.setattr(os, "cpu_count", lambda: cpus)
    return est.CpuEstimateSensor(cpuinfo=_cpuinfo(tmp_path), cpu_percent=lambda: 50.0)


def _account(log, clock, seconds=20.0):
    t1 = clock.t - round(0.1 * S)
    return account_window(log, t1 - round((seconds - 1) * S), t1, output_tokens=1000, total_tokens=3000,
                          idle=None, price_per_kwh=0.1, pue=1.0)


def test_an_estimate_reads_estimate_with_its_basis_and_uncertainty(tmp_path, monkeypatch):
    clock = Clock()
    log = _play([_estimate_sensor(tmp_path, monkeypatch, clock)], clock)
    acc = _account(log, clock)
    # 8 W per logical CPU x 2 assumed = 16 W "TDP", idle 30 %: 4.8 + 11.2 x 0.5 = 10.4 W
    assert acc.energy["cpu"].avg_power_w == pytest.approx(10.4, rel=1e-6)
    assert acc.validity.verdict == "estimate"  # was "valid": nothing else is wrong with the window
    f = next(f for f in acc.validity.findings if f.kind == "estimate")
    assert f.severity == "estimate"
    assert "8 W per logical CPU × 2 assumed" in f.basis
    assert f.effect_pct == pytest.approx(60.0, abs=0.01)
    assert "const:node=WATTS" in f.text  # what to do about it


def test_a_measured_figure_still_reads_valid(tmp_path, monkeypatch):
    clock = Clock()
    sen = ScriptedSensor(250.0, clock=clock, update_period_s=0.1)
    log = _play([sen], clock)
    acc = _account(log, clock)
    assert acc.energy["accelerator"].label == "measured"
    assert acc.validity.verdict == "valid"
    assert not [f for f in acc.validity.findings if f.kind == "estimate"]


def test_a_declared_node_over_an_estimated_cpu_is_not_an_estimate(tmp_path, monkeypatch):
    """The headline is the declared node (declared before estimate): its figures rest on the user's
    wattage, not on the CPU model, so no estimate verdict."""
    from wattbench.telemetry.spec import parse_sensor_spec

    clock = Clock()
    cpu = _estimate_sensor(tmp_path, monkeypatch, clock)
    monkeypatch.setattr(const, "now_ns", clock)
    node = parse_sensor_spec("const:node=300")
    log = _play([cpu, node], clock)
    acc = _account(log, clock)
    assert acc.energy["node"].label == "declared"
    assert not [f for f in acc.validity.findings if f.kind == "estimate"]
    assert acc.validity.verdict != "estimate"


def _result_from(acc):
    lv = make_level(0, value=4, power_w={b: e.avg_power_w for b, e in acc.energy.items()})
    lv.energy = acc.energy
    lv.validity = acc.validity
    r = make_result(levels=[lv])
    r.validity = run_validity(r)
    return r


def test_the_answer_line_names_the_estimate(tmp_path, monkeypatch):
    clock = Clock()
    log = _play([_estimate_sensor(tmp_path, monkeypatch, clock)], clock)
    r = _result_from(_account(log, clock))
    line = answer_line(r)
    assert "estimate from CPU utilization: 8 W per logical CPU × 2 assumed, ±60%)" in line
    assert line.endswith("· estimate")
    assert r.validity.verdict == "estimate"
    assert verdict_text(r).startswith("estimate (efficiency)")


def test_the_answer_line_of_a_measured_run_reads_valid(tmp_path, monkeypatch):
    clock = Clock()
    log = _play([ScriptedSensor(250.0, clock=clock, update_period_s=0.1)], clock)
    r = _result_from(_account(log, clock))
    line = answer_line(r)
    assert line.endswith("· valid") and "estimate" not in line


def test_the_estimate_note_says_its_uncertainty_once(tmp_path, monkeypatch):
    """The note line renders the uncertainty where the summary places it, not again after it."""
    clock = Clock()
    log = _play([_estimate_sensor(tmp_path, monkeypatch, clock)], clock)
    r = _result_from(_account(log, clock))
    notes = [n.text for n in note_lines(r) if n.severity == "estimate"]
    assert len(notes) == 1, notes
    assert notes[0].endswith("estimate from CPU utilization: 8 W per logical CPU × 2 assumed, ±60%, not a measurement")
    assert notes[0].count("60%") == 1
