"""benches/gpu/window_error.py: each level's full and steady window against the independent counter,
and the summary by nominal length (the lead runs the bench itself on the H200)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parents[3] / "benches" / "gpu"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


we, cc = _load("window_error"), _load("crosscheck")
S = 1_000_000_000


def test_rows_compare_both_windows_with_the_independent_counter(tmp_path):
    # the observer: 500 W from t=0 on one GPU, read every 0.5 s
    ts = [int(k * S / 2) for k in range(0, 41)]
    nvml = {0: (ts, [500.0 * t / S for t in ts])}
    be = {"energy_j": 5_025.0, "method": "counter", "update_period_s": 0.1,
          "uncertainty_parts": {"gpu0": {"edge": 0.8, "meter": 5.0}}}
    steady = dict(be, energy_j=4_000.0)
    result = {"levels": [{"label": "concurrency=8", "window": {"start_ns": 2 * S, "end_ns": 12 * S, "duration_s": 10.0},
                          "steady_window": {"start_ns": 3 * S, "end_ns": 11 * S, "duration_s": 8.0},
                          "energy": {"accelerator": be}, "energy_steady": {"accelerator": steady},
                          "validity": {"verdict": "valid", "latency": "valid", "findings": []}}]}
    rows = we.window_rows("d10s", result, nvml, cc.independent_j)
    full, st = rows
    assert (full["kind"], st["kind"]) == ("full", "steady")
    assert full["independent_j"] == pytest.approx(5_000.0) and full["diff_pct"] == pytest.approx(0.5)
    assert st["independent_j"] == pytest.approx(4_000.0) and st["diff_pct"] == pytest.approx(0.0)
    assert full["accounting_edge_bound_pct"] == 0.8 and full["efficiency_verdict"] == "valid"
    (s_full, s_steady) = we.summarize(rows, {"d10s": 10.0})
    assert s_full["max_abs_diff_pct"] == pytest.approx(0.5) and s_full["n"] == 1 and s_steady["kind"] == "steady"


def test_a_window_the_observer_did_not_bracket_is_unknown():
    nvml = {0: ([0, S], [0.0, 500.0])}
    result = {"levels": [{"label": "c", "window": {"start_ns": 0, "end_ns": 2 * S, "duration_s": 2.0},
                          "energy": {"accelerator": {"energy_j": 1000.0}}, "validity": {"reasons": ["warn: x"]}}]}
    (row,) = we.window_rows("d", result, nvml, cc.independent_j)
    assert row["independent_j"] is None and row["diff_pct"] is None and row["findings"] == ["warn: x"]
    assert we.summarize([row], {"d": 2.0}) == []
