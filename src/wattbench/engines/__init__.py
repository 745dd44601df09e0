"""Launchers that start and stop real inference servers, and locally built model presets.

``registry.launch(engine, model, device, engine_args, run_dir, timeout_s) -> EngineHandle`` starts
one of ``transformers`` (the embedded default), ``vllm``, ``sglang`` or ``llamacpp`` on a free
loopback port, waits until it is healthy and returns a handle (a context manager that stops it by
PID). One module per engine (``transformers_serve``, ``vllm``, ``sglang``, ``llamacpp``), the shared
launch and stop in ``base``, the built model presets in ``presets``.
"""
