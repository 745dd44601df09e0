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
- ``redact_argv(argv)`` -> a command line (``wattbench measure -- COMMAND``) with the value of every
  credential-named option (``--api-key X``, ``--api-key=X``, ``--header "Authorization: …"``) and
  the credentials of every URL masked;
- ``authorization(key)`` -> the ``Authorization`` header value of a key or a credential (the one
  place that spells ``Bearer``/``Basic``);
- ``secret_values(key, headers, marked)`` -> every configured secret: the key (or URL credential),
  the values of headers that can carry a credential (``is_secret_header``, at least
  ``MIN_HEADER_SECRET`` characters) or that the user marked (``--secret-header NAME``), and the
  credential part of ``Bearer …``/``Basic …`` values;

Where the secrets go from here, one module each: ``core/secret_forms.py`` (every encoding a secret
travels in: ``secret_forms``), ``core/scrubber.py`` (the ``Scrubber`` that removes every form of a
set of secrets, and every piece of one, from any text; ``redact_text``) and ``core/secret_scope.py``
(the secrets registered for the lifetime of what registered them — ``scope``, ``registered``,
``scrub``, ``clip`` — and the CLI's guarded stdout and stderr).

A key and URL credentials together are refused in one line (``combine_credentials``): a request
carries one ``Authorization`` header.
"""

from __future__ import annotations

import base64
import json
import re
import shlex
import urllib.parse
from typing import Iterable
from urllib.parse import urlsplit, urlunsplit

from wattbench.core.errors import UserError

__all__ = ["BasicCredential", "split_url_credentials", "redact_url", "redact_headers", "authorization",
           "authorization_header", "combine_credentials", "is_secret_header", "redact_argv", "secret_values",
           "url_secrets", "body_secrets", "redact_body", "argv_secrets", "env_secrets", "is_secret_setting",
           "MASK", "REDACTED", "MIN_SECRET", "MIN_HEADER_SECRET", "SCHEME_VALUE"]

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
# a ``<scheme> <credential>`` value (``Bearer sk-…``): its credential is a secret of its own (the
# scrubber searches the credential's pieces, not the scheme's)
SCHEME_VALUE = re.compile(r"^\s*(bearer|basic|token|digest)\s+\S", re.I)


def _is_secret_field(name: object, value: object) -> bool:
    return isinstance(value, str) and (
        (isinstance(name, str) and bool(_SECRET_FIELD.search(name)) and len(value) >= MIN_SECRET)
        or bool(SCHEME_VALUE.match(value)))


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
                    if SCHEME_VALUE.match(v):
                        out.append(v.split(None, 1)[1].strip())
                else:
                    walk(v, depth + 1)
        elif isinstance(o, (list, tuple)):
            for v in o:
                if isinstance(v, str) and SCHEME_VALUE.match(v):
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
            return [REDACTED if isinstance(v, str) and SCHEME_VALUE.match(v) else walk(v, depth + 1) for v in o]
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
            if cred.strip() and SCHEME_VALUE.match(value):
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
