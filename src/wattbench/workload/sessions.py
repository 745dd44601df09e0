"""Multi-turn sessions: user turns with think time, each later turn carrying the earlier ones.

A session is ``T`` turns (``T`` from ``turns``). Turn ``t`` is one ``RequestSpec`` with
``session_id``, ``turn = t`` and ``think_time_s`` (the pause after the previous answer arrived;
0 for the first turn). Its ``prompt`` is only the *new* user message: the client keeps the
conversation and sends the earlier user turns and the server's actual answers before it (chat API:
as messages; completions API: concatenated). What the workload does provide is the growing-context
expectation, assuming every earlier answer had its requested length:

- ``input_tokens``: expected context of this turn = earlier user turns + earlier answers
  (their ``max_tokens``) + this user turn (chat-template tokens excluded);
- ``tags["turn_input_tokens"]``: the new user message alone;
- ``tags["expected_context_tokens"]``: the same figure as ``input_tokens``.

A session stops early once the expected context would exceed ``max_context_tokens`` (the model's
context length minus room for the answer), so no turn is built that the server must refuse.
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np

from wattbench.core.errors import UserError
from wattbench.workload.base import RequestSpec
from wattbench.workload.distributions import LengthDistribution, parse_distribution
from wattbench.workload.source import Workload
from wattbench.workload.synthetic import PromptBuilder, request_rng
from wattbench.workload.tokenizer import TokenSource


def _dist(d: str | LengthDistribution) -> LengthDistribution:
    return d if isinstance(d, LengthDistribution) else parse_distribution(d)


class SessionWorkload(Workload):
    """Endless multi-turn sessions of synthetic token-exact user turns.

    ``turns``: turns per session (a length distribution string, e.g. ``uniform:2:6``);
    ``user_tokens`` / ``output_tokens``: per-turn lengths; ``think_time_mean_s``: mean of the
    exponential think time between an answer and the next user turn (0 = none).
    """

    def __init__(self, turns: str | LengthDistribution, user_tokens: str | LengthDistribution,
                 output_tokens: str | LengthDistribution, token_source: TokenSource, seed: int = 0, *,
                 think_time_mean_s: float = 0.0, max_context_tokens: int | None = None, name: str = "sessions",
                 head: str = "", force_output: bool = True, builder: PromptBuilder | None = None):
        if think_time_mean_s < 0:
            raise UserError(f"think time must be >= 0 s, got {think_time_mean_s}")
        self.name = name
        self.seed = int(seed)
        self.turns = _dist(turns)
        self.user_tokens = _dist(user_tokens)
        self.output_tokens = _dist(output_tokens)
        self.think_time_mean_s = float(think_time_mean_s)
        self.max_context_tokens = max_context_tokens
        self.ts = token_source
        self.token_source = token_source.source
        self.builder = builder or PromptBuilder(token_source, seed)
        self.head = head
        self.force_output = force_output

    def session(self, s: int) -> list[RequestSpec]:
        """All turns of session ``s`` (deterministic for the seed)."""
        rng = request_rng(self.seed, s, stream=5)
        n_turns = int(self.turns.sample(rng))
        sid = f"s{self.seed}-{s}"
        plans = []
        context = 0
        for t in range(n_turns):
            u = int(self.user_tokens.sample(rng))
            o = int(self.output_tokens.sample(rng))
            think = float(rng.exponential(self.think_time_mean_s)) if (t and self.think_time_mean_s) else 0.0
            expected = context + u
            if self.max_context_tokens is not None and expected + o > self.max_context_tokens:
                if t == 0:  # the first turn alone must still fit: shorten it
                    u = max(1, min(u, self.max_context_tokens - o))
                    o = max(1, min(o, self.max_context_tokens - u))
                    expected = u
                else:
                    break
            plans.append((t, u, o, think, expected))
            context = expected + o
        jobs = [(u, s * 1000 + t, request_rng(self.seed, s * 1000 + t, stream=6)) for t, u, _, _, _ in plans]
        head = self.head
        prompts = self.builder.unique_prompts(jobs, head=head)
        specs = []
        for (t, u, o, think, expected), prompt in zip(plans, prompts):
            specs.append(RequestSpec(
                prompt=prompt, max_tokens=o, input_tokens=expected, token_source=self.token_source,
                session_id=sid, turn=t, think_time_s=think, min_tokens=o if self.force_output else None,
                tags={"workload": self.name, "session": s, "turn_input_tokens": u,
                      "expected_context_tokens": expected, "turns_in_session": len(plans)}))
        return specs

    def specs(self, n: int | None = None, start: int = 0) -> Iterator[RequestSpec]:
        """Requests (turns) ``start .. start+n-1``, whole sessions in order, turns in order."""
        i, s, emitted = 0, 0, 0
        while n is None or emitted < n:
            turns = self.session(s)
            for spec in turns:
                if i >= start and (n is None or emitted < n):
                    yield spec
                    emitted += 1
                i += 1
            s += 1

    def expected_turns(self, n_samples: int = 4000) -> float:
        rng = np.random.default_rng([self.seed, 99])
        return float(np.mean(self.turns.sample(rng, n_samples)))

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "kind": "sessions", "seed": self.seed, "token_source": self.token_source,
                "tokenizer": self.ts.describe(), "turns": self.turns.describe(),
                "user_tokens": self.user_tokens.describe(), "output_tokens": self.output_tokens.describe(),
                "think_time": {"distribution": "exponential", "mean_s": self.think_time_mean_s},
                "max_context_tokens": self.max_context_tokens, "force_output": self.force_output}
