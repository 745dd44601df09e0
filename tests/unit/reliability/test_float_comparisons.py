"""Floats are compared with a stated tolerance everywhere in the suite.

``assert energy == 100.0`` passes on one machine and fails on another (``99.99999999999999 ==
100.0`` failed a clean-clone CI run: an energy-weighted mean summed in another order). This test
scans every ``assert`` under ``tests/`` (AST), and every ``lambda`` (the predicates a parametrized
test asserts), and fails on an exact comparison (``==``/``!=``) of
which one side is

- a float literal (``1.5``, ``-2.0``, ``1e9``), or a list/tuple/set/dict display holding one at
  its top level (``== [1.0, 2.0]``, ``== {"w": 300.0}``);
- a name that a ``@pytest.mark.parametrize`` of the enclosing test binds to a float literal
  (``@pytest.mark.parametrize("x,expect", [(0, 100.0)])`` … ``assert got == expect``).

Use ``pytest.approx(value, rel=…)`` / ``abs=…`` (or ``math.isclose``) instead; a side that is
already such a call is not flagged. What it cannot see: two computed floats compared with ``==``
(``assert a == b``), whose types are not known without running the test — review catches those.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.fakes.source_scan import call_name

ROOT = Path(__file__).resolve().parents[3]
TESTS = ROOT / "tests"

_TOLERANT = {"approx", "isclose", "allclose", "assert_allclose", "assert_approx_equal"}


def _is_float_literal(node: ast.AST) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return isinstance(node, ast.Constant) and isinstance(node.value, float)


def _holds_float_literal(node: ast.AST) -> bool:
    if _is_float_literal(node):
        return True
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return any(_is_float_literal(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return any(v is not None and _is_float_literal(v) for v in node.values)
    return False


def _tolerant(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and call_name(node.func).rsplit(".", 1)[-1] in _TOLERANT


def _float_params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Names that a ``pytest.mark.parametrize`` on ``fn`` binds to a float literal somewhere."""
    out: set[str] = set()
    for dec in fn.decorator_list:
        if not (isinstance(dec, ast.Call) and call_name(dec.func).endswith("parametrize") and len(dec.args) >= 2):
            continue
        names_node, values = dec.args[0], dec.args[1]
        if isinstance(names_node, ast.Constant) and isinstance(names_node.value, str):
            names = [n.strip() for n in names_node.value.split(",")]
        elif isinstance(names_node, (ast.List, ast.Tuple)):
            names = [e.value for e in names_node.elts if isinstance(e, ast.Constant)]
        else:
            continue
        if not isinstance(values, (ast.List, ast.Tuple)):
            continue
        for case in values.elts:
            if isinstance(case, ast.Call) and call_name(case.func).endswith("param"):
                items = case.args if len(names) > 1 else case.args[:1]
            elif len(names) > 1 and isinstance(case, (ast.Tuple, ast.List)):
                items = case.elts
            else:
                items = [case]
            for name, item in zip(names, items):
                if _holds_float_literal(item):
                    out.add(name)
    return out


def exact_float_comparisons(source: str, filename: str = "<test>") -> list[str]:
    """``file:line: code`` for every exact float comparison in an ``assert`` or a ``lambda`` (module doc)."""
    tree = ast.parse(source, filename)
    found: list[str] = []

    def visit(node: ast.AST, params: set[str]) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            params = params | _float_params(node)
        checked = node.test if isinstance(node, ast.Assert) else node.body if isinstance(node, ast.Lambda) else None
        if checked is not None:
            for cmp in ast.walk(checked):
                if not isinstance(cmp, ast.Compare):
                    continue
                sides = [cmp.left, *cmp.comparators]
                for i, op in enumerate(cmp.ops):
                    if not isinstance(op, (ast.Eq, ast.NotEq)):
                        continue
                    a, b = sides[i], sides[i + 1]
                    if _tolerant(a) or _tolerant(b):
                        continue
                    if (_holds_float_literal(a) or _holds_float_literal(b)
                            or any(isinstance(s, ast.Name) and s.id in params for s in (a, b))):
                        found.append(f"{filename}:{cmp.lineno}: {ast.unparse(cmp)[:120]}")
                        break
        for child in ast.iter_child_nodes(node):
            visit(child, params)

    visit(tree, set())
    return found


def test_the_scan_finds_what_it_should_on_planted_code():
    planted = '''
import pytest

def test_a():
    assert f() == 100.0
    assert g() != -2.5
    assert h() == [1.0, 2]
    assert k() == {"w": 300.0}
    assert 1 == 1 and m() == 1e9

@pytest.mark.parametrize("x,expect", [(0, 100.0), (-48, None)])
def test_b(x, expect):
    assert f(x) == expect

def test_fine():
    assert f() == pytest.approx(100.0, rel=1e-9)
    assert f() == 3
    assert math.isclose(f(), 1.5, rel_tol=1e-9)
    assert [1.0, 2.0] == pytest.approx(h(), abs=1e-12)
    assert f() <= 100.0
    x = f() == 1.0  # not an assert: a helper's own business

CHECKS = [("nvml", lambda s: s.poll_interval_s == 0.05)]

@pytest.mark.parametrize("n", [1, 2])
def test_int_param(n):
    assert f(n) == n
'''
    found = exact_float_comparisons(planted)
    assert [int(x.split(":")[1]) for x in found] == [5, 6, 7, 8, 9, 13, 23], found


def test_no_exact_float_comparison_in_the_suite():
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        found += exact_float_comparisons(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    assert not found, ("compare floats with a stated tolerance (pytest.approx(x, rel=…) or abs=…), "
                       "not ==:\n" + "\n".join(found))
