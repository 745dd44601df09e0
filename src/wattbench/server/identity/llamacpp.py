"""llama.cpp's ``llama-server``: ``/props`` (tools/server, ``get_props``) gives the slots
(``total_slots``: ``-np``), each slot's context (``default_generation_settings.n_ctx``), the default
sampling parameters (``default_generation_settings.params``), the model's alias and file, the chat
template, the modalities and the build (``build_info``). Its threads, batch sizes, flash attention
and KV cache types are not exposed.

Kept: those settings (the chat template as a short hash of its text). Left out as volatile: the
sleeping state, the media marker (drawn at start), and the fields older builds copied from slot 0's
live state (``id``, ``id_task``, ``is_processing``, ``prompt``, ``next_token``, ``n_past``...)."""

from __future__ import annotations

import hashlib
from typing import Any

from wattbench.server.identity.common import Responses, json_of, missing, model_entry, settings

KEEP = ("total_slots", "model_alias", "model_path", "model_ftype", "build_info", "modalities", "chat_template_caps")
SLOT_KEEP = ("n_ctx", "params", "speculative")


def exposed(responses: Responses, model: str | None) -> tuple[dict[str, dict[str, Any]], list[str]]:
    out: dict[str, dict[str, Any]] = {}
    props = json_of(responses, "/props")
    if isinstance(props, dict):
        dgs = props.get("default_generation_settings")
        dgs = dgs if isinstance(dgs, dict) else {}
        chosen: dict[str, Any] = {k: props[k] for k in KEEP if k in props}
        chosen["default_generation_settings"] = {k: dgs[k] for k in SLOT_KEEP if k in dgs}
        if "n_ctx" not in dgs and "n_ctx" in props:
            chosen["n_ctx"] = props["n_ctx"]
        tmpl = props.get("chat_template")
        if isinstance(tmpl, str) and tmpl:
            chosen["chat_template_sha256"] = hashlib.sha256(tmpl.encode()).hexdigest()[:16]
        out["/props"] = settings(chosen, lambda n: n.endswith(".lora") or ".lora." in n)
    entry = model_entry(responses, model)
    if entry:
        out["/v1/models"] = entry
    return out, ([] if "/props" in out else [missing(responses, "/props", "llama.cpp's slots and context")])
