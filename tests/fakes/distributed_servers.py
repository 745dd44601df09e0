"""Start scripted streaming servers (``tests/fakes/stream_server.py``) as real processes for the
several-targets and Ray tests, and stop them by PID."""

from __future__ import annotations

from contextlib import ExitStack, contextmanager

from tests.fakes.stream_server_proc import stream_server


@contextmanager
def scripted_server(*args: str):
    """Yield the base URL (``http://127.0.0.1:PORT/v1``) of one scripted server."""
    with stream_server(*args) as (base, _stats):
        yield base + "/v1"


@contextmanager
def scripted_servers(*arg_lists: list[str]):
    """Several servers at once; yields their base URLs in order."""
    with ExitStack() as stack:
        yield [stack.enter_context(scripted_server(*a)) for a in arg_lists]


class FixedRequests:
    """A request factory (index -> RequestSpec) that Ray can ship by reference: every request
    is the same short prompt asking for ``max_tokens`` tokens; ``None`` after ``limit``."""

    def __init__(self, max_tokens: int = 6, prompt: str = "one two three four", limit: int | None = None):
        self.max_tokens, self.prompt, self.limit = max_tokens, prompt, limit

    def __call__(self, i: int):
        from wattbench.workload.base import RequestSpec

        if self.limit is not None and i >= self.limit:
            return None
        return RequestSpec(prompt=self.prompt, max_tokens=self.max_tokens)
