"""A trial that measured nothing has no figure. Ground truth: the scripted stream server answers HTTP
500 (or 401) to a known range of completion requests (``--fail-requests``), so with no priming and
no prompt calibration trial k of ``-c 2 -n 8`` is requests ``8k+1 .. 8k+8``, and a whole trial
completes nothing. The declared 500 W meter makes each trial's tokens/s per kW its own output
tokens/s over 0.5 kW: the figure of every measuring trial is known, the dead trial's is None (never
a copy of another's, never a 0 averaged in), the mean and the Student-t interval come from the
measuring trials alone (df = their count - 1), the verdict and the exit code say a trial failed,
and the answer line names it."""

from __future__ import annotations

import re

import math
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes.reliability_procs import child_env
from tests.fakes.stream_server_proc import stream_server
from wattbench.config.run import RunConfig
from wattbench.core.schema import FindingKind
from wattbench.core.numbers import fmt_estimate
from wattbench.results.rundir import load_result
from wattbench.run import run_benchmark

pytestmark = pytest.mark.slow

T_975_1 = 12.706204736174707  # Student t, 97.5th percentile, 1 degree of freedom (2 measuring trials)
DECLARED_KW = 0.5
MEMORY_CAP = 6 << 30  # a blow-up fails the run (and the test) instead of taking the machine down
RUN = ("-c", "2", "-n", "8", "--trials", "3", "--input-tokens", "8", "--output-tokens", "16", "--no-prime",
       "--no-calibrate-prompts", "--no-history-check", "--sensor", "const:accelerator=500", "--idle", "0",
       "--no-register", "--no-html")


def _config(base: str, out: Path, **kw) -> RunConfig:
    return RunConfig(target=base, concurrency=[2], num_requests=8, trials=3, input_tokens="8", output_tokens="16",
                     prime=False, calibrate_prompts=False, history_check=False, sensors=["const:accelerator=500"],
                     idle_s=0, register_run=False, html=False, out=str(out), **kw)


def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def _wb(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "wattbench", *args], cwd=cwd, env=child_env(), capture_output=True,
                          text=True, timeout=180, preexec_fn=_capped)


def _answer(stdout: str) -> str:
    """The answer line, joined back where the terminal width wrapped it."""
    lines = stdout.splitlines()
    i = next(i for i, ln in enumerate(lines) if ln.startswith("answer:"))
    out = [lines[i]]
    for ln in lines[i + 1:]:
        if not ln or ln.startswith(("primed", "verdict", "prompts", "wattbench")):
            break
        out.append(ln)
    return " ".join(x.strip() for x in out)


def test_a_dead_middle_trial_has_no_figure_and_the_interval_is_the_two_that_measured(tmp_path):
    with stream_server("--ttft-ms", "10", "--itl-ms", "3", "--fail-requests", "9-16") as (base, stats):
        res = run_benchmark(_config(base, tmp_path / "run"))
        served = stats()
    assert served["faults"] == {"scripted_status": 8} and served["streams_completed"] == 16
    lv = res.levels[0]
    block = lv.trials
    assert block is not None and block.n == 3
    assert [(u.trial, u.requests, u.why) for u in block.unmeasured] == [(2, 8, "8 of 8 requests failed: http_500 8")]
    tok = block.figures["output_tokens_per_s"]
    per_kw = block.figures["output_tokens_per_s_per_kw@accelerator"]
    assert tok.values[1] is None and per_kw.values[1] is None  # the dead trial: no figure, not 0, not a copy
    a, b = per_kw.values[0], per_kw.values[2]
    assert a == pytest.approx(tok.values[0] / DECLARED_KW, rel=1e-9)  # each its own tokens/s over 0.5 kW
    assert b == pytest.approx(tok.values[2] / DECLARED_KW, rel=1e-9)
    assert a != b and tok.values[0] > 0 and tok.values[2] > 0
    # mean and log-scale interval of the two measuring trials: df 1, log half-width t · |ln(a / b)| / 2
    # about their geometric mean
    assert per_kw.n == 2 and per_kw.mean == pytest.approx((a + b) / 2, rel=1e-12)
    w = T_975_1 * abs(math.log(a / b)) / 2
    assert per_kw.ci_low == pytest.approx(math.sqrt(a * b) * math.exp(-w), rel=1e-9)
    assert per_kw.ci_high == pytest.approx(math.sqrt(a * b) * math.exp(w), rel=1e-9)
    # the level is the last trial that measured, named as such; the dead trial is a warn on it
    assert lv.trial == 2 and lv.requests.completed == 8
    f = next(f for f in lv.validity.findings if f.kind == FindingKind.TRIAL_UNMEASURED)
    assert f.severity == "warn" and lv.validity.verdict == "warn"
    assert f.text == ("trial 2 of 3 measured nothing (8 of 8 requests failed: http_500 8): the level's figures are "
                      "the mean of the 2 trials that measured; no mean or interval counts it")
    # what is written is what was measured
    assert load_result(tmp_path / "run").levels[0].trials == block


def test_two_dead_trials_leave_one_figure_without_an_interval_and_an_invalid_level(tmp_path):
    with stream_server("--ttft-ms", "10", "--itl-ms", "3", "--fail-requests", "9-24") as (base, _):
        res = run_benchmark(_config(base, tmp_path / "run"))
    lv = res.levels[0]
    per_kw = lv.trials.figures["output_tokens_per_s_per_kw@accelerator"]
    tok = lv.trials.figures["output_tokens_per_s"]
    assert per_kw.values[1:] == [None, None] and per_kw.n == 1
    assert per_kw.ci_low is None and per_kw.ci_high is None  # one value: no interval, never a zero-width one
    assert per_kw.mean == pytest.approx(tok.values[0] / DECLARED_KW, rel=1e-9)
    assert lv.validity.verdict == "invalid" and lv.trial == 0
    assert [u.trial for u in lv.trials.unmeasured] == [2, 3]


def test_the_cli_names_the_dead_trial_in_the_answer_and_exits_3(tmp_path):
    with stream_server("--ttft-ms", "10", "--itl-ms", "3", "--fail-requests", "9-16") as (base, _):
        p = _wb("run", "--target", base, *RUN, "--out", str(tmp_path / "run"), cwd=tmp_path)
    assert p.returncode == 3 and "Traceback" not in p.stderr, p.stderr
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("wattbench: error:")]
    assert len(errors) == 1 and errors[0].startswith(
        "wattbench: error: 1 level(s) completed no measured request (concurrency=2 trial 2 of 3); the run is kept")
    per_kw = load_result(tmp_path / "run").levels[0].trials.figures["output_tokens_per_s_per_kw@accelerator"]
    answer = _answer(p.stdout)
    # the mean of the two trials that measured, at the precision of the widest interval the answer says
    # (the trials' CI with the declared meter's ±20%: core.numbers.fmt_estimate)
    widest = re.search(r"from the trials; ([\d,.]+)–([\d,.]+),", answer)
    assert widest, answer
    lo, hi = (float(x.replace(",", "")) for x in widest.groups())
    shown = fmt_estimate(per_kw.mean, lo, hi)[0]
    assert answer.startswith(f"answer: c=2 — {shown} output tok/s per kW (accelerator, declared"), answer
    assert ", mean of 2 trials (95% CI " in answer, answer
    assert answer.endswith("; trial 2 of 3 measured nothing (8 of 8 requests failed: http_500 8) · warn"), answer


def test_a_level_whose_trials_all_measured_nothing_gets_no_figure(tmp_path):
    with stream_server("--ttft-ms", "10", "--itl-ms", "3", "--fail-requests", "1-24") as (base, _):
        p = _wb("run", "--target", base, *RUN, "--out", str(tmp_path / "run"), cwd=tmp_path)
    assert p.returncode == 3 and "Traceback" not in p.stderr, p.stderr
    lv = load_result(tmp_path / "run").levels[0]
    assert lv.energy == {} and lv.validity.verdict == "invalid"
    assert lv.trials.figures.get("output_tokens_per_s") is None  # no trial measured: no mean of anything
    assert [u.trial for u in lv.trials.unmeasured] == [1, 2, 3]
    answer = _answer(p.stdout)
    assert answer == ("answer: c=2 — no figure: none of its 3 trials measured (8 of 8 requests failed: http_500 8) "
                      "· invalid"), answer
    assert "no power meter" not in p.stdout  # the meter read; the level measured nothing
