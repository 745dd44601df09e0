"""The redirect rule (``core/origin.py``): same host followed and recorded, another host refused
before anything is sent there — in both forms every client uses (urllib and aiohttp)."""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from wattbench.core.errors import TargetError
from wattbench.core import origin


class _Server:
    """127.0.0.1 HTTP server: ``routes`` path -> (status, location or None); logs every request."""

    def __init__(self, routes: dict):
        self.routes = routes
        self.log: list[dict] = []
        outer = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _any(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                outer.log.append({"method": self.command, "path": self.path, "body": body.decode(),
                                  "auth": self.headers.get("Authorization"), "key": self.headers.get("X-Api-Key")})
                path = self.path.split("?", 1)[0]
                key = "/cross" if path.startswith("/cross/") else path  # /cross/models too
                status, loc = outer.routes.get(key, (200, None))
                if callable(loc):
                    loc = loc()
                data = json.dumps({"path": self.path, "method": self.command, "body": body.decode()}).encode()
                self.send_response(status)
                if loc:
                    self.send_header("Location", loc)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _any

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def servers():
    other = _Server({})
    home = _Server({"/same": (302, "/final"), "/post307": (307, "/final"), "/post302": (302, "/final"),
                    "/cross": (302, lambda: other.url + "/steal"), "/cross307": (307, lambda: other.url + "/steal"),
                    "/loop": (302, "/loop"), "/scheme": (302, "file:///etc/passwd")})
    yield home, other
    home.close()
    other.close()


def test_origin_and_next_hop():
    assert origin.origin("HTTP://Example.com/v1") == ("http", "example.com", 80)
    assert origin.same_origin("https://h/v1", "https://h:443/x")
    assert not origin.same_origin("http://h:8000", "http://h:8001")
    assert not origin.same_origin("http://h", "https://h")  # the scheme counts: http -> https is another origin
    assert origin.next_hop("http://h:1/a/b", 200, "/x") is None
    assert origin.next_hop("http://h:1/a/b", 307, None) is None
    assert origin.next_hop("http://h:1/a/b", 308, "c") == "http://h:1/a/c"
    with pytest.raises(origin.CrossOriginRedirect) as e:
        origin.next_hop("http://u:pw@h:1/v1/completions", 302, "http://evil:2/x")
    msg = str(e.value)
    assert "http://h:1" in msg and "http://evil:2" in msg and "pw" not in msg and isinstance(e.value, TargetError)


def test_urllib_follows_the_same_host_and_refuses_another(servers):
    home, other = servers
    hops: list[str] = []
    req = urllib.request.Request(home.url + "/same", headers={"Authorization": "Bearer k", "X-Api-Key": "x"})
    with origin.urlopen(req, timeout=5, redirects=hops) as r:
        assert json.loads(r.read())["path"] == "/final"
    assert hops == [f"GET {home.url}/same -> {home.url}/final (HTTP 302)"]
    assert home.log[-1]["auth"] == "Bearer k"  # the key stays with its own host
    # 307 repeats the POST with its body; 302 after a POST continues as a GET
    with origin.urlopen(urllib.request.Request(home.url + "/post307", data=b"hello", method="POST"), timeout=5) as r:
        assert json.loads(r.read()) == {"path": "/final", "method": "POST", "body": "hello"}
    with origin.urlopen(urllib.request.Request(home.url + "/post302", data=b"hello", method="POST"), timeout=5) as r:
        assert json.loads(r.read())["method"] == "GET"
    for path in ("/cross", "/cross307"):
        req = urllib.request.Request(home.url + path, data=b"{}", headers={"Authorization": "Bearer k"})
        with pytest.raises(origin.CrossOriginRedirect, match="another host"):
            origin.urlopen(req, timeout=5)
    with pytest.raises(TargetError):
        origin.urlopen(home.url + "/scheme", timeout=5)
    with pytest.raises(origin.TooManyRedirects):
        origin.urlopen(home.url + "/loop", timeout=5)
    assert other.log == []  # nothing, credential or not, reached the other host


def test_aiohttp_follows_the_same_host_and_refuses_another(servers):
    import aiohttp

    home, other = servers

    async def go():
        hops: list[str] = []
        async with aiohttp.ClientSession() as s:
            async with origin.request(s, "POST", home.url + "/post307", data=b"hello", redirects=hops,
                                      headers={"Authorization": "Bearer k", "X-Api-Key": "x"}) as r:
                got = await r.json(content_type=None)
            assert got == {"path": "/final", "method": "POST", "body": "hello"}
            assert hops == [f"POST {home.url}/post307 -> {home.url}/final (HTTP 307)"]
            async with origin.request(s, "POST", home.url + "/post302", data=b"hello") as r:
                assert (await r.json(content_type=None))["method"] == "GET"
            for path in ("/cross", "/cross307", "/scheme"):
                with pytest.raises(origin.CrossOriginRedirect):
                    async with origin.request(s, "POST", home.url + path, data=b"{}",
                                              headers={"Authorization": "Bearer k", "X-Api-Key": "x"}):
                        pass
            with pytest.raises(origin.TooManyRedirects):
                async with origin.request(s, "GET", home.url + "/loop"):
                    pass
            async with origin.request(s, "GET", home.url + "/same") as r:
                assert await origin.read_body(r, 5) == b'{"pat'  # a capped read

    asyncio.run(go())
    assert other.log == []
    assert [e["key"] for e in home.log if e["path"] == "/final" and e["method"] == "POST"] == ["x"]


# ---------------------------------------------------------------- every client, one rule


def _clients(home_url: str):
    """Each HTTP client of wattbench pointed at ``home_url`` + a path that redirects to the other
    host; each returns (or raises) what that client does with the refusal."""
    from wattbench.doctor.checklist import fetch_exporter
    from wattbench.engines.base import http_get
    from wattbench.core.errors import SensorError, UserError
    from wattbench.monitor.sources import ServerScraper
    from wattbench.server.detect import _get
    from wattbench.server.metrics import MetricsScraper
    from wattbench.server.openai import fetch_models, post_json
    from wattbench.telemetry.prometheus import _fetch
    from wattbench.telemetry.redfish import RedfishSensor
    from wattbench.workload.tokenizer import ServerTokenizer

    def aio(coro_fn):
        import aiohttp

        async def go():
            async with aiohttp.ClientSession(headers={"Authorization": "Bearer k"}) as s:
                return await coro_fn(s)
        return asyncio.run(go())

    def raises(fn, exc):
        try:
            fn()
        except exc as e:
            return f"refused: {e}"
        raise AssertionError("not refused")

    def scraper():
        m = MetricsScraper(home_url + "/cross", api_key="k")
        m.url = home_url + "/cross"
        assert m.scrape_once() is False and not m.timeline.available
        return m.timeline.reason

    def monitor():
        ms = ServerScraper(home_url, api_key="k")
        ms.url = home_url + "/cross"
        assert ms.poll()[1] is None
        return ms.backoff.last_error

    bmc_login = {"REDFISH_USER": "u", "REDFISH_PASSWORD": "p"}

    def redfish_link():  # refused before a request (and its credentials) is made
        rf = RedfishSensor(home_url, verify_tls=False, env=bmc_login)
        return raises(lambda: rf.get("http://127.0.0.2:1/redfish/v1"), SensorError)

    def redfish_redirect():  # opening the chassis: its first request carries the BMC's credentials
        rf = RedfishSensor(home_url, chassis="/cross", verify_tls=False, env=bmc_login)
        return raises(rf.open, SensorError)

    def tokenizer():
        tok = ServerTokenizer(home_url, "m", api_key="k")
        return raises(lambda: tok._post("/cross", {"prompt": "x"}), UserError)

    def detect():
        hops: list[str] = []
        assert aio(lambda s: _get(s, home_url + "/cross", hops)) == (0, {}, b"")
        return hops[0]

    return {
        "load / agree (post_json)": lambda: raises(
            lambda: aio(lambda s: post_json(s, home_url + "/cross307", {"a": 1}, "k", 5)), origin.CrossOriginRedirect),
        "/v1/models": lambda: raises(lambda: aio(lambda s: fetch_models(s, home_url + "/cross", "k")),
                                     origin.CrossOriginRedirect),
        "detection probe": detect,
        "/metrics scraper": scraper,
        "monitor scraper": monitor,
        "/tokenize": tokenizer,
        "engine health": lambda: str(http_get(home_url + "/cross", api_key="k")),
        "doctor exporter": lambda: str(fetch_exporter(home_url + "/cross")),
        "prometheus sensor": lambda: raises(lambda: _fetch(home_url + "/cross", 5, "dcgm"), SensorError),
        "redfish link": redfish_link,
        "redfish redirect": redfish_redirect,
    }


def test_every_client_refuses_another_host(servers):
    """The rule has one home and every client uses it: pointed at a redirect to another host, each
    refuses (in its own way: an error, a failed probe, a backoff) and nothing reaches that host."""
    home, other = servers
    seen = {}
    for name, fn in _clients(home.url).items():
        seen[name] = fn()
        assert seen[name], name
    assert other.log == [], other.log  # not one request, with or without a credential
    assert "another host" in seen["/tokenize"] and "another host" in seen["/metrics scraper"]
    assert seen["detection probe"].startswith("refused: GET") and seen["engine health"] == "(0, b'')"
    assert "another host" in seen["redfish link"] and "another host" in seen["redfish redirect"]
    # the redfish redirect's request carried the BMC's credentials (u:p) home, and nowhere else
    assert any(e["auth"] == "Basic dTpw" for e in home.log if e["path"] == "/cross")


def test_credentials_in_a_redirect_are_refused_even_on_the_same_origin():
    """A ``Location`` naming ``user:password@`` (same host and port) is refused before anything is
    sent: a request carries only the credentials the user gave (aiohttp raised "Cannot combine
    AUTHORIZATION header" as a traceback)."""
    with pytest.raises(origin.CredentialRedirect, match="credentials") as e:
        origin.next_hop("http://h:1/v1/completions", 307, "http://intruder:pw-in-loc@h:1/v1/moved")
    assert "pw-in-loc" not in str(e.value) and isinstance(e.value, origin.CrossOriginRedirect)
    with pytest.raises(origin.CredentialRedirect):
        origin.next_hop("http://h:1/v1/completions", 307, "//intruder@h:1/v1/moved")


def test_urls_are_judged_by_the_http_clients_parser():
    """``http://a\\@b/``: urllib.parse reads host ``b``, the HTTP client (yarl, WHATWG-style) refuses
    it; the rule reads URLs as the client does, and a Location it cannot read is refused."""
    from urllib.parse import urlsplit

    from yarl import URL

    weird = "http://h:1\\@evil:2/x"
    assert urlsplit(weird).hostname == "evil"  # what the old rule compared
    with pytest.raises(ValueError):
        URL(weird)
    with pytest.raises(origin.CrossOriginRedirect):
        origin.next_hop("http://h:1/v1/completions", 302, weird)
    assert origin.origin("http://H:80/x") == origin.origin(URL("http://h/y")) == ("http", "h", 80)
    hop = origin.redirect_hop("http://h:1/a/b", 307, "/c?d=1")
    assert isinstance(hop, URL) and str(hop) == "http://h:1/c?d=1"


def test_a_targets_query_goes_with_every_request_to_its_origin_and_no_other(servers, monkeypatch):
    """``-t 'http://h/v1?sig=…&api-version=…'``: the query on every request to the target (urllib,
    aiohttp, each same-origin hop), never to another origin; its secret values registered in the
    scope open when the target is read (a run's, a command's), and the query sent, only while that
    scope is open."""
    import aiohttp

    from wattbench.core import scrubber, secret_scope
    from wattbench.server.openai import normalize_base_url

    home, other = servers
    monkeypatch.setattr(secret_scope, "_REGISTERED", scrubber.Scrubber())
    origin.forget_queries()
    q = "sig=SIG-q%2F9a%2Bsecret&api-version=2024-06-01"
    assert normalize_base_url(f"{home.url}/?sig=outside-every-scope") == f"{home.url}/v1"
    # nothing runs: nothing registered, and nothing sent (nothing would scrub it from what is written)
    assert not secret_scope.registered().found_in("outside-every-scope") and origin.held_queries() == 0
    with secret_scope.scope():
        assert normalize_base_url(f"{home.url}/openai?{q}") == f"{home.url}/openai/v1"
        assert secret_scope.registered().found_in("SIG-q/9a+secret") and not secret_scope.registered().found_in("2024-06-01")
        with origin.urlopen(home.url + "/same", timeout=5) as r:  # and its hop
            assert json.loads(r.read())["path"] == f"/final?{q}"
        with origin.urlopen(f"{home.url}/models?api-version=old", timeout=5) as r:  # a parameter it has stays
            assert json.loads(r.read())["path"] == "/models?api-version=old&sig=SIG-q%2F9a%2Bsecret"
        with origin.urlopen(other.url + "/metrics", timeout=5) as r:
            assert json.loads(r.read())["path"] == "/metrics"

        async def go():
            async with aiohttp.ClientSession() as s:
                async with origin.request(s, "POST", home.url + "/post307", data=b"x") as r:
                    assert (await r.json(content_type=None))["path"] == f"/final?{q}"
                async with origin.request(s, "GET", other.url + "/x") as r:
                    assert (await r.json(content_type=None))["path"] == "/x"

        asyncio.run(go())
        assert origin.held_queries() == 1
    # the scope ended: its secrets are no longer registered, its query is sent no more and kept nowhere
    assert not secret_scope.registered().found_in("SIG-q/9a+secret")
    assert origin.held_queries() == 0 and origin.target_query(home.url) == ""
    with origin.urlopen(home.url + "/same", timeout=5) as r:
        assert json.loads(r.read())["path"] == "/final"
    assert [e["path"] for e in home.log] == [f"/same?{q}", f"/final?{q}", "/models?api-version=old&sig=SIG-q%2F9a%2Bsecret",
                                             f"/post307?{q}", f"/final?{q}", "/same", "/final"]
    assert [e["path"] for e in other.log] == ["/metrics", "/x"]


def test_a_query_lives_as_long_as_the_scope_that_gave_it():
    """Scopes nest (a command's, its run's, a load worker's): the newest query of an origin is the
    one sent; when its scope ends the one before it is sent again, and when the last ends none is.
    A scope that ends out of order releases only its own."""
    from wattbench.core import secret_scope

    origin.forget_queries()
    url = "http://h:1/v1/completions"
    outer = secret_scope.scope()
    outer.__enter__()
    try:
        origin.send_query("http://h:1/v1?sig=first-secret-1")
        assert origin.with_query(url) == url + "?sig=first-secret-1"
        with secret_scope.scope():
            origin.send_query("http://h:1/v1?sig=second-secret-2&api-version=1")
            origin.send_query("http://other:2/v1?code=other-secret-3")
            assert origin.with_query(url) == url + "?sig=second-secret-2&api-version=1"
            assert origin.held_queries() == 3
        assert origin.with_query(url) == url + "?sig=first-secret-1"  # the outer run's again
        assert origin.with_query("http://other:2/x") == "http://other:2/x" and origin.held_queries() == 1
    finally:
        outer.__exit__(None, None, None)
    assert origin.with_query(url) == url and origin.held_queries() == 0
