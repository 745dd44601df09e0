"""Per-engine command lines and effective-config parsing (no process started)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wattbench.engines.registry import get_engine
from wattbench.engines.llamacpp import LlamaCpp, parse_version
from wattbench.server.engine_rules import select_props
from wattbench.engines.sglang import SGLang
from wattbench.server.engine_rules import select_server_info
from wattbench.engines.transformers_serve import CPU_BOUNDED_ARGS, CUDA_TUNED_ARGS, TransformersServe
from wattbench.engines.vllm import VLLM, default_scheduler_limits, parse_cache_config_info, parse_engine_config_line
from wattbench.core.errors import EngineError, UserError

FAKES = Path(__file__).resolve().parents[2] / "fakes"


@pytest.fixture
def model_dir(tmp_path):
    d = tmp_path / "m"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"model_type": "llama", "torch_dtype": "float16",
                                               "max_position_embeddings": 4096}))
    (d / "generation_config.json").write_text(json.dumps({"eos_token_id": 2}))
    return d


def test_vllm_config_line_from_a_real_log():
    version, cfg = parse_engine_config_line((FAKES / "engines_vllm_config_line.txt").read_text())
    assert version == "0.32.0"
    assert cfg["dtype"] == "bfloat16" and cfg["max_seq_len"] == 2048 and cfg["load_format"] == "dummy"
    assert cfg["tensor_parallel_size"] == 1 and cfg["enforce_eager"] is True and cfg["quantization"] is None
    assert cfg["device_config"] == "cpu"


def test_vllm_cache_config_info_from_a_real_exposition():
    cache = parse_cache_config_info((FAKES / "engines_vllm_metrics_sample.txt").read_text())
    assert cache["block_size"] == 128 and cache["kv_cache_memory_bytes"] == 2 * 1024**3


@pytest.mark.parametrize("device,world,mem,name,expect", [
    ("cpu", 1, None, "", (128, 2048)),
    ("cpu", 2, None, "", (256, 4096)),
    ("cuda", 1, 141 * 1024**3, "NVIDIA H200", (1024, 8192)),
    ("cuda", 1, 80 * 1024**3, "NVIDIA A100-SXM4-80GB", (256, 2048)),
    ("cuda", 1, 180 * 1024**3, "NVIDIA B200", (1024, 16384)),
])
def test_vllm_default_scheduler_limits(device, world, mem, name, expect):
    assert default_scheduler_limits(device, world, mem, name) == expect


def test_vllm_plan_for_a_local_dir(model_dir, tmp_path):
    eng = VLLM(python=str(tmp_path / "venv" / "bin" / "python"))
    with pytest.raises(EngineError, match="vLLM is not installed"):
        eng.check_installed()
    plan = eng.plan(str(model_dir), "cpu", ["--max-num-seqs", "8"], "127.0.0.1", 1234, tmp_path)
    assert plan.argv[1:7] == ["serve", str(model_dir.resolve()), "--host", "127.0.0.1", "--port", "1234"]
    assert "--load-format" not in plan.argv  # real weights: no dummy
    assert plan.env["VLLM_TARGET_DEVICE"] == "cpu"
    assert plan.argv[-2:] == ["--max-num-seqs", "8"]


def test_transformers_plan_adds_tuned_settings_on_cuda_and_a_bounded_cache_on_cpu(model_dir, tmp_path):
    eng = TransformersServe()
    gpu = eng.plan(str(model_dir), "cuda", [], "127.0.0.1", 1, tmp_path)
    assert gpu.argv[-len(CUDA_TUNED_ARGS):] == CUDA_TUNED_ARGS
    assert gpu.info["wattbench_tuned_defaults"] is True and gpu.info["cb_max_batch_tokens"] == 8192
    assert gpu.info["dtype"] == "float16"
    own = eng.plan(str(model_dir), "cuda", ["--cb-max-batch-tokens", "2048"], "127.0.0.1", 1, tmp_path)
    assert "--cb-use-cuda-graph" not in own.argv and own.info["cb_max_batch_tokens"] == 2048
    cpu = eng.plan(str(model_dir), "cpu", [], "127.0.0.1", 1, tmp_path)
    assert "--cb-use-cuda-graph" not in cpu.argv and cpu.argv[-len(CPU_BOUNDED_ARGS):] == CPU_BOUNDED_ARGS
    assert (cpu.info["cb_num_blocks"], cpu.info["cb_max_batch_tokens"]) == (512, 2048)
    own_cpu = eng.plan(str(model_dir), "cpu", ["--cb-num-blocks", "64"], "127.0.0.1", 1, tmp_path)
    assert own_cpu.info["cb_num_blocks"] == 64 and "--cb-max-batch-tokens" not in own_cpu.argv
    assert cpu.argv[:5] == [eng.python, "-m", "transformers.cli.transformers", "serve", str(model_dir.resolve())]
    assert cpu.env["HF_HUB_OFFLINE"] == "1" and Path(cpu.env.get("HF_HUB_CACHE", "/")).is_dir()
    # a model whose generation config has a real end token: lengths are not forced
    assert eng.server_info_extra(cpu, {})["output_length_forced"] is False


def test_sglang_and_llamacpp_plans(model_dir, tmp_path):
    sg = SGLang(python="/x/python").plan(str(model_dir), "cuda", [], "127.0.0.1", 9, tmp_path)
    assert "--enable-metrics" in sg.argv and sg.argv[1:3] == ["-m", "sglang.launch_server"]
    gguf = tmp_path / "q.gguf"
    gguf.write_bytes(b"GGUF")
    lc = LlamaCpp(binary="/x/llama-server")
    p = lc.plan(str(gguf), "cuda", ["-np", "4"], "127.0.0.1", 9, tmp_path)
    assert p.argv[:3] == ["/x/llama-server", "-m", str(gguf.resolve())]
    assert "--metrics" in p.argv and p.info["n_gpu_layers"] == "999" and p.info["parallel"] == "4"
    with pytest.raises(UserError, match="GGUF files only and preset 'qwen-7b' is not a Llama"):
        lc.plan("qwen-7b", "cpu", [], "127.0.0.1", 9, tmp_path)
    with pytest.raises(UserError, match="GGUF"):
        lc.plan(None, "cpu", [], "127.0.0.1", 9, tmp_path)
    with pytest.raises(EngineError, match="llama.cpp server not found"):
        LlamaCpp(binary="/nonexistent/llama-server").check_installed()


def test_llamacpp_without_a_binary_is_one_engine_error_naming_what_to_install(tmp_path, monkeypatch):
    """No WATTBENCH_LLAMA_SERVER and no llama-server on PATH: plan() (as well as check_installed())
    says what to install, instead of an AttributeError from a None in its argv."""
    monkeypatch.delenv("WATTBENCH_LLAMA_SERVER", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no llama-server on it
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    lc = LlamaCpp()
    assert lc.binary is None
    for call in (lc.check_installed, lambda: lc.plan(str(gguf), "cpu", [], "127.0.0.1", 8000, tmp_path)):
        with pytest.raises(EngineError) as ei:
            call()
        msg = str(ei.value)
        assert "\n" not in msg and "llama.cpp server not found" in msg, msg
        assert "WATTBENCH_LLAMA_SERVER" in msg and "llama-server" in msg, msg


def test_select_helpers():
    info = select_server_info({"tp_size": 2, "context_length": 8192, "internal_states": [{"max_total_num_tokens": 9}],
                               "unrelated": 1})
    assert info == {"tp_size": 2, "context_length": 8192, "max_total_num_tokens": 9, "max_model_len": 8192}
    assert select_props({"default_generation_settings": {"n_ctx": 4096}, "total_slots": 2}) == \
        {"n_ctx": 4096, "total_slots": 2}
    assert parse_version("version: 6500 (1a2b3c4)\nbuilt with cc") == "6500 (1a2b3c4)"


def test_unknown_engine():
    with pytest.raises(UserError, match="unknown engine 'tgi'"):
        get_engine("tgi")


def test_llamacpp_serves_a_llama_preset_as_gguf_with_its_tokenizer(tmp_path, monkeypatch):
    import wattbench.engines.gguf_export as gx

    gguf = tmp_path / "tiny-v1.f16.gguf"
    gguf.write_bytes(b"GGUF")
    (tmp_path / "tiny-v1").mkdir()
    monkeypatch.setattr(gx, "ensure_gguf", lambda name, cache_dir=None: gguf)
    lc = LlamaCpp(binary="/x/llama-server")
    p = lc.plan("tiny", "cpu", ["-np", "2"], "127.0.0.1", 9, tmp_path)
    assert p.argv[:3] == ["/x/llama-server", "-m", str(gguf.resolve())]
    assert p.argv[-4:] == ["-a", "tiny", "-np", "2"] and p.served_model == "tiny"
    assert p.tokenizer_source() == str(tmp_path / "tiny-v1")  # exact prompt lengths from the preset's tokenizer
    assert lc.plan("tiny", "cpu", ["--alias", "m"], "127.0.0.1", 9, tmp_path).served_model == "m"
    # a bare .gguf: no local tokenizer the client could load (not the .gguf path itself)
    assert lc.plan(str(gguf), "cpu", [], "127.0.0.1", 9, tmp_path).tokenizer_source() is None
