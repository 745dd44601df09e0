"""``--api-key-file PATH``: the key kept out of ``ps`` (a key given as ``--api-key`` is in every
process listing: the help says so), sent to the target, written nowhere; a bad file is one line."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.fakes.reliability_procs import child_env, run_cli, server

KEY = "sk-keyfile-SECRET-0a9b"


def test_the_key_from_a_file_is_sent_and_never_in_argv(tmp_path):
    keyfile = tmp_path / "key"
    keyfile.write_text(f"\n  {KEY}  \n")
    with server("--ttft-ms", "2", "--itl-ms", "1", "--expect-key", KEY, "--echo-key") as s:
        p = run_cli(s.base, tmp_path / "run", "-n", "3", "--no-sensors", "--api-key-file", str(keyfile),
                    env=child_env(HOME=str(tmp_path)), cwd=tmp_path)
        stats = s.stats()
    assert p.returncode == 0, p.stderr[-2000:]
    assert stats["streams_completed"] == 3  # the server required the key and got it
    written = b"".join(f.read_bytes() for f in (tmp_path / "run").rglob("*") if f.is_file())
    assert KEY.encode() not in written and KEY not in p.stdout + p.stderr


@pytest.mark.parametrize("case", ["missing", "empty", "dir", "both", "binary"])
def test_a_bad_key_file_is_one_line_and_exit_2(tmp_path, case):
    f = tmp_path / "key"
    args = ["--api-key-file", str(f)]
    if case == "empty":
        f.write_text("\n \n")
    elif case == "dir":
        f.mkdir()
    elif case == "both":
        f.write_text(KEY)
        args += ["--api-key", KEY]
    elif case == "binary":
        f.write_bytes(b"\xff\xfe\x00key")
    p = subprocess.run([sys.executable, "-m", "wattbench", "run", "-t", "http://127.0.0.1:9", "-n", "1",
                        "--no-sensors", "--no-register", "-o", str(tmp_path / "out"), *args],
                       capture_output=True, text=True, env=child_env(HOME=str(tmp_path)), cwd=tmp_path, timeout=60)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2 and len(lines) == 1, p.stderr
    # the line names the file and what is wrong with it (not a usage error about an unknown option)
    assert ("both given" in lines[0]) if case == "both" else (f"--api-key-file {f}:" in lines[0]), lines
    assert "Traceback" not in p.stderr and KEY not in p.stderr and not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", ["run", "measure", "monitor", "doctor"])
def test_the_help_says_a_key_on_the_command_line_shows_in_ps(command):
    p = subprocess.run([sys.executable, "-m", "wattbench", command, "--help"], capture_output=True, text=True,
                       env=child_env(COLUMNS="200"), timeout=60)
    text = " ".join(p.stdout.split())
    assert "--api-key-file" in text and "visible to other users of this machine (ps" in text
    assert "Never written anywhere" not in text
