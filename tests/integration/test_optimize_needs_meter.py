"""``--optimize`` on a figure per kW with no power meter is refused before any load: one line with
the ``--sensor`` fix, exit 2, nothing sent to the server (no priming), nothing written. Before,
such a run primed at the top of the ladder, measured a level that scored nothing and said "no
measured level meets the SLOs". ``--prefill-decode-pair`` likewise: its only figures are J per
prefill token and J per decode token, and without a meter its two levels were run for nothing or
skipped without a word."""

from __future__ import annotations

import pytest

from tests.fakes.stream_server_proc import stream_server
from wattbench.config.run import RunConfig
from wattbench.core.errors import UserError
from wattbench.run import run_benchmark
from wattbench.run.plan import check_meter


@pytest.mark.parametrize("objective", ["goodput_per_kw", "output_tokens_per_s_per_kw"])
@pytest.mark.parametrize("sensors", [{"no_sensors": True}, {"sensors": ["rapl:root=/nonexistent"]}])
def test_an_energy_objective_without_a_meter_is_refused_before_priming(tmp_path, objective, sensors):
    out = tmp_path / "run"
    with stream_server("--ttft-ms", "5", "--itl-ms", "2") as (base, stats):
        cfg = RunConfig(target=base, optimize=objective, concurrency=[1, 2], num_requests=4, idle_s=0,
                        register_run=False, html=False, out=str(out), **sensors)
        with pytest.raises(UserError) as ei:
            run_benchmark(cfg)
        served = stats()
    msg = str(ei.value)
    assert "\n" not in msg
    if sensors.get("sensors"):  # a meter named on the command line that cannot be read: that, first, in one line
        assert msg.startswith("--sensor rapl cannot be read on this machine") and "drop the --sensor" in msg
    else:
        assert f"--optimize {objective}" in msg
        assert "--sensor nvml" in msg and "--sensor const:node=WATTS" in msg and "goodput_rps" in msg
    assert served["requests"] == 0  # refused before the priming sent anything
    assert not (out / "result.json").exists()


def test_a_meter_or_an_objective_without_energy_is_accepted():
    class Ch:
        def __init__(self, kind):
            self.kind = kind

    cfg = RunConfig(target="http://127.0.0.1:9", optimize="goodput_per_kw")
    check_meter(cfg, [Ch("counter")])
    check_meter(cfg, [Ch("aux"), Ch("power")])
    with pytest.raises(UserError):
        check_meter(cfg, [Ch("aux")])  # a temperature is not a meter
    check_meter(RunConfig(target="http://127.0.0.1:9", optimize="goodput_rps"), [])
    check_meter(RunConfig(target="http://127.0.0.1:9"), [])


PAIR_NO_METER = ("--prefill-decode-pair splits energy into J per prefill token and J per decode token, and {why}: "
                 "give a power meter: --sensor nvml (NVIDIA GPUs), --sensor rapl (Intel/AMD CPUs) or, for a known "
                 "draw, --sensor const:node=WATTS (or drop --prefill-decode-pair)")


def test_a_prefill_decode_pair_without_a_meter_is_refused_before_any_load(tmp_path):
    out = tmp_path / "run"
    with stream_server("--ttft-ms", "5", "--itl-ms", "2") as (base, stats):
        cfg = RunConfig(target=base, prefill_decode_pair=True, concurrency=[1], num_requests=4, idle_s=0,
                        register_run=False, html=False, out=str(out), no_sensors=True)
        with pytest.raises(UserError) as ei:
            run_benchmark(cfg)
        served = stats()
    assert str(ei.value) == PAIR_NO_METER.format(why="--no-sensors measures none").replace(
        ": give", ": drop --no-sensors and give")
    assert served["requests"] == 0  # no priming, no level, no pair
    assert not (out / "result.json").exists()


def test_a_prefill_decode_pair_needs_an_energy_or_power_channel():
    class Ch:
        def __init__(self, kind):
            self.kind = kind

    cfg = RunConfig(target="http://127.0.0.1:9", prefill_decode_pair=True)
    check_meter(cfg, [Ch("counter")])
    check_meter(cfg, [Ch("aux"), Ch("power")])
    for channels in ([], [Ch("aux")]):  # nothing read, or a temperature only
        with pytest.raises(UserError) as ei:
            check_meter(cfg, channels)
        assert str(ei.value) == PAIR_NO_METER.format(why="no power meter could be read on this machine")
