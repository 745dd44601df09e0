"""Every test can fail: an AST scan of every test function under ``tests/``.

1. **It asserts on every path.** Following the test's statements, every way through it — each
   branch of an ``if``, an early ``return``, an ``except`` handler — meets at least one check: an
   ``assert``, a ``pytest.raises``/``warns`` block, a call of a helper that asserts (any function
   under ``tests/`` whose body asserts, raises or calls ``pytest.fail``, found by name, to a fixed
   point), or an explicit ``pytest.skip``/``fail``/``xfail`` (whose reason pytest prints). A test
   with a path that checks nothing passes whatever the code does there: ``if value is None:
   return`` passed when the figure it tested was missing. Loop bodies count as run (a loop over
   an empty list is the test's data, not a path the code under test chooses); ``hypothesis.assume``
   draws again instead of returning.
2. **No silent ``except``.** A handler of ``Exception``/``BaseException`` (or a bare ``except``)
   inside a test function must assert, re-raise or skip/fail with a reason: ``except Exception:
   continue`` skipped an engine whose plan crashed, and with it the check that it binds loopback.

The scan's own rules are checked on small snippets (``test_the_scan_*``), so it can fail too.
"""

from __future__ import annotations

import ast
import math
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
TESTS = ROOT / "tests"
INF = math.inf
ENDS_OK = {"skip", "fail", "xfail", "exit", "importorskip"}  # the path ends with a reason pytest prints
ASSERT_BLOCKS = {"raises", "warns", "deprecated_call"}


def _name(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def asserting_helpers(trees: list[ast.AST]) -> set[str]:
    """Names of the functions under tests/ that check something (to a fixed point: a helper that
    calls a checking helper checks)."""
    funcs = [n for t in trees for n in ast.walk(t) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    names: set[str] = set()
    while True:
        grown = {f.name for f in funcs if f.name not in names and any(
            isinstance(c, (ast.Assert, ast.Raise))
            or (isinstance(c, ast.Call) and (_name(c) in names or _name(c) in ENDS_OK | {"assert_called"}
                                             or _name(c).startswith("assert")))
            for c in ast.walk(f))}
        if not grown:
            return names
        names |= grown


class Paths:
    """The fewest checks on any way through a function body (``min_checks``)."""

    def __init__(self, helpers: set[str]):
        self.helpers = helpers

    def _checks(self, node: ast.AST) -> bool:
        return any(isinstance(c, ast.Call) and (_name(c).startswith("assert") or _name(c) in self.helpers)
                   for c in ast.walk(node))

    def seq(self, stmts, count):
        """(checks on falling through, or None when no path falls through; checks at each path's end)."""
        ends: list[float] = []
        for s in stmts:
            if count is None:
                break
            count, e = self.stmt(s, count)
            ends += e
        return count, ends

    def stmt(self, s, count):
        if isinstance(s, ast.Assert):
            return count + 1, []
        if isinstance(s, ast.Return):
            return None, [count + (1 if s.value is not None and self._checks(s.value) else 0)]
        if isinstance(s, (ast.Raise, ast.Continue, ast.Break)):
            return None, [INF]
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and _name(s.value) in ENDS_OK:
            return None, [INF]
        if isinstance(s, (ast.With, ast.AsyncWith)):
            blocks = any(isinstance(i.context_expr, ast.Call) and _name(i.context_expr) in ASSERT_BLOCKS
                         for i in s.items)
            return self.seq(s.body, count + (1 if blocks else 0))
        if isinstance(s, ast.If):
            f1, e1 = self.seq(s.body, count)
            f2, e2 = self.seq(s.orelse, count)
            falls = [f for f in (f1, f2) if f is not None]
            return (min(falls) if falls else None), e1 + e2
        if isinstance(s, (ast.For, ast.AsyncFor, ast.While)):
            f, e = self.seq(s.body, count)
            f2, e2 = self.seq(s.orelse, count if f is None else f)
            return f2, [x for x in e if x != INF] + e2
        if isinstance(s, ast.Try):
            f, e = self.seq(s.body, count)
            falls, ends = ([f] if f is not None else []), list(e)
            for h in s.handlers:  # the exception may come before any check of the body
                hf, he = self.seq(h.body, count)
                falls += [hf] if hf is not None else []
                ends += he
            if s.orelse and f is not None:
                of, oe = self.seq(s.orelse, f)
                falls = [x for x in falls if x is not f] + ([of] if of is not None else [])
                ends += oe
            base = min(falls) if falls else None
            if s.finalbody and base is not None:
                base, fe = self.seq(s.finalbody, base)
                ends += fe
            return base, ends
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return count, []
        return count + (1 if self._checks(s) else 0), []

    def min_checks(self, fn) -> float:
        f, ends = self.seq(fn.body, 0)
        paths = ends + ([f] if f is not None else [])
        return min(paths) if paths else INF


def silent_handlers(fn) -> list[int]:
    """Lines of broad ``except`` handlers in ``fn`` that neither check, re-raise nor skip/fail."""
    out = []
    for h in (n for n in ast.walk(fn) if isinstance(n, ast.ExceptHandler)):
        broad = h.type is None or (isinstance(h.type, ast.Name) and h.type.id in ("Exception", "BaseException"))
        acts = any(isinstance(c, (ast.Assert, ast.Raise))
                   or (isinstance(c, ast.Call) and (_name(c) in ENDS_OK or _name(c).startswith("assert")))
                   for c in ast.walk(h))
        if broad and not acts:
            out.append(h.lineno)
    return out


def _tests(tree):
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and n.name.startswith("test")]


def scan(files: dict[str, str]) -> tuple[list[str], list[str]]:
    """(tests with a path that checks nothing, tests with a silent broad except) in ``files``."""
    trees = {p: ast.parse(src) for p, src in files.items()}
    paths = Paths(asserting_helpers(list(trees.values())))
    unchecked, silent = [], []
    for p, tree in trees.items():
        for fn in _tests(tree):
            if paths.min_checks(fn) == 0:
                unchecked.append(f"{p}:{fn.lineno} {fn.name}")
            silent += [f"{p}:{line} {fn.name}" for line in silent_handlers(fn)]
    return unchecked, silent


def _suite() -> dict[str, str]:
    return {str(p.relative_to(ROOT)): p.read_text() for p in sorted(TESTS.rglob("*.py"))}


def test_every_test_asserts_on_every_path():
    unchecked, _ = scan(_suite())
    assert not unchecked, ("tests with a path that checks nothing (assert on it, or pytest.skip with a "
                           "reason):\n" + "\n".join(unchecked))


def test_no_test_swallows_an_exception_silently():
    _, silent = scan(_suite())
    assert not silent, "broad except handlers that neither check, re-raise nor skip:\n" + "\n".join(silent)


# ------------------------------------------------------------------ the scan itself can fail


def _one(src: str) -> tuple[list[str], list[str]]:
    return scan({"x.py": src})


def test_the_scan_finds_a_path_without_a_check():
    assert _one("def test_a(v):\n    if v is None:\n        return\n    assert v == 1\n")[0]
    assert _one("def test_a(v):\n    if v:\n        assert v\n")[0]  # the else path checks nothing
    assert _one("def test_a():\n    f()\n")[0]
    assert _one("def test_a():\n    try:\n        assert g()\n    except ValueError:\n        pass\n")[0]


def test_the_scan_accepts_checks_on_every_path():
    ok = [
        "def test_a(v):\n    if v is None:\n        pytest.skip('why')\n    assert v == 1\n",
        "def test_a(v):\n    if v:\n        assert v\n    else:\n        assert not v\n",
        "def check(x):\n    assert x\ndef test_a():\n    check(1)\n",
        "def check(x):\n    assert x\ndef wrap(x):\n    check(x)\ndef test_a():\n    wrap(1)\n",
        "def test_a():\n    with pytest.raises(ValueError):\n        f()\n",
        "def test_a():\n    assume(g())\n    assert f()\n",
        "def test_a():\n    for x in [1, 2]:\n        assert x\n",
    ]
    for src in ok:
        assert _one(src) == ([], []), src


def test_the_scan_finds_a_silent_broad_except():
    src = "def test_a():\n    for e in E:\n        try:\n            p = plan(e)\n        except Exception:\n            continue\n        assert p\n"
    assert _one(src)[1] == ["x.py:5 test_a"]
    assert _one(src.replace("continue", "pytest.skip(str(e))"))[1] == []
    assert _one(src.replace("except Exception", "except KeyError"))[1] == []  # a named error is a decision
