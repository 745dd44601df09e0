"""Server checks (``--target``): reachable, models, max context, /metrics, streaming usage,
effective configuration, rate limiting.

``probe_server`` gathers facts with a handful of small requests (GETs, one tiny streaming
completion, and an optional burst of ``burst`` tiny concurrent requests, ``max_tokens=1``);
``server_checks`` turns the facts into checks. The facts are kept in ``ServerProbe`` so the
release checklist can judge from the same observations without asking the server again.
"""

from __future__ import annotations

import aiohttp
import orjson

from wattbench.core.redact import authorization_header  # noqa: E402  (one home for Authorization headers)
from wattbench.core.secret_scope import clip

import asyncio
from dataclasses import dataclass, field
from typing import Any

from wattbench.config.commands import DEFAULT_BURST
from wattbench.doctor.check import Check
from wattbench.core import origin
from wattbench.core.errors import TargetError, UserError
from wattbench.core.secret_scope import registered
from wattbench.core.schema import ServerInfo
from wattbench.core.target import ApiKind, TargetSpec
from wattbench.server.detect import detect_server, root_of
from wattbench.server.metrics import canonical_values, guess_engine, MAX_EXPOSITION_BYTES, metrics_url, parse_exposition
from wattbench.server.openai import (
    auth_headers,
    build_payload,
    endpoint_url,
    normalize_base_url,
    stream_error,
    usage_problem,
)
from wattbench.server.sse import DONE, SSEError, SSEParser
from wattbench.workload.base import RequestSpec

G = "server"
PROBE_TIMEOUT_S = 20.0
# gpu_memory_utilization at or above this leaves little room for activations / CUDA graphs
GPU_MEM_UTIL_WARN = 0.95
RATE_LIMIT_HEADER_PREFIXES = ("x-ratelimit", "ratelimit", "x-rate-limit", "retry-after")
REQUEST_ID_HEADERS = ("x-request-id", "request-id", "x-correlation-id", "x-amzn-requestid", "x-trace-id",
                      "traceparent")
# effective-config keys that bound how many requests run at once, per engine
CONCURRENCY_KEYS = ("max_num_seqs", "max_running_requests", "max_concurrent_requests", "total_slots",
                    "kv_cache_max_concurrency")


@dataclass
class StreamProbe:
    api: ApiKind | None = None
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    usage: dict[str, Any] | None = None  # the server's own usage block, as it sent it
    model: str | None = None
    response_id: str | None = None
    chunks: int = 0
    error: str | None = None


@dataclass
class ServerProbe:
    target: str
    base_url: str | None = None
    info: ServerInfo | None = None
    error: str | None = None
    metrics_status: int | None = None
    metrics: dict[str, list[tuple[dict[str, str], float]]] = field(default_factory=dict)
    metrics_error: str | None = None
    stream: StreamProbe = field(default_factory=StreamProbe)
    burst_statuses: list[int] = field(default_factory=list)
    rate_limit_headers: dict[str, str] = field(default_factory=dict)

    @property
    def reachable(self) -> bool:
        return self.info is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target, "base_url": self.base_url, "error": self.error,
            "engine": getattr(self.info, "engine", None), "metrics_status": self.metrics_status,
            "stream": self.stream.__dict__, "burst_statuses": self.burst_statuses,
            "rate_limit_headers": self.rate_limit_headers,
        }


def _rate_headers(headers: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.lower().startswith(RATE_LIMIT_HEADER_PREFIXES)}


async def _stream_once(session: aiohttp.ClientSession, base_url: str, model: str, api: ApiKind, api_key: str | None, max_tokens: int
                       ) -> StreamProbe:
    target = TargetSpec(base_url=base_url, model=model, api=api)
    body = build_payload(RequestSpec(prompt="Hello", max_tokens=max_tokens), target)
    sp = StreamProbe(api=api)

    async with origin.request(session, "POST", endpoint_url(target), json=body, headers=auth_headers(api_key)) as r:
        sp.status = r.status
        sp.headers = {k.lower(): v for k, v in r.headers.items()}
        if r.status != 200:
            # the run's secrets scrubbed from the whole body, then cut (a key quoted across the cut)
            sp.error = registered().cut((await origin.read_body(r, 4096)).decode("utf-8", "replace"), 300)
            return sp
        parser = SSEParser()
        async for piece in r.content.iter_any():
            try:
                events = parser.feed(piece)
            except SSEError as e:
                sp.error = str(e)
                return sp
            for _, data in events:
                if data == DONE:
                    continue
                try:
                    obj = orjson.loads(data)
                except orjson.JSONDecodeError:
                    sp.error = f"unparsable stream event {clip(data[:4096].decode('utf-8', 'replace'), 80)!r}"
                    continue
                if not isinstance(obj, dict):
                    continue
                err = stream_error(obj)
                if err:
                    sp.error = registered().cut(err, 300)
                sp.chunks += 1
                said, rid, usage = obj.get("model"), obj.get("id"), obj.get("usage")
                sp.model = clip(said, 200) if isinstance(said, str) and said else sp.model
                sp.response_id = clip(rid, 200) if isinstance(rid, str) and rid else sp.response_id
                if usage and isinstance(usage, dict):
                    sp.usage = usage
    return sp


async def _probe(target: str, api_key: str | None, burst: int, timeout_s: float) -> ServerProbe:
    base = normalize_base_url(target)
    pr = ServerProbe(target=target, base_url=base)
    try:
        pr.info = await detect_server(base, api_key)
    except TargetError as e:
        pr.error = str(e)
        return pr
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    headers = authorization_header(api_key)
    async with aiohttp.ClientSession(timeout=timeout) as s:
        try:
            async with origin.request(s, "GET", metrics_url(root_of(base)), headers=headers) as r:
                pr.metrics_status = r.status
                if r.status == 200:
                    try:
                        text = (await origin.read_body(r, MAX_EXPOSITION_BYTES)).decode("utf-8", "replace")
                        pr.metrics = parse_exposition(text)
                    except ValueError as e:
                        pr.metrics_error = f"unparsable exposition: {e}"
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError, TargetError) as e:
            pr.metrics_error = f"{type(e).__name__}: {e}"
        model = pr.info.model
        if not model:
            return pr
        apis: tuple[ApiKind, ...] = ("completions", "chat")
        for api in apis:  # a chat-only model refuses completions: try chat then
            try:
                sp = await _stream_once(s, base, model, api, api_key, max_tokens=4)
            except (aiohttp.ClientError, asyncio.TimeoutError, OSError, TargetError) as e:
                sp = StreamProbe(api=api, error=f"{type(e).__name__}: {e}")
            if api == "completions" or sp.status == 200 or pr.stream.status in (404, 405):
                pr.stream = sp  # a missing completions route says less than chat's own answer
            if sp.status not in (400, 404, 405, 422) or api == "chat":
                break
        pr.rate_limit_headers.update(_rate_headers(pr.stream.headers))
        if burst > 0:
            async def one() -> StreamProbe:
                try:
                    return await _stream_once(s, base, model, pr.stream.api or "completions", api_key, max_tokens=1)
                except (aiohttp.ClientError, asyncio.TimeoutError, OSError, TargetError) as e:
                    return StreamProbe(error=f"{type(e).__name__}: {e}")

            res = await asyncio.gather(*[one() for _ in range(burst)])
            pr.burst_statuses = [x.status or 0 for x in res]
            for x in res:
                pr.rate_limit_headers.update(_rate_headers(x.headers))
    return pr


def probe_server(target: str, api_key: str | None = None, burst: int = DEFAULT_BURST,
                 timeout_s: float = PROBE_TIMEOUT_S) -> ServerProbe:
    """Probe ``target`` (blocking). Bad URLs raise UserError; an unreachable server is a fact."""
    if burst < 0 or burst > 64:
        raise UserError(f"--burst {burst}: give 0 (off) to 64 concurrent probe requests")
    return asyncio.run(_probe(target, api_key, burst, timeout_s))


# ---------------------------------------------------------------------------------- facts


def cache_config(metrics: dict[str, list[tuple[dict[str, str], float]]]) -> dict[str, str]:
    """Labels of vLLM's ``vllm:cache_config_info`` (its cache configuration), if exposed."""
    rows = metrics.get("vllm:cache_config_info") or []
    return dict(rows[0][0]) if rows else {}


def effective_config(pr: ServerProbe) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if pr.info is not None:
        out.update(pr.info.effective_config or {})
    cc = cache_config(pr.metrics)
    for k in ("gpu_memory_utilization", "num_gpu_blocks", "block_size", "kv_cache_max_concurrency",
              "kv_cache_size_tokens", "cache_dtype", "enable_prefix_caching"):
        if k in cc and cc[k] not in ("None", ""):
            out.setdefault(k, cc[k])
    if "mem_fraction_static" in out and "gpu_memory_utilization" not in out:
        out["gpu_memory_utilization"] = out["mem_fraction_static"]
    return out


def engine_values(pr: ServerProbe) -> dict[str, float]:
    eng = guess_engine(pr.metrics) if pr.metrics else None
    return canonical_values(pr.metrics, eng) if eng else {}


def _num(x: Any) -> float | None:
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


# --------------------------------------------------------------------------------- checks


def server_checks(pr: ServerProbe) -> list[Check]:
    info = pr.info
    if info is None:  # not reachable
        return [Check("server.reachable", G, "fail", pr.error or f"{pr.target} did not answer",
                      "start the server, or fix --target (base URL such as http://127.0.0.1:8000)")]
    out = [Check("server.reachable", G, "pass",
                 f"{info.base_url} answers: engine {info.engine}" + (f" {info.version}" if info.version else ""),
                 data={"engine": info.engine, "version": info.version, "detected_by": getattr(info, "detected_by", [])})]
    if info.models:
        out.append(Check("server.models", G, "pass", f"serves {len(info.models)} model(s): "
                         + ", ".join(info.models[:5]) + (" …" if len(info.models) > 5 else ""),
                         data={"models": info.models}))
    else:
        out.append(Check("server.models", G, "fail", "GET /v1/models lists no model", "load a model in the server"))
    if info.max_model_len:
        out.append(Check("server.max_context", G, "pass", f"max context {info.max_model_len} tokens",
                         data={"max_model_len": info.max_model_len}))
    else:
        out.append(Check("server.max_context", G, "warn", "the server does not report its max context "
                         "(max_model_len)", "make sure prompt + output tokens fit the model's context "
                         "(vLLM --max-model-len); over-long prompts fail with HTTP 400"))
    out.append(_metrics_check(pr))
    out.append(_usage_check(pr))
    out.append(_config_check(pr, info.engine))
    out.append(_rate_check(pr))
    return out


def _metrics_check(pr: ServerProbe) -> Check:
    if pr.metrics_error and pr.metrics_status in (None, 200):
        return Check("server.metrics", G, "warn", f"/metrics: {pr.metrics_error}",
                     "check the server's Prometheus endpoint")
    if pr.metrics_status != 200:
        return Check("server.metrics", G, "warn",
                     f"no /metrics endpoint (HTTP {pr.metrics_status}): server-side queue, KV-cache and token "
                     "series are not available, and `wattbench monitor` cannot count tokens",
                     "vLLM serves /metrics by default; SGLang needs --enable-metrics; TGI and llama.cpp "
                     "(--metrics) have their own; `transformers serve` has none")
    vals = engine_values(pr)
    if not vals:
        return Check("server.metrics", G, "warn", "/metrics answers but has none of the engine series wattbench "
                     "knows (vllm:, sglang:, tgi_, llamacpp:)", "monitoring cannot count tokens from it",
                     {"series": len(pr.metrics)})
    missing = [k for k in ("prompt_tokens", "generation_tokens", "running", "waiting") if k not in vals]
    msg = f"/metrics exposes {', '.join(sorted(vals))}"
    if missing:
        return Check("server.metrics", G, "warn", msg + f"; missing {', '.join(missing)}",
                     "upgrade the engine or enable its full metrics", {"series": sorted(vals)})
    return Check("server.metrics", G, "pass", msg, data={"series": sorted(vals)})


def _usage_check(pr: ServerProbe) -> Check:
    sp = pr.stream
    if sp.status is None:
        return Check("server.stream_usage", G, "fail", f"the streaming probe request failed: {sp.error}",
                     "check the server log")
    if sp.status != 200:
        return Check("server.stream_usage", G, "fail",
                     f"a tiny streaming {sp.api} request answered HTTP {sp.status}: {sp.error or ''}".strip(),
                     "see `wattbench doctor --run` on a failed run, and the server log", {"status": sp.status})
    if sp.error:
        return Check("server.stream_usage", G, "fail", f"the stream carried an error: {sp.error}",
                     "check the server log")

    u = sp.usage or {}
    bad = usage_problem(u) if u else None
    if bad:
        return Check("server.stream_usage", G, "fail", f"the stream's usage cannot be used: {bad}",
                     "check the server: wattbench records such requests as failed (bad_usage)")
    if not u or u.get("completion_tokens") is None:
        return Check("server.stream_usage", G, "fail",
                     f"the stream ({sp.chunks} chunks) ended without a usage chunk despite "
                     "stream_options.include_usage: token counts would have to be guessed",
                     "use an engine version that honours stream_options.include_usage (vLLM, SGLang, TGI, "
                     "llama.cpp and transformers serve do), or give wattbench a tokenizer (--tokenizer)",
                     {"chunks": sp.chunks})
    return Check("server.stream_usage", G, "pass",
                 f"streaming {sp.api} returns usage (prompt {u.get('prompt_tokens')}, "
                 f"completion {u.get('completion_tokens')} tokens)", data={"usage": u, "api": sp.api})


def _config_check(pr: ServerProbe, engine: str | None) -> Check:
    eff = effective_config(pr)
    shown = {k: eff[k] for k in ("gpu_memory_utilization", *CONCURRENCY_KEYS, "num_gpu_blocks", "block_size",
                                 "max_total_num_tokens", "max_batch_total_tokens") if k in eff}
    if not shown:
        return Check("server.effective_config", G, "skip",
                     f"the {engine} server exposes no configuration (max_num_seqs, memory fraction) "
                     "from outside", "record the launch flags with the results (wattbench run --engine does)")
    text = ", ".join(f"{k}={v}" for k, v in shown.items())
    g = _num(eff.get("gpu_memory_utilization"))
    if g is not None and g >= GPU_MEM_UTIL_WARN:
        return Check("server.effective_config", G, "warn",
                     f"{text}: gpu_memory_utilization {g:g} leaves under {100 * (1 - g):.0f}% of GPU memory for "
                     "activations, CUDA graphs and other processes", "lower it (vLLM --gpu-memory-utilization 0.90, "
                     "SGLang --mem-fraction-static) if the server runs out of memory under load", shown)
    if not any(k in eff for k in CONCURRENCY_KEYS):
        return Check("server.effective_config", G, "pass", f"{text}; the batch limit (max_num_seqs) is not "
                     "exposed: pass it with the results", data=shown)
    return Check("server.effective_config", G, "pass", text, data=shown)


def _rate_check(pr: ServerProbe) -> Check:
    n429 = sum(1 for s in pr.burst_statuses if s == 429)
    data = {"burst": len(pr.burst_statuses), "http_429": n429, "headers": pr.rate_limit_headers}
    if n429:
        return Check("server.rate_limit", G, "warn",
                     f"rate limiting present: {n429} of {len(pr.burst_statuses)} concurrent tiny requests got "
                     "HTTP 429; a benchmark above that rate measures the limiter, not the engine",
                     "benchmark the engine directly or raise the limit for the benchmark's key", data)
    if pr.rate_limit_headers:
        return Check("server.rate_limit", G, "pass", "rate-limit headers present: "
                     + ", ".join(f"{k}={v}" for k, v in sorted(pr.rate_limit_headers.items())[:4]), data=data)
    if not pr.burst_statuses:
        return Check("server.rate_limit", G, "skip", "burst probe off (--burst 0); no rate-limit headers seen",
                     data=data)
    # the benchmark's concern only; whether production has a limiter is checklist.rate_limiting's (one
    # fact, one status: a review found PASS and WARN for "no rate limiting seen")
    return Check("server.rate_limit", G, "pass", f"{len(pr.burst_statuses)} concurrent tiny requests accepted: "
                 "a benchmark is not throttled", data=data)
