"""What every engine's identity module shares (``server/identity``): the target, the rule for a
stable setting, a probe's JSON, the served model's ``/v1/models`` entry."""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Mapping
from urllib.parse import urlsplit

from wattbench.core.jsontext import loads_bounded
from wattbench.core.redact import is_secret_setting
from wattbench.core.secret_scope import clip

# path -> (HTTP status, headers, body) of one probe; status 0: it failed
Responses = Mapping[str, tuple[int, Mapping[str, str], bytes]]

MAX_TEXT = 200
MAX_LIST = 32
MAX_SETTINGS = 300
MAX_DEPTH = 4
MAX_NAME = 120  # a dotted setting name longer than this is not a setting (left out, never cut: cut names collide)
MAX_IDENTITY_BYTES = 16 << 10  # the whole identity's settings, as compact JSON
_DEFAULT_PORT = {"http": 80, "https": 443}
# names that say where a server runs or writes, not how it computes
_PLACE_WORDS = frozenset(("host", "hostname", "port", "ip", "addr", "address", "url", "uri", "dir", "log", "file",
                          "keyfile", "certfile", "socket", "endpoint", "pid"))


def target_of(base_url: str | None) -> str | None:
    """``http://user:pw@Host:8000/v1?key=x`` -> ``http://host:8000``; ``https://h/api/v1`` ->
    ``https://h:443/api``. None for a URL without a host."""
    if not base_url:
        return None
    try:
        p = urlsplit(base_url.strip())
        port = p.port or _DEFAULT_PORT.get(p.scheme.lower())
    except ValueError:
        return None
    host = (p.hostname or "").lower()
    if not host:
        return None
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    path = p.path.rstrip("/")
    path = path[: -len("/v1")] if path.endswith("/v1") else path
    return f"{p.scheme.lower()}://{host}" + (f":{port}" if port else "") + path


def _scalar(v: Any) -> Any:
    if isinstance(v, str):
        return clip(v, MAX_TEXT)  # scrubbed of the run's secrets, then cut
    if v is None or isinstance(v, (bool, int)):
        return v
    if isinstance(v, float):
        return v if v == v and v not in (float("inf"), float("-inf")) else str(v)
    return _NOT_SCALAR


_NOT_SCALAR = object()


def _is_place(name: str) -> bool:
    """A name one of whose words (``nccl_port``: ``nccl``, ``port``) says where, not how."""
    words = name.lower().replace("-", "_").split("_")
    return any(w in _PLACE_WORDS for w in words)


def settings(obj: Any, drop: Callable[[str], bool] = lambda name: False) -> dict[str, Any]:
    """The stable settings of one answer (module docstring): ``drop(dotted name)`` says which of
    its settings an engine knows to be volatile."""
    out: dict[str, Any] = {}

    def walk(o: Any, prefix: str, depth: int) -> None:
        if not isinstance(o, Mapping):
            return
        for k, v in o.items():
            name = f"{prefix}{k}"
            if len(out) >= MAX_SETTINGS:
                return
            if (not isinstance(k, str) or len(name) > MAX_NAME or is_secret_setting(k) or _is_place(k)
                    or drop(name)):
                continue
            if isinstance(v, Mapping):
                if depth < MAX_DEPTH:
                    walk(v, name + ".", depth + 1)
                continue
            if isinstance(v, (list, tuple)):
                items = [_scalar(x) for x in v[:MAX_LIST]]
                if all(x is not _NOT_SCALAR for x in items):
                    out[name] = items
                continue
            s = _scalar(v)
            if s is _NOT_SCALAR:
                continue
            if k.lower().endswith("_path") and isinstance(s, str):
                s = os.path.basename(s.rstrip("/\\")) or s
            out[name] = s

    walk(obj, "", 0)
    return dict(sorted(out.items()))


def cap_exposed(exposed: Mapping[str, Mapping[str, Any]],
                max_bytes: int = MAX_IDENTITY_BYTES) -> tuple[dict[str, dict[str, Any]], str | None]:
    """The settings an identity keeps: source by source (sorted), setting by setting (sorted), as
    many as fit ``max_bytes`` of compact JSON, and what was left out (one line; None when nothing was).
    Cut here, before the identity is hashed into the configuration key: two runs of one server keep
    the same settings, so they still share a key."""
    out: dict[str, dict[str, Any]] = {}
    used, dropped, total = 2, 0, 0
    cut_at: list[str] = []
    for src in sorted(exposed):
        kept: dict[str, Any] = {}
        for name, v in sorted(exposed[src].items()):
            total += 1
            size = len(json.dumps({name: v}, separators=(",", ":"), default=str).encode()) + len(src) + 8
            if used + size > max_bytes:
                dropped += 1
                if not cut_at or cut_at[-1] != src:
                    cut_at.append(src)
                continue
            used += size
            kept[name] = v
        if kept:
            out[src] = kept
    if not dropped:
        return out, None
    return out, (f"{max_bytes >> 10} KiB kept: {total - dropped} of {total} settings "
                 f"({dropped} left out, of {', '.join(cut_at)})")


def json_of(responses: Responses, path: str) -> Any:
    """The JSON body of a probe that answered 200, else None."""
    status, _, body = responses.get(path, (0, {}, b""))
    if status != 200:
        return None
    try:
        return loads_bounded(body)  # one nesting rule for JSON from outside (core/jsontext.py)
    except (ValueError, UnicodeDecodeError):
        return None


def missing(responses: Responses, path: str, what: str = "") -> str:
    """One ``not_exposed`` line: ``/props: HTTP 404`` or ``/props: no answer``."""
    status = responses.get(path, (0, {}, b""))[0]
    why = f"HTTP {status}" if status and status != 200 else ("no answer" if not status else "not the expected JSON")
    return f"{path}: {why}" + (f" ({what})" if what else "")


def model_entry(responses: Responses, model: str | None,
                drop: Callable[[str], bool] = lambda name: False) -> dict[str, Any] | None:
    """The served model's entry of ``/v1/models`` as settings (``created`` and ``permission`` — a
    timestamp and ids made per request — left out), or None."""
    listing = json_of(responses, "/v1/models")
    data = listing.get("data") if isinstance(listing, dict) else None
    entries = [m for m in data if isinstance(m, dict)] if isinstance(data, list) else []
    entry = next((m for m in entries if model is not None and m.get("id") == model), entries[0] if entries else None)
    if entry is None:
        return None
    return settings(entry, lambda n: n in ("created", "permission", "object") or n.startswith("permission.")
                    or drop(n))
