"""An incremental Server-Sent Events parser over raw bytes.

The streaming client feeds it whatever bytes the socket delivered (after taking the arrival
timestamp) and gets back the events those bytes completed. Chunks may be split anywhere — inside
a field name, inside a UTF-8 sequence, between ``\\r`` and ``\\n``. Line ends may be ``\\n``,
``\\r\\n`` or ``\\r`` (the SSE spec allows all three). Comment lines (``:`` ...) and unknown fields
are ignored; several ``data:`` lines of one event are joined with ``\\n``; an event is dispatched
at the blank line that ends it. Payloads are returned as ``bytes`` so that the caller can hand
them straight to ``orjson.loads`` without decoding twice.

The parser does no JSON work: ``data: [DONE]`` comes back as the payload ``b"[DONE]"``.
"""

from __future__ import annotations

__all__ = ["SSEParser", "DONE"]

DONE = b"[DONE]"


class SSEParser:
    """Feed bytes, get complete events as ``(event_name, data)`` tuples.

    ``event_name`` is ``None`` unless the event carried an ``event:`` field (some servers send
    ``event: error``). Events without any ``data`` field are not dispatched (per the spec).
    """

    __slots__ = ("_buf", "_data", "_event", "_skip_lf")

    def __init__(self) -> None:
        self._buf = b""  # an incomplete line carried over from the previous feed
        self._data: list[bytes] = []  # data lines of the event being built
        self._event: str | None = None
        self._skip_lf = False  # the previous feed ended with \r: a leading \n belongs to it

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
        buf = self._buf + chunk if self._buf else chunk
        lines = buf.split(b"\n")
        self._buf = lines.pop()  # the unterminated rest (b"" when the chunk ended a line)
        out: list[tuple[str | None, bytes]] = []
        data = self._data
        for line in lines:
            if not line:  # blank line: dispatch
                if data:
                    out.append((self._event, data[0] if len(data) == 1 else b"\n".join(data)))
                    data.clear()
                self._event = None
                continue
            if line[:5] == b"data:":
                value = line[5:]
                data.append(value[1:] if value[:1] == b" " else value)
                continue
            if line[:1] == b":":  # comment / keep-alive
                continue
            name, sep, value = line.partition(b":")
            if name == b"event":
                if value[:1] == b" ":
                    value = value[1:]
                self._event = value.decode("utf-8", "replace")
            elif name == b"data":  # "data" with no colon: an empty data line
                data.append(b"")
            # id, retry and unknown fields are ignored
        return out

    @property
    def pending(self) -> bool:
        """True when bytes of an unfinished event are buffered (a stream cut mid-event)."""
        return bool(self._buf or self._data)
