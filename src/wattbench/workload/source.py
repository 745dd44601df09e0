"""What every workload is: a deterministic, seeded source of ``RequestSpec`` that describes itself.

``specs(n, start=0)`` yields requests ``start .. start+n-1`` of the workload's sequence (all of it
from ``start`` when ``n`` is None: endless for synthetic workloads, the whole file for datasets and
traces). The same seed gives the same sequence; request ``i`` is the same whatever ``start`` was
asked, so the orchestrator can give each level fresh requests (``start`` = requests used so far)
and avoid prefix-cache hits from one level to the next.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Iterator
import hashlib

from wattbench.workload.base import RequestSpec


class Workload(ABC):
    name: str = "workload"
    token_source: str = "approx"
    # whether the workload builds each prompt to a length it chose (synthetic, a trace's row, a
    # session's turn): only then is there an asked length to check the server's count against. A
    # dataset's prompts are given text, counted, never asked for.
    builds_prompt_lengths: bool = True

    @abstractmethod
    def specs(self, n: int | None = None, start: int = 0) -> Iterator[RequestSpec]:
        """Requests ``start .. start+n-1`` (see the module docstring)."""

    def size(self) -> int | None:
        """How many requests the workload holds, or None when it is endless."""
        return None

    def take(self, n: int, start: int = 0) -> list[RequestSpec]:
        return list(self.specs(n, start))

    def __iter__(self) -> Iterator[RequestSpec]:
        return self.specs()

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """A JSON-able description for result.json: name, distributions, source file and its hash."""


def file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
