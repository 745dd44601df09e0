"""Tests stay on loopback: every server, exporter and Ray cluster a test starts binds
127.0.0.1, checked over the test tree's source (AST), so a new test that listens on all interfaces
(or lets Ray pick the machine's interface address as its node IP) fails here.

- listening calls (``socket.bind``, ``loop.create_server``, ``HTTPServer``/``ThreadingHTTPServer``,
  ``aiohttp.web.TCPSite``, ``prometheus_client.start_http_server`` — whose own default is
  0.0.0.0 —, ``wsgiref.make_server``) must name a loopback host literally;
- Ray: ``Cluster(...)`` with ``head_node_args`` holding ``node_ip_address="127.0.0.1"``,
  ``add_node(node_ip_address="127.0.0.1")``, ``ray.init(..., _node_ip_address="127.0.0.1")`` (the
  Ray test fixture also turns off Ray's "reachable address" rewrite of 127.0.0.1, see there).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.fakes.source_scan import call_name

ROOT = Path(__file__).resolve().parents[3]
TESTS = ROOT / "tests"
LOOPBACK = {"127.0.0.1", "localhost", "::1"}

# call name (last dotted part) -> where its host is: ("pos", i) in a (host, port) tuple or a plain
# string at position i, and the keyword that may carry it instead
LISTEN = {
    "bind": (0, None),
    "create_server": (1, "host"),
    "start_server": (1, "host"),
    "HTTPServer": (0, None),
    "ThreadingHTTPServer": (0, None),
    "TCPServer": (0, None),
    "TCPSite": (1, "host"),
    "make_server": (0, "host"),
    "start_http_server": (None, "addr"),
    "start_wsgi_server": (None, "addr"),
}


def _host_of(node: ast.AST | None):
    """The literal host of an argument: a string, or the first item of a (host, port) tuple."""
    if isinstance(node, ast.Tuple) and node.elts:
        node = node.elts[0]
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None if node is None else ast.dump(node)[:60]


def _kw(call: ast.Call, name: str):
    return next((k.value for k in call.keywords if k.arg == name), None)


def _literal(node) -> object:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError):
        return None


def scan(tree: ast.AST, where: str) -> tuple[list[str], int]:
    """(problems, listening or cluster calls seen) in one module."""
    bad, seen = [], 0
    for call in ast.walk(tree):
        if not isinstance(call, ast.Call):
            continue
        full = call_name(call.func)
        last = full.rsplit(".", 1)[-1]
        line = f"{where}:{call.lineno}"
        if last in LISTEN:
            pos, kw = LISTEN[last]
            node = _kw(call, kw) if kw else None
            if node is None and pos is not None and len(call.args) > pos:
                node = call.args[pos]
            host = _host_of(node)
            if last == "bind" and not isinstance(node, ast.Tuple):
                continue  # not a socket bind (e.g. a logger's bind)
            seen += 1
            if host not in LOOPBACK:
                bad.append(f"{line}: {full}(...) listens on {host!r}, not loopback")
        elif last == "Cluster" and any(k.arg == "initialize_head" for k in call.keywords):
            seen += 1
            args = _literal(_kw(call, "head_node_args")) or {}
            if args.get("node_ip_address") != "127.0.0.1":
                bad.append(f"{line}: Ray Cluster without head_node_args node_ip_address='127.0.0.1'")
        elif last == "add_node":
            seen += 1
            if _literal(_kw(call, "node_ip_address")) != "127.0.0.1":
                bad.append(f"{line}: Ray add_node without node_ip_address='127.0.0.1'")
        elif full == "ray.init":
            seen += 1
            if _literal(_kw(call, "_node_ip_address")) != "127.0.0.1":
                bad.append(f"{line}: ray.init without _node_ip_address='127.0.0.1'")
    return bad, seen


def test_every_test_server_and_cluster_binds_loopback():
    bad, seen = [], 0
    for path in sorted(TESTS.rglob("*.py")):
        b, n = scan(ast.parse(path.read_text()), str(path.relative_to(ROOT)))
        bad += b
        seen += n
    assert bad == []
    assert seen >= 20  # the scan finds the servers (scripted stream server, fakes, exporters, Ray)


@pytest.mark.parametrize("code, problem", [
    ("s.bind(('0.0.0.0', 0))", "listens on '0.0.0.0'"),
    ("s.bind(('', 0))", "listens on ''"),
    ("loop.create_server(f, '0.0.0.0', 0)", "listens on '0.0.0.0'"),
    ("start_http_server(0, registry=r)", "listens on None"),  # prometheus_client's default is 0.0.0.0
    ("web.TCPSite(runner, host, 0)", "not loopback"),
    ("Cluster(initialize_head=True, head_node_args={'num_cpus': 2})", "node_ip_address"),
    ("c.add_node(num_cpus=2)", "add_node"),
    ("ray.init(address=a)", "ray.init"),
])
def test_the_scan_finds_what_it_looks_for(code, problem):
    bad, seen = scan(ast.parse(code), "x.py")
    assert seen == 1 and len(bad) == 1 and problem in bad[0], bad
    ok = {"s.bind(('0.0.0.0', 0))": "s.bind(('127.0.0.1', 0))",
          "c.add_node(num_cpus=2)": "c.add_node(num_cpus=2, node_ip_address='127.0.0.1')"}
    if code in ok:
        assert scan(ast.parse(ok[code]), "x.py")[0] == []
