"""The engines by name (``get_engine``) and ``launch``: start one on a free loopback port and wait
until it is healthy."""

from __future__ import annotations

from pathlib import Path

from wattbench.core.errors import UserError
from wattbench.engines.base import Engine, EngineHandle, start
from wattbench.engines.llamacpp import LlamaCpp
from wattbench.engines.presets import default_device
from wattbench.engines.sglang import SGLang
from wattbench.engines.transformers_serve import TransformersServe
from wattbench.engines.vllm import VLLM

ENGINES = ("transformers", "vllm", "sglang", "llamacpp")
DEFAULT_START_TIMEOUT_S = {"transformers": 300.0, "vllm": 600.0, "sglang": 600.0, "llamacpp": 300.0}


def get_engine(name: str) -> Engine:
    """The ``Engine`` object for ``name`` (imports only that engine's module)."""
    if name == "transformers":
        return TransformersServe()
    if name == "vllm":
        return VLLM()
    if name == "sglang":
        return SGLang()
    if name == "llamacpp":
        return LlamaCpp()
    raise UserError(f"unknown engine {name!r}: choose one of {', '.join(ENGINES)}")


def launch(
    engine: str | Engine,
    model: str | None = None,
    device: str | None = None,
    engine_args: list[str] | None = None,
    run_dir: Path | str = ".",
    timeout_s: float | None = None,
    host: str = "127.0.0.1",
    port: int | None = None,
) -> EngineHandle:
    """Start ``engine`` (its name, or the ``Engine`` itself) serving ``model`` (a preset name, a
    local directory, or None for the default preset of ``device``) and return a ready ``EngineHandle``. ``device`` None = CUDA when torch sees
    one, else CPU. Raises ``EngineError`` (with the log tail) and leaves no process on failure."""
    eng = get_engine(engine) if isinstance(engine, str) else engine
    dev = device or default_device()
    if timeout_s is None:
        timeout_s = DEFAULT_START_TIMEOUT_S.get(eng.name, 600.0)
    return start(eng, model, dev, list(engine_args or []), Path(run_dir), timeout_s, host=host, port=port)
