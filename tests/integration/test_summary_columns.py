"""The run summary at 80 and 160 columns, against the scripted stream server (ground truth: a TTFT
of 40 ms, then 15 more tokens 4 ms apart, so E2E is 100 ms and TPOT and ITL 4 ms), as a user reads
it through the CLI:

- no line is wider than the terminal, and nothing is cut (``…``);
- the figures come right after the answer and the verdicts: the efficiency table, then requests
  and latency — the window's seconds, requests/s, the load achieved (a closed loop's mean in
  flight; an open loop's asked and sent requests/s) and TTFT, TPOT, ITL and E2E as mean, p50 and
  p99 (p90 and p95 too at 160) — each cell the result's own figure; then the notes, how the run
  was taken (primed, history check) and the glossary's pointer;
- a level driven against two targets has each replica on one line under its total, with the
  replica's own figures.
"""

from __future__ import annotations

import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes.reliability_procs import child_env, server
from wattbench.core.numbers import fmt
from wattbench.results.rundir import load_result

MEMORY_LIMIT = 2 << 30
TTFT_MS, ITL_MS, OUT_TOKENS = 40.0, 4.0, 16
COMMON = ("--idle", "0", "--input-tokens", "16", "--output-tokens", str(OUT_TOKENS), "--sensor", "const:node=500",
          "--no-register", "--no-calibrate-prompts")


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def _wb(*args: str, cwd: Path, cols: int) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "wattbench", *args], cwd=cwd, env=child_env(COLUMNS=str(cols)),
                          capture_output=True, text=True, timeout=180, preexec_fn=_limited)


def _cells(text: str, label: str) -> list[str]:
    """Every cell of a row led by ``label`` in any table of the summary."""
    rows = [x for x in text.splitlines() if x.startswith(label + " ")]
    return [c for r in rows for c in r[len(label):].split()]


def _fits(text: str, cols: int) -> None:
    assert max(len(x.rstrip()) for x in text.splitlines()) <= cols, text
    assert "…" not in text, text


def _latency_cells(text: str, label: str, lv, stats: tuple[str, ...]) -> None:
    cells = _cells(text, label)
    for kind in ("ttft", "tpot", "itl", "e2e"):
        st = getattr(lv.latency, f"{kind}_ms")
        for stat in stats:
            assert fmt(getattr(st, stat)) in cells, (label, kind, stat, cells)
    assert fmt(lv.throughput.requests_per_s) in cells and fmt(lv.throughput.duration_s) in cells, cells


def _order(text: str) -> None:
    lines = text.splitlines()
    first = {key: next(i for i, x in enumerate(lines) if x.startswith(key))
             for key in ("answer: ", "verdict: ", "level ", "primed at", "what each term means")}
    assert first["answer: "] < first["verdict: "] < first["level "] < first["primed at"] < first["what each term means"]
    assert not any(re.match(r"^[!✗≈-] ", x) for x in lines[:first["level "]]), text  # no note before the figures


def test_closed_loop_against_two_targets_at_80_and_160_columns(tmp_path):
    out = tmp_path / "run"
    with server("--ttft-ms", str(TTFT_MS), "--itl-ms", str(ITL_MS)) as a, \
            server("--ttft-ms", str(TTFT_MS), "--itl-ms", str(ITL_MS)) as b:
        p = _wb("run", "--target", a.base, "--target", b.base, "-c", "2,4", "-n", "16", *COMMON,
                "--out", str(out), cwd=tmp_path, cols=80)
    assert p.returncode == 0, p.stderr
    res = load_result(out)
    for lv in res.levels:  # ground truth: the scripted server's timing (a loaded host only adds)
        assert TTFT_MS * 0.95 <= lv.latency.ttft_ms.p50 <= TTFT_MS + 150
        assert (TTFT_MS + (OUT_TOKENS - 1) * ITL_MS) * 0.95 <= lv.latency.e2e_ms.p50 <= 100 + 250
        assert ITL_MS * 0.9 <= lv.latency.tpot_ms.p50 <= ITL_MS + 20
    report160 = _wb("report", str(out), cwd=tmp_path, cols=160)
    assert report160.returncode == 0, report160.stderr
    for text, cols, stats in ((p.stdout, 80, ("mean", "p50", "p99")),
                              (report160.stdout, 160, ("mean", "p50", "p90", "p95", "p99"))):
        _fits(text, cols)
        _order(text)
        for lv in res.levels:
            label = f"c={lv.load.target_concurrency}"
            _latency_cells(text, label, lv, stats)
            assert fmt(lv.load.mean_in_flight, kind="load") in _cells(text, label)
            # each replica one line, its own figures beside its name (all on one host: its port)
            assert len(lv.per_target) == 2
            lines = text.splitlines()
            for url, st in lv.per_target.items():
                name = "↳ :" + url.rsplit(":", 1)[1].split("/")[0]
                rows = [x for x in lines if x.startswith(name + " ")]
                assert rows, (name, text)
                got = [c for r in rows for c in r[len(name):].split()]
                assert f"{st.requests.completed}/{st.requests.failed}" in got
                for v in (st.throughput.output_tokens_per_s, st.latency.ttft_ms.p50, st.latency.e2e_ms.p99):
                    assert fmt(v) in got, (name, v, got)
            assert not any(x.strip() == "" and i and lines[i - 1].startswith("↳") and lines[i + 1].startswith("↳")
                           for i, x in enumerate(lines[:-1]))  # never a blank line between replica rows


def test_open_loop_says_the_rate_asked_and_the_rate_sent(tmp_path):
    out = tmp_path / "run"
    with server("--ttft-ms", str(TTFT_MS), "--itl-ms", str(ITL_MS)) as s:
        p = _wb("run", "--target", s.base, "-r", "10,20", "-n", "24", *COMMON, "--out", str(out), cwd=tmp_path,
                cols=80)
    assert p.returncode == 0, p.stderr
    res = load_result(out)
    _fits(p.stdout, 80)
    _order(p.stdout)
    head = " ".join(p.stdout.split())
    assert "asked" in head and "sent" in head
    for lv in res.levels:
        label = f"r={lv.load.target_rate_rps:g}/s"
        cells = _cells(p.stdout, label)
        _latency_cells(p.stdout, label, lv, ("mean", "p50", "p99"))
        # asked: the level's rate; sent: what the client achieved (ground truth: near the asked rate
        # on any host that can send it — within a loaded 2-core machine's reach)
        assert fmt(lv.load.target_rate_rps, kind="load") in cells
        assert fmt(lv.load.achieved_rate_rps, kind="load") in cells
        assert lv.load.achieved_rate_rps == pytest.approx(lv.load.target_rate_rps, rel=0.5)
