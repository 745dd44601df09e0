"""A meter named on the command line that cannot be read stops the run before any load.

Auto-detection leaves out what it cannot read (a note); a meter the user named is what they asked
the figures to come from, so ``--sensor X`` that cannot open is one line and exit 2, before the
server sees a request, as ``--optimize`` without a meter is. Ground truth: the scripted server's
own request count, and no run directory written.
"""

from __future__ import annotations

import resource
import subprocess
import sys

from tests.fakes.reliability_procs import child_env, server

MEMORY_LIMIT = 2 << 30  # a blow-up fails the test instead of taking the machine down


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def _wb(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "wattbench", *args], cwd=cwd, env=child_env(COLUMNS="80"),
                          capture_output=True, text=True, timeout=120, preexec_fn=_limited)


def test_a_named_meter_that_cannot_open_is_exit_2_before_any_load(tmp_path):
    missing = tmp_path / "no-such-meter.csv"
    with server("--ttft-ms", "5", "--itl-ms", "2") as s:
        # one named meter that reads (a declared constant) does not excuse one that does not
        p = _wb("run", "--target", s.base, "-c", "2", "-n", "6", "--sensor", f"file:{missing}",
                "--sensor", "const:node=400", "--idle", "0", "--no-register", "--out", str(tmp_path / "run"),
                cwd=tmp_path)
        m = _wb("measure", "--sensor", f"file:{missing}", "--idle", "0", "--no-register",
                "--out", str(tmp_path / "measured"), "--", sys.executable, "-c", "print('ran')", cwd=tmp_path)
        served = s.stats()
    for proc in (p, m):
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert lines[0].startswith("wattbench: error: --sensor file cannot be read on this machine")
        assert f"{missing} does not exist" in lines[0] and "drop the --sensor" in lines[0]
        assert proc.stdout == ""
    assert served["requests"] == 0  # not even the priming or the prompt calibration reached the server
    assert not (tmp_path / "run").exists() and not (tmp_path / "measured").exists()
    assert "ran" not in m.stdout  # the command never started
