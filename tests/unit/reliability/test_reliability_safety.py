"""Safety properties of the source tree.

- no shell strings: no ``shell=True``, ``os.system``, ``os.popen``; no ``eval``/``exec``; no pickle,
  marshal, or YAML loading other than ``yaml.safe_load`` anywhere in src/ (no documented exception exists; add one here, with
  its reason, only if it is ever needed);
- every server wattbench starts binds to loopback unless told otherwise (engine launcher
  defaults, each engine's command line);
- result files are read with JSON + pydantic only: a result.json crafted to look like a pickle
  or a Python expression is refused as data, not executed.
"""

from __future__ import annotations

import ast
import inspect
import json
from pathlib import Path

import pytest

from tests.fakes.source_scan import call_name

SRC = Path(__file__).resolve().parents[3] / "src" / "wattbench"
ALLOWED: dict[str, str] = {}  # "path:line" -> why (none today)


def _calls(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            yield node


def _findings() -> list[str]:
    out = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC.parent).as_posix()
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                for m in mods:
                    if m.split(".")[0] in ("pickle", "cPickle", "dill", "marshal", "shelve"):
                        out.append(f"{rel}:{node.lineno}: imports {m}")
        for call in _calls(tree):
            name = call_name(call.func)
            where = f"{rel}:{call.lineno}"
            if name in ("eval", "exec", "compile", "os.system", "os.popen", "subprocess.getoutput",
                        "subprocess.getstatusoutput", "__import__", "yaml.load", "yaml.load_all", "yaml.full_load",
                        "yaml.unsafe_load", "yaml.unsafe_load_all"):
                out.append(f"{where}: calls {name}")
            for kw in call.keywords:
                if kw.arg == "shell" and not (isinstance(kw.value, ast.Constant) and kw.value.value is False):
                    out.append(f"{where}: {name}(shell=...)")
            if name.startswith(("subprocess.", "asyncio.create_subprocess")) and call.args and (
                    isinstance(call.args[0], (ast.JoinedStr, ast.BinOp))
                    or (isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str))):
                out.append(f"{where}: {name} with a command string, not an argv list")
    return [f for f in out if f.split(": ")[0] not in ALLOWED]


def test_no_shell_eval_or_pickle_in_src():
    assert _findings() == []


def test_the_scan_finds_what_it_looks_for(tmp_path, monkeypatch):
    """The scanner itself is not blind: it flags each construct in a planted file."""
    pkg = tmp_path / "wattbench"
    pkg.mkdir()
    (pkg / "bad.py").write_text(
        "import os, pickle, subprocess\n"
        "os.system('ls')\n"
        "subprocess.run('ls -l', shell=True)\n"
        "subprocess.run(f'ls {x}')\n"
        "eval('1')\n"
        "yaml.load(t)\n"
        "yaml.safe_load(t)\n"
    )
    monkeypatch.setitem(globals(), "SRC", pkg)
    found = _findings()
    text = "\n".join(found)
    for what in ("imports pickle", "calls os.system", "(shell=...)", "command string", "calls eval", "calls yaml.load"):
        assert what in text, text
    assert "safe_load" not in text


def test_engine_launcher_binds_loopback_by_default(tmp_path, monkeypatch):
    from wattbench.engines.registry import ENGINES, get_engine, launch
    from wattbench.engines import base

    # llama.cpp's plan needs its binary's path, not the binary: name one so every engine is planned
    monkeypatch.setenv("WATTBENCH_LLAMA_SERVER", "/usr/local/bin/llama-server")

    assert inspect.signature(launch).parameters["host"].default == "127.0.0.1"
    assert inspect.signature(base.start).parameters["host"].default == base.DEFAULT_HOST == "127.0.0.1"
    assert inspect.signature(base.free_port).parameters["host"].default == "127.0.0.1"
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "llama", "torch_dtype": "float16",
                                                   "max_position_embeddings": 4096}))
    (model / "model.gguf").write_bytes(b"GGUF")
    assert len(ENGINES) >= 4
    for name in ENGINES:  # every engine is planned: one that cannot be fails here, it is not skipped
        plan = get_engine(name).plan(str(model), "cpu", [], base.DEFAULT_HOST, 8123, tmp_path)
        argv = [str(a) for a in plan.argv]
        joined = " ".join(argv)
        assert "127.0.0.1" in joined, (name, argv)
        assert "0.0.0.0" not in joined and "::" not in argv, (name, argv)




def _is_wildcard(v) -> bool:
    if not isinstance(v, str):
        return False
    host = v.rsplit(":", 1)[0] if v.count(":") == 1 else v
    return host in ("0.0.0.0", "[::]", "") or v in ("0.0.0.0", "::")


def _default_hosts(tree: ast.AST):
    """(line, value) of every default a listening address could come from: defaults of
    parameters named host/addr/bind/listen*, class attributes and constants with those names,
    and the first argument of ``typer.Option(...)`` for ``--host``/``--listen``/``--bind``."""
    names = ("host", "addr", "address", "bind", "listen", "default_host", "default_listen")
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            pos = a.posonlyargs + a.args
            for arg, d in zip(pos[len(pos) - len(a.defaults):], a.defaults):
                if arg.arg.lower() in names and isinstance(d, ast.Constant):
                    yield d.lineno, d.value
            for arg, d in zip(a.kwonlyargs, a.kw_defaults):
                if d is not None and arg.arg.lower() in names and isinstance(d, ast.Constant):
                    yield d.lineno, d.value
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Constant):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name) and t.id.lower() in names:
                    yield node.lineno, node.value.value
        elif isinstance(node, ast.Call) and call_name(node.func).endswith("Option") and node.args:
            flags = [a.value for a in node.args[1:] if isinstance(a, ast.Constant)]
            if any(f in ("--host", "--listen", "--bind", "--address") for f in flags) and isinstance(
                    node.args[0], ast.Constant):
                yield node.lineno, node.args[0].value


def test_no_wildcard_listen_default_anywhere_in_src():
    """No parameter, constant or CLI option defaults a listening address to all interfaces
    (a user may still ask for 0.0.0.0 explicitly, as the monitor's help example shows)."""
    hits, seen = [], 0
    for path in SRC.rglob("*.py"):
        for line, value in _default_hosts(ast.parse(path.read_text())):
            seen += 1
            if _is_wildcard(value):
                hits.append(f"{path.relative_to(SRC.parent)}:{line}: default {value!r}")
    assert hits == []
    assert seen >= 3  # the scan does find the defaults (engines, monitor, exporter)


def test_monitor_exporter_listens_on_loopback_by_default():
    from wattbench.cli.main import build_command
    from wattbench.config.commands import MonitorOptions
    from wattbench.monitor import exporter

    assert exporter.DEFAULT_LISTEN.startswith("127.0.0.1:")
    assert inspect.signature(exporter.Exporter.__init__).parameters["listen"].default == exporter.DEFAULT_LISTEN
    assert exporter.parse_listen("9464") == ("127.0.0.1", 9464)  # a bare port stays on loopback
    assert exporter.parse_listen(":9464") == ("127.0.0.1", 9464)
    # `wattbench monitor --listen`'s default is the exporter's (one home), as the command line shows it
    cli_default = {p.name: p.default for p in build_command().commands["monitor"].params}["listen"]
    assert cli_default == MonitorOptions.model_fields["listen"].default == exporter.DEFAULT_LISTEN


def test_result_files_are_data_not_code(tmp_path):
    """rundir reads JSON + pydantic: a pickle or a Python expression in result.json is refused with
    a UserError naming the file, and nothing runs."""
    import pickle

    from wattbench.core.errors import UserError
    from wattbench.results import rundir

    src = inspect.getsource(rundir)
    assert "json.loads" in src and "model_validate" in src
    assert "import pickle" not in src and "eval(" not in src

    class Boom:
        def __reduce__(self):
            return (exec, ("import pathlib; pathlib.Path(%r).write_text('ran')" % str(tmp_path / "pwned"),))

    d = tmp_path / "run"
    d.mkdir()
    (d / "result.json").write_bytes(pickle.dumps(Boom()))
    with pytest.raises(UserError) as e:
        rundir.load_result(d)
    assert "result.json" in str(e.value)
    (d / "result.json").write_text("__import__('os').system('touch %s')" % (tmp_path / "pwned"))
    with pytest.raises(UserError):
        rundir.load_result(d)
    (d / "requests.jsonl").write_bytes(pickle.dumps(Boom()) + b"\n")
    with pytest.raises(UserError):
        rundir.load_requests(d)
    assert not (tmp_path / "pwned").exists()
