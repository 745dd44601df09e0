"""One level at a time, against ground truth: the scripted server serves 8 requests at once (more
wait in its queue), each 25 ms to the first token and 8 tokens 25 ms apart (0.2 s: two streams make
80 tok/s), and does not abort a request whose client went away (``--keep-abandoned``). The run's
client gives up on a request after 0.5 s, so a c=64 level (and its priming) ends with dozens of
abandoned requests still queued on the server — the H200's c=64 level that ended with its 64
requests on the server before each c=16 trial.

With the drain (``load.level.await_drained`` on the server's ``/metrics`` running + waiting count)
every interleaved c=2 trial starts on an idle server: the trials agree and read the scripted rate.
Without it (the wait's limit set to 0) the trials read what the backlog left them — far apart,
below the truth — and the level carries the ``not_drained`` finding. Before the drain existed the
first assertion failed: the trials read 28 / 53 / 78 tok/s."""

from __future__ import annotations

import pytest

from tests.fakes.stream_server_proc import stream_server
from wattbench.config.run import RunConfig
from wattbench.run import run_benchmark
import wattbench.run.level as run_level

pytestmark = pytest.mark.slow

SERVER = ("--ttft-ms", "25", "--itl-ms", "25", "--max-concurrent", "8", "--vllm-metrics", "--keep-abandoned")
TRUTH_TOK_S = 2 * 8 / (0.025 + 7 * 0.025)  # two streams of 8 tokens every 0.2 s


def _run(base, out):
    cfg = RunConfig(target=base, sensors=["const:node=300"], idle_s=0, register_run=False, html=False, out=str(out),
                    input_tokens="16", output_tokens="8", history_check=False, concurrency=[2, 64], num_requests=16,
                    trials=3, request_timeout_s=0.5)
    return run_benchmark(cfg)


def _c2(res):
    lv = next(lv for lv in res.levels if lv.load.target_concurrency == 2)
    return lv, lv.trials.figures["output_tokens_per_s"].values


def test_interleaved_trials_agree_when_each_starts_on_a_drained_server(tmp_path, monkeypatch):
    with stream_server(*SERVER) as (base, stats):
        drained = _run(base, tmp_path / "drained")
        assert stats()["abandoned_finished"] > 0  # the heavy levels did leave requests behind
    lv, vals = _c2(drained)
    assert (max(vals) - min(vals)) / max(vals) < 0.15, vals  # within their noise of each other
    assert min(vals) > 0.8 * TRUTH_TOK_S, vals  # and at the scripted rate (client overhead aside)
    assert not any(f.kind == "not_drained" for x in drained.levels for f in x.validity.findings)

    monkeypatch.setattr(run_level, "DRAIN_MIN_S", 0.0)
    monkeypatch.setattr(run_level, "DRAIN_MAX_S", 0.0)
    with stream_server(*SERVER) as (base, _):
        shared = _run(base, tmp_path / "shared")
    lv, vals = _c2(shared)
    assert min(vals) < 0.75 * TRUTH_TOK_S and (max(vals) - min(vals)) / max(vals) > 0.25, vals
    found = [f for f in lv.validity.findings if f.kind == "not_drained"]
    assert found and found[0].severity == "warn" and "still had" in found[0].text


def test_a_server_without_a_count_after_requests_the_client_gave_up_on_is_a_finding(tmp_path):
    # the same server without /metrics: the run cannot see what is still on it, only that the client gave
    # up on requests of the load before (its 0.5 s timeouts) — said on the level, with the fix
    with stream_server(*[a for a in SERVER if a != "--vllm-metrics"]) as (base, stats):
        res = _run(base, tmp_path / "blind")
        assert stats()["abandoned_finished"] > 0
    lv, _ = _c2(res)
    found = [f for f in lv.validity.findings if f.kind == "not_drained"]
    assert found and "gave up on" in found[0].text and "--request-timeout" in found[0].text, lv.validity.findings
