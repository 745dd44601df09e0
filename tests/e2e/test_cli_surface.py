"""What every command shows before it does anything: help text as typed (no rich
markup eating ``uniform:A:B`` or ``wattbench[ray]``), plain metavars, ``--version``, exit codes."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from wattbench import __version__
from wattbench.cli.main import build_command

ROOT = Path(__file__).resolve().parents[2]


def _commands(cmd, path=()):
    yield path, cmd
    for name, sub in getattr(cmd, "commands", {}).items():
        yield from _commands(sub, (*path, name))


@pytest.fixture(scope="module")
def cli():
    return build_command()


@pytest.fixture
def invoke(capsys, monkeypatch):
    """Run the CLI in-process at 80 columns: (exit code, stdout + stderr)."""
    monkeypatch.setenv("COLUMNS", "80")

    def run(cli, args):
        try:
            code = cli.main(args=list(args), prog_name="wattbench", standalone_mode=True)
        except SystemExit as e:
            code = e.code
        got = capsys.readouterr()
        return code or 0, got.out + got.err

    return run


def test_version_prints_and_exits_0():
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    p = subprocess.run([sys.executable, "-m", "wattbench", "--version"], capture_output=True, text=True, env=env)
    assert p.returncode == 0 and p.stdout.strip() == f"wattbench {__version__}", (p.stdout, p.stderr)


def test_help_text_shown_as_typed(cli, invoke):
    _, out = invoke(cli, ["run", "--help"])
    assert "N, uniform:A:B, normal:MU:SIGMA" in " ".join(out.split())
    assert "wattbench[ray]" in out
    assert "🅰" not in out


def test_every_help_page_without_type_noise(cli, invoke):
    for path, _ in _commands(cli):
        code, out = invoke(cli, [*path, "--help"])
        assert code == 0, (path, out)
        for noise in ("<bool>", "<str>", "<list[str]>", "<int>", "<float>"):
            assert noise not in out, (path, noise)
        assert max(len(x) for x in out.splitlines()) <= 80, (path, max(out.splitlines(), key=len))


def test_unknown_option_exits_2(cli, invoke):
    code, out = invoke(cli, ["run", "--no-such-flag"])
    assert code == 2 and "No such option" in out


def _options(cmd) -> dict[str, object]:
    return {o: p for p in cmd.params if getattr(p, "param_type_name", "") == "option"
            for o in [*p.opts, *p.secondary_opts]}


def test_the_same_flag_for_the_same_thing(cli):
    """-t/--target, --api-key, --request-timeout, -q/--quiet, --db (one help text), --register/--no-register."""
    cmds = {" ".join(path): c for path, c in _commands(cli) if getattr(c, "params", None)}
    for name, c in cmds.items():
        opts = _options(c)
        if "--target" in opts:
            assert "-t" in opts, name
        if "--db" in opts:
            from wattbench.config.shared import DB_HELP

            assert opts["--db"].help == DB_HELP, name
        if "--quiet" in opts:
            assert "-q" in opts, name
        if "--timeout" in opts:
            assert "--request-timeout" in opts, name
        if "--sensor" in opts:  # monitor and doctor lacked -s where run, measure and tune had it
            assert "-s" in opts, name
    for name in ("run", "agree", "doctor", "monitor"):
        assert "--api-key" in _options(cmds[name]), name
    for name in ("run", "agree"):
        opts = _options(cmds[name])
        assert "--register" in opts and "--no-register" in opts, name
    for name in ("run", "monitor"):
        assert "-q" in _options(cmds[name]), name
