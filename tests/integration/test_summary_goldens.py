"""Golden terminal summaries at 80 columns: what ``wattbench run`` prints for four runs a user meets
early — with ``--trials 3``, an open loop (``--rate``), an SLO no level can meet, and a server that
dies mid-run — against the scripted stream server, through the CLI (under a memory limit), each
compared line by line with ``tests/fixtures/golden/summaries_80.json``.

Deterministic by normalisation, as the answer-summary golden is: the terminal's folds joined (where
a line folds follows the numbers' widths), run ids named, every number ``#`` (figures and timings
follow the host; digits inside a name, p99 or E2E, stay), runs of spaces one (column widths follow
the numbers' widths), and the notes that judge the host rather than the run (the client's loop lag,
CPU or send lag, chunks read in bunches) dropped with the counts and the latency verdict they move
(a latency row's ``–`` beside figures is ``#``; the ITL columns, which a loaded host's bunched chunks
leave unmeasured or out, are left out of the ITL/E2E table, its E2E columns kept; a level that
measured nothing keeps its dashes in the level table). What stays exact: which lines are said and in what order — the answer, the
verdict, each table's headers and level labels, the notes' words, the pointers.

Regenerate (only when the layout is meant to change; review the diff):
``WATTBENCH_REGEN_GOLDEN=1 python -m pytest tests/integration/test_summary_goldens.py``.
"""

from __future__ import annotations

import re
import resource
import subprocess
import sys

import pytest

from tests.fakes.reliability_procs import child_env, server
from tests.golden import check_part

pytestmark = pytest.mark.slow

MEMORY_LIMIT = 2 << 30
BASE = ("--idle", "0", "--input-tokens", "16", "--output-tokens", "16", "--quiet", "--no-prime", "--no-history-check",
        "--no-calibrate-prompts", "--sensor", "const:node=500", "--no-register", "--no-html")
# notes about the host running the test, not the run: their lines (and the folds under them) are dropped
HOST_NOTES = ("loop lag", "client CPU", "load generator", "saturat", "bunches", "event loop", "send lag")
SCENARIOS = {
    "trials_3": ((), ("-c", "1,2", "-n", "8", "--trials", "3"), 0),
    "open_loop": ((), ("-r", "20", "--duration", "2"), 0),
    "impossible_slo": ((), ("-c", "1,2", "-n", "8", "--slo", "ttft_p99=1ms"), 0),
    "dead_server": (("--die-after-requests", "20"), ("-c", "1,2,4,8", "-n", "12"), 4),
}


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


# where a logical line of the summary's prose starts (any other line is the terminal's fold of the one before)
STARTS = re.compile(r"^(wattbench |answer: |not measured: |verdict: |best under SLO|optimize|primed |prompts |"
                    r"history check|what each term|results: |[!✗≈-] |[cr]=\S+: |\s+\d+ notes )")


def logical_lines(text: str) -> list[str]:
    """The summary's lines with the terminal's folds joined: blocks are separated by blank lines; a
    block with a rule (``───``) is a table, kept line by line; in the others a line that starts no
    logical line (``STARTS``) continues the one before (fold positions follow the numbers' widths)."""
    out: list[str] = []
    for block in re.split(r"\n\s*\n", text):
        lines = [x.rstrip() for x in block.splitlines() if x.strip()]
        if any("───" in x for x in lines):
            if lines and "ITL" in lines[0] and "E2E" in lines[0]:  # which ITL columns show follows the host
                lines = [" ".join(["E2E"] * lines[0].split().count("E2E"))] + [
                    x if "───" in x else " ".join([x.split()[0], *x.split()[-lines[0].split().count("E2E"):]])
                    for x in lines[1:]]
            out += lines
            continue
        for k, x in enumerate(lines):
            if out and k and not STARTS.match(x):
                out[-1] += " " + x.strip()
            else:
                out.append(x)
    return out


def normalise(text: str) -> list[str]:
    """The summary's logical lines, independent of the host's timing (module docstring)."""
    lines: list[str] = []
    for line in logical_lines(text):
        if any(h in line for h in HOST_NOTES):
            continue
        line = re.sub(r"\b\d{8}-\d{6}-[0-9a-f]{6}\b", "<run id>", line)
        line = re.sub(r"(?<![\w.])\d[\d,]*(\.\d+)?(?![\w])", "#", line)  # p99, E2E, 1ms stay
        line = re.sub(r"\blatency (valid|warn)\b", "latency <host>", line)  # the loop lag moves it
        line = re.sub(r"^\s*# notes \(.*?\)(, # not shown)?,", "# notes (<counts>),", line)
        line = re.sub(r"[─━]+", "─", line)
        line = re.sub(r" {2,}", " ", line).strip()
        cells = line.split()[1:]
        if re.match(r"^[cr]=#", line) and "#" in cells and set(cells) <= {"#", "–"}:
            line = line.replace("–", "#")  # a latency a loaded host left unmeasured (ITL of bunched chunks)
        lines.append(line)
    return lines


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_summary_at_80_columns_matches_its_golden(tmp_path, name):
    server_args, run_args, rc = SCENARIOS[name]
    with server("--ttft-ms", "20", "--itl-ms", "2", *server_args) as s:
        p = subprocess.run([sys.executable, "-m", "wattbench", "run", "--target", s.base, *run_args, *BASE,
                            "--out", "run"], cwd=tmp_path, env=child_env(COLUMNS="80"), capture_output=True,
                           text=True, timeout=240, preexec_fn=_limited)
    assert p.returncode == rc, p.stderr
    assert all(len(x) <= 80 for x in p.stdout.splitlines()), p.stdout  # nothing wraps at 80 columns
    assert (tmp_path / "run" / "result.json").exists()
    check_part("summaries_80", name, normalise(p.stdout),
               about="`wattbench run` summaries at 80 columns against the scripted stream server "
                     "(tests/integration/test_summary_goldens.py): --trials 3, an open loop, an impossible SLO, "
                     "a server dying mid-run; numbers as #, host-dependent notes dropped",
               regenerate="WATTBENCH_REGEN_GOLDEN=1 python -m pytest tests/integration/test_summary_goldens.py")
