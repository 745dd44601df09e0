"""Headline figures and trial CIs as compare/regress/diagnosis read them."""

from __future__ import annotations

import math

import pytest

from wattbench.core.schema import Thermal
from tests.fakes.results_factory import make_level, make_result
from wattbench.analysis.figures import METRIC_NAMES, common_boundary, reported_figures, throttle_reasons
from wattbench.results.headline import level_key, trial_ci
from wattbench.core.schema import TrialsBlock


def test_headline_reads_every_family():
    lv = make_level(0, value=8, output_tokens_per_s=1000, power_w={"accelerator": 500, "node": 800},
                    failed=4, goodput_rps=3.5, waiting_mean=2.0, gpu_utilization_pct=77, sm_clock_mhz=1500)
    h = reported_figures(lv, "node")
    assert set(h) == METRIC_NAMES
    assert h["avg_power_w"] == 800
    assert h["output_tokens_per_s_per_kw"] == pytest.approx(1000 / 0.8)
    assert h["failed_pct"] == pytest.approx(100 * 4 / (lv.requests.completed + 4))
    assert h["goodput_rps"] == pytest.approx(3.5, rel=1e-9) and h["mean_waiting"] == pytest.approx(2.0, rel=1e-9)
    assert h["gpu_utilization_pct"] == 77 and h["sm_clock_mhz"] == 1500
    assert h["ttft_p99_ms"] == pytest.approx(120.0, rel=1e-9) and h["tpot_p50_ms"] == pytest.approx(20.0, rel=1e-9)
    assert reported_figures(lv, "wall")["avg_power_w"] is None


def test_thermal_block_from_a_dict_and_capping_reasons():
    lv = make_level(0)
    lv.thermal = Thermal.model_validate({"mean_sm_clock_mhz": 1410, "max_temperature_c": 88,
                                         "throttle_reasons_seen": ["gpu_idle", "sw_power_cap"],
                                         "capping_reasons_seen": ["sw_power_cap"]})
    h = reported_figures(lv, "accelerator")
    assert h["sm_clock_mhz"] == 1410 and h["max_temp_c"] == 88
    assert throttle_reasons(lv) == ["sw_power_cap"]


def test_trial_ci_key_forms():
    lv = make_level(0)
    lv.trials = TrialsBlock.model_validate({"n": 3, "confidence": 0.9, "figures": {
        "output_tokens_per_s": {"mean": 100.0, "ci_half_width": 5.0},
        "avg_power_w@node": {"mean": 900.0, "ci_low": 880.0, "ci_high": 920.0},
        "avg_power_w@accelerator": {"mean": 500.0, "ci_low": 490.0, "ci_high": 510.0, "n": 2},
        "ttft_p99_ms": {"mean": 10.0, "ci_low": 12.0, "ci_high": 8.0},  # inverted: ignored
    }})
    ci = trial_ci(lv, "output_tokens_per_s", "node")
    assert (ci.low, ci.high, ci.n, ci.confidence) == pytest.approx((95.0, 105.0, 3, 0.9), rel=1e-9)
    assert trial_ci(lv, "avg_power_w", "node").half_width == pytest.approx(20.0, rel=1e-9)
    acc = trial_ci(lv, "avg_power_w", "accelerator")
    assert acc.rel_half_width == pytest.approx(math.log(510 / 490) / 2, rel=1e-12) and acc.n == 2  # a figure's own n wins over the block's
    assert trial_ci(lv, "ttft_p99_ms", "node") is None
    assert trial_ci(make_level(0), "output_tokens_per_s", "node") is None


def test_boundaries_and_keys():
    a = make_result("a", levels=[make_level(0, value=8, power_w={"accelerator": 1, "node": 2, "wall": 3})])
    b = make_result("b", levels=[make_level(0, value=8, power_w={"accelerator": 1, "node": 2})])
    assert common_boundary([a, b]) == "node"
    assert common_boundary([a]) == "wall"
    r1 = make_level(0, mode="rate", value=0.1 + 0.2)
    r2 = make_level(0, mode="rate", value=0.3)
    assert level_key(r1) == level_key(r2) == ("rate", pytest.approx(0.3, rel=1e-9))
