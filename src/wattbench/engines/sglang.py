"""SGLang: ``python -m sglang.launch_server --model-path DIR --host H --port P --enable-metrics``.

Which SGLang: ``WATTBENCH_SGLANG_PYTHON`` (the python of a venv holding it), else the running
interpreter. A preset is served from config + tokenizer with ``--load-format dummy``.
``--enable-metrics`` is added (SGLang has no ``/metrics`` without it). The effective config is
read from ``/get_server_info`` (SGLang's own view of its server args after defaults).
SGLang takes ``ignore_eos`` per request; it coalesces streamed tokens by ``--stream-interval``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from wattbench.core.argv import flag_value, has_flag
from wattbench.engines.base import (
    Engine,
    LaunchPlan,
    http_get,
    length_forcing_server_info,
)
from wattbench.engines.presets import resolve_model
from wattbench.core.errors import EngineError
from wattbench.server.engine_rules import select_server_info


class SGLang(Engine):
    name = "sglang"
    install_hint = "install SGLang: pip install 'sglang[all]' (or set WATTBENCH_SGLANG_PYTHON to a venv's python)"
    accepts_ignore_eos = True

    def __init__(self, python: str | None = None):
        self.python = python or os.environ.get("WATTBENCH_SGLANG_PYTHON") or sys.executable

    def check_installed(self) -> None:
        if self.python == sys.executable:
            if importlib.util.find_spec("sglang") is None:
                raise EngineError(f"SGLang is not installed in {sys.executable}: {self.install_hint}")
        elif not Path(self.python).is_file():
            raise EngineError(f"SGLang python {self.python!r} not found: {self.install_hint}")

    def version(self) -> str | None:
        try:
            out = subprocess.run([self.python, "-c", "import importlib.metadata as m; print(m.version('sglang'))"],
                                 capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return out.stdout.strip() or None

    def plan(
        self, model: str | None, device: str, engine_args: list[str], host: str, port: int, scratch: Path
    ) -> LaunchPlan:
        args = list(engine_args)
        path, preset = resolve_model(model, device, weights=False)
        pre: list[str] = []
        if preset is not None and not has_flag(args, "--load-format"):
            pre += ["--load-format", "dummy"]
        if preset is not None and not has_flag(args, "--served-model-name"):
            pre += ["--served-model-name", preset]
        if not has_flag(args, "--enable-metrics"):
            pre.append("--enable-metrics")
        if device == "cpu" and not has_flag(args, "--device"):
            pre += ["--device", "cpu"]
        argv = [self.python, "-m", "sglang.launch_server", "--model-path", str(path), "--host", host,
                "--port", str(port), *pre, *args]
        served = flag_value(args, "--served-model-name") or preset or str(path)
        info = {"device": device, "preset": preset, "engine_args": list(engine_args)}
        return LaunchPlan(argv=argv, env={"HF_HUB_OFFLINE": "1", "SGLANG_DISABLE_USAGE_STATS": "1"},
                          model_path=str(path), served_model=served, health_paths=("/health", "/v1/models"),
                          info=info)

    def effective_config(self, plan: LaunchPlan, log_text: str, base_url: str) -> dict[str, Any]:
        eff = dict(plan.info)
        status, body = http_get(base_url + "/get_server_info", timeout_s=10.0)
        if status == 200:
            try:
                eff.update(select_server_info(json.loads(body)))
            except ValueError:
                pass
        eff.setdefault("stream_interval", int(flag_value(plan.argv, "--stream-interval") or 1))
        return eff

    def server_info_extra(self, plan: LaunchPlan, effective: dict[str, Any]) -> dict[str, Any]:
        return length_forcing_server_info(effective.get("stream_interval", 1))
