"""One home for the redirect rule: no module of src/ sends an HTTP request but
through ``core/origin.py`` (``origin.request`` for aiohttp, ``origin.urlopen`` for urllib), so no
client can follow a redirect to another host with the user's credentials.

The scan (ast) flags, outside ``core/origin.py``: a call of ``urlopen``/``build_opener``/
``OpenerDirector``/``http.client.HTTP(S)Connection``/``requests.*``/``httpx.*``; a call of
``.get/.post/.put/.patch/.delete/.head/.options/.request`` that passes a request keyword
(``headers``, ``json``, ``data``, ``allow_redirects``, ``trace_request_ctx``, ``auth``) — an
aiohttp session's request; and any ``allow_redirects`` keyword. It is checked on planted code.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.fakes.source_scan import call_name

SRC = Path(__file__).resolve().parents[3] / "src" / "wattbench"
HOME = "wattbench/core/origin.py"
DIRECT = ("urlopen", "build_opener", "OpenerDirector", "HTTPConnection", "HTTPSConnection", "requests.", "httpx.")
METHODS = {"get", "post", "put", "patch", "delete", "head", "options", "request", "ws_connect"}
REQUEST_KW = {"headers", "json", "data", "allow_redirects", "trace_request_ctx", "auth"}


def scan(source: str, rel: str) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = call_name(node.func)
        kws = {k.arg for k in node.keywords}
        where = f"{rel}:{node.lineno}"
        last = name.rsplit(".", 1)[-1]
        if (any(name == d or name.endswith("." + d) or (d.endswith(".") and name.startswith(d)) for d in DIRECT)
                and not name.startswith("origin.")):
            out.append(f"{where}: {name}(...) outside core/origin.py")
        elif isinstance(node.func, ast.Attribute) and last in METHODS and kws & REQUEST_KW \
                and not name.startswith("origin."):
            out.append(f"{where}: {name}(..., {', '.join(sorted(kws & REQUEST_KW))}=) sends a request without the rule")
        elif "allow_redirects" in kws:
            out.append(f"{where}: allow_redirects outside core/origin.py")
    return out


def test_no_request_outside_the_rule():
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC.parent).as_posix()
        if rel != HOME:
            found += scan(path.read_text(encoding="utf-8"), rel)
    assert not found, "send requests through core/origin.py (origin.request / origin.urlopen):\n" + "\n".join(found)


def test_the_scan_finds_planted_requests():
    planted = '''
import urllib.request, aiohttp
def f(session, url, h):
    urllib.request.urlopen(url)
    opener = urllib.request.build_opener()
    session.post(url, json={}, headers=h)
    session.get(url, allow_redirects=True)
    d = {}.get("x", None)                     # a dict's get: not a request
    origin.urlopen(url)                        # the rule itself: fine
    requests.get(url)
'''
    got = scan(planted, "planted.py")
    assert [g.split(":")[1] for g in got] == ["4", "5", "6", "7", "10"], got
