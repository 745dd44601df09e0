"""The embedded engine for real: `transformers serve` on the tiny preset, started and stopped by
wattbench. Slow (starts a real server on the CPU)."""

from __future__ import annotations

import asyncio
import json
import os
import time

import pytest

pytest.importorskip("transformers")
pytest.importorskip("fastapi")

from wattbench.engines.registry import launch  # noqa: E402
from wattbench.engines.transformers_serve import TransformersServe  # noqa: E402
from wattbench.core.errors import EngineError  # noqa: E402
from wattbench.server.detect import detect_server, merge_launched  # noqa: E402
from wattbench.server.metrics import MetricsScraper  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.heavy]


def pid_gone(pid: int, timeout_s: float = 60.0) -> bool:  # returns once gone: the default ends a hang
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not os.path.exists(f"/proc/{pid}"):
            return True
        time.sleep(0.1)
    return False


async def stream_completion(base_url: str, model: str, prompt: str, max_tokens: int,
                            chat: bool = False) -> tuple[int, dict, int]:
    import aiohttp

    body = {"model": model, "max_tokens": max_tokens, "stream": True,
            "stream_options": {"include_usage": True}, "temperature": 0}
    if chat:
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    chunks, usage = 0, {}
    async with aiohttp.ClientSession() as s:
        async with s.post(base_url + ("/chat/completions" if chat else "/completions"), json=body) as r:
            status = r.status
            async for raw in r.content:
                line = raw.decode().strip()
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                d = json.loads(line[6:])
                if d.get("usage"):
                    usage = d["usage"]
                if d.get("choices"):
                    chunks += 1
    return status, usage, chunks


def test_tiny_preset_serves_exact_lengths_and_stops_clean(tmp_path):
    t0 = time.monotonic()
    h = launch("transformers", "tiny", "cpu", [], tmp_path, timeout_s=240)
    try:
        start_s = time.monotonic() - t0
        si = h.server_info
        assert si.engine == "transformers" and si.launched and si.version
        assert si.output_length_forced is True and si.extra_body == {}
        assert si.effective_config["device"] == "cpu" and si.effective_config["continuous_batching"] is True
        assert si.effective_config["dtype"] == "bfloat16"
        # detection of a launched server agrees, and it has no /metrics
        det = asyncio.run(detect_server(h.base_url))
        # 5.2x lists the launched model, whose entries carry transformers' status field; 5.17 lists only
        # its hub-cache scan (empty here), and nothing else tells it from a generic OpenAI endpoint
        assert det.engine == ("transformers" if si.models else "openai"), (si.models, det.engine, det.detected_by)
        assert det.extra_body == {} and merge_launched(si, det).engine == "transformers"
        # its identity: transformers serve exposes no flags; the model's entry without its load status
        what = "transformers serve" if det.engine == "transformers" else "an OpenAI-compatible server"
        assert det.identity.not_exposed == [f"{what} exposes no server configuration"]
        entry = det.identity.exposed.get("/v1/models", {})
        assert "status" not in entry and "created" not in entry
        merged = merge_launched(si, det).identity
        assert merged.launched == "transformers" and merged.target is None  # a launched engine: not its port
        tl = MetricsScraper(h.base_url, interval_s=0.2, timeout_s=60.0).start()  # returns after the first scrape
        timeline = tl.stop()
        assert timeline.available is False and "404" in timeline.reason

        t1 = time.monotonic()
        status, usage, chunks = asyncio.run(stream_completion(h.base_url, h.model, "the power of energy " * 10, 48))
        elapsed = time.monotonic() - t1
        assert status == 200
        # no early end token: exactly max_tokens, as counted by the server
        assert usage["completion_tokens"] == 48
        assert usage["prompt_tokens"] > 10
        assert chunks >= 1
        # the chat route too (the preset's chat template renders; still no early end)
        status, usage, _ = asyncio.run(stream_completion(h.base_url, h.model, "hello there", 16, chat=True))
        assert status == 200 and usage["completion_tokens"] == 16
        print(f"\ntransformers tiny: ready in {start_s:.1f} s (warm-up {si.warmup_duration_s:.1f} s), "
              f"48 tokens in {elapsed:.2f} s = {48 / elapsed:.0f} tok/s")
        pid = h.pid
    finally:
        h.stop()
    assert pid_gone(pid)
    assert "Uvicorn running" in (tmp_path / "server.log").read_text()


def test_bad_model_path_is_a_clear_error(tmp_path):
    from wattbench.core.errors import UserError

    with pytest.raises(UserError, match="neither a preset"):
        launch("transformers", str(tmp_path / "no-such-model"), "cpu", [], tmp_path, timeout_s=60)


def test_broken_model_dir_gives_engine_error_with_log_tail_and_no_orphan(tmp_path):
    bad = tmp_path / "bad-model"
    bad.mkdir()
    (bad / "config.json").write_text('{"model_type": "llama", "vocab_size": 10}')  # no weights, no tokenizer
    with pytest.raises(EngineError) as ei:
        launch("transformers", str(bad), "cpu", [], tmp_path / "run", timeout_s=120)
    assert "exited with code" in str(ei.value)
    assert ei.value.log_tail.strip()
    import psutil

    assert not [p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] and str(bad) in p.info["cmdline"]]


def test_port_collision_after_the_check_gives_engine_error(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        taken = s.getsockname()[1]
        # the engine is told (last flag wins) to bind a port something else holds
        with pytest.raises(EngineError) as ei:
            launch("transformers", "tiny", "cpu", ["--port", str(taken)], tmp_path, timeout_s=120)
    assert "address already in use" in ei.value.log_tail.lower()
    import psutil

    assert not [p for p in psutil.process_iter(["cmdline"])
                if p.info["cmdline"] and str(taken) in p.info["cmdline"] and "serve" in p.info["cmdline"]]


def test_missing_engine_is_a_clear_error(tmp_path):
    eng = TransformersServe(python="/nonexistent/bin/python")
    with pytest.raises(EngineError, match=r"pip install 'wattbench\[engine\]'"):
        launch(eng, "tiny", "cpu", [], tmp_path, timeout_s=10)
    assert not (tmp_path / "server.log").exists()


def test_a_target_run_without_a_tokenizer_calibrates_prompts_to_the_served_length(tmp_path):
    """``--target`` at the embedded engine, no ``--tokenizer`` (transformers serve has no /tokenize):
    the prompts are fitted to the server's usage.prompt_tokens before the first level, so every
    measured level is within ±2% of the asked input length as the server counts it, with no
    prompt-length finding (the 0.75 words-per-token guess was +58–59% off on the H200)."""
    from wattbench.config.run import RunConfig
    from wattbench.run import run_benchmark

    h = launch("transformers", "tiny", "cpu", [], tmp_path / "engine", timeout_s=240)
    try:
        cfg = RunConfig(target=h.base_url, model=h.model, concurrency=[1, 2], num_requests=16, input_tokens="128",
                        output_tokens="4", sensors=["const:node=300"], idle_s=0, register_run=False, html=False,
                        history_check=False, out=str(tmp_path / "run"))
        res = run_benchmark(cfg)
    finally:
        h.stop()
    cal = res.prompt_calibration
    assert cal is not None and cal.used and cal.counted == cal.probes, cal
    assert res.prompt_length_source == "calibrated"
    rows = [json.loads(x) for x in (tmp_path / "run" / "requests.jsonl").read_text().splitlines()]
    for lv in res.levels:
        done = [r for r in rows if r["level"] == lv.index and r["ok"] and not r["warmup"]]
        asked = sum(r["requested_input_tokens"] for r in done)
        counted = sum(r["input_tokens"] for r in done)
        print(f"\n{lv.label}: asked {asked / len(done):.1f}, counted {counted / len(done):.1f} "
              f"({100 * (counted - asked) / asked:+.2f}%); fit {cal.reason}")
        assert abs(counted - asked) <= 0.02 * asked, (lv.label, asked, counted, cal.reason)
        assert not [f for f in lv.validity.findings if f.kind == "prompt_lengths"]
