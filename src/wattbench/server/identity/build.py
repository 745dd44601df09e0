"""``build_identity``: a server's ``ServerIdentity`` from the answers ``server.detect`` probed, read
by the engine's own module (``generic`` for any other OpenAI-compatible server)."""

from __future__ import annotations

from wattbench.core.schema import ServerIdentity
from wattbench.server.identity import generic, llamacpp, sglang, tgi, transformers, vllm
from wattbench.server.identity.common import Responses, target_of

READERS = {"vllm": vllm.exposed, "sglang": sglang.exposed, "llamacpp": llamacpp.exposed, "tgi": tgi.exposed,
           "transformers": transformers.exposed}


def build_identity(base_url: str | None, engine: str, responses: Responses, model: str | None,
                   version: str | None) -> ServerIdentity:
    """The identity of the server at ``base_url`` from the answers ``server.detect`` probed."""
    exposed, not_exposed = READERS.get(engine, generic.exposed)(responses, model)
    return ServerIdentity(target=target_of(base_url), model=model, engine=engine, version=version,
                          exposed={k: v for k, v in exposed.items() if v}, not_exposed=not_exposed)
