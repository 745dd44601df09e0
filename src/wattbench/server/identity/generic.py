"""Any other OpenAI-compatible server: only ``/v1/models`` says anything (the served model's entry)."""

from __future__ import annotations

from typing import Any

from wattbench.server.identity.common import Responses, model_entry


def exposed(responses: Responses, model: str | None) -> tuple[dict[str, dict[str, Any]], list[str]]:
    entry = model_entry(responses, model)
    return ({"/v1/models": entry} if entry else {}), ["an OpenAI-compatible server exposes no server configuration"]
