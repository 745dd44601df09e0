"""The async streaming client: one request in, one ``RequestRecord`` out.

This is the clock of the whole tool, so the hot path is kept short and the timestamps are taken
as close to the socket as aiohttp allows:

- ``sent_ns``: taken by an aiohttp trace hook (``on_request_chunk_sent``) immediately before the
  request bytes (headers and body, coalesced) are written to the socket — not when the coroutine
  asked for the request: on Python < 3.12 aiohttp writes the body from a separate task one loop
  turn later, and with many streams that queueing would otherwise count as server latency.
  Client queueing shows up instead as send lag (``scheduled_ns`` → ``sent_ns``) in open loop.
- arrival times: the connection's protocol (a ``ResponseHandler`` subclass installed in the
  connector) stamps ``perf_counter_ns`` at the top of ``data_received``, i.e. when the event loop
  read the bytes from the socket, before HTTP parsing, before the reading task is woken, before
  SSE splitting and JSON parsing (orjson). The HTTP parsing of those bytes waits for the end of
  the loop's I/O phase, so that the other sockets read in the same poll are stamped before any
  of them is parsed. Should the private connector hook be missing in some aiohttp version, the
  time the read returned is used instead.
- ``first_token_ns`` is the first chunk whose content is non-empty, ``chunk_ns`` every content
  chunk, ``last_token_ns`` the last one (a request ends at its last content chunk), ``end_ns``
  when the stream finished (``[DONE]``) or broke.
- one ``aiohttp.ClientSession`` per worker, ``TCPConnector(limit=0, limit_per_host=0)`` (no
  100-connection cap), a 1 MiB read buffer (no 64 KiB cap), keep-alive connections — except for
  servers that close them after a stream (``target.keepalive`` False: llama.cpp), where each request
  opens its own (``force_close``), so no request lands on a socket the server already closed.

Several SSE events that arrive in one socket read share that read's timestamp.

Tokens come only from the server's ``usage`` chunk; when a server sends none, the record keeps
``input_tokens``/``output_tokens`` at None and says ``token_source="none"`` (the runner decides the
fallback). Errors are classified, never retried: ``http_<status>`` (429 included, Retry-After is
not honoured), ``timeout`` (total request timeout), ``stall`` (no bytes for
``target.stall_timeout_s``), ``disconnect`` (stream closed before ``[DONE]``/``finish_reason``),
``bad_stream`` (malformed SSE/JSON, an error object in the stream, a field of the wrong type —
``choices`` not a list of objects, a chat ``delta`` not an object, a ``text``/``content`` not a
string — or an SSE line past ``server.sse.MAX_LINE_BYTES``), ``bad_usage`` (a ``usage`` that is not an
object, or a token count that is not a whole number in ``0..MAX_USAGE_TOKENS``; a later usage event
with a smaller count than an earlier one; ``completion_tokens`` above the request's ``max_tokens`` or
below the number of content chunks — ``server.openai.usage_disagreement``), ``connect`` (no
connection). A redirect to another host is refused (``core/origin.py``: nothing is sent there) and
recorded as ``http_<status>``; same-host redirects are followed. A failed request keeps the
timestamps it got, with ``ok=False``; what is wrong with one answer costs that request, never the
level. Error details and kept texts are scrubbed of the target's secrets (``core/scrubber.py``)
before the record exists.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from types import SimpleNamespace
from typing import Any, Callable
import asyncio
import contextlib
import functools
from collections import deque

import aiohttp
import orjson

from wattbench.core.clock import now_ns
from wattbench.core.errors import TargetError
from wattbench.core import origin
from wattbench.core.scrubber import Scrubber
from wattbench.core.secret_scope import registered, scope
from wattbench.core.target import TargetSpec
from wattbench.core.schema import RequestRecord, build_record
from wattbench.server.openai import (
    auth_headers,
    build_payload,
    endpoint_url,
    stream_error,
    usage_disagreement,
    usage_problem,
    usage_regression,
)
from wattbench.server.sse import DONE, SSEError, SSEParser
from wattbench.workload.base import RequestSpec

__all__ = ["StreamClient", "sending_for", "SendGate", "SENDS_PER_TURN", "READ_BUFSIZE", "new_event_loop", "ERROR_BODY_BYTES", "OUTPUT_TEXT_MAX_CHARS",
           "OUTPUT_TEXT_CUT"]

# The most of one answer's text kept (``--keep-output-text``, and a session's history): 1 Mi
# characters, about 250k tokens of English — past any max_tokens served today — so only a server
# streaming without end reaches it (before the cap, 4 such requests held 1.66 GB and wrote a 106 MB
# report). What is past it is not kept; the kept text ends with ``OUTPUT_TEXT_CUT``, saying so.
OUTPUT_TEXT_MAX_CHARS = 1 << 20
OUTPUT_TEXT_CUT = f" [wattbench: the text was cut here at {OUTPUT_TEXT_MAX_CHARS:,} characters, the most kept per answer]"

# Requests started in one loop turn at most (``SendGate``): 8 back-to-back request starts hold the
# loop ~1-2 ms (the arrival stamps of that turn wait as long), and the streams a batching server
# frees in one step, up to 8, go out before the loop polls again.
SENDS_PER_TURN = 8
READ_BUFSIZE = 2**20  # bytes; aiohttp's default is 64 KiB
ERROR_BODY_BYTES = 4096  # of a non-200 answer's body (300 characters are kept); a 10 GB body costs this
DETAIL_CHARS = 300  # of an error detail kept in a record, cut after the secrets are scrubbed (a key at
# character 290 would otherwise leave its prefix)


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop when importable, else the default asyncio loop."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux/macOS
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


try:  # aiohttp internals: the protocol class and the connector's protocol factory
    from aiohttp.client_proto import ResponseHandler as _ResponseHandler
except ImportError:  # pragma: no cover
    # an aiohttp without this private class (no public home for it): reads are stamped when parsed
    _ResponseHandler = None  # type: ignore[assignment,misc]


if _ResponseHandler is not None:

    class _TimedResponseHandler(_ResponseHandler):
        """Stamps the arrival of every socket read before aiohttp parses it.

        The parsing itself (aiohttp's HTTP parser, the payload feed, waking the reading task) is
        deferred to one callback right after the loop's I/O phase: when many streams' bytes are
        ready in the same poll (a batching server writes a token to every stream at once), every
        socket is read and stamped first, then parsed. Parsing inline cost each later socket of a
        burst the parse time of all those before it (~15 µs each: ~1 ms at 64 synchronized
        streams, ~4 ms at 256). EOF and connection loss parse what is pending first.
        """

        rx_ns = 0
        _pending: list[tuple[int, bytes]] | None = None  # (arrival ns, bytes) read, not yet parsed

        def data_received(self, data: bytes, _now: Callable[[], int] = now_ns) -> None:
            t = _now()
            if data:
                # Bytes came: the read timeout (sock_read, the stall rule) stops now, not at the
                # deferred parse, which starts it again. After the loop was held past the timeout
                # (a host that took its CPU), the expired timer is already due in this turn, before
                # the parse: left armed, it failed as a stall a stream whose bytes were read.
                handle = getattr(self, "_read_timeout_handle", None)
                if handle is not None:
                    handle.cancel()
            pending = self._pending
            if pending is None:
                self._pending = [(t, data)]
                self._loop.call_soon(self._parse_pending)
            else:
                pending.append((t, data))

        def _parse_pending(self) -> None:
            pending, self._pending = self._pending, None
            if pending:
                parse = super().data_received
                for t, data in pending:
                    self.rx_ns = t
                    parse(data)

        def eof_received(self) -> None:
            self._parse_pending()
            return super().eof_received()

        def connection_lost(self, exc: BaseException | None) -> None:
            self._parse_pending()
            super().connection_lost(exc)


def _timed_connector(**kw: Any) -> aiohttp.TCPConnector:
    connector = aiohttp.TCPConnector(**kw)
    factory = getattr(connector, "_factory", None)
    if _ResponseHandler is not None and isinstance(factory, functools.partial) and factory.func is _ResponseHandler:
        # typeshed's partial is invariant in what it makes: a subclass's factory is one of the base's
        connector._factory = functools.partial(  # type: ignore[assignment]
            _TimedResponseHandler, *factory.args, **factory.keywords)
    return connector


class _SentAt:
    """Per-request holder: the trace hook writes the wire time into it."""

    __slots__ = ("ns",)

    def __init__(self) -> None:
        self.ns = 0


async def _on_chunk_sent(session: aiohttp.ClientSession, ctx: SimpleNamespace,
                         params: aiohttp.TraceRequestChunkSentParams) -> None:
    holder = ctx.trace_request_ctx
    if holder is not None and not holder.ns:
        holder.ns = now_ns()


class SendGate:
    """At most ``per_turn`` requests start in one turn of the event loop; the rest start in the
    next turns, in the order they asked, ``per_turn`` at a time.

    Why a bound: N streams that a batching server ends in the same step start N requests back to
    back, a few hundred microseconds of loop time each, and every byte that arrives meanwhile is
    stamped late; between two turns the loop reads its sockets. Why not one request per turn (as
    it was): the streams freed by one step then go out over 2N turns, and on a host whose CPUs a
    server keeps busy the loop's thread is taken off its CPU for 0.1-0.5 s at a time (runnable,
    not running: measured beside vLLM on the 2-core machine, docs/benchmarks.md). A pause that
    falls between those turns leaves the freed streams unsent for its length: one request in
    flight of 8 asked for 0.3 s. Started in one turn, a batch of up to ``per_turn`` is on the wire
    before the loop polls again, so a pause afterwards finds them at the server.

    A turn ends when the loop runs the callback armed by the turn's first admission
    (``call_soon``: after the callbacks already due, before the next ones)."""

    __slots__ = ("per_turn", "used", "waiters", "_armed")

    def __init__(self, per_turn: int = SENDS_PER_TURN) -> None:
        if per_turn < 1:
            raise ValueError("per_turn must be at least 1")
        self.per_turn = per_turn
        self.used = 0  # admitted in this turn
        self.waiters: deque[asyncio.Future[None]] = deque()
        self._armed = False

    async def enter(self) -> None:
        """Return when this request may start (at once while the turn has room)."""
        if self.used < self.per_turn and not self.waiters:
            self.used += 1
            self._arm()
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiters.append(fut)
        self._arm()
        try:
            await fut
        except asyncio.CancelledError:
            if fut in self.waiters:  # cancelled while waiting: not admitted
                self.waiters.remove(fut)
            raise

    def _arm(self) -> None:
        if not self._armed:
            self._armed = True
            asyncio.get_running_loop().call_soon(self._next_turn)

    def _next_turn(self) -> None:
        self._armed = False
        self.used = 0
        while self.waiters and self.used < self.per_turn:
            fut = self.waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                self.used += 1
        if self.used:
            self._arm()  # the admitted run in the next turn; the count resets after them


@contextlib.contextmanager
def sending_for(targets: Sequence[TargetSpec]) -> Iterator[None]:
    """The block sends ``targets``' requests in a process that did not resolve them (a spawned load
    worker, a Ray load actor on any node), exactly as the process that did: each target's query
    string goes with every request to its origin, same-origin redirect hops included, and to no
    other (``core.origin.send_query``), and the targets' secrets — the query's values, the key, the
    secret headers — are registered in this process (``core.secret_scope.scope``), so that nothing it
    writes or prints (a record's error detail, a message, a traceback) holds them: both while the
    block runs, and no longer (a Ray load actor runs many levels, an in-process one many runs)."""
    with scope(*(s for t in targets for s in t.secrets())):
        for t in targets:
            if t.query:
                origin.send_query(f"{t.base_url}?{t.query}")
        yield


class StreamClient:
    """One worker's HTTP client. Use as ``async with StreamClient(target) as c: await c.send(...)``."""

    def __init__(self, target: TargetSpec, concurrency: int = 0):
        self.target = target
        self.concurrency = concurrency
        self._session: aiohttp.ClientSession | None = None
        self._gate: SendGate | None = None
        self._headers = auth_headers(target.api_key, target.headers)
        self._url = endpoint_url(target)
        self._scrubbers: dict[int, tuple[TargetSpec, Scrubber]] = {}

    def _scrubber(self, target: TargetSpec) -> Scrubber:
        """The target's secrets (its key and secret headers) and the process's (its URL's query
        values, ``core.origin.send_query``), built once per target."""
        hit = self._scrubbers.get(id(target))
        if hit is None or hit[0] is not target:
            hit = self._scrubbers[id(target)] = (target, Scrubber([*target.secrets(), *registered().secrets]))
        return hit[1]

    async def __aenter__(self) -> "StreamClient":
        self._gate = SendGate()
        # limit=0: no cap on connections (aiohttp's default is 100 total).
        connector = _timed_connector(limit=0, limit_per_host=0, ttl_dns_cache=300,
                                     force_close=not self.target.keepalive)
        trace = aiohttp.TraceConfig()
        trace.on_request_chunk_sent.append(_on_chunk_sent)
        self._session = aiohttp.ClientSession(
            connector=connector,
            trace_configs=[trace],
            cookie_jar=aiohttp.DummyCookieJar(),
            read_bufsize=READ_BUFSIZE,
            timeout=aiohttp.ClientTimeout(
                total=self.target.request_timeout_s,
                sock_read=self.target.stall_timeout_s,
            ),
            auto_decompress=True,
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def __repr__(self) -> str:
        return f"StreamClient(target={self.target!r})"

    async def send(
        self,
        spec: RequestSpec,
        target: TargetSpec | None = None,
        level: int = 0,
        id: int = 0,
        worker: int = 0,
        *,
        scheduled_ns: int | None = None,
        warmup: bool = False,
        keep_text: bool = False,
    ) -> RequestRecord:
        """Send one streaming request and return what the client saw."""
        target = target or self.target
        session = self._session
        assert session is not None, "use StreamClient as an async context manager"
        url = self._url if target is self.target else endpoint_url(target)
        headers = self._headers if target is self.target else auth_headers(target.api_key, target.headers)
        body = orjson.dumps(build_payload(spec, target))
        keep = keep_text or target.keep_output_text
        is_chat = target.api == "chat"

        st = _Stream(is_chat, keep)
        error = detail = status = None

        # The send gate: at most SENDS_PER_TURN requests start per loop turn (SendGate).
        gate = self._gate
        assert gate is not None
        await gate.enter()
        sent_at = _SentAt()
        asked_ns = now_ns()
        try:
            async with origin.request(session, "POST", url, data=body, headers=headers,
                                      trace_request_ctx=sent_at) as resp:
                status = resp.status
                if status != 200:
                    error = f"http_{status}"
                    raw = await origin.read_body(resp, ERROR_BODY_BYTES)
                    detail = raw.decode("utf-8", "replace")  # scrubbed, then cut (_record)
                else:
                    read = resp.content.readany
                    conn = resp.connection
                    proto = conn.protocol if conn is not None else None
                    # the protocol that stamps each read (_timed_connector), when aiohttp has its class
                    stamps = (proto if _ResponseHandler is not None and isinstance(proto, _TimedResponseHandler)
                              else None)
                    while not st.done:
                        data = await read()
                        # Arrival: when the loop read these bytes off the socket, before parsing.
                        t = stamps.rx_ns if stamps is not None else now_ns()
                        if not data:
                            break  # EOF
                        st.feed(data, t)
                    error, detail = st.error, st.detail
                    if error is None and not st.done and not (st.finished and st.usage is not None):
                        error = "disconnect"
                        detail = "stream closed before [DONE]"
                    if error is None and st.usage is not None:
                        detail = usage_disagreement(st.usage, len(st.chunk_ns), spec.max_tokens)
                        if detail is not None:
                            error = "bad_usage"
        except asyncio.CancelledError:
            raise
        except TargetError as e:  # a redirect to another host (refused, nothing sent there) or a loop
            status = getattr(e, "status", None)
            error, detail = f"http_{status or 'redirect'}", str(e)
        except Exception as e:  # noqa: BLE001 - the client's failures become the record's error class
            failure = _failure(e, target)
            if failure is None:
                raise
            error, detail = failure
        end_ns = now_ns()
        sent_ns = sent_at.ns or asked_ns  # no wire time when the connection failed

        return _record(spec, target, level, id, worker, warmup, scheduled_ns, sent_ns, end_ns, st, status, error,
                       detail, self._scrubber(target))


class _Stream:
    """What one response stream said so far: content-chunk stamps (and texts when kept), usage,
    whether a finish reason or ``[DONE]`` came, and the stream error if any. ``feed`` is called
    once per socket read with the read's arrival stamp."""

    __slots__ = ("is_chat", "keep", "chunk_ns", "texts", "kept_chars", "usage", "error", "detail", "done", "finished",
                 "parser")

    def __init__(self, is_chat: bool, keep: bool):
        self.is_chat, self.keep = is_chat, keep
        self.chunk_ns: list[int] = []
        self.texts: list[str] = []
        self.kept_chars = 0  # of the texts kept; past OUTPUT_TEXT_MAX_CHARS the rest is not kept
        self.usage: dict[str, Any] | None = None
        self.error: str | None = None
        self.detail: str | None = None
        self.done = False
        self.finished = False  # a finish_reason was seen
        self.parser = SSEParser()

    def feed(self, data: bytes, t: int) -> None:
        loads, is_chat, keep, chunk_ns = orjson.loads, self.is_chat, self.keep, self.chunk_ns
        try:
            events = self.parser.feed(data)
        except SSEError as e:
            self.fail("bad_stream", str(e))
            return
        for _event, payload in events:
            if payload == DONE:
                self.done = True
                return
            try:
                obj = loads(payload)
            except orjson.JSONDecodeError:
                self.fail("bad_stream", "malformed JSON in stream: " + payload[:ERROR_BODY_BYTES].decode("utf-8", "replace"))
                return
            if type(obj) is not dict:
                self.fail("bad_stream", "stream event is not an object")
                return
            choices = obj.get("choices")
            if choices:
                if type(choices) is not list:
                    self.fail("bad_stream", f"choices is {_kind(choices)}, not a list")
                    return
                c0 = choices[0]
                if type(c0) is not dict:
                    self.fail("bad_stream", f"choices[0] is {_kind(c0)}, not an object")
                    return
                if is_chat:
                    d = c0.get("delta")
                    if d is not None and type(d) is not dict:
                        self.fail("bad_stream", f"choices[0].delta is {_kind(d)}, not an object")
                        return
                    text = (d.get("content") or d.get("reasoning_content") or d.get("reasoning")) if d else None
                else:
                    text = c0.get("text")
                if text:
                    if type(text) is not str:
                        self.fail("bad_stream", f"the chunk's text is {_kind(text)}, not a string")
                        return
                    chunk_ns.append(t)
                    if keep and self.kept_chars < OUTPUT_TEXT_MAX_CHARS:
                        text = text[: OUTPUT_TEXT_MAX_CHARS - self.kept_chars]
                        self.texts.append(text)
                        self.kept_chars += len(text)
                        if self.kept_chars >= OUTPUT_TEXT_MAX_CHARS:
                            self.texts.append(OUTPUT_TEXT_CUT)
                if c0.get("finish_reason"):
                    self.finished = True
            elif choices is not None and type(choices) is not list:
                self.fail("bad_stream", f"choices is {_kind(choices)}, not a list")
                return
            elif "error" in obj or obj.get("object") == "error":
                self.fail("bad_stream", "error in stream: " + (stream_error(obj) or ""))
                return
            u = obj.get("usage")
            if u is not None:
                why = usage_problem(u)
                if why is not None:
                    self.fail("bad_usage", why)
                    return
                if u:
                    if self.usage is not None and (why := usage_regression(self.usage, u)) is not None:
                        self.fail("bad_usage", why)
                        return
                    self.usage = u

    def fail(self, error: str, detail: str) -> None:
        self.error, self.detail, self.done = error, detail, True


def _kind(v: object) -> str:
    """What a wrong value is, for a detail: ``a str``, ``a dict`` … (never the value itself)."""
    return f"a {type(v).__name__}"


def _failure(e: BaseException, target: TargetSpec) -> tuple[str, str] | None:
    """A client exception as the record's (error class, detail); None: not a request failure
    (a bug: the caller re-raises). Order matters: aiohttp's exceptions subclass each other."""
    if isinstance(e, aiohttp.ClientConnectorError):
        return "connect", e.__class__.__name__ + ": " + str(getattr(e, "os_error", "") or e)
    if isinstance(e, aiohttp.SocketTimeoutError):
        return "stall", f"no bytes for {target.stall_timeout_s:g} s"
    if isinstance(e, aiohttp.ConnectionTimeoutError):
        return "connect", "timed out connecting"
    if isinstance(e, (asyncio.TimeoutError, TimeoutError)):
        return "timeout", f"request exceeded {target.request_timeout_s:g} s"
    if isinstance(e, (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError, aiohttp.ClientOSError)):
        return "disconnect", e.__class__.__name__
    if isinstance(e, aiohttp.ClientResponseError):
        return "bad_stream", f"{e.__class__.__name__}: {e.message}"
    if isinstance(e, aiohttp.ClientError):
        return "disconnect", e.__class__.__name__
    return None


def _record(spec: RequestSpec, target: TargetSpec, level: int, id: int, worker: int, warmup: bool,
            scheduled_ns: int | None, sent_ns: int, end_ns: int, st: _Stream, status: int | None,
            error: str | None, detail: str | None, scrubber: Scrubber) -> RequestRecord:
    """The request's record. build_record: the fields are built here, typed; validation would cost
    on the hot path, and model_construct twice the memory a level holds per request."""
    usage, chunk_ns = (st.usage if error != "bad_usage" else None), st.chunk_ns  # a refused count counts nowhere
    in_tok = out_tok = None
    if usage is not None:
        in_tok = usage.get("prompt_tokens")
        out_tok = usage.get("completion_tokens")
    return build_record(
        id=id,
        level=level,
        worker=worker,
        warmup=warmup,
        session_id=spec.session_id,
        turn=spec.turn if spec.session_id is not None else None,
        scheduled_ns=scheduled_ns,
        sent_ns=sent_ns,
        first_token_ns=chunk_ns[0] if chunk_ns else None,
        last_token_ns=chunk_ns[-1] if chunk_ns else None,
        end_ns=end_ns,
        chunk_ns=chunk_ns,
        input_tokens=in_tok,
        output_tokens=out_tok,
        requested_input_tokens=spec.input_tokens,
        requested_output_tokens=spec.max_tokens,
        token_source="usage" if usage is not None else "none",
        ok=error is None,
        error=error,
        error_detail=scrubber.cut(detail, DETAIL_CHARS) if detail else None,  # scrubbed first, then cut
        http_status=status,
        output_text=scrubber.text("".join(st.texts)) if st.keep else None,
        tenant=spec.tenant,
        tags=list(spec.user_tags),
        model=target.model,
    )
