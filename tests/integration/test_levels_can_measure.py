"""A level that cannot measure is refused before it runs, from the priming's own requests: the
scripted server makes a request take ~1.3 s (50 ms to the first token, 64 tokens 20 ms apart) at the
run's largest level; with ``--warmup 0.3s --duration 0.5`` no stream can send a request after the
warm-up that finishes in the level (the H200's case: 16 s per request at c=64, 3 s + 12 s given).
The run stops after the priming with one line giving the ``--duration``; that duration measures.
Before, the level ran and measured nothing."""

from __future__ import annotations

import pytest

from tests.fakes.stream_server_proc import stream_server
from wattbench.config.run import RunConfig
from wattbench.core.errors import UserError
from wattbench.run import run_benchmark
from wattbench.results.rundir import load_result
from wattbench.run.prime import unmeasurable
from wattbench.core.schema import PrimingPhase

SLOW = ("--ttft-ms", "50", "--itl-ms", "20")


def _cfg(base, out, **kw):
    return RunConfig(target=base, sensors=["const:node=300"], idle_s=0, register_run=False, html=False,
                     out=str(out), input_tokens="16", output_tokens="64", history_check=False, **kw)


def test_a_level_shorter_than_one_request_is_refused_with_the_duration_to_give(tmp_path):
    with stream_server(*SLOW) as (base, stats):
        with pytest.raises(UserError) as ei:
            run_benchmark(_cfg(base, tmp_path / "short", concurrency=[1, 4], warmup_s=0.3, duration_s=0.5))
        primed = stats(reset=True)
        msg = str(ei.value)
        assert "\n" not in msg and msg.startswith("c=4 cannot measure: priming took ")
        assert "longer than --warmup 0.3 s + --duration 0.5 s" in msg
        give = int(msg.split("give --duration ")[1].split()[0])
        # one request here is ~1.33 s (50 ms + 63 × 20 ms): two of them less the warm-up, rounded up
        assert give == 3, msg
        refused = load_result(tmp_path / "short")
        # the priming ran (2 rounds of 4 streams), no level did: the server served the priming and the
        # prompt calibration's probes, nothing else
        assert refused.levels == [] and refused.noise.priming.completed == 8
        probes = refused.prompt_calibration.probes if refused.prompt_calibration else 0
        assert primed["streams_completed"] == 8 + probes
        res = run_benchmark(_cfg(base, tmp_path / "given", concurrency=[4], warmup_s=0.3, duration_s=give))
    assert res.levels[0].requests.completed >= 4  # the duration it gave measures a round of the streams


def test_only_a_closed_loop_duration_after_a_warm_up_can_be_too_short():
    p = PrimingPhase(mode="concurrency", value=64, label="concurrency=64", requests=128, completed=128,
                     e2e_p50_s=16.0)
    cfg = RunConfig(target="http://127.0.0.1:9", concurrency=[16, 64], warmup_s=3.0, duration_s=12.0)
    assert "give --duration 29 " in unmeasurable(cfg, p)  # 2 × 16 s − 3 s
    assert unmeasurable(cfg.model_copy(update={"duration_s": 13.0}), p) is None  # 3 + 13 = one request
    assert unmeasurable(cfg.model_copy(update={"warmup_s": None}), p) is None  # first requests are measured
    assert unmeasurable(cfg.model_copy(update={"duration_s": None, "num_requests": 10}), p) is None
    assert unmeasurable(cfg, p.model_copy(update={"mode": "rate"})) is None  # open loop: scheduled ones count
    assert unmeasurable(cfg, None) is None
