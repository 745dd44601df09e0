"""Energy and tokens over the same work, against the scripted server's own emission log.

The server logs when it wrote every content chunk (``/stats/emissions``, ``perf_counter_ns`` =
CLOCK_MONOTONIC, the client's clock too); the sensor is a declared constant (``const:``), so a
window's energy is exactly power × duration. Ground truth for the level window is then the
tokens the server wrote inside it: output tok/s = that count / duration, J/token = energy / that
count. wattbench's figures must be within 2% of both, with staggered warm-up leftovers (random
output lengths) and without warm-up, closed and open loop, at 64 and 256 streams.

Why the bound holds whatever the machine's load: both window edges and every chunk stamp are the
client's; a late client shifts a chunk's stamp after its emission by the same delay as the edges,
so only the tokens emitted within one delay of an edge can land on the other side — under 1% for a
client 60 ms late at the start edge of a 6 s window of 1,600 tok/s (and the end edge lies in the
drain, where few streams remain). Each level lasts several seconds for that reason.
"""

from __future__ import annotations

import bisect

import pytest

from tests.fakes.stream_server_proc import stream_server
from wattbench.config.run import RunConfig

POWER_W = 1000.0
ITL_MS = 40.0
OUT = "uniform:8:56"  # mean 32 tokens: E2E ~0.05-2.3 s, so warm-up streams end staggered
MEAN_E2E_S = 0.05 + 32 * ITL_MS / 1e3


def _truth(emissions, start_ns: int, end_ns: int) -> float:
    per_chunk, ts = emissions
    ts = sorted(ts)
    return per_chunk * (bisect.bisect_right(ts, end_ns) - bisect.bisect_left(ts, start_ns))


def _run(base, out_dir, streams: int, mode: str, warmup_s: float | None):
    from wattbench.run import run_benchmark

    common = dict(target=base, output_tokens=OUT, input_tokens="16", sensors=[f"const:accelerator={POWER_W:g}"],
                  idle_s=0, register_run=False, html=False, out=str(out_dir), warmup_s=warmup_s, workers=1,
                  seed=3)
    if mode == "closed":
        cfg = RunConfig(concurrency=[streams], num_requests=streams * 4, **common)
    else:
        rate = streams / MEAN_E2E_S  # about ``streams`` in flight
        cfg = RunConfig(rate=[rate], arrival="poisson", num_requests=int(rate * 5), **common)
    return run_benchmark(cfg)


@pytest.mark.slow
@pytest.mark.parametrize("streams", [64, 256])
@pytest.mark.parametrize("mode", ["closed", "open"])
@pytest.mark.parametrize("warmup_s", [None, 2.0])
def test_tok_per_s_and_j_per_token_match_the_servers_emission_log(tmp_path, streams, mode, warmup_s):
    with stream_server("--ttft-ms", "50", "--itl-ms", f"{ITL_MS:g}") as (base, stats):
        res = _run(base, tmp_path / "run", streams, mode, warmup_s)
        emissions = stats.emissions()
    lv = res.levels[0]
    w = lv.window
    truth_tokens = _truth(emissions, w.start_ns, w.end_ns)
    truth_tok_s = truth_tokens / w.duration_s
    truth_j_per_tok = POWER_W * w.duration_s / truth_tokens
    thr = lv.throughput
    acc = lv.energy["accelerator"]
    assert acc.energy_j == pytest.approx(POWER_W * w.duration_s, rel=1e-6)
    assert thr.token_basis == "tokens_in_window"
    assert thr.output_tokens_per_s == pytest.approx(truth_tok_s, rel=0.02), (thr, truth_tokens)
    assert acc.j_per_output_token == pytest.approx(truth_j_per_tok, rel=0.02), (acc.j_per_output_token, truth_tokens)
    assert acc.output_tokens_per_s_per_kw == pytest.approx(truth_tok_s / (POWER_W / 1e3), rel=0.02)
    measured = thr.measured_request_tokens.output
    print(f"\nstreams={streams} {mode} warmup={warmup_s}: window {w.duration_s:.2f} s, server emitted "
          f"{truth_tokens:.0f} tokens in it; wattbench credits {thr.tokens_in_window.output:.0f} "
          f"({thr.tokens_in_window.output / truth_tokens:.4f}x, warm-up {thr.tokens_in_window.warmup_output:.0f}); "
          f"measured requests alone {measured:.0f} ({measured / truth_tokens:.4f}x); "
          f"J/token {acc.j_per_output_token:.4f} vs truth {truth_j_per_tok:.4f} "
          f"(measured-only basis: {POWER_W * w.duration_s / measured:.4f})")
    if warmup_s:
        # the leftovers are real: the measured requests alone miss tokens the window's energy paid for
        assert thr.tokens_in_window.warmup_output > 0
        assert measured < 0.99 * truth_tokens
