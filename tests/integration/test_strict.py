"""``--strict`` (CI): a run with any figure that is not ``valid`` fails the command (exit 5) after
the run is kept and registered, as InferenceX's strict power mode; without it the same run exits 0.

Ground truth: a CPU-utilisation estimate is never ``valid`` (its efficiency verdict reads
``estimate`` at best: docs/accounting.md), and a result whose every verdict is ``valid`` passes
(``run.benchmark.strict_failures``, on results built with known verdicts)."""

from __future__ import annotations

import resource
import subprocess
import sys

from tests.fakes.reliability_procs import child_env, server
from tests.fakes.results_factory import make_level, make_result
from wattbench.results.rundir import load_result
from wattbench.results.store import HistoryStore
from wattbench.run.benchmark import strict_failures

MEMORY_LIMIT = 2 << 30


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def _run(base: str, out, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "wattbench", "run", "--target", base, "-c", "2", "-n", "6",
                           "--idle", "0", "--input-tokens", "16", "--output-tokens", "8", "--no-prime",
                           "--no-history-check", "--no-calibrate-prompts", "--no-html", "--quiet",
                           "--sensor", "estimate:cpu,tdp=100", "--out", str(out), *extra],
                          cwd=out.parent, env=child_env(COLUMNS="80"), capture_output=True, text=True, timeout=120,
                          preexec_fn=_limited)


def test_strict_fails_a_run_whose_figures_are_not_valid_and_keeps_it(tmp_path):
    db = tmp_path / "h.db"
    with server("--ttft-ms", "5", "--itl-ms", "2") as s:
        lax = _run(s.base, tmp_path / "lax", "--db", str(db))
        strict = _run(s.base, tmp_path / "strict", "--db", str(db), "--strict")
    assert lax.returncode == 0, lax.stderr
    assert strict.returncode == 5, strict.stderr
    res = load_result(tmp_path / "strict")
    # ground truth: an estimate is never `valid` (a model, not a meter; a short window may make it worse)
    assert res.status == "complete" and res.validity.verdict in ("estimate", "warn", "invalid")
    assert any(f.kind == "estimate" for f in res.levels[0].validity.findings)
    lines = strict.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in strict.stderr
    from wattbench.report.notes import verdict_text

    assert lines[0].startswith(f"wattbench: error: --strict: not every figure is valid — verdict: {verdict_text(res)};")
    assert f"wattbench report --notes {tmp_path / 'strict'}" in lines[0]
    assert strict.stdout.splitlines()[1].startswith("answer: ")  # the summary first, as without --strict
    with HistoryStore(db) as h:  # kept and registered all the same
        assert {r.run_id for r in h.list_runs()} == {res.run_id, load_result(tmp_path / "lax").run_id}


def test_strict_passes_only_when_every_verdict_is_valid():
    ok = make_result(levels=[make_level(0, value=1), make_level(1, value=4)])
    ok.validity.verdict, ok.validity.latency, ok.validity.energy = "valid", "valid", "measured"
    assert not strict_failures(ok)
    for field, value in (("verdict", "warn"), ("verdict", "estimate"), ("verdict", "invalid"), ("latency", "warn"),
                         ("energy", "unavailable")):
        bad = ok.model_copy(deep=True)
        setattr(bad.validity, field, value)
        assert strict_failures(bad), (field, value)
