"""SGLang: ``/get_server_info`` is every server argument (``ServerArgs``, flattened), the
scheduler's figures and ``internal_states``, and the version.

Left out as volatile: ``internal_states`` (throughputs, memory use, queue lengths),
``random_seed`` (drawn at start when none is given), and the sizes the scheduler derives from a
memory profile at start (``max_total_num_tokens``, ``max_req_input_len``), as vLLM's block counts
are; the arguments that say where it runs or writes (hosts, ports, paths, log settings) and any
argument that can carry a credential (``api_key``, ``admin_api_key``) by the common rules."""

from __future__ import annotations

from typing import Any

from wattbench.server.identity.common import Responses, json_of, missing, model_entry, settings

VOLATILE = ("internal_states", "random_seed", "max_total_num_tokens", "max_req_input_len", "status", "version")


def exposed(responses: Responses, model: str | None) -> tuple[dict[str, dict[str, Any]], list[str]]:
    out: dict[str, dict[str, Any]] = {}
    info = json_of(responses, "/get_server_info")
    if isinstance(info, dict):
        out["/get_server_info"] = settings(info, lambda n: n.split(".")[0] in VOLATILE)
    entry = model_entry(responses, model)
    if entry:
        out["/v1/models"] = entry
    return out, ([] if "/get_server_info" in out else [missing(responses, "/get_server_info", "SGLang's arguments")])
