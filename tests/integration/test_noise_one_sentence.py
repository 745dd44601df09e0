"""One noise basis, one count, one sentence: ``history noise``, ``compare`` and ``regress`` read the
same run-to-run spread of a configuration's figure and say it in the same words.

Four runs of one configuration against the scripted stream server (a declared 500 W node meter, so
tokens/s per kW is throughput ÷ 0.5 kW), registered in one history database. Before, for the same
four runs, ``history noise`` said "4 runs, 3 df", ``compare`` "4 runs, 1 df" and two lines later
"noise unknown", regress "1 degree of freedom" for J/token and "noise unknown" for tokens/s (the
history was read for per kW only). Now ``history noise`` prints ``history of key K: 4 runs, sd S%,
3 df``; ``compare`` and ``regress`` of two of them print, for per kW, J/token and throughput alike,
``history of key K: 4 runs, the 2 compared left out: sd S2%, 1 df`` (a spread never holds the
difference it judges) — the same count, and why the degrees of freedom differ. Each sd is computed
here by hand from the runs' figures in their result.json files.
"""

from __future__ import annotations

import math
import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes.reliability_procs import child_env, server
from wattbench.config.run import RunConfig
from wattbench.results.configuration import configuration, configuration_key, level_figure

pytestmark = pytest.mark.slow

MEMORY_LIMIT = 2 << 30


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def _wb(*args: str, cwd: Path, cols: int = 80) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "wattbench", *args], cwd=cwd, env=child_env(COLUMNS=str(cols)),
                          capture_output=True, text=True, timeout=180, preexec_fn=_limited)


def _joined(text: str) -> str:
    return " ".join(text.split())


def test_history_noise_compare_and_regress_print_one_count_and_sentence(tmp_path):
    db = tmp_path / "h.db"
    # ITL 10 ms: a request of 16 tokens takes ~170 ms, so a loaded host's scheduling jitter stays small
    from wattbench.run import run_benchmark

    results = []
    with server("--ttft-ms", "20", "--itl-ms", "10") as s:
        for i in range(4):  # in this process: one import of the package for the four runs
            results.append(run_benchmark(RunConfig(
                target=s.base, concurrency=[2], num_requests=8, input_tokens="16", output_tokens="16", idle_s=0,
                cooldown_s=0, prime=False, history_check=False, calibrate_prompts=False, sensors=["const:node=500"],
                register_run=True, db=str(db), html=False, out=str(tmp_path / f"r{i}"))))
    keys = {configuration_key(configuration(r, r.levels[0])) for r in results}
    assert len(keys) == 1  # one configuration
    (key,) = keys
    figs = [level_figure(r.levels[0])[1] for r in results]
    logs = [math.log(f) for f in figs]
    m = sum(logs) / 4
    sd = math.sqrt(sum((x - m) ** 2 for x in logs) / 3)

    noise = _wb("history", "noise", "--db", str(db), cwd=tmp_path)
    assert noise.returncode == 0, noise.stderr
    (sentence,) = [x[len("  noise: "):] for x in noise.stdout.splitlines() if x.startswith("  noise: ")]
    one_segment = "segments" not in sentence
    if one_segment:  # the spread of all four, by hand
        assert sentence == f"history of key {key}: 4 runs, sd {sd * 100:.1f}%, 3 df", noise.stdout
    else:  # the loaded host moved a run beyond the series' noise: a change point, still 4 runs
        assert sentence.startswith(f"history of key {key}: 4 runs in ")
    # r0 and r3 compared: left out of the spread they are judged by, r1 and r2 remain (1 df)
    sd2 = abs(logs[1] - logs[2]) / math.sqrt(2)
    judged = f"history of key {key}: 4 runs, the 2 compared left out: sd {sd2 * 100:.1f}%, 1 df"

    cmp = _wb("compare", str(tmp_path / "r0"), str(tmp_path / "r3"), "--db", str(db), cwd=tmp_path, cols=160)
    assert cmp.returncode == 0, cmp.stderr
    # the answer line's word rests on that basis, said once below the answer lines
    (cmp_basis,) = [x for x in cmp.stdout.splitlines() if x.startswith("noise of per kW: ")]
    if one_segment:
        assert cmp_basis == f"noise of per kW: {judged}", cmp.stdout
    assert "noise unknown" not in cmp.stdout

    reg = _wb("regress", str(tmp_path / "r3"), "--baseline", str(tmp_path / "r0"), "--db", str(db), cwd=tmp_path,
              cols=160)
    # one segment: the spread left has 1 degree of freedom, too few to decide any check (exit 6)
    assert reg.returncode == 6 if one_segment else reg.returncode in (0, 1, 6), reg.stdout + reg.stderr
    # throughput's own spread: with a declared meter its sd of ln equals per kW's (per kW = tok/s ÷ 0.5),
    # and J/token's is per kW's: one basis line for the three, the very line compare printed
    lines = reg.stdout.splitlines()
    assert cmp_basis.replace("per kW:", "per kW, J/output token, throughput:") in lines, reg.stdout
    assert "noise unknown" not in reg.stdout
    # every count printed anywhere for this key is the one count: 4 runs
    said = [set(re.findall(rf"history of key {key}: (\d+) runs", _joined(out)))
            for out in (noise.stdout, cmp.stdout, reg.stdout)]
    assert said == [{"4"}] * 3, said
