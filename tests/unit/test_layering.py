"""No module of a lower layer imports a higher one, and no modules import each other
(docs/architecture.md, "Layers").

Every module under ``src/wattbench`` is parsed (ast, so imports inside functions count too) and each
``wattbench`` import is checked against the layer table below: a module may import its own layer
and the ones under it. The most specific prefix names a module's layer. A back-edge fails the test,
listed with file and line. Within a layer, modules may import each other only one way: an import
cycle (``metrics.latency`` and ``accounting.window_tokens`` once imported each other inside
functions) fails too, listed as the modules on the cycle."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "wattbench"

# low to high; keep in step with docs/architecture.md
LAYERS: list[tuple[str, ...]] = [
    # 0 foundation: the clock, errors, the result schema (the data every layer passes), a level's records
    #   as a spool (results/recordset.py: what the load fills and the statistics read), redaction and
    #   the redirect rule (server/origin.py: every HTTP client's, sensors' and the tokenizer's too),
    #   how a number is written for people (report/numbers.py: the library's messages use it too), and
    #   untrusted text made safe for a terminal (report/safe_text.py: the CLI's stream guard uses it)
    ("clock", "errors", "interrupt", "results.schema", "results.ids", "results.recordset", "server.redact",
     "server.origin", "report.numbers", "report.safe_text", "__version__"),
    # 1 inputs: sensors, workloads, the machine's description
    ("telemetry", "workload", "environment"),
    # 2 pure statistics over records: latency, throughput, the tokens in a window, goodput, CIs, and
    #   the saturation rules (load/saturation.py is pure: the level runner's guard and the validity
    #   verdict share it)
    ("metrics", "load.saturation"),
    # 3 energy accounting: counters, integration, boundaries, validity; builds on the statistics
    ("accounting",),
    # 4 the OpenAI protocol, target specs, server detection and /metrics scraping
    ("server",),
    # 5 the load generator
    ("load",),
    # 6 engine launchers and the run configuration
    ("engines", "config"),
    # 7 run directories, the history store, versioned records (tune.json, agreement.json)
    ("results",),
    # 8 reading results: compare, regress, diagnose, figures; planning from measured results
    ("analysis", "planning"),
    # 9 presenting and operating: reports, doctor, the production monitor
    ("report", "doctor", "monitor"),
    # 10 the run orchestrator (run/: session, targets, plan, level, analyses) and its distributed (Ray)
    #   form; runner.py is the old name, a re-export of run.run_benchmark
    ("run", "runner", "distributed"),
    # 11 tune runs many runs
    ("tune",),
    # 12 the command line and the package facade (lazy entry points)
    ("cli", "__main__", "__init__"),
]

# Back-edges known today, each with the follow-up that removes it. Empty: keep it so.
ALLOWED: set[tuple[str, str]] = set()


def _layer(name: str) -> int:
    """Layer of a dotted module name relative to ``wattbench`` (most specific prefix wins)."""
    best, best_len = None, -1
    for i, prefixes in enumerate(LAYERS):
        for p in prefixes:
            if (name == p or name.startswith(p + ".")) and len(p) > best_len:
                best, best_len = i, len(p)
    if best is None:
        raise AssertionError(f"wattbench.{name} has no layer: add it to LAYERS and docs/architecture.md")
    return best


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
            if _layer(tgt) > src_layer and (mod, tgt) not in ALLOWED:
                found.append(f"{path.relative_to(SRC.parent)}:{line}: {mod} (layer {src_layer}) imports "
                             f"{tgt} (layer {_layer(tgt)})")
    return found


def import_cycles() -> list[list[str]]:
    """Groups of modules that import each other, directly or through others (strongly connected
    components of the import graph, function-level imports included), each sorted."""
    mods = _modules()
    graph = {m: sorted({t for _, t in _targets(m, p) if t in mods and t != m}) for m, p in mods.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    for root in graph:  # Tarjan's algorithm, iterative (no recursion limit)
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
                    work.append((w, iter(graph[w])))
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


def test_no_modules_import_each_other():
    cycles = import_cycles()
    assert not cycles, "import cycles (function-level imports included):\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_every_module_has_a_layer():
    for mod in _modules():
        _layer(mod)


def test_no_lower_layer_imports_a_higher_one():
    edges = back_edges()
    assert not edges, "back-edges:\n" + "\n".join(edges)


def test_allowlist_is_not_stale():
    live = {(m, t) for m, p in _modules().items() for _, t in _targets(m, p)}
    assert not (ALLOWED - live), f"allowlisted back-edges no longer present: {sorted(ALLOWED - live)}"


@pytest.mark.parametrize("name,layer", [("results.schema", 0), ("results.store", 7), ("load.saturation", 2),
                                        ("metrics.window_tokens", 2), ("accounting.level", 3),
                                        ("load.level", 5), ("server.openai", 4), ("cli.run", 12)])
def test_most_specific_prefix_names_the_layer(name, layer):
    assert _layer(name) == layer


def test_the_walker_sees_imports_inside_functions(tmp_path, monkeypatch):
    """A function-level import of a higher layer is a back-edge (the walker is what the test rests on)."""
    pkg = tmp_path / "wattbench"
    (pkg / "results").mkdir(parents=True)
    (pkg / "analysis").mkdir()
    for p in (pkg / "__init__.py", pkg / "results" / "__init__.py", pkg / "analysis" / "__init__.py",
              pkg / "analysis" / "figures.py", pkg / "errors.py"):
        p.write_text("")
    (pkg / "results" / "store.py").write_text(
        "from wattbench.errors import X\n\ndef f():\n    from wattbench.analysis.figures import level_key\n")
    monkeypatch.setattr(__import__(__name__, fromlist=["SRC"]), "SRC", pkg)
    assert back_edges() == ["wattbench/results/store.py:4: results.store (layer 7) imports analysis.figures (layer 8)"]


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
