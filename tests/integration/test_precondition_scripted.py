"""``--precondition`` from the command line against scripted servers whose speed is known
(``--ramp-s S --ramp-gain G``: tokens/s rise by G over the S seconds from the first stream, then
hold): ``run`` loads the server until after its ramp and records the rise; ``ab`` preconditions
each side after its priming and before the first pair, records it in each side's result, and the
side still warming when the limit passed says so in its run's warnings while the answer comes as
ever. No temperature is read here (a declared meter): the throughput rule alone decides, and the
record says so. The rules' window is shortened at its seam (``run.level.PRECONDITION_WINDOW_S``:
loads of a few tenths of a second here, a minute's on a GPU); the bound is the rule's own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.fakes.stream_server_proc import stream_server
from wattbench.cli.main import build_app
from wattbench.metrics.drift import SETTLE_CHANGE_PCT
from wattbench.results.rundir import load_result

pytestmark = [pytest.mark.slow, pytest.mark.serial]  # judged against the servers' scripted timing

WINDOW_S = 1.5
RAMP_S, RAMP_GAIN = 3.0, 1.0  # tokens/s double over the server's first 3 s
LOAD = ["--input-tokens", "16", "--output-tokens", "24", "-s", "const:node=500", "--idle", "0", "--no-html",
        "--no-calibrate-prompts", "--quiet"]


@pytest.fixture
def short_window(monkeypatch):
    monkeypatch.setattr("wattbench.run.level.PRECONDITION_WINDOW_S", WINDOW_S)


def _wb(*args: str, db: Path) -> str:
    out = CliRunner().invoke(build_app(), [*args, "--db", str(db)], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    return out.output


def _speed(t_s: float) -> float:
    """The ramp server's tokens/s at ``t_s`` after its first stream, relative to its start."""
    return 1.0 + RAMP_GAIN * min(max(t_s, 0.0), RAMP_S) / RAMP_S


def test_run_precondition_loads_until_after_the_ramp(tmp_path, short_window):
    ramp = ["--ttft-ms", "10", "--itl-ms", "10", "--ramp-s", str(RAMP_S), "--ramp-gain", str(RAMP_GAIN)]
    with stream_server(*ramp) as (base, stats):
        _wb("run", "--target", base, "-c", "4", "-n", "8", *LOAD, "--precondition", "--precondition-max", "20",
                   "--out", str(tmp_path / "r"), db=tmp_path / "h.sqlite")
        t0_ns = stats()["ramp_t0_ns"]
    r = load_result(tmp_path / "r")
    pc = r.noise.precondition
    assert pc is not None and pc.settled, pc
    assert pc.rules == ["throughput"] and pc.temperature_settled is None
    assert "no GPU temperature was read" in pc.reason and "the throughput alone decided" in pc.reason
    # after the priming, and not settled before the ramp ended
    assert pc.start_ns >= r.noise.priming.end_ns
    end_ns = pc.start_ns + pc.duration_s * 1e9
    assert end_ns >= t0_ns + RAMP_S * 1e9
    # the record holds the rise, by about the ramp's truth from where the first load began
    tps = pc.round_output_tokens_per_s
    assert len(tps) == pc.rounds >= 3 and all(v is not None and v > 0 for v in tps)
    # (each load's tokens/s is its mean over its span: the first load's is the speed near its midpoint)
    first_mid_ns = pc.start_ns + pc.round_end_s[0] * 1e9 / 2
    truth = _speed(RAMP_S) / _speed((first_mid_ns - t0_ns) / 1e9)
    assert truth > 1.2
    assert max(tps[-3:]) / tps[0] == pytest.approx(truth, rel=0.2)
    assert abs(pc.throughput_change_pct) <= SETTLE_CHANGE_PCT and pc.window_s == pytest.approx(WINDOW_S) and pc.limit_s == pytest.approx(20.0)
    assert not [w for w in r.warnings if w.startswith("--precondition")]
    # the measured level came after it, at the ramp's top
    assert r.levels[0].window.start_ns > end_ns


def test_ab_preconditions_each_side_and_the_side_still_warming_says_so(tmp_path, short_window):
    steady = ["--ttft-ms", "10", "--itl-ms", "10"]
    slow_ramp = [*steady, "--ramp-s", "60", "--ramp-gain", "3"]  # +5% a second for a minute: past any limit here
    with stream_server(*steady) as (a, _), stream_server(*slow_ramp) as (b, _):
        text = _wb("ab", a, b, "-c", "2", "-d", "1", *LOAD, "--pairs", "3", "--precondition",
                   "--precondition-max", "6", "--out", str(tmp_path / "ab"), db=tmp_path / "h.sqlite")
    lines = text.splitlines()
    # the answer first, as ab always gives it
    assert lines[0].startswith("A = ") and lines[1].startswith("c=2: B/A per kW ")
    ra, rb = load_result(tmp_path / "ab" / "A"), load_result(tmp_path / "ab" / "B")
    pa, pb = ra.noise.precondition, rb.noise.precondition
    assert pa is not None and pb is not None
    assert pa.settled and pa.rules == ["throughput"], pa
    assert not [w for w in ra.warnings if w.startswith("--precondition")]
    # B climbs +5% of its start a second: over a 1.5 s window far past the bound when the 6 s limit passed
    assert not pb.settled and pb.duration_s >= 6.0 and pb.throughput_change_pct > SETTLE_CHANGE_PCT
    assert pb.round_output_tokens_per_s[-1] > 1.1 * pb.round_output_tokens_per_s[0]
    warned = [w for w in rb.warnings if w.startswith("--precondition")]
    assert warned == [f"--precondition: {pb.reason}"]
    assert pb.reason.startswith(f"not settled after {pb.duration_s:.0f} s (the limit): output tok/s still rising +")
    # each side after its own priming and before the first pair
    first_pair_ns = min(json.loads(line)["sent_ns"] for side in "AB"
                        for line in (tmp_path / "ab" / side / "requests.jsonl").read_text().splitlines())
    for res, pc in ((ra, pa), (rb, pb)):
        assert res.noise.priming.end_ns <= pc.start_ns
        assert pc.start_ns + pc.duration_s * 1e9 <= first_pair_ns
