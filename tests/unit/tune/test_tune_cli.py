"""`wattbench tune` / `doctor --restore` on the command line: bad input is one line, exit 2,
nothing written; restore with nothing to restore says so."""

from __future__ import annotations

import os
import subprocess
import sys


def _wb(*args, env=None, cwd=None):
    return subprocess.run([sys.executable, "-m", "wattbench", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})}, cwd=cwd)


def test_bad_input_is_one_line_exit_2(tmp_path):
    cases = [
        (["--engine", "vllm", "--slo", "ttft_p99=3"], "add a unit"),
        (["--engine", "vllm", "--axis", "max-num-seqs=8", "--power-limit", "400"], "--allow-gpu-settings"),
        (["--engine", "vllm", "--axis", "max-num-seqs"], "NAME=V1"),
        (["--engine", "vllm", "--axis", "a=1", "--objective", "speed"], "--objective"),
        (["--engine", "vllm", "--space", str(tmp_path / "none.yaml")], "no such file"),
        (["--engine", "vllm", "--axis", "a=1", "--max-trials", "0"], "--max-trials"),
        (["--engine", "vllm", "--axis", "a=1", "--boundary", "accelerator_memory"], "no tokens-per-kW figure"),
    ]
    for args, msg in cases:
        p = _wb("tune", *args, "--out", str(tmp_path / "t"), cwd=tmp_path)
        assert p.returncode == 2, (args, p.stderr)
        assert msg in p.stderr and "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert not (tmp_path / "t").exists() and not (tmp_path / "wattbench-results").exists()


def test_doctor_restore_with_nothing_to_restore(tmp_path):
    p = _wb("doctor", "--restore", env={"WATTBENCH_GPU_STATE": str(tmp_path / "gpu.json")})
    assert p.returncode == 0 and "nothing to restore" in p.stdout, p.stderr
