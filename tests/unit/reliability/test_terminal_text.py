"""One home for "untrusted text made safe for a terminal" (``core/safe_text.py``), used by every
printer: everything the CLI prints goes through ``sys.stdout``/``sys.stderr``, which ``cli.main``
wraps for every command (``core/secret_scope.guard_std_streams``) in a stream that scrubs secrets and
applies ``safe_text.stream``. The scan (ast) checks that the wrapping is there and that it applies
the filter, and flags any way around it in ``src/``: ``sys.__stdout__``/``sys.__stderr__``, an
``os.write`` or ``os.fdopen`` on descriptor 1 or 2, opening ``/dev/tty``, a rich ``Console`` given
another ``file=``. It is checked on planted code."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.fakes.source_scan import call_name

SRC = Path(__file__).resolve().parents[3] / "src" / "wattbench"


def scan(source: str, rel: str) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(source)):
        where = f"{rel}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Attribute) and node.attr in ("__stdout__", "__stderr__"):
            out.append(f"{where}: sys.{node.attr} bypasses the guarded stream")
        if isinstance(node, ast.Constant) and node.value == "/dev/tty":
            out.append(f"{where}: /dev/tty bypasses the guarded stream")
        if not isinstance(node, ast.Call):
            continue
        name = call_name(node.func)
        first = node.args[0] if node.args else None
        if name in ("os.write", "os.fdopen") and isinstance(first, ast.Constant) and first.value in (1, 2):
            out.append(f"{where}: {name}({first.value}, …) bypasses the guarded stream")
        if name.split(".")[-1] == "Console":
            for k in node.keywords:
                if k.arg == "file" and call_name(k.value) not in ("sys.stdout", "sys.stderr"):
                    out.append(f"{where}: Console(file=…) writes around the guarded stream")
    return out


def test_no_printer_writes_around_the_guarded_streams():
    found = []
    for path in sorted(SRC.rglob("*.py")):
        found += scan(path.read_text(encoding="utf-8"), path.relative_to(SRC.parent).as_posix())
    assert not found, "print through sys.stdout/sys.stderr (cli.main guards them):\n" + "\n".join(found)


def test_the_scan_finds_planted_bypasses():
    planted = '''
import os, sys
from rich.console import Console
def f(s, fh):
    sys.__stdout__.write(s)
    os.write(2, s.encode())
    open("/dev/tty", "w").write(s)
    Console(file=fh).print(s)
    Console(file=sys.stderr).print(s)
    sys.stdout.write(s)
'''
    found = scan(planted, "planted.py")
    assert sorted(int(f.split(":")[1]) for f in found) == [5, 6, 7, 8], found


def test_every_command_runs_inside_the_guard_and_the_guard_filters():
    main = ast.parse((SRC / "cli" / "main.py").read_text())
    fn = next(n for n in ast.walk(main) if isinstance(n, ast.FunctionDef) and n.name == "main")
    withs = [w for w in ast.walk(fn) if isinstance(w, ast.With)
             and any(call_name(i.context_expr.func) == "guard_std_streams" for i in w.items
                     if isinstance(i.context_expr, ast.Call))]
    assert withs and any(isinstance(c, ast.Call) and call_name(c.func) == "cmd.main"
                         for w in withs for c in ast.walk(w)), "cli.main must run the command inside guard_std_streams()"
    redact = ast.parse((SRC / "core" / "secret_scope.py").read_text())  # the guarded streams
    writes = [f for c in ast.walk(redact) if isinstance(c, ast.ClassDef) and c.name in ("_ScrubbingStream",
                                                                                         "_ScrubbingBuffer")
              for f in c.body if isinstance(f, ast.FunctionDef) and f.name == "write"]
    assert len(writes) == 2
    for w in writes:
        assert any(isinstance(c, ast.Call) and call_name(c.func) == "terminal_safe" for c in ast.walk(w)), \
            "the guarded stream's write must apply report/safe_text.stream (imported as terminal_safe)"
