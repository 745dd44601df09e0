"""Transformer shapes: parameter counts, bytes per parameter, KV-cache bytes per token.

A shape comes from a Hugging Face ``config.json`` (a file or a directory holding one) or from a preset
name. The presets carry the published shapes of the models that ``wattbench.engines.presets`` uses
under the same names (dummy weights, real shapes), so a roofline for ``llama-8b`` matches a run of the
``llama-8b`` engine preset.

Parameter count of a dense decoder (Llama / Qwen2 / Mistral family, gated MLP, RMSNorm):

* embedding: ``vocab × hidden``; output head: ``vocab × hidden`` unless tied to the embedding;
* per layer: q ``hidden × heads·head_dim``, k and v ``hidden × kv_heads·head_dim`` each,
  o ``heads·head_dim × hidden`` (+ q/k/v biases where the config has them), gated MLP
  ``3 × hidden × intermediate``, two norms ``2 × hidden``;
* final norm ``hidden``.

KV-cache bytes per token = ``2 (K and V) × layers × kv_heads × head_dim × bytes per KV element``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from wattbench.core.errors import UserError

# bytes per stored element; int4 is weight-only (two values per byte, group scales ignored)
DTYPE_BYTES: dict[str, float] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
}

# the precision the matmuls run at for a weight dtype (int4/int8 here are weight-only: W4A16/W8A16)
COMPUTE_DTYPE: dict[str, str] = {
    "fp32": "bf16",
    "bf16": "bf16",
    "fp16": "bf16",
    "fp8": "fp8",
    "int8": "bf16",
    "int4": "bf16",
}


def dtype_bytes(dtype: str) -> float:
    d = dtype.strip().lower()
    if d not in DTYPE_BYTES:
        raise UserError(f"unknown dtype {dtype!r}; use one of {', '.join(DTYPE_BYTES)}")
    return DTYPE_BYTES[d]


@dataclass(frozen=True)
class ModelShape:
    name: str
    hidden_size: int
    num_layers: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    tie_word_embeddings: bool = False
    qkv_bias: bool = False

    def __post_init__(self) -> None:
        for f in ("hidden_size", "num_layers", "num_attention_heads", "num_kv_heads", "head_dim",
                  "intermediate_size", "vocab_size"):
            v = getattr(self, f)
            if not isinstance(v, int) or v <= 0:
                raise UserError(f"model {self.name!r}: {f} must be a positive integer, got {v!r}")

    # ---- parameters
    @property
    def embedding_params(self) -> int:
        return self.vocab_size * self.hidden_size

    @property
    def lm_head_params(self) -> int:
        """Parameters of the output projection stored separately (0 when tied to the embedding)."""
        return 0 if self.tie_word_embeddings else self.vocab_size * self.hidden_size

    @property
    def attention_params_per_layer(self) -> int:
        q = self.num_attention_heads * self.head_dim
        kv = self.num_kv_heads * self.head_dim
        n = self.hidden_size * q + 2 * self.hidden_size * kv + q * self.hidden_size
        if self.qkv_bias:
            n += q + 2 * kv
        return n

    @property
    def mlp_params_per_layer(self) -> int:
        return 3 * self.hidden_size * self.intermediate_size

    @property
    def params_per_layer(self) -> int:
        return self.attention_params_per_layer + self.mlp_params_per_layer + 2 * self.hidden_size

    @property
    def non_embedding_params(self) -> int:
        """Transformer blocks + final norm (no embedding, no output head)."""
        return self.num_layers * self.params_per_layer + self.hidden_size

    @property
    def total_params(self) -> int:
        """Every stored parameter: blocks, final norm, embedding and (untied) output head."""
        return self.non_embedding_params + self.embedding_params + self.lm_head_params

    @property
    def matmul_params_per_token(self) -> int:
        """Parameters that take part in a matmul per generated token: blocks + output projection.

        The output projection is the vocab × hidden matrix whether it is tied or not; the input
        embedding is a row lookup (no FLOPs).
        """
        return self.non_embedding_params + self.vocab_size * self.hidden_size

    def weight_bytes(self, dtype: str) -> float:
        return self.total_params * dtype_bytes(dtype)

    def kv_bytes_per_token(self, kv_dtype: str = "bf16") -> float:
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * dtype_bytes(kv_dtype)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(total_params=self.total_params, non_embedding_params=self.non_embedding_params,
                 embedding_params=self.embedding_params, lm_head_params=self.lm_head_params)
        return d


# Published shapes (the models' own config.json files). Names match wattbench.engines.presets.
PRESETS: dict[str, ModelShape] = {
    "llama-1b": ModelShape(  # meta-llama/Llama-3.2-1B
        name="llama-1b", hidden_size=2048, num_layers=16, num_attention_heads=32, num_kv_heads=8,
        head_dim=64, intermediate_size=8192, vocab_size=128256, tie_word_embeddings=True,
    ),
    "llama-8b": ModelShape(  # meta-llama/Llama-3.1-8B
        name="llama-8b", hidden_size=4096, num_layers=32, num_attention_heads=32, num_kv_heads=8,
        head_dim=128, intermediate_size=14336, vocab_size=128256, tie_word_embeddings=False,
    ),
    "qwen-7b": ModelShape(  # Qwen/Qwen2.5-7B
        name="qwen-7b", hidden_size=3584, num_layers=28, num_attention_heads=28, num_kv_heads=4,
        head_dim=128, intermediate_size=18944, vocab_size=152064, tie_word_embeddings=False, qkv_bias=True,
    ),
    "llama-70b": ModelShape(  # meta-llama/Llama-3.1-70B
        name="llama-70b", hidden_size=8192, num_layers=80, num_attention_heads=64, num_kv_heads=8,
        head_dim=128, intermediate_size=28672, vocab_size=128256, tie_word_embeddings=False,
    ),
}


def shape_from_hf_config(cfg: dict[str, Any], name: str = "model") -> ModelShape:
    """Build a shape from a Hugging Face config dict (dense decoders; MoE is refused)."""
    if isinstance(cfg.get("text_config"), dict):  # multimodal wrappers keep the LM under text_config
        cfg = {**cfg["text_config"], "model_type": cfg["text_config"].get("model_type", cfg.get("model_type"))}
    for moe_key in ("num_local_experts", "num_experts", "n_routed_experts"):
        if (cfg.get(moe_key) or 0) > 1:
            raise UserError(
                f"{name}: mixture-of-experts configs ({moe_key}={cfg[moe_key]}) are not modelled by the roofline; "
                "give a dense model config"
            )
    missing = [k for k in ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                           "vocab_size") if k not in cfg]
    if missing:
        raise UserError(f"{name}: config.json lacks {', '.join(missing)}; is it a decoder LLM config?")
    heads = int(cfg["num_attention_heads"])
    hidden = int(cfg["hidden_size"])
    head_dim = cfg.get("head_dim") or hidden // heads
    model_type = str(cfg.get("model_type", ""))
    qkv_bias = bool(cfg.get("attention_bias", False)) or model_type in ("qwen2", "qwen2_vl", "qwen2_5_vl")
    return ModelShape(
        name=name,
        hidden_size=hidden,
        num_layers=int(cfg["num_hidden_layers"]),
        num_attention_heads=heads,
        num_kv_heads=int(cfg.get("num_key_value_heads") or heads),
        head_dim=int(head_dim),
        intermediate_size=int(cfg["intermediate_size"]),
        vocab_size=int(cfg["vocab_size"]),
        # Llama/Qwen2/Mistral config classes default this to False when the key is absent
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        qkv_bias=qkv_bias,
    )


def load_model_shape(spec: str | Path | ModelShape) -> ModelShape:
    """A preset name (``llama-8b``), a ``config.json`` path, or a directory containing one."""
    if isinstance(spec, ModelShape):
        return spec
    text = str(spec)
    if text.lower() in PRESETS:
        return PRESETS[text.lower()]
    p = Path(text).expanduser()
    if p.is_dir():
        p = p / "config.json"
    if p.is_file():
        try:
            cfg = json.loads(p.read_text())
        except json.JSONDecodeError as e:
            raise UserError(f"{p} is not valid JSON ({e.msg} at line {e.lineno})") from None
        if not isinstance(cfg, dict):
            raise UserError(f"{p} is not a model config object")
        return shape_from_hf_config(cfg, name=p.parent.name or p.stem)
    raise UserError(
        f"model {text!r} is neither a preset ({', '.join(PRESETS)}) nor a config.json file or directory"
    )
