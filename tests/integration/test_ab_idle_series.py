"""``wattbench ab`` on one shared meter: the idle side's draw is measured again after each block of
pairs. Ground truth: a scripted sensor whose power the test sets — 300 W while a trial loads a
server, and a known idle wattage at each idle window (before the first pair, then after each
block) — so the series, its mean, range and share of each side's power are known exactly."""

from __future__ import annotations

from contextlib import ExitStack

import pytest

from tests.fakes.scripted_sensor import LivePower, ScriptedSensor
from tests.fakes.stream_server_proc import stream_server
from wattbench.config.run import RunConfig
from wattbench.config.run_commands import AbConfig
from wattbench.report.ab import ab_lines
from wattbench.results.rundir import load_result
from wattbench.run.ab import run_ab
from wattbench.run.events import LevelStarted, Phase, ProgressEvent

pytestmark = [pytest.mark.slow, pytest.mark.serial]  # the windows' edges are judged against the meter's read timing

LOAD_W = 300.0
IDLE_W = [100.0, 110.0, 90.0]  # before the first pair, after block 1, after block 2
IDLE_S = 1.0
# a window's edge falls between two meter reads 10 ms apart, across the step from the load's 300 W:
# at most 0.01 s × 200 W / 1 s = 2 W of error; 3 W allows a read late on a loaded machine
EDGE_W = 3.0


def test_the_idle_series_is_measured_after_each_block_and_shown_with_its_share(tmp_path):
    power = LivePower(IDLE_W[0])
    sensor = ScriptedSensor(power, name="gpu", boundary="accelerator", poll_interval_s=0.01)
    idle_phases: list[str] = []

    def progress(event: ProgressEvent) -> None:
        # the meter reads the idle wattage of the window about to be measured, the load power in a trial
        if isinstance(event, Phase) and event.name == "idle":
            sensor.set_power(IDLE_W[min(len(idle_phases), len(IDLE_W) - 1)])
            idle_phases.append(event.message)
        elif isinstance(event, LevelStarted):
            sensor.set_power(LOAD_W)

    with ExitStack() as stack:
        a = stack.enter_context(stream_server("--ttft-ms", "5", "--itl-ms", "2"))[0]
        b = stack.enter_context(stream_server("--ttft-ms", "5", "--itl-ms", "3"))[0]
        run = RunConfig(concurrency=[2], num_requests=6, input_tokens="16", output_tokens="8", idle_s=IDLE_S, html=False,
                        out=str(tmp_path / "ab"), db=str(tmp_path / "h.sqlite"), history_check=False,
                        sample_interval_s=0.01)
        out = run_ab(AbConfig(side_a=a, side_b=b, pairs=4, run=run), progress, sensors=[sensor])

    assert len(idle_phases) == 3 and "between blocks" in idle_phases[1] and "between blocks" in idle_phases[2]
    series = out.comparison.idle_series["accelerator"]
    # each window reads the wattage set for it (up to the edge's error)
    assert [w for _, w in series] == pytest.approx(IDLE_W, abs=EDGE_W)
    times = [t for t, _ in series]
    assert times[0] < 0 < times[1] < times[2]  # the pairs' clock: the baseline before the first pair
    draw = out.comparison.idle[0]
    mean = sum(w for _, w in series) / 3
    assert draw.windows == 3 and draw.mean_w == pytest.approx(mean, rel=1e-12)
    assert draw.mean_w == pytest.approx(100.0, abs=EDGE_W)
    assert (draw.low_w, draw.high_w) == (min(w for _, w in series), max(w for _, w in series))
    # each side's power is the whole meter's: 300 W in its trials, so the idle mean is a third of it
    pl = out.comparison.levels[0]
    assert pl.boundary == "accelerator"
    pa = load_result(out.run_dir_a).noise.paired
    a_mean = sum(pa.levels[0].a_power_w) / len(pa.levels[0].a_power_w)
    assert a_mean == pytest.approx(LOAD_W, rel=0.03)
    assert draw.share_a == pytest.approx(mean / a_mean, rel=1e-9) and draw.share_a == pytest.approx(1 / 3, rel=0.04)
    assert not draw.drifts  # three windows: no interval, no drift claimed
    # both files hold the series; the lines ab prints say it
    assert load_result(out.run_dir_b).noise.paired.idle_series == pa.idle_series
    line = next(ln for ln in ab_lines(out.comparison) if "idle" in ln)
    assert f"3 windows before and between the blocks: mean {draw.mean_w:,.0f} W ({draw.low_w:,.0f}–" \
        f"{draw.high_w:,.0f} W), {draw.share_a:.0%} of A's and {draw.share_b:.0%} of B's power" in line
    assert "the ratio includes the idle side's draw at accelerator" in line
