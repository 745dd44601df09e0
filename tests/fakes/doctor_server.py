"""A small OpenAI-compatible stand-in for ``wattbench doctor`` tests (aiohttp, 127.0.0.1 only).

Looks like vLLM from outside (``/version``, ``owned_by: vllm``, ``max_model_len`` in
``/v1/models``, ``vllm:*`` series on ``/metrics``), with switches for each failure mode doctor
checks: no ``/metrics``, no usage chunk, HTTP 429 beyond ``limit_per_s`` requests per second,
no request-id header, a ``gpu_memory_utilization`` label. A prompt longer (in words) than
``max_model_len`` is refused with vLLM's HTTP 400 message.

In a test: ``with serve(OpsServerConfig(...)) as url`` (a thread with its own event loop).
As a process: ``python tests/fakes/doctor_server.py --port 0 [...]`` prints ``LISTENING <port>``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import threading
import time
from dataclasses import dataclass

from aiohttp import web


@dataclass
class OpsServerConfig:
    model: str = "tiny"
    max_model_len: int | None = 2048
    metrics: bool = True
    usage: bool = True
    request_id: bool = True
    limit_per_s: int = 0  # 0: no rate limiting
    gpu_memory_utilization: str = "0.9"
    latency_histogram: bool = True
    chat_only: bool = False  # /v1/completions answers 404 (a chat model behind a chat-only route)


class OpsServer:
    def __init__(self, cfg: OpsServerConfig):
        self.cfg = cfg
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.requests = 0
        self.rejected_429 = 0
        self.window = (0, 0)  # (second, count)
        self.app = web.Application()
        self.app.router.add_get("/v1/models", self.models)
        self.app.router.add_get("/version", self.version)
        self.app.router.add_get("/health", self.health)
        self.app.router.add_get("/metrics", self.metrics)
        self.app.router.add_post("/v1/completions", self.complete)
        self.app.router.add_post("/v1/chat/completions", self.complete)

    async def models(self, request):
        m = {"id": self.cfg.model, "object": "model", "owned_by": "vllm"}
        if self.cfg.max_model_len:
            m["max_model_len"] = self.cfg.max_model_len
        return web.json_response({"object": "list", "data": [m]})

    async def version(self, request):
        return web.json_response({"version": "0.0.0-ops-fake"})

    async def health(self, request):
        return web.Response(text="")

    async def metrics(self, request):
        if not self.cfg.metrics:
            return web.Response(status=404, text="Not Found")
        lines = [
            "# TYPE vllm:num_requests_running gauge", 'vllm:num_requests_running{engine="0"} 0.0',
            "# TYPE vllm:num_requests_waiting gauge", 'vllm:num_requests_waiting{engine="0"} 0.0',
            "# TYPE vllm:prompt_tokens_total counter", f'vllm:prompt_tokens_total{{engine="0"}} {self.prompt_tokens}.0',
            "# TYPE vllm:generation_tokens_total counter",
            f'vllm:generation_tokens_total{{engine="0"}} {self.generation_tokens}.0',
            "# TYPE vllm:cache_config_info gauge",
            f'vllm:cache_config_info{{block_size="16",engine="0",gpu_memory_utilization="{self.cfg.gpu_memory_utilization}",'
            f'kv_cache_max_concurrency="12.5",num_gpu_blocks="1600"}} 1.0',
        ]
        if self.cfg.latency_histogram:
            lines += ["# TYPE vllm:e2e_request_latency_seconds histogram",
                      f'vllm:e2e_request_latency_seconds_bucket{{engine="0",le="+Inf"}} {self.requests}.0',
                      f'vllm:e2e_request_latency_seconds_count{{engine="0"}} {self.requests}.0',
                      f'vllm:e2e_request_latency_seconds_sum{{engine="0"}} {0.01 * self.requests}']
        return web.Response(text="\n".join(lines) + "\n", content_type="text/plain")

    def _limited(self) -> bool:
        if not self.cfg.limit_per_s:
            return False
        sec = int(time.monotonic())
        s, n = self.window
        n = n + 1 if s == sec else 1
        self.window = (sec, n)
        return n > self.cfg.limit_per_s

    async def complete(self, request):
        body = await request.json()
        hdrs = {"x-request-id": f"req-{self.requests}"} if self.cfg.request_id else {}
        if self._limited():
            self.rejected_429 += 1
            return web.json_response({"error": {"message": "rate limit exceeded"}}, status=429,
                                     headers={"retry-after": "1", **hdrs})
        chat = request.path.endswith("/chat/completions")
        if self.cfg.chat_only and not chat:
            return web.json_response({"error": {"message": "Not Found"}}, status=404)
        text = " ".join(m.get("content", "") for m in body.get("messages", [])) if chat else body.get("prompt", "")
        n_in = len(str(text).split())
        n_out = int(body.get("max_tokens") or 16)
        if self.cfg.max_model_len and n_in + n_out > self.cfg.max_model_len:
            msg = (f"This model's maximum context length is {self.cfg.max_model_len} tokens. However, you requested "
                   f"{n_in + n_out} tokens ({n_in} in the messages, {n_out} in the completion).")
            return web.json_response({"object": "error", "message": msg, "type": "BadRequestError", "code": 400},
                                     status=400, headers=hdrs)
        self.requests += 1
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", **hdrs})
        await resp.prepare(request)
        for k in range(n_out):
            chunk = {"id": "cmpl-ops", "object": "text_completion", "model": self.cfg.model,
                     "choices": [{"index": 0, "text": " tok", "finish_reason": None}]}
            await resp.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        self.prompt_tokens += n_in
        self.generation_tokens += n_out
        if self.cfg.usage and (body.get("stream_options") or {}).get("include_usage"):
            u = {"id": "cmpl-ops", "object": "text_completion", "model": self.cfg.model, "choices": [],
                 "usage": {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out}}
            await resp.write(b"data: " + json.dumps(u).encode() + b"\n\n")
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp


@contextlib.contextmanager
def serve(cfg: OpsServerConfig | None = None):
    """Run an OpsServer in a thread; yield (base_url, server)."""
    srv = OpsServer(cfg or OpsServerConfig())
    loop = asyncio.new_event_loop()
    started = threading.Event()
    box: dict = {}

    async def up():
        runner = web.AppRunner(srv.app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        box["runner"] = runner
        box["port"] = site._server.sockets[0].getsockname()[1]

    def run():
        asyncio.set_event_loop(loop)
        loop.run_until_complete(up())
        started.set()
        loop.run_forever()

    th = threading.Thread(target=run, daemon=True)
    th.start()
    started.wait(10)
    try:
        yield f"http://127.0.0.1:{box['port']}", srv
    finally:
        asyncio.run_coroutine_threadsafe(box["runner"].cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        th.join(10)
        loop.close()


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--model", default="tiny")
    p.add_argument("--max-model-len", type=int, default=2048)
    p.add_argument("--no-metrics", action="store_true")
    p.add_argument("--no-usage", action="store_true")
    p.add_argument("--no-request-id", action="store_true")
    p.add_argument("--limit-per-s", type=int, default=0)
    a = p.parse_args(argv)
    srv = OpsServer(OpsServerConfig(model=a.model, max_model_len=a.max_model_len, metrics=not a.no_metrics,
                                    usage=not a.no_usage, request_id=not a.no_request_id, limit_per_s=a.limit_per_s))

    async def amain():
        runner = web.AppRunner(srv.app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", a.port)
        await site.start()
        sys.stdout.write(f"LISTENING {site._server.sockets[0].getsockname()[1]}\n")
        sys.stdout.flush()
        await asyncio.Event().wait()

    try:
        asyncio.run(amain())
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
