"""The words some run settings take: one home for the run's configuration (``config/run.py``'s
``RunConfig``, which the CLI reads, so this module stays light: no model is built on import) and the
configuration a result records (``core/schema/recorded_config.py``)."""

from __future__ import annotations

from typing import Literal

Api = Literal["completions", "chat"]  # the OpenAI endpoint the load calls
EngineName = Literal["transformers", "vllm", "sglang", "llamacpp"]  # an engine wattbench can start
TrialOrder = Literal["interleaved", "shuffled"]  # how --trials orders a ladder's rounds
