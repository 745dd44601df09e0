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
- ``Scrubber(secrets)``: removes every form of those secrets from any text, bytes, JSON text (string
  by string, so the JSON stays valid) or nested object, wherever a server echoed them (a 401 body, an
  SSE error event, generated text, a model id) — and every piece of one: any run of ``GRAM`` (8)
  characters of a secret, in any letter case, as hex, base64, or with some or all of its characters
  escaped (``\\uXXXX``, ``%XX``, ``&#N;`` …), so a server that echoes the start of a key, or a text
  cut through one, leaves nothing of it;
- ``scope(*secrets)``: a context manager that registers secrets while its block runs (a run, a
  command), for every writer and printer below, in every thread; nested scopes, ``hold=True`` for
  the CLI's command (``register_secrets`` adds to the newest open scope, ``registered()`` is the
  scrubber of every open scope's secrets);
- ``clip(text, limit)``: the one way untrusted text is cut (an identity setting, a model id, an error
  body, a finding printed): scrubbed of the registered secrets first, then cut, so a secret that
  straddles the cut leaves no piece behind.

Scrubbing happens at three boundaries, with the same ``Scrubber``: where untrusted text is cut
(``clip``), where a request's record is made (the streaming client scrubs its error detail and kept text with the target's secrets: records are
spooled to disk during a level), and where anything is written or printed: a run registers its
secrets for its lifetime (``scope``), the run directory's writers (``results/rundir.py``: result.json,
requests.jsonl, every JSON file), the server timeline, the history store and the CLI's stdout and
stderr (``guard_std_streams``, installed by ``cli.main``) pass what they write through ``scrub``.

A key and URL credentials together are refused in one line (``combine_credentials``): a request
carries one ``Authorization`` header.
"""

from __future__ import annotations

import base64
import bisect
import contextlib
import html
import itertools
import json
import re
import shlex
import threading
import urllib.parse
from typing import Any, BinaryIO, Callable, Iterable, Iterator, TextIO, TypeVar, cast, overload
from urllib.parse import urlsplit, urlunsplit
import sys

from wattbench.core import safe_text as _safe_text
from wattbench.core.safe_text import stream as terminal_safe
from wattbench.core.errors import UserError

_T = TypeVar("_T")

__all__ = ["BasicCredential", "split_url_credentials", "redact_url", "redact_headers", "redact_text",
           "authorization", "combine_credentials", "secret_forms", "is_secret_header", "redact_argv",
           "secret_values", "url_secrets", "body_secrets", "redact_body", "argv_secrets", "env_secrets",
           "is_secret_setting", "Scrubber", "scope", "on_scope_end", "register_secrets", "registered", "scrub", "clip", "guard_std_streams",
           "MASK", "REDACTED", "MIN_SECRET", "MIN_HEADER_SECRET", "GRAM"]

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
B64_CORE_MIN = 8  # a base64 core shorter than this (a secret under ~7 bytes) would match by chance
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


def authorization_header(key: str | None) -> dict[str, str]:
    """The request headers that carry an API key or URL credentials: ``{"Authorization": …}``, or
    none without a key."""
    value = authorization(key)
    return {} if value is None else {"Authorization": value}


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


# query parameters known to carry no credential (Azure's ``api-version`` …); every other value of a
# URL's query is taken for a secret (``?sig=``, ``?code=``, an Azure SAS or Functions key, ``?key=``)
HARMLESS_QUERY = frozenset({"api-version", "api_version", "version", "format", "stream", "model", "lang", "locale"})


def _query_pairs(query: str) -> list[tuple[str, str | None]]:
    """``a=1&b&c=`` -> [("a", "1"), ("b", None), ("c", "")] (raw, not unquoted)."""
    out: list[tuple[str, str | None]] = []
    for part in query.replace(";", "&").split("&"):
        if part:
            k, sep, v = part.partition("=")
            out.append((k, v if sep else None))
    return out


def _harmless(name: str) -> bool:
    return urllib.parse.unquote_plus(name).strip().lower() in HARMLESS_QUERY


def redact_url(url: str | None) -> str | None:
    """The URL for display: ``user:password@`` shown as ``***@``, every query value but the known
    harmless ones (``HARMLESS_QUERY``) as ``***`` (a bare query word too), a fragment as ``***``."""
    if not url:
        return url
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable URL>"
    netloc = parts.netloc
    if "@" in netloc:
        netloc = MASK + "@" + netloc.rsplit("@", 1)[1]
    query = "&".join(f"{k}={v if _harmless(k) else MASK}" if v is not None else MASK
                     for k, v in _query_pairs(parts.query))
    fragment = MASK if parts.fragment else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, fragment))


def url_secrets(url: str | None) -> list[str]:
    """The secrets a URL holds: its ``user:password`` (a ``BasicCredential``) and every query value
    (and bare query word) but the harmless ones, raw and unquoted, and its fragment."""
    if not url:
        return []
    cred = split_url_credentials(url)[1]
    out: list[str] = [cred] if cred is not None else []
    try:
        parts = urlsplit(str(url).strip())
    except ValueError:
        return out
    for k, v in _query_pairs(parts.query):
        if v is None:
            out += [k, urllib.parse.unquote_plus(k)]
        elif not _harmless(k):
            out += [v, urllib.parse.unquote_plus(v)]
    if parts.fragment:
        out.append(parts.fragment)
    return [x for x in dict.fromkeys(out) if x and len(x) >= MIN_SECRET]


# a field of a JSON body (``--extra-body``, GuideLLM's ``--backend-args``) whose value is a credential:
# narrower than header names (``max_tokens``, ``tokenizer_mode`` hold none)
_SECRET_FIELD = re.compile(r"api[-_]?key|secret|passw|auth|credential|cookie|signature|private[-_]?key|"
                           r"(access|api|bearer|hf|session|id|refresh|sas|security)[-_]?token|"
                           r"^(token|key|sig|code|x[-_]api[-_]key)$", re.I)
_SCHEME_VALUE = re.compile(r"^\s*(bearer|basic|token|digest)\s+\S", re.I)


def _is_secret_field(name: object, value: object) -> bool:
    return isinstance(value, str) and (
        (isinstance(name, str) and bool(_SECRET_FIELD.search(name)) and len(value) >= MIN_SECRET)
        or bool(_SCHEME_VALUE.match(value)))


def body_secrets(obj: object) -> list[str]:
    """The credentials in a JSON body (``--extra-body '{"api_key": …}'``, ``{"headers":
    {"Authorization": "Bearer …"}}``): the string values of credential-named fields at any depth,
    and ``Bearer``/``Basic`` values under any name (with their credential part)."""
    out: list[str] = []

    def walk(o: object, depth: int) -> None:
        if depth > 64:
            return
        if isinstance(o, dict):
            for k, v in o.items():
                if _is_secret_field(k, v):
                    out.append(v)
                    if _SCHEME_VALUE.match(v):
                        out.append(v.split(None, 1)[1].strip())
                else:
                    walk(v, depth + 1)
        elif isinstance(o, (list, tuple)):
            for v in o:
                if isinstance(v, str) and _SCHEME_VALUE.match(v):
                    out.extend([v, v.split(None, 1)[1].strip()])
                else:
                    walk(v, depth + 1)

    walk(obj, 0)
    return [x for x in dict.fromkeys(out) if x and len(x) >= MIN_SECRET]


def redact_body(obj: object) -> object:
    """A copy of a JSON body with every credential (``body_secrets``) shown as ``<redacted>``."""
    def walk(o: object, depth: int) -> object:
        if depth > 64:
            return o
        if isinstance(o, dict):
            return {k: (REDACTED if _is_secret_field(k, v) else walk(v, depth + 1)) for k, v in o.items()}
        if isinstance(o, (list, tuple)):
            return [REDACTED if isinstance(v, str) and _SCHEME_VALUE.match(v) else walk(v, depth + 1) for v in o]
        return o

    return walk(obj, 0)


# an option that takes a credential as its value by its whole name (``--token X``, ``-k X``)
_SECRET_SHORT_FLAG = re.compile(r"^--?(token|key|k|password|passwd|pass|secret|sig|signature|code)$", re.I)
# an environment assignment (``env OPENAI_API_KEY=… cmd``) whose variable holds a credential
_SECRET_ENV = re.compile(r"(^|_)(API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASS|PW|AUTH|CREDENTIALS?|COOKIE|SIG|SAS)"
                         r"($|_)", re.I)
_ENV_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
# vendors' key shapes, masked wherever they appear in a command line
_KEY_SHAPE = re.compile(r"\b(sk-[A-Za-z0-9_\-]{8,}|hf_[A-Za-z0-9]{8,}|gh[pousr]_[A-Za-z0-9]{8,}|AKIA[0-9A-Z]{12,}|"
                        r"xox[abprs]-[A-Za-z0-9\-]{8,})")
_HEADER_FLAGS = ("-H", "--header", "--headers")
_HEADER_WORD = re.compile(r"^\s*([A-Za-z][A-Za-z0-9_\-]*):\s*(\S.*)$", re.S)
_SCHEME_CRED = re.compile(r"(?i)\b(?:bearer|basic)\s+([A-Za-z0-9._~+/=\-]{6,})")


def env_secrets(environ: dict[str, str]) -> list[str]:
    """The values of environment variables whose name holds a credential (``OPENAI_API_KEY``,
    ``HF_TOKEN``, ``AWS_SECRET_ACCESS_KEY`` …), ``MIN_HEADER_SECRET`` characters or more: what a
    child that inherits the environment could print."""
    return [v for k, v in environ.items() if _SECRET_ENV.search(k) and v and len(v.strip()) >= MIN_HEADER_SECRET]


class _Argv:
    """One walk over a command line: the words fit to be written, and the secrets they held."""

    def __init__(self) -> None:
        self.secrets: list[str] = []

    def secret(self, value: str) -> str:
        value = value.strip()
        if len(value) >= MIN_SECRET:
            self.secrets.append(value)
            scheme, _, cred = value.partition(" ")
            if cred.strip() and _SCHEME_VALUE.match(value):
                self.secrets.append(cred.strip())
        return MASK

    def header(self, arg: str) -> str:
        """``Name: value`` or ``Name=value`` (vLLM's ``--header``): the value masked when it can
        carry a credential."""
        cut = [i for i in (arg.find(":"), arg.find("=")) if i > 0]
        if not cut:
            return self.word(arg)
        i = min(cut)
        name, sep, value = arg[:i], arg[i], arg[i + 1:]
        if is_secret_header(name, value.strip()):
            self.secret(value)
            return f"{name}{sep}{' ' if sep == ':' else ''}{REDACTED}"
        return f"{name}{sep}{self.word(value)}"

    def word(self, a: str) -> str:
        """A word that is no option's secret value: a JSON object's credential fields, a shell
        string's words, an environment assignment, a URL's credentials and query, a key's shape."""
        s = a.strip()
        if s.startswith("{") and s.endswith("}"):
            try:
                obj = json.loads(s)
            except (ValueError, RecursionError):
                obj = None
            if isinstance(obj, dict):
                found = body_secrets(obj)
                if found:
                    self.secrets += found
                    return json.dumps(redact_body(obj), ensure_ascii=False)
                return a
        h = _HEADER_WORD.match(a)
        if h and is_secret_header(h.group(1), h.group(2)):  # ``'Authorization: Bearer …'`` as one word
            self.secret(h.group(2))
            return f"{h.group(1)}: {REDACTED}"
        m = _ENV_ASSIGN.match(a)
        if m and _SECRET_ENV.search(m.group(1)):
            return f"{m.group(1)}={self.secret(m.group(2))}"
        if any(c.isspace() for c in s) and len(s) < 100_000:  # ``sh -c "curl -H 'Authorization: …' …"``
            try:
                words = shlex.split(a)
            except ValueError:
                words = None
            if words and len(words) > 1:
                inner = self.argv(words)
                if inner != words:
                    return shlex.join(inner)
        if "://" in a:
            self.secrets += url_secrets(a)
            a = redact_url(a) or a
        for k in _KEY_SHAPE.findall(a):
            self.secret(k)
        a = _KEY_SHAPE.sub(MASK, a)
        for cred in _SCHEME_CRED.findall(a):  # ``Bearer …`` anywhere in a word
            self.secret(cred)
        return _SCHEME_CRED.sub(lambda m: m.group(0)[:m.start(1) - m.start(0)] + MASK, a)

    def argv(self, argv: Iterable[str]) -> list[str]:
        out: list[str] = []
        mask_next = header_next = False
        for a in argv:
            a = str(a)
            is_flag = a.startswith("-") and not a.startswith("---") and len(a) > 1
            if mask_next and not is_flag:
                out.append(self.secret(a))
            elif header_next and not is_flag:
                out.append(self.header(a))
            elif is_flag and "=" in a:
                flag, _, value = a.partition("=")
                if flag in _HEADER_FLAGS:
                    out.append(f"{flag}={self.header(value)}")
                elif _SECRET_FLAG.search(flag) or _SECRET_SHORT_FLAG.match(flag):
                    out.append(f"{flag}={self.secret(value)}")
                else:
                    out.append(f"{flag}={self.word(value)}")
            else:
                out.append(self.word(a))
            flag_only = is_flag and "=" not in a
            mask_next = flag_only and bool(_SECRET_FLAG.search(a) or _SECRET_SHORT_FLAG.match(a))
            header_next = flag_only and a in _HEADER_FLAGS
        return out


def redact_argv(argv: Iterable[str]) -> list[str]:
    """A command line fit to be written: an option whose name can carry a credential has its
    value masked (``--api-key X``, ``--api-key=X``, ``--token X``, ``-k X``), a header argument
    (``-H``/``--header``, ``Name: value`` or vLLM's ``Name=value``, also ``--header=…``) has a
    credential-bearing value masked, a JSON argument (GuideLLM's ``--backend-args``) its credential
    fields, an environment assignment (``env OPENAI_API_KEY=… cmd``) its value, a shell string
    (``sh -c "curl -H 'Authorization: …'"``) the same word by word, URLs their credentials and query
    (``redact_url``), and anything shaped like a vendor's key (``sk-…``, ``hf_…``) is masked."""
    return _Argv().argv(argv)


def argv_secrets(argv: Iterable[str]) -> list[str]:
    """The secrets ``redact_argv`` masks: what the command may print, to be scrubbed from its log."""
    w = _Argv()
    w.argv(argv)
    return [s for s in dict.fromkeys(w.secrets) if len(s) >= MIN_SECRET]


def _percent_all(b: bytes) -> str:
    return "".join(f"%{c:02X}" for c in b)


def _json_u(s: str) -> str:
    """Every character as a JSON ``\\uXXXX`` escape (a surrogate pair above U+FFFF)."""
    out = []
    for ch in s:
        o = ord(ch)
        if o > 0xFFFF:
            o -= 0x10000
            out.append(f"\\u{0xD800 + (o >> 10):04x}\\u{0xDC00 + (o & 0x3FF):04x}")
        else:
            out.append(f"\\u{o:04x}")
    return "".join(out)


_PCT = re.compile(r"%[0-9A-F]{2}")


def _b64_forms(b: bytes) -> list[str]:
    """``b`` in base64 (standard and URL-safe alphabets, with and without padding), and the part of
    its encoding that is the same wherever it sits inside a longer base64 text: for each of the three
    alignments, the 4-character groups made of its bytes alone (``Basic base64(user:password)``,
    a JSON document or a header blob that holds the secret, encoded whole)."""
    out: list[str] = []
    for enc in (base64.b64encode, base64.urlsafe_b64encode):
        full = enc(b).decode()
        out += [full, full.rstrip("=")]
        for o in range(3):
            text = enc(b"\0" * o + b).decode()
            first = 1 if o else 0  # the first group holds padding bytes when o > 0
            last = (o + len(b)) // 3  # groups made of bytes up to the end of b
            core = text[4 * first:4 * last]
            if len(core) >= B64_CORE_MIN:
                out.append(core)
    return out


def _encodings(s: str) -> list[str]:
    """The encodings a text travels in: raw; URL-encoded (``quote`` with and without ``/`` kept,
    ``quote_plus``, every byte as ``%XX``, upper- and lower-case hex); JSON-escaped (ASCII and UTF-8,
    ``\\/`` for ``/``, every character as ``\\uXXXX`` in lower- and upper-case hex); HTML
    (``html.escape``, every character as ``&#N;`` and ``&#xN;``); base64 (``_b64_forms``)."""
    b = s.encode("utf-8")
    url = [urllib.parse.quote(s, safe=""), urllib.parse.quote(s), urllib.parse.quote_plus(s), _percent_all(b)]
    url += [_PCT.sub(lambda m: m.group(0).lower(), u) for u in url]
    js = [json.dumps(s)[1:-1], json.dumps(s, ensure_ascii=False)[1:-1]]
    js += [j.replace("/", "\\/") for j in js]
    u = _json_u(s)
    js += [u, re.sub(r"\\u([0-9a-f]{4})", lambda m: "\\u" + m.group(1).upper(), u)]
    htm = [html.escape(s, quote=True), html.escape(s, quote=False), "".join(f"&#{ord(c)};" for c in s),
           "".join(f"&#x{ord(c):x};" for c in s)]
    return [s, *url, *js, *htm, *_b64_forms(b)]


def secret_forms(secret: str) -> list[str]:
    """Every form a secret travels in (``_encodings``); for URL credentials (``user:password``) the
    same for the password alone (the ``Basic`` token is the base64 of the whole). Forms shorter than
    ``MIN_SECRET`` are left out."""
    forms = _encodings(str(secret))
    if isinstance(secret, BasicCredential):
        user, _, pw = secret.partition(":")
        if pw:
            forms += _encodings(pw)
    return [f for f in dict.fromkeys(forms) if f and len(f) >= MIN_SECRET]


def redact_text(text: str | None, secrets: Iterable[str | None]) -> str | None:
    """``text`` with every form of every secret replaced by ``***``."""
    if not text:
        return text
    return Scrubber(secrets).text(text)


_NAME_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # a JSON object key that is a field name
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)

GRAM = 8  # a run of this many characters of a secret (or more) is masked wherever it shows
GRAM_SECRET_CHARS = 8192  # the pieces of a longer secret are taken from its first this many characters
# escapes a piece of a secret can hide in, partly or whole: JSON/JS ``\uXXXX`` (a run, surrogate pairs
# joined) and ``\xNN``; URL ``%XX`` (a run: UTF-8 bytes); HTML ``&#N;``, ``&#xN;``, ``&name;``; JSON's
# short escapes
_ESCAPE = re.compile(r"(?:\\u[0-9a-fA-F]{4})+|(?:\\x[0-9a-fA-F]{2})+|(?:%[0-9a-fA-F]{2})+|&#[0-9]{1,7};"
                     r"|&#[xX][0-9a-fA-F]{1,6};|&[a-zA-Z][a-zA-Z0-9]{1,31};|\\[/\"\\'bfnrt]")
# the longest escape of one character (``\\uD83D\\uDE00``), times GRAM: how far from an escape a
# piece of a secret that holds it can reach
_ESCAPE_REACH = 12 * GRAM
_SHORT_ESCAPES = {"/": "/", '"': '"', "\\": "\\", "'": "'", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def _trie_pattern(words: Iterable[str]) -> str:
    """A regular expression matching any of ``words`` (a trie of alternations: at each position of a
    text the match fails after a character or two, as an Aho–Corasick automaton would)."""
    trie: dict[str, Any] = {}
    for w in words:
        node = trie
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = None

    def walk(node: dict[str, Any]) -> str:
        alts = [re.escape(ch) + walk(node[ch]) for ch in sorted(k for k in node if k)]
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        if "" in node:  # a word ends here and longer ones go on
            return f"(?:{body})?"
        return body

    return walk(trie)


def _decode_escape(m: re.Match[str]) -> list[tuple[str, int]]:
    """One escape (or run of escapes) as (character, length of its escape in the text) pairs; ``[]``
    for an unknown HTML entity (left as it is)."""
    s = m.group(0)
    if s.startswith("\\u"):
        units = [int(s[i + 2:i + 6], 16) for i in range(0, len(s), 6)]
        out: list[tuple[str, int]] = []
        i = 0
        while i < len(units):
            u = units[i]
            if 0xD800 <= u < 0xDC00 and i + 1 < len(units) and 0xDC00 <= units[i + 1] < 0xE000:
                out.append((chr(0x10000 + ((u - 0xD800) << 10) + (units[i + 1] - 0xDC00)), 12))
                i += 2
            else:
                out.append((chr(u), 6))
                i += 1
        return out
    if s[0] in "%\\" and len(s) >= 3 and s[1] != "\\" and (s[0] == "%" or s[1] == "x"):
        step = 3 if s[0] == "%" else 4
        data = bytes(int(s[i + step - 2:i + step], 16) for i in range(0, len(s), step))
        return [(ch, step * len(ch.encode("utf-8", "surrogateescape"))) for ch in data.decode("utf-8", "surrogateescape")]
    if s[0] == "\\":
        return [(_SHORT_ESCAPES[s[1]], 2)]
    if s.startswith("&#"):
        try:
            n = int(s[3:-1], 16) if s[2] in "xX" else int(s[2:-1])
            return [(chr(n), len(s))]
        except (ValueError, OverflowError):
            return []
    ch = html.unescape(s)
    return [(ch, len(s))] if ch != s and len(ch) == 1 else []


def _decoded(text: str, lo: int, hi: int) -> tuple[str, list[int], list[int]] | None:
    """``text[lo:hi]`` with its escapes decoded, and for each decoded character where it starts and
    ends in ``text``; None when the part holds no escape."""
    chars: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    at = lo
    found = False
    for m in _ESCAPE.finditer(text, lo, hi):
        dec = _decode_escape(m)
        if not dec:
            continue
        found = True
        for i in range(at, m.start()):
            chars.append(text[i])
            starts.append(i)
            ends.append(i + 1)
        pos = m.start()
        for ch, n in dec:
            chars.append(ch)
            starts.append(pos)
            ends.append(pos + n)
            pos += n
        at = m.end()
    if not found:
        return None
    for i in range(at, hi):
        chars.append(text[i])
        starts.append(i)
        ends.append(i + 1)
    return "".join(chars), starts, ends


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            if b > out[-1][1]:
                out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


class _Pieces:
    """The pieces of a set of long secrets (``GRAM`` characters or more), compiled once.

    Finding them is two steps, so that a text without any costs one scan or two: anchors — pieces
    of 4 (hex: 8) characters taken every 4 of the secret, of which any run of ``GRAM`` holds one;
    the base64 of every 3 bytes, of which any base64 run of 8 bytes holds one whole — are searched
    in the whole text (lower-cased, and as it is for base64), escapes that decode to a character of a
    secret likewise; then only around each hit are the pieces themselves matched (raw characters in
    any case, hex, base64, and the same text with its escapes decoded)."""

    __slots__ = ("grams", "text_grams", "anchors", "anchors_i", "b64_anchors", "escapes")

    def __init__(self, secrets: Iterable[str]):
        text_g: set[str] = set()
        hex_g: set[str] = set()
        b64_g: set[str] = set()
        text_a: set[str] = set()
        b64_a: set[str] = set()
        chars: set[str] = set()
        for secret in secrets:
            s = str(secret)[:GRAM_SECRET_CHARS]
            low = s.lower()
            texts = {low, low.replace(" ", "+")}  # quote_plus writes a space as +
            text_g |= {t[i:i + GRAM] for t in texts for i in range(len(t) - GRAM + 1)}
            text_a |= {t[i:i + 4] for t in texts for i in range(0, len(t) - 3, 4)}
            b = s.encode("utf-8", "surrogateescape")
            hex_g |= {b[i:i + GRAM].hex() for i in range(len(b) - GRAM + 1)}
            text_a |= {b[i:i + 4].hex() for i in range(0, len(b) - 3, 4)}
            for enc in (base64.b64encode, base64.urlsafe_b64encode):
                b64_g |= {enc(b[i:i + 6]).decode() for i in range(len(b) - 5)}
                b64_a |= {enc(b[i:i + 3]).decode() for i in range(len(b) - 2)}
            chars |= set(s) | set(low) | set(s.upper())
        text_pat = _trie_pattern(text_g)
        # a lookahead: a match at every position a piece starts, overlapping ones too (a run of 12
        # characters of a key is the pieces at 0..4, merged)
        # group 1: a raw or hex piece; group 2: a base64 window
        self.grams = re.compile(f"(?=((?i:{text_pat}|{_trie_pattern(hex_g)}))|({_trie_pattern(b64_g)}))")
        self.text_grams = re.compile(f"(?=({text_pat}))", re.I)
        self.anchors = re.compile(_trie_pattern(text_a))
        self.anchors_i = re.compile(_trie_pattern(text_a), re.I)  # for a text that lower() lengthens
        self.b64_anchors = re.compile(_trie_pattern(b64_a))
        self.escapes = re.compile(_trie_pattern({e for c in chars for e in _escapes_of(c)}))

    def spans(self, text: str, first: bool = False) -> list[tuple[int, int]]:
        """Where pieces show in ``text`` (merged spans; ``first``: stop at the first)."""
        spans: list[tuple[int, int]] = []
        low = text.lower()
        hits = (self.anchors.finditer(low) if len(low) == len(text) else self.anchors_i.finditer(text))
        for hit in itertools.chain(hits, self.b64_anchors.finditer(text)):
            p = hit.start()
            # a raw piece starts at most 4 before its anchor, a hex one 8 (16 long), a base64 one 4 (8 long)
            for m in self.grams.finditer(text, max(0, p - 8), p + 16):
                if m.group(1) is not None:
                    if _public(m.group(1)):
                        continue
                    spans.append(m.span(1))
                else:  # a base64 window: with the last group and padding of the secret's base64 after it
                    a, b = m.span(2)
                    tail = _B64_TAIL.match(text, b)
                    spans.append((a, tail.end() if tail else b))
                if first:
                    return spans
        regions: list[tuple[int, int]] = []
        for m in self.escapes.finditer(text):
            # a piece with an escape in it reaches at most _ESCAPE_REACH characters from it
            a, b = max(0, m.start() - _ESCAPE_REACH), min(len(text), m.end() + _ESCAPE_REACH)
            if regions and a <= regions[-1][1]:
                regions[-1] = (regions[-1][0], max(b, regions[-1][1]))
            else:
                regions.append((a, b))
        for lo, hi in regions:
            dec = _decoded(text, lo, hi)
            if dec is None:
                continue
            chars, starts, ends = dec
            for m in self.text_grams.finditer(chars):
                spans.append((starts[m.start(1)], ends[m.end(1) - 1]))
                if first:
                    return spans
        return _merged(spans)


# Text wattbench itself writes in every file and line (its name: ``wattbench: error:``,
# ``wattbench_version``): an 8-character run of a secret that lies inside it teaches no one anything
# of the secret, and masking it would turn the tool's own words (and result.json's field) into ``***``.
PUBLIC_WORDS = ("wattbench",)


def _public(piece: str) -> bool:
    """Whether a raw piece is part of ``PUBLIC_WORDS`` (case-folded)."""
    low = piece.lower()
    return any(low in w for w in PUBLIC_WORDS)


# what ends a secret's base64 after its last whole window: the group its last bytes share, and padding
_B64_TAIL = re.compile(r"[A-Za-z0-9+/_\-]{0,3}={0,2}")


def _escapes_of(c: str) -> set[str]:
    """The escapes that decode to ``c`` (``_ESCAPE``'s kinds), in lower- and upper-case hex."""
    out: set[str] = set()
    o = ord(c)
    units = [o] if o <= 0xFFFF else [0xD800 + ((o - 0x10000) >> 10), 0xDC00 + ((o - 0x10000) & 0x3FF)]
    for x in ("x", "X"):  # the hex digits in lower and upper case
        out.add("".join(f"\\u{u:04{x}}" for u in units))
        out.add(f"&#x{o:{x}};")
        out.add(f"&#X{o:{x}};")
        for byte in c.encode("utf-8", "surrogateescape"):  # a byte of a run of %XX / \xNN
            out.add(f"%{byte:02{x}}")
            out.add(f"\\x{byte:02{x}}")
    out.add(f"&#{o};")
    out |= {e for e, ch in _NAMED.items() if ch == c}
    return out


# the short escapes _ESCAPE decodes whose character can be in a secret: JSON's and HTML's named ones
_NAMED = {"\\/": "/", '\\"': '"', "\\\\": "\\", "\\'": "'", "\\b": "\b", "\\f": "\f", "\\n": "\n", "\\r": "\r",
          "\\t": "\t", "&amp;": "&", "&lt;": "<", "&gt;": ">", "&quot;": '"', "&apos;": "'"}


class Scrubber:
    """Removes every secret of a set, and every piece of one, replacing it with ``***``.

    A secret of ``GRAM`` (8) characters or more is masked wherever any run of 8 or more of its
    characters shows (a server that echoes the start of a key, a text cut through one), in any
    letter case, in any mix of raw characters and escapes (``\\uXXXX``, ``\\xNN``, ``%XX``, HTML
    entities: a key URL-encoded, JSON-escaped or HTML-escaped, whole or in part), as hex and as
    base64 (``_Pieces``); a shorter one by whole value in every form of ``secret_forms``. The pieces
    are compiled once per ``add``.

    ``text`` for any text (a message, an HTML page), ``json_text`` for JSON (each string literal is
    decoded, scrubbed and re-encoded, so the document stays valid JSON whatever the secret holds),
    ``obj`` for nested dicts/lists, ``found_in`` for a quick test of text or bytes, ``cut`` to cut a
    text after scrubbing it. An empty scrubber returns its input unchanged at the cost of one truth
    test."""

    __slots__ = ("_forms", "_probes", "_bprobes", "_pieces", "secrets")

    def __init__(self, secrets: Iterable[str | None] = ()):
        self.secrets: list[str] = []
        self._forms: list[str] = []
        self._probes: list[str] = []
        self._bprobes: list[bytes] = []
        self._pieces: _Pieces | None = None
        self.add(*secrets)

    def add(self, *secrets: str | None) -> None:
        kept = list(self.secrets)
        for s in secrets:
            if s and len(s) >= MIN_SECRET and s not in kept:
                kept.append(s)
        self._compile(kept)

    def discard(self, *secrets: str) -> None:
        """Stop removing ``secrets`` (a scope that registered them ended: ``scope``)."""
        gone = set(secrets)
        if any(s in gone for s in self.secrets):
            self._compile([s for s in self.secrets if s not in gone])

    def _compile(self, secrets: list[str]) -> None:
        """Search for ``secrets`` from now on. Each search table is built first and then swapped in
        whole, so a thread that scrubs meanwhile uses the old table or the new one, each complete:
        while secrets are added it masks at least the old ones, while some are discarded at least
        those that stay."""
        # a ``<scheme> <credential>`` value (``Bearer sk-…``): the credential's pieces (the scheme and
        # its space are no secret: ``key: sk-…`` keeps its space)
        creds = [s.split(None, 1)[1].strip() if _SCHEME_VALUE.match(s) else s for s in secrets]
        # by whole value: what is too short for pieces (a short credential behind its scheme too)
        short = [s for s, c in zip(secrets, creds) if len(c) < GRAM]
        # a URL credential's password, shorter than GRAM, by whole value (its pieces are too short)
        short += [s.partition(":")[2] for s in secrets if isinstance(s, BasicCredential)
                  and MIN_SECRET <= len(s.partition(":")[2]) < GRAM]
        forms = {f for s in short for f in secret_forms(s)}
        # what a short secret looks like inside JSON text as well (each form's JSON escape)
        probes = forms | {json.dumps(f)[1:-1] for f in forms} | {json.dumps(f, ensure_ascii=False)[1:-1] for f in forms}
        probe_list = sorted((p for p in probes if len(p) >= MIN_SECRET), key=len, reverse=True)
        long = [c for c in dict.fromkeys(creds) if len(c) >= GRAM]
        # a secret inside another (the key inside ``Bearer <key>``, a password inside ``user:password``)
        # has no piece the other's pieces lack: searched once, through the longer
        cut = [str(s)[:GRAM_SECRET_CHARS] for s in long]
        long = [s for s, c in zip(long, cut) if not any(c != o and c in o for o in cut)]
        pieces = _Pieces(long) if long else None
        self.secrets = secrets
        self._forms = sorted(forms, key=len, reverse=True)  # the longest first: a form inside another
        self._probes = probe_list
        self._bprobes = [p.encode("utf-8") for p in probe_list]
        self._pieces = pieces

    def __bool__(self) -> bool:
        return bool(self._forms) or self._pieces is not None

    def _spans(self, text: str, first: bool = False) -> list[tuple[int, int]]:
        return self._pieces.spans(text, first) if self._pieces is not None else []

    def found_in(self, data: str | bytes) -> bool:
        """Whether a secret (any form), or a piece of one, occurs in ``data``."""
        if not self or not data:
            return False
        if isinstance(data, (bytes, bytearray, memoryview)):
            if any(p in data for p in self._bprobes):
                return True
            return bool(self._pieces is not None and self._spans(bytes(data).decode("utf-8", "surrogateescape"), True))
        return any(p in data for p in self._probes) or bool(self._spans(data, True))

    @overload
    def text(self, text: str) -> str: ...

    @overload
    def text(self, text: _T) -> _T: ...

    def text(self, text: object) -> object:
        """``text`` with every form of every secret, and every piece of one, replaced by ``***``
        (non-strings unchanged)."""
        if not self or not text or not isinstance(text, str):
            return text
        spans = self._spans(text)
        if spans:
            parts, at = [], 0
            for a, b in spans:
                parts += [text[at:a], MASK]
                at = b
            parts.append(text[at:])
            text = "".join(parts)
        for form in self._forms:
            if form in text:
                text = text.replace(form, MASK)
        return text

    def whole(self, text: str) -> str:
        """``text`` with every form of every whole secret replaced by ``***`` (pieces left)."""
        for form in self._forms:
            if form in text:
                text = text.replace(form, MASK)
        return text

    def bytes(self, data: bytes) -> bytes:
        """``data`` (a child's output line) with every form of every secret replaced by ``***``."""
        if not self.found_in(data):
            return data
        return self.text(bytes(data).decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")

    @overload
    def cut(self, text: str, limit: int, ellipsis: str = "") -> str: ...

    @overload
    def cut(self, text: _T, limit: int, ellipsis: str = "") -> _T: ...

    def cut(self, text: object, limit: int, ellipsis: str = "") -> object:
        """``text`` scrubbed, then cut to ``limit`` characters (the last one ``ellipsis`` when
        given and something was cut): in this order, so that a secret that straddles the cut leaves
        no piece behind. A text far longer than ``limit`` is first bounded (to ``4 * limit +
        _ESCAPE_REACH``: whatever is masked, what is kept lies in it), so scrubbing 1 MB costs
        nothing when 200 characters are kept."""
        if not isinstance(text, str):
            return text
        bound = 4 * limit + _ESCAPE_REACH
        clean = self.text(text[:bound] if len(text) > bound else text)
        if len(clean) <= limit:
            return clean
        return clean[:max(0, limit - len(ellipsis))] + ellipsis if ellipsis else clean[:limit]

    def json_text(self, text: str) -> str:
        """JSON text with every string literal scrubbed (keys too); the structure is untouched. A
        literal that holds an escaped backslash (``"\\\\u0073k-…"``: a text that held escapes) is
        decoded and searched too. Where only pieces of long secrets can be, the text is searched once
        and only the literals that hold a hit are decoded."""
        if not self or not text:
            return text
        nested = "\\\\u" in text or "\\\\x" in text
        spans = self._spans(text)
        whole = any(p in text for p in self._probes)  # a short secret, by whole value
        if not (spans or whole or (nested and self.found_in(text.replace("\\\\", "\\")))):
            return text
        starts = [a for a, _ in spans]

        def hit(a: int, b: int) -> bool:
            i = bisect.bisect_left(starts, b) - 1  # the last span starting before the literal ends
            return i >= 0 and spans[i][1] > a

        def one(m: re.Match[str]) -> str:
            lit = m.group(0)
            if whole or nested:
                if not (self.found_in(lit) or (nested and ("\\\\u" in lit or "\\\\x" in lit))):
                    return lit
            elif not hit(m.start(), m.end()):
                return lit
            try:
                value = json.loads(lit)
            except ValueError:
                return self.text(lit)
            # an object key that is a plain name (``wattbench_version``, ``output_tokens_per_s``) is the
            # writer's own field, never a place a server echoes a key: a secret that shares eight
            # characters with it (a key holding "wattbench") must not make the file unreadable; the
            # whole secret is still masked there
            key = text[m.end():m.end() + 8].lstrip().startswith(":") and _NAME_KEY.fullmatch(value) is not None
            clean = self.whole(value) if key else self.text(value)
            return lit if clean == value else json.dumps(clean, ensure_ascii=False)

        return _JSON_STRING.sub(one, text)

    def obj(self, o: _T) -> _T:
        """A copy of nested dicts/lists/tuples with every string scrubbed (keys too)."""
        if not self:
            return o
        # each copy has the type of what it copies (a str, dict, list or tuple of scrubbed values)
        if isinstance(o, str):
            return cast(_T, self.text(o))
        if isinstance(o, dict):
            return cast(_T, {self.text(k) if isinstance(k, str) else k: self.obj(v) for k, v in o.items()})
        if isinstance(o, (list, tuple)):
            return cast(_T, type(o)(self.obj(v) for v in o))
        return o


# ---------------------------------------------------------------- the secrets of what runs now
#
# Secrets are registered by scopes: ``with scope(*secrets):`` (a run's key, URL credentials, secret
# headers) masks them in everything written or printed while the block runs — from any thread: the
# sampler's, the scraper's, the feeder's — and no longer once it ends. Scopes nest and may end in any
# order: a secret stays registered while any open scope holds it. ``register_secrets`` adds to the
# newest open scope what it meets while running (a target's query values: ``core.origin.send_query``).
# A scope opened with ``hold=True`` (the CLI's whole command, ``cli.main``) keeps the secrets of the
# scopes that end inside it until it ends itself: the summary a command prints after its run is
# scrubbed of the run's secrets.

_REGISTERED = Scrubber()  # the secrets of every open scope (one object: writers may keep a reference)
_LOCK = threading.Lock()  # scopes open and close from any thread
_COUNTS: dict[str, int] = {}  # secret -> how many open scopes hold it
_OWNED: set[str] = set()  # the secrets the scopes added to _REGISTERED (the only ones they discard)


class _Scope:
    __slots__ = ("secrets", "hold", "ends")

    def __init__(self, secrets: list[str], hold: bool):
        self.secrets = secrets
        self.hold = hold
        self.ends: list[Callable[[], None]] = []  # called when the scope ends (``on_scope_end``)


_OPEN: list[_Scope] = []  # the open scopes, oldest first


def _take(secrets: list[str]) -> None:
    """Count ``secrets`` as held once more; those held by no scope before are added (under _LOCK)."""
    fresh: list[str] = []
    for s in secrets:
        _COUNTS[s] = _COUNTS.get(s, 0) + 1
        if _COUNTS[s] == 1 and s not in _REGISTERED.secrets:
            fresh.append(s)
            _OWNED.add(s)
    if fresh:
        _REGISTERED.add(*fresh)


def _release(secrets: list[str]) -> None:
    """Count ``secrets`` as held once less; those no scope holds any more are discarded (under _LOCK)."""
    gone: list[str] = []
    for s in secrets:
        n = _COUNTS.get(s, 0) - 1
        if n > 0:
            _COUNTS[s] = n
            continue
        _COUNTS.pop(s, None)
        if s in _OWNED:
            _OWNED.discard(s)
            gone.append(s)
    if gone:
        _REGISTERED.discard(*gone)


@contextlib.contextmanager
def scope(*secrets: str | None, hold: bool = False) -> Iterator[Scrubber]:
    """Register ``secrets`` while the block runs (see above); yields the scrubber of every open
    scope's secrets (``registered()``). ``hold``: the secrets of scopes that end inside this one stay
    registered until this one ends."""
    own = _Scope([s for s in dict.fromkeys(secrets) if s and len(s) >= MIN_SECRET], hold)
    with _LOCK:
        _OPEN.append(own)
        _take(own.secrets)
    try:
        yield _REGISTERED
    finally:
        with _LOCK:
            _OPEN[:] = [o for o in _OPEN if o is not own]
            holder = next((o for o in reversed(_OPEN) if o.hold), None)
            if holder is not None:  # kept by the scope that holds what ends inside it (counted once)
                kept = set(holder.secrets)
                holder.secrets += [s for s in own.secrets if s not in kept]
                _release([s for s in own.secrets if s in kept])
            else:
                _release(own.secrets)
        for end in own.ends:  # what the scope held besides secrets (outside the lock: each takes its own)
            end()


def on_scope_end(end: Callable[[], None]) -> bool:
    """Call ``end`` when the newest open scope ends (what runs now holds besides secrets, and must
    let go of with them: a target's query string, ``core.origin.send_query``); a holding scope keeps
    only secrets, so ``end`` runs when the scope it was given to ends. False, and ``end`` is never
    called, outside every scope."""
    with _LOCK:
        if not _OPEN:
            return False
        _OPEN[-1].ends.append(end)
    return True


def register_secrets(*secrets: str | None) -> None:
    """Add ``secrets`` to the newest open scope (what runs now met them: a target URL's query
    values): registered until that scope ends. Outside every scope nothing is registered: each
    command scopes what it runs (``cli.main``'s holding scope; a run, measure, doctor, monitor and
    agree each open one with their target's secrets)."""
    fresh = [s for s in dict.fromkeys(secrets) if s and len(s) >= MIN_SECRET]
    with _LOCK:
        if not _OPEN:
            return
        newest = _OPEN[-1]
        fresh = [s for s in fresh if s not in newest.secrets]
        newest.secrets += fresh
        _take(fresh)


def registered() -> Scrubber:
    """The scrubber of the secrets every open scope holds (the same object while the process runs:
    a writer may keep it, and it scrubs what is registered when it writes)."""
    return _REGISTERED


@overload
def scrub(text: str) -> str: ...


@overload
def scrub(text: _T) -> _T: ...


def scrub(text: object) -> object:
    """``text`` without any registered secret (non-strings unchanged)."""
    return _REGISTERED.text(text)


@overload
def clip(text: str, limit: int, ellipsis: str = "") -> str: ...


@overload
def clip(text: _T, limit: int, ellipsis: str = "") -> _T: ...


def clip(text: object, limit: int, ellipsis: str = "") -> object:
    """Untrusted ``text`` cut to ``limit`` characters (the last one ``ellipsis`` when given and
    something was cut), scrubbed of every registered secret first (``Scrubber.cut``): the one way
    text a server, a file or a child wrote is cut (non-strings unchanged)."""
    return _REGISTERED.cut(text, limit, ellipsis)


_safe_text.use_cut(clip)  # safe_text.term cuts by this rule too (scrubbed first)


class _ScrubbingStream:
    """A text stream whose ``write`` removes ``scrubber``'s secrets; everything else is the
    wrapped stream's (``isatty``, ``fileno``, ``encoding`` …). Its ``buffer`` scrubs bytes too."""

    def __init__(self, raw: TextIO, scrubber: Scrubber):
        self._raw = raw
        self._scrubber = scrubber
        try:
            self._tty = bool(raw.isatty())
        except (AttributeError, ValueError, OSError):
            self._tty = False

    def write(self, s: str) -> int:
        if isinstance(s, str):
            if self._scrubber:
                s = self._scrubber.text(s)
            s = terminal_safe(s, self._tty)  # no control sequence a printer never writes (core/safe_text.py)
        return self._raw.write(s)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    @property
    def buffer(self) -> _ScrubbingBuffer | None:
        raw = getattr(self._raw, "buffer", None)
        return _ScrubbingBuffer(raw, self._scrubber, self._tty) if raw is not None else None

    def __getattr__(self, name: str) -> Any:  # the wrapped stream's
        return getattr(self._raw, name)


class _ScrubbingBuffer:
    def __init__(self, raw: BinaryIO, scrubber: Scrubber, tty: bool = False):
        self._raw = raw
        self._scrubber = scrubber
        self._tty = tty

    def write(self, b: bytes) -> int:
        b = self._scrubber.bytes(b) if self._scrubber else b
        text = bytes(b).decode("utf-8", "surrogateescape")
        safe = terminal_safe(text, self._tty)
        return self._raw.write(b if safe is text else safe.encode("utf-8", "surrogateescape"))

    def __getattr__(self, name: str) -> Any:  # the wrapped stream's
        return getattr(self._raw, name)


@contextlib.contextmanager
def guard_std_streams(scrubber: Scrubber | None = None) -> Iterator[None]:
    """``sys.stdout`` and ``sys.stderr`` scrub ``scrubber``'s secrets (None: the registered ones,
    those of every open ``scope``) while the block runs (the CLI's whole command: tables,
    ``--json``, error lines, even a traceback). A secret registered while the block runs is
    scrubbed from then on, and until its scope ends."""
    scrubber = _REGISTERED if scrubber is None else scrubber
    saved = sys.stdout, sys.stderr
    if not isinstance(sys.stdout, _ScrubbingStream) and sys.stdout is not None:
        sys.stdout = _ScrubbingStream(sys.stdout, scrubber)
    if not isinstance(sys.stderr, _ScrubbingStream) and sys.stderr is not None:
        sys.stderr = _ScrubbingStream(sys.stderr, scrubber)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def combine_credentials(url: str, api_key: str | None) -> tuple[str, str | None]:
    """The target URL without credentials and the one credential its requests carry.

    Raises ``UserError`` (one line) when the URL carries credentials and an API key is given too.
    """
    clean, cred = split_url_credentials(url)
    if cred is not None and api_key:
        raise UserError(f"--target {redact_url(url)} carries credentials (user:password@) and an API key was given "
                        "too (--api-key, WATTBENCH_API_KEY or OPENAI_API_KEY); a request carries one Authorization "
                        "header: give one of the two")
    return clean or url, (cred if cred is not None else api_key)
