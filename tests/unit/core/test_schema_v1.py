"""Result schema 2: run analyses are typed fields; a version-1 ``result.json`` still loads.

The fixtures under ``tests/fixtures/results_v1/`` were written by scripted runs (scripted streaming
server, a declared 700 W node sensor, seed 1) at main e69babe, before schema 2:
``trials/``: ``--concurrency 1,2 --trials 2 --idle 0.5``; ``sweep/``: ``--sweep auto
--max-concurrency 4``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from wattbench.results.headline import trial_ci
from wattbench.results.rundir import load_result
from wattbench.core.schema import SCHEMA_VERSION, Result, upgrade_v1

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "results_v1"


def _raw(name: str) -> dict:
    return json.loads((FIX / name / "result.json").read_text())


def test_fixtures_are_version_1_with_the_analyses_in_extra():
    raw = _raw("trials")
    assert raw["schema_version"] == 1 and SCHEMA_VERSION == 2
    assert {"idle_window", "pareto"} <= set(raw["extra"])
    assert all("trials" in lv["extra"] for lv in raw["levels"])
    assert "sweep" in _raw("sweep")["extra"]


def test_v1_trials_run_loads_into_the_typed_fields(tmp_path):
    raw = _raw("trials")
    shutil.copy(FIX / "trials" / "result.json", tmp_path / "result.json")
    r = load_result(tmp_path)
    assert r.schema_version == SCHEMA_VERSION
    # the idle window: same bounds, now a Window of kind "idle"
    w = raw["extra"]["idle_window"]
    assert (r.idle_window.start_ns, r.idle_window.end_ns, r.idle_window.kind) == (w["start_ns"], w["end_ns"], "idle")
    assert r.idle_window.duration_s == pytest.approx((w["end_ns"] - w["start_ns"]) / 1e9, rel=1e-9)
    # the Pareto frontiers, point for point
    pf = raw["extra"]["pareto"]
    assert r.pareto.boundary == pf["boundary"] == "node"
    assert [(p.label, p.efficiency, p.latency, p.on_frontier) for p in r.pareto.tpot_p99.points] == [
        (p["label"], p["efficiency"], p["latency"], p["on_frontier"]) for p in pf["tpot_p99"]["points"]]
    assert r.pareto.goodput_tpot_p99 is None  # no SLO in that run
    # the trials block: every figure, and the CI compare reads from it
    for lv, rawlv in zip(r.levels, raw["levels"]):
        tb = rawlv["extra"]["trials"]
        assert lv.trials.n == tb["n"] == 2 and lv.trials.confidence == tb["confidence"]
        assert set(lv.trials.figures) == set(tb["figures"])
        f = tb["figures"]["output_tokens_per_s"]
        ci = trial_ci(lv, "output_tokens_per_s", "node")
        assert (ci.mean, ci.low, ci.high, ci.n) == (f["mean"], f["ci_low"], f["ci_high"], 2)
        # the mean is the mean of the two trials' values
        assert ci.mean == pytest.approx(sum(f["values"]) / 2, rel=1e-12)
        assert "trials" not in lv.extra
    # typed since within version 2: moved too
    assert r.prefill_decode.model_dump(exclude_none=True) == raw["extra"]["prefill_decode"]
    assert "prefill_decode" not in r.extra
    assert "idle_window" not in r.extra and "pareto" not in r.extra


def test_v1_sweep_run_loads_and_keeps_integer_levels():
    raw = _raw("sweep")
    r = Result.model_validate(raw)
    s = raw["extra"]["sweep"]
    assert r.sweep.measured_values == s["measured_values"] == [1, 2, 4]
    assert all(isinstance(v, int) for v in r.sweep.measured_values)  # concurrency stays an int
    assert (r.sweep.best_value, r.sweep.knee_value, r.sweep.reason) == (s["best_value"], s["knee_value"], s["reason"])
    assert r.sweep.scores == s["scores"] and r.optimize is None
    # written back, it is a version-2 file with the sweep at the top level
    again = json.loads(r.model_dump_json())
    assert again["schema_version"] == 2 and again["sweep"]["best_value"] == 4 and "sweep" not in again["extra"]
    assert Result.model_validate(again).sweep == r.sweep


def test_upgrade_does_not_modify_its_input():
    raw = _raw("trials")
    before = json.dumps(raw, sort_keys=True)
    upgrade_v1(raw)
    assert json.dumps(raw, sort_keys=True) == before


def test_a_version_2_file_is_not_migrated_again():
    """A v2 file whose extra happens to hold a key named like a v1 analysis keeps it there."""
    raw = _raw("sweep")
    r = Result.model_validate(raw)
    d = json.loads(r.model_dump_json())
    d["extra"]["pareto"] = {"note": "user data"}
    r2 = Result.model_validate(d)
    assert r2.extra["pareto"] == {"note": "user data"} and r2.pareto == r.pareto


def test_v1_saturation_marks_move_to_their_fields():
    raw = _raw("sweep")
    raw["levels"][0]["extra"]["saturated_figures"] = ["latency.*", "throughput.*"]
    raw["levels"][0]["extra"]["saturation_kinds"] = ["loop_lag"]
    lv = Result.model_validate(raw).levels[0]
    assert lv.saturated_figures == ["latency.*", "throughput.*"] and lv.saturation_kinds == ["loop_lag"]
    assert "saturated_figures" not in lv.extra and "saturation_kinds" not in lv.extra


def test_workload_and_prompt_length_source_move_to_their_fields(tmp_path):
    """Files written before they were typed (both fixtures, and early version-2 files) keep them in
    ``extra``, at the run and again per level: on load they are the run's typed fields, every level
    rid of its copy; the run directory's path stays in ``extra`` (no longer written, not typed)."""
    raw = _raw("trials")
    shutil.copy(FIX / "trials" / "result.json", tmp_path / "result.json")
    r = load_result(tmp_path)
    assert r.prompt_length_source == raw["extra"]["prompt_length_source"] == "approx"
    assert r.workload.model_dump() == raw["extra"]["workload"]
    assert (r.workload.kind, r.workload.seed, r.workload.token_source) == ("synthetic", 1, "approx")
    assert r.workload.input_tokens == raw["extra"]["workload"]["input_tokens"]  # a kind's own keys kept
    assert not {"workload", "prompt_length_source"} & set(r.extra) and r.extra["run_dir"] == "run1"
    assert all("prompt_length_source" in lv["extra"] for lv in raw["levels"])
    assert all("prompt_length_source" not in lv.extra for lv in r.levels)
    # written back, the file holds them typed, and reads back the same
    again = Result.model_validate(json.loads(r.model_dump_json()))
    assert again.workload == r.workload and again.prompt_length_source == "approx"


def test_a_per_level_prompt_length_source_alone_becomes_the_runs():
    d = json.loads(Result.model_validate(_raw("sweep")).model_dump_json())
    d["prompt_length_source"] = None
    for lv in d["levels"]:
        lv["extra"]["prompt_length_source"] = "tokenizer"
    r = Result.model_validate(d)
    assert r.prompt_length_source == "tokenizer" and all("prompt_length_source" not in lv.extra for lv in r.levels)
    # a typed run field is not overwritten by a level's copy
    d["prompt_length_source"] = "server"
    assert Result.model_validate(d).prompt_length_source == "server"


def test_a_tune_provenance_in_extra_moves_to_its_field():
    d = json.loads(Result.model_validate(_raw("sweep")).model_dump_json())
    d["extra"]["tune"] = {"tune_id": "t1", "trial": 3, "label": "max-num-seqs=64", "config": {"max-num-seqs": 64}}
    r = Result.model_validate(d)
    assert (r.tune.tune_id, r.tune.trial, r.tune.config) == ("t1", 3, {"max-num-seqs": 64}) and "tune" not in r.extra
