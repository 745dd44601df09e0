"""The streaming client against the scripted server in a real subprocess: the clock is right.

The server writes token k of every response at ``t_request + TTFT + k * ITL`` (absolute
deadlines) and records, per request, when it read the request and when it wrote the first and the
last token, on ``perf_counter_ns`` — CLOCK_MONOTONIC, the same clock as the client's. That is the
ground truth: the true TTFT of a request is ``first_written - sent`` and its true mean ITL is
``(last_written - first_written) / (n - 1)``. The client's measured TTFT and ITL means must be
within 2 ms and 0.5 ms of the truth at 1, 64 and 512 concurrent streams.

Why not compare with the *scripted* values alone: on an oversubscribed host (this CI box has 2
cores shared by many jobs) the server's own timers fire late by milliseconds — that is the
server's behaviour, not the client's error, and the server measures it.

The 2 ms TTFT bound holds while the client gets a CPU when bytes arrive. When the host starves
the client (its event-loop lag probe, ``load.client_loop_lag_ms``, has p99 above 2 ms — seen here
at 1 stream with 4% client CPU), the test asserts instead that the level is flagged saturated with
the loop-lag reason and that the TTFT error is within 2 ms plus that lag: a biased figure never
goes out unflagged. ``WATTBENCH_STRICT_SCRIPTED=1`` (an idle host) asserts the 2 ms bound
unconditionally, and the scripted TTFT/ITL values as well.
Requests carry a tag (``r<id>``) as the first prompt word so server and client records pair up.
The first request of every connection (TCP set-up) is warm-up, as in a real run.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from tests.fakes.stream_server_proc import stream_server
from wattbench.load.level import SAT_LOOP_LAG_MS, run_level
from wattbench.load.types import LevelSpec, TargetSpec
from wattbench.metrics.latency import summarize_level
from wattbench.workload.base import RequestSpec

TTFT_MS = 100.0


def ground_truth(conc: int, per_stream: int, itl_ms: float, workers: int | None = None, out_tokens: int = 8):
    OUT_TOKENS = out_tokens

    def tagged(i: int) -> RequestSpec:
        return RequestSpec(prompt=f"r{i} two three four", max_tokens=OUT_TOKENS)

    with stream_server("--ttft-ms", str(TTFT_MS), "--itl-ms", str(itl_ms)) as (base, stats):
        target = TargetSpec(base_url=base + "/v1", model="fake-model")
        spec = LevelSpec(
            index=0, mode="concurrency", value=conc, num_requests=conc * per_stream,
            warmup_requests=conc, workers=workers,
        )
        out = run_level(spec, target, tagged)
        server = stats()
        truth = stats.per_request()
    req, lat, _ = summarize_level(out.records, out.start_ns, out.end_ns)
    assert req.failed == 0 and req.completed == conc * per_stream and req.warmup == conc
    measured = [r for r in out.records if not r.warmup]
    assert {r.output_tokens for r in measured} == {OUT_TOKENS}
    assert {r.input_tokens for r in measured} == {4}
    assert {len(r.chunk_ns) for r in measured} == {OUT_TOKENS}
    true_ttft = np.mean([(truth[f"r{r.id}"][1] - r.sent_ns) / 1e6 for r in measured])
    spans = sum(truth[f"r{r.id}"][2] - truth[f"r{r.id}"][1] for r in measured)
    true_itl = spans / 1e6 / sum(OUT_TOKENS - 1 for _ in measured)
    transit = np.mean([(truth[f"r{r.id}"][0] - r.sent_ns) / 1e6 for r in measured])
    why = (
        f"conc={conc} itl={itl_ms}: client ttft {lat.ttft_ms.mean:.3f} ms vs true {true_ttft:.3f} "
        f"(scripted {TTFT_MS}); client itl {lat.itl_ms.mean:.3f} vs true {true_itl:.3f} "
        f"(scripted {itl_ms}); request sent->read by server {transit:.2f} ms; server timers late "
        f"{server['token_late_ms']['mean']:.2f} ms; client CPU {out.load.client_cpu_pct:.0f}% "
        f"x {out.load.workers} worker(s); client loop lag mean {out.load.client_loop_lag_ms.mean:.2f} "
        f"p99 {out.load.client_loop_lag_ms.p99:.2f} ms"
    )
    print(why)
    strict = bool(os.environ.get("WATTBENCH_STRICT_SCRIPTED"))
    lag = out.load.client_loop_lag_ms
    starved = lag.p99 > SAT_LOOP_LAG_MS
    if strict or not starved:
        assert abs(lat.ttft_ms.mean - true_ttft) < 2.0, why
    else:
        # The host kept the client's event loop waiting (other processes on the CPUs): a stamp
        # can be late by that wait, and the tool must say so rather than report a biased TTFT
        # as valid. The error must be explained by the measured lag.
        assert out.load.saturated and any("loop lag" in r for r in out.load.saturation_reasons), why
        assert abs(lat.ttft_ms.mean - true_ttft) < 2.0 + lag.p99, why
    # Inter-token latency telescopes: only a request's first and last stamps matter, so a
    # starved loop moves the mean ITL by at most its lag / (tokens - 1).
    itl_tol = 0.5 if (strict or not starved) else 0.5 + lag.p99 / (OUT_TOKENS - 1)
    assert abs(lat.itl_ms.mean - true_itl) < itl_tol, why
    assert abs(lat.tpot_ms.mean - true_itl) < itl_tol, why
    if strict:
        assert abs(lat.ttft_ms.mean - TTFT_MS) < 2.0, why
        assert abs(lat.itl_ms.mean - itl_ms) < 0.5, why
    return out


def test_ground_truth_1_stream():
    ground_truth(1, 12, itl_ms=20.0)


def test_ground_truth_64_streams():
    out = ground_truth(64, 3, itl_ms=20.0)
    assert out.steady_start_ns is not None and out.steady_end_ns > out.steady_start_ns
    assert out.load.mean_in_flight > 40


@pytest.mark.slow
def test_ground_truth_512_streams():
    # 512 streams at 100 ms ITL is ~5,000 chunks/s: what this 2-core box can serve and read
    # with the server, the client and other jobs sharing it (benches/client_overhead.py).
    ground_truth(512, 2, itl_ms=100.0, out_tokens=16)
