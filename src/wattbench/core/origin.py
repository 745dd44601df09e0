"""Requests stay with their origin: the one home of wattbench's redirect rule.

Every HTTP request wattbench makes carries something of the user's: the API key (``Authorization:
Bearer``), credentials from a target URL (``Basic``), a ``--header``, a BMC password. A server
that answers with a redirect to another host must not receive them there, and must not move a
benchmark to another host silently. So no client follows redirects on its own
(``allow_redirects=False`` in aiohttp, a refusing handler in urllib); this module does, by one rule:

- a redirect (301, 302, 303, 307, 308 with a ``Location``) to the **same origin** (scheme, host and
  port) is followed, at most ``MAX_REDIRECTS`` hops, each appended to the caller's ``redirects``
  list as ``"<METHOD> <from> -> <to> (HTTP <status>)"`` (the run records those of its target in
  ``result.json``'s ``server.redirects``). 303, and 301/302 after a POST, continue as a GET
  without the body (as browsers and aiohttp do); 307/308 repeat the request with its body;
- a redirect to **another origin** is refused before anything is sent there:
  ``CrossOriginRedirect`` (a ``TargetError``: one line naming both origins, exit 2). A client
  that turns failures into records (the load's streaming client) records it as that request's
  ``http_<status>`` failure instead.

``request(session, method, url, ...)`` is the aiohttp form (an async context manager yielding the
final response), ``urlopen(req, ...)`` the urllib form (``urllib.request.urlopen``'s signature).
- a redirect whose ``Location`` carries credentials (``http://user:password@same-host/…``) is
  refused as well (``CredentialRedirect``, a ``CrossOriginRedirect``): a request carries the
  credentials the user gave, never ones a server names (aiohttp would refuse to combine them with
  the ``Authorization`` header, with a traceback). A ``Location`` the parser refuses is refused.

A target's query string (``-t 'https://h/openai/v1?sig=…&api-version=2024-06-01'``: Azure's
version, a SAS signature, a Functions ``code``) is part of the target, not of its base URL:
``send_query(url)`` registers it for the URL's origin, and ``request``/``urlopen`` add it to every
request to that origin — each same-origin hop too — and to no other (a sensor, an exporter, another
target); its values but the harmless ones are registered as secrets (``redact.url_secrets``), so
nothing written or printed holds them. A parameter the request's URL already has is not repeated.
The query is held for as long as the ``secret_scope.scope`` open when it was given (``secret_scope.on_scope_end``:
the run's session, a command's): when that run ends its target's query is sent no more and kept
nowhere, so a long-lived process (the monitor, a notebook running many runs, a test session) holds
only the queries of what runs now. The registry is the process's own: a process that sends for
this one (a spawned load worker, a Ray load actor on another node) gets the query with its target
(``TargetSpec.query``, read here by ``target_query``) and registers it in turn, for as long as it
sends (``load.client.sending_for``).

URLs are judged by the HTTP client's own parser (``yarl.URL``, the WHATWG-style reading aiohttp
sends with), never by ``urllib.parse`` (which reads ``http://a\\@b/`` as another host than a
browser does): ``request`` parses each URL once and sends the very ``URL`` object it judged;
``urlopen`` (urllib sends with its own parser) refuses a redirect that ``urllib.parse`` would read
as another origin than yarl does. Credentials in URLs are stripped by
``redact.split_url_credentials`` before a request is built; messages show URLs through
``redact.redact_url``.
"""

from __future__ import annotations

import contextlib
import http.client
import ssl
import threading
import urllib.request
import urllib.response
from typing import IO, TYPE_CHECKING, Any, AsyncIterator
from urllib.parse import urlsplit

from yarl import URL

from wattbench.core.errors import TargetError
from wattbench.core.redact import redact_url, url_secrets
from wattbench.core.secret_scope import on_scope_end, register_secrets

if TYPE_CHECKING:  # for the annotations only: a urllib-only caller need not load aiohttp
    import aiohttp

__all__ = ["REDIRECT_STATUSES", "MAX_REDIRECTS", "CrossOriginRedirect", "CredentialRedirect", "TooManyRedirects",
           "origin", "parse_url",
           "same_origin", "next_hop", "request", "read_body", "urlopen", "send_query", "target_query", "held_queries", "forget_queries",
           "with_query"]

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
MAX_REDIRECTS = 5  # same-origin hops; a loop ends here with TooManyRedirects
_DEFAULT_PORTS = {"http": 80, "https": 443}
# what urllib's opener returns: the HTTP(S) handlers an ``HTTPResponse``, the file/data/ftp ones an
# ``addinfourl`` (typeshed says ``Any``)
_UrllibResponse = http.client.HTTPResponse | urllib.response.addinfourl


def parse_url(url: "str | URL") -> URL | None:
    """``url`` as the HTTP client reads it (``yarl.URL``); None when it refuses it."""
    if isinstance(url, URL):
        return url
    try:
        return URL(str(url).strip())
    except (ValueError, TypeError):
        return None


def origin(url: "str | URL") -> tuple[str, str, int | None]:
    """``(scheme, host, port)`` of a URL as the HTTP client reads it (``yarl``), lower-cased, the
    default port filled in; ``("", url, None)`` for a URL it refuses or a relative one."""
    u = parse_url(url)
    if u is None or not u.is_absolute():
        return ("", str(url), None)
    scheme = (u.scheme or "").lower()
    try:
        port = u.port
    except ValueError:
        return ("", str(url), None)
    return scheme, (u.host or "").lower(), port if port is not None else _DEFAULT_PORTS.get(scheme)


def _urllib_origin(url: str) -> tuple[str, str, int | None]:
    """The origin ``urllib`` would send a request to (its own parser)."""
    try:
        p = urlsplit(str(url))
        port = p.port
    except ValueError:
        return ("", str(url), None)
    scheme = (p.scheme or "").lower()
    return scheme, (p.hostname or "").lower(), port if port is not None else _DEFAULT_PORTS.get(scheme)


# origin -> the raw query its target's URL carried (``send_query``): the newest of ``_HELD``'s for
# each origin, rebuilt whenever one is added or released (read without the lock: a dict swapped whole)
_TARGET_QUERIES: dict[tuple[str, str, int | None], str] = {}
# (what holds it, origin, raw query), oldest first: each entry lives as long as the ``secret_scope.scope``
# that was open when ``send_query`` gave it (a run's session, a load worker's ``sending_for``)
_HELD: list[tuple[object, tuple[str, str, int | None], str]] = []
_HELD_LOCK = threading.Lock()


def _rebuild() -> None:
    """``_TARGET_QUERIES`` from ``_HELD`` (under ``_HELD_LOCK``): for each origin its newest query."""
    global _TARGET_QUERIES
    _TARGET_QUERIES = {o: q for _, o, q in _HELD}


def _let_go(holder: object) -> None:
    """Its scope ended: the queries ``holder`` gave are sent no more."""
    with _HELD_LOCK:
        _HELD[:] = [h for h in _HELD if h[0] is not holder]
        _rebuild()


def send_query(url: str | None) -> None:
    """Send the query of a target ``url`` (raw, as given) with every request to its origin while the
    newest open ``secret_scope.scope`` lasts (the run's session, a load worker's ``sending_for``, a
    command's): when that scope ends, the query is no longer sent, and kept nowhere. Its secret
    values are registered in that scope (``secret_scope.register_secrets``). Outside every scope nothing is
    sent (nothing would scrub its values from what is written). A URL without a query: nothing."""
    u = parse_url(url) if url else None
    if u is None or not u.is_absolute():
        return
    try:
        query = urlsplit(str(url).strip()).query  # as given (yarl would decode %2F in it)
    except ValueError:
        return
    if not query:
        return
    o = origin(u)
    if not o[0]:
        return
    holder = object()
    if not on_scope_end(lambda: _let_go(holder)):
        return
    register_secrets(*url_secrets(str(url)))  # each time: the scope open now may be another run's
    with _HELD_LOCK:
        _HELD.append((holder, o, query))
        _rebuild()


def target_query(url: "str | URL") -> str:
    """The query ``send_query`` registered for ``url``'s origin, raw ('' when none): what every
    request to it carries. A process that sends for this one (a spawned load worker, a Ray load
    actor) is handed it with the target (``TargetSpec.query``) and registers it there."""
    queries = _TARGET_QUERIES
    if not queries:
        return ""
    u = parse_url(url)
    return queries.get(origin(u), "") if u is not None and u.is_absolute() else ""


def held_queries() -> int:
    """How many target queries the open scopes hold (0 once every run that gave one has ended)."""
    with _HELD_LOCK:
        return len(_HELD)


def forget_queries() -> None:
    """No target query is sent any more, whichever scope gave it (a test that starts clean)."""
    with _HELD_LOCK:
        _HELD.clear()
        _rebuild()


def _names(query: str) -> set[str]:
    return {part.partition("=")[0] for part in query.replace(";", "&").split("&") if part}


def with_query(url: "str | URL") -> "str | URL":
    """``url`` with its origin's target query added (``send_query``): the parameters it lacks, in
    the order given; unchanged for another origin or one without a query."""
    queries = _TARGET_QUERIES
    if not queries:
        return url
    u = parse_url(url)
    if u is None or not u.is_absolute():
        return url
    query = queries.get(origin(u))
    if not query:
        return url
    have = _names(u.raw_query_string)  # (names: what yarl may decode in a value does not matter)
    add = "&".join(p for p in query.replace(";", "&").split("&") if p and p.partition("=")[0] not in have)
    if not add:
        return url
    text = str(u.with_fragment(None))
    joined = text + ("&" if u.raw_query_string else "?") + add
    return URL(joined, encoded=True) if isinstance(url, URL) else joined


def _shown(o: tuple[str, str, int | None]) -> str:
    scheme, host, port = o
    if ":" in host:
        host = f"[{host}]"
    return f"{scheme}://{host}" + (f":{port}" if port is not None else "")


def same_origin(a: "str | URL", b: "str | URL") -> bool:
    return origin(a) == origin(b)


class CrossOriginRedirect(TargetError):
    """A server redirected a request to another origin; nothing was sent there."""

    def __init__(self, url: str, location: str, status: int):
        self.url, self.location, self.status = url, location, status
        super().__init__(
            f"{redact_url(url)} redirects (HTTP {status}) to another host, {redact_url(location)}: wattbench "
            f"sends requests and credentials only to the origin it was given ({_shown(origin(url))}, not "
            f"{_shown(origin(location))}); point the URL at the server that answers")


class CredentialRedirect(CrossOriginRedirect):
    """A redirect whose ``Location`` names credentials (``user:password@``) or that the HTTP
    client's parser cannot read; nothing was sent there."""

    def __init__(self, url: str, location: str, status: int, why: str = "with credentials in it (user:password@)"):
        self.url, self.location, self.status = url, location, status
        TargetError.__init__(
            self, f"{redact_url(url)} redirects (HTTP {status}) to {redact_url(location) or '<no URL>'} {why}: "
                  "wattbench sends only the credentials it was given, and only to the URL it was given; point the "
                  "URL at the server that answers")


class TooManyRedirects(TargetError):
    """More than ``MAX_REDIRECTS`` same-origin hops (a loop)."""

    def __init__(self, url: str, hops: int, status: int | None = None):
        self.url, self.status = url, status
        super().__init__(f"{redact_url(url)} redirected {hops} times within its own host; give the final URL")


def redirect_hop(url: "str | URL", status: int, location: str | None) -> URL | None:
    """Where a response sends the client next, as the ``URL`` it will be sent to: ``None`` when it
    is not a redirect (or names no ``Location``), the absolute URL when it stays on ``url``'s origin
    with no credentials in it; another origin raises ``CrossOriginRedirect``, credentials in the
    ``Location`` (or one the parser refuses) ``CredentialRedirect``."""
    if status not in REDIRECT_STATUSES or not location:
        return None
    base = parse_url(url)
    loc = parse_url(location)
    try:
        target = base.join(loc) if base is not None and loc is not None else None
    except ValueError:
        target = None
    if base is None or target is None or not target.is_absolute():  # base None: target is None too
        raise CredentialRedirect(str(url), location, status, "that the HTTP client cannot read")
    if not same_origin(base, target):
        raise CrossOriginRedirect(str(url), str(target), status)
    if target.user is not None or target.password is not None or "@" in (target.raw_authority or ""):
        raise CredentialRedirect(str(url), str(target), status)
    return target


def next_hop(url: "str | URL", status: int, location: str | None) -> str | None:
    """``redirect_hop`` as a string (the urllib form)."""
    target = redirect_hop(url, status, location)
    return None if target is None else str(target)


def _hop_method(status: int, method: str) -> tuple[str, bool]:
    """The method of the next hop and whether the body goes with it."""
    if (status == 303 and method != "HEAD") or (status in (301, 302) and method == "POST"):
        return "GET", False
    return method, True


@contextlib.asynccontextmanager
async def request(session: aiohttp.ClientSession, method: str, url: "str | URL", *,
                  redirects: list[str] | None = None, **kw: Any) -> AsyncIterator[aiohttp.ClientResponse]:
    """``async with request(session, "POST", url, json=...) as resp:`` — aiohttp's
    ``session.request`` under the redirect rule: same-origin hops followed (recorded in
    ``redirects``), another origin refused (``CrossOriginRedirect``), the final response yielded
    and released afterwards. aiohttp's own errors propagate."""
    kw["allow_redirects"] = False
    method = method.upper()
    parsed = parse_url(url)
    if parsed is not None and parsed.is_absolute():
        url = parsed  # judged and sent as one parsed URL (aiohttp takes the yarl.URL as it is)
    for _ in range(MAX_REDIRECTS + 1):
        url = with_query(url)  # the target's query string, on every request to it (send_query)
        resp = await session.request(method, url, **kw)
        try:
            hop = redirect_hop(url, resp.status, resp.headers.get("Location"))
        except BaseException:
            resp.release()
            raise
        if hop is None:
            try:
                yield resp
            finally:
                resp.release()
            return
        resp.release()
        if redirects is not None:
            redirects.append(f"{method} {redact_url(str(url))} -> {redact_url(str(hop))} (HTTP {resp.status})")
        method, keep_body = _hop_method(resp.status, method)
        if not keep_body:
            kw.pop("data", None)
            kw.pop("json", None)
        url = hop
    raise TooManyRedirects(str(url), MAX_REDIRECTS, resp.status)


async def read_body(resp: aiohttp.ClientResponse, limit: int) -> bytes:
    """At most ``limit`` bytes of an aiohttp response's body (the rest is left unread: releasing
    the response closes the connection). A hostile server's endless body costs ``limit`` bytes."""
    parts: list[bytes] = []
    n = 0
    while n < limit:
        chunk = await resp.content.read(limit - n)
        if not chunk:
            break
        parts.append(chunk)
        n += len(chunk)
    return b"".join(parts)


class _SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """urllib's redirect handler under the rule: same origin followed (307/308 with the body),
    another origin refused before its request is built."""

    max_redirections = MAX_REDIRECTS

    def __init__(self, redirects: list[str] | None = None):
        self.redirects = redirects

    def http_error_302(self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str,
                       headers: http.client.HTTPMessage) -> _UrllibResponse | None:
        loc = headers.get("location") or headers.get("uri")
        if loc:  # before urllib's own checks: another origin (a file: URL too) is refused first
            try:
                next_hop(req.full_url, code, loc)
            except CrossOriginRedirect:
                fp.close()
                raise
        return super().http_error_302(req, fp, code, msg, headers)

    http_error_301 = http_error_303 = http_error_307 = http_error_308 = http_error_302

    def redirect_request(self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str,
                         headers: http.client.HTTPMessage, newurl: str) -> urllib.request.Request | None:
        try:
            hop = next_hop(req.full_url, code, newurl)  # raises for another origin
            if hop is not None and _urllib_origin(hop) != origin(hop):  # urllib would read another host
                raise CredentialRedirect(req.full_url, hop, code, "that urllib and the HTTP client read as "
                                                                  "different hosts")
        except CrossOriginRedirect:
            fp.close()
            raise
        if hop is None:
            return None
        method, keep_body = _hop_method(code, req.get_method())
        if self.redirects is not None:
            self.redirects.append(f"{req.get_method()} {redact_url(req.full_url)} -> {redact_url(hop)} "
                                  f"(HTTP {code})")
        hdrs = {k: v for k, v in req.header_items()
                if keep_body or k.lower() not in ("content-length", "content-type")}
        return urllib.request.Request(str(with_query(hop)), data=req.data if keep_body else None, headers=hdrs,
                                      origin_req_host=req.origin_req_host, unverifiable=True, method=method)


def urlopen(req: urllib.request.Request | str, timeout: float | None = None, *, context: ssl.SSLContext | None = None,
            redirects: list[str] | None = None) -> _UrllibResponse:
    """``urllib.request.urlopen`` under the redirect rule (``context``: an ``ssl.SSLContext`` for
    HTTPS). Raises what urlopen raises, and ``CrossOriginRedirect``/``TooManyRedirects``."""
    handlers: list[urllib.request.BaseHandler] = [_SameOriginRedirects(redirects)]
    if context is not None:
        handlers.append(urllib.request.HTTPSHandler(context=context))
    opener = urllib.request.build_opener(*handlers)
    if isinstance(req, str):
        req = urllib.request.Request(req)
    if _TARGET_QUERIES:
        req.full_url = str(with_query(req.full_url))  # the target's query string (send_query)
    try:
        resp: _UrllibResponse = opener.open(req, timeout=timeout) if timeout is not None else opener.open(req)
        return resp
    except urllib.request.HTTPError as e:
        if e.code in REDIRECT_STATUSES and "infinite loop" in str(e.msg):
            raise TooManyRedirects(req.full_url, MAX_REDIRECTS, e.code) from None
        raise
