"""Header values that must never reach a result file, a log line or a report.

``redact_headers`` keeps every header name (what was sent is part of the run's record) and
replaces the value of any header that can carry a credential — by name (``Authorization``,
``Cookie``, ``X-API-Key``, anything with ``key``, ``token``, ``secret``, ``password``, ``auth``
or ``session`` in it) or by value (``Bearer …``, ``Basic …``) — with ``REDACTED``.
"""

from __future__ import annotations

import re

REDACTED = "<redacted>"
_SECRET_NAME = re.compile(r"auth|key|token|secret|passw|cookie|session|credential|signature", re.I)
_SECRET_VALUE = re.compile(r"^\s*(bearer|basic|token|digest)\s+\S", re.I)


def is_secret_header(name: str, value: str) -> bool:
    return bool(_SECRET_NAME.search(name) or _SECRET_VALUE.match(value or ""))


def redact_headers(headers: dict[str, str]) -> dict[str, str]:
    """The headers with every credential-bearing value replaced by ``<redacted>``."""
    return {k: (REDACTED if is_secret_header(k, v) else v) for k, v in headers.items()}
