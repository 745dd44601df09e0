"""Failure classes of the client and the level: every fault is classified, the level finishes,
and no completed request is lost."""

from __future__ import annotations

import asyncio

import pytest

from tests.fakes.stream_server_proc import stream_server
from tests.fakes.ports import refused_port
from wattbench.load.client import StreamClient, new_event_loop
from wattbench.load.level import run_level
from wattbench.core.load_types import LevelSpec
from wattbench.core.target import TargetSpec
from wattbench.metrics.latency import summarize_level
from wattbench.workload.base import RequestSpec

FAST = ("--ttft-ms", "5", "--itl-ms", "2")


def req(i: int) -> RequestSpec:
    return RequestSpec(prompt=f"r{i} b c", max_tokens=6)


def send_one(target: TargetSpec, spec: RequestSpec | None = None, **kw):
    async def go():
        async with StreamClient(target) as c:
            return await c.send(spec or req(0), target, **kw)

    loop = new_event_loop()
    try:
        return loop.run_until_complete(go())
    finally:
        loop.close()


def test_500s_and_drops_are_failures_and_the_level_finishes():
    with stream_server(*FAST, "--fail-rate", "0.2", "--drop-rate", "0.15", "--seed", "3") as (base, stats):
        target = TargetSpec(base_url=base + "/v1", model="fake-model")
        out = run_level(LevelSpec(index=0, mode="concurrency", value=8, num_requests=120), target, req)
        faults = stats()["faults"]
    req_s, lat, _ = summarize_level(out.records, out.start_ns, out.end_ns)
    assert len(out.records) == 120 and req_s.completed + req_s.failed == 120
    assert req_s.errors == {"http_500": faults["500"], "disconnect": faults["drop"]}
    assert req_s.completed == 120 - faults["500"] - faults["drop"] and req_s.failed > 10
    assert lat.ttft_ms.count == req_s.completed  # failures never enter latency statistics
    dropped = [r for r in out.records if r.error == "disconnect"]
    assert all(len(r.chunk_ns) == 3 and r.first_token_ns is not None and not r.ok for r in dropped)
    assert all(r.http_status == 500 and r.chunk_ns == [] for r in out.records if r.error == "http_500")


@pytest.mark.parametrize(
    "flag,error",
    [
        ("--rate-limit-rate", "http_429"),
        ("--malformed-rate", "bad_stream"),
        ("--error-event-rate", "bad_stream"),
        ("--stall-rate", "stall"),
        ("--drop-rate", "disconnect"),
    ],
)
def test_each_fault_class(flag, error):
    with stream_server(*FAST, flag, "1.0") as (base, _):
        target = TargetSpec(base_url=base + "/v1", model="fake-model", stall_timeout_s=0.5, api_key="sk-SECRET")
        r = send_one(target)
    assert not r.ok and r.error == error, (r.error, r.error_detail)
    assert "SECRET" not in (r.error_detail or "")
    assert r.end_ns >= r.sent_ns
    if error in ("bad_stream", "stall", "disconnect"):
        assert len(r.chunk_ns) == 3  # the tokens before the fault keep their timestamps


def test_a_client_held_past_the_stall_timeout_reads_a_stream_that_kept_sending():
    """The stall rule is the server's silence, not the client's: a client whose loop the host held
    for longer than ``stall_timeout_s`` (here the loop blocked 0.6 s against a 0.2 s rule, while the
    server wrote a chunk every 10 ms) reads what arrived meanwhile and completes. Before, the read
    timeout already due in the turn that read the bytes fired first and the request failed as a
    stall (a loaded host's stall test once read fewer chunks than the server sent)."""
    import time

    async def go(target):
        async with StreamClient(target) as c:
            loop = asyncio.get_running_loop()
            loop.call_later(0.1, time.sleep, 0.6)  # the host takes the loop's CPU mid-stream
            return await c.send(RequestSpec(prompt="a b c", max_tokens=60), target)

    with stream_server("--ttft-ms", "10", "--itl-ms", "10") as (base, _):
        target = TargetSpec(base_url=base + "/v1", model="fake-model", stall_timeout_s=0.2)
        loop = new_event_loop()
        try:
            r = loop.run_until_complete(go(target))
        finally:
            loop.close()
    assert r.ok and r.error is None, (r.error, r.error_detail)
    assert r.output_tokens == 60 and len(r.chunk_ns) == 60
    # the hold shows in the stamps: the chunks written meanwhile were read in one turn after it
    assert max(b - a for a, b in zip(r.chunk_ns, r.chunk_ns[1:])) > 0.2e9


def test_total_timeout():
    with stream_server("--ttft-ms", "2000", "--itl-ms", "1") as (base, _):
        target = TargetSpec(base_url=base + "/v1", model="fake-model", request_timeout_s=0.4)
        r = send_one(target)
    assert r.error == "timeout" and not r.ok


def test_connect_error():
    with refused_port() as port:
        r = send_one(TargetSpec(base_url=f"http://127.0.0.1:{port}/v1", model="m"))
    assert r.error == "connect" and not r.ok and r.chunk_ns == []


def test_missing_usage_leaves_tokens_unknown():
    with stream_server(*FAST, "--no-usage") as (base, _):
        r = send_one(TargetSpec(base_url=base + "/v1", model="fake-model"))
    assert r.ok and r.output_tokens is None and r.input_tokens is None and r.token_source == "none"
    assert len(r.chunk_ns) == 6


def test_chat_and_multi_token_chunks_and_kept_text():
    with stream_server(*FAST, "--tokens-per-chunk", "3") as (base, _):
        t = TargetSpec(base_url=base + "/v1", model="fake-model", api="chat")
        r = send_one(t, RequestSpec(prompt="a b c d e", max_tokens=9), keep_text=True)
    assert r.ok and r.output_tokens == 9 and r.input_tokens == 5
    assert len(r.chunk_ns) == 3  # 3 chunks of 3 tokens: ITL is between chunks, TPOT per token
    assert r.output_text == " tok" * 9
    assert r.first_token_ns == r.chunk_ns[0] and r.last_token_ns == r.chunk_ns[-1] <= r.end_ns


def test_api_key_sent_only_as_bearer_header():
    with stream_server(*FAST, "--expect-key", "sk-SECRET") as (base, _):
        ok = send_one(TargetSpec(base_url=base + "/v1", model="fake-model", api_key="sk-SECRET"))
        bad = send_one(TargetSpec(base_url=base + "/v1", model="fake-model", api_key="sk-WRONG"))
    assert ok.ok and bad.error == "http_401"
    assert "WRONG" not in (bad.error_detail or "") and "WRONG" not in bad.model_dump_json()


def test_check_target_against_fake():
    from wattbench.core.errors import TargetError
    from wattbench.server.openai import check_target

    with stream_server(*FAST, "--model", "a,b") as (base, _):
        assert asyncio.run(check_target(base, None, None)) == ("a", ["a", "b"])
        with pytest.raises(TargetError, match="available: a, b"):
            asyncio.run(check_target(base, None, "c"))
    with stream_server(*FAST, "--not-openai") as (base, _):
        with pytest.raises(TargetError, match="not OpenAI-compatible"):
            asyncio.run(check_target(base, None, None))


def test_a_server_that_closes_after_each_stream_gets_a_connection_per_request():
    """llama.cpp closes the connection after a streamed response while answering keep-alive: on a
    pooled connection the next request fails at once. With ``keepalive=False`` (what the runner sets
    for llama.cpp, server.detect.reuses_connections) every request opens its own and all complete."""
    from wattbench.server.detect import reuses_connections

    assert not reuses_connections("llamacpp") and reuses_connections("vllm") and reuses_connections(None)

    def sequential(target):
        async def go():
            async with StreamClient(target) as c:
                return [await c.send(req(i), target, id=i) for i in range(6)]

        loop = new_event_loop()
        try:
            return loop.run_until_complete(go())
        finally:
            loop.close()

    with stream_server(*FAST, "--close-after-stream") as (base, stats):
        pooled = sequential(TargetSpec(base_url=base + "/v1", model="fake-model"))
        fresh = sequential(TargetSpec(base_url=base + "/v1", model="fake-model", keepalive=False))
    # pooled: requests that land on a socket the server closed fail as disconnects (how many depends on
    # whether the FIN is seen before the connection goes back to the pool: not asserted)
    assert {r.error for r in pooled if not r.ok} <= {"disconnect"}
    assert all(r.ok and r.output_tokens == 6 for r in fresh)
