"""The streaming client against the scripted server in a real subprocess: the clock is right.

The server writes token k of every response at ``t_request + TTFT + k * ITL`` (absolute
deadlines) and reports, on the same CLOCK_MONOTONIC (``perf_counter_ns``), what it actually did:
request read -> first token written, and the mean gap between its token writes. The client's
measured TTFT and ITL means must be within 2 ms and 0.5 ms of that truth at 1, 64 and 512
concurrent streams. The server's timers fire late when the host is oversubscribed (this CI box
has 2 cores shared by many jobs); that lateness is the server's, measured by the server, so it
belongs to the truth, not to the client's error. Where the scripted value itself is met (an idle
host), ``WATTBENCH_STRICT_SCRIPTED=1`` also asserts against the scripted TTFT/ITL.
The first request of every connection (TCP set-up) is warm-up, as in a real run.
"""

from __future__ import annotations

import os

import pytest

from tests.fakes.stream_server_proc import stream_server
from wattbench.load.level import run_level
from wattbench.load.types import LevelSpec, TargetSpec
from wattbench.metrics.latency import summarize_level
from wattbench.workload.base import RequestSpec

TTFT_MS = 100.0
ITL_MS = 20.0
OUT_TOKENS = 8


def _req(i: int) -> RequestSpec:
    return RequestSpec(prompt="one two three four", max_tokens=OUT_TOKENS)


def _ground_truth(conc: int, per_stream: int, workers: int | None = None):
    with stream_server("--ttft-ms", str(TTFT_MS), "--itl-ms", str(ITL_MS)) as (base, stats):
        target = TargetSpec(base_url=base + "/v1", model="fake-model")
        spec = LevelSpec(
            index=0, mode="concurrency", value=conc, num_requests=conc * per_stream,
            warmup_requests=conc, workers=workers,
        )
        out = run_level(spec, target, _req)
        server = stats()
    req, lat, thr = summarize_level(out.records, out.start_ns, out.end_ns)
    assert req.failed == 0 and req.completed == conc * per_stream and req.warmup == conc
    assert {r.output_tokens for r in out.records} == {OUT_TOKENS}
    assert {r.input_tokens for r in out.records} == {4}
    assert {len(r.chunk_ns) for r in out.records} == {OUT_TOKENS}
    true_ttft = server["actual_ttft_ms"]
    true_itl = server["actual_itl_ms"]
    why = (
        f"conc={conc}: client ttft mean {lat.ttft_ms.mean:.3f} ms (p99 {lat.ttft_ms.p99:.2f}) vs "
        f"server-actual {true_ttft:.3f} (scripted {TTFT_MS}); client itl mean {lat.itl_ms.mean:.3f} "
        f"vs server-actual {true_itl:.3f} (scripted {ITL_MS}); server timers late "
        f"{server['token_late_ms']['mean']:.3f} ms on average; client CPU "
        f"{out.load.client_cpu_pct:.0f}% x {out.load.workers} worker(s)"
    )
    print(why)
    # Server-actual truth counts warm-up requests too; they have the same script.
    assert abs(lat.ttft_ms.mean - true_ttft) < 2.0, why
    assert abs(lat.itl_ms.mean - true_itl) < 0.5, why
    assert abs(lat.tpot_ms.mean - true_itl) < 0.5, why
    if os.environ.get("WATTBENCH_STRICT_SCRIPTED"):
        assert abs(lat.ttft_ms.mean - TTFT_MS) < 2.0, why
        assert abs(lat.itl_ms.mean - ITL_MS) < 0.5, why
    return out


def test_ground_truth_1_stream():
    _ground_truth(1, 12)


def test_ground_truth_64_streams():
    out = _ground_truth(64, 3)
    assert out.steady_start_ns is not None and out.steady_end_ns > out.steady_start_ns
    assert out.load.mean_in_flight > 40


@pytest.mark.slow
def test_ground_truth_512_streams():
    _ground_truth(512, 2)
