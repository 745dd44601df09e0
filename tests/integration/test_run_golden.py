"""Golden run: the orchestrator's whole result, pinned when the runner was split into run/.

One scripted run — the scripted streaming server (fixed TTFT 30 ms, ITL 20 ms, exact output
lengths), a declared constant sensor, fixed seed, two trials of two closed-loop levels, a carbon
intensity — is compared with ``tests/fixtures/golden/run_result.json``, committed BEFORE the
runner was split into ``wattbench/run/`` (its ``extra`` keys typed since: it is read through the
schema, which moves them, before comparing; ``extra["run_dir"]``, no longer written, is dropped). What depends on wall time is normalised away: clock
anchors, run ids, paths, every float (latencies, windows, energies: they follow the host's timing;
the energy figures are asserted exactly against the 500 W meter and the window they cover),
digits inside verdict reasons and
decimals in any text, the prefill/decode regression over client-timed intervals and which near-equal levels sit on
the Pareto frontier (the points themselves are compared). What must not move is compared exactly: the result's structure
(every key, at every depth), the level and trial counts, request counts, token totals (the server
sends exactly the requested lengths), the config echo, labels, verdicts and their reasons' text.

Regenerate (only when a change to the result is intended, and say so in the commit):
``WATTBENCH_WRITE_GOLDEN=1 pytest tests/integration/test_run_golden.py``.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from tests.fakes.stream_server_proc import stream_server
from wattbench.config.run import RunConfig
from wattbench.core.schema import Result

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "golden" / "run_result.json"

# integers that follow from the configuration and the scripted server alone
EXACT_INTS = {"index", "trial", "n", "completed", "failed", "total", "output_tokens", "input_tokens",
              "num_requests", "seed", "warmup_requests", "concurrency", "workers", "trials", "schema_version",
              "value", "ladder_size"}
WALL_KEYS = {"run_id", "created_at", "run_dir", "out", "base_url", "target", "targets", "anchor_wall_ns",
             "anchor_mono_ns", "anchor_uncertainty_ns", "environment", "wattbench_version", "hostname"}
# fits over client-timed intervals and Pareto membership between near-equal latencies: which way
# they fall follows the host's timing
TIMING_FITS = {"regression", "cross_check", "frontier", "on_frontier", "weighting_reason"}
# the saturation guard's marks: on a busy host the client's loop lag trips it (tested on its own)
HOST_KEYS = {"saturated", "saturation_reasons", "saturated_figures", "saturation_kinds"}
# findings that judge the host (a busy CI machine), not the run: dropped before comparing
HOST_REASONS = ("loop lag", "event loop", "client CPU", "load generator")
HOST_KINDS = ("loop_lag", "client_cpu", "send_lag")


def _norm(x, key: str = ""):
    if key == "latency" and (isinstance(x, str) or x is None):  # the latency verdict: a loop lag can move it
        return "<host>"
    if key in WALL_KEYS:
        return "<wall>"
    if key in HOST_KEYS:
        return "<host>"
    if key in TIMING_FITS:
        return "<timing-derived>"
    if isinstance(x, dict):
        return {k: _norm(v, k) for k, v in sorted(x.items())}
    if isinstance(x, list):
        if key == "reasons":
            return sorted(re.sub(r"\d+(\.\d+)?", "#", r) for r in x if not any(h in r for h in HOST_REASONS))
        if key == "findings":  # typed findings: the client's judge the host; the rest, digits aside
            return sorted(json.dumps(_norm({k: v for k, v in f.items() if k != "basis"}), sort_keys=True)
                          for f in x if f.get("kind") not in HOST_KINDS)
        return [_norm(v, key) for v in x]
    if isinstance(x, bool) or x is None:
        return x
    if isinstance(x, int):
        return x if key in EXACT_INTS else "<int>"
    if isinstance(x, float):
        return x if (key in EXACT_INTS and x == int(x)) else "<float>"
    if isinstance(x, str):
        return re.sub(r"\d+\.\d+", "#", x)
    return x


def _run(tmp_path) -> dict:
    from wattbench.run import run_benchmark

    with stream_server("--ttft-ms", "30", "--itl-ms", "20") as (base, _):
        cfg = RunConfig(target=base, concurrency=[2, 4], num_requests=12, trials=2, cooldown_s=0,
                        output_tokens="8", input_tokens="16", sensors=["const:accelerator=500"], idle_s=0,
                        carbon_intensity="400", register_run=False, html=False, out=str(tmp_path / "run"),
                        workers=1, seed=7, calibrate_prompts=False)  # the golden file's approximate lengths
        run_benchmark(cfg)
    lines = [json.loads(x) for x in (tmp_path / "run" / "requests.jsonl").read_text().splitlines()]
    # requests.jsonl: every request of both trials of both levels, each marked with its trial; no
    # chunk stamps (they are kept only with --keep-chunks)
    assert len(lines) == 2 * 2 * 12 and sorted({(d["level"], d["trial"]) for d in lines}) == [
        (0, 0), (0, 1), (1, 0), (1, 1)]
    assert not any("chunk_ns" in d for d in lines) and all(d["first_token_ns"] for d in lines)
    return json.loads((tmp_path / "run" / "result.json").read_text())


def test_scripted_run_matches_the_golden_result(tmp_path):
    got = _run(tmp_path)
    if os.environ.get("WATTBENCH_WRITE_GOLDEN"):
        GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    # the golden file predates the typed fields of schema 2: read through the schema, it moves its
    # ``extra`` keys to them (the upgrade every older file takes), and is compared in that form
    want = Result.model_validate(json.loads(GOLDEN.read_text())).model_dump(mode="json")
    # and the run directory's path is no longer written (where the result lives is not a result)
    assert "run_dir" in want["extra"] and "run_dir" not in got["extra"]
    del want["extra"]["run_dir"]
    # the typed fields the upgrade filled from the golden file's ``extra``, as the run writes them
    assert got["prompt_length_source"] == "approx" and got["workload"]["kind"] == "synthetic"
    assert got["workload"]["seed"] == 7 and got["workload"]["token_source"] == "approx"
    assert Result.model_validate(got).model_dump(mode="json") == got  # what the run wrote is already typed
    # the figures the scripted server fixes, asserted directly (a normaliser bug cannot hide them)
    assert [lv["requests"]["completed"] for lv in got["levels"]] == [12, 12]
    assert [lv["throughput"]["output_tokens"] for lv in got["levels"]] == [96, 96]
    assert [lv["trial"] for lv in got["levels"]] == [1, 1]  # the last of two trials (0-based)
    assert got["carbon"]["g_per_kwh"] == pytest.approx(400.0, rel=1e-9) and got["carbon"]["source"] == "constant"
    # the energy figures the normaliser hides are exact here: a declared 500 W meter makes a
    # window's energy 500 W × its duration, the server fixes 96 output tokens (12 × 8) per level
    # (its input count, compared exactly with the golden file, is what it tokenized), and
    # 400 gCO2e/kWh prices each joule
    for lv in got["levels"]:
        for window, e in (("window", lv["energy"]["accelerator"]), ("steady_window", lv["energy_steady"]["accelerator"])):
            dur_s = lv[window]["duration_s"]
            assert (e["method"], e["label"]) == ("declared", "declared")
            assert e["energy_j"] == pytest.approx(500.0 * dur_s, rel=1e-9), window
            assert e["avg_power_w"] == pytest.approx(500.0, rel=1e-12), window
            assert e["carbon_g"] == pytest.approx(500.0 * dur_s / 3.6e6 * 400.0, rel=1e-9), window
        e, dur_s, n_in = lv["energy"]["accelerator"], lv["window"]["duration_s"], lv["throughput"]["input_tokens"]
        assert e["j_per_output_token"] == pytest.approx(500.0 * dur_s / 96, rel=1e-9)
        assert e["j_per_token"] == pytest.approx(500.0 * dur_s / (96 + n_in), rel=1e-9)
        assert e["output_tokens_per_s_per_kw"] == pytest.approx(96 / dur_s / 0.5, rel=1e-9)
        assert e["tokens_per_kwh"] == pytest.approx((96 + n_in) / (500.0 * dur_s / 3.6e6), rel=1e-9)
        assert e["carbon_g_per_million_output_tokens"] == pytest.approx(
            500.0 * dur_s / 3.6e6 * 400.0 / 96 * 1e6, rel=1e-9)
        # the trials' table holds each trial's figure and their mean: 500 W in both
        pw = lv["trials"]["figures"]["avg_power_w@accelerator"]
        assert pw["values"] == pytest.approx([500.0, 500.0]) and pw["mean"] == pytest.approx(500.0)
        # each trial's steady-window figures: newer than the golden file (which reads them as none),
        # asserted here against the same meter: 500 W, and per kW = the steady tokens/s over 0.5 kW
        fs = lv["trials"]["figures_steady"]
        assert fs["avg_power_w@accelerator"]["values"] == pytest.approx([500.0, 500.0])
        assert fs["output_tokens_per_s_per_kw@accelerator"]["values"] == pytest.approx(
            [t / 0.5 for t in fs["output_tokens_per_s"]["values"]], rel=1e-9)
        lv["trials"]["figures_steady"] = {}
        # the ML.ENERGY gates (accounting/gates.py): newer than the golden file; a level of a few
        # seconds fails the 30 s steady-window gate, a note (no figure biased by it), and nothing else
        gates = [f for f in lv["validity"]["findings"] if f["kind"].startswith("gate_")]
        assert [(f["kind"], f["severity"]) for f in gates] == [("gate_steady_window", "note")]
        assert lv["steady_window"]["duration_s"] < 30.0
        lv["validity"]["findings"] = [f for f in lv["validity"]["findings"] if not f["kind"].startswith("gate_")]
        # each trial's thermal state, its per-second steady series and the level's stationarity:
        # newer than the golden file; a declared meter has no thermal channel and reads 500 W each second
        assert lv["trials"].pop("thermal") == [None, None]
        series = lv.pop("series")
        if series is not None:
            assert series["power_w"]["accelerator"] == pytest.approx([500.0] * len(series["t_s"]), rel=1e-9)
        st = lv.pop("stationarity")
        assert st is None or st["trials"] == 2
        # each trial interval's scale, newer than the golden file: the log scale for a figure every
        # trial of which is positive (metrics/trials.trial_interval), Student-t for the others
        for f in lv["trials"]["figures"].values():
            vals = [v for v in f["values"] if v is not None]
            assert f.pop("scale") == (("log" if all(v > 0 for v in vals) else "linear") if len(vals) > 1 else None)
    for lv in want["levels"]:  # read through the schema: the new fields at their defaults
        assert (lv.pop("series"), lv.pop("stationarity"), lv["trials"].pop("thermal")) == (None, None, [])
        assert {f.pop("scale") for f in lv["trials"]["figures"].values()} == {None}
    # --keep-chunks (bounded memory): a config field newer than the golden file, off by default
    assert got["config"].pop("keep_chunks") is False and "keep_chunks" not in want["config"]
    # --strict: a config field newer than the golden file, off by default
    assert got["config"].pop("strict") is False and "strict" not in want["config"]
    # --precondition: a config field newer than the golden file, off by default
    assert got["config"].pop("precondition") is False and "precondition" not in want["config"]
    assert got["config"].pop("precondition_max_s") == pytest.approx(600.0) and "precondition_max_s" not in want["config"]
    # --secret-header: a config field newer than the golden file, empty by default
    assert got["config"].pop("secret_headers") == [] and "secret_headers" not in want["config"]
    # --trials auto's bounds: config fields newer than the golden file, unset without --trials auto
    assert {k: got["config"].pop(k) for k in ("precision_pct", "max_trials", "max_time_s")} == {
        "precision_pct": None, "max_trials": None, "max_time_s": None}
    # measuring from a known state: config fields and a block newer than the golden file
    new = {k: got["config"].pop(k) for k in ("prime", "prime_requests", "history_check", "trial_order",
                                             "restart_engine", "prompt_salt", "calibrate_prompts")}
    assert new == {"prime": True, "prime_requests": None, "history_check": True, "trial_order": "interleaved",
                   "restart_engine": False, "prompt_salt": None, "calibrate_prompts": False}
    noise = got.pop("noise")
    assert want.pop("noise") is None
    assert noise["prompt_salt"] == got["run_id"].rsplit("-", 1)[-1]  # no prompt of another run is repeated
    pr = noise["priming"]  # two rounds of the largest concurrency, none of it measured
    assert (pr["mode"], pr["value"], pr["requests"], pr["completed"]) == ("concurrency", 4, 8, 8)
    # its output tokens (8 requests of 8) and their rate over its requests' span, inside the phase's
    assert pr["output_tokens"] == 64
    assert pr["output_tokens_per_s"] >= 64 / ((pr["end_ns"] - pr["start_ns"]) / 1e9)
    assert noise["trial_order"] == "interleaved"
    hc = noise["history_check"]  # two trials: the first level measured once more after the others
    assert hc["level"] == "concurrency=2" and hc["repeat"]["requests"]["completed"] == 8  # a quarter of 12, at least 8
    # two trials: a 1-df basis, inconclusive (metrics/noise.judge) unless the repeat moved it beyond
    assert hc["verdict"] in ("ok", "warn", "unknown") and hc["first"] > 0 and hc["repeated"] > 0
    # its finding (when this loaded host moved the figure beyond the noise) is the one host-dependent
    # finding of the run: judged in the run's verdict, never a warning line beside it
    assert not [w for w in got["warnings"] if w.startswith("history check ")]
    warned = [f for f in got["validity"]["findings"] if f["kind"] == "history_check"]
    assert [f["text"] for f in warned] == ([hc["text"]] if hc["verdict"] != "ok" else [])
    got["validity"]["findings"] = [f for f in got["validity"]["findings"] if f not in warned]
    if warned and want["validity"]["verdict"] == "valid":
        got["validity"]["verdict"] = "valid"
    diffs = _diff(_norm(got), _norm(want))
    assert not diffs, "\n".join(diffs[:40])


def _diff(a, b, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{path}.{k}: only in {'run' if k in a else 'golden'}" for k in sorted(set(a) ^ set(b))]
        for k in sorted(set(a) & set(b)):
            out += _diff(a[k], b[k], f"{path}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _diff(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: run {a!r} != golden {b!r}"]
