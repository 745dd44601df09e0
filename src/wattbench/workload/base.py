"""What one request asks the server for, independent of how it is sent."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from wattbench.core.errors import UserError


def row_labels(obj: Mapping[str, object], where: str, tenant_field: str = "tenant") -> tuple[str | None, list[str]]:
    """Who asked, from a dataset or trace row: ``tenant_field`` (default ``tenant``; a string or a
    number) and ``tags`` (a string or a list of strings). Energy per request rolls up by both."""
    t = obj.get(tenant_field)
    if t is not None and (isinstance(t, bool) or not isinstance(t, (str, int, float))):
        raise UserError(f"{where}: '{tenant_field}' must be a string (the tenant), got {type(t).__name__}")
    tenant = None if t is None or t == "" else str(t)
    tags = obj.get("tags")
    if tags is None:
        return tenant, []
    if isinstance(tags, str):
        return tenant, [tags] if tags else []
    if not isinstance(tags, list) or not all(isinstance(x, str) for x in tags):
        raise UserError(f"{where}: 'tags' must be a string or a list of strings, got {tags!r:.60}")
    return tenant, list(tags)


@dataclass
class RequestSpec:
    """One request of a workload.

    ``prompt`` (completions API) or ``messages`` (chat API; a prompt is wrapped as one user
    message when the chat API is used). ``input_tokens`` is the prompt length the workload built
    it to have (exact when a tokenizer was used, see ``token_source``). ``max_tokens`` is the
    requested output length. Sessions: requests with the same ``session_id`` are sent in ``turn``
    order, each carrying the previous turns and the server's answers, after ``think_time_s``.
    Trace replay: ``arrival_s`` is the offset from the start of the level at which to send.
    """

    prompt: str | None = None
    messages: list[dict[str, Any]] | None = None  # chat messages, as the API's JSON
    max_tokens: int = 128
    input_tokens: int | None = None
    token_source: str = "tokenizer"  # tokenizer | server | approx
    session_id: str | None = None
    turn: int = 0
    think_time_s: float = 0.0
    arrival_s: float | None = None
    min_tokens: int | None = None  # ask the server to force the length where it can
    tags: dict[str, object] = field(default_factory=dict)  # workload metadata (file, line, …)
    tenant: str | None = None  # who asked: a dataset/trace row's ``tenant`` (or --tenant-field)
    user_tags: list[str] = field(default_factory=list)  # a dataset/trace row's ``tags``
