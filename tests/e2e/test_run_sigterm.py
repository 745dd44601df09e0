"""SIGTERM stops ``wattbench run`` as Ctrl-C does (src/wattbench/core/interrupt.py) also where SIGINT is
ignored — a run started in the background of a non-interactive shell (``wattbench run &`` in a
script) inherits SIGINT ignored, and re-delivering SIGTERM as SIGINT would drop it outside a load
level (here: 10 minutes of idle baseline that would then run to the end)."""

from __future__ import annotations

import signal
import subprocess

from tests.fakes.reliability_procs import child_env, run_argv, server, stop_pid, wait_for
from wattbench.results.rundir import load_result


def test_sigterm_outside_a_level_with_sigint_ignored(tmp_path):
    out = tmp_path / "run"
    with server("--ttft-ms", "5", "--itl-ms", "5") as s:
        # a metered figure (a declared constant alone skips the idle baseline)
        argv = run_argv(s.base, out, "--concurrency", "1", "--num-requests", "2", "--sensor", "estimate:cpu,tdp=100")
        argv[argv.index("--idle") + 1] = "600"
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=child_env(HOME=str(tmp_path)), cwd=str(tmp_path),
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
        try:
            # the idle baseline is being sampled: the run directory's telemetry has readings
            wait_for(lambda: (out / "telemetry.jsonl").exists() and (out / "telemetry.jsonl").stat().st_size > 0,
                     timeout_s=120)
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=120)  # without the fix: the 600 s baseline runs on
        finally:
            stop_pid(proc, signal.SIGKILL)
        served = s.stats()["streams_completed"]
    assert proc.returncode == 130, err[-3000:]
    assert "interrupted" in err and "Traceback" not in err
    assert served == 0  # stopped during the baseline, before any level
    assert load_result(out).status == "interrupted"
