"""A test that needs a port where nothing listens holds one (``tests.fakes.ports.refused_port``),
checked over the test tree's source (AST).

A socket bound to port 0 and closed again gives a port that is free only at that moment: under
``.ci/run`` other workers' tests start servers on ephemeral ports meanwhile, and a client connecting
to a closed loopback port can draw that same port as its source and connect to itself. This test
fails on any socket bound to port 0 (``X.bind((host, 0))``) that never listens (no ``X.listen``
in the same function), outside ``tests/fakes/ports.py``. The exceptions are where another program
must be told a port to listen on before it starts, so the race cannot be closed from here; each
is listed with that reason."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.fakes.source_scan import call_name

ROOT = Path(__file__).resolve().parents[3]
TESTS = ROOT / "tests"
HOME = TESTS / "fakes" / "ports.py"

# (path under tests/, function) -> why it takes a port that something else will listen on
TOLD_A_PORT = {
    ("fakes/prometheus_proc.py", "free_port"): "the Prometheus binary is told --web.listen-address",
    ("unit/monitor/test_monitor_bounds.py", "test_monitor_against_label_churn_keeps_flat_memory_and_small_files"):
        "the monitor under test is told --listen",
}


def _binds_port_zero(node: ast.Call) -> str | None:
    """The socket's name when ``node`` is ``NAME.bind((host, 0))``."""
    f = node.func
    if not (isinstance(f, ast.Attribute) and f.attr == "bind" and isinstance(f.value, ast.Name) and node.args):
        return None
    addr = node.args[0]
    if (isinstance(addr, ast.Tuple) and len(addr.elts) >= 2 and isinstance(addr.elts[1], ast.Constant)
            and addr.elts[1].value == 0):
        return f.value.id
    return None


def closed_ports(tree: ast.AST) -> list[tuple[str, int, str]]:
    """(function, line, socket) of each port-0 bind whose socket never listens in its function."""
    out = []
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        calls = [n for n in ast.walk(fn) if isinstance(n, ast.Call)]
        listening = {call_name(c.func).rsplit(".", 1)[0] for c in calls if call_name(c.func).endswith(".listen")}
        for c in calls:
            name = _binds_port_zero(c)
            if name is not None and name not in listening:
                out.append((fn.name, c.lineno, name))
    return out


def test_no_test_takes_a_closed_port_for_a_refused_one():
    found, allowed = [], set()
    for path in sorted(TESTS.rglob("*.py")):
        if path == HOME:
            continue
        rel = path.relative_to(TESTS).as_posix()
        for fn, line, sock in closed_ports(ast.parse(path.read_text(), str(path))):
            if (rel, fn) in TOLD_A_PORT:
                allowed.add((rel, fn))
            else:
                found.append(f"tests/{rel}:{line} {fn}: {sock} is bound to port 0 and closed without listening")
    assert not found, ("a port bound and closed again may be taken meanwhile; hold one with "
                       "tests.fakes.ports.refused_port():\n  " + "\n  ".join(found))
    assert allowed == set(TOLD_A_PORT), f"stale exceptions: {set(TOLD_A_PORT) - allowed}"


def test_the_rule_sees_the_forms_it_names():
    src = '''
import socket
def closed():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port
def in_a_with():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
def listening():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
def a_fixed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 8123))
'''
    assert [(fn, sock) for fn, _, sock in closed_ports(ast.parse(src))] == [("closed", "s"), ("in_a_with", "s")]


def test_a_refused_port_is_refused_while_held():
    import socket

    from tests.fakes.ports import refused_port

    with refused_port() as port:
        with socket.socket() as c:
            c.settimeout(10)
            try:
                c.connect(("127.0.0.1", port))
                connected = True
            except ConnectionRefusedError:
                connected = False
        assert not connected
        with socket.socket() as other:  # and no other socket can take it meanwhile
            try:
                other.bind(("127.0.0.1", port))
                taken = True
            except OSError:
                taken = False
        assert not taken
