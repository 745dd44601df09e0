"""Prompt lengths without a tokenizer, fitted to the server's own count (``run/prime.calibrate_prompts``).

Ground truth: the scripted server counts ``usage.prompt_tokens = round(2.1 · words + 7)`` — a
tokenizer that splits the run's words into more tokens than the 0.75 words-per-token guess expects
(0.75 × 2.1: +58%, as ``transformers serve`` counted on the H200) and a chat template of 7 tokens. Uncalibrated, every
level was ``warn`` for prompt length; calibrated, the levels hit the asked length within ±2% as
the server counts them, carry no prompt-length finding, and the result says how it was fitted."""

from __future__ import annotations

import json

import pytest

from tests.fakes.stream_server_proc import stream_server
from wattbench.config import RunConfig
from wattbench.run import run_benchmark

SERVER = ("--ttft-ms", "5", "--itl-ms", "2", "--prompt-tokens-per-word", "2.1", "--prompt-overhead", "7")


def _run(base: str, out, **kw):
    cfg = RunConfig(target=base, sensors=["const:node=300"], idle_s=0, register_run=False, html=False,
                    out=str(out), concurrency=[1, 4], num_requests=16, input_tokens="256", output_tokens="4",
                    history_check=False, **kw)
    return run_benchmark(cfg)


def _counted_pct(out, level: int) -> float:
    rows = [json.loads(x) for x in (out / "requests.jsonl").read_text().splitlines()]
    rows = [r for r in rows if r["level"] == level and r["ok"] and not r["warmup"]]
    asked = sum(r["requested_input_tokens"] for r in rows)
    return 100.0 * (sum(r["input_tokens"] for r in rows) - asked) / asked


def test_calibrated_prompts_hit_the_asked_length_as_the_server_counts_it(tmp_path):
    with stream_server(*SERVER) as (base, _):
        res = _run(base, tmp_path / "cal")
        old = _run(base, tmp_path / "old", calibrate_prompts=False)
    cal = res.prompt_calibration
    assert cal is not None and cal.used and cal.counted == cal.probes == 24
    assert cal.tokens_per_word == pytest.approx(2.1, rel=0.01)
    assert cal.overhead_tokens == pytest.approx(7.0, abs=1.5)
    assert res.prompt_length_source == "calibrated" and res.workload.token_source == "calibrated"
    for lv in res.levels:
        assert abs(_counted_pct(tmp_path / "cal", lv.index)) <= 2.0
        assert not [f for f in lv.validity.findings if f.kind == "prompt_lengths"]
    # the old way, on the same server: the 0.75 guess is +58% off plus the template, a warn on every level
    assert old.prompt_calibration is None and old.prompt_length_source == "approx"
    for lv in old.levels:
        assert _counted_pct(tmp_path / "old", lv.index) > 50.0
        (f,) = [f for f in lv.validity.findings if f.kind == "prompt_lengths"]
        assert f.severity == "warn"


def test_a_server_without_usage_leaves_the_guess_and_says_why(tmp_path):
    with stream_server("--ttft-ms", "5", "--itl-ms", "2", "--no-usage") as (base, _):
        res = _run(base, tmp_path / "nousage")
    cal = res.prompt_calibration
    assert cal is not None and not cal.used and cal.counted == 0 and "no usage.prompt_tokens" in cal.reason
    assert res.prompt_length_source == "approx"
