"""The tiny preset exported to GGUF: read back with the gguf package's own reader."""

import json

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
torch = pytest.importorskip("torch")

from wattbench.engines.gguf_export import ensure_gguf, gguf_name, llama3_rope_freqs, permute_rotary  # noqa: E402
from wattbench.engines.presets import PRESETS, ensure_preset  # noqa: E402
from wattbench.core.errors import UserError  # noqa: E402


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    cache = tmp_path_factory.mktemp("models")
    path = ensure_gguf("tiny", cache_dir=cache)
    return ensure_preset("tiny", cache_dir=cache), path, gguf.GGUFReader(str(path))


def _field(r, key):
    f = r.fields[key]
    if f.types and f.types[0] == gguf.GGUFValueType.ARRAY:
        return [bytes(f.parts[i]).decode() if f.types[-1] == gguf.GGUFValueType.STRING else f.parts[i][0]
                for i in f.data]
    v = f.parts[-1]
    return bytes(v).decode() if f.types[0] == gguf.GGUFValueType.STRING else v[0]


def test_header_matches_the_preset(tiny):
    _, _, r = tiny
    p = PRESETS["tiny"]
    assert _field(r, "general.architecture") == "llama"
    assert _field(r, "llama.embedding_length") == p.hidden_size
    assert _field(r, "llama.block_count") == p.num_hidden_layers
    assert _field(r, "llama.feed_forward_length") == p.intermediate_size
    assert _field(r, "llama.attention.head_count") == p.num_attention_heads
    assert _field(r, "llama.attention.head_count_kv") == p.num_key_value_heads
    assert _field(r, "llama.rope.dimension_count") == p.head_dim
    assert _field(r, "llama.rope.freq_base") == pytest.approx(p.rope_theta)
    assert _field(r, "llama.context_length") == p.max_position_embeddings


def test_tokenizer_is_the_presets(tiny):
    model_dir, _, r = tiny
    tj = json.loads((model_dir / "tokenizer.json").read_text())
    tokens = _field(r, "tokenizer.ggml.tokens")
    assert len(tokens) == PRESETS["tiny"].vocab_size
    vocab = {**tj["model"]["vocab"], **{t["content"]: t["id"] for t in tj["added_tokens"]}}
    assert all(tokens[i] == t for t, i in vocab.items())
    assert _field(r, "tokenizer.ggml.model") == "gpt2" and _field(r, "tokenizer.ggml.pre") == "gpt-2"
    assert len(_field(r, "tokenizer.ggml.merges")) == len(tj["model"]["merges"])
    tc = json.loads((model_dir / "tokenizer_config.json").read_text())
    assert tokens[_field(r, "tokenizer.ggml.bos_token_id")] == tc["bos_token"] == "<|begin_of_text|>"
    assert tokens[_field(r, "tokenizer.ggml.eos_token_id")] == tc["eos_token"]
    types = _field(r, "tokenizer.ggml.token_type")
    assert types[vocab["<|eot_id|>"]] == gguf.TokenType.CONTROL and types[300] == gguf.TokenType.NORMAL
    assert "<|start_header_id|>" in _field(r, "tokenizer.chat_template")


def test_tensors_are_the_presets_weights(tiny):
    from safetensors import safe_open

    model_dir, _, r = tiny
    t = {x.name: x for x in r.tensors}
    p = PRESETS["tiny"]
    assert len(t) == 2 + 9 * p.num_hidden_layers + 1  # embed, output, 9 per layer, output_norm
    with safe_open(str(model_dir / "model.safetensors"), framework="pt") as f:
        emb = f.get_tensor("model.embed_tokens.weight").float().numpy()
        q = f.get_tensor("model.layers.1.self_attn.q_proj.weight").float().numpy()
        norm = f.get_tensor("model.layers.0.input_layernorm.weight").float().numpy()
    e = t["token_embd.weight"]
    assert e.tensor_type == gguf.GGMLQuantizationType.F16
    assert np.array_equal(np.asarray(e.data).reshape(emb.shape), emb.astype(np.float16))
    gq = np.asarray(t["blk.1.attn_q.weight"].data).reshape(q.shape)
    assert np.array_equal(gq, permute_rotary(q, p.num_attention_heads).astype(np.float16))
    assert not np.array_equal(gq, q.astype(np.float16))  # the rotary permutation happened
    assert t["blk.0.attn_norm.weight"].tensor_type == gguf.GGMLQuantizationType.F32
    assert np.array_equal(np.asarray(t["blk.0.attn_norm.weight"].data), norm)


def test_permute_rotary_interleaves_the_halves():
    w = np.arange(8, dtype=np.float32).reshape(8, 1)  # one head of 8 rows: halves [0..3] [4..7]
    assert permute_rotary(w, 1).ravel().tolist() == [0, 4, 1, 5, 2, 6, 3, 7]


def test_llama3_rope_freqs_as_llama_cpp_computes_them():
    p = PRESETS["llama-1b"]
    cfg = {"rope_theta": p.rope_theta, "hidden_size": p.hidden_size, "num_attention_heads": p.num_attention_heads,
           **p.extra_config}
    f = llama3_rope_freqs(cfg)
    assert f.shape == (32,) and f[0] == pytest.approx(1.0, rel=1e-9) and f[-1] == pytest.approx(32.0)  # high freqs kept, low scaled
    assert np.all(np.diff(f) >= 0)
    assert llama3_rope_freqs({"rope_theta": 1e4, "hidden_size": 8, "num_attention_heads": 1}) is None


def test_names_and_refusals():
    assert gguf_name("model.layers.3.mlp.down_proj.weight") == "blk.3.ffn_down.weight"
    with pytest.raises(ValueError):
        gguf_name("model.layers.0.self_attn.rotary_emb.inv_freq")
    with pytest.raises(UserError, match="only Llama presets"):
        ensure_gguf("qwen-7b")
