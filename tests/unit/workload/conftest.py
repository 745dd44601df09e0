"""A byte-level BPE tokenizer trained here in about a second (small vocab), the ground truth for
token-exact prompts."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="session")
def bpe_path(tmp_path_factory):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from wattbench.workload.synthetic import WORDS

    rng = np.random.default_rng(0)
    corpus = [" ".join(rng.choice(WORDS, 40)) + " 0123456789-: Summarize, the code!\n\n" for _ in range(800)]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=600, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                             special_tokens=["<s>"], show_progress=False)
    tok.train_from_iterator(corpus, tr)
    d = tmp_path_factory.mktemp("tok")
    tok.save(str(d / "tokenizer.json"))
    return d


@pytest.fixture(scope="session")
def bpe(bpe_path):
    from wattbench.workload.tokenizer import HFTokenizer

    return HFTokenizer(bpe_path)
