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
from wattbench.config.run import RunConfig
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
    # the workload's token source says the same fit, typed (TokenizerInfo), as result.json keeps it
    tok = res.workload.tokenizer
    assert tok.source == "calibrated" and tok.calibration is not None and tok.calibration.probes == 24
    assert tok.calibration.tokens_per_word == pytest.approx(cal.tokens_per_word, rel=1e-12)
    assert tok.words_per_token == pytest.approx(1.0 / cal.tokens_per_word, rel=1e-12)
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


def test_no_prime_still_calibrates_and_help_says_what_each_flag_skips(tmp_path):
    """``--no-prime`` skips the priming load only: the prompt lengths are still fitted (before, it
    silently skipped the calibration and every level then read ``prompt lengths +58%``); only
    ``--no-calibrate-prompts`` skips it, and ``--help`` says both."""
    import subprocess
    import sys

    from tests.fakes.reliability_procs import child_env

    def wb(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "wattbench", *args], cwd=tmp_path, env=child_env(COLUMNS="80"),
                              capture_output=True, text=True, timeout=120)

    with stream_server(*SERVER) as (base, stats):
        p = wb("run", "--target", base, "-c", "2", "-n", "8", "--input-tokens", "256", "--output-tokens", "4",
               "--sensor", "const:node=300", "--idle", "0", "--no-prime", "--no-history-check", "--no-register",
               "--no-html", "--out", str(tmp_path / "run"))
        served = stats()
    assert p.returncode == 0, p.stderr
    from wattbench.results.rundir import load_result

    res = load_result(tmp_path / "run")
    assert res.noise.priming is None and res.prompt_calibration.used and res.prompt_calibration.probes == 24
    assert served["streams_completed"] == 24 + 8  # the probes and the level; no priming load
    assert abs(_counted_pct(tmp_path / "run", 0)) <= 2.0
    out = " ".join(p.stdout.split())  # the summary at 80 columns, its folds joined
    assert "prompts calibrated to the server's token count" in out
    assert "prompt lengths" not in out  # no prompt-length note: the levels hit the asked length
    h = "".join(wb("run", "--help").stdout.split())  # the help's folds (inside a flag's name too) joined
    assert "promptlengthsarestillcalibrated(--no-calibrate-promptsskipsthat)" in h
    assert "alsowith--no-prime" in h
