"""The README's main command as a newcomer types it on a CPU machine: ``wattbench run`` with no
server and no flags. wattbench builds the tiny preset, starts ``transformers serve``, measures two
levels and stops the engine; the result must carry real throughput and latency, say honestly what
it knows about energy and the server's state, and leave no process behind."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from wattbench.results.rundir import load_requests, load_result

pytestmark = [pytest.mark.slow, pytest.mark.heavy, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]


def test_wattbench_run_with_no_arguments(tmp_path):
    pytest.importorskip("transformers")
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    env["WATTBENCH_DB"] = str(tmp_path / "history.sqlite3")
    exe = shutil.which("wattbench")
    argv = [exe, "run"] if exe else [sys.executable, "-m", "wattbench", "run"]
    before = {p.pid for p in psutil.process_iter()}
    p = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=840)
    assert p.returncode == 0, p.stderr[-4000:]
    runs = list((tmp_path / "wattbench-results").iterdir())
    assert len(runs) == 1
    run = runs[0]
    result = load_result(run)
    assert result.status == "complete"
    assert result.server.launched and result.server.engine == "transformers"
    assert result.server.effective_config.get("preset") == "tiny"
    assert [lv.label for lv in result.levels] == ["concurrency=1", "concurrency=8"]
    # c=1 is sized with nothing measured before it: 4 rounds, at least 32 requests (docs/accounting.md §1)
    assert result.levels[0].requests.completed == 32
    for lv in result.levels:
        assert lv.requests.completed >= 32 and lv.requests.failed == 0 and lv.requests.warmup == 0
        thr, dur_s = lv.throughput, lv.window.duration_s
        # every stream of this ladder (no warm-up, no --duration) ends inside its level's window
        assert thr.output_tokens == thr.measured_request_tokens.output > 0
        assert thr.output_tokens_per_s == pytest.approx(thr.output_tokens / thr.duration_s, rel=1e-9)
        assert thr.duration_s == pytest.approx(dur_s, rel=1e-9)
        assert lv.latency.ttft_ms.p50 > 0 and lv.latency.e2e_ms.p99 >= lv.latency.ttft_ms.p99
        # honest energy: each figure labelled as what it is (an estimate is never "measured"), and
        # the efficiency figures are the window's energy over the window's tokens and duration;
        # or no figure at all, with the reason
        assert bool(lv.energy) != bool(lv.energy_unavailable_reason), (lv.energy, lv.energy_unavailable_reason)
        for b, e in lv.energy.items():
            assert e.label in ("measured", "declared", "estimate"), (b, e.label)
            if e.method in ("estimate", "declared"):
                assert e.label == e.method, (b, e.method, e.label)
            if e.label == "measured":
                assert e.method in ("counter", "power_integral") or e.method.startswith("sum("), (b, e.method)
            assert e.energy_j > 0 and e.avg_power_w == pytest.approx(e.energy_j / dur_s, rel=1e-6), b
            assert e.j_per_output_token == pytest.approx(e.energy_j / thr.output_tokens, rel=1e-9), b
            assert e.output_tokens_per_s_per_kw == pytest.approx(
                thr.output_tokens_per_s / (e.avg_power_w / 1e3), rel=1e-9), b
        # transformers serve has no /metrics: the result says so instead of an empty timeline
        assert lv.server_metrics.available is False and "no Prometheus /metrics" in lv.server_metrics.reason
    assert len(load_requests(run)) == sum(lv.requests.completed + lv.requests.failed + lv.requests.warmup
                                          for lv in result.levels)
    assert (run / "report.html").exists() and (run / "server.log").exists()
    # the summary a person reads: the verdict, then one row per level (short labels) under a
    # throughput header that the 80-column layout sets on two lines ("out" over "tok/s")
    assert f"verdict: {result.validity.verdict}" in p.stdout
    assert "tok/s" in p.stdout
    for label in ("c=1", "c=8"):
        assert re.search(rf"^{label}\s", p.stdout, re.M), p.stdout
    # the engine was stopped by PID: nothing wattbench started is still running. Its children run
    # in the run's working directory (tmp_path); other processes of the machine (another test
    # session's servers) are not this run's, whatever their command line
    def started_here(q) -> bool:
        try:
            return q.info["pid"] not in before and Path(q.cwd()) == tmp_path
        except (psutil.Error, OSError):
            return False  # gone meanwhile, or not ours to inspect

    leftovers = [q for q in psutil.process_iter(["pid", "cmdline"]) if started_here(q)]
    assert not leftovers, [q.info for q in leftovers]
