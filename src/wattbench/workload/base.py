"""What one request asks the server for, independent of how it is sent."""

from __future__ import annotations

from dataclasses import dataclass, field


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
    messages: list[dict] | None = None
    max_tokens: int = 128
    input_tokens: int | None = None
    token_source: str = "tokenizer"  # tokenizer | server | approx
    session_id: str | None = None
    turn: int = 0
    think_time_s: float = 0.0
    arrival_s: float | None = None
    min_tokens: int | None = None  # ask the server to force the length where it can
    tags: dict = field(default_factory=dict)
