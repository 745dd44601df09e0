"""`transformers serve --continuous-batching`: the embedded default engine.

Started as ``<python> -m transformers.cli.transformers serve DIR --continuous-batching --host H
--port P --device D`` with ``HF_HUB_OFFLINE=1`` and ``HF_HUB_CACHE`` pointing at an existing
folder (without one, ``/v1/models`` answers 500 because it scans the hub cache). On CUDA, unless
the user passed their own ``--cb-*`` values, it adds the settings measured fastest on an H200
(docs/engines.md): ``--cb-use-cuda-graph --cb-max-batch-tokens 8192 --cb-max-memory-percent 0.5``.
On CPU it bounds the paged cache instead (``CPU_BOUNDED_ARGS``): by default transformers sizes it
from total RAM, and the server was OOM-killed on a shared machine.
``WATTBENCH_TUNED_DEFAULTS=0`` (set by ``wattbench tune``) leaves the engine's own defaults.

The server rejects request fields it does not know (``ignore_eos`` gives HTTP 422), so output
lengths are forced by the preset's generation config (no reachable end token), not per request.
It has no ``/metrics``.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any
import subprocess

from wattbench.core.argv import flag_value, has_flag
from wattbench.engines.base import Engine, LaunchPlan
from wattbench.engines.presets import resolve_model
from wattbench.core.errors import EngineError
from wattbench.core.schema import StreamBatching

CUDA_TUNED_ARGS = ["--cb-use-cuda-graph", "--cb-max-batch-tokens", "8192", "--cb-max-memory-percent", "0.5"]
# On CPU the paged cache is sized from total RAM by default (0.8 of it in 5.17, 0.6 in 5.24): 17 GB
# and 14 GB resident for the 8M-parameter tiny preset on a 23 GB machine, which the kernel's OOM
# killer ended mid-level. A fixed cache (512 blocks × 256 tokens) holds 256 streams of ~500 tokens;
# 5.17 with it stayed at ~0.75 GB resident.
CPU_BOUNDED_ARGS = ["--cb-num-blocks", "512", "--cb-max-batch-tokens", "2048"]
_CB_FLAGS = ("--cb-use-cuda-graph", "--no-cb-use-cuda-graph", "--cb-max-batch-tokens", "--cb-max-memory-percent",
             "--cb-num-blocks", "--cb-block-size")
_REQUIRED_MODULES = ("transformers", "torch", "fastapi", "uvicorn")


class TransformersServe(Engine):
    name = "transformers"
    install_hint = "install the engine extra: pip install 'wattbench[engine]' (on a CPU-only machine add torch==2.13.0)"
    accepts_ignore_eos = False

    def __init__(self, python: str | None = None):
        self.python = python or os.environ.get("WATTBENCH_TRANSFORMERS_PYTHON") or sys.executable
        self._preset: str | None = None

    def check_installed(self) -> None:
        if self.python != sys.executable:
            if not Path(self.python).is_file():
                raise EngineError(f"transformers engine: python {self.python!r} not found; {self.install_hint}")
            return
        missing = [m for m in _REQUIRED_MODULES if importlib.util.find_spec(m) is None]
        if missing:
            raise EngineError(f"transformers engine needs {', '.join(missing)}: {self.install_hint}")

    def version(self) -> str | None:
        if self.python == sys.executable:
            try:
                return importlib.metadata.version("transformers")
            except importlib.metadata.PackageNotFoundError:
                return None

        try:
            out = subprocess.run(
                [self.python, "-c", "import importlib.metadata as m; print(m.version('transformers'))"],
                capture_output=True, text=True, timeout=30,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return out.stdout.strip() or None

    def warmup_body(self) -> dict[str, Any] | None:
        # The first request initialises continuous batching (paged cache, ~10 s on 2 CPU cores).
        return {"prompt": "warm up", "max_tokens": 4, "stream": False}

    def plan(
        self, model: str | None, device: str, engine_args: list[str], host: str, port: int, scratch: Path
    ) -> LaunchPlan:
        path, preset = resolve_model(model, device)
        self._preset = preset
        args = list(engine_args)
        tuned = False
        own_defaults = os.environ.get("WATTBENCH_TUNED_DEFAULTS", "1") != "0"  # `tune` turns them off
        if own_defaults and device.startswith("cuda") and not any(has_flag(args, f) for f in _CB_FLAGS):
            args = CUDA_TUNED_ARGS + args
            tuned = True
        elif device == "cpu" and not any(has_flag(args, f) for f in _CB_FLAGS):
            args = CPU_BOUNDED_ARGS + args
            tuned = True
        argv = [
            self.python, "-m", "transformers.cli.transformers", "serve", str(path),
            "--continuous-batching", "--host", host, "--port", str(port), "--device", device,
            *args,
        ]
        env = {"HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_UPDATE_CHECK": "1", "HF_HUB_DISABLE_TELEMETRY": "1",
               "TOKENIZERS_PARALLELISM": "false"}
        hub = os.environ.get("HF_HUB_CACHE")
        if not hub or not Path(hub).is_dir():
            hub_dir = scratch / "hf-hub-empty"
            hub_dir.mkdir(parents=True, exist_ok=True)
            env["HF_HUB_CACHE"] = str(hub_dir)
        info = {
            "device": device,
            "continuous_batching": True,
            "dtype": flag_value(args, "--dtype") or _config_dtype(path) or "auto",
            "attn_implementation": flag_value(args, "--attn-implementation") or "engine default",
            "compile": has_flag(args, "--compile"),
            "cb_use_cuda_graph": (True if has_flag(args, "--cb-use-cuda-graph")
                                  else False if has_flag(args, "--no-cb-use-cuda-graph") else "engine default"),
            "cb_max_batch_tokens": _int_or(flag_value(args, "--cb-max-batch-tokens"), "engine default"),
            "cb_max_memory_percent": _float_or(flag_value(args, "--cb-max-memory-percent"), "engine default"),
            "cb_num_blocks": _int_or(flag_value(args, "--cb-num-blocks"), "engine default"),
            "cb_block_size": _int_or(flag_value(args, "--cb-block-size"), "engine default"),
            "wattbench_tuned_defaults": tuned,
            "preset": preset,
            "engine_args": list(engine_args),
        }
        # The server lists (and requires) the model under the name it was started with: the path.
        return LaunchPlan(argv=argv, env=env, model_path=str(path), served_model=str(path),
                          health_paths=("/health", "/v1/models"), info=info)

    def effective_config(self, plan: LaunchPlan, log_text: str, base_url: str) -> dict[str, Any]:
        eff = dict(plan.info)
        cfg = _read_config(Path(plan.model_path))
        if cfg:
            eff["max_model_len"] = cfg.get("max_position_embeddings")
        return eff

    def server_info_extra(self, plan: LaunchPlan, effective: dict[str, Any]) -> dict[str, Any]:
        gen = _read_json(Path(plan.model_path) / "generation_config.json") or {}
        forced = gen.get("eos_token_id") == -1
        return {
            "metrics_endpoint": None,
            "extra_body": {},
            "output_length_forced": forced,
            # The CB streamer hands each decoded step to the SSE stream (no server-side coalescing).
            "stream_batching": StreamBatching(stream_interval=1),
            "detected_by": ["launched"],
        }


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _read_config(path: Path) -> dict[str, Any] | None:
    return _read_json(path / "config.json")


def _config_dtype(path: Path) -> str | None:
    cfg = _read_config(path) or {}
    return cfg.get("dtype") or cfg.get("torch_dtype")


def _int_or(v: str | None, default: Any) -> Any:
    try:
        return int(v) if v is not None else default
    except ValueError:
        return v


def _float_or(v: str | None, default: Any) -> Any:
    try:
        return float(v) if v is not None else default
    except ValueError:
        return v
