import json

import pytest

from wattbench.core.errors import UserError
from wattbench.planning.model_shapes import PRESETS, dtype_bytes, load_model_shape


@pytest.mark.parametrize("name,params", [
    ("llama-1b", 1_235_814_400),    # Llama-3.2-1B (tied embeddings)
    ("llama-8b", 8_030_261_248),    # Llama-3.1-8B
    ("qwen-7b", 7_615_616_512),     # Qwen2.5-7B (q/k/v biases)
    ("llama-70b", 70_553_706_496),  # Llama-3.1-70B
])
def test_preset_parameter_counts_match_published(name, params):
    assert load_model_shape(name).total_params == params


def test_llama_8b_shape_and_kv_bytes():
    s = PRESETS["llama-8b"]
    assert (s.hidden_size, s.num_layers, s.num_attention_heads, s.num_kv_heads, s.intermediate_size,
            s.vocab_size, s.tie_word_embeddings) == (4096, 32, 32, 8, 14336, 128256, False)
    assert s.kv_bytes_per_token("bf16") == 2 * 32 * 8 * 128 * 2 == 131072
    assert s.kv_bytes_per_token("fp8") == 65536
    assert s.weight_bytes("bf16") == 8_030_261_248 * 2
    assert s.weight_bytes("int4") == 8_030_261_248 * 0.5


def test_dtype_bytes():
    assert dtype_bytes("bf16") == 2 and dtype_bytes("FP8") == 1 and dtype_bytes("int4") == pytest.approx(0.5, rel=1e-9)
    with pytest.raises(UserError, match="unknown dtype"):
        dtype_bytes("fp6")


def test_hf_config_file_and_directory(tmp_path):
    cfg = {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
           "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256,
           "tie_word_embeddings": False}
    d = tmp_path / "Llama-3.1-8B"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    for spec in (d, d / "config.json", str(d)):
        s = load_model_shape(spec)
        assert s.total_params == 8_030_261_248
        assert s.head_dim == 128


def test_qwen_config_gets_qkv_bias(tmp_path):
    """A Qwen2 config counted by hand (not against the preset, which shares the formula)."""
    cfg = {"model_type": "qwen2", "hidden_size": 3584, "num_hidden_layers": 28, "num_attention_heads": 28,
           "num_key_value_heads": 4, "intermediate_size": 18944, "vocab_size": 152064,
           "tie_word_embeddings": False}
    f = tmp_path / "config.json"
    f.write_text(json.dumps(cfg))
    h, kv, inter, vocab, layers = 3584, 4 * 128, 18944, 152064, 28
    per_layer = (h * h + h  # q and its bias
                 + 2 * (h * kv + kv)  # k, v and their biases
                 + h * h  # o, no bias
                 + 3 * h * inter  # gate, up, down
                 + 2 * h)  # two RMSNorms
    by_hand = layers * per_layer + 2 * vocab * h + h  # + embeddings, untied lm_head, final norm
    assert by_hand == 7_615_616_512  # Qwen2.5-7B's published count
    assert load_model_shape(f).total_params == by_hand
    cfg["model_type"] = "llama"  # the same shape without the q/k/v biases
    f.write_text(json.dumps(cfg))
    assert load_model_shape(f).total_params == by_hand - (h + 2 * kv) * layers


def test_moe_refused_and_bad_inputs(tmp_path):
    f = tmp_path / "config.json"
    f.write_text(json.dumps({"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
                             "intermediate_size": 14336, "vocab_size": 32000, "num_local_experts": 8}))
    with pytest.raises(UserError, match="mixture-of-experts"):
        load_model_shape(f)
    f.write_text(json.dumps({"hidden_size": 4096}))
    with pytest.raises(UserError, match="lacks"):
        load_model_shape(f)
    with pytest.raises(UserError, match="neither a preset"):
        load_model_shape("no-such-model")
