"""A Llama preset (``engines/presets.py``) as a GGUF file, so llama.cpp serves the same model.

What is written (the layout llama.cpp's ``convert_hf_to_gguf.py`` writes for ``LlamaForCausalLM``):

* architecture ``llama``: context/embedding/feed-forward lengths, block and head counts,
  ``rope.dimension_count`` = head_dim, ``rope.freq_base``, the RMS-norm epsilon, ``file_type`` F16;
* the tokenizer as ``tokenizer.ggml.model = gpt2`` (byte-level BPE) with pre-tokenizer ``gpt-2``
  (the presets' ``ByteLevel`` pre-tokenizer uses GPT-2's split regex): every token by id, its type
  (the specials ``control``), the merges, BOS/EOS ids, ``add_bos_token`` and the chat template,
  all read back from the preset's own ``tokenizer.json`` / ``tokenizer_config.json``;
* tensors renamed to GGUF's (``token_embd``, ``blk.N.attn_q`` …, ``output_norm``, ``output``;
  tied embeddings write no ``output``), Q and K rows permuted from Hugging Face's rotary layout to
  GGML's as the converter does, matrices in F16 and norms in F32; Llama-3 ``rope_scaling`` becomes
  the ``rope_freqs`` tensor the converter computes.

The weights are the preset's (seeded random, cast bf16 -> f16: exact for values this small), so
the GGUF is the preset in another container, not a different model. ``ensure_gguf`` caches the file
beside the preset directory (``<preset dir>.f16.gguf``), written atomically.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from wattbench.engines.presets import PRESET_VERSION, ensure_preset, get_preset
from wattbench.core.errors import UserError

_LAYER_NAMES = {
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
    "input_layernorm.weight": "attn_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
}


def gguf_name(hf_name: str) -> str:
    """Hugging Face Llama parameter name -> GGUF tensor name."""
    if hf_name == "model.embed_tokens.weight":
        return "token_embd.weight"
    if hf_name == "model.norm.weight":
        return "output_norm.weight"
    if hf_name == "lm_head.weight":
        return "output.weight"
    parts = hf_name.split(".", 3)
    if len(parts) == 4 and parts[:2] == ["model", "layers"] and parts[3] in _LAYER_NAMES:
        return f"blk.{int(parts[2])}.{_LAYER_NAMES[parts[3]]}"
    raise ValueError(f"no GGUF name for tensor {hf_name!r}")


def permute_rotary(w: npt.NDArray[np.float32], n_head: int) -> npt.NDArray[np.float32]:
    """Q/K rows from Hugging Face's half-split rotary layout to GGML's interleaved one
    (``convert_hf_to_gguf.LlamaModel.permute``)."""
    out: npt.NDArray[np.float32] = (
        w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape))
    return out


def llama3_rope_freqs(cfg: dict[str, Any]) -> npt.NDArray[np.float32] | None:
    """The ``rope_freqs`` factors llama.cpp's converter derives from Llama-3 ``rope_scaling``."""
    rs = cfg.get("rope_scaling") or {}
    if rs.get("rope_type") != "llama3":
        return None
    base = cfg["rope_theta"]
    dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    freqs = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float32) / dim))
    factor, low, high = rs.get("factor", 8.0), rs.get("low_freq_factor", 1.0), rs.get("high_freq_factor", 4.0)
    old = rs.get("original_max_position_embeddings", 8192)
    low_wl, high_wl = old / low, old / high
    out = []
    for f in freqs:
        wl = 2 * math.pi / f
        if wl < high_wl:
            out.append(1.0)
        elif wl > low_wl:
            out.append(factor)
        else:
            smooth = (old / wl - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def _vocab(model_dir: Path) -> tuple[list[str], list[int], list[str], dict[str, Any]]:
    import gguf

    tj = json.loads((model_dir / "tokenizer.json").read_text())
    tc = json.loads((model_dir / "tokenizer_config.json").read_text())
    vocab: dict[str, int] = dict(tj["model"]["vocab"])
    special = {t["content"] for t in tj.get("added_tokens", []) if t.get("special")}
    for t in tj.get("added_tokens", []):
        vocab.setdefault(t["content"], t["id"])
    by_id = sorted(vocab.items(), key=lambda kv: kv[1])
    if [i for _, i in by_id] != list(range(len(by_id))):
        raise ValueError("the tokenizer's ids are not contiguous")
    tokens = [t for t, _ in by_id]
    types = [int(gguf.TokenType.CONTROL if t in special else gguf.TokenType.NORMAL) for t in tokens]
    merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"].get("merges", [])]
    return tokens, types, merges, tc


def write_gguf(model_dir: Path, out: Path) -> None:
    """Write the Llama model in ``model_dir`` (a preset directory) as F16 GGUF at ``out``."""
    import gguf
    import torch
    from safetensors import safe_open

    cfg = json.loads((model_dir / "config.json").read_text())
    if cfg.get("model_type") != "llama":
        raise UserError(f"GGUF export supports Llama presets only, not {cfg.get('model_type')!r}")
    n_head, n_kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // n_head
    tokens, types, merges, tc = _vocab(model_dir)
    if len(tokens) != cfg["vocab_size"]:
        raise ValueError(f"tokenizer has {len(tokens)} tokens, the model {cfg['vocab_size']}")
    w = gguf.GGUFWriter(str(out), "llama")
    preset = cfg.get("wattbench_preset", {})
    w.add_name(f"wattbench {preset.get('name', model_dir.name)} v{preset.get('version', PRESET_VERSION)}")
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_rope_dimension_count(head_dim)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_kv)
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_rope_freq_base(cfg["rope_theta"])
    w.add_vocab_size(cfg["vocab_size"])
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    ids = {t: i for i, t in enumerate(tokens)}
    if tc.get("bos_token") in ids:
        w.add_bos_token_id(ids[tc["bos_token"]])
    if tc.get("eos_token") in ids:
        w.add_eos_token_id(ids[tc["eos_token"]])
    if tc.get("pad_token") in ids:
        w.add_pad_token_id(ids[tc["pad_token"]])
    w.add_add_bos_token(bool(tc.get("add_bos_token")))
    w.add_add_eos_token(False)
    if tc.get("chat_template"):
        w.add_chat_template(tc["chat_template"])
    freqs = llama3_rope_freqs(cfg)
    if freqs is not None:
        w.add_tensor("rope_freqs.weight", freqs)
    shards = sorted(model_dir.glob("model*.safetensors"))
    if not shards:
        raise UserError(f"{model_dir} has no safetensors weights (a preset built without weights?)")
    for shard in shards:
        with safe_open(str(shard), framework="pt") as f:
            for name in f.keys():  # noqa: SIM118 - safe_open has no __iter__
                arr = f.get_tensor(name).to(torch.float32).numpy()
                if name.endswith("q_proj.weight"):
                    arr = permute_rotary(arr, n_head)
                elif name.endswith("k_proj.weight"):
                    arr = permute_rotary(arr, n_kv)
                arr = arr.astype(np.float32 if arr.ndim == 1 else np.float16)
                w.add_tensor(gguf_name(name), arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def ensure_gguf(name: str, cache_dir: Path | str | None = None) -> Path:
    """The GGUF of preset ``name`` (built once, atomically, beside the preset directory)."""
    preset = get_preset(name)
    if preset.family != "llama":
        raise UserError(f"preset {name!r} is a {preset.family} model: only Llama presets are exported to GGUF")
    src = ensure_preset(name, cache_dir=cache_dir)
    final = src.parent / f"{src.name}.f16.gguf"
    if final.is_file():
        return final
    fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.", dir=src.parent)
    os.close(fd)
    try:
        write_gguf(src, Path(tmp))
        os.replace(tmp, final)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return final
