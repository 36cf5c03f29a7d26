"""A chat stream relayed as it came (pass-through): its usage read, the usage chunk the gateway
asked for hidden, the model named as the client asked."""

from __future__ import annotations

import orjson

from modelgate.protocols import sse
from modelgate.protocols.chat.wire import DONE, chunk_usage, error_event
from modelgate.protocols.ir import Usage
from modelgate.protocols.model_name import model_field, set_model


class ChatStreamTap:
    """Reads usage from a pass-through chat stream and hides the usage chunk the gateway asked for.

    Bytes are forwarded as soon as the events they hold are complete; only an
    event split across socket reads waits for its remaining bytes (the SSE
    framer: linear, bounded). Only the events holding a usage or an error
    object are decoded; an event whose data is not a JSON object (or [DONE])
    is an unreadable answer. The content of the JSON is forwarded unchecked, but
    for the model, spliced to the client's id (`model`, if given).
    """

    __slots__ = ("client_wants_usage", "usage", "finished", "stopped", "error", "events", "_framer", "_model_field")

    end_marker = DONE  # added when the upstream closes after its finish_reason but without [DONE]
    after_error = DONE  # follows an upstream error event, so the stream still ends cleanly

    def __init__(self, client_wants_usage: bool, model: str | None = None) -> None:
        self.client_wants_usage = client_wants_usage
        self.usage: Usage | None = None
        self.finished = False
        self.stopped = False  # saw a finish_reason
        self.error: bytes | None = None  # the data of an upstream error event, once one came
        self.events = 0  # data events seen (keep-alive comments are no progress)
        self._framer = sse.Framer(b"\n\n")
        self._model_field = model_field(model) if model is not None else None

    def filter(self, chunk: bytes) -> bytes:
        events = self._framer.feed(chunk)
        if not events:
            return b""
        for raw in events:
            if raw.startswith(b":"):
                continue  # a comment (keep-alive): no progress
            if b"data: {" not in raw and b"data:{" not in raw and b"[DONE]" not in raw:
                raise sse.unreadable_event()
            self.events += 1
        out = events[0] if len(events) == 1 else b"".join(events)
        if not self.stopped and (b'"finish_reason":"' in out or b'"finish_reason": "' in out):
            self.stopped = True
        marked = _first_mark(out)
        if marked < 0:
            return self._named(out)  # the bulk of a stream: content deltas
        kept = []
        end = 0
        for raw in events:
            end += len(raw)
            if end > marked:  # the events before the first mark are content
                if b"data: [DONE]" in raw or b"data:[DONE]" in raw:
                    self.finished = True
                elif b'"error"' in raw and self._read_error(raw):
                    pass  # forwarded: the client sees the upstream's error
                elif _holds_usage(raw) and self._read_usage(raw):
                    continue  # the usage-only chunk the client did not ask for
            kept.append(raw)
        return self._named(b"".join(kept))

    def _named(self, out: bytes) -> bytes:
        return set_model(out, self._model_field) if self._model_field is not None else out

    def _read_error(self, raw: bytes) -> bool:
        event = sse.parse_event(raw)
        try:
            parsed = orjson.loads(event.data) if event is not None else None
        except orjson.JSONDecodeError:
            return False
        if isinstance(parsed, dict) and parsed.get("error"):
            self.error = event.data.encode()  # type: ignore[union-attr]
            return True
        return False

    def error_event(self, error_type: str, message: str) -> bytes:
        # The error frame, then the stream's own end, so clients waiting for [DONE] finish cleanly.
        return error_event(error_type, message) + DONE

    def _read_usage(self, raw: bytes) -> bool:
        """Records the event's usage; True when the event must be hidden from the client."""
        event = sse.parse_event(raw)
        try:
            parsed = orjson.loads(event.data) if event is not None else None
        except orjson.JSONDecodeError:
            return False
        if not isinstance(parsed, dict):
            return False
        usage = chunk_usage(parsed)
        if usage is None:
            return False
        self.usage = usage
        return not self.client_wants_usage and not parsed.get("choices")


_USAGE_OBJECT = (b'"usage":{', b'"usage": {')


def _holds_usage(data: bytes) -> bool:
    """Whether `data` may hold a usage object (`_read_usage` decides)."""
    return any(mark in data for mark in _USAGE_OBJECT)


# What makes a chat stream's event more than content: its end, an error, a usage object. With usage
# asked for, OpenAI sends `"usage":null` in every chunk (API reference, ChatCompletionStreamOptions):
# no mark, so such chunks keep the fast path.
_MARKS = (b"[DONE]", b'"error"', *_USAGE_OBJECT)


def _first_mark(data: bytes) -> int:
    """The offset of the first mark in `data`, or -1."""
    found = [i for i in map(data.find, _MARKS) if i >= 0]
    return min(found) if found else -1
