"""What detection knows of each engine: how it shows itself in the probes' answers (``VOTES``, in
the order they are weighed), what it takes to force an output length (``ENGINES``: the request
body, whether ``ignore_eos`` is honoured) and what it reports about itself (each engine's
``describe``: version, stream batching, effective configuration, context length). ``server.detect``
probes and classifies; this table is the one place an engine's rules are written."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from wattbench.core.jsontext import clip_value, loads_bounded
from wattbench.core.secret_scope import clip
from wattbench.core.schema import ServerInfo, StreamBatching

Answer = tuple[int, dict[str, str], bytes]  # (HTTP status, lower-cased headers, body); status 0: none

METRIC_PREFIXES = {"vllm:": "vllm", "sglang:": "sglang", "tgi_": "tgi", "llamacpp:": "llamacpp"}
MAX_CONTEXT_TOKENS = 1_000_000_000  # a context length above this is not one (a hostile or broken answer)


def _json(body: bytes) -> Any:
    """A probe's JSON answer, None when it is not JSON or nests deeper than the one bounded reader
    reads (``core/jsontext.py``: a 200,000-deep ``/props`` is no answer, not a RecursionError)."""
    try:
        return loads_bounded(body)
    except (ValueError, UnicodeDecodeError):
        return None


def _text(v: Any, limit: int = 200) -> str | None:
    """A string field of a server's answer: kept when it is a non-empty string (scrubbed of the run's
    secrets, then cut to ``limit``: ``core.secret_scope.clip``)."""
    return clip(v, limit) if isinstance(v, str) and v else None


MAX_CONFIG_ITEMS = 64  # settings of an effective configuration, and entries of a list or object in one
MAX_CONFIG_DEPTH = 2  # a setting's own nesting (a list of strings, an object of numbers)


def bounded_config(eff: dict[str, Any]) -> dict[str, Any]:
    """An effective configuration as ``result.json`` stores it: at most ``MAX_CONFIG_ITEMS`` settings,
    each value at most ``MAX_CONFIG_DEPTH`` deep with at most ``MAX_CONFIG_ITEMS`` entries, every
    string through ``_text`` (a server can answer anything under a known name: a 100-deep ``sha``,
    a megabyte of ``build_info``)."""
    def cut(s: str) -> str:
        return _text(s) or s[:0]

    return {cut(str(k)): clip_value(v, MAX_CONFIG_DEPTH, MAX_CONFIG_ITEMS, cut)
            for k, v in list(eff.items())[:MAX_CONFIG_ITEMS]}


def token_count(v: Any) -> int | None:
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


def _json_200(answer: Answer) -> Any:
    return _json(answer[2]) if answer[0] == 200 else None


@dataclass(frozen=True)
class Answers:
    """The probes' answers, read once: the ``/v1/models`` entries and model ids, their owners, every
    ``server`` header, the ``/metrics`` text and the engine its names show, and each engine's own
    endpoint where it answered as that engine does (None otherwise)."""

    entries: list[dict[str, Any]]  # the /v1/models entries, as the server sent them
    models: list[str]
    owners: set[str]
    server_header: str
    metrics_text: str
    metric_engine: str | None
    sglang_info: dict[str, Any] | None  # /get_server_info with SGLang server args
    tgi_info: dict[str, Any] | None  # /info with TGI router info
    llamacpp_props: dict[str, Any] | None  # /props with llama.cpp settings
    version_field: str | None  # /version's {version}

    @classmethod
    def read(cls, r: dict[str, Answer]) -> "Answers":
        """The answers of ``r`` (path -> answer) as detection reads them."""
        listing = _json(r["/v1/models"][2])
        data = listing.get("data") if isinstance(listing, dict) else None
        entries = [m for m in data if isinstance(m, dict)] if isinstance(data, list) else []
        metrics_status, _, metrics_body = r["/metrics"]
        metrics_text = metrics_body.decode("utf-8", "replace") if metrics_status == 200 else ""
        sgl = _json_200(r["/get_server_info"])
        tgi = _json_200(r["/info"])
        props = _json_200(r["/props"])
        ver = _json_200(r["/version"])
        return cls(
            entries=entries,
            models=[t for m in entries if (t := _text(m.get("id")))],
            owners={str(m.get("owned_by", "")).lower() for m in entries},
            server_header=" ".join(v[1].get("server", "") for v in r.values()).lower(),
            metrics_text=metrics_text,
            metric_engine=metric_engine(metrics_text),
            sglang_info=sgl if isinstance(sgl, dict) and (
                "tp_size" in sgl or "mem_fraction_static" in sgl or "model_path" in sgl) else None,
            tgi_info=tgi if isinstance(tgi, dict) and (
                "max_total_tokens" in tgi or "router" in tgi or "docker_label" in tgi) else None,
            llamacpp_props=props if isinstance(props, dict) and (
                "default_generation_settings" in props or "total_slots" in props) else None,
            version_field=_text(ver.get("version")) if isinstance(ver, dict) else None,
        )


def _owned_by(engine: str) -> Callable[[Answers], str | None]:
    return lambda a: f"/v1/models owned_by={engine}" if engine in a.owners else None


# (engine, what shows it) in the order the evidence is weighed: the engine with the most votes wins,
# a tie going to the one /metrics names, then to the one that got its first vote first. The
# /metrics vote (any engine) comes before these.
VOTES: list[tuple[str, Callable[[Answers], str | None]]] = [
    ("vllm", _owned_by("vllm")),
    ("sglang", _owned_by("sglang")),
    ("llamacpp", _owned_by("llamacpp")),
    ("sglang", lambda a: "/get_server_info answers with SGLang server args" if a.sglang_info else None),
    ("tgi", lambda a: "/info answers with TGI router info" if a.tgi_info else None),
    ("tgi", lambda a: "server header" if "text-generation" in a.server_header else None),
    ("llamacpp", lambda a: "/props answers with llama.cpp settings" if a.llamacpp_props else None),
    ("llamacpp", lambda a: "server header" if "llama.cpp" in a.server_header else None),
    ("vllm", lambda a: "/version answers {version}" if a.version_field and not a.sglang_info and not a.tgi_info
        and not a.llamacpp_props else None),
    ("transformers", lambda a: "/v1/models entries carry transformers' status field" if any(
        isinstance(m.get("status"), dict) and "value" in m["status"] for m in a.entries) else None),
]


def evidence(a: Answers) -> dict[str, list[str]]:
    """engine -> why, for every engine the answers show (``VOTES``, the /metrics names first)."""
    out: dict[str, list[str]] = {}
    if a.metric_engine:
        out.setdefault(a.metric_engine, []).append(f"/metrics has {a.metric_engine} metric names")
    for engine, shows in VOTES:
        why = shows(a)
        if why:
            out.setdefault(engine, []).append(why)
    return out


# ------------------------------------------------------------ what each engine reports

SERVER_INFO_KEYS = (
    "version", "tp_size", "dp_size", "pp_size", "dtype", "kv_cache_dtype", "context_length", "mem_fraction_static",
    "max_running_requests", "max_total_tokens", "max_total_num_tokens", "max_prefill_tokens", "chunked_prefill_size",
    "schedule_policy", "attention_backend", "sampling_backend", "stream_interval", "disable_radix_cache",
    "cuda_graph_max_bs", "disable_cuda_graph", "load_format", "device",
)
TGI_INFO_KEYS = ("model_id", "model_dtype", "max_concurrent_requests", "max_best_of", "max_input_tokens",
                 "max_total_tokens", "max_batch_total_tokens", "max_batch_prefill_tokens", "waiting_served_ratio",
                 "max_waiting_tokens", "sha")


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
    """The settings worth recording from llama.cpp's ``/props``: context length, slots, build, model."""
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


# describe(answers, info, max_len): sets info.version and info.stream_batching where the engine
# reports them; returns (the effective configuration, the context length; ``max_len``, the one
# /v1/models lists, first).
Describe = Callable[[Answers, ServerInfo, Any], tuple[dict[str, Any], Any]]


def _describe_vllm(a: Answers, info: ServerInfo, max_len: Any) -> tuple[dict[str, Any], Any]:
    info.version = a.version_field
    info.stream_batching = StreamBatching(stream_interval=None, note="vLLM does not expose --stream-interval (default 1)")
    return {}, max_len


def _describe_sglang(a: Answers, info: ServerInfo, max_len: Any) -> tuple[dict[str, Any], Any]:
    if a.sglang_info is None:
        info.version = a.version_field
        info.stream_batching = StreamBatching(stream_interval=None, note="SGLang --stream-interval not readable")
        return {}, max_len
    eff = select_server_info(a.sglang_info)
    info.version = _text(a.sglang_info.get("version")) or a.version_field
    # a whole number of tokens, as every stored value of an answer is bounded (a 20-deep list once
    # nested result.json past what wattbench reads back); None: SGLang said something that is not one
    info.stream_batching = StreamBatching(
        stream_interval=token_count(eff["stream_interval"]) if "stream_interval" in eff else 1)
    return eff, max_len or eff.get("max_model_len")


def _describe_tgi(a: Answers, info: ServerInfo, max_len: Any) -> tuple[dict[str, Any], Any]:
    tgi = a.tgi_info
    if tgi is None:
        return {}, max_len
    info.version = _text(tgi.get("version"))
    info.stream_batching = StreamBatching(stream_interval=1)
    return {k: tgi[k] for k in TGI_INFO_KEYS if k in tgi}, max_len or tgi.get("max_total_tokens")


def _describe_llamacpp(a: Answers, info: ServerInfo, max_len: Any) -> tuple[dict[str, Any], Any]:
    info.stream_batching = StreamBatching(stream_interval=1)
    if a.llamacpp_props is None:
        return {}, max_len
    eff = select_props(a.llamacpp_props)
    info.version = _text(a.llamacpp_props.get("build_info"))
    return eff, max_len or eff.get("n_ctx")


def _describe_transformers(a: Answers, info: ServerInfo, max_len: Any) -> tuple[dict[str, Any], Any]:
    info.stream_batching = StreamBatching(stream_interval=1)
    return {}, max_len


def _describe_nothing(a: Answers, info: ServerInfo, max_len: Any) -> tuple[dict[str, Any], Any]:
    return {}, max_len


@dataclass(frozen=True)
class EngineRules:
    """One engine's rules: what to send to force an output length (``force_length``, the request
    body's extra fields; ``{}``: nothing), whether it honours ``ignore_eos`` (None: unknown), whether
    a length can be forced at all when nothing is sent (``length_forceable``: False where the engine
    is known to offer no way) and what it reports about itself (``describe``)."""

    force_length: dict[str, Any]
    supports_ignore_eos: bool | None
    describe: Describe
    length_forceable: bool | None = None


# What each engine takes to force an output length (module doc of server/detect.py) and reports.
ENGINES: dict[str, EngineRules] = {
    "vllm": EngineRules({"ignore_eos": True}, True, _describe_vllm),
    "sglang": EngineRules({"ignore_eos": True}, True, _describe_sglang),
    "llamacpp": EngineRules({"ignore_eos": True}, True, _describe_llamacpp),
    "tgi": EngineRules({}, False, _describe_tgi, length_forceable=False),
    "transformers": EngineRules({}, False, _describe_transformers),
    "openai": EngineRules({}, None, _describe_nothing),
}
