"""Model presets built locally: real architecture shapes, random weights, a locally trained tokenizer.

Nothing is downloaded. A preset is a Hugging Face model directory (``config.json``,
``generation_config.json``, ``model*.safetensors``, ``tokenizer.json``, ``tokenizer_config.json``,
``special_tokens_map.json``) built once into the user cache directory and reused.

* The tokenizer is a byte-level BPE trained with ``tokenizers`` on seeded generated text, padded
  with unreachable (merge-less) vocabulary entries to exactly the model's ``vocab_size``, so every
  id the model can emit decodes. ``tokenizer_class`` is ``PreTrainedTokenizerFast`` and the chat
  template is written into ``tokenizer_config.json`` (vLLM and transformers both read it there).
* ``generation_config.json`` sets ``eos_token_id: -1``: a random-weight model may produce its end
  token at any step, and ``transformers serve`` rejects ``ignore_eos``; its continuous-batching
  engine treats a negative end id as "no end token", so every request runs to ``max_tokens``.
  ``config.json`` keeps the real end id (engines that accept ``ignore_eos`` are told to ignore it).
* Weights are filled from one seeded pool of normal(0, 0.02) values copied at rotating offsets:
  cheap (memory bandwidth, not RNG), deterministic, and random enough for a dummy model. Large
  presets can be built without weights (``weights=False``) for engines that generate them at load
  time (vLLM/SGLang ``--load-format dummy``).
"""

from __future__ import annotations

import functools
import json
import math
import os
import random
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from platformdirs import user_cache_dir

from wattbench.core.errors import UserError

if TYPE_CHECKING:
    from tokenizers import Tokenizer

PRESET_VERSION = 1
TOKENIZER_SEED = 1234
WEIGHT_SEED = 4321
BPE_TRAIN_VOCAB_MAX = 16000  # merges learned from text; the rest of the vocab is padding
_MAX_SHARD_BYTES = 4 * 1024**3


@dataclass(frozen=True)
class Preset:
    name: str
    family: str  # llama | qwen2
    shape_of: str  # which real model's shape this copies
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    vocab_size: int
    max_position_embeddings: int
    rope_theta: float
    tie_word_embeddings: bool
    default_dtype: str = "bfloat16"
    device_class: str = "gpu"  # cpu | gpu: where it is the sensible default
    extra_config: dict[str, Any] = field(default_factory=dict)

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def num_params(self) -> int:
        """Parameter count computed from the shape (matches the model's own count)."""
        h, i, L = self.hidden_size, self.intermediate_size, self.num_hidden_layers
        kv = self.num_key_value_heads * self.head_dim
        attn = h * h + 2 * h * kv + h * h  # q, k, v, o
        if self.extra_config.get("attention_bias") or self.family == "qwen2":
            attn += h + 2 * kv  # q/k/v biases
        mlp = 3 * h * i
        norms = 2 * h
        embed = self.vocab_size * h
        head = 0 if self.tie_word_embeddings else self.vocab_size * h
        return L * (attn + mlp + norms) + embed + head + h

    def weight_bytes(self, dtype: str | None = None) -> int:
        return self.num_params * _DTYPE_BYTES[dtype or self.default_dtype]

    def kv_bytes_per_token(self, dtype: str | None = None) -> int:
        """KV-cache bytes one token occupies (all layers, K and V)."""
        kv = self.num_key_value_heads * self.head_dim
        return 2 * self.num_hidden_layers * kv * _DTYPE_BYTES[dtype or self.default_dtype]


_DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}

_LLAMA3_ROPE_SCALING = {
    "rope_type": "llama3",
    "factor": 32.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}

PRESETS: dict[str, Preset] = {
    "tiny": Preset(
        name="tiny", family="llama", shape_of="a tiny Llama (CPU default)",
        hidden_size=256, intermediate_size=1024, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=4, vocab_size=8000, max_position_embeddings=4096, rope_theta=10000.0,
        tie_word_embeddings=False, default_dtype="bfloat16", device_class="cpu",
    ),
    "llama-1b": Preset(
        name="llama-1b", family="llama", shape_of="meta-llama/Llama-3.2-1B",
        hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
        num_key_value_heads=8, vocab_size=128256, max_position_embeddings=131072, rope_theta=500000.0,
        tie_word_embeddings=True, extra_config={"rope_scaling": _LLAMA3_ROPE_SCALING, "head_dim": 64},
    ),
    "llama-8b": Preset(
        name="llama-8b", family="llama", shape_of="meta-llama/Llama-3.1-8B",
        hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=8, vocab_size=128256, max_position_embeddings=131072, rope_theta=500000.0,
        tie_word_embeddings=False,
        extra_config={"rope_scaling": {**_LLAMA3_ROPE_SCALING, "factor": 8.0}, "head_dim": 128},
    ),
    "qwen-7b": Preset(
        name="qwen-7b", family="qwen2", shape_of="Qwen/Qwen2.5-7B-Instruct",
        hidden_size=3584, intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28,
        num_key_value_heads=4, vocab_size=152064, max_position_embeddings=32768, rope_theta=1000000.0,
        tie_word_embeddings=False,
        extra_config={"sliding_window": 131072, "use_sliding_window": False, "max_window_layers": 28},
    ),
}

DEFAULT_CPU_PRESET = "tiny"
DEFAULT_GPU_PRESET = "llama-1b"

# ------------------------------------------------------------------ tokenizer

_SPECIAL = {
    "llama": ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"],
    "qwen2": ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
}

_CHAT_TEMPLATES = {
    "llama": (
        "{{ bos_token }}{% for message in messages %}"
        "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' }}"
        "{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
    ),
    "qwen2": (
        "{% for message in messages %}"
        "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
        "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
    ),
}

_COMMON_WORDS = (
    "the of and to in a is that for it as was with be by on not he this are or his from at which but have an "
    "they you were her she there been one all we their has would when if so no will more can out up about time "
    "power energy token model server request latency watt joule second batch queue memory cache layer"
).split()
_ONSETS = ["", "b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z",
           "br", "ch", "cl", "dr", "fl", "gr", "pl", "pr", "sh", "st", "th", "tr", "wh"]
_VOWELS = ["a", "e", "i", "o", "u", "ai", "ea", "ee", "ie", "oo", "ou"]
_CODAS = ["", "", "n", "r", "s", "t", "l", "m", "nd", "ng", "rt", "st", "ck"]


@functools.lru_cache(maxsize=2)
def training_text(num_words: int = 150_000, seed: int = TOKENIZER_SEED) -> tuple[str, ...]:
    """Seeded English-like text: common words and pseudo-words with Zipf-like frequencies."""
    rng = random.Random(seed)
    lexicon = list(_COMMON_WORDS)
    seen = set(lexicon)
    while len(lexicon) < 30000:
        w = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(rng.randint(1, 4)))
        if w and w not in seen:
            seen.add(w)
            lexicon.append(w)
    weights = [1.0 / (r + 1) ** 1.07 for r in range(len(lexicon))]
    words = rng.choices(lexicon, weights=weights, k=num_words)
    lines, i = [], 0
    while i < len(words):
        n = rng.randint(6, 24)
        sent = words[i : i + n]
        i += n
        sent[0] = sent[0].capitalize()
        if rng.random() < 0.2:
            sent.insert(rng.randrange(len(sent)), str(rng.randint(0, 99999)))
        lines.append(" ".join(sent) + rng.choice([".", ".", ".", "?", "!", ","]))
    return tuple(lines)


def build_tokenizer(family: str, vocab_size: int) -> Tokenizer:
    """A byte-level BPE ``tokenizers.Tokenizer`` with exactly ``vocab_size`` entries (deterministic;
    trained once per process for each family and size)."""
    from tokenizers import Tokenizer

    return Tokenizer.from_str(_tokenizer_json(family, vocab_size))


@functools.lru_cache(maxsize=4)
def _tokenizer_json(family: str, vocab_size: int) -> str:
    return train_tokenizer(family, vocab_size).to_str()


def train_tokenizer(family: str, vocab_size: int) -> Tokenizer:
    """Train the tokenizer from scratch (``build_tokenizer`` caches this)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    specials = _SPECIAL[family]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    train_size = min(vocab_size, BPE_TRAIN_VOCAB_MAX)
    trainer = trainers.BpeTrainer(
        vocab_size=train_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(training_text(), trainer=trainer)
    size = tok.get_vocab_size(with_added_tokens=True)
    if size > vocab_size:
        raise RuntimeError(f"tokenizer trained to {size} > {vocab_size}")
    if size < vocab_size:
        tok = _pad_vocab(tok, vocab_size)
    if family == "llama":
        bos = specials[0]
        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, tok.token_to_id(bos))]
        )
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def _pad_vocab(tok: Tokenizer, vocab_size: int) -> Tokenizer:
    """Append merge-less vocab entries (joins of two existing tokens) up to ``vocab_size``.

    Encoding never produces them (no merge leads there), decoding turns them into text like any
    other token: a random model that emits one still streams text, and the vocab matches the model.
    """
    from tokenizers import Tokenizer

    data = json.loads(tok.to_str())
    vocab: dict[str, int] = data["model"]["vocab"]
    base = sorted(vocab, key=vocab.__getitem__)
    rng = random.Random(TOKENIZER_SEED + 1)
    next_id = max(max(vocab.values()), max((t["id"] for t in data.get("added_tokens", [])), default=-1)) + 1
    specials = {t["content"] for t in data.get("added_tokens", [])}
    base = [t for t in base if t not in specials]
    while len(vocab) + sum(1 for t in data.get("added_tokens", []) if t["content"] not in vocab) < vocab_size:
        cand = rng.choice(base) + rng.choice(base)
        if cand in vocab:
            continue
        vocab[cand] = next_id
        next_id += 1
    return Tokenizer.from_str(json.dumps(data))


def _tokenizer_files(preset: Preset, tok: Tokenizer, out: Path) -> None:
    specials = _SPECIAL[preset.family]
    tok.save(str(out / "tokenizer.json"))
    if preset.family == "llama":
        bos, eos, pad = specials[0], specials[4], specials[1]
        add_bos = True
    else:
        bos, eos, pad = None, specials[2], specials[0]
        add_bos = False
    added = {
        str(tok.token_to_id(s)): {
            "content": s, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False, "special": True,
        }
        for s in specials
    }
    cfg = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": bos,
        "eos_token": eos,
        "pad_token": pad,
        "add_bos_token": add_bos,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": preset.max_position_embeddings,
        "chat_template": _CHAT_TEMPLATES[preset.family],
        "added_tokens_decoder": added,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(cfg, indent=2))
    smap = {"eos_token": eos, "pad_token": pad}
    if bos:
        smap["bos_token"] = bos
    (out / "special_tokens_map.json").write_text(json.dumps(smap, indent=2))


# ------------------------------------------------------------------ config


def model_config(preset: Preset, tok: Tokenizer, dtype: str) -> dict[str, Any]:
    specials = _SPECIAL[preset.family]
    common = {
        "hidden_size": preset.hidden_size,
        "intermediate_size": preset.intermediate_size,
        "num_hidden_layers": preset.num_hidden_layers,
        "num_attention_heads": preset.num_attention_heads,
        "num_key_value_heads": preset.num_key_value_heads,
        "vocab_size": preset.vocab_size,
        "max_position_embeddings": preset.max_position_embeddings,
        "rope_theta": preset.rope_theta,
        "tie_word_embeddings": preset.tie_word_embeddings,
        "hidden_act": "silu",
        "initializer_range": 0.02,
        "rms_norm_eps": 1e-5 if preset.family == "llama" else 1e-6,
        "use_cache": True,
        "torch_dtype": dtype,
        "dtype": dtype,
        "wattbench_preset": {"name": preset.name, "version": PRESET_VERSION, "shape_of": preset.shape_of},
    }
    if preset.family == "llama":
        common.update(
            architectures=["LlamaForCausalLM"], model_type="llama", attention_bias=False, mlp_bias=False,
            bos_token_id=tok.token_to_id(specials[0]), eos_token_id=tok.token_to_id(specials[4]),
        )
    else:
        common.update(
            architectures=["Qwen2ForCausalLM"], model_type="qwen2", attention_dropout=0.0,
            bos_token_id=tok.token_to_id(specials[0]), eos_token_id=tok.token_to_id(specials[2]),
        )
    common.update(preset.extra_config)
    return common


# ------------------------------------------------------------------ weights


def tensor_shapes(preset: Preset) -> list[tuple[str, tuple[int, ...]]]:
    """Hugging Face parameter names and shapes of the preset (Llama / Qwen2 layout)."""
    h, i, hd = preset.hidden_size, preset.intermediate_size, preset.head_dim
    q, kv = preset.num_attention_heads * hd, preset.num_key_value_heads * hd
    bias = preset.family == "qwen2"
    out: list[tuple[str, tuple[int, ...]]] = [("model.embed_tokens.weight", (preset.vocab_size, h))]
    for L in range(preset.num_hidden_layers):
        p = f"model.layers.{L}."
        out += [(p + "self_attn.q_proj.weight", (q, h)), (p + "self_attn.k_proj.weight", (kv, h)),
                (p + "self_attn.v_proj.weight", (kv, h)), (p + "self_attn.o_proj.weight", (h, q))]
        if bias:
            out += [(p + "self_attn.q_proj.bias", (q,)), (p + "self_attn.k_proj.bias", (kv,)),
                    (p + "self_attn.v_proj.bias", (kv,))]
        out += [(p + "mlp.gate_proj.weight", (i, h)), (p + "mlp.up_proj.weight", (i, h)),
                (p + "mlp.down_proj.weight", (h, i)),
                (p + "input_layernorm.weight", (h,)), (p + "post_attention_layernorm.weight", (h,))]
    out.append(("model.norm.weight", (h,)))
    if not preset.tie_word_embeddings:
        out.append(("lm_head.weight", (preset.vocab_size, h)))
    return out


def _write_weights(preset: Preset, out: Path, dtype: str, device: str,
                   max_shard_bytes: int = _MAX_SHARD_BYTES) -> None:
    """Write random weights as safetensors shards, filled from a seeded pool (see module doc)."""
    import torch
    from safetensors.torch import save_file

    tdtype = getattr(torch, dtype)
    shapes = tensor_shapes(preset)
    gen = torch.Generator(device="cpu").manual_seed(WEIGHT_SEED)
    pool_n = 1 << 22
    pool = (torch.randn(pool_n, generator=gen, dtype=torch.float32) * 0.02).to(device=device, dtype=tdtype)
    elem = torch.empty((), dtype=tdtype).element_size()
    plan = plan_shards(shapes, elem, max_shard_bytes)
    offset = 0
    weight_map: dict[str, str] = {}
    total = 0
    for k, names in enumerate(plan, 1):  # one shard in memory at a time
        shard: dict[str, Any] = {}
        for name in names:
            shape = dict(shapes)[name]
            numel = math.prod(shape)
            if name.endswith("norm.weight"):
                t = torch.ones(shape, dtype=tdtype, device=device)
            elif name.endswith(".bias"):
                t = torch.zeros(shape, dtype=tdtype, device=device)
            else:
                flat = torch.empty(numel, dtype=tdtype, device=device)
                pos = 0
                while pos < numel:
                    start = offset % pool_n
                    n = min(pool_n - start, numel - pos)
                    flat[pos : pos + n] = pool[start : start + n]
                    pos += n
                    offset += n + 7919  # rotate so tensors don't repeat each other's pattern
                t = flat.view(shape)
            shard[name] = t.to("cpu").contiguous()
            total += numel * elem
        fname = "model.safetensors" if len(plan) == 1 else f"model-{k:05d}-of-{len(plan):05d}.safetensors"
        save_file(shard, str(out / fname), metadata={"format": "pt"})
        weight_map.update({n: fname for n in names})
        del shard
    if len(plan) > 1:
        (out / "model.safetensors.index.json").write_text(
            json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2)
        )


def plan_shards(shapes: list[tuple[str, tuple[int, ...]]], elem_bytes: int,
                max_bytes: int = _MAX_SHARD_BYTES) -> list[list[str]]:
    """Split tensors, in order, into shards of at most ``max_bytes`` (a bigger tensor gets its own)."""
    plan: list[list[str]] = []
    cur: list[str] = []
    cur_bytes = 0
    for name, shape in shapes:
        nbytes = math.prod(shape) * elem_bytes
        if cur and cur_bytes + nbytes > max_bytes:
            plan.append(cur)
            cur, cur_bytes = [], 0
        cur.append(name)
        cur_bytes += nbytes
    if cur:
        plan.append(cur)
    return plan


# ------------------------------------------------------------------ build / cache


def default_cache_dir() -> Path:
    env = os.environ.get("WATTBENCH_CACHE_DIR")
    if env:
        return Path(env)

    return Path(user_cache_dir("wattbench"))


def preset_dir_name(name: str, dtype: str | None = None, weights: bool = True) -> str:
    preset = get_preset(name)
    dtype = dtype or preset.default_dtype
    suffix = "" if dtype == preset.default_dtype else f"-{dtype}"
    if not weights:
        suffix += "-noweights"
    return f"{name}-v{PRESET_VERSION}{suffix}"


def get_preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise UserError(
            f"unknown model preset {name!r}: choose one of {', '.join(PRESETS)} or pass a local model directory"
        ) from None


def is_complete(path: Path) -> bool:
    return (path / ".wattbench-complete").is_file()


def ensure_preset(
    name: str,
    cache_dir: Path | str | None = None,
    dtype: str | None = None,
    weights: bool = True,
    device: str = "cpu",
    max_shard_bytes: int = _MAX_SHARD_BYTES,
) -> Path:
    """Return the directory of preset ``name``, building it once (atomically) if needed.

    ``weights=False`` builds config + tokenizer only (for ``--load-format dummy`` engines).
    ``device`` is where the random weights are filled before being written (``cuda`` is faster
    for large presets). ``max_shard_bytes``: the largest weight file (tests use a small one to
    get several). Concurrent builders race safely: the first rename wins.
    """
    preset = get_preset(name)
    dtype = dtype or preset.default_dtype
    if dtype not in _DTYPE_BYTES:
        raise UserError(f"unsupported dtype {dtype!r} for a preset: use one of {', '.join(_DTYPE_BYTES)}")
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir() / "models"
    final = root / preset_dir_name(name, dtype, weights)
    if is_complete(final):
        return final
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=root))
    try:
        build_preset(preset, tmp, dtype=dtype, weights=weights, device=device, max_shard_bytes=max_shard_bytes)
        (tmp / ".wattbench-complete").write_text(json.dumps({"preset": name, "version": PRESET_VERSION}))
        try:
            os.rename(tmp, final)
        except OSError:
            if is_complete(final):  # another builder won the race
                shutil.rmtree(tmp, ignore_errors=True)
            else:
                shutil.rmtree(final, ignore_errors=True)  # a stale, incomplete dir
                os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def build_preset(preset: Preset, out: Path, dtype: str, weights: bool = True, device: str = "cpu",
                 max_shard_bytes: int = _MAX_SHARD_BYTES) -> None:
    tok = build_tokenizer(preset.family, preset.vocab_size)
    _tokenizer_files(preset, tok, out)
    cfg = model_config(preset, tok, dtype)
    (out / "config.json").write_text(json.dumps(cfg, indent=2))
    gen = {
        "_from_model_config": False,
        "bos_token_id": cfg["bos_token_id"],
        # No reachable end token: see the module doc. Engines that accept ignore_eos get it as well.
        "eos_token_id": -1,
        "do_sample": False,
    }
    (out / "generation_config.json").write_text(json.dumps(gen, indent=2))
    if weights:
        _write_weights(preset, out, dtype, device, max_shard_bytes)


def resolve_model(model: str | None, device: str, weights: bool = True, cache_dir: Path | None = None) -> tuple[Path, str | None]:
    """Map ``--model`` (a preset name, a local directory, or None) to a local directory.

    Returns ``(path, preset_name_or_None)``.
    """
    if model is None:
        model = DEFAULT_GPU_PRESET if device.startswith("cuda") else DEFAULT_CPU_PRESET
    if model in PRESETS:
        fill = "cuda" if device.startswith("cuda") else "cpu"
        return ensure_preset(model, cache_dir=cache_dir, weights=weights, device=fill), model
    p = Path(model).expanduser()
    if p.is_dir():
        if not (p / "config.json").is_file() and not any(p.glob("*.gguf")):
            raise UserError(f"model directory {p} has no config.json: pass a Hugging Face model directory or a preset")
        return p.resolve(), None
    if p.is_file() and p.suffix == ".gguf":
        return p.resolve(), None
    raise UserError(
        f"model {model!r} is neither a preset ({', '.join(PRESETS)}) nor an existing local directory/GGUF file"
    )


def default_device() -> str:
    """``cuda`` when torch sees a GPU, else ``cpu`` (torch absent: ``cpu``)."""
    try:
        import torch
    except ImportError:
        return "cpu"
    return "cuda" if torch.cuda.is_available() else "cpu"
