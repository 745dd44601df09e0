"""The requests one level sends, drawn from the workload: a picklable list of them for Ray load
actors (``SpecList``), how many a distributed level draws up front (``requests_needed``), and the
workload's requests with forced lengths for the prefill/decode isolating pair (``override_lengths``).
``run/level.py`` measures the level with them."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator

import numpy as np

from wattbench.core.load_types import LevelSpec
from wattbench.workload.base import RequestSpec
from wattbench.workload.source import Workload
from wattbench.workload.synthetic import PromptBuilder

MAX_PREDRAWN_REQUESTS = 20_000  # a distributed level with no count and no duration draws this many
LENGTH_OVERRIDE_SEED = 4242  # the prompts of the prefill/decode pair: the same in every run


class SpecList:
    """A picklable request factory for Ray load actors: the level's requests drawn up front."""

    def __init__(self, specs: Iterable[RequestSpec], n: int) -> None:
        self.specs = list(itertools.islice(iter(specs), n))

    def __call__(self, i: int) -> RequestSpec | None:
        return self.specs[i] if 0 <= i < len(self.specs) else None


def requests_needed(spec: LevelSpec) -> int:
    """How many requests a distributed level can use (drawn before it starts)."""
    extra = (spec.warmup_requests or 0) + int(spec.value if spec.mode == "concurrency" else 0)
    if spec.num_requests is not None:
        return spec.num_requests + extra
    if spec.mode == "rate" and spec.duration_s is not None:
        return int(spec.value * (spec.duration_s + (spec.warmup_s or 0.0)) * 1.3) + 16 + extra
    return MAX_PREDRAWN_REQUESTS


def override_lengths(specs: Iterable[RequestSpec], output_tokens: int | None, input_tokens: int | None,
                     workload: Workload) -> Iterator[RequestSpec]:
    """The workload's requests with forced lengths (the prefill/decode isolating pair)."""
    builder = None
    if input_tokens is not None and hasattr(workload, "ts"):  # a workload that builds prompts from a token source
        builder = PromptBuilder(workload.ts, seed=LENGTH_OVERRIDE_SEED)
    rng = np.random.default_rng(LENGTH_OVERRIDE_SEED)
    for i, s in enumerate(specs):
        prompt = s.prompt
        n_in = s.input_tokens
        if input_tokens is not None and builder is not None:
            prompt = builder.text(input_tokens, rng, f"[{i}] ")
            n_in = input_tokens
        out = output_tokens if output_tokens is not None else s.max_tokens
        yield RequestSpec(prompt=prompt, messages=None if prompt else s.messages, max_tokens=out,
                          input_tokens=n_in, token_source=s.token_source, min_tokens=out)
