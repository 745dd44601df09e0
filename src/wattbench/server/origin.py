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
Credentials in URLs are stripped by ``redact.split_url_credentials`` before a request is built;
messages show URLs through ``redact.redact_url``.
"""

from __future__ import annotations

import contextlib
import urllib.request
from typing import Any, AsyncIterator
from urllib.parse import urljoin, urlsplit

from wattbench.errors import TargetError
from wattbench.server.redact import redact_url

__all__ = ["REDIRECT_STATUSES", "MAX_REDIRECTS", "CrossOriginRedirect", "TooManyRedirects", "origin",
           "same_origin", "next_hop", "request", "read_body", "urlopen"]

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
MAX_REDIRECTS = 5  # same-origin hops; a loop ends here with TooManyRedirects
_DEFAULT_PORTS = {"http": 80, "https": 443}


def origin(url: str) -> tuple[str, str, int | None]:
    """``(scheme, host, port)`` of a URL, lower-cased, the default port filled in."""
    try:
        p = urlsplit(str(url))
        port = p.port
    except ValueError:
        return ("", str(url), None)
    scheme = (p.scheme or "").lower()
    return scheme, (p.hostname or "").lower(), port if port is not None else _DEFAULT_PORTS.get(scheme)


def _shown(o: tuple[str, str, int | None]) -> str:
    scheme, host, port = o
    if ":" in host:
        host = f"[{host}]"
    return f"{scheme}://{host}" + (f":{port}" if port is not None else "")


def same_origin(a: str, b: str) -> bool:
    return origin(a) == origin(b)


class CrossOriginRedirect(TargetError):
    """A server redirected a request to another origin; nothing was sent there."""

    def __init__(self, url: str, location: str, status: int):
        self.url, self.location, self.status = url, location, status
        super().__init__(
            f"{redact_url(url)} redirects (HTTP {status}) to another host, {redact_url(location)}: wattbench "
            f"sends requests and credentials only to the origin it was given ({_shown(origin(url))}, not "
            f"{_shown(origin(location))}); point the URL at the server that answers")


class TooManyRedirects(TargetError):
    """More than ``MAX_REDIRECTS`` same-origin hops (a loop)."""

    def __init__(self, url: str, hops: int, status: int | None = None):
        self.url, self.status = url, status
        super().__init__(f"{redact_url(url)} redirected {hops} times within its own host; give the final URL")


def next_hop(url: str, status: int, location: str | None) -> str | None:
    """Where a response sends the client next: ``None`` when it is not a redirect (or names no
    ``Location``), the absolute URL when it stays on ``url``'s origin; a redirect to another origin
    raises ``CrossOriginRedirect``."""
    if status not in REDIRECT_STATUSES or not location:
        return None
    target = urljoin(str(url), location.strip())
    if not same_origin(str(url), target):
        raise CrossOriginRedirect(str(url), target, status)
    return target


def _hop_method(status: int, method: str) -> tuple[str, bool]:
    """The method of the next hop and whether the body goes with it."""
    if (status == 303 and method != "HEAD") or (status in (301, 302) and method == "POST"):
        return "GET", False
    return method, True


@contextlib.asynccontextmanager
async def request(session: Any, method: str, url: str, *, redirects: list[str] | None = None,
                  **kw: Any) -> AsyncIterator[Any]:
    """``async with request(session, "POST", url, json=...) as resp:`` — aiohttp's
    ``session.request`` under the redirect rule: same-origin hops followed (recorded in
    ``redirects``), another origin refused (``CrossOriginRedirect``), the final response yielded
    and released afterwards. aiohttp's own errors propagate."""
    kw["allow_redirects"] = False
    method = method.upper()
    for _ in range(MAX_REDIRECTS + 1):
        resp = await session.request(method, url, **kw)
        try:
            hop = next_hop(url, resp.status, resp.headers.get("Location"))
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
            redirects.append(f"{method} {redact_url(url)} -> {redact_url(hop)} (HTTP {resp.status})")
        method, keep_body = _hop_method(resp.status, method)
        if not keep_body:
            kw.pop("data", None)
            kw.pop("json", None)
        url = hop
    raise TooManyRedirects(url, MAX_REDIRECTS, resp.status)


async def read_body(resp: Any, limit: int) -> bytes:
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

    def http_error_302(self, req, fp, code, msg, headers):
        loc = headers.get("location") or headers.get("uri")
        if loc:  # before urllib's own checks: another origin (a file: URL too) is refused first
            try:
                next_hop(req.full_url, code, loc)
            except CrossOriginRedirect:
                fp.close()
                raise
        return super().http_error_302(req, fp, code, msg, headers)

    http_error_301 = http_error_303 = http_error_307 = http_error_308 = http_error_302

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        try:
            hop = next_hop(req.full_url, code, newurl)  # raises for another origin
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
        return urllib.request.Request(hop, data=req.data if keep_body else None, headers=hdrs,
                                      origin_req_host=req.origin_req_host, unverifiable=True, method=method)


def urlopen(req: urllib.request.Request | str, timeout: float | None = None, *, context: Any = None,
            redirects: list[str] | None = None):
    """``urllib.request.urlopen`` under the redirect rule (``context``: an ``ssl.SSLContext`` for
    HTTPS). Raises what urlopen raises, and ``CrossOriginRedirect``/``TooManyRedirects``."""
    handlers: list[Any] = [_SameOriginRedirects(redirects)]
    if context is not None:
        handlers.append(urllib.request.HTTPSHandler(context=context))
    opener = urllib.request.build_opener(*handlers)
    if isinstance(req, str):
        req = urllib.request.Request(req)
    try:
        return opener.open(req, timeout=timeout) if timeout is not None else opener.open(req)
    except urllib.request.HTTPError as e:
        if e.code in REDIRECT_STATUSES and "infinite loop" in str(e.msg):
            raise TooManyRedirects(req.full_url, MAX_REDIRECTS, e.code) from None
        raise
