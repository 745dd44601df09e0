"""An incremental Server-Sent Events parser over raw bytes.

The streaming client feeds it whatever bytes the socket delivered (after taking the arrival
timestamp) and gets back the events those bytes completed. Chunks may be split anywhere — inside
a field name, inside a UTF-8 sequence, between ``\\r`` and ``\\n``. Line ends may be ``\\n``,
``\\r\\n`` or ``\\r`` (the SSE spec allows all three). Comment lines (``:`` ...) and unknown fields
are ignored; several ``data:`` lines of one event are joined with ``\\n``; an event is dispatched
at the blank line that ends it. Payloads are returned as ``bytes`` so that the caller can hand
them straight to ``orjson.loads`` without decoding twice.

The parser does no JSON work: ``data: [DONE]`` comes back as the payload ``b"[DONE]"``.

A line, and an event, are capped at ``MAX_LINE_BYTES`` (8 MiB): past it ``feed`` raises
``SSEError`` and holds no more (a hostile server's endless line cost 707 MB for 300 MB of line
before the cap). What a real server puts in one event is one chunk of a stream: a few tokens
(~100-300 bytes of JSON), a few KB with logprobs, at most the whole prompt when a request asks for
``echo`` (~4 bytes a token: 8 MiB holds a 2-million-token prompt). wattbench asks for neither, so
the cap is thousands of times what its own requests get back, and a stream that passes it is
broken or hostile. Memory per stream stays below twice the cap.
"""

from __future__ import annotations

from wattbench.core.secret_scope import clip

__all__ = ["SSEParser", "SSEError", "DONE", "MAX_LINE_BYTES"]

DONE = b"[DONE]"
MAX_LINE_BYTES = 8 << 20


class SSEError(ValueError):
    """The stream broke the parser's bounds (a line or an event longer than ``max_line_bytes``)."""


class SSEParser:
    """Feed bytes, get complete events as ``(event_name, data)`` tuples.

    ``event_name`` is ``None`` unless the event carried an ``event:`` field (some servers send
    ``event: error``). Events without any ``data`` field are not dispatched (per the spec).
    """

    __slots__ = ("_parts", "_plen", "_data", "_dlen", "_event", "_skip_lf", "max_line_bytes")

    def __init__(self, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self._parts: list[bytes] = []  # an incomplete line carried over from earlier feeds
        self._plen = 0  # its length
        self._data: list[bytes] = []  # data lines of the event being built
        self._dlen = 0  # their length
        self._event: str | None = None
        self._skip_lf = False  # the previous feed ended with \r: a leading \n belongs to it
        self.max_line_bytes = max_line_bytes

    def _too_long(self, what: str) -> SSEError:
        self._parts, self._plen, self._data, self._dlen = [], 0, [], 0
        return SSEError(f"an SSE {what} passed {self.max_line_bytes} bytes without ending")

    def feed(self, chunk: bytes) -> list[tuple[str | None, bytes]]:
        if not chunk:
            return []
        if self._skip_lf:
            self._skip_lf = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        if b"\r" in chunk:
            if chunk[-1:] == b"\r":
                self._skip_lf = True
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if self._parts:
            if b"\n" not in chunk:  # the long line goes on: keep the pieces, never re-copy them
                self._parts.append(chunk)
                self._plen += len(chunk)
                if self._plen > self.max_line_bytes:
                    raise self._too_long("line")
                return []
            buf = b"".join(self._parts) + chunk
            self._parts, self._plen = [], 0
        else:
            buf = chunk
        lines = buf.split(b"\n")
        rest = lines.pop()  # the unterminated rest (b"" when the chunk ended a line)
        if rest:
            if len(rest) > self.max_line_bytes:
                raise self._too_long("line")
            self._parts, self._plen = [rest], len(rest)
        out: list[tuple[str | None, bytes]] = []
        data = self._data
        for line in lines:
            if not line:  # blank line: dispatch
                if data:
                    out.append((self._event, data[0] if len(data) == 1 else b"\n".join(data)))
                    data.clear()
                    self._dlen = 0
                self._event = None
                continue
            if line[:5] == b"data:":
                value = line[5:]
                data.append(value[1:] if value[:1] == b" " else value)
                self._dlen += len(value)
                if self._dlen > self.max_line_bytes:
                    raise self._too_long("event")
                continue
            if line[:1] == b":":  # comment / keep-alive
                continue
            name, sep, value = line.partition(b":")
            if name == b"event":
                if value[:1] == b" ":
                    value = value[1:]
                self._event = clip(value[:4096].decode("utf-8", "replace"), 200)
            elif name == b"data":  # "data" with no colon: an empty data line
                data.append(b"")
            # id, retry and unknown fields are ignored
        return out

    @property
    def pending(self) -> bool:
        """True when bytes of an unfinished event are buffered (a stream cut mid-event)."""
        return bool(self._parts or self._data)
