"""Presets: the tiny model builds, loads with transformers, its tokenizer round-trips and matches the
model's vocab, the chat template renders, and the generation config has no reachable end token."""

from __future__ import annotations

import json

import pytest

from wattbench.engines import presets
from wattbench.core.errors import UserError


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return presets.ensure_preset("tiny", cache_dir=tmp_path_factory.mktemp("models"))


def test_tiny_builds_once_and_is_reused(tiny_dir):
    assert tiny_dir.name == f"tiny-v{presets.PRESET_VERSION}"
    assert (tiny_dir / ".wattbench-complete").is_file()
    mtime = (tiny_dir / "model.safetensors").stat().st_mtime_ns
    again = presets.ensure_preset("tiny", cache_dir=tiny_dir.parent)
    assert again == tiny_dir
    assert (tiny_dir / "model.safetensors").stat().st_mtime_ns == mtime
    # no temp build dirs left behind
    assert [p.name for p in tiny_dir.parent.iterdir()] == [tiny_dir.name]


@pytest.mark.slow
def test_tiny_loads_with_transformers_and_counts_params(tiny_dir):
    import torch
    from transformers import AutoModelForCausalLM

    model, info = AutoModelForCausalLM.from_pretrained(tiny_dir, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert model.num_parameters() == presets.PRESETS["tiny"].num_params
    assert model.config.vocab_size == 8000
    assert model.dtype == torch.bfloat16
    out = model(torch.tensor([[1, 2, 3]]))
    assert out.logits.shape == (1, 3, 8000)
    assert torch.isfinite(out.logits.float()).all()


def test_tokenizer_round_trips_and_matches_vocab(tiny_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_dir)
    assert len(tok) == 8000
    text = "Power draw of 350 W over 12.5 s: energy_j = 4375, naïve café ✓"
    ids = tok(text)["input_ids"]
    assert ids[0] == tok.convert_tokens_to_ids("<|begin_of_text|>")
    assert tok.decode(ids, skip_special_tokens=True) == text
    # every id the model can emit decodes (padding entries included)
    assert isinstance(tok.decode([7999, 4000, 123]), str) and tok.decode([7999])
    cfg = json.loads((tiny_dir / "tokenizer_config.json").read_text())
    assert cfg["tokenizer_class"] == "PreTrainedTokenizerFast"


def test_chat_template_renders(tiny_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_dir)
    s = tok.apply_chat_template([{"role": "user", "content": "hello"}], tokenize=False, add_generation_prompt=True)
    assert s == ("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhello<|eot_id|>"
                 "<|start_header_id|>assistant<|end_header_id|>\n\n")


def test_generation_config_has_no_reachable_end_token(tiny_dir):
    gen = json.loads((tiny_dir / "generation_config.json").read_text())
    cfg = json.loads((tiny_dir / "config.json").read_text())
    assert gen["eos_token_id"] == -1
    assert 0 <= cfg["eos_token_id"] < cfg["vocab_size"]


def test_tokenizer_is_deterministic_and_padded_exactly(tiny_dir):
    from tokenizers import Tokenizer

    fresh = presets.train_tokenizer("llama", 8000)  # a second training, not the cached one
    assert fresh.to_str() == Tokenizer.from_file(str(tiny_dir / "tokenizer.json")).to_str()
    q = presets.build_tokenizer("qwen2", 12000)  # more than BPE learns from the text: padded
    assert q.get_vocab_size(with_added_tokens=True) == 12000
    assert q.token_to_id("<|im_end|>") is not None
    assert q.decode([11999]) and q.decode([11999]) != q.decode([11998])


@pytest.mark.parametrize(
    "name,params",
    # published parameter counts of the models whose shapes the presets copy
    [("llama-1b", 1_235_814_400), ("llama-8b", 8_030_261_248), ("qwen-7b", 7_615_616_512)],
)
def test_gpu_preset_shapes_match_real_models(name, params):
    assert presets.PRESETS[name].num_params == params


def test_gpu_preset_param_count_matches_transformers_meta_model():
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    p = presets.PRESETS["qwen-7b"]

    class _Ids:  # model_config only asks the tokenizer for the bos/eos ids
        def token_to_id(self, token):
            return 1

    tok = _Ids()
    cfg = AutoConfig.for_model(**{k: v for k, v in presets.model_config(p, tok, "bfloat16").items()
                                  if k not in ("architectures", "wattbench_preset")})
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(cfg)
    assert model.num_parameters() == p.num_params
    # the names and shapes the weight writer uses are the model's own
    assert dict(presets.tensor_shapes(p)) == {n: tuple(t.shape) for n, t in model.state_dict().items()}


def test_no_weights_dir_and_unknown_preset(tmp_path):
    d = presets.ensure_preset("tiny", cache_dir=tmp_path, weights=False)
    assert d.name.endswith("-noweights")
    assert not list(d.glob("*.safetensors"))
    assert (d / "tokenizer.json").is_file() and (d / "config.json").is_file()
    with pytest.raises(UserError, match="unknown model preset"):
        presets.ensure_preset("llama-70b", cache_dir=tmp_path)


def test_resolve_model_paths(tmp_path):
    with pytest.raises(UserError, match="neither a preset"):
        presets.resolve_model(str(tmp_path / "missing"), "cpu")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="no config.json"):
        presets.resolve_model(str(tmp_path / "empty"), "cpu")
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{}")
    assert presets.resolve_model(str(tmp_path / "m"), "cpu") == ((tmp_path / "m").resolve(), None)


def test_plan_shards_bounds_each_shard():
    shapes = presets.tensor_shapes(presets.PRESETS["llama-8b"])
    plan = presets.plan_shards(shapes, 2)
    assert [n for shard in plan for n in shard] == [n for n, _ in shapes]  # all, in order
    sizes = [sum(2 * presets.math.prod(dict(shapes)[n]) for n in shard) for shard in plan]
    assert max(sizes) <= presets._MAX_SHARD_BYTES and len(plan) == 4
    assert sum(sizes) == presets.PRESETS["llama-8b"].weight_bytes()


def test_sharded_write_is_loadable(tmp_path):
    from safetensors import safe_open

    d = presets.ensure_preset("tiny", cache_dir=tmp_path, max_shard_bytes=8 * 1024**2)  # several shards for tiny
    index = json.loads((d / "model.safetensors.index.json").read_text())
    files = sorted(set(index["weight_map"].values()))
    assert len(files) >= 2 and not (d / "model.safetensors").exists()
    names = set()
    for f in files:
        with safe_open(str(d / f), "pt") as sf:
            names |= set(sf.keys())
    assert names == {n for n, _ in presets.tensor_shapes(presets.PRESETS["tiny"])}
    assert index["metadata"]["total_size"] == presets.PRESETS["tiny"].weight_bytes()
