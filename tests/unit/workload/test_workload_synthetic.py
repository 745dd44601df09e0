import numpy as np
import pytest

from wattbench.core.errors import UserError
from wattbench.workload.synthetic import PromptBuilder, SyntheticWorkload, request_rng
from wattbench.workload.tokenizer import ApproxTokenizer


def test_every_prompt_has_exactly_the_requested_tokens(bpe):
    w = SyntheticWorkload("uniform:1:400", "64", bpe, seed=5)
    specs = w.take(150)
    counts = [bpe.count(s.prompt) for s in specs]
    assert counts == [s.input_tokens for s in specs]
    assert min(s.input_tokens for s in specs) < 20  # tiny prompts covered too
    assert all(s.token_source == "tokenizer" for s in specs)
    assert all(s.min_tokens == s.max_tokens == 64 for s in specs)


def test_exact_after_head_and_at_merge_boundaries(bpe):
    # a head ending without a space and digits next to the body provoke BPE merges at the joins
    w = SyntheticWorkload("uniform:12:90", "8", bpe, seed=11, head="Summarize, the code:")
    for s in w.take(120):
        assert bpe.count(s.prompt) == s.input_tokens


def test_deterministic_per_seed_and_random_access(bpe):
    a = SyntheticWorkload("uniform:50:150", "uniform:10:50", bpe, seed=3).take(40)
    b = SyntheticWorkload("uniform:50:150", "uniform:10:50", bpe, seed=3).take(20, start=20)
    assert [s.prompt for s in a[20:]] == [s.prompt for s in b]
    assert [s.max_tokens for s in a[20:]] == [s.max_tokens for s in b]
    c = SyntheticWorkload("uniform:50:150", "uniform:10:50", bpe, seed=4).take(40)
    assert [s.prompt for s in a] != [s.prompt for s in c]


def test_batched_and_single_builds_agree(bpe):
    w = SyntheticWorkload("uniform:5:120", "16", bpe, seed=9)
    batched = w.take(70)
    single = [w.spec_at(i) for i in range(70)]
    assert [s.prompt for s in batched] == [s.prompt for s in single]


def test_unique_prefixes_no_shared_first_block(bpe):
    specs = SyntheticWorkload("64", "16", bpe, seed=1).take(300)
    first16 = {tuple(bpe.encode(s.prompt)[:16]) for s in specs}
    assert len(first16) == 300


def test_shared_prefix_for_rag(bpe):
    w = SyntheticWorkload("uniform:20:40", "16", bpe, seed=2, shared_prefix_tokens=300)
    specs = w.take(50)
    shared = w.shared
    assert all(s.prompt.startswith(shared) for s in specs)
    assert all(bpe.count(s.prompt) == s.input_tokens for s in specs)
    q = np.array([s.input_tokens - w.shared_tokens for s in specs])
    assert q.min() >= 20 and q.max() <= 40
    assert abs(w.shared_tokens - 300) <= 4
    assert len({s.prompt for s in specs}) == 50


class CountingTokenizer:
    """Wraps the trained tokenizer and counts how many tokens go through encode (the cost driver)."""

    def __init__(self, inner):
        self.inner, self.encoded = inner, 0
        self.source, self.exact = inner.source, True

    def encode(self, text):
        ids = self.inner.encode(text)
        self.encoded += len(ids)
        return ids

    def encode_batch(self, texts):
        out = self.inner.encode_batch(texts)
        self.encoded += sum(len(x) for x in out)
        return out

    def decode(self, ids):
        return self.inner.decode(ids)

    def count(self, text):
        return len(self.encode(text))

    def describe(self):
        return self.inner.describe()


def test_building_costs_about_one_encode_per_prompt(bpe):
    # 10k prompts of 1k tokens must take seconds, not minutes: the pool is encoded once and each
    # prompt costs about one encode of itself (plus its short prefix), not a search.
    ct = CountingTokenizer(bpe)
    w = SyntheticWorkload("1000", "16", ct, seed=0)
    w.take(1)
    ct.encoded = 0
    specs = w.take(300)
    assert all(bpe.count(s.prompt) == 1000 for s in specs[:20])
    # the cost, counted not timed (a wall-clock bound fails on a loaded host): tokens encoded
    # per prompt token stays near 1 (a search would encode each prompt many times over)
    assert ct.encoded / (300 * 1000) < 1.15


def test_approx_source_uses_word_counts():
    w = SyntheticWorkload("400", "16", ApproxTokenizer(), seed=0)
    s = w.take(3)
    assert all(x.token_source == "approx" for x in s)
    words = len(s[0].prompt.split())
    assert words == pytest.approx(400 * 0.75, abs=2)
    assert len({x.prompt for x in s}) == 3


def test_prefix_longer_than_prompt_is_an_error(bpe):
    b = PromptBuilder(bpe, 0)
    with pytest.raises(UserError, match="prefix"):
        b.exact_text(3, request_rng(0, 0), prefix="a long prefix that has many tokens in it")
