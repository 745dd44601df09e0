"""llama.cpp's llama-server for real (CPU build from ``scripts/install-llamacpp.sh``), started by
wattbench's launcher on the tiny preset exported to GGUF. Checks the recorded server info and
detection, and that the scraped /metrics token counters equal the usage tokens of the same
requests, then a whole `wattbench run` against it (as the vLLM test does).

The binary: WATTBENCH_LLAMA_SERVER (``.ci/run`` builds it into ``.llamacpp/``), else ``llama-server``
on PATH. Skipped with the reason when neither exists.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import time
from pathlib import Path

import pytest

from wattbench.clock import now_ns
from wattbench.engines import launch
from wattbench.engines.llamacpp import LlamaCpp
from wattbench.server.detect import detect_server
from wattbench.server.metrics import MetricsScraper

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
ROOT = Path(__file__).resolve().parents[2]


def llama_server() -> str | None:
    env = os.environ.get("WATTBENCH_LLAMA_SERVER")
    if env:
        return env if Path(env).is_file() else None
    local = ROOT / ".llamacpp" / "bin" / "llama-server"
    return str(local) if local.is_file() else shutil.which("llama-server")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    binary = llama_server()
    if binary is None:
        pytest.skip("no llama-server: run scripts/install-llamacpp.sh DIR and set WATTBENCH_LLAMA_SERVER")
    pytest.importorskip("gguf")
    import psutil

    run_dir = tmp_path_factory.mktemp("llamacpp-run")
    t0 = time.monotonic()
    h = launch(LlamaCpp(binary=binary), "tiny", "cpu", ["-np", "4", "-c", "4096", "-t", "2"], run_dir,
               timeout_s=300)
    h.measured_start_s = time.monotonic() - t0
    try:
        yield h
    finally:
        pid = h.pid
        h.stop()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie":
            time.sleep(0.2)
        assert not (psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"), "llama-server left behind"


def test_server_info_and_detection(server):
    si = server.server_info
    print(f"\nllama.cpp CPU tiny: ready in {server.measured_start_s:.1f} s")
    assert si.engine == "llamacpp" and si.launched and si.version
    assert si.model == "tiny"  # served under the preset's name (-a tiny)
    eff = si.effective_config
    assert eff["total_slots"] == 4 and eff["parallel"] == "4"
    assert eff["n_ctx"] == 4096 // 4  # /props reports the context of one slot: -c is shared by -np slots
    assert eff["max_model_len"] == 1024 and eff["model_path"].endswith(".f16.gguf")
    assert si.extra_body == {"ignore_eos": True} and si.metrics_endpoint.endswith("/metrics")
    det = asyncio.run(detect_server(server.base_url))
    assert det.engine == "llamacpp"


async def _stream(session, base_url, model, prompt, max_tokens):
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True}}
    usage, chunks = None, 0
    async with session.post(base_url + "/completions", json=body) as r:
        assert r.status == 200, await r.text()
        async for raw in r.content:
            line = raw.decode().strip()
            if line.startswith("data: ") and line != "data: [DONE]":
                d = json.loads(line[6:])
                chunks += bool(d.get("choices"))
                if d.get("usage"):
                    usage = d["usage"]
    return usage, chunks


def test_scraped_token_counters_equal_usage(server):
    import aiohttp

    h = server
    scraper = MetricsScraper(h.base_url, interval_s=0.5).start()
    while not scraper.timeline.scrapes:
        time.sleep(0.05)
    lengths = [16, 24, 32, 40, 48, 56]
    prompts = [("energy per token " * (3 + 4 * i)).strip() for i in range(len(lengths))]

    async def run():
        # a connection per request: llama-server closes it after each stream (server.detect.reuses_connections)
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as s:
            sem = asyncio.Semaphore(3)

            async def one(p, n):
                async with sem:
                    return await _stream(s, h.base_url, h.model, p, n)

            return await asyncio.gather(*[one(p, n) for p, n in zip(prompts, lengths)])

    t_start = now_ns()
    got = asyncio.run(run())
    elapsed_s = (now_ns() - t_start) / 1e9
    time.sleep(1.2)
    tl = scraper.stop()
    usages = [u for u, _ in got]
    assert tl.available and tl.engine == "llamacpp"
    assert [u["completion_tokens"] for u in usages] == lengths  # ignore_eos: exact lengths
    out_tokens = sum(lengths)
    in_tokens = sum(u["prompt_tokens"] for u in usages)
    t0, t1 = tl.scrapes[0][0], tl.scrapes[-1][0]
    assert t0 < t_start
    assert tl.counter_delta("generation_tokens", t0, t1) == out_tokens
    assert tl.counter_delta("prompt_tokens", t0, t1) == in_tokens
    print(f"\nllama.cpp CPU tiny: {out_tokens} output tokens in {elapsed_s:.2f} s at concurrency 3 = "
          f"{out_tokens / elapsed_s:.0f} tok/s; scraped {len(tl.scrapes)} times")


def test_wattbench_run_token_counts_equal_llamacpp_counters(server, tmp_path):
    """`wattbench run` (a real CLI process) against the real server: its token counts per level
    equal llama.cpp's own counters between the scrapes that bracket the level."""
    import subprocess
    import sys

    from wattbench.results.rundir import load_requests, load_result
    from wattbench.server.metrics import ServerTimeline

    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    p = subprocess.run(
        [sys.executable, "-m", "wattbench", "run", "--target", server.base_url, "--concurrency", "1,4",
         "--num-requests", "8", "--input-tokens", "64", "--output-tokens", "16", "--no-sensors", "--idle", "0",
         "--no-register", "--no-html", "--out", str(out), "--quiet"],
        capture_output=True, text=True, timeout=600, env=env,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    result = load_result(out)
    si = result.server
    assert si.engine == "llamacpp" and si.output_length_forced and si.extra_body == {"ignore_eos": True}
    tl = ServerTimeline.from_jsonl(out / "server_timeline.jsonl")
    assert tl.available and len(tl.scrapes) >= 4
    recs = load_requests(out)
    for lv in result.levels:
        assert lv.requests.completed == 8 and lv.requests.failed == 0
        assert lv.throughput.output_tokens == 8 * 16  # ignore_eos: lengths forced
        assert {r.output_tokens for r in recs if r.level == lv.index} == {16}
        before = [v for t, v in tl.scrapes if t <= lv.window.start_ns][-1]
        after = next(v for t, v in tl.scrapes if t >= lv.window.end_ns)
        assert after["generation_tokens"] - before["generation_tokens"] == lv.throughput.output_tokens
        assert after["prompt_tokens"] - before["prompt_tokens"] == lv.throughput.input_tokens
