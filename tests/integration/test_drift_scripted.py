"""Drift against the scripted server's ground truth (``--drift-per-s``): a level whose server slows by
a known amount per second over its three trials is named drifting, by about that amount, and
``compare`` and ``regress`` then read its per-kW ratio inconclusive saying which side drifts and what to do; the
same level against a steady server is not drifting."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes.reliability_procs import child_env
from tests.fakes.stream_server_proc import stream_server
from wattbench.config.run import RunConfig
from wattbench.core.schema import FindingKind
from wattbench.run import run_benchmark

pytestmark = pytest.mark.slow

DRIFT_PER_S = -0.01  # the server's tokens/s fall 1% of its first speed every second


def _run(base: str, out: Path, **kw):
    cfg = RunConfig(target=base, sensors=["const:node=300"], idle_s=0, register_run=False, html=False,
                    out=str(out), input_tokens="16", output_tokens="16", history_check=False, concurrency=[8],
                    duration_s=5.0, trials=3, **kw)
    return run_benchmark(cfg)


def _wb(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "wattbench", *args], cwd=cwd, env=child_env(COLUMNS="200"),
                          capture_output=True, text=True, timeout=120)


def test_a_drifting_server_is_named_and_compare_reads_inconclusive(tmp_path):
    with stream_server("--ttft-ms", "20", "--itl-ms", "40") as (base, _):
        steady = _run(base, tmp_path / "a")
    with stream_server("--ttft-ms", "20", "--itl-ms", "40", "--drift-per-s", str(DRIFT_PER_S)) as (base, stats):
        drifting = _run(base, tmp_path / "b")
        t0_s = stats()["drift_t0_ns"] / 1e9  # the server's first stream, on the client's monotonic clock
    a, b = steady.levels[0], drifting.levels[0]
    ta = next(f for f in a.stationarity.trends if f.figure == "output_tokens_per_s")
    tb = next(f for f in b.stationarity.trends if f.figure == "output_tokens_per_s")
    assert not ta.drifting, ta
    assert not any(f.kind == FindingKind.DRIFT and f.severity == "warn" for f in a.validity.findings)
    # truth: the speed at time t is 1 + F·(t − t0), from the series' first second (the first trial's)
    # to its last (the last trial's: the level's own series)
    assert b.trials is not None and b.trials.n == 3 and b.series is not None
    assert tb.drifting and tb.change_pct < 0
    found = [f for f in b.validity.findings if f.kind == FindingKind.DRIFT and f.basis == "output_tokens_per_s"]
    assert len(found) == 1 and found[0].severity == "warn" and "output tokens/s drifts" in found[0].text
    t_last = b.series.t_s[-1]
    t_first = t_last - tb.span_s
    truth = (1.0 + DRIFT_PER_S * (t_last - t0_s)) / (1.0 + DRIFT_PER_S * (t_first - t0_s)) - 1.0
    assert tb.change_pct == pytest.approx(truth * 100.0, abs=6.0)
    assert truth < -0.1  # far more than the 3% the rule must always name

    cmp = _wb("compare", str(tmp_path / "a"), str(tmp_path / "b"), "--json", cwd=tmp_path)
    assert cmp.returncode == 0, cmp.stderr
    d = json.loads(cmp.stdout)["levels"][0]["decompositions"][0]
    assert d["noise"]["word"] == "inconclusive", d["noise"]
    assert d["noise"]["why"].startswith("B drifts -"), d["noise"]
    text = _wb("compare", str(tmp_path / "a"), str(tmp_path / "b"), cwd=tmp_path).stdout
    answer = next(x for x in text.splitlines() if x.startswith("c=8: B/A per kW "))
    assert "inconclusive (B drifts -" in answer and "over its 3 trials" in answer
    # regress reads the same judgement, naming the side as it calls it
    reg = _wb("regress", str(tmp_path / "b"), "--baseline", str(tmp_path / "a"), cwd=tmp_path)
    rline = next(x for x in reg.stdout.splitlines() if x.startswith("c=8: run/baseline per kW "))
    assert "inconclusive (the run drifts -" in rline, reg.stdout
