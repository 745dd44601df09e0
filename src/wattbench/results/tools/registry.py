"""Which load generator a command line runs, and how its result files are found and read.

Which tool a command line is (``detect_tool``), which server it names (``tool_target_url``), what it
must be given for wattbench to read its result (``check_tool_args``), where its result files are
(``find_result_files``: given with ``--result``, else where the command's own arguments put them,
only files the command wrote), which reader reads them (``read_tool``: one module per format in this
package) and the tool's installed version (``installed_version``).
"""

from __future__ import annotations

import os
from pathlib import Path
import shutil
import subprocess

from wattbench.core.argv import flag_values
from wattbench.core.secret_scope import clip
from wattbench.core.errors import UserError
from wattbench.results.tools.base import ToolLevelData, ToolRequest, ToolRun

__all__ = ["TOOLS", "ToolRun", "ToolLevelData", "ToolRequest", "detect_tool", "tool_target_url", "check_tool_args",
           "find_result_files", "read_tool", "installed_version"]

TOOLS = ("vllm-bench-serve", "aiperf", "guidellm", "wattbench-run", "command")
MAX_SEARCH_DEPTH = 4  # folders below the artifact/output folder searched for the tool's file


def _exe(argv: list[str]) -> tuple[str, list[str]]:
    """The program's name and its arguments; ``python -m vllm.entrypoints.cli.main`` style and a
    leading ``env``/``uv run`` are not unwrapped (give ``--tool``)."""
    return os.path.basename(argv[0]) if argv else "", list(argv[1:])


def detect_tool(argv: list[str]) -> str:
    """``vllm-bench-serve``, ``aiperf``, ``guidellm`` or ``command`` (any other)."""
    name, args = _exe(argv)
    if name == "vllm" and args[:2] == ["bench", "serve"]:
        return "vllm-bench-serve"
    if name == "aiperf" and args[:1] == ["profile"]:
        return "aiperf"
    if name == "guidellm" and args[:1] and args[0] in ("run", "benchmark"):
        return "guidellm"
    if (name == "wattbench" and args[:1] == ["run"]) or (name.startswith("python") and args[:3] == ["-m", "wattbench", "run"]):
        return "wattbench-run"
    return "command"


def _kv(value: str) -> dict[str, str]:
    """GuideLLM's ``kind=json,path=out.json`` option values."""
    out = {}
    for part in value.split(","):
        k, sep, v = part.partition("=")
        if sep:
            out[k.strip()] = v.strip()
    return out


def tool_target_url(tool: str, argv: list[str]) -> str | None:
    """The server the tool's arguments name (for its ``/metrics``), if they name one."""
    if tool == "vllm-bench-serve":
        base = flag_values(argv, "--base-url")
        if base:
            return base[-1]
        host = (flag_values(argv, "--host") or ["127.0.0.1"])[-1]
        port = (flag_values(argv, "--port") or ["8000"])[-1]
        return f"http://{host}:{port}"
    if tool == "aiperf":
        u = flag_values(argv, "--url", "-u")
        return u[0] if u else None
    if tool == "wattbench-run":
        u = flag_values(argv, "--target", "-t")
        return u[0] if u else None
    if tool == "guidellm":
        u = flag_values(argv, "--target")
        if u:
            return u[-1]
        for b in flag_values(argv, "--backend"):
            if "target" in _kv(b):
                return _kv(b)["target"]
    return None


def check_tool_args(tool: str, argv: list[str]) -> None:
    """One line, before anything runs, when the tool is not asked to write what wattbench reads."""
    if tool == "vllm-bench-serve":
        if "--save-result" not in argv and "--append-result" not in argv:
            raise UserError("vllm bench serve writes no result file without --save-result; add --save-result "
                            "--save-detailed (wattbench reads the per-request times)")
        if "--save-detailed" not in argv:
            raise UserError("vllm bench serve keeps no per-request times without --save-detailed; add it")


def _candidates(tool: str, argv: list[str], cwd: Path) -> list[Path]:
    """Where the tool's result files can be: exact files, or folders to search."""
    if tool == "vllm-bench-serve":
        d = Path((flag_values(argv, "--result-dir") or ["."])[-1])
        d = d if d.is_absolute() else cwd / d
        name = flag_values(argv, "--result-filename")
        return [d / name[-1]] if name else [d]
    if tool == "aiperf":
        dirs = flag_values(argv, "--output-artifact-dir", "--artifact-dir")
        base = Path(dirs[-1]) if dirs else Path("artifacts")
        return [base if base.is_absolute() else cwd / base]
    if tool == "guidellm":
        paths = [v for v in flag_values(argv, "--output-path")]
        paths += [_kv(v)["path"] for v in flag_values(argv, "--output")
                  if _kv(v).get("kind") == "json" and "path" in _kv(v)]
        if paths:
            return [Path(p) if Path(p).is_absolute() else cwd / p for p in paths]
        return [cwd]
    if tool == "wattbench-run":  # its --out, else under its default results folder
        out = flag_values(argv, "--out", "-o")
        base = Path(out[-1]) if out else Path("wattbench-results")
        return [base if base.is_absolute() else cwd / base]
    return []


_NAMES = {"vllm-bench-serve": None, "aiperf": "profile_export.jsonl", "guidellm": "benchmarks.json",
          "wattbench-run": "result.json"}


def _search(tool: str, where: Path) -> list[Path]:
    name = _NAMES[tool]
    if where.is_file():
        return [where]
    if not where.is_dir():
        return []
    if tool == "wattbench-run":  # the run directory itself, or the runs under the results folder
        if (where / "result.json").is_file():
            return [where / "result.json"]
        return sorted(p / "result.json" for p in where.iterdir() if (p / "result.json").is_file())
    if tool == "vllm-bench-serve":  # the result JSON of --save-result (not vLLM's *.pytorch.json twin)
        return sorted(p for p in where.glob("*.json") if p.is_file() and not p.name.endswith(".pytorch.json"))
    out = []
    base_depth = len(where.parts)
    for root, dirs, files in os.walk(where):
        if len(Path(root).parts) - base_depth >= MAX_SEARCH_DEPTH:
            dirs[:] = []
        if name in files:
            out.append(Path(root) / name)
    return sorted(out)


def find_result_files(tool: str, argv: list[str], cwd: Path, given: list[str], before: dict[str, int] | None,
                      existing_only: bool = False, exclude: Path | None = None) -> list[Path]:
    """The tool's result files: ``given`` (``--result``), else found where its arguments put them.
    ``before`` (path -> mtime_ns before the command): only files written since are kept. With
    ``existing_only``, what exists now (taken before the command); otherwise a tool that wrote
    nothing is one line. ``exclude``: a directory whose files are never the tool's (the measuring
    run's own, which a wrapped ``wattbench run`` shares a results folder with)."""
    if given:
        paths = [Path(g) if Path(g).is_absolute() else cwd / g for g in given]
        if existing_only:
            return [p for p in paths if p.is_file()]
    else:
        paths = [p for where in _candidates(tool, argv, cwd) for p in _search(tool, where)]
    if exclude is not None:
        ex = Path(exclude).resolve()
        paths = [p for p in paths if ex != p.resolve().parent and ex not in p.resolve().parents]
    if existing_only:
        return paths
    fresh = [p for p in paths if p.is_file() and (before is None or before.get(str(p)) != p.stat().st_mtime_ns)]
    if not fresh:
        where = ", ".join(str(p) for p in (paths if given else _candidates(tool, argv, cwd))) or str(cwd)
        raise UserError(f"{tool} wrote no result file wattbench reads (looked for "
                        f"{_NAMES[tool] or 'its --save-result JSON'} in {where}); give it with --result FILE")
    if tool in ("aiperf", "wattbench-run") and len(fresh) > 1:  # one run per command: the newest
        fresh = [max(fresh, key=lambda p: p.stat().st_mtime_ns)]
    return fresh


def read_tool(tool: str, paths: list[Path]) -> ToolRun:
    """The tool's files read by its module."""
    if tool == "vllm-bench-serve":
        from wattbench.results.tools.vllm_bench import read
    elif tool == "aiperf":
        from wattbench.results.tools.aiperf import read
    elif tool == "guidellm":
        from wattbench.results.tools.guidellm import read
    elif tool == "wattbench-run":
        from wattbench.results.tools.wattbench_run import read
    else:
        raise UserError(f"--tool {tool}: wattbench reads vllm-bench-serve, aiperf, guidellm and wattbench-run "
                        "result files")
    try:
        return read(paths)
    except UserError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError, OverflowError, RecursionError, MemoryError) as e:
        # every reader validates its files (base.validate); this only keeps a reader's own slip from
        # costing the run: the energy over the command's lifetime is kept, the file is named
        names = ", ".join(str(p) for p in paths)
        raise UserError(f"{tool}: {names} could not be read ({type(e).__name__}: {clip(str(e), 160)}); "
                        "is it the tool's own output, unedited?") from None


_DISTS = {"vllm-bench-serve": "vllm", "aiperf": "aiperf", "guidellm": "guidellm"}


def installed_version(tool: str, argv: list[str]) -> str | None:
    """The tool's version where its file does not say (``vllm bench serve``): asked of the Python
    its console script runs with (the script's ``#!`` line), through ``importlib.metadata`` — no
    import of the tool itself. ``None`` when that cannot be told (not a Python console script)."""
    dist = _DISTS.get(tool)
    exe = shutil.which(argv[0]) if argv else None
    if not dist or not exe:
        return None
    try:
        with open(exe, "rb") as f:
            first = f.readline(4096).decode(errors="replace").strip()
        if not first.startswith("#!") or "python" not in first:
            return None
        py = first[2:].strip().split()[0]
        out = subprocess.run([py, "-c", f"import importlib.metadata as m; print(m.version({dist!r}))"],
                             capture_output=True, text=True, timeout=60)
        v = out.stdout.strip()
        return v if out.returncode == 0 and v and len(v) < 64 else None
    except (OSError, subprocess.SubprocessError, IndexError):
        return None
