"""The typed level blocks (``core/schema/blocks.py``): goodput, thermal, server metrics. A run's
JSON keeps the keys its writer set; an older file's dict loads, its unknown keys kept."""

from __future__ import annotations

import json

import pytest

from wattbench.core.schema import Goodput, LevelResult, ServerMetrics, Thermal

_GOODPUT = {"slos": [{"metric": "ttft", "stat": "p99", "threshold_ms": 500.0}], "duration_s": 10.0,
            "good_requests": 3, "total_requests": 6, "fraction": 0.5, "requests_per_s": 0.3,
            "output_tokens_per_s": 4.3, "token_basis": "tokens_in_window", "per_slo": {"ttft_p99": 4},
            "level": {"ttft_p99": {"threshold_ms": 500.0, "observed_ms": 594.0, "met": False, "n": 6}},
            "all_met": False,
            "per_kw": {"accelerator": {"requests_per_s_per_kw": 0.75, "output_tokens_per_s_per_kw": 10.75,
                                       "avg_power_w": 400.0},
                       "node": {"requests_per_s_per_kw": None, "output_tokens_per_s_per_kw": None,
                                "avg_power_w": None}}}


_THERMAL = {"max_temperature_c": 71.0, "devices": {
    "gpu0": {"max_temperature_c": 71.0, "throttle_reasons": ["sw_power_cap"], "capping_fraction": 0.5}}}
_HAND_MADE = {"requests_per_s": 1.0, "note": "hand-made"}


def _level(**blocks) -> dict:
    return {"index": 0, "label": "concurrency=1", **blocks}


def test_a_written_block_reads_back_with_the_same_keys_and_values():
    lv = LevelResult.model_validate(_level(goodput=_GOODPUT, thermal=_THERMAL,
                                           server_metrics={"available": False, "reason": "no /metrics"}))
    d = json.loads(lv.model_dump_json())
    assert d["goodput"] == _GOODPUT
    assert d["thermal"] == _THERMAL  # the same keys and the values as read, bit for bit
    assert d["server_metrics"] == {"available": False, "reason": "no /metrics"}
    assert lv.goodput.per_kw_at("accelerator") == pytest.approx(10.75, rel=1e-12) and lv.goodput.per_kw_at("node") is None
    assert lv.goodput.per_kw_at("wall") is None and lv.goodput.slo_text == "ttft_p99=500ms"
    assert lv.thermal.devices["gpu0"].capping_fraction == pytest.approx(0.5, rel=1e-12) and lv.thermal.mean_sm_clock_mhz is None


def test_defaults_are_empty_blocks_and_an_empty_goodput_is_none():
    lv = LevelResult.model_validate(_level(goodput={}))
    assert lv.goodput is None
    d = lv.model_dump()
    assert d["thermal"] == {} and d["server_metrics"] == {} and d["goodput"] is None


def test_an_assigned_field_is_written_and_an_unset_one_is_not():
    sm = ServerMetrics(available=True)
    sm.mean_running_requests = None  # set, though None: written, as the writer sets a gauge it could not read
    assert sm.model_dump() == {"available": True, "mean_running_requests": None}


def test_unknown_keys_of_an_older_file_are_kept_and_written_back():
    old = {"max_temperature_c": 60.0, "fan_pct": 40, "devices": {"gpu0": {"hbm_temperature_c": 70.0}}}
    th = Thermal.model_validate(old)
    assert th.model_extra == {"fan_pct": 40}
    assert th.model_dump() == old
    g = Goodput.model_validate(_HAND_MADE)
    assert g.model_dump() == _HAND_MADE
    assert g.output_tokens_per_s == pytest.approx(0.0, abs=1e-12) and g.fraction is None and g.slo_text is None


def test_a_target_down_dict_of_an_older_file_loads_and_writes_back_as_read():
    from wattbench.core.schema import LevelResult

    old = {"target": "http://h:8000/v1", "stopped_answering_s": 12.5, "last_ok_ns": 10, "first_failure_ns": 20,
           "refusals": 5, "failures": 7, "text": "the target http://h:8000/v1 stopped answering 12.5 s into the level"}
    lv = LevelResult.model_validate({"index": 0, "label": "c=1", "target_down": old})
    assert lv.target_down is not None and lv.target_down.refusals == 5 and lv.target_down.text.startswith("the target")
    assert lv.model_dump(mode="json")["target_down"] == old
    partial = LevelResult.model_validate({"index": 0, "label": "c=1", "target_down": {"text": "gone"}})
    assert partial.model_dump(mode="json")["target_down"] == {"text": "gone"}  # only the keys it was written with
