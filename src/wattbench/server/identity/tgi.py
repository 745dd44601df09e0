"""Text Generation Inference: ``/info`` is the router's ``Info`` (router/src/lib.rs): model id, sha
and pipeline tag, the router's limits (max_concurrent_requests, max_best_of, max_stop_sequences,
max_input_tokens, max_total_tokens, validation_workers, max_client_batch_size) and its version, sha
and docker label — every field fixed for the life of the server."""

from __future__ import annotations

from typing import Any

from wattbench.server.identity.common import Responses, json_of, missing, model_entry, settings


def exposed(responses: Responses, model: str | None) -> tuple[dict[str, dict[str, Any]], list[str]]:
    out: dict[str, dict[str, Any]] = {}
    info = json_of(responses, "/info")
    if isinstance(info, dict):
        out["/info"] = settings(info)
    entry = model_entry(responses, model)
    if entry:
        out["/v1/models"] = entry
    return out, ([] if "/info" in out else [missing(responses, "/info", "TGI's router settings")])
