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
def scripted_server_with_log(*args: str):
    """Yield ``(base_url, stats)``: ``stats.per_request()`` is the server's per-request log."""
    with stream_server(*args) as (base, stats):
        yield base + "/v1", stats


@contextmanager
def scripted_servers_with_log(*arg_lists: list[str]):
    """Several servers at once; yields ``[(base_url, stats), ...]`` in order."""
    with ExitStack() as stack:
        yield [stack.enter_context(scripted_server_with_log(*a)) for a in arg_lists]


@contextmanager
def scripted_servers(*arg_lists: list[str]):
    """Several servers at once; yields their base URLs in order."""
    with ExitStack() as stack:
        yield [stack.enter_context(scripted_server(*a)) for a in arg_lists]


class FixedRequests:
    """A request factory (index -> RequestSpec) that Ray can ship by reference: every request
    is the same short prompt asking for ``max_tokens`` tokens; ``None`` after ``limit``. With
    ``tagged``, request ``i``'s first word is ``r{i}``: the scripted server's ``/stats/requests``
    log is keyed by it (per-request ground truth)."""

    def __init__(self, max_tokens: int = 6, prompt: str = "one two three four", limit: int | None = None,
                 tagged: bool = False):
        self.max_tokens, self.prompt, self.limit, self.tagged = max_tokens, prompt, limit, tagged

    def __call__(self, i: int):
        from wattbench.workload.base import RequestSpec

        if self.limit is not None and i >= self.limit:
            return None
        prompt = f"r{i} " + self.prompt.split(" ", 1)[-1] if self.tagged else self.prompt
        return RequestSpec(prompt=prompt, max_tokens=self.max_tokens)
