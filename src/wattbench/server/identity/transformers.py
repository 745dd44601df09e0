"""``transformers serve``: its routes are the OpenAI ones, ``/load_model``, ``/reset`` and
``/health`` (transformers 5.24, ``cli/serving/server.py``); nothing reports its flags. ``/v1/models``
gives the model id and whether it is loaded (``status``: volatile, left out)."""

from __future__ import annotations

from typing import Any

from wattbench.server.identity.common import Responses, model_entry


def exposed(responses: Responses, model: str | None) -> tuple[dict[str, dict[str, Any]], list[str]]:
    entry = model_entry(responses, model, lambda n: n.startswith("status"))
    return ({"/v1/models": entry} if entry else {}), ["transformers serve exposes no server configuration"]
