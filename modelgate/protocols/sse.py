"""Incremental server-sent-events framing over raw byte chunks, linear and bounded.

Hand-written because the gateway reads upstream bytes in whatever chunks the
socket yields and must forward them without waiting: the SSE client
libraries available each own their HTTP client and parse whole responses.

Like httpx's `LineDecoder`, each byte is looked at once: only the new chunk
is searched for a boundary (plus the one byte before it), and the bytes of an
unfinished event are kept as a list of chunks, joined once when the event
completes. Re-scanning a growing buffer on every read made one 8 MB event
cost seconds of event-loop time. An event (or NDJSON line) larger than
`max_event_bytes` is an upstream fault, not a reason to grow without end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from modelgate.errors import ErrorType, UpstreamError

DEFAULT_MAX_EVENT_BYTES = 16 * 1024 * 1024

# Process-wide cap, set from `upstream.max_event_bytes` when the runtime starts.
max_event_bytes = DEFAULT_MAX_EVENT_BYTES


def event_too_large(limit: int) -> UpstreamError:
    return UpstreamError(ErrorType.UPSTREAM_ERROR, f"Upstream sent a stream event larger than {limit} bytes")


def unreadable_event() -> UpstreamError:
    return UpstreamError(ErrorType.UPSTREAM_ERROR, "Upstream sent an unreadable stream event")


@dataclass(slots=True)
class SSEEvent:
    event: str | None
    data: str
    raw: bytes  # the exact bytes of the event including its terminating blank line (CRLF as LF)


_SHORT_CHUNK = 2048  # bytes: Framer._end


class Framer:
    """Splits a byte stream at a separator (b"\\n\\n" for SSE, b"\\n" for NDJSON) in linear time.

    CR LF is read as LF (a CR at the end of one chunk waits for the next one).
    """

    __slots__ = ("_sep", "_parts", "_size", "_cr", "_limit")

    def __init__(self, separator: bytes, limit: int | None = None) -> None:
        if separator not in (b"\n", b"\n\n"):
            raise ValueError("a Framer splits at a newline or a blank line")
        self._sep = separator
        self._parts: list[bytes] = []  # bytes of the unfinished frame
        self._size = 0
        self._cr = False  # the previous chunk ended with a CR
        self._limit = limit

    def feed(self, chunk: bytes) -> list[bytes]:
        if self._cr:
            chunk = b"\r" + chunk
            self._cr = False
        if chunk.endswith(b"\r"):
            chunk = chunk[:-1]
            self._cr = True
        if b"\r" in chunk:
            chunk = chunk.replace(b"\r\n", b"\n")
        if not chunk:
            return []
        frames: list[bytes] = []
        width = len(self._sep)
        start = 0
        if width == 2 and self._parts and self._parts[-1].endswith(b"\n") and chunk.startswith(b"\n"):
            # The blank line straddles the chunk boundary.
            self._parts.append(b"\n")
            frames.append(self._take())
            start = 1
        end = chunk.find(self._sep, start) if len(chunk) < _SHORT_CHUNK else self._end(chunk, start)
        limit = self._cap()
        if 0 <= end == len(chunk) - width and not start and not self._parts and len(chunk) <= limit:
            return [chunk]  # the usual read: exactly one whole frame
        while end >= 0:
            piece = chunk[start : end + width]
            if self._parts:
                self._parts.append(piece)
                self._size += len(piece)
                self._check()
                frames.append(self._take())
            elif len(piece) > limit:
                raise event_too_large(limit)
            else:
                frames.append(piece)
            start = end + width
            end = self._end(chunk, start)
        if start < len(chunk):
            rest = chunk[start:] if start else chunk
            self._parts.append(rest)
            self._size += len(rest)
            self._check()
        return frames

    def _end(self, chunk: bytes, start: int) -> int:
        """Where the next separator in `chunk` from `start` begins, or -1. In a long chunk a blank line is
        found as a newline followed by another: CPython finds one byte with memchr, where its search for
        two bytes took 45 times as long over a 75 KB event (a Responses lifecycle event echoes an agent's
        instructions and tools). Each newline is looked at once, so a chunk is still read once. In the
        usual chunk of a few hundred bytes the two-byte search is the cheaper one, and `feed` makes it
        without this call."""
        if len(chunk) - start < _SHORT_CHUNK or self._sep == b"\n":
            return chunk.find(self._sep, start)
        at = chunk.find(b"\n", start)
        while at >= 0 and not chunk.startswith(b"\n", at + 1):
            at = chunk.find(b"\n", at + 1)
        return at

    def _cap(self) -> int:
        return max_event_bytes if self._limit is None else self._limit

    def _check(self) -> None:
        limit = self._cap()
        if self._size > limit:
            self._parts.clear()
            self._size = 0
            raise event_too_large(limit)

    def _take(self) -> bytes:
        frame = self._parts[0] if len(self._parts) == 1 else b"".join(self._parts)
        self._parts.clear()
        self._size = 0
        return frame

    @property
    def pending(self) -> bytes:
        """Bytes of a frame not yet terminated (what a cut stream left behind)."""
        return b"".join(self._parts) + (b"\r" if self._cr else b"")


class SSEParser:
    """Splits a byte stream into events at blank lines; handles \\n and \\r\\n."""

    __slots__ = ("_framer",)

    def __init__(self, limit: int | None = None) -> None:
        self._framer = Framer(b"\n\n", limit)

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        events = []
        for raw in self._framer.feed(chunk):  # a plain loop: no comprehension frame per chunk
            event = parse_event(raw)
            if event is not None:
                events.append(event)
        return events

    def feed_raw(self, chunk: bytes) -> list[bytes]:
        """The complete events in the stream so far, as bytes; pass-through taps look at
        these without decoding them (the hot path of a relayed stream)."""
        return self._framer.feed(chunk)

    @property
    def pending(self) -> bytes:
        return self._framer.pending


def object_data(raw: bytes, head: bytes) -> tuple[dict[str, Any], bytes] | None:
    """(the JSON object, its bytes) of an event that is exactly `head` (its `event: ` line, if any, and
    `data: `) and one data line holding a JSON object; None for any other event, which parse_event reads.

    The bulk of a stream's events is read so, without an SSEEvent and its strings. Data that does not
    parse as bytes (e.g. invalid UTF-8, which SSE reads as U+FFFD) is left to parse_event too."""
    if not raw.startswith(head) or raw.find(b"\n", len(head)) != len(raw) - 2:
        return None
    data = raw[len(head):-2]
    try:
        parsed = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    return (parsed, data) if type(parsed) is dict else None


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
