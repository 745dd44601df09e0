"""Checks shared by the real-engine CPU tests (vLLM, llama.cpp): stream requests with forced
lengths and compare the engine's own token counters, between the scrapes that bracket the work,
with what the requests reported. Not a fake: the ground truth is the engine's counters."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from wattbench.core.clock import now_ns
from wattbench.server.metrics import MetricsScraper

ROOT = Path(__file__).resolve().parents[2]
LENGTHS = [16, 24, 32, 40, 48, 56]  # forced output lengths (ignore_eos) of the six streamed requests


async def stream_completion(session, base_url: str, model: str, prompt: str, max_tokens: int):
    """One streamed /completions request with ``ignore_eos``: (usage, chunks carrying choices)."""
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


def assert_counters_equal_usage(base_url: str, model: str, engine: str, *, force_close: bool = False):
    """Stream ``LENGTHS`` at concurrency 3 under a 0.5 s scraper; assert the engine's generation and
    prompt token counters between the first and last scrape equal the requests' usage.

    Returns (timeline, [(usage, chunks)], elapsed_s). ``force_close``: a connection per request
    (llama-server closes it after each stream; ``server.detect.reuses_connections``)."""
    import aiohttp

    scraper = MetricsScraper(base_url, interval_s=0.5).start()
    while not scraper.timeline.scrapes:
        time.sleep(0.05)
    prompts = [("energy per token " * (3 + 4 * i)).strip() for i in range(len(LENGTHS))]

    async def run():
        connector = aiohttp.TCPConnector(force_close=True) if force_close else None
        async with aiohttp.ClientSession(connector=connector) as s:
            sem = asyncio.Semaphore(3)

            async def one(p, n):
                async with sem:
                    return await stream_completion(s, base_url, model, p, n)

            return await asyncio.gather(*[one(p, n) for p, n in zip(prompts, LENGTHS)])

    t_start = now_ns()
    got = asyncio.run(run())
    elapsed_s = (now_ns() - t_start) / 1e9
    time.sleep(1.2)
    tl = scraper.stop()
    usages = [u for u, _ in got]
    assert tl.available and tl.engine == engine
    assert [u["completion_tokens"] for u in usages] == LENGTHS  # ignore_eos: exact lengths
    t0, t1 = tl.scrapes[0][0], tl.scrapes[-1][0]
    assert t0 < t_start
    assert tl.counter_delta("generation_tokens", t0, t1) == sum(LENGTHS)
    assert tl.counter_delta("prompt_tokens", t0, t1) == sum(u["prompt_tokens"] for u in usages)
    return tl, got, elapsed_s


def run_cli_levels(base_url: str, out: Path, timeout_s: float):
    """``wattbench run`` (a real CLI process) at concurrency 1,4, 8 requests of 64 in / 16 out tokens
    per level; returns (result, server timeline, request records)."""
    from wattbench.results.rundir import load_requests, load_result
    from wattbench.server.metrics import ServerTimeline

    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    p = subprocess.run(
        [sys.executable, "-m", "wattbench", "run", "--target", base_url, "--concurrency", "1,4",
         "--num-requests", "8", "--input-tokens", "64", "--output-tokens", "16", "--no-sensors", "--idle", "0",
         "--no-register", "--no-html", "--out", str(out), "--quiet"],
        capture_output=True, text=True, timeout=timeout_s, env=env,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    tl = ServerTimeline.from_jsonl(out / "server_timeline.jsonl")
    # by construction: one scrape before anything is measured (MetricsScraper.start), one after each
    # level's window (RunSession.await_closing_reads) — the brackets the checks below need
    assert tl.available and len(tl.scrapes) >= 3
    return load_result(out), tl, load_requests(out)


def assert_level_counters_bracket(tl, lv) -> None:
    """The level's token counts equal the engine's counters between the scrapes bracketing its window."""
    assert lv.requests.completed == 8 and lv.requests.failed == 0
    assert lv.throughput.output_tokens == 8 * 16  # ignore_eos: lengths forced
    before = [v for t, v in tl.scrapes if t <= lv.window.start_ns][-1]
    after = next(v for t, v in tl.scrapes if t >= lv.window.end_ns)
    assert after["generation_tokens"] - before["generation_tokens"] == lv.throughput.output_tokens
    assert after["prompt_tokens"] - before["prompt_tokens"] == lv.throughput.input_tokens
