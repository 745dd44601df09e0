"""``build_identity``: a server's ``ServerIdentity`` from the answers ``server.detect`` probed, read
by the engine's own module (``generic`` for any other OpenAI-compatible server), its settings capped
as a whole (``common.cap_exposed``: ``MAX_IDENTITY_BYTES``, said in ``ServerIdentity.capped``)."""

from __future__ import annotations

from wattbench.core.secret_scope import clip
from wattbench.core.schema import ServerIdentity
from wattbench.server.identity import generic, llamacpp, sglang, tgi, transformers, vllm
from wattbench.server.identity.common import Responses, cap_exposed, target_of

READERS = {"vllm": vllm.exposed, "sglang": sglang.exposed, "llamacpp": llamacpp.exposed, "tgi": tgi.exposed,
           "transformers": transformers.exposed}


def build_identity(base_url: str | None, engine: str, responses: Responses, model: str | None,
                   version: str | None) -> ServerIdentity:
    """The identity of the server at ``base_url`` from the answers ``server.detect`` probed."""
    exposed, not_exposed = READERS.get(engine, generic.exposed)(responses, model)
    kept, capped = cap_exposed({k: v for k, v in exposed.items() if v})
    return ServerIdentity(target=target_of(base_url), model=model, engine=engine, version=version,
                          exposed=kept, not_exposed=not_exposed, capped=capped)


def _short(v: object) -> str:
    return clip(repr(v), 60, "...")  # scrubbed of the run's secrets, then cut


def identity_change(before: ServerIdentity | None, after: ServerIdentity | None) -> str | None:
    """What tells ``after`` (a restarted engine's identity) from ``before`` (the run's), in a few words
    (``model id 'a' -> 'b'``, ``version …``, ``/props changed``); None when they are one configuration
    or either is unknown. The target is not compared: a launched engine's port changes with every start."""
    if before is None or after is None:
        return None
    names = {"model": "model id", "engine": "engine", "version": "version"}
    out = [f"{name} {_short(getattr(before, what))} -> {_short(getattr(after, what))}"
           for what, name in names.items() if getattr(before, what) != getattr(after, what)]
    changed = [src for src in sorted(set(before.exposed) | set(after.exposed))
               if before.exposed.get(src) != after.exposed.get(src)]
    if changed:
        out.append(f"{', '.join(changed)} changed")
    return "; ".join(out) or None
