"""``accounting/gates.py``: the ML.ENERGY benchmark's validity gates as wattbench reads them, each
a finding named as its gate, under the materiality rule. Ground truth: levels built with a known
steady window, a known accelerator power and a known board power limit."""

from __future__ import annotations

import pytest

from tests.fakes.results_factory import make_level
from wattbench.accounting.gates import STEADY_GATE_S, gate_findings, power_range_gate, steady_gate
from wattbench.accounting.level_findings import level_findings
from wattbench.core.schema import Window


def _steady(lv, seconds: float):
    lv.steady_window = Window(start_ns=0, end_ns=int(seconds * 1e9), duration_s=seconds)
    return lv


def test_the_steady_window_gate_is_a_note_below_30_s_and_silent_from_30_s():
    short = steady_gate(_steady(make_level(0), 12.5))
    assert short is not None and short.kind == "gate_steady_window" and short.severity == "note"
    assert short.summary == "ML.ENERGY gate: steady window ≥ 30 s not met" and "12.5 s" in short.text
    assert steady_gate(_steady(make_level(0), STEADY_GATE_S)) is None
    assert steady_gate(_steady(make_level(0), 45.0)) is None
    assert steady_gate(make_level(0)) is None  # no steady window: wattbench's own steady_missing says it


def test_the_power_range_gate_is_judged_by_the_overshoot_above_the_boards_limit():
    def at(watts: float, limit: float | None, label: str = "measured"):
        lv = make_level(0, power_w=watts, label_kind=label)
        lv.thermal.power_limit_w = limit
        return power_range_gate(lv)

    over = at(760.0, 700.0)  # 8.6% above what the board can draw: the meter covers more than the board
    assert over.kind == "gate_power_range" and over.severity == "warn"
    assert over.effect_pct == pytest.approx(100 * (760 / 700 - 1), rel=1e-9)
    assert over.summary == "ML.ENERGY gate: power within the device's range not met" and "760 W" in over.text
    small = at(701.4, 700.0)  # 0.2%: below the efficiency bound (1%), a note
    assert small.severity == "note" and small.effect_pct == pytest.approx(0.2, rel=1e-6)
    assert at(650.0, 700.0) is None  # within range
    assert at(760.0, None) is None  # no limit read: the gate cannot be read
    assert at(760.0, 700.0, label="declared") is None  # a declared figure is the user's, not a reading


def test_a_level_carries_its_failed_gates_among_its_findings():
    lv = _steady(make_level(0, power_w=760.0), 10.0)
    lv.thermal.power_limit_w = 700.0
    kinds = [f.kind for f in level_findings(lv, [])]
    assert "gate_steady_window" in kinds and "gate_power_range" in kinds
    assert [f.kind for f in gate_findings(lv)] == ["gate_steady_window", "gate_power_range"]
