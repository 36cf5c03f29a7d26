"""Incremental server-sent-events framing over raw byte chunks.

Hand-written because the gateway reads upstream bytes in whatever chunks the
socket yields and must forward them without waiting: the SSE client
libraries available each own their HTTP client and parse whole responses.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class SSEEvent:
    event: str | None
    data: str
    raw: bytes  # the exact bytes of the event including its terminating blank line


class SSEParser:
    """Splits a byte stream into events at blank lines; handles \\n and \\r\\n."""

    __slots__ = ("_buffer",)

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        return [event for raw in self.feed_raw(chunk) if (event := parse_event(raw)) is not None]

    def feed_raw(self, chunk: bytes) -> list[bytes]:
        """The complete events in the stream so far, as bytes; pass-through taps look at
        these without decoding them (the hot path of a relayed stream)."""
        buffer = self._buffer + chunk if self._buffer else chunk
        if b"\r" in buffer:
            buffer = buffer.replace(b"\r\n", b"\n")
        raws = []
        start = 0
        while True:
            end = buffer.find(b"\n\n", start)
            if end < 0:
                break
            raws.append(buffer[start : end + 2])
            start = end + 2
        self._buffer = buffer[start:]
        return raws

    @property
    def pending(self) -> bytes:
        """Bytes of an event not yet terminated (what a cut stream left behind)."""
        return self._buffer


def parse_event(raw: bytes) -> SSEEvent | None:
    # Nearly every event of a model stream is one `data: ` line, with or without an `event: ` line
    # before it: read those without the general line loop (the hot path of converted streams).
    if raw.startswith(b"data: ") and raw.find(b"\n") == len(raw) - 2:
        return SSEEvent(None, raw[6:-2].decode("utf-8", "replace"), raw)
    if raw.startswith(b"event: "):
        first = raw.find(b"\n")
        if raw.startswith(b"data: ", first + 1) and raw.find(b"\n", first + 1) == len(raw) - 2:
            name = raw[7:first].decode("utf-8", "replace")
            if not name.startswith(" "):
                return SSEEvent(name, raw[first + 7:-2].decode("utf-8", "replace"), raw)
    return _parse_lines(raw)


def _parse_lines(raw: bytes) -> SSEEvent | None:
    name = None
    data_lines = []
    for line in raw.decode("utf-8", "replace").split("\n"):
        if not line or line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            data_lines.append(value)
        elif field == "event":
            name = value
    if name is None and not data_lines:
        return None  # a comment-only keep-alive
    return SSEEvent(name, "\n".join(data_lines), raw)


def encode(data: bytes, event: str | None = None) -> bytes:
    if event is None:
        return b"data: %b\n\n" % data
    return b"event: %b\ndata: %b\n\n" % (event.encode(), data)
