"""``wattbench ab`` from the command line: the answer first in compare's words, the precision asked
and why the pairs stopped (``--precision`` past what ``--max-pairs`` allows), both runs written;
and bad input — a side that does not answer, one server twice, a side that is no URL — is one line
on stderr, exit 2, nothing written. Run under a memory limit, so a blow-up fails the test instead of
taking the machine down."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes.stream_server_proc import stream_server
from wattbench.results.rundir import load_result

ROOT = Path(__file__).resolve().parents[2]
MEMORY_LIMIT = 4 << 30  # bytes of address space: numpy, aiohttp and the workers fit; a runaway does not
NOWHERE = "http://127.0.0.1:9"


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def wb(*args: str, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    env["WATTBENCH_DB"] = str(cwd / "history.sqlite3")
    env.pop("WATTBENCH_API_KEY", None)
    env.pop("OPENAI_API_KEY", None)
    return subprocess.run([sys.executable, "-m", "wattbench", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout, preexec_fn=_limit)


@pytest.mark.slow
def test_ab_answers_first_and_says_the_precision_it_could_not_reach(tmp_path):
    with stream_server("--ttft-ms", "20", "--itl-ms", "10") as (a, _), \
            stream_server("--ttft-ms", "30", "--itl-ms", "15") as (b, _):
        p = wb("ab", a, b, "-c", "2", "-d", "1", "--input-tokens", "16", "--output-tokens", "16",
               "-s", "const:node=500", "--idle", "0", "--no-html", "--precision", "0.01", "--max-pairs", "5",
               "--out", str(tmp_path / "ab"), "--quiet", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith("A = ") and f"({a})" in lines[0] and "B = " in lines[0] and f"({b})" in lines[0]
    # compare's words: B is 1.5x slower in every request, one declared meter: per kW 0.67x
    assert lines[1].startswith("c=2: B/A per kW 0.6") and "= throughput 0.6" in lines[1] and "power 1.00×" in lines[1]
    assert lines[2].startswith("c=2: ±") and "short of the ±0.01% asked" in lines[2]
    # --max-pairs 5 in whole blocks: 4 pairs, A B B A A B B A
    assert lines[3] == ("paired: A B B A A B B A; stopped at --max-pairs 5: 4 pairs measured, c=2 short of "
                        "±0.01%")
    ra, rb = load_result(tmp_path / "ab" / "A"), load_result(tmp_path / "ab" / "B")
    assert ra.levels[0].trials.n == rb.levels[0].trials.n == 4
    assert ra.noise.paired.precision_pct == pytest.approx(0.01) and ra.noise.paired.max_pairs == 5


def _refused(tmp_path: Path, *args: str) -> str:
    before = sorted(tmp_path.rglob("*"))
    p = wb("ab", *args, "-c", "1", "-n", "2", "-s", "const:node=500", "--idle", "0", "--out",
           str(tmp_path / "ab"), cwd=tmp_path, timeout=120)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2, p.stderr
    assert len(lines) == 1 and lines[0].startswith("wattbench: error: ") and "Traceback" not in p.stderr, p.stderr
    assert sorted(tmp_path.rglob("*")) == before  # nothing written
    return lines[0]


def test_a_side_that_does_not_answer_is_one_line_and_nothing_is_written(tmp_path):
    with stream_server("--ttft-ms", "5", "--itl-ms", "1") as (a, _):
        line = _refused(tmp_path, a, NOWHERE)
    assert line.startswith("wattbench: error: side B: ") and "127.0.0.1:9" in line


def test_one_server_twice_is_refused(tmp_path):
    line = _refused(tmp_path, "http://127.0.0.1:9", "http://127.0.0.1:9/v1")
    assert "A and B are the same server" in line and "give B another URL" in line


def test_a_side_that_is_no_url_nor_engine_is_refused(tmp_path):
    line = _refused(tmp_path, "http://127.0.0.1:9", "localhost:8000")
    assert "side B 'localhost:8000' is neither a URL" in line
