"""The tune in a terminal: readable at 80 columns (one figure per cell, the
configurations' figures split over a second table led by the trial number, the configuration folded
at its spaces), one wide table at 160, and a serve command that pastes into a shell at any width.

Rendered from the tune.json of the H200 validation (docs/validation.md), as a user would see it."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from rich.console import Console

from wattbench.report.tune import shell_lines, tune_summary
from wattbench.results.tune import load_tune

H200 = Path(__file__).resolve().parents[3] / "docs/validation-data/h200-tune/tune.json"


def render(t, width: int) -> str:
    c = Console(record=True, width=width, color_system=None, file=open("/dev/null", "w"))
    for r in tune_summary(t):
        c.print(r)
    return c.export_text()


def trial_rows(out: str, index: int) -> list[list[str]]:
    """Every table row of a trial (one per table), split into cells."""
    return [line.split() for line in out.splitlines() if re.match(rf"^{index}\s", line)]


@pytest.fixture(scope="module")
def t():
    return load_tune(H200)


def _expected_cells(tr) -> list[str]:
    f = tr.figures
    return [tr.status, f"c={f.load_value}", f"{tr.score:,.0f}", f"{f.goodput_output_tokens_per_s:,.0f}",
            f"{f.output_tokens_per_s_per_kw:,.0f}", f"{f.j_per_output_token:.4f}", f"{f.ttft_p99_ms:,.0f}",
            f"{f.tpot_p99_ms:.1f}", f"{f.avg_power_w:.0f}", f.verdict]


@pytest.mark.parametrize("width", [80, 160])
def test_every_figure_in_its_own_cell(t, width):
    out = render(t, width)
    assert "…" not in out
    assert max(len(line.rstrip()) for line in out.splitlines()) <= width
    assert len(t.trials) == 5
    for tr in t.trials:
        cells = [c for r in trial_rows(out, tr.index) for c in r[1:]]
        for want in _expected_cells(tr):
            assert want in cells, (width, tr.index, want, cells)


def test_narrow_splits_wide_does_not(t):
    narrow, wide = render(t, 80), render(t, 160)
    for tr in t.trials:
        assert len(trial_rows(narrow, tr.index)) == 2  # the trial number leads each of two tables
        assert len(trial_rows(wide, tr.index)) == 1
    head = [x for x in wide.splitlines() if x.startswith("#")]
    assert len(head) == 1 and all(h in head[0] for h in ("configuration", "status", "score", "tok/s/kW", "verdict"))
    label = t.trials[1].label  # the longest: on one line at 160, folded at its spaces at 80
    assert label == "cb-use-cuda-graph cb-max-batch-tokens=8192 cb-max-memory-percent=0.5"
    assert label in wide
    lines = narrow.splitlines()
    i = next(k for k, x in enumerate(lines) if x.startswith("1 "))
    folded = [lines[i].split()[1], lines[i + 1].split()[0], lines[i + 2].split()[0]]
    assert " ".join(folded) == label
    assert "c=49" in narrow and "conc" not in narrow  # the run summary's short load labels


@pytest.mark.parametrize("width", [80, 160])
def test_pareto_recommendation_and_serve_command(t, width):
    out = render(t, width)
    flat = " ".join(out.split())
    front = ", ".join(str(i) for i in t.pareto.frontier)
    assert t.pareto.latency == "ttft_p99_ms"
    assert f"Pareto front (goodput per kW vs p99 TTFT): trials {front}" in flat
    summary = out[out.index("recommended:"):out.index("serve it:")].splitlines()[1:]
    assert all(line.startswith("  ") for line in summary)  # the gain's wrapped lines stay indented
    rec = t.recommended
    assert f"recommended: trial {rec.trial} — {rec.label} {rec.summary}" in flat
    assert "note: the best two are within the measurement noise" in flat  # decision.separated is false
    lines = out.splitlines()
    i = lines.index("serve it:")
    cmd = []
    for line in lines[i + 1:]:
        cmd.append(line.strip().removesuffix("\\").strip())
        if not line.rstrip().endswith("\\"):
            break
    assert shlex.split(" ".join(cmd)) == shlex.split(rec.serve_command)
    assert (len(cmd) > 1) == (width == 80)  # continued with a backslash only where it does not fit


def test_shell_lines_paste_as_one_command():
    cmd = "sudo nvidia-smi -pl 550 && vllm serve '/models/my model' --max-num-seqs 128 --a-very-long-flag-name-x"
    lines = shell_lines(cmd, 30)
    assert all(line.endswith(" \\") for line in lines[:-1]) and not lines[-1].endswith("\\")
    assert all(len(line) <= 30 for line in lines if "a-very-long" not in line)  # a longer word stands alone
    joined = " ".join(line.strip().removesuffix("\\").strip() for line in lines)
    assert shlex.split(joined) == shlex.split(cmd) and "&&" in joined.split()
    assert shell_lines(cmd, 200) == ["  " + cmd]
