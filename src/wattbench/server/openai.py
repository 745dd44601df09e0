"""The OpenAI HTTP protocol as wattbench speaks it: base URLs, request bodies, stream chunks,
and the pre-flight check of a target.

Only this module knows the wire format of ``/v1/completions``, ``/v1/chat/completions`` and
``/v1/models``. The API key travels only in the ``Authorization`` header: it is never part of a
message, an exception text or a repr.
"""

from __future__ import annotations

import aiohttp
import orjson

from wattbench.core.redact import authorization_header  # noqa: E402  (one home for Authorization headers)
from wattbench.core.secret_scope import clip

import asyncio
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from wattbench.core.errors import TargetError, UserError
from wattbench.core import origin
from wattbench.core.target import TargetSpec
from wattbench.workload.base import RequestSpec
from wattbench.core.redact import redact_url

__all__ = [
    "normalize_base_url",
    "safe_url",
    "endpoint_url",
    "auth_headers",
    "build_payload",
    "chunk_text",
    "stream_error",
    "fetch_models",
    "check_target",
    "check_model_answers",
    "check_load_endpoint",
    "post_json",
    "usage_problem",
    "usage_regression",
    "usage_disagreement",
    "MAX_USAGE_TOKENS",
]

CHECK_TIMEOUT_S = 10.0


def normalize_base_url(url: str) -> str:
    """``http://h:8000``, ``http://h:8000/``, ``http://h:8000/v1/`` -> ``http://h:8000/v1``. A query
    (``?api-version=…&sig=…``) is no part of the base URL: it is sent with every request to the
    target's origin and to no other (``core.origin.send_query``), its secret values registered."""
    raw = (url or "").strip()
    try:
        parts = urlsplit(raw)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname)
        parts.port  # a port that is not a number (``http://h:x``) raises here
    except ValueError as e:  # ``http://[::1`` (an unclosed IPv6 bracket), a bad port
        raise UserError(f"--target {safe_url(raw)!r} cannot be read as a URL ({e}); give the server's base URL, "
                        "e.g. http://127.0.0.1:8000 or http://[::1]:8000") from None
    if not ok:
        raise UserError(
            f"--target {safe_url(raw)!r} is not an http(s) URL; give the server's base URL, "
            "e.g. http://127.0.0.1:8000 or http://127.0.0.1:8000/v1"
        )
    path = parts.path.rstrip("/")
    if not path.endswith("/v1"):
        path += "/v1"
    origin.send_query(raw)  # its query (Azure's api-version, a signature) goes with every request to it
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def safe_url(url: str) -> str:
    """The URL for messages: ``redact.redact_url`` (no ``user:password@``, no query secret)."""
    return redact_url(url) or url


def endpoint_url(target: TargetSpec) -> str:
    return target.base_url + ("/chat/completions" if target.api == "chat" else "/completions")


def auth_headers(api_key: str | None, extra: dict[str, str] | None = None) -> dict[str, str]:
    """Request headers: JSON in, event stream out, the key as a bearer token, then the user's
    ``--header`` values (which win, so a gateway's own auth header can replace the bearer)."""
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    headers.update(authorization_header(api_key))
    if extra:
        headers.update(extra)
    return headers


# Body fields wattbench sets itself and a user's ``--extra-body`` may not: each is what a
# measurement rests on, and each has its own flag. ``model`` (``--model``: the result records the
# model it sent), ``stream``/``stream_options`` (every figure is read from a stream whose last chunk
# carries the usage), ``prompt``/``messages`` (``--workload``), ``max_tokens``/
# ``max_completion_tokens``/``min_tokens`` (``--output-tokens``; the length-forcing pair sets
# ``min_tokens`` itself), ``n``/``best_of`` (one answer per request: latency and tokens are per
# stream), ``echo`` (the answer would carry the prompt). Every other field is sent as given and
# recorded in ``result.json`` (``config.extra_body``); ``--temperature``/``--top-p`` win over it.
_STREAM = "every figure is read from a stream that ends with its usage"
_LENGTH = "output lengths come from --output-tokens"
_ONE = "one answer per request: latency and tokens are per stream"
OWNED_BODY_FIELDS = {
    "model": "the result records the model it sends: give --model", "stream": _STREAM, "stream_options": _STREAM,
    "prompt": "the workload writes it: give --workload", "messages": "the workload writes them: give --workload",
    "max_tokens": _LENGTH, "max_completion_tokens": _LENGTH, "min_tokens": _LENGTH, "n": _ONE, "best_of": _ONE,
    "echo": "the answer would carry the prompt",
}


def build_payload(spec: RequestSpec, target: TargetSpec) -> dict[str, Any]:
    """The JSON body of one streaming request.

    Always ``stream=True`` with ``stream_options.include_usage`` (token counts come from the
    server's usage chunk), ``temperature=0``, ``max_tokens`` from the spec. ``min_tokens`` is sent
    when the spec asks for it and the target accepts it (``target.send_min_tokens``). ``target.extra_body`` (engine-specific fields such as
    ``ignore_eos``) is merged last and wins. The chat API wraps a bare prompt as one user message;
    the completions API needs a prompt.
    """
    body: dict[str, Any] = {
        "model": target.model,
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": spec.max_tokens,
        "temperature": 0,
    }
    if target.api == "chat":
        if spec.messages is not None:
            body["messages"] = spec.messages
        else:
            body["messages"] = [{"role": "user", "content": spec.prompt or ""}]
    else:
        if spec.prompt is None:
            if spec.messages is not None:
                raise UserError(
                    "the workload has chat messages but --api is completions; use --api chat"
                )
            raise UserError("a request has no prompt; the workload must give a prompt or messages")
        body["prompt"] = spec.prompt
    if spec.min_tokens is not None and target.send_min_tokens:
        body["min_tokens"] = spec.min_tokens
    if target.extra_body:
        body.update(target.extra_body)
    return body


def chunk_text(obj: dict[str, Any]) -> str | None:
    """Generated text carried by one parsed stream chunk (completions or chat), or None.

    Completions: ``choices[0].text``. Chat: ``choices[0].delta.content``, or the reasoning
    field (``reasoning_content`` / ``reasoning``) of reasoning models — generated tokens too, so
    they count for TTFT/ITL. Usage-only chunks (``choices: []``) give None.
    """
    choices = obj.get("choices")
    if not choices:
        return None
    c = choices[0]
    text = c.get("text")
    if isinstance(text, str) and text:
        return text
    delta = c.get("delta")
    if delta:
        said = delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning")
        return said if isinstance(said, str) else None
    return None


# A usage count above this is refused (bad_usage): 100 million tokens, ten times the largest
# context window served today (10M tokens), so no real request comes near it; 1e30 or 2**63 would
# overflow the records' int64 columns and every sum over them.
MAX_USAGE_TOKENS = 100_000_000


def usage_problem(u: object) -> str | None:
    """Why a stream's ``usage`` cannot be used, or None: it must be an object whose
    ``prompt_tokens``/``completion_tokens`` (when present) are whole numbers in ``0..MAX_USAGE_TOKENS``
    (``true`` is not a number; ``12.0`` and ``"12"`` are refused too: a real server sends integers)."""
    if type(u) is not dict:
        return f"usage is a {type(u).__name__}, not an object"
    for k in ("prompt_tokens", "completion_tokens"):
        v = u.get(k)
        if v is None:
            continue
        if type(v) is not int:
            shown = f" ({clip(v, 40)!r})" if isinstance(v, str) else (f" ({v:.6g})" if isinstance(v, float) else "")
            return f"usage.{k} is a {type(v).__name__}{shown}, not a whole number"
        if not 0 <= v <= MAX_USAGE_TOKENS:
            shown = str(v) if abs(v) < 10**30 else ("-" if v < 0 else "") + "a number of more than 30 digits"
            return f"usage.{k} = {shown}: outside 0..{MAX_USAGE_TOKENS}"
    return None


def usage_regression(before: dict[str, Any], after: dict[str, Any]) -> str | None:
    """Why a later ``usage`` event of the same stream contradicts an earlier one, or None. Counts
    only grow within a stream (a server that reports usage on every chunk reports running totals),
    so a later event with a smaller count is a second account of the same request: which one is
    true cannot be told, and the request is ``bad_usage``. A later, larger total is taken (and is
    then checked against the content and ``max_tokens``, ``usage_disagreement``)."""
    for k in ("prompt_tokens", "completion_tokens"):
        a, b = before.get(k), after.get(k)
        if a is not None and (b is None or b < a):
            return f"a second usage event says {k} {b if b is not None else 'missing'} after {a}"
    return None


def usage_disagreement(usage: dict[str, Any], content_chunks: int, max_tokens: int | None) -> str | None:
    """Why a stream's final ``usage`` contradicts the stream itself or the request, or None:

    - ``completion_tokens`` above the ``max_tokens`` the request sent: a server stops at the limit,
      so the count is not this answer's (800 claimed for 8 asked made tok/s per kW 34 times higher);
    - ``completion_tokens`` below the number of content chunks that carried text: every such chunk
      holds at least one generated token (0 claimed beside 8 chunks).

    The request is then ``bad_usage``: its counts enter no figure."""
    out = usage.get("completion_tokens")
    if out is None:
        return None
    if max_tokens is not None and out > max_tokens:
        return f"usage.completion_tokens {out} is more than the max_tokens {max_tokens} the request asked for"
    if out < content_chunks:
        return f"usage.completion_tokens {out} is fewer than the {content_chunks} content chunks streamed"
    return None


def stream_error(obj: dict[str, Any]) -> str | None:
    """The message of an in-stream error object (``{"error": ...}`` or ``{"object": "error"}``)."""
    err = obj.get("error")
    if err is None and obj.get("object") == "error":
        err = obj
    if err is None:
        return None
    if isinstance(err, dict):
        msg = err.get("message") or err.get("type") or str(err)
    else:
        msg = str(err)
    return clip(str(msg), 4096)  # bounded, scrubbed first; the caller cuts it shorter (load/client.py)


# The most of a /v1/models answer read: OpenRouter's list of ~300 models with descriptions is about
# 1 MiB; a server that sends more is not answering with a model list (read no further).
MODELS_BODY_BYTES = 16 << 20


async def fetch_models(session: aiohttp.ClientSession, base_url: str, api_key: str | None, redirects: list[str] | None = None) -> list[str]:
    """The model ids of ``GET {base_url}/models``. Raises TargetError when the answer is not
    OpenAI's ``{"data": [{"id": ...}, ...]}`` or redirects to another host (``core/origin.py``;
    same-host redirects followed go to ``redirects``); aiohttp errors (connection) propagate."""
    url = base_url + "/models"
    async with origin.request(session, "GET", url, headers=auth_headers(api_key), redirects=redirects) as resp:
        body = await origin.read_body(resp, MODELS_BODY_BYTES + 1)
        if len(body) > MODELS_BODY_BYTES and resp.status == 200:
            raise TargetError(
                f"{safe_url(base_url)}: GET /v1/models answered more than {MODELS_BODY_BYTES >> 20} MiB (the cap "
                "on a model list; a list of thousands of models with their descriptions is a few MiB); point "
                "--target at an OpenAI-compatible server"
            )
        if resp.status in (401, 403):
            raise TargetError(
                f"{safe_url(base_url)} refused the request with HTTP {resp.status}; "
                "give the right key with --api-key or WATTBENCH_API_KEY"
            )
        if resp.status != 200:
            raise TargetError(
                f"{safe_url(base_url)} is not OpenAI-compatible: GET /v1/models answered "
                f"HTTP {resp.status}; point --target at an OpenAI-compatible server"
            )
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        obj = None
    data = obj.get("data") if isinstance(obj, dict) else None
    if not isinstance(data, list) or not all(isinstance(m, dict) and "id" in m for m in data):
        raise TargetError(
            f"{safe_url(base_url)} is not OpenAI-compatible: GET /v1/models did not return "
            "OpenAI JSON ({\"data\": [{\"id\": ...}]}); point --target at an OpenAI-compatible server"
        )
    return [str(m["id"]) for m in data]


async def post_json(session: aiohttp.ClientSession, url: str, body: dict[str, Any], api_key: str | None, timeout_s: float,
                    headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    """``POST url`` with a JSON body, non-streaming (``agree`` asks both servers this way): the
    status and the raw body. The key travels as ``auth_headers`` sends it; aiohttp and timeout
    errors propagate to the caller, which names them."""
    h = auth_headers(api_key, headers)
    h["Accept"] = "application/json"
    async with origin.request(session, "POST", url, json=body, headers=h,
                              timeout=aiohttp.ClientTimeout(total=timeout_s)) as resp:
        return resp.status, await resp.read()


async def check_target(
    base_url: str, api_key: str | None, model: str | None, timeout_s: float = CHECK_TIMEOUT_S,
    launched_model: str | None = None, redirects: list[str] | None = None,
) -> tuple[str, list[str]]:
    """Pre-flight: is the server there, does it speak OpenAI, does it serve the model?

    Returns ``(model, models)`` — ``model`` defaults to ``launched_model``, else the first served
    id. ``launched_model`` is the name from the launch plan of an engine wattbench started: the
    server need not list it (``transformers serve`` 5.17 lists only what its hub-cache scan finds,
    never the model it was started with); the caller checks it with ``check_model_answers``
    instead. Every failure is a ``TargetError`` with one line that says what to do, a redirect to
    another host included; same-host redirects followed are appended to ``redirects``.
    """
    base_url = normalize_base_url(base_url)
    shown = safe_url(base_url)
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    try:
        async with aiohttp.ClientSession(timeout=timeout) as session:
            models = await fetch_models(session, base_url, api_key, redirects)
    except TargetError:
        raise
    except aiohttp.ClientConnectorError as e:
        reason = getattr(e, "os_error", None)
        why = getattr(reason, "strerror", None) or str(reason or e).split(" [")[-1].rstrip("]")
        raise TargetError(
            f"cannot reach {shown} ({why}); start the server or fix --target"
        ) from None
    except (asyncio.TimeoutError, TimeoutError):
        raise TargetError(
            f"{shown} did not answer GET /v1/models within {timeout_s:g} s; "
            "check that the server is up and --target is right"
        ) from None
    except aiohttp.ClientError as e:
        raise TargetError(
            f"{shown} is not OpenAI-compatible: GET /v1/models failed ({e.__class__.__name__}); "
            "point --target at an OpenAI-compatible server"
        ) from None
    model = model or launched_model
    if model is not None and model == launched_model:
        return model, models  # listed or not: the launch plan names it
    if model is None:
        if not models:
            raise TargetError(f"{shown} serves no models (GET /v1/models is empty); load a model")
        return models[0], models
    if models and model not in models:  # a server that lists nothing (transformers serve 5.17) may still serve it
        shown_models = ", ".join(models[:20]) + (" …" if len(models) > 20 else "")
        raise TargetError(
            f"model {model!r} is not served by {shown}; available: {shown_models or '(none)'}"
        )
    return model, models


async def check_model_answers(
    base_url: str, api_key: str | None, model: str, api: str = "completions",
    timeout_s: float = 120.0,
) -> None:
    """One real request for ``model`` (one output token): the check of a launched engine's model
    that its ``/v1/models`` does not list. Raises ``TargetError`` naming the HTTP status."""
    shown = safe_url(base_url)
    body: dict[str, Any]
    if api == "chat":
        url, body = base_url + "/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}
    else:
        url, body = base_url + "/completions", {"prompt": "hi"}
    body.update({"model": model, "max_tokens": 1, "stream": False})
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as session:
            async with origin.request(session, "POST", url, json=body, headers=auth_headers(api_key)) as resp:
                status = resp.status
                await resp.read()
    except (aiohttp.ClientError, asyncio.TimeoutError, TimeoutError) as e:
        raise TargetError(
            f"the launched engine at {shown} does not list {model!r} in /v1/models and a request for it "
            f"failed ({e.__class__.__name__}); see the server log in the run directory"
        ) from None
    if status != 200:
        raise TargetError(
            f"the launched engine at {shown} does not list {model!r} in /v1/models and answered HTTP "
            f"{status} to a request for it; see the server log in the run directory"
        )


async def check_load_endpoint(target: TargetSpec, redirects: list[str] | None = None,
                              timeout_s: float = CHECK_TIMEOUT_S) -> None:
    """Pre-flight of the endpoint the load will POST to: one ``GET`` of it with the load's headers
    (a server answers 405 or 404; nothing is generated). A redirect to another host raises
    ``CrossOriginRedirect`` (one line naming both hosts) before anything is measured; same-host
    redirects go to ``redirects``. Connection errors are left to the load, which records them."""
    url = endpoint_url(target)
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as session:
            async with origin.request(session, "GET", url, headers=auth_headers(target.api_key, target.headers),
                                      redirects=redirects) as resp:
                await resp.content.read(4096)
    except (aiohttp.ClientError, asyncio.TimeoutError, TimeoutError, ValueError):
        return
