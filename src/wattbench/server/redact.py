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
  place that spells ``Bearer``/``Basic``);
- ``secret_values(key, headers, marked)`` -> every configured secret: the key (or URL credential),
  the values of headers that can carry a credential (``is_secret_header``, at least
  ``MIN_HEADER_SECRET`` characters) or that the user marked (``--secret-header NAME``), and the
  credential part of ``Bearer …``/``Basic …`` values;
- ``Scrubber(secrets)``: removes every form of those secrets by value from any text, bytes, JSON
  text (string by string, so the JSON stays valid) or nested object, wherever a server echoed them
  (a 401 body, an SSE error event, generated text, a model id).

Scrubbing happens at two boundaries, with the same ``Scrubber``: where a request's record is made
(the streaming client scrubs its error detail and kept text with the target's secrets: records are
spooled to disk during a level), and where anything is written or printed: a run registers its
secrets (``register_secrets``), the run directory's writers (``results/rundir.py``: result.json,
requests.jsonl, every JSON file), the server timeline, the history store and the CLI's stdout and
stderr (``guard_std_streams``, installed by ``cli.main``) pass what they write through ``scrub``.

A key and URL credentials together are refused in one line (``combine_credentials``): a request
carries one ``Authorization`` header.
"""

from __future__ import annotations

import base64
import contextlib
import html
import json
import re
import urllib.parse
from typing import Iterable
from urllib.parse import urlsplit, urlunsplit

__all__ = ["BasicCredential", "split_url_credentials", "redact_url", "redact_headers", "redact_text",
           "authorization", "combine_credentials", "secret_forms", "is_secret_header", "redact_argv",
           "secret_values", "is_secret_setting", "Scrubber", "register_secrets", "registered", "scrub", "guard_std_streams", "MASK",
           "REDACTED", "MIN_SECRET", "MIN_HEADER_SECRET"]

MASK = "***"
REDACTED = "<redacted>"
# a header name that can carry a credential: Authorization, Proxy-Authorization, Cookie, X-Api-Key,
# X-Auth-Token, Ocp-Apim-Subscription-Key, X-Amz-Security-Token, X-Goog-Api-Key, X-Signature, X-Password,
# X-Private-Token, X-CSRF-Token, X-JWT-Assertion …
_SECRET_NAME = re.compile(r"auth|key|token|secret|pass|cookie|session|credential|sign|private|bearer|jwt|"
                          r"csrf|xsrf|otp", re.I)
# an option of a command line whose value is a credential (narrower than header names: a
# command's ``--tokenizer`` or ``--use-server-token-count`` holds none)
_SECRET_FLAG = re.compile(r"api[-_]?key|secret|passw|auth|credential|cookie|(access|api|bearer|hf|auth)[-_]?token", re.I)
_SECRET_VALUE = re.compile(r"^\s*(bearer|basic|token|digest|apikey|key)\s+\S", re.I)
MIN_SECRET = 3  # shorter values are not masked (a one-letter password would mask every such letter)
MIN_HEADER_SECRET = 8  # a header found secret by its name alone (X-Auth-Mode: none is no credential)


def is_secret_setting(name: str) -> bool:
    """Whether a server setting's name can carry a credential (``api_key``, ``admin_api_key``,
    ``hf_token``, ``ssl_keyfile_password``...): the command-line rule, so ``max_total_tokens`` stays."""
    return bool(_SECRET_FLAG.search(name))


def is_secret_header(name: str, value: str, marked: Iterable[str] = ()) -> bool:
    """Whether a header can carry a credential: by name, by value (``Bearer …``), or marked by the
    user (``--secret-header NAME``, compared case-insensitively)."""
    low = name.strip().lower()
    return bool(_SECRET_NAME.search(name) or _SECRET_VALUE.match(value or "")
                or any(low == m.strip().lower() for m in marked))


def redact_headers(headers: dict[str, str], marked: Iterable[str] = ()) -> dict[str, str]:
    """The headers with every credential-bearing value replaced by ``<redacted>``."""
    marked = tuple(marked)
    return {k: (REDACTED if is_secret_header(k, v, marked) else v) for k, v in headers.items()}


def secret_values(key: str | None, headers: dict[str, str] | None = None, marked: Iterable[str] = ()) -> list[str]:
    """Every configured secret of a target: the API key or URL credential, the values of its
    credential-bearing headers, and the credential part of ``<scheme> <credential>`` values.

    A header found secret by its name alone counts from ``MIN_HEADER_SECRET`` characters (``X-Auth-Mode:
    none`` carries no credential, and masking ``none`` everywhere would garble the results); a header
    the user marked, a ``Bearer``/``Basic`` value and the key count from ``MIN_SECRET``."""
    marked = {m.strip().lower() for m in marked}
    out: list[str] = [key] if key else []
    for name, value in (headers or {}).items():
        value = (value or "").strip()
        by_value = _SECRET_VALUE.match(value)
        if name.strip().lower() in marked or by_value:
            out.append(value)
        elif _SECRET_NAME.search(name) and len(value) >= MIN_HEADER_SECRET:
            out.append(value)
        else:
            continue
        scheme, _, cred = value.partition(" ")
        cred = cred.strip()
        if cred and _SECRET_VALUE.match(value):
            out.append(cred)
            if scheme.lower() == "basic":  # the decoded user:password, and the password alone
                try:
                    plain = base64.b64decode(cred, validate=True).decode("utf-8")
                except (ValueError, UnicodeDecodeError):
                    plain = ""
                if ":" in plain:
                    out.append(BasicCredential(plain))
    return [s for s in dict.fromkeys(out) if s and len(s) >= MIN_SECRET]


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
    """The forms a secret travels in: raw, URL-quoted, JSON-escaped (ASCII and UTF-8), HTML-escaped
    and (URL credentials) the ``Basic`` base64 token and the password alone. Forms shorter than
    ``MIN_SECRET`` are left out."""
    forms = [secret, urllib.parse.quote(secret, safe=""), urllib.parse.quote(secret), json.dumps(secret)[1:-1],
             json.dumps(secret, ensure_ascii=False)[1:-1], html.escape(secret, quote=True)]
    if isinstance(secret, BasicCredential):
        forms.append(secret.token)
        user, _, pw = secret.partition(":")
        if pw:
            forms += [pw, urllib.parse.quote(pw, safe=""), json.dumps(pw)[1:-1], html.escape(pw, quote=True)]
    return [f for f in dict.fromkeys(forms) if f and len(f) >= MIN_SECRET]


def redact_text(text: str | None, secrets: Iterable[str | None]) -> str | None:
    """``text`` with every form of every secret replaced by ``***``."""
    if not text:
        return text
    return Scrubber(secrets).text(text)


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)


class Scrubber:
    """Removes every form of a set of secrets (``secret_forms``) by value, replacing it with ``***``.

    ``text`` for any text (a message, an HTML page), ``json_text`` for JSON (each string literal is
    decoded, scrubbed and re-encoded, so the document stays valid JSON whatever the secret holds),
    ``obj`` for nested dicts/lists, ``found_in`` for a quick test of text or bytes. An empty
    scrubber returns its input unchanged at the cost of one truth test."""

    __slots__ = ("_forms", "_probes", "_bprobes", "secrets")

    def __init__(self, secrets: Iterable[str | None] = ()):
        self.secrets: list[str] = []
        self._forms: list[str] = []
        self._probes: list[str] = []
        self._bprobes: list[bytes] = []
        self.add(*secrets)

    def add(self, *secrets: str | None) -> None:
        for s in secrets:
            if s and len(s) >= MIN_SECRET and s not in self.secrets:
                self.secrets.append(s)
        forms = {f for s in self.secrets for f in secret_forms(s)}
        self._forms = sorted(forms, key=len, reverse=True)  # the longest first: a form inside another
        # what a secret looks like inside JSON text as well (each form's JSON escape)
        probes = forms | {json.dumps(f)[1:-1] for f in forms} | {json.dumps(f, ensure_ascii=False)[1:-1] for f in forms}
        self._probes = sorted((p for p in probes if len(p) >= MIN_SECRET), key=len, reverse=True)
        self._bprobes = [p.encode("utf-8") for p in self._probes]

    def __bool__(self) -> bool:
        return bool(self._forms)

    def found_in(self, data: str | bytes) -> bool:
        """Whether any form of a secret (or its JSON escape) occurs in ``data``."""
        if not self._forms or not data:
            return False
        if isinstance(data, (bytes, bytearray, memoryview)):
            return any(p in data for p in self._bprobes)
        return any(p in data for p in self._probes)

    def text(self, text):
        """``text`` with every form of every secret replaced by ``***`` (non-strings unchanged)."""
        if not self._forms or not text or not isinstance(text, str):
            return text
        for form in self._forms:
            if form in text:
                text = text.replace(form, MASK)
        return text

    def json_text(self, text: str) -> str:
        """JSON text with every string literal scrubbed (keys too); the structure is untouched."""
        if not self.found_in(text):
            return text

        def one(m: re.Match) -> str:
            lit = m.group(0)
            if not self.found_in(lit):
                return lit
            try:
                value = json.loads(lit)
            except ValueError:
                return self.text(lit)
            clean = self.text(value)
            return lit if clean == value else json.dumps(clean, ensure_ascii=False)

        return _JSON_STRING.sub(one, text)

    def obj(self, o):
        """A copy of nested dicts/lists/tuples with every string scrubbed (keys too)."""
        if not self._forms:
            return o
        if isinstance(o, str):
            return self.text(o)
        if isinstance(o, dict):
            return {self.text(k) if isinstance(k, str) else k: self.obj(v) for k, v in o.items()}
        if isinstance(o, (list, tuple)):
            return type(o)(self.obj(v) for v in o)
        return o


# ---------------------------------------------------------------- the process's secrets

_REGISTERED = Scrubber()


def register_secrets(*secrets: str | None) -> None:
    """Add the secrets of what this process runs (a run's key, URL credential, secret headers):
    every writer of the run directory, the history store and the CLI's stdout/stderr scrub them."""
    _REGISTERED.add(*secrets)


def registered() -> Scrubber:
    return _REGISTERED


def scrub(text):
    """``text`` without any registered secret."""
    return _REGISTERED.text(text)


class _ScrubbingStream:
    """A text stream whose ``write`` removes the registered secrets; everything else is the
    wrapped stream's (``isatty``, ``fileno``, ``encoding`` …). Its ``buffer`` scrubs bytes too."""

    def __init__(self, raw):
        self._raw = raw

    def write(self, s):
        return self._raw.write(_REGISTERED.text(s) if _REGISTERED and isinstance(s, str) else s)

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    @property
    def buffer(self):
        raw = getattr(self._raw, "buffer", None)
        return _ScrubbingBuffer(raw) if raw is not None else None

    def __getattr__(self, name):
        return getattr(self._raw, name)


class _ScrubbingBuffer:
    def __init__(self, raw):
        self._raw = raw

    def write(self, b):
        if _REGISTERED and _REGISTERED.found_in(b):
            b = _REGISTERED.text(bytes(b).decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")
        return self._raw.write(b)

    def __getattr__(self, name):
        return getattr(self._raw, name)


@contextlib.contextmanager
def guard_std_streams():
    """``sys.stdout`` and ``sys.stderr`` scrub the registered secrets while the block runs (the
    CLI's whole command: tables, ``--json``, error lines, even a traceback)."""
    import sys

    saved = sys.stdout, sys.stderr
    if not isinstance(sys.stdout, _ScrubbingStream) and sys.stdout is not None:
        sys.stdout = _ScrubbingStream(sys.stdout)
    if not isinstance(sys.stderr, _ScrubbingStream) and sys.stderr is not None:
        sys.stderr = _ScrubbingStream(sys.stderr)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


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
