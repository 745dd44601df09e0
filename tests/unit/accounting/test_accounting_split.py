"""Where the board's watts go: the H200's memory power (NVML field 185 with the
memory scope, a 1 s average) beside the board's energy counter, split per level into memory vs the
rest of the board and idle vs dynamic. The telemetry is scripted with known power so every figure
is exact: board 80 W idle / 687 W loaded, memory 38.8 W idle / 95 W loaded (as seen on an H200
under a bf16 matmul, docs/validation.md)."""

from __future__ import annotations

import pytest

from tests.fakes.scripted_sensor import build_log, counter_channel, grid, power_channel, step_trace
from wattbench.accounting.window import account_window
from wattbench.accounting.idle import measure_idle
from wattbench.accounting.split import power_split
from wattbench.core.schema import PowerSplit

S = 1_000_000_000
BOARD = step_trace([(0, 80.0), (10, 687.0)])
MEM = step_trace([(0, 38.8), (10, 95.0)])


def _log():
    tc, tp = grid(0, 40, 0.9), grid(0, 40, 0.1)
    return build_log(
        (counter_channel("nvml.gpu0.energy", device="gpu0", update_period_s=0.1), tc, [BOARD.energy(0, t) for t in tc]),
        (power_channel("nvml.gpu0.power_instant", device="gpu0", update_period_s=0.1), tp, [BOARD(t) for t in tp]),
        (power_channel("nvml.gpu0.memory_power", boundary="accelerator_memory", device="gpu0", quantity="power_avg",
                       update_period_s=1.0, uncertainty_pct=10.0), tp, [MEM(t) for t in tp]),
    )


def _level(log, a_s=12.0, b_s=32.0, idle=True):
    idle_p = measure_idle(log, 1 * S, 9 * S) if idle else None
    acc = account_window(log, int(a_s * S), int(b_s * S), output_tokens=1000, total_tokens=2000, idle=idle_p,
                         price_per_kwh=0.15, pue=1.0)
    return acc.energy, b_s - a_s


def test_split_memory_rest_idle_dynamic_from_nvml_shaped_telemetry():
    energy, dur = _level(_log())
    sp = power_split(energy, dur)
    m, r = sp["parts"]["memory"], sp["parts"]["rest"]
    assert sp["board_avg_power_w"] == pytest.approx(687.0, rel=1e-6)
    assert m["avg_power_w"] == pytest.approx(95.0, rel=1e-6)
    assert r["avg_power_w"] == pytest.approx(687.0 - 95.0, rel=1e-6)
    assert m["idle_power_w"] == pytest.approx(38.8, rel=1e-6) and r["idle_power_w"] == pytest.approx(41.2, rel=1e-6)
    assert m["dynamic_power_w"] == pytest.approx(95.0 - 38.8, rel=1e-6)
    assert r["dynamic_power_w"] == pytest.approx(687.0 - 95.0 - 41.2, rel=1e-6)
    assert sp["memory_share"] == pytest.approx(95.0 / 687.0, rel=1e-6)
    assert m["share"] + r["share"] == pytest.approx(1.0)
    assert m["energy_j"] + r["energy_j"] == pytest.approx(energy["accelerator"].energy_j)
    # memory carries its 1 s average's stated uncertainty; the rest adds both absolute errors
    assert m["uncertainty_pct"] == pytest.approx(energy["accelerator_memory"].uncertainty_pct)
    acc, mem = energy["accelerator"], energy["accelerator_memory"]
    assert r["uncertainty_pct"] == pytest.approx(
        100 * (acc.uncertainty_pct * acc.energy_j + mem.uncertainty_pct * mem.energy_j) / 100 / r["energy_j"])
    assert mem.uncertainty_pct >= 10.0


def test_no_idle_baseline_gives_the_split_without_idle_and_dynamic():
    energy, dur = _level(_log(), idle=False)
    sp = power_split(energy, dur)
    assert sp["parts"]["memory"]["avg_power_w"] == pytest.approx(95.0, rel=1e-6)
    assert all(sp["parts"][p][k] is None for p in ("memory", "rest") for k in ("idle_power_w", "dynamic_power_w"))
    assert any("no idle baseline" in n for n in sp["notes"])


def test_no_memory_channel_means_no_split():
    tc = grid(0, 40, 0.9)
    log = build_log((counter_channel("c", device="gpu0", update_period_s=0.1), tc, [BOARD.energy(0, t) for t in tc]))
    energy, dur = _level(log)
    assert "accelerator_memory" not in energy and power_split(energy, dur) is None


def test_split_is_shown_in_the_terminal_and_html_reports(tmp_path):
    from tests.fakes.results_factory import make_result
    from wattbench.report.data import RunData
    from wattbench.report.html import build_html
    from wattbench.report.terminal import power_split_lines
    from wattbench.results.rundir import write_result

    energy, dur = _level(_log())
    res = make_result()
    lv = res.levels[0]
    lv.energy = energy
    lv.power_split = PowerSplit.model_validate(power_split(energy, dur))
    line = power_split_lines(res)[0].plain
    assert line.startswith("c=1: ") and "memory 95.0 W (13.8% of the board's 687 W)" in line
    assert "rest of board 592 W" in line and "dynamic 56.2 + 551 W" in line
    from rich.console import Console

    from wattbench.report.terminal import run_summary

    con = Console(record=True, width=250)
    con.print(run_summary(res))
    assert "rest of board 592 W" in con.export_text()  # one line in the terminal summary
    write_result(tmp_path, res)
    html = build_html([RunData(tmp_path)])
    assert "Where the board&#x27;s watts go" in html or "Where the board's watts go" in html
    assert "memory dynamic (W)" in html
