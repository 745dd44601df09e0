"""Synthetic prompts with an exact token count, deterministic per seed, unique per request.

How a prompt of exactly N tokens is built (exact token sources: a local tokenizer or the server):

1. A long *token pool* is built once per token source: seeded random English words, encoded
   once. A prompt body is a slice of that pool at a seeded random offset, so building 10k
   prompts costs one decode and one or two encodes each, not a search.
2. The prompt is ``[shared prefix] + head + unique tag + body``. The unique tag (the builder's
   ``salt``, random digits and the request's index) comes first after any shared prefix, so no two
   requests share a prefix-cache block unless a shared prefix is asked for (``rag``). A run sets
   the salt to its own id's random part, so no two *runs* share one either (a server keeps its
   prefix cache from run to run); ``--prompt-salt`` fixes it (``""``: prompts identical across
   runs with the same seed).
3. ``decode(slice)`` is appended and the whole text re-encoded; merges at the joins (BPE) can
   change the count by a token or two, so the slice length is corrected and the text re-encoded
   until the count is exactly N (a different offset is tried if it does not settle). A prompt
   that cannot be made exact raises instead of being sent with a wrong length.

With the ``approx`` source there are no token ids: the body is ``N × 0.75`` words and lengths are
estimates (``token_source="approx"``). Against a server, ``run/prime.calibrate_prompts`` replaces
the 0.75 by the server's own count (``usage.prompt_tokens`` of probe prompts) before anything is
measured (``token_source="calibrated"``).

Counts exclude special tokens (BOS) and any chat template the server applies.
"""

from __future__ import annotations

import weakref
from typing import Any, Iterator

import numpy as np

from wattbench.core.errors import UserError
from wattbench.workload.base import RequestSpec
from wattbench.workload.distributions import LengthDistribution, parse_distribution
from wattbench.workload.source import Workload
from wattbench.workload.tokenizer import ApproxTokenizer, Codec, TokenSource

# Common English words: the pool's raw material (the content does not matter for cost, only that
# it looks like text to a tokenizer and yields ordinary, varied tokens).
WORDS = (
    "the of and to in is was for on that with as by at from his her an be this which or had "
    "are not but were it they their have has one all been new more after first two also who "
    "other would time when can into there she only state year city people over some between "
    "world about during most made under school through many war part such well while where "
    "family known later could history government work since then team system found before both "
    "three may south north house each later area name water life country number season company "
    "river power energy light small large early music game book line group public service road "
    "local place same second market value data model memory signal process result course field "
    "village station church design report series local paper party board human level point west "
    "east center center market order story player league album record written became played "
    "between several against however because around although within without another general "
    "small open short long high low round free full early late quick slow green blue white black "
    "red gold stone wood metal glass paper cloud rain snow wind fire earth plant tree leaf seed "
    "root flower bird fish horse dog cat mouse bread milk cheese apple sugar salt coffee table "
    "chair window door wall floor bridge tower garden forest mountain valley island ocean desert"
).split()

POOL_TOKENS = 1 << 16  # initial pool size; grows on demand
_FIXED: list[np.ndarray] = []  # the approximate source's word sequence, in blocks of _FIXED_BLOCK
_FIXED_BLOCK = 4096


def _fixed_words(n: int) -> np.ndarray:
    """The first ``n`` words of one fixed seeded sequence (the same in every process and run)."""
    while len(_FIXED) * _FIXED_BLOCK < n:
        rng = np.random.default_rng([0x776F7264, len(_FIXED)])  # "word", block index
        _FIXED.append(rng.choice(np.asarray(WORDS), size=_FIXED_BLOCK))
    return np.concatenate(_FIXED)[:n] if len(_FIXED) > 1 else _FIXED[0][:n]
_POOLS: weakref.WeakKeyDictionary[object, list[int]] = weakref.WeakKeyDictionary()  # token source -> encoded pool


class PromptBuilder:
    """Builds token-exact prompts from one token source. Reuse one builder: its pool is cached."""

    def __init__(self, token_source: TokenSource, seed: int = 0, salt: str = ""):
        self.ts = token_source
        self.seed = int(seed)
        # text every unique tag starts with: a run sets its own (``run/benchmark.py``) so that two runs
        # with the same seed never send the same prompt — a server's prefix cache keeps prompts
        # across runs, and a repeated prompt skips its prefill (docs/workloads.md)
        self.salt = salt
        self.exact = bool(getattr(token_source, "exact", False))
        # an exact source's token ids, both ways (``Codec``): what token-exact prompts are cut from
        self._ids: Codec | None = token_source if isinstance(token_source, Codec) else None
        self._pool: list[int] = []
        self._count_cache: dict[str, int] = {}

    def _codec(self) -> Codec:
        """The token source's ids, both ways: only an exact source (``exact``) is asked for them."""
        if self._ids is None:
            raise UserError(f"token-exact prompts need token ids, which this token source does not give "
                            f"({self.ts.describe()})")
        return self._ids

    # ------------------------------------------------------------------ pool
    def _ensure_pool(self, n_tokens: int) -> None:
        """The pool is the same for every seed (offsets into it are seeded) and is shared by every
        builder of one token source, so it is encoded once per process."""
        need = max(POOL_TOKENS, 2 * n_tokens)
        if len(self._pool) >= need:
            return
        try:
            shared = _POOLS.get(self.ts)
        except TypeError:  # not weak-referenceable
            shared = None
        if shared is not None and len(shared) >= need:
            self._pool = shared
            return
        rng = np.random.default_rng(0x706F6F6C)  # "pool"
        words = rng.choice(np.asarray(WORDS), size=int(need * 1.2) + 64)
        text = " ".join(words.tolist()) + "."
        ids = self._codec().encode(text)
        while len(ids) < need:  # very unusual tokenizers: keep appending
            ids = ids + ids
        self._pool = list(ids)
        try:
            _POOLS[self.ts] = self._pool
        except TypeError:
            pass

    def count(self, text: str) -> int:
        c = self._count_cache.get(text)
        if c is None:
            c = self.ts.count(text)
            if len(self._count_cache) < 4096:
                self._count_cache[text] = c
        return c

    # ------------------------------------------------------------------ build
    def exact_text(self, n_tokens: int, rng: np.random.Generator, prefix: str = "") -> str:
        """``prefix`` followed by pool text, exactly ``n_tokens`` tokens in all (exact sources)."""
        if n_tokens < 1:
            raise UserError(f"a prompt needs at least 1 token, asked for {n_tokens}")
        pre_n = self.count(prefix) if prefix else 0
        if pre_n > n_tokens:
            raise UserError(f"prompt prefix alone has {pre_n} tokens, more than the {n_tokens} asked for")
        self._ensure_pool(n_tokens + 8)
        pool, codec = self._pool, self._codec()
        for _attempt in range(6):
            k = n_tokens - pre_n
            off = int(rng.integers(0, len(pool) - n_tokens - 8))
            seen = set()
            for _ in range(8):
                if k < 0:
                    break
                text = prefix + (codec.decode(pool[off:off + k]) if k else "")
                m = len(codec.encode(text)) if k else pre_n
                if m == n_tokens:
                    return text
                if k in seen:
                    break
                seen.add(k)
                k += n_tokens - m
            # token-level trim of an overlong candidate, verified
            text = prefix + codec.decode(pool[off:off + n_tokens - pre_n + 4])
            ids = codec.encode(text)
            for cut in (n_tokens, n_tokens - 1, n_tokens + 1):
                cand = codec.decode(ids[:cut])
                if len(codec.encode(cand)) == n_tokens:
                    return cand
        raise UserError(f"could not build a prompt of exactly {n_tokens} tokens with this tokenizer "
                        f"({self.ts.describe()})")

    def _encode_many(self, texts: list[str]) -> list[list[int]]:
        fn = getattr(self.ts, "encode_batch", None)
        return fn(texts) if fn else [self._codec().encode(t) for t in texts]

    def _decode_many(self, seqs: list[list[int]]) -> list[str]:
        fn = getattr(self.ts, "decode_batch", None)
        return fn(seqs) if fn else [self._codec().decode(s) for s in seqs]

    def unique_prompts(self, jobs: list[tuple[int, int, np.random.Generator]], *, head: str = "",
                       shared: str = "") -> list[str]:
        """Unique token-exact prompts for many ``(n_tokens, index, rng)`` with batched tokenizer calls.

        The first candidate of every prompt (prefix + one pool slice) is decoded and verified in
        one batch; the few whose count is off by a merge continue in ``unique_prompt`` with the
        same generator. Each job's path depends only on its own generator, so a prompt is
        identical however the jobs are batched (request ``i`` alone or among 63 others).
        """
        if not self.exact:
            return [self.unique_prompt(n, i, rng, head=head, shared=shared) for n, i, rng in jobs]
        out: list[str | None] = [None] * len(jobs)
        own = [f"{self.salt}{int(rng.integers(100000, 999999))}-{i}:" + head for _, i, rng in jobs]
        prefixes = [shared + x for x in own]
        # a long shared prefix is counted once; a merge at its join is caught by the verification
        base = self.count(shared) if shared else 0
        pre_counts = [base + len(x) for x in self._encode_many(own)]
        self._ensure_pool(max(n for n, _, _ in jobs) + 8)
        pool = self._pool
        slices, where = [], []
        for j, ((n, i, rng), pre_n) in enumerate(zip(jobs, pre_counts)):
            if pre_n >= n:
                continue
            off = int(rng.integers(0, len(pool) - n - 8))
            slices.append(pool[off:off + n - pre_n])
            where.append(j)
        bodies = self._decode_many(slices)
        texts = [prefixes[j] + b for j, b in zip(where, bodies)]
        counts = [len(x) for x in self._encode_many(texts)]
        for j, t, c in zip(where, texts, counts):
            if c == jobs[j][0]:
                out[j] = t
        # the rest continue with the same generator, in order: deterministic
        return [t if t is not None else self.unique_prompt(n, i, rng, head=head, shared=shared)
                for t, (n, i, rng) in zip(out, jobs)]

    def approx_text(self, n_tokens: int, rng: np.random.Generator, prefix: str = "") -> str:
        """``prefix`` and about ``n_tokens`` tokens of words (no token ids). The words are the first
        ones of one fixed sequence, in an order of the request's own (``rng``): every prompt of a
        length has the same words, so a server's tokenizer counts them alike (i.i.d. words made the
        count of one 50-word prompt scatter by ~7% on the tiny preset's tokenizer), and a fit to the
        server's count (``run/prime.calibrate_prompts``) holds for each prompt, not only on average."""
        ts = self.ts if isinstance(self.ts, ApproxTokenizer) else ApproxTokenizer()
        n_words = max(1, ts.words_for(n_tokens) - len(prefix.split()))
        words = rng.permutation(_fixed_words(n_words))
        sep = " " if prefix and not prefix[-1].isspace() else ""
        return prefix + sep + " ".join(words.tolist())

    def text(self, n_tokens: int, rng: np.random.Generator, prefix: str = "") -> str:
        if self.exact:
            return self.exact_text(n_tokens, rng, prefix)
        return self.approx_text(n_tokens, rng, prefix)

    def unique_prompt(self, n_tokens: int, index: int, rng: np.random.Generator, *, head: str = "",
                      shared: str = "") -> str:
        """A prompt of ``n_tokens`` tokens: ``shared + head + tag + body`` with a tag unique to ``index``.

        When the tokens are too few for the head and tag, the head and then the tag are dropped
        (a prompt of 1–3 tokens cannot also carry a unique tag).
        """
        tag = f"{self.salt}{int(rng.integers(100000, 999999))}-{index}:"
        for prefix in (shared + tag + head, shared + tag, shared):
            if not prefix:
                break
            n_pre = self.count(prefix)
            if n_pre < n_tokens or (prefix == shared and n_pre == n_tokens):
                return self.text(n_tokens, rng, prefix)
        if shared:
            raise UserError(f"a shared prefix of {self.count(shared)} tokens does not fit in {n_tokens} tokens")
        return self.text(n_tokens, rng, "")


def request_rng(seed: int, index: int, stream: int = 0) -> np.random.Generator:
    """The generator for request ``index``: random access, same draws whatever order it is asked in."""
    return np.random.default_rng([int(seed), int(stream), int(index)])


class SyntheticWorkload(Workload):
    """Endless synthetic requests: input and output lengths from distributions, token-exact prompts.

    ``head`` is text every prompt carries after its unique tag (e.g. an instruction);
    ``shared_prefix_tokens`` > 0 puts one shared document of about that many tokens (exactly
    ``shared_tokens``, separators included) in front of every prompt (prefix caching then helps, as
    in RAG); ``input_dist`` is then the length of the part after it, and ``input_tokens`` of each
    request is the total (shared + own).
    ``force_output`` sets ``min_tokens = max_tokens`` so the client can ask the server to produce
    exactly the requested output length where the server allows it.
    """

    def __init__(self, input_dist: str | LengthDistribution, output_dist: str | LengthDistribution,
                 token_source: TokenSource, seed: int = 0, *, name: str = "synthetic", head: str = "",
                 shared_prefix_tokens: int = 0, max_input_tokens: int | None = None,
                 max_output_tokens: int | None = None, force_output: bool = True,
                 builder: PromptBuilder | None = None):
        self.name = name
        self.seed = int(seed)
        self.input_dist = (input_dist if isinstance(input_dist, LengthDistribution)
                           else parse_distribution(input_dist))
        self.output_dist = (output_dist if isinstance(output_dist, LengthDistribution)
                            else parse_distribution(output_dist))
        if max_input_tokens is not None:
            self.input_dist = self.input_dist.with_bounds(high=max_input_tokens)
        if max_output_tokens is not None:
            self.output_dist = self.output_dist.with_bounds(high=max_output_tokens)
        self.ts = token_source
        self.token_source = token_source.source
        self.builder = builder or PromptBuilder(token_source, seed)
        self.head = head
        self.force_output = force_output
        self.shared_prefix_tokens = int(shared_prefix_tokens)
        self.shared = ""
        self.shared_tokens = 0
        if self.shared_prefix_tokens > 0:
            self.shared = self.builder.text(self.shared_prefix_tokens, request_rng(self.seed, 0, stream=7),
                                            "Context document:\n") + "\n\n"
        self.shared_tokens = self.builder.count(self.shared) if self.shared else 0

    BATCH = 64

    def _specs_for(self, indices: list[int]) -> list[RequestSpec]:
        jobs, outs = [], []
        for index in indices:
            rng = request_rng(self.seed, index)
            n_in = int(self.input_dist.sample(rng)) + self.shared_tokens  # rag: input_dist is the question
            outs.append(int(self.output_dist.sample(rng)))
            jobs.append((n_in, index, rng))
        prompts = self.builder.unique_prompts(jobs, head=self.head, shared=self.shared)
        specs = []
        for (n_in, index, _), n_out, prompt in zip(jobs, outs, prompts):
            tags = {"workload": self.name, "index": index}
            if self.shared:
                tags["shared_prefix_tokens"] = self.shared_tokens
            specs.append(RequestSpec(prompt=prompt, max_tokens=n_out, input_tokens=n_in,
                                     token_source=self.token_source,
                                     min_tokens=n_out if self.force_output else None, tags=tags))
        return specs

    def spec_at(self, index: int) -> RequestSpec:
        return self._specs_for([index])[0]

    def specs(self, n: int | None = None, start: int = 0) -> Iterator[RequestSpec]:
        i = start
        while n is None or i < start + n:
            m = self.BATCH if n is None else min(self.BATCH, start + n - i)
            yield from self._specs_for(list(range(i, i + m)))
            i += m

    def recalibrated(self) -> None:
        """The token source was calibrated (``ApproxTokenizer.calibrate``): take its new name and
        count the shared prefix again with it (cached counts dropped)."""
        self.token_source = self.ts.source
        self.builder._count_cache.clear()
        self.shared_tokens = self.builder.count(self.shared) if self.shared else 0

    def describe(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "kind": "synthetic", "seed": self.seed, "token_source": self.token_source,
             "tokenizer": self.ts.describe(), "input_tokens": self.input_dist.describe(),
             "output_tokens": self.output_dist.describe(), "force_output": self.force_output}
        if self.head:
            d["head"] = self.head
        if self.shared_prefix_tokens:
            d["shared_prefix_tokens"] = self.shared_tokens
            d["input_tokens_meaning"] = "tokens after the shared prefix"
        return d
