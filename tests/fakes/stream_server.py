"""A scripted OpenAI-compatible streaming server: ground truth for the client's clock.

Speaks ``GET /v1/models``, ``POST /v1/completions`` and ``POST /v1/chat/completions`` (SSE over
HTTP/1.1 chunked transfer, keep-alive) with a known time to first token and inter-token latency:
token k of a request is written at ``t_request + ttft + k * itl`` (absolute deadlines, so a late
timer does not shift the tokens after it). Payload bytes are precomputed; one timer per stream on
a plain asyncio event loop, so a single process serves hundreds of concurrent streams.

Faults, chosen per request by a seeded RNG: HTTP 500, HTTP 429 with ``Retry-After``, a stream
dropped half-way (connection closed without the chunked terminator), a stall half-way (no more
bytes, connection left open), a malformed JSON event half-way, an in-stream error object.
``--fail-requests RANGES --fail-status CODE``: the completion requests with those numbers (counted from
1 in the order they arrive since the server started, ``17-24`` or ``3,9-10``) are answered HTTP CODE (500, or 401 as a server
that lost its key) and nothing else: a run's whole trial that measures nothing, by request count.
``--close-after-stream``: the connection is closed after each completed stream although the response
said keep-alive (what llama.cpp's server does). ``--die-after-requests N``: when request N+1 arrives the process prints ``STATS {json}`` and
exits at once (a killed server: connections reset, nothing closed cleanly).

``GET /stats`` returns what the server did (requests, tokens, ``streams_completed`` = streams
without a fault that ended normally with usage and ``[DONE]`` written, ``queued`` = requests that waited
for a slot (``--max-concurrent``), and how late its timers fired:
``first_token_late_ms``/``token_late_ms`` mean and max), so a test can tell server lag from client
error. ``GET /stats/reset`` returns and clears them. ``GET /stats/requests`` maps the first word of each
completed request's prompt to (request read, first token written, last token written) in
``perf_counter_ns`` — CLOCK_MONOTONIC, the same clock as the client's — for per-request truth.
A request that carries an ``X-Request-ID`` header (as ``vllm bench serve`` and AIPerf send) is
keyed by that header instead. With ``--log-writes``, ``GET /stats/writes`` maps the same keys (a
repeated key gets a ``#N`` suffix) to ``[request read, write of token 0, write of token 1, ...]``
(every token write, for per-gap ITL truth against clients that report every inter-token gap).
With ``--vllm-metrics``, ``GET /metrics`` answers as vLLM's does (Prometheus text): the counters
``vllm:generation_tokens_total`` (every content token written since the server started, never
reset), ``vllm:prompt_tokens_total`` (the prompt words of every stream begun) and
``vllm:request_success_total``, the gauges ``vllm:num_requests_running`` / ``num_requests_waiting``.
``--burst K``: after the first chunk, chunks go out K at a time in one write (every K inter-token
times), as a server that batches its stream, or a client reading late, sees them.
``--prompt-tokens-per-word F --prompt-overhead N``: ``usage.prompt_tokens`` is ``round(F · words + N)``
of the prompt (default: its words), as a server's tokenizer and chat template would count it.
With ``--expose-config`` it also exposes its configuration as vLLM does (ground truth for the
configuration identity): ``/metrics`` (counters as above) carries ``vllm:cache_config_info`` whose
labels are vLLM-like settings plus ``scripted_ttft_ms``/``scripted_itl_ms``/``scripted_max_concurrent``
(its own speed settings) and a ``num_gpu_blocks`` drawn anew at every start (as vLLM's memory
profile moves it); ``/v1/models`` entries carry ``max_model_len``, ``root`` and a ``created``
timestamp of the request; ``/version`` answers ``{"version": "0.0.0-scripted"}``.
``--keep-abandoned``: a request whose client disconnected (a client timeout) is not aborted: it keeps
its place in the queue or its slot and generates to its scripted end for no one (``/stats``
``abandoned_finished`` counts them), so it is still running — and counted in ``/metrics`` — after the
client's level ended.
``GET /stats/last`` is the last completion request as received (``headers``, lower-cased names,
and the JSON ``body``). ``GET /stats/emissions`` is the emission log: ``{"tokens_per_chunk": k, "emit_ns": [...]}``, the
``perf_counter_ns`` at which every content chunk (k tokens) was written since the last reset, of
every stream (faulty ones too): ground truth for "tokens the server produced in a window".

Speed noise and history, seeded (ground truth for the noise rules and for priming):
``--speed-noise SD`` multiplies a stream's TTFT and ITL by a factor ``exp(N(0, SD))`` drawn from
``--noise-seed`` (its own generator: the faults stay as they were), one factor for the server's
life (``--noise-every 0``: a "start") or a new one every N requests (``--noise-every N``).
``--history-slow F --history-threshold K``: until the server has had K streams active at once, TTFT
and ITL are F times longer (a server whose speed depends on the largest load it has seen).
``--log-drift-per-s R [--drift-origin S]``: TTFT and ITL times ``exp(R · (t − S))`` for a stream beginning at
``time.monotonic()`` ``t`` (a steady slow drift; servers given one ``S`` drift together: ground truth for
the paired design of ``wattbench ab``).
``/stats`` reports ``max_active_ever``, ``speed_factors`` (each drawn factor, in order) and
``history_slow_until_ns`` (when the threshold was first reached, or None).

``--drift-per-s F``: the server's speed drifts by ``F`` (a fraction) per second from its first stream:
a stream beginning ``t`` s after it has TTFT and ITL divided by ``1 + F·t`` (``-0.002``: 0.2% fewer
tokens per second each second; ground truth for the drift rule). ``/stats`` reports ``drift_t0_ns``.

``--ramp-s S --ramp-gain G``: the server warms up and then holds: a stream beginning ``t`` s after its
first stream has TTFT and ITL divided by ``1 + G·min(t, S)/S`` (its tokens per second rise by ``G``
over the first ``S`` seconds, linearly, then hold; ground truth for ``--precondition``'s throughput
rule). ``/stats`` reports ``ramp_t0_ns``.

``--wander F --wander-every S [--wander-seed N]``: the server's speed wanders slowly: a new factor,
uniform in ``[1 − F, 1 + F]`` from its own seeded generator, every ``S`` seconds since its start
(TTFT and ITL of a stream beginning in that span times it): trials of one run share the slow state
they fall in, runs do not (ground truth for an interval that must stand for a repeat of the run).
``/stats`` reports ``wander_factors`` (each drawn, in order).

Run: ``python tests/fakes/stream_server.py --port 0 --ttft-ms 100 --itl-ms 20``; it prints
``LISTENING <port>`` on stdout once bound (127.0.0.1 only).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import heapq
from collections import deque
import json
import math
import os
import random
import signal
import sys
import time

CRLF = b"\r\n"


def _chunk(data: bytes) -> bytes:
    """One HTTP/1.1 chunk."""
    return b"%x\r\n%s\r\n" % (len(data), data)


def _event(obj) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


class Script:
    def __init__(self, a: argparse.Namespace):
        self.a = a
        self.loop = None
        self.heap: list = []  # (deadline, seq, stream): every pending token write
        self.queue: deque = deque()  # streams waiting for a slot (--max-concurrent)
        self.seq = 0
        self.timer = None
        self.timer_at = float("inf")
        # first prompt word -> (request read, first token written, last token written), ns on
        # perf_counter_ns (CLOCK_MONOTONIC, the client's clock too): per-request ground truth.
        self.per_request: dict[str, tuple[int, int, int]] = {}
        self.writes: dict[str, list[int]] = {}  # --log-writes: key -> [recv, write 0, write 1, ...]
        self.emit_ns: list[int] = []  # every content chunk written (the emission log)
        self.ttft_s = a.ttft_ms / 1e3
        self.itl_s = a.itl_ms / 1e3
        self.rng = random.Random(a.seed)
        self.noise_rng = random.Random(a.noise_seed)
        self.speed_factors: list[float] = []
        self.drift_origin = a.drift_origin if a.drift_origin is not None else time.monotonic()
        self.factor = self._draw() if a.speed_noise else 1.0
        self.started = 0  # streams begun (the --noise-every clock)
        self.max_active_ever = 0
        self.warm_since_ns: int | None = None  # --history-threshold first reached
        self.drift_t0: float | None = None  # --drift-per-s: monotonic time of the first stream
        self.ramp_t0: float | None = None  # --ramp-s: monotonic time of the first stream
        self.wander_rng = random.Random(a.wander_seed)  # --wander: its own generator
        self.wander_t0 = time.monotonic()
        self.wander_factors: list[float] = []
        self.models = [m for m in a.model.split(",") if m]
        self.fail_requests = parse_ranges(a.fail_requests)
        self.arrived = 0  # completion requests since the start (not reset with /stats)
        self.gpu_blocks = random.SystemRandom().randrange(1000, 2000)  # moves from start to start
        self.stats = self._new_stats()
        self.last_request: dict = {}
        self.counters = {"generation": 0, "prompt": 0, "success": 0}  # /metrics (--vllm-metrics): never reset
        piece = a.token_text * a.tokens_per_chunk
        # Precomputed SSE events (chunk-framed) per API.
        self.content = {
            "completions": _chunk(_event({
                "id": "cmpl-fake", "object": "text_completion", "model": self.models[0],
                "choices": [{"index": 0, "text": piece, "finish_reason": None}],
            })),
            "chat": _chunk(_event({
                "id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": self.models[0],
                "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}],
            })),
        }
        self.finish = {
            "completions": _chunk(_event({
                "id": "cmpl-fake", "object": "text_completion", "model": self.models[0],
                "choices": [{"index": 0, "text": "", "finish_reason": "length"}],
            })),
            "chat": _chunk(_event({
                "id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": self.models[0],
                "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}],
            })),
        }
        self.done = _chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"
        self.malformed = _chunk(b'data: {"choices": [{"text": "x"\n\n')
        self.error_event = _chunk(_event({"error": {"message": "scripted failure", "type": "server_error"}}))
        self.head = (
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
            b"Transfer-Encoding: chunked\r\nConnection: keep-alive\r\nX-Recv-Ns: %d\r\n\r\n"
        )

    def schedule(self, deadline: float, stream) -> None:
        """Queue a token write; one loop timer serves all streams (streams due together are
        written in one wake-up, as a batching engine does)."""
        self.seq += 1
        heapq.heappush(self.heap, (deadline, self.seq, stream))
        if deadline < self.timer_at:
            if self.timer is not None:
                self.timer.cancel()
            self.timer_at = deadline
            self.timer = self.loop.call_at(deadline, self._fire)

    def _fire(self) -> None:
        self.timer = None
        self.timer_at = float("inf")
        heap = self.heap
        now = time.monotonic()  # precise (uvloop's loop.time() is in whole ms)
        while heap and heap[0][0] <= now:
            _, _, stream = heapq.heappop(heap)
            stream.tick()
        if heap and self.timer is None:
            self.timer_at = heap[0][0]
            self.timer = self.loop.call_at(self.timer_at, self._fire)

    def _draw(self) -> float:
        f = math.exp(self.noise_rng.gauss(0.0, self.a.speed_noise))
        self.speed_factors.append(f)
        return f

    def speed(self) -> float:
        """The TTFT/ITL multiplier for a stream beginning now (speed noise × history)."""
        a = self.a
        if a.speed_noise and a.noise_every and self.started and self.started % a.noise_every == 0:
            self.factor = self._draw()
        self.started += 1
        slow = a.history_slow if (a.history_slow and self.warm_since_ns is None) else 1.0
        drift = 1.0
        if a.drift_per_s:
            now = time.monotonic()
            if self.drift_t0 is None:
                self.drift_t0 = now
            drift = 1.0 / max(0.05, 1.0 + a.drift_per_s * (now - self.drift_t0))
        if a.ramp_s:
            now = time.monotonic()
            if self.ramp_t0 is None:
                self.ramp_t0 = now
            drift /= 1.0 + a.ramp_gain * min(now - self.ramp_t0, a.ramp_s) / a.ramp_s
        return self.factor * slow * drift * self.log_drift() * self.wander()

    def wander(self) -> float:
        """``--wander F --wander-every S``: the factor of the ``S``-second span since the start that
        now falls in (drawn in order, uniform in ``[1 − F, 1 + F]``)."""
        a = self.a
        if not a.wander:
            return 1.0
        span = int((time.monotonic() - self.wander_t0) / a.wander_every)
        while len(self.wander_factors) <= span:
            self.wander_factors.append(self.wander_rng.uniform(1.0 - a.wander, 1.0 + a.wander))
        return self.wander_factors[span]

    def log_drift(self) -> float:
        """``--log-drift-per-s R``: TTFT and ITL times ``exp(R · (now − origin))`` for a stream beginning
        now (origin: ``--drift-origin``, CLOCK_MONOTONIC seconds, so servers started apart share one
        drift; default the server's start): a server that slows (R > 0) steadily, log-linear in time."""
        a = self.a
        if not a.log_drift_per_s:
            return 1.0
        return math.exp(a.log_drift_per_s * (time.monotonic() - self.drift_origin))

    def saw_active(self, active: int) -> None:
        if active > self.max_active_ever:
            self.max_active_ever = active
        if self.a.history_threshold and self.warm_since_ns is None and active >= self.a.history_threshold:
            self.warm_since_ns = time.perf_counter_ns()

    @staticmethod
    def _new_stats() -> dict:
        return {"connections": 0, "requests": 0, "streams_done": 0, "streams_completed": 0, "tokens": 0, "faults": {},
                "first_late_sum": 0.0, "first_late_max": 0.0, "first_n": 0,
                "late_sum": 0.0, "late_max": 0.0, "late_n": 0, "max_active": 0, "active": 0,
                "ttft_ns_sum": 0, "ttft_n": 0, "itl_span_ns": 0, "itl_gaps": 0}

    def config_info(self) -> str:
        """``vllm:cache_config_info`` with this server's settings (``--expose-config``)."""
        a = self.a
        labels = {"block_size": "16", "cache_dtype": "auto", "enable_prefix_caching": "True", "engine": "0",
                  "gpu_memory_utilization": "0.9", "num_gpu_blocks": str(self.gpu_blocks),
                  "scripted_ttft_ms": f"{a.ttft_ms:g}", "scripted_itl_ms": f"{a.itl_ms:g}",
                  "scripted_max_concurrent": str(a.max_concurrent)}
        body = ",".join(f'{k}="{v}"' for k, v in labels.items())
        return "# TYPE vllm:cache_config_info gauge\nvllm:cache_config_info{%s} 1.0" % body

    def metrics_text(self) -> bytes:
        """``/metrics`` as vLLM writes it (the series wattbench's scraper reads)."""
        lab = '{model_name="%s"}' % self.models[0]
        c, st = self.counters, self.stats
        lines = ["# TYPE vllm:generation_tokens_total counter", f"vllm:generation_tokens_total{lab} {c['generation']}.0",
                 "# TYPE vllm:prompt_tokens_total counter", f"vllm:prompt_tokens_total{lab} {c['prompt']}.0",
                 "# TYPE vllm:request_success_total counter", f"vllm:request_success_total{lab} {c['success']}.0",
                 "# TYPE vllm:num_requests_running gauge", f"vllm:num_requests_running{lab} {st['active']}.0",
                 "# TYPE vllm:num_requests_waiting gauge", f"vllm:num_requests_waiting{lab} {len(self.queue)}.0"]
        if self.a.expose_config:
            lines.append(self.config_info())
        return ("\n".join(lines) + "\n").encode()

    def pick_fault(self) -> str | None:
        a = self.a
        u = self.rng.random()
        for name, p in (("500", a.fail_rate), ("429", a.rate_limit_rate), ("drop", a.drop_rate),
                        ("stall", a.stall_rate), ("malformed", a.malformed_rate),
                        ("error_event", a.error_event_rate)):
            if u < p:
                return name
            u -= p
        return None

    def stats_json(self, reset: bool) -> bytes:
        s = self.stats
        out = {
            "connections": s["connections"], "requests": s["requests"], "streams_done": s["streams_done"],
            "streams_completed": s["streams_completed"], "tokens": s["tokens"],
            "faults": s["faults"], "max_active": s["max_active"], "queued": s.get("queued", 0),  # waited for a slot
            "abandoned_finished": s.get("abandoned_finished", 0), "active": s["active"], "waiting": len(self.queue),
            "first_token_late_ms": {"mean": (s["first_late_sum"] / s["first_n"] * 1e3) if s["first_n"] else None,
                                    "max": s["first_late_max"] * 1e3},
            "token_late_ms": {"mean": (s["late_sum"] / s["late_n"] * 1e3) if s["late_n"] else None,
                              "max": s["late_max"] * 1e3},
            # What the server actually did, on perf_counter_ns (CLOCK_MONOTONIC, shared with the
            # client): request bytes read -> first token written; first -> last token written.
            "actual_ttft_ms": (s["ttft_ns_sum"] / s["ttft_n"] / 1e6) if s["ttft_n"] else None,
            "actual_itl_ms": (s["itl_span_ns"] / s["itl_gaps"] / 1e6) if s["itl_gaps"] else None,
            "max_active_ever": self.max_active_ever, "speed_factors": list(self.speed_factors), "wander_factors": list(self.wander_factors),
            "drift_t0_ns": None if self.drift_t0 is None else int(self.drift_t0 * 1e9),
            "ramp_t0_ns": None if self.ramp_t0 is None else int(self.ramp_t0 * 1e9),
            "history_slow_until_ns": self.warm_since_ns,
        }
        if reset:
            self.per_request = {}
            self.writes = {}
            self.emit_ns = []
            active = s["active"]
            self.stats = self._new_stats()
            self.stats["active"] = active
        return json.dumps(out).encode()


class Stream:
    """One streaming response, driven by loop timers on absolute deadlines."""

    __slots__ = ("proto", "script", "api", "n", "k", "t0", "fault", "prompt_tokens", "handle", "cut_at",
                 "recv_ns", "first_ns", "tag", "writes", "ttft_s", "itl_s")

    def __init__(self, proto, script: Script, api: str, n: int, prompt_tokens: int, fault, tag: str = ""):
        self.tag = tag
        self.proto = proto
        self.script = script
        self.api = api
        self.n = n
        self.k = 0
        self.fault = fault
        self.prompt_tokens = prompt_tokens
        self.cut_at = n // 2 if fault in ("drop", "stall", "malformed", "error_event") else -1
        self.t0 = time.monotonic()
        self.ttft_s, self.itl_s = script.ttft_s, script.itl_s
        self.recv_ns = proto.recv_ns
        self.first_ns = 0
        self.writes = [proto.recv_ns] if script.a.log_writes else None
        proto.transport.write(script.head % proto.recv_ns)
        self.handle = True  # pending in the script's heap (or its queue)
        cap = script.a.max_concurrent
        if cap and script.stats["active"] >= cap:  # a server at capacity queues the request
            script.stats["queued"] = script.stats.get("queued", 0) + 1
            script.queue.append(self)
            return
        self.begin()

    def begin(self) -> None:
        """Take a slot: the scripted TTFT counts from here (queueing adds to what the client sees)."""
        script = self.script
        self.t0 = time.monotonic()
        st = script.stats
        script.counters["prompt"] += self.prompt_tokens
        st["active"] += 1
        st["max_active"] = max(st["max_active"], st["active"])
        f = script.speed()
        self.ttft_s, self.itl_s = script.ttft_s * f, script.itl_s * f
        script.saw_active(st["active"])
        script.schedule(self.t0 + self.ttft_s, self)

    def tick(self) -> None:
        proto, sc = self.proto, self.script
        if self.handle is False:  # cancelled (connection lost) while queued
            return
        gone = proto.transport is None or proto.transport.is_closing()
        if gone and not sc.a.keep_abandoned:
            self.finish_stats()
            return
        deadline = self.t0 + self.ttft_s + self.k * self.itl_s
        late = time.monotonic() - deadline
        st = sc.stats
        st["late_sum"] += late
        st["late_n"] += 1
        if late > st["late_max"]:
            st["late_max"] = late
        if self.k == 0:
            st["first_late_sum"] += late
            st["first_n"] += 1
            if late > st["first_late_max"]:
                st["first_late_max"] = late
        w = (lambda data: None) if gone else proto.transport.write  # --keep-abandoned: generates for no one
        if self.k == self.cut_at:
            if self.fault == "drop":
                self.finish_stats()
                proto.transport.close()  # FIN without the chunked terminator
                return
            if self.fault == "stall":
                self.handle = None  # no more bytes; the connection stays open
                return
            if self.fault == "malformed":
                w(sc.malformed)
            elif self.fault == "error_event":
                w(sc.error_event + sc.done)
                self.end()
                return
        write_ns = time.perf_counter_ns()  # before the write: the client may read it at once
        # --burst K: after the first, K chunks in one write every K inter-token times (a server that
        # batches its stream; the client reads them in one read)
        m = 1 if self.k == 0 else max(1, min(sc.a.burst, self.n - self.k))
        w(sc.content[self.api] * m)
        for _ in range(m):
            if self.writes is not None:
                self.writes.append(write_ns)
            if len(sc.emit_ns) < 5_000_000:
                sc.emit_ns.append(write_ns)
        if self.k == 0:
            self.first_ns = write_ns
            st["ttft_ns_sum"] += self.first_ns - self.recv_ns
            st["ttft_n"] += 1
        st["tokens"] += sc.a.tokens_per_chunk * m
        sc.counters["generation"] += sc.a.tokens_per_chunk * m
        self.k += m
        if self.k >= self.n:
            last_ns = write_ns
            if self.n > 1:
                st["itl_span_ns"] += last_ns - self.first_ns
                st["itl_gaps"] += self.n - 1
            if self.tag and len(sc.per_request) < 200_000:
                sc.per_request[self.tag] = (self.recv_ns, self.first_ns, last_ns)
                if self.writes is not None:  # a repeated key (same first word) gets a suffix: one entry each
                    key = self.tag if self.tag not in sc.writes else f"{self.tag}#{len(sc.writes)}"
                    sc.writes[key] = self.writes
            tail = sc.finish[self.api]
            if not sc.a.no_usage:
                comp = self.n * sc.a.tokens_per_chunk
                tail += _chunk(_event({
                    "id": "fake", "object": "chat.completion.chunk" if self.api == "chat" else "text_completion",
                    "model": sc.models[0], "choices": [],
                    "usage": {"prompt_tokens": self.prompt_tokens, "completion_tokens": comp,
                              "total_tokens": self.prompt_tokens + comp},
                }))
            w(tail + sc.done)
            if gone:  # an abandoned request's end: its slot frees, nobody reads it
                st["abandoned_finished"] = st.get("abandoned_finished", 0) + 1
                self.finish_stats()
                return
            if self.fault is None:  # a stream that carried a malformed event is not a completed one
                st["streams_completed"] += 1
                sc.counters["success"] += 1
            self.end()
            return
        sc.schedule(self.t0 + self.ttft_s + self.k * self.itl_s, self)

    def end(self) -> None:
        self.finish_stats()
        self.proto.stream = None
        if self.script.a.close_after_stream and self.proto.transport is not None:
            self.proto.transport.close()
            return
        self.proto.process()  # a pipelined request may be waiting

    def finish_stats(self) -> None:
        if self.handle is not False:
            sc = self.script
            if self in sc.queue:  # gone while still waiting for a slot
                sc.queue.remove(self)
            else:
                sc.stats["active"] -= 1
                sc.stats["streams_done"] += 1
            self.handle = False
            while sc.queue and (not sc.a.max_concurrent or sc.stats["active"] < sc.a.max_concurrent):
                nxt = sc.queue.popleft()
                if nxt.handle is not False and (nxt.proto.transport is not None or sc.a.keep_abandoned):
                    nxt.begin()

    def cancel(self) -> None:
        self.finish_stats()  # a queued write finds handle False and is skipped


class Proto(asyncio.Protocol):
    def __init__(self, script: Script, loop):
        self.script = script
        self.loop = loop
        self.transport = None
        self.buf = b""
        self.stream: Stream | None = None
        self._auth: str | None = None

    def connection_made(self, transport):
        self.transport = transport
        self.script.stats["connections"] += 1

    def connection_lost(self, exc):
        if self.stream is not None:
            if not self.script.a.keep_abandoned:
                self.stream.cancel()
            self.stream = None
        self.transport = None

    def data_received(self, data: bytes):
        self.recv_ns = time.perf_counter_ns()
        self.buf += data
        self.process()

    def process(self) -> None:
        while self.stream is None and self.transport is not None:
            i = self.buf.find(b"\r\n\r\n")
            if i < 0:
                return
            head = self.buf[:i].decode("latin-1").split("\r\n")
            length = 0
            self._auth = None
            self._headers = {}
            for line in head[1:]:
                name, _, value = line.partition(":")
                name = name.strip().lower()
                self._headers[name] = value.strip()
                if name == "content-length":
                    length = int(value.strip())
                elif name == "authorization":
                    self._auth = value.strip()
            if len(self.buf) < i + 4 + length:
                return
            body = self.buf[i + 4 : i + 4 + length]
            self.buf = self.buf[i + 4 + length :]
            parts = head[0].split(" ")
            self.handle(parts[0], parts[1] if len(parts) > 1 else "/", body)

    def respond(self, status: int, body: bytes, ctype: bytes = b"application/json", extra: bytes = b"") -> None:
        reason = {200: b"OK", 404: b"Not Found", 400: b"Bad Request", 401: b"Unauthorized", 429: b"Too Many Requests",
                  500: b"Internal Server Error"}.get(status, b"X")
        self.transport.write(
            b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n%sConnection: keep-alive\r\n\r\n%s"
            % (status, reason, ctype, len(body), extra, body)
        )

    def handle(self, method: str, path: str, body: bytes) -> None:
        sc = self.script
        path = path.split("?", 1)[0].rstrip("/")
        if method == "GET" and path == "/v1/models":
            if sc.a.not_openai:
                self.respond(200, b"<html><body>hello</body></html>", b"text/html")
            else:
                data = [] if sc.a.hide_models else [
                    {"id": m, "object": "model", "owned_by": "fake"} for m in sc.models]
                if sc.a.expose_config:  # as vLLM lists them: a fresh timestamp, the length, the weights
                    for d in data:
                        d.update(created=int(time.time()), max_model_len=4096, root=f"/models/{d['id']}")
                self.respond(200, json.dumps({"object": "list", "data": data}).encode())
            return
        if method == "GET" and path == "/health":  # as vLLM answers (GuideLLM probes it)
            self.respond(200, b"{}")
            return
        if method == "GET" and path == "/version" and sc.a.expose_config:
            self.respond(200, b'{"version": "0.0.0-scripted"}')
            return
        if method == "GET" and path == "/metrics" and (sc.a.vllm_metrics or sc.a.expose_config):
            self.respond(200, sc.metrics_text(), b"text/plain; version=0.0.4")
            return
        if method == "GET" and path == "/stats/emissions":
            body = json.dumps({"tokens_per_chunk": sc.a.tokens_per_chunk, "emit_ns": sc.emit_ns}).encode()
            self.respond(200, body)
            return
        if method == "GET" and path == "/stats/requests":
            self.respond(200, json.dumps(sc.per_request).encode())
            return
        if method == "GET" and path == "/stats/writes":
            self.respond(200, json.dumps(sc.writes).encode())
            return
        if method == "GET" and path == "/stats/last":  # the last completion request: headers and body
            self.respond(200, json.dumps(sc.last_request).encode())
            return
        if method == "GET" and path in ("/stats", "/stats/reset"):
            self.respond(200, sc.stats_json(reset=path.endswith("reset")))
            return
        if method == "POST" and path in ("/v1/completions", "/v1/chat/completions"):
            api = "chat" if path.endswith("chat/completions") else "completions"
            try:
                req = json.loads(body)
            except ValueError:
                self.respond(400, b'{"error": {"message": "bad json"}}')
                return
            sc.last_request = {"headers": dict(self._headers), "body": req}
            if sc.a.hide_models and req.get("model") not in sc.models:  # served, though never listed
                self.respond(404, json.dumps({"error": {"message": f"model {req.get('model')!r} not found"}}).encode())
                return
            want = f"Bearer {sc.a.expect_key}" if sc.a.expect_key else None
            if sc.a.expect_basic:
                want = "Basic " + base64.b64encode(sc.a.expect_basic.encode()).decode()
            if want and self._auth != want:
                msg = "bad key"
                if sc.a.echo_key:  # as OpenAI does: "Incorrect API key provided: sk-..."
                    got = (self._auth or "").removeprefix("Bearer ")
                    if got.startswith("Basic "):  # decoded, as a proxy's error page might show it
                        got = base64.b64decode(got[6:]).decode(errors="replace")
                    msg = f"Incorrect API key provided: {got}"
                self.respond(401, json.dumps({"error": {"message": msg}}).encode())
                return
            if sc.a.die_after_requests and sc.stats["requests"] >= sc.a.die_after_requests:
                # "killed" mid-level: report what was done, then exit without closing anything
                sys.stdout.write("STATS " + sc.stats_json(reset=False).decode() + "\n")
                sys.stdout.flush()
                os._exit(3)
            sc.stats["requests"] += 1
            fault = sc.pick_fault()
            if sc.a.hang_after_requests and sc.stats["requests"] > sc.a.hang_after_requests:
                fault = "stall"  # every request past N stalls half-way: a level that cannot end
            sc.arrived += 1  # never reset: the --fail-requests clock
            if sc.arrived in sc.fail_requests:
                fault = "scripted_status"
            if fault:
                sc.stats["faults"][fault] = sc.stats["faults"].get(fault, 0) + 1
            if fault == "scripted_status":
                self.respond(sc.a.fail_status, json.dumps(
                    {"error": {"message": f"scripted {sc.a.fail_status}"}}).encode())
                return
            if fault == "500":
                self.respond(500, b'{"error": {"message": "scripted 500"}}')
                return
            if fault == "429":
                self.respond(429, b'{"error": {"message": "slow down"}}', extra=b"Retry-After: 1\r\n")
                return
            n = sc.a.output_tokens or int(req.get("max_tokens") or 16)
            n = max(1, -(-n // sc.a.tokens_per_chunk))  # chunks
            if api == "chat":
                text = " ".join(str(m.get("content", "")) for m in req.get("messages", []))
            else:
                text = str(req.get("prompt", ""))
            words = text.split()
            tag = self._headers.get("x-request-id") or (words[0] if words else "")
            # the server's prompt count: words, or as a tokenizer with a chat template counts them
            # (--prompt-tokens-per-word F, --prompt-overhead N: round(F · words + N))
            ptoks = int(round(sc.a.prompt_tokens_per_word * len(words) + sc.a.prompt_overhead))
            self.stream = Stream(self, sc, api, n, ptoks, fault, tag)
            return
        self.respond(404, b'{"error": {"message": "not found"}}')



def parse_ranges(text: str) -> set[int]:
    """``"17-24"`` or ``"3,9-10"`` -> the request numbers it names (``--fail-requests``)."""
    out: set[int] = set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--model", default="fake-model", help="comma list of served model ids")
    p.add_argument("--ttft-ms", type=float, default=50.0)
    p.add_argument("--itl-ms", type=float, default=5.0)
    p.add_argument("--max-concurrent", type=int, default=0,
                   help="streams served at once; more wait in a queue (0 = unlimited): a server with a capacity")
    p.add_argument("--output-tokens", type=int, default=0, help="tokens per response; 0 = the request's max_tokens")
    p.add_argument("--tokens-per-chunk", type=int, default=1)
    p.add_argument("--burst", type=int, default=1,
                   help="after the first chunk, write chunks K at a time (one write every K inter-token times): "
                        "chunks the client reads in bunches")
    p.add_argument("--token-text", default=" tok")
    p.add_argument("--no-usage", action="store_true")
    p.add_argument("--prompt-tokens-per-word", type=float, default=1.0,
                   help="usage.prompt_tokens = round(F · prompt words + --prompt-overhead): a server whose "
                        "tokenizer counts words differently (ground truth for prompt-length calibration)")
    p.add_argument("--prompt-overhead", type=float, default=0.0, help="tokens every prompt adds (a chat template)")
    p.add_argument("--not-openai", action="store_true", help="answer /v1/models with HTML")
    p.add_argument("--hide-models", action="store_true",
                   help="answer /v1/models with an empty list but serve --model (transformers serve 5.17 "
                        "started on a local directory); requests for any other model get 404")
    p.add_argument("--expect-key", default=None, help="require this bearer key on completions")
    p.add_argument("--die-after-requests", type=int, default=0,
                   help="on the request after N: print 'STATS {json}' on stdout and exit at once (a killed server)")
    p.add_argument("--expect-basic", default=None,
                   help="require HTTP basic auth USER:PASSWORD on completions (credentials in a URL)")
    p.add_argument("--close-after-stream", action="store_true",
                   help="close the connection after each completed stream (advertising keep-alive), as llama.cpp does")
    p.add_argument("--echo-key", action="store_true", help="a 401 body quotes the key it got (as OpenAI does)")
    p.add_argument("--fail-rate", type=float, default=0.0, help="fraction answered HTTP 500")
    p.add_argument("--fail-requests", default="",
                   help="completion requests (numbered from 1 as they arrive: '17-24', '3,9-10') answered "
                        "--fail-status and nothing else")
    p.add_argument("--fail-status", type=int, default=500, help="the status --fail-requests get (500, 401)")
    p.add_argument("--rate-limit-rate", type=float, default=0.0, help="fraction answered HTTP 429")
    p.add_argument("--drop-rate", type=float, default=0.0, help="fraction dropped half-way")
    p.add_argument("--stall-rate", type=float, default=0.0, help="fraction stalled half-way")
    p.add_argument("--hang-after-requests", type=int, default=0,
                   help="every request after the first N stalls half-way (connection open, no more bytes): the "
                        "level in progress cannot end, so a test can stop the client with a known set of finished requests")
    p.add_argument("--malformed-rate", type=float, default=0.0)
    p.add_argument("--error-event-rate", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--wander", type=float, default=0.0,
                   help="the speed wanders: a new factor uniform in [1-F, 1+F] every --wander-every seconds")
    p.add_argument("--wander-every", type=float, default=2.0)
    p.add_argument("--wander-seed", type=int, default=0)
    p.add_argument("--drift-per-s", type=float, default=0.0,
                   help="speed drifts by this fraction per second from the first stream (TTFT, ITL ÷ 1 + F·t)")
    p.add_argument("--ramp-s", type=float, default=0.0,
                   help="the speed rises by --ramp-gain over this many seconds from the first stream, then holds")
    p.add_argument("--ramp-gain", type=float, default=0.0,
                   help="the fraction tokens/s rise by over --ramp-s (TTFT, ITL ÷ 1 + G·min(t, S)/S)")
    p.add_argument("--speed-noise", type=float, default=0.0,
                   help="relative sd of a seeded lognormal factor on TTFT and ITL (per start, or per --noise-every)")
    p.add_argument("--noise-seed", type=int, default=0, help="seed of the speed-noise generator")
    p.add_argument("--noise-every", type=int, default=0,
                   help="draw a new speed factor every N streams (0: one factor for the server's life)")
    p.add_argument("--history-slow", type=float, default=0.0,
                   help="TTFT and ITL this many times longer until --history-threshold streams were active at once")
    p.add_argument("--history-threshold", type=int, default=0)
    p.add_argument("--log-drift-per-s", type=float, default=0.0,
                   help="TTFT and ITL grow as exp(R * seconds since --drift-origin): a steady slow drift")
    p.add_argument("--drift-origin", type=float, default=None,
                   help="time.monotonic() seconds --log-drift-per-s counts from (default: the server's start)")
    p.add_argument("--log-writes", action="store_true",
                   help="keep every token write time per request (GET /stats/writes)")
    p.add_argument("--keep-abandoned", action="store_true",
                   help="a request whose client went away keeps its place (queued or running) until its scripted "
                        "end, as an engine that does not abort it: it lingers on the server after the client's level")
    p.add_argument("--vllm-metrics", action="store_true",
                   help="answer GET /metrics with vLLM's token counters and request gauges")
    p.add_argument("--expose-config", action="store_true",
                   help="expose its settings as vLLM does (/metrics info gauge, /v1/models max_model_len, /version)")
    p.add_argument("--loop", choices=["asyncio", "uvloop"], default="uvloop")
    a = p.parse_args(argv)

    if a.loop == "uvloop":
        import uvloop

        loop = uvloop.new_event_loop()
    else:
        loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    script = Script(a)
    script.loop = loop
    server = loop.run_until_complete(
        loop.create_server(lambda: Proto(script, loop), "127.0.0.1", a.port, backlog=4096)
    )
    port = server.sockets[0].getsockname()[1]
    sys.stdout.write(f"LISTENING {port}\n")
    sys.stdout.flush()
    stop = loop.create_future()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: stop.done() or stop.set_result(None))
    loop.run_until_complete(stop)
    server.close()
    loop.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
