"""Output agreement between two deployments (e.g. bf16 vs a quantized model) under greedy decoding.

Every prompt goes to both targets with ``temperature=0``, ``top_p=1``, ``seed=0`` and the same
``max_tokens``, non-streaming (``/v1/completions`` or ``/v1/chat/completions``). Scored:

- **exact match**: the two texts are identical;
- **token agreement**: per prompt, positions where the two token sequences hold the same token,
  divided by the longer sequence's length; the run figure is the micro average (matching
  positions summed / longer lengths summed). Tokens are the servers' own, read from ``logprobs``
  (requested with every call) when both sides returned them for every compared prompt
  (``token_basis = "server_tokens"``); otherwise the texts split on whitespace
  (``token_basis = "whitespace"``). The basis is stored with the result;
- **first divergence**: the token index of the first difference (None when identical), with its
  distribution over prompts that diverged;
- **structured validity**: for prompts with ``schema`` or ``required``, whether each side's
  answer parses as JSON (a surrounding ```json fence is allowed), is an object when the schema's
  ``type`` is ``object``, and holds every required field.

A prompts file is JSONL: ``{"id": "q1", "prompt": "..."}`` or ``{"messages": [...]}``, optional
``max_tokens``, ``schema`` (JSON Schema; its ``required`` is used) and ``required`` (field list).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
import aiohttp
import numpy as np

from wattbench.core.clock import now_ns
from wattbench.core.errors import TargetError, UserError
from wattbench.server.openai import fetch_models, normalize_base_url, post_json, usage_problem
from wattbench.core.redact import combine_credentials, redact_url, url_secrets
from wattbench.core.scrubber import redact_text
from wattbench.core.secret_scope import clip, scope
from wattbench.results.agreement import (
    AgreeTarget,
    Agreement,
    AgreementMetrics,
    DivergenceStats,
    PromptAgreement,
    SideOutput,
    load_agreement,
)
from wattbench import __version__
from wattbench.core.ids import new_run_id
from wattbench.results.rundir import describe_validation_error
from wattbench.results.store import resolve_run_path

DIVERGENCE_BUCKETS = ((0, 0), (1, 3), (4, 15), (16, 63), (64, 255), (256, None))


class PromptSpec(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    id: str
    prompt: str | None = None
    messages: list[dict[str, Any]] | None = None
    max_tokens: int | None = None
    json_schema: dict[str, Any] | None = Field(default=None, alias="schema")
    required: list[str] | None = None

    @property
    def structured(self) -> bool:
        return self.json_schema is not None or self.required is not None

    def required_fields(self) -> list[str]:
        req = list(self.required or [])
        if self.json_schema and isinstance(self.json_schema.get("required"), list):
            req += [str(x) for x in self.json_schema["required"] if str(x) not in req]
        return req


def load_prompts(path: str | os.PathLike[str]) -> list[PromptSpec]:
    """Read a JSONL prompts file; a bad line is reported with its number and the reason."""
    p = Path(path)
    if not p.exists():
        raise UserError(f"{p}: prompts file not found")
    out: list[PromptSpec] = []
    seen: set[str] = set()
    with open(p, encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except json.JSONDecodeError as e:
                raise UserError(f"{p}: line {lineno}: not valid JSON ({e.msg} at column {e.colno})") from None
            if isinstance(data, str):
                data = {"prompt": data}
            if not isinstance(data, dict):
                raise UserError(f"{p}: line {lineno}: expected an object with 'prompt' or 'messages'")
            data.setdefault("id", str(lineno))
            data["id"] = str(data["id"])
            try:
                spec = PromptSpec.model_validate(data)
            except ValidationError as e:
                raise UserError(f"{p}: line {lineno}: {describe_validation_error(e)}") from None
            if (spec.prompt is None) == (spec.messages is None):
                raise UserError(f"{p}: line {lineno}: give exactly one of 'prompt' or 'messages'")
            if spec.max_tokens is not None and spec.max_tokens < 1:
                raise UserError(f"{p}: line {lineno}: max_tokens must be >= 1")
            if spec.required is not None and not all(isinstance(x, str) for x in spec.required):
                raise UserError(f"{p}: line {lineno}: 'required' must be a list of field names")
            if spec.id in seen:
                raise UserError(f"{p}: line {lineno}: duplicate prompt id {spec.id!r}")
            seen.add(spec.id)
            out.append(spec)
    if not out:
        raise UserError(f"{p}: no prompts in the file")
    return out


# ------------------------------------------------------------------ structured answers

_FENCE = re.compile(r"^\s*```(?:json)?\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)


def check_structured(text: str | None, spec: PromptSpec) -> tuple[bool, list[str], bool]:
    """(json parses, missing required fields, structurally valid)."""
    if text is None:
        return False, spec.required_fields(), False
    body = text.strip()
    m = _FENCE.match(body)
    if m:
        body = m.group(1).strip()
    try:
        obj = json.loads(body)
    except json.JSONDecodeError:
        return False, spec.required_fields(), False
    want_object = bool(spec.required_fields()) or (spec.json_schema or {}).get("type") == "object"
    if want_object and not isinstance(obj, dict):
        return True, spec.required_fields(), False
    missing = [k for k in spec.required_fields() if not (isinstance(obj, dict) and k in obj)]
    return True, missing, not missing


# ------------------------------------------------------------------ scoring


def whitespace_tokens(text: str | None) -> list[str]:
    return (text or "").split()


def score_tokens(a: list[str], b: list[str]) -> tuple[float, int | None, int]:
    """(agreement fraction, first divergence index or None, matching positions)."""
    longer = max(len(a), len(b))
    matches = sum(1 for x, y in zip(a, b) if x == y)
    first = None
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            first = i
            break
    if first is None and len(a) != len(b):
        first = min(len(a), len(b))
    return (matches / longer if longer else 1.0), first, matches


def _bucket(pos: int) -> str:
    for lo, hi in DIVERGENCE_BUCKETS:
        if hi is None and pos >= lo:
            return f"{lo}+"
        if hi is not None and lo <= pos <= hi:
            return str(lo) if lo == hi else f"{lo}-{hi}"
    return "?"


def _rate(xs: list[bool]) -> float | None:
    return sum(1 for x in xs if x) / len(xs) if xs else None


def score(specs: list[PromptSpec], sides: list[tuple[SideOutput, SideOutput]],
          basis: Literal["auto", "server_tokens", "whitespace"] = "auto") -> tuple[AgreementMetrics,
                                                                               list[PromptAgreement]]:
    both_ok = [(a.error is None and b.error is None) for a, b in sides]
    if basis == "auto":
        have = all(a.tokens is not None and b.tokens is not None for (a, b), ok in zip(sides, both_ok) if ok)
        basis = "server_tokens" if have and any(both_ok) else "whitespace"
    elif basis == "server_tokens":
        missing = [s.id for s, (a, b), ok in zip(specs, sides, both_ok) if ok and (a.tokens is None or b.tokens is None)]
        if missing:
            raise UserError(f"server tokens were not returned for prompt(s) {', '.join(missing[:5])}; "
                            "use --tokens auto or whitespace")
    rows: list[PromptAgreement] = []
    match_sum = longer_sum = 0
    exact: list[bool] = []
    divs: list[int] = []
    for spec, (a, b), ok in zip(specs, sides, both_ok):
        if spec.structured:
            for side in (a, b):
                if side.error is None:
                    side.json_valid, side.missing_fields, side.structured_valid = check_structured(side.text, spec)
        row = PromptAgreement(id=spec.id, a=a, b=b)
        if ok:
            ta = a.tokens if basis == "server_tokens" else whitespace_tokens(a.text)
            tb = b.tokens if basis == "server_tokens" else whitespace_tokens(b.text)
            frac, first, matches = score_tokens(ta or [], tb or [])
            row.exact_match = (a.text or "") == (b.text or "")
            row.token_agreement = frac
            row.first_divergence = first
            row.length_a, row.length_b = len(ta or []), len(tb or [])
            match_sum += matches
            longer_sum += max(len(ta or []), len(tb or []))
            exact.append(row.exact_match)
            if first is not None:
                divs.append(first)
        rows.append(row)
    ds = DivergenceStats(diverged=len(divs))
    if divs:
        arr = np.asarray(divs, dtype=float)
        ds.min, ds.max = int(arr.min()), int(arr.max())
        ds.p50, ds.p90, ds.mean = float(np.percentile(arr, 50)), float(np.percentile(arr, 90)), float(arr.mean())
        counts: dict[str, int] = {}
        for d in divs:
            k = _bucket(d)
            counts[k] = counts.get(k, 0) + 1
        order = [_bucket(lo) for lo, _ in DIVERGENCE_BUCKETS]  # buckets in position order
        ds.histogram = {k: counts[k] for k in order if k in counts}
    structured = [(s, a, b) for s, (a, b) in zip(specs, sides) if s.structured]
    m = AgreementMetrics(
        prompts=len(specs),
        compared=sum(both_ok),
        failed_a=sum(1 for a, _ in sides if a.error is not None),
        failed_b=sum(1 for _, b in sides if b.error is not None),
        exact_match_rate=_rate(exact),
        token_agreement=(match_sum / longer_sum if longer_sum else (1.0 if exact else None)),
        token_basis=basis,
        first_divergence=ds,
        structured_prompts=len(structured),
        structured_valid_rate_a=_rate([bool(a.structured_valid) for _, a, _ in structured]),
        structured_valid_rate_b=_rate([bool(b.structured_valid) for _, _, b in structured]),
        json_valid_rate_a=_rate([bool(a.json_valid) for _, a, _ in structured]),
        json_valid_rate_b=_rate([bool(b.json_valid) for _, _, b in structured]),
    )
    return m, rows


# ------------------------------------------------------------------ talking to servers


def _tokens_from(choice: dict[str, Any], api: str) -> list[str] | None:
    lp = choice.get("logprobs")
    if not isinstance(lp, dict):
        return None
    if api == "completions":
        toks = lp.get("tokens")
        return [str(t) for t in toks] if isinstance(toks, list) else None
    content = lp.get("content")
    if isinstance(content, list):
        return [str(c.get("token")) for c in content if isinstance(c, dict)]
    return None


class _Client:
    def __init__(self, session: aiohttp.ClientSession, target: AgreeTarget, timeout_s: float,
                 api_key: str | None) -> None:
        self.session = session
        self.target = target
        self.timeout_s = timeout_s
        self.api_key = api_key
        self.logprobs = True  # dropped after a 4xx that names logprobs

    def api_for(self, spec: PromptSpec) -> str:
        """A ``messages`` row always goes to the chat API; a ``prompt`` row to ``--api``. One file
        may hold both."""
        return "chat" if spec.messages is not None else self.target.api

    def _body(self, spec: PromptSpec, max_tokens: int) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.target.model, "max_tokens": spec.max_tokens or max_tokens,
                                "temperature": 0.0, "top_p": 1.0, "seed": 0, "stream": False}
        if self.api_for(spec) == "completions":
            body["prompt"] = spec.prompt
            if self.logprobs:
                body["logprobs"] = 1
        else:
            body["messages"] = spec.messages or [{"role": "user", "content": spec.prompt}]
            if self.logprobs:
                body["logprobs"] = True
        return body

    async def ask(self, spec: PromptSpec, max_tokens: int) -> SideOutput:
        api = self.api_for(spec)
        path = "/completions" if api == "completions" else "/chat/completions"
        url = self.target.base_url + path
        for attempt in range(2):
            body = self._body(spec, max_tokens)
            t0 = now_ns()
            try:
                status, raw = await post_json(self.session, url, body, self.api_key, self.timeout_s)
            except asyncio.TimeoutError:
                return SideOutput(error=f"timeout after {self.timeout_s:g} s")
            except aiohttp.ClientError as e:
                return SideOutput(error=redact_text(f"connect: {e}", [self.api_key]))
            except TargetError as e:  # a redirect to another host: refused (core/origin.py)
                return SideOutput(error=f"redirect: {e}")
            elapsed_ms = (now_ns() - t0) / 1e6
            if status >= 400:
                text = clip(redact_text(raw.decode("utf-8", "replace"), [self.api_key]), 300)
                if attempt == 0 and self.logprobs and 400 <= status < 500:
                    self.logprobs = False  # the server may not support logprobs: retry without
                    continue
                if attempt == 1:
                    self.logprobs = True  # failed without logprobs too: they were not the cause
                return SideOutput(error=f"http_{status}: {text}", latency_ms=elapsed_ms)
            try:
                data = json.loads(raw)
                choice = data["choices"][0]
            except (ValueError, KeyError, IndexError, TypeError, RecursionError):
                return SideOutput(error="bad_response: no choices in the response", latency_ms=elapsed_ms)
            if not isinstance(choice, dict):
                return SideOutput(error="bad_response: choices[0] is not an object", latency_ms=elapsed_ms)
            if api == "completions":
                text = choice.get("text")
            else:
                msg = choice.get("message")
                text = msg.get("content") if isinstance(msg, dict) else None
            usage = data.get("usage")
            bad = usage_problem(usage) if usage is not None else None
            if bad:
                return SideOutput(error=f"bad_usage: {bad}", latency_ms=elapsed_ms)
            finish = choice.get("finish_reason")
            return SideOutput(text=text if isinstance(text, str) else None, tokens=_tokens_from(choice, api),
                              output_tokens=(usage or {}).get("completion_tokens"),
                              finish_reason=clip(finish, 100) if isinstance(finish, str) else None,
                              latency_ms=elapsed_ms)
        return SideOutput(error="unreachable")  # pragma: no cover - the loop always returns


async def _detect_model(session: aiohttp.ClientSession, base_url: str, timeout_s: float,
                        api_key: str | None) -> tuple[str, dict[str, list[str]]]:
    """The first model ``GET /v1/models`` lists (``server.openai.fetch_models``)."""
    try:
        models = await asyncio.wait_for(fetch_models(session, base_url, api_key), min(timeout_s, 30.0))
    except TargetError as e:
        raise TargetError(f"{e}; or give the model with --model-a/-b") from None
    except (aiohttp.ClientError, asyncio.TimeoutError) as e:
        raise TargetError(f"{redact_url(base_url)}: cannot reach the server ({e.__class__.__name__}: "
                          f"{redact_text(str(e), [api_key])}); is it running?") from None
    if not models:
        raise TargetError(f"{redact_url(base_url)}/models lists no model; give it with --model-a/--model-b")
    return models[0], {"models": models}


async def _run(targets: list[AgreeTarget], specs: list[PromptSpec], max_tokens: int, concurrency: int,
               timeout_s: float, api_keys: list[str | None]) -> list[tuple[SideOutput, SideOutput]]:
    conn = aiohttp.TCPConnector(limit=max(4, 2 * concurrency))
    async with aiohttp.ClientSession(connector=conn) as session:
        for t, key in zip(targets, api_keys):
            if not t.model:
                t.model, t.server = await _detect_model(session, t.base_url, timeout_s, key)
        clients = [_Client(session, t, timeout_s, key) for t, key in zip(targets, api_keys)]
        sem = asyncio.Semaphore(concurrency)

        async def one(spec: PromptSpec) -> tuple[SideOutput, SideOutput]:
            async with sem:
                a, b = await asyncio.gather(clients[0].ask(spec, max_tokens), clients[1].ask(spec, max_tokens))
                return a, b

        # the first prompt alone settles whether each server accepts logprobs
        first = await one(specs[0])
        rest = await asyncio.gather(*(one(s) for s in specs[1:]))
        for t, c in zip(targets, clients):
            t.token_source = "server_logprobs" if c.logprobs else "none"
        return [first, *rest]


def new_agree_id() -> str:
    """``agree-`` + the run-id format every run uses (``core.ids.new_run_id``)."""
    return "agree-" + new_run_id()


def run_agreement(target_a: str, target_b: str, prompts: list[PromptSpec], max_tokens: int = 128,
                  api: Literal["completions", "chat"] = "completions", model_a: str | None = None,
                  model_b: str | None = None, concurrency: int = 4, timeout_s: float = 300.0,
                  tokens: Literal["auto", "server_tokens", "whitespace"] = "auto",
                  api_key_a: str | None = None, api_key_b: str | None = None) -> Agreement:
    """Send every prompt to both targets with greedy decoding and score the answers."""
    if not prompts:
        raise UserError("no prompts to send")
    if max_tokens < 1:
        raise UserError("max_tokens must be >= 1")
    if concurrency < 1:
        raise UserError("concurrency must be >= 1")
    # URL credentials (user:password@) become the side's key and never reach agreement.json
    url_a, api_key_a = combine_credentials(target_a, api_key_a)
    url_b, api_key_b = combine_credentials(target_b, api_key_b)
    # agreement.json, the history row and stdout never hold them (nor the URLs' query values): the
    # command that writes and prints the agreement holds them until it ends (cli.main)
    with scope(api_key_a, api_key_b, *url_secrets(target_a), *url_secrets(target_b)):
        targets = [AgreeTarget(base_url=normalize_base_url(url_a), model=model_a or "", api=api),
                   AgreeTarget(base_url=normalize_base_url(url_b), model=model_b or "", api=api)]

        created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        t0 = now_ns()
        sides = asyncio.run(_run(targets, prompts, max_tokens, concurrency, timeout_s, [api_key_a, api_key_b]))
        duration_s = (now_ns() - t0) / 1e9
        metrics, rows = score(prompts, sides, tokens)
        if metrics.compared == 0:
            errs = "; ".join(dict.fromkeys(e for a, b in sides for e in (a.error, b.error) if e))
            raise TargetError(f"no prompt was answered by both targets ({clip(errs, 300)})")
        return Agreement(
            wattbench_version=__version__, run_id=new_agree_id(), created_at=created, duration_s=duration_s,
            targets=targets,
            settings={"api": api, "max_tokens": max_tokens, "temperature": 0.0, "top_p": 1.0, "seed": 0,
                      "stream": False, "concurrency": concurrency, "tokens": tokens},
            metrics=metrics, prompts=rows,
        )


# ------------------------------------------------------------------ storing


def load_agreement_ref(ref: str, db: str | os.PathLike[str] | None = None) -> Agreement:
    return load_agreement(resolve_run_path(ref, db))
