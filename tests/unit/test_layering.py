"""Each folder of ``src/wattbench`` is one layer: no folder imports a folder of a higher layer, folders
import each other one way only, and no two modules import each other (docs/architecture.md, "Layers").

Every module under ``src/wattbench`` is parsed (ast, so imports inside functions count too) and each
``wattbench`` import is checked against the layer table below, which names folders (and the few
top-level modules), never single modules inside them: a module's unit is the first part of its
dotted name (``accounting.level`` is ``accounting``). A module may import its own folder and the
folders of lower layers. A back-edge fails the test, listed with file and line and followed by the
folder graph. Folders of one layer may import each other only one way, and modules only one way
too: an import cycle (``metrics.latency`` and ``accounting.window_tokens`` once imported each other
inside functions) fails, listed as the modules or folders on the cycle."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "wattbench"

# low to high, folders (and top-level modules) only; keep in step with docs/architecture.md
LAYERS: list[tuple[str, ...]] = [
    # 0 the vocabulary every folder shares: clock, errors, the result schema, ids, a level's records
    #   as a spool, the load contracts (LevelSpec, LevelOutcome, TargetSpec), the secrets scrubber, the
    #   redirect rule, number formatting, terminal-safe text; and the package version
    ("core", "__version__"),
    # 1 inputs: sensors, workloads, the machine's description
    ("telemetry", "workload", "environment"),
    # 2 pure statistics over records: latency, throughput, the tokens in a window, goodput, CIs, the
    #   noise rule and the saturation rules
    ("metrics",),
    # 3 energy accounting: counters, integration, boundaries, validity; builds on the statistics
    ("accounting",),
    # 4 the OpenAI protocol, server detection and identity, /metrics scraping
    ("server",),
    # 5 the load generator
    ("load",),
    # 6 engine launchers and the run configuration
    ("engines", "config"),
    # 7 run directories, the history store, versioned records, other tools' result files
    ("results",),
    # 8 reading results: compare, regress, diagnose, figures; planning from measured results
    ("analysis", "planning"),
    # 9 presenting and operating: reports, doctor, the production monitor
    ("report", "doctor", "monitor"),
    # 10 the run orchestrator and its distributed (Ray) form
    ("run", "distributed"),
    # 11 tune runs many runs
    ("tune",),
    # 12 the command line and the package facade (lazy entry points)
    ("cli", "__main__", "__init__"),
]


def _unit(name: str) -> str:
    """The folder (or top-level module) a dotted module name relative to ``wattbench`` belongs to."""
    return name.split(".")[0]


def _layer(name: str) -> int:
    """Layer of a dotted module name relative to ``wattbench``: its folder's."""
    unit = _unit(name)
    for i, units in enumerate(LAYERS):
        if unit in units:
            return i
    raise AssertionError(f"wattbench.{unit} has no layer: add the folder to LAYERS and docs/architecture.md")


def _modules() -> dict[str, Path]:
    out = {}
    for p in sorted(SRC.rglob("*.py")):
        parts = p.relative_to(SRC).with_suffix("").parts
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def _is_module(name: str) -> bool:
    base = SRC.joinpath(*name.split("."))
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()


def _targets(mod: str, path: Path):
    """(line, imported module relative to wattbench) for every wattbench import in a file."""
    pkg = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
    if mod == "__init__":
        pkg = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("wattbench."):
                    yield node.lineno, a.name[len("wattbench."):]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg[: len(pkg) - (node.level - 1)] if node.level > 1 else pkg
                full = ".".join([*base, *([node.module] if node.module else [])])
            elif node.module == "wattbench" or (node.module or "").startswith("wattbench."):
                full = node.module[len("wattbench."):] if node.module != "wattbench" else ""
            else:
                continue
            for a in node.names:
                sub = f"{full}.{a.name}" if full else a.name
                if _is_module(sub):
                    yield node.lineno, sub
                elif full:
                    yield node.lineno, full
                elif a.name == "__version__":
                    yield node.lineno, "__version__"
                else:  # a lazy entry point of the facade (run_benchmark, RunConfig, ...)
                    yield node.lineno, "__init__"


def back_edges() -> list[str]:
    found = []
    for mod, path in _modules().items():
        src_layer = _layer(mod)
        for line, tgt in _targets(mod, path):
            if _layer(tgt) > src_layer:
                found.append(f"{path.relative_to(SRC.parent)}:{line}: {mod} ({_unit(mod)}, layer {src_layer}) "
                             f"imports {tgt} ({_unit(tgt)}, layer {_layer(tgt)})")
    return found


def folder_graph() -> dict[str, list[str]]:
    """Which folders each folder imports (other folders only), from every import in its modules."""
    graph: dict[str, set[str]] = {}
    for mod, path in _modules().items():
        graph.setdefault(_unit(mod), set())
        for _, tgt in _targets(mod, path):
            if _unit(tgt) != _unit(mod):
                graph[_unit(mod)].add(_unit(tgt))
    return {u: sorted(t) for u, t in sorted(graph.items())}


def render_folder_graph() -> str:
    """The folder graph by layer, low to high: each folder with the folders it imports and their layers."""
    graph = folder_graph()
    lines = []
    for i, units in enumerate(LAYERS):
        for u in units:
            if u in graph:
                deps = ", ".join(f"{t} ({_layer(t)})" for t in graph[u]) or "-"
                lines.append(f"  {i:>2} {u:<12} -> {deps}")
    return "\n".join(lines)


def _strongly_connected(graph: dict[str, list[str]]) -> list[list[str]]:
    """Groups of nodes that reach each other (Tarjan's algorithm, iterative), each sorted; single
    nodes are left out."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(graph.get(w, []))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return sorted(found)


def folder_cycles() -> list[list[str]]:
    """Groups of folders that import each other, directly or through others."""
    return _strongly_connected(folder_graph())


def import_cycles() -> list[list[str]]:
    """Groups of modules that import each other, directly or through others (strongly connected
    components of the import graph, function-level imports included), each sorted."""
    mods = _modules()
    graph = {m: sorted({t for _, t in _targets(m, p) if t in mods and t != m}) for m, p in mods.items()}
    return _strongly_connected(graph)


def test_no_modules_import_each_other():
    cycles = import_cycles()
    assert not cycles, "import cycles (function-level imports included):\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_every_folder_has_a_layer():
    for mod in _modules():
        _layer(mod)


def test_no_folder_imports_a_higher_one():
    edges = back_edges()
    assert not edges, "back-edges:\n" + "\n".join(edges) + "\n\nfolder graph (layer):\n" + render_folder_graph()


def test_folders_import_each_other_one_way():
    cycles = folder_cycles()
    assert not cycles, ("folder cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)
                        + "\n\nfolder graph (layer):\n" + render_folder_graph())


def test_the_table_names_folders_only():
    """No carve-outs: every entry is a folder or a top-level module of the package, and each once."""
    names = [u for units in LAYERS for u in units]
    assert len(names) == len(set(names))
    for u in names:
        assert "." not in u
        assert u.startswith("__") or (SRC / u).is_dir() or (SRC / f"{u}.py").exists(), u


@pytest.mark.parametrize("name,layer", [("core.schema", 0), ("results.store", 7), ("metrics.saturation", 2),
                                        ("metrics.window_tokens", 2), ("accounting.level", 3),
                                        ("load.level", 5), ("server.openai", 4), ("cli.run", 12)])
def test_a_module_has_its_folders_layer(name, layer):
    assert _layer(name) == layer


def test_the_walker_sees_imports_inside_functions(tmp_path, monkeypatch):
    """A function-level import of a higher layer is a back-edge (the walker is what the test rests on)."""
    pkg = tmp_path / "wattbench"
    (pkg / "results").mkdir(parents=True)
    (pkg / "analysis").mkdir()
    for p in (pkg / "__init__.py", pkg / "results" / "__init__.py", pkg / "analysis" / "__init__.py",
              pkg / "analysis" / "figures.py"):
        p.write_text("")
    (pkg / "results" / "store.py").write_text(
        "from wattbench.core.errors import X\n\ndef f():\n    from wattbench.analysis.figures import level_key\n")
    monkeypatch.setattr(__import__(__name__, fromlist=["SRC"]), "SRC", pkg)
    assert back_edges() == ["wattbench/results/store.py:4: results.store (results, layer 7) imports analysis.figures "
                            "(analysis, layer 8)"]
    assert "results      -> analysis (8)" in render_folder_graph()


def test_the_cycle_finder_sees_imports_inside_functions(tmp_path, monkeypatch):
    """Two modules of one layer that import each other inside functions are a cycle."""
    pkg = tmp_path / "wattbench"
    (pkg / "metrics").mkdir(parents=True)
    for p in (pkg / "__init__.py", pkg / "metrics" / "__init__.py"):
        p.write_text("")
    (pkg / "metrics" / "a.py").write_text("def f():\n    from wattbench.metrics.b import g\n")
    (pkg / "metrics" / "b.py").write_text("def g():\n    from wattbench.metrics import a\n")
    (pkg / "metrics" / "c.py").write_text("from wattbench.metrics.a import f\n")
    monkeypatch.setattr(__import__(__name__, fromlist=["SRC"]), "SRC", pkg)
    assert import_cycles() == [["metrics.a", "metrics.b"]]


def test_folders_that_import_each_other_are_a_cycle(tmp_path, monkeypatch):
    """Two folders of one layer that import each other, through any modules, are a folder cycle."""
    pkg = tmp_path / "wattbench"
    for d in ("analysis", "planning"):
        (pkg / d).mkdir(parents=True)
        (pkg / d / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "analysis" / "a.py").write_text("from wattbench.planning.b import g\n")
    (pkg / "planning" / "b.py").write_text("def g():\n    from wattbench.analysis.c import h\n")
    (pkg / "analysis" / "c.py").write_text("def h():\n    pass\n")
    monkeypatch.setattr(__import__(__name__, fromlist=["SRC"]), "SRC", pkg)
    assert folder_cycles() == [["analysis", "planning"]]
    assert import_cycles() == []


def test_package_init_files_export_and_modules_compute():
    """A folder's ``__init__.py`` is its docstring and what it exports (imports, ``__all__``): no
    function, class or computed value, so importing a package runs nothing and a reader finds code
    where its module's name says (an ``if TYPE_CHECKING:`` block of imports is imports). The one
    exception is the top package's lazy ``__getattr__``, which keeps ``import wattbench`` from loading
    the run machinery."""
    found = []
    for init in sorted(SRC.rglob("__init__.py")):
        rel = init.relative_to(SRC.parent)
        for node in ast.parse(init.read_text(encoding="utf-8")).body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            if (isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
                    and not node.orelse and all(isinstance(n, (ast.Import, ast.ImportFrom)) for n in node.body)):
                continue  # imports a type checker reads (the names the lazy ``__getattr__`` hands out)
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                continue  # the docstring
            names = [t.id for t in getattr(node, "targets", [getattr(node, "target", None)]) if isinstance(t, ast.Name)]
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and names and set(names) <= {"__all__", "__version__"}:
                continue
            if rel == Path("wattbench/__init__.py") and isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
                continue
            found.append(f"{rel}:{node.lineno}: {type(node).__name__}")
    assert not found, "package __init__ files compute (move the code into a module):\n" + "\n".join(found)
