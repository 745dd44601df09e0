"""ITL the client cannot measure: a server that writes its chunks in bursts (``--burst 4``: three of
every four gaps arrive in the same read, stamped alike) made ITL p50 read 0 ms. A percentile among
those zeros is left out with the reason (and a note on the level), the mean (which telescopes) is
kept; a server that writes one chunk at a time still has its ITL measured."""

from __future__ import annotations

import pytest

from tests.fakes.stream_server_proc import stream_server
from wattbench.config.run import RunConfig
from wattbench.run import run_benchmark


def _run(base, out):
    cfg = RunConfig(target=base, sensors=["const:node=300"], idle_s=0, register_run=False, html=False, out=str(out),
                    concurrency=[2], num_requests=8, input_tokens="16", output_tokens="16", prime=False,
                    history_check=False, calibrate_prompts=False)
    return run_benchmark(cfg)


def test_chunks_read_in_bunches_leave_itl_unmeasured_with_the_reason(tmp_path):
    with stream_server("--ttft-ms", "20", "--itl-ms", "10", "--burst", "4") as (base, _):
        res = _run(base, tmp_path / "burst")
    itl = res.levels[0].latency.itl_ms
    assert itl.count == 8 * 15  # 16 chunks a request: 15 gaps each
    assert itl.p50 is None  # was p50 = 0.0 ms: three gaps of four are in one read
    assert itl.p99 is not None and itl.p99 > 20.0  # the gap after a bunch spans four inter-token times
    assert itl.unmeasured and "were 0 ms" in itl.unmeasured and "ITL p50" in itl.unmeasured
    # the mean telescopes: writes at 1, 5, 9, 13 inter-token times after the first chunk, so
    # (last - first) / (chunks - 1) = 13 x 10 ms / 15
    assert itl.mean == pytest.approx(10.0 * 13 / 15, rel=0.25)
    (f,) = [f for f in res.levels[0].validity.findings if f.kind == "itl_unmeasured"]
    assert f.severity == "note" and f.figures == ("itl",)


def test_one_chunk_at_a_time_is_measured(tmp_path):
    with stream_server("--ttft-ms", "20", "--itl-ms", "10") as (base, _):
        res = _run(base, tmp_path / "plain")
    itl = res.levels[0].latency.itl_ms
    assert itl.unmeasured is None and itl.p50 == pytest.approx(10.0, rel=0.3)
    assert not [f for f in res.levels[0].validity.findings if f.kind == "itl_unmeasured"]
