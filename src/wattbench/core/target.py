"""Where and how to send requests: the target spec the OpenAI client, the load generator and the
launchers share. It lives in ``core/`` (below ``server/`` and ``load/``) so that the client needs
nothing from the load generator."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from wattbench.core.redact import body_secrets, secret_values, url_secrets

# The one home of the two client timeouts: ``RunConfig``'s ``--request-timeout`` and
# ``--stall-timeout`` default to these, and a TargetSpec made without a RunConfig gets them too.
REQUEST_TIMEOUT_S = 600.0  # a request may take this long in all
STALL_TIMEOUT_S = 120.0  # no byte for this long: the stream counts as stalled


ApiKind = Literal["completions", "chat"]  # the OpenAI route a target is sent: /completions or /chat/completions


@dataclass
class TargetSpec:
    """Where and how to send requests. The API key is held here in memory only."""

    base_url: str  # normalized, ends with /v1
    model: str
    api: ApiKind = "completions"
    api_key: str | None = None
    extra_body: dict[str, Any] = field(default_factory=dict)  # engine-specific fields the engine accepts (ignore_eos …)
    request_timeout_s: float = REQUEST_TIMEOUT_S
    stall_timeout_s: float = STALL_TIMEOUT_S
    keep_output_text: bool = False
    send_min_tokens: bool = False  # the server accepts min_tokens (vLLM, SGLang); strict servers reject it
    keepalive: bool = True  # reuse connections; False: one per request (server.detect.reuses_connections)
    headers: dict[str, str] = field(default_factory=dict)  # --header K:V, sent with every request (memory only)
    secret_headers: tuple[str, ...] = ()  # --secret-header NAME: header names whose values are secrets too
    # the target URL's query string, raw (``?api-version=…&sig=…``: no part of ``base_url``), sent with
    # every request to the target's origin by whichever process sends them (``core.origin.send_query``;
    # a spawned load worker or a Ray load actor registers it: ``load.client.sending_for``); memory only
    query: str = ""

    def secrets(self) -> list[str]:
        """The key, the secret header values, the credential fields of the body and the values of
        the query but the harmless ones (``core/redact.py``): what the client scrubs from every error
        detail and kept text it records."""
        return (secret_values(self.api_key, self.headers, self.secret_headers) + body_secrets(self.extra_body)
                + (url_secrets(f"{self.base_url}?{self.query}") if self.query else []))

    def __repr__(self) -> str:  # never show the key or the query
        return f"TargetSpec(base_url={self.base_url!r}, model={self.model!r}, api={self.api!r})"
