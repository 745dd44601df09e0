"""Secrets in URLs, headers and texts: one home for keeping them out of every file.

A secret reaches wattbench four ways: an API key (``--api-key``, ``WATTBENCH_API_KEY``,
``OPENAI_API_KEY``), credentials in a target URL (``http://user:password@host:8000``), a header
(``Authorization``, ``X-Api-Key`` …) and a sensor's password (environment or file; the sensor
adapters keep those). Everything that is written (result.json, requests.jsonl, report.html, logs,
history rows) or shown goes through these helpers:

- ``split_url_credentials(url)`` -> the URL without its ``user:password@`` part and the
  credential as a ``BasicCredential`` (sent as ``Authorization: Basic …``, never in a URL again);
- ``redact_url(url)`` -> the URL with ``user:password@`` replaced by ``***@`` (for display);
- ``redact_headers(headers)`` -> every header name kept, the value of any header that can carry a
  credential — by name (``Authorization``, ``Cookie``, ``X-API-Key``, anything with ``key``,
  ``token``, ``secret``, ``password``, ``auth`` or ``session`` in it) or by value (``Bearer …``,
  ``Basic …``) — replaced by ``<redacted>`` (``is_secret_header``);
- ``redact_text(text, secrets)`` -> the text with each secret (raw, URL-quoted, JSON-escaped, and
  the ``Basic`` base64 form of URL credentials) replaced by ``***``;
- ``redact_argv(argv)`` -> a command line (``wattbench measure -- COMMAND``) with the value of every
  credential-named option (``--api-key X``, ``--api-key=X``, ``--header "Authorization: …"``) and
  the credentials of every URL masked;
- ``authorization(key)`` -> the ``Authorization`` header value of a key or a credential (the one
  place that spells ``Bearer``/``Basic``).

A key and URL credentials together are refused in one line (``combine_credentials``): a request
carries one ``Authorization`` header.
"""

from __future__ import annotations

import base64
import json
import re
import urllib.parse
from typing import Iterable
from urllib.parse import urlsplit, urlunsplit

__all__ = ["BasicCredential", "split_url_credentials", "redact_url", "redact_headers", "redact_text",
           "authorization", "combine_credentials", "secret_forms", "is_secret_header", "redact_argv", "MASK", "REDACTED"]

MASK = "***"
REDACTED = "<redacted>"
_SECRET_NAME = re.compile(r"auth|key|token|secret|passw|cookie|session|credential|signature", re.I)
# an option of a command line whose value is a credential (narrower than header names: a
# command's ``--tokenizer`` or ``--use-server-token-count`` holds none)
_SECRET_FLAG = re.compile(r"api[-_]?key|secret|passw|auth|credential|cookie|(access|api|bearer|hf|auth)[-_]?token", re.I)
_SECRET_VALUE = re.compile(r"^\s*(bearer|basic|token|digest)\s+\S", re.I)


def is_secret_header(name: str, value: str) -> bool:
    return bool(_SECRET_NAME.search(name) or _SECRET_VALUE.match(value or ""))


def redact_headers(headers: dict[str, str]) -> dict[str, str]:
    """The headers with every credential-bearing value replaced by ``<redacted>``."""
    return {k: (REDACTED if is_secret_header(k, v) else v) for k, v in headers.items()}


class BasicCredential(str):
    """``user:password`` taken out of a URL; its header is ``Basic base64(user:password)``."""

    def __repr__(self) -> str:  # never show it
        return "BasicCredential(***)"

    @property
    def token(self) -> str:
        return base64.b64encode(str(self).encode()).decode()


def authorization(key: str | None) -> str | None:
    """The ``Authorization`` header value for an API key (``Bearer``) or URL credentials (``Basic``)."""
    if not key:
        return None
    if isinstance(key, BasicCredential):
        return f"Basic {key.token}"
    return f"Bearer {key}"


def split_url_credentials(url: str | None) -> tuple[str | None, BasicCredential | None]:
    """``http://u:p@h:1/v1`` -> (``http://h:1/v1``, ``BasicCredential("u:p")``); URLs without a
    ``user[:password]@`` part come back unchanged with None."""
    if not url:
        return url, None
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return url, None
    if parts.username is None and parts.password is None:
        return url, None
    host = parts.hostname or ""
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    if parts.port:
        host = f"{host}:{parts.port}"
    user = urllib.parse.unquote(parts.username or "")
    pw = urllib.parse.unquote(parts.password or "")
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment)), BasicCredential(f"{user}:{pw}")


def redact_url(url: str | None) -> str | None:
    """The URL with any ``user:password@`` shown as ``***@`` (query-string secrets as well)."""
    if not url:
        return url
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable URL>"
    netloc = parts.netloc
    if "@" in netloc:
        netloc = MASK + "@" + netloc.rsplit("@", 1)[1]
    query = parts.query
    if query:
        pairs = urllib.parse.parse_qsl(query, keep_blank_values=True)
        query = "&".join(f"{k}={MASK if _SECRET_NAME.search(k) else v}" for k, v in pairs)
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact_argv(argv: Iterable[str]) -> list[str]:
    """A command line fit to be written: an option whose name can carry a credential has its
    value masked (``--api-key X`` and ``--api-key=X``), a header argument (``-H``/``--header``
    ``Name: value``) has a credential-bearing value masked, and URLs lose ``user:password@``."""
    out: list[str] = []
    mask_next = header_next = False
    for a in argv:
        a = str(a)
        if mask_next and not a.startswith("-"):
            out.append(MASK)
        elif header_next:
            name, sep, value = a.partition(":")
            out.append(f"{name}{sep} {REDACTED}" if sep and is_secret_header(name, value.strip()) else a)
        elif a.startswith("-") and "=" in a:
            flag, _, value = a.partition("=")
            out.append(f"{flag}={MASK}" if _SECRET_FLAG.search(flag) else f"{flag}={_redact_word(value)}")
        else:
            out.append(_redact_word(a))
        flag = a.startswith("-") and "=" not in a
        mask_next = flag and bool(_SECRET_FLAG.search(a))
        header_next = flag and a in ("-H", "--header", "--headers")
    return out


def _redact_word(word: str) -> str:
    return redact_url(word) or word if "://" in word else word


def secret_forms(secret: str) -> list[str]:
    """The forms a secret travels in: raw, URL-quoted, JSON-escaped and (URL credentials) the
    ``Basic`` base64 token."""
    forms = [secret, urllib.parse.quote(secret, safe=""), urllib.parse.quote(secret), json.dumps(secret)[1:-1]]
    if isinstance(secret, BasicCredential):
        forms.append(secret.token)
        user, _, pw = secret.partition(":")
        if pw:
            forms += [pw, urllib.parse.quote(pw, safe="")]
    return [f for f in dict.fromkeys(forms) if f]


def redact_text(text: str | None, secrets: Iterable[str | None]) -> str | None:
    """``text`` with every form of every secret replaced by ``***``."""
    if not text:
        return text
    for s in secrets:
        if not s or len(s) < 3:  # a one-letter password would mask every such letter
            continue
        for form in sorted(secret_forms(s), key=len, reverse=True):
            if form in text:
                text = text.replace(form, MASK)
    return text


def combine_credentials(url: str, api_key: str | None) -> tuple[str, str | None]:
    """The target URL without credentials and the one credential its requests carry.

    Raises ``UserError`` (one line) when the URL carries credentials and an API key is given too.
    """
    from wattbench.errors import UserError

    clean, cred = split_url_credentials(url)
    if cred is not None and api_key:
        raise UserError(f"--target {redact_url(url)} carries credentials (user:password@) and an API key was given "
                        "too (--api-key, WATTBENCH_API_KEY or OPENAI_API_KEY); a request carries one Authorization "
                        "header: give one of the two")
    return clean or url, (cred if cred is not None else api_key)
