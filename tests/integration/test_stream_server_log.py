"""The scripted server's per-token write log, the ground truth of benches/peer_clients.py.

Checks the log's shape, not any timing: a request carrying ``X-Request-ID`` is keyed by it (as
``vllm bench serve`` and AIPerf send it), others by their first prompt word with a suffix when the
word repeats, each entry is ``[request read, write of token 0, ..., write of token n-1]`` in
order, and ``/health`` answers as vLLM's does (GuideLLM probes it before it starts).
"""

from __future__ import annotations

import json
import urllib.request

from tests.fakes.stream_server_proc import stream_server


def _post(base: str, prompt: str, rid: str | None = None) -> bytes:
    headers = {"Content-Type": "application/json"}
    if rid:
        headers["X-Request-ID"] = rid
    body = json.dumps({"model": "fake-model", "prompt": prompt, "max_tokens": 4, "stream": True}).encode()
    req = urllib.request.Request(base + "/v1/completions", data=body, headers=headers, method="POST")
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.read()


def test_write_log_keys_and_shape():
    with stream_server("--ttft-ms", "1", "--itl-ms", "1", "--log-writes") as (base, stats):
        with urllib.request.urlopen(base + "/health", timeout=10) as r:
            assert r.status == 200
        assert b"[DONE]" in _post(base, "ignored words", rid="vb-7")
        _post(base, "tagx one two")
        _post(base, "tagx three")
        writes = stats.writes()
        assert set(writes) == {"vb-7", "tagx", "tagx#2"}
        for entry in writes.values():
            assert len(entry) == 1 + 4  # request read, then one write per token
            assert entry == sorted(entry)
        assert stats.per_request()["vb-7"] == [writes["vb-7"][0], writes["vb-7"][1], writes["vb-7"][-1]]
        stats(reset=True)
        assert stats.writes() == {}


def test_no_log_without_the_flag():
    with stream_server("--ttft-ms", "1", "--itl-ms", "1") as (base, stats):
        _post(base, "tagy one", rid="r1")
        assert stats.writes() == {}
        assert "r1" in stats.per_request()
