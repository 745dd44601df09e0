"""The streaming client against the scripted server in a real subprocess: the clock is right.

The server writes token k of every response at ``t_request + TTFT + k * ITL`` (absolute
deadlines) and records, per request, when it read the request and when it wrote the first and the
last token, on ``perf_counter_ns`` — CLOCK_MONOTONIC, the same clock as the client's. That is the
ground truth: the server's own TTFT of a request is ``first_written - read`` and its true mean ITL
is ``(last_written - first_written) / (n - 1)``, at 1, 64 and 512 concurrent streams.

Why not compare with the *scripted* values alone: on an oversubscribed host (this CI box has 2
cores shared by many jobs) the server's own timers fire late by milliseconds — that is the
server's behaviour, not the client's error, and the server measures it.

The client's TTFT is split on that shared clock into its two sides, each judged against the
server's record, never against the client's own stamps alone: the **send side** (the client's
send stamp → the server read the request) and the **receive side** (the server wrote the first
token → the client's first-token stamp). Both are causal lower bounds (≥ 0: a send stamp taken
after the server read the bytes, or a first-token stamp before the server wrote them, is a
biased stamp), and each mean is within 2 ms. A busy host adds to each side what it took from
that side's process — the server's own timer lateness (it reads late when it waits for a CPU) and
the client's event-loop lag (``load.client_loop_lag_ms``; the level must then be flagged
saturated with the loop-lag reason) — **capped at** ``CAP_MS``: a host that starves either
process beyond that leaves nothing the test can judge, and the test skips saying so (after
checking the flag). ``WATTBENCH_STRICT_SCRIPTED=1`` (an idle host) asserts the 2 ms bounds
unconditionally, and the scripted TTFT/ITL values as well.
Requests carry a tag (``r<id>``) as the first prompt word so server and client records pair up.
The first request of every connection (TCP set-up) is warm-up, as in a real run.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from tests.fakes.stream_server_proc import stream_server
from wattbench.load.level import run_level
from wattbench.metrics.saturation import SAT_LOOP_LAG_MS
from wattbench.core.load_types import LevelSpec
from wattbench.core.target import TargetSpec
from wattbench.metrics.latency import summarize_level
from wattbench.workload.base import RequestSpec

pytestmark = pytest.mark.serial  # millisecond timings against the scripted truth: the machine alone

TTFT_MS = 100.0
CAP_MS = 20.0  # the most host lag (client loop, server timers) a side's bound may grow by


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
    sent = np.array([r.sent_ns for r in measured], dtype=np.int64)
    read = np.array([truth[f"r{r.id}"][0] for r in measured], dtype=np.int64)
    first_w = np.array([truth[f"r{r.id}"][1] for r in measured], dtype=np.int64)
    first_c = np.array([r.chunk_ns[0] for r in measured], dtype=np.int64)
    send_ms, recv_ms = (read - sent) / 1e6, (first_c - first_w) / 1e6
    # the level's TTFT is the records' own stamps, and it splits exactly into send + server + receive
    assert lat.ttft_ms.mean == pytest.approx(float(np.mean((first_c - sent) / 1e6)), abs=1e-6)
    server_ttft = float(np.mean((first_w - read) / 1e6))
    assert float(np.mean(send_ms)) + server_ttft + float(np.mean(recv_ms)) == pytest.approx(lat.ttft_ms.mean, abs=1e-6)
    spans = sum(truth[f"r{r.id}"][2] - truth[f"r{r.id}"][1] for r in measured)
    true_itl = spans / 1e6 / sum(OUT_TOKENS - 1 for _ in measured)
    lag = out.load.client_loop_lag_ms
    server_late = server["first_token_late_ms"]["mean"] or 0.0
    why = (
        f"conc={conc} itl={itl_ms}: client ttft {lat.ttft_ms.mean:.3f} ms = send {np.mean(send_ms):.3f} "
        f"(min {send_ms.min():.3f}) + server {server_ttft:.3f} (scripted {TTFT_MS}) + receive "
        f"{np.mean(recv_ms):.3f} (min {recv_ms.min():.3f}); client itl {lat.itl_ms.mean:.3f} vs true {true_itl:.3f} "
        f"(scripted {itl_ms}); server timers late {server_late:.2f} ms mean; client CPU "
        f"{out.load.client_cpu_pct:.0f}% x {out.load.workers} worker(s); client loop lag mean {lag.mean:.2f} "
        f"p99 {lag.p99:.2f} ms"
    )
    print(why)
    # causal, whatever the load: the server reads a request after its bytes were written (its read
    # stamp may precede the client's post-write stamp by a scheduling instant, never by a millisecond),
    # and the server stamps a token before writing it
    assert send_ms.min() > -1.0 and recv_ms.min() >= 0.0, why
    strict = bool(os.environ.get("WATTBENCH_STRICT_SCRIPTED"))
    starved = lag.p99 > SAT_LOOP_LAG_MS
    if starved:
        # the host kept the client's event loop waiting: its stamps can be late by that wait, and
        # the tool must say so rather than report a biased TTFT as valid
        assert out.load.saturated and any("loop lag" in r for r in out.load.saturation_reasons), why
    client_allow = 0.0 if (strict or not starved) else lag.p99
    server_allow = 0.0 if strict else server_late
    if client_allow > CAP_MS or server_allow > CAP_MS:
        pytest.skip(f"the host starved the {'client' if client_allow > CAP_MS else 'server'} beyond the "
                    f"{CAP_MS:g} ms this test judges under (the level was flagged as it must be): {why}")
    assert np.mean(send_ms) < 2.0 + server_allow, why
    # the receive side by its median: the server stamps a token before its write reaches the socket,
    # so a stall of either process between the two (seen once in CI: a handful of 64 concurrent
    # streams 110-132 ms late, the client's loop lag p99 3.8 ms) makes a few records late together;
    # a client that adds a receive cost to every request moves the median as much as the mean
    assert float(np.median(recv_ms)) < 2.0 + client_allow, why
    # Inter-token latency telescopes: only a request's first and last stamps matter, so a
    # starved loop moves the mean ITL by at most its lag / (tokens - 1).
    itl_tol = 0.5 + client_allow / (OUT_TOKENS - 1)
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
