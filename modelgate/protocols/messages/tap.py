"""Relaying a native messages stream: usage read, the client's model id spliced, nothing else changed."""

from __future__ import annotations

from typing import Any

import orjson

from modelgate.protocols import sse
from modelgate.protocols.ir import Usage
from modelgate.protocols.messages.encode import stream_error
from modelgate.protocols.messages.wire import sse_frame, usage_from_vendor
from modelgate.protocols.model_name import model_field, set_model


class MessagesStreamTap:
    """Reads usage from a native vendor stream without changing its events.

    Only `message_start`, `message_delta` and `message_stop` frames are parsed;
    the bulk of the stream (content deltas) is skipped by event name. The model
    name appears once, in `message_start`, the stream's first frame: that frame is
    held until complete and its `model` spliced to the client's id; every later
    byte is forwarded as it came.
    """

    _WATCHED = frozenset({"message_start", "message_delta", "message_stop", "error"})

    end_marker = sse_frame("message_stop", {"type": "message_stop"})  # after a stop_reason, if missing
    after_error = b""  # an `error` event is itself the end of a messages stream

    def __init__(self, model: str | None = None) -> None:
        self.usage: Usage | None = None
        self.finished = False
        self.stopped = False  # saw a message_delta with a stop_reason
        self.error: bytes | None = None  # the data of an upstream `error` event, once one came
        self.events = 0  # events seen, pings and comments aside (those are no progress)
        self._parser = sse.SSEParser()
        self._raw: dict[str, Any] = {}  # vendor usage fields, cumulative
        self._model_field = model_field(model) if model is not None else None

    def filter(self, chunk: bytes) -> bytes:
        raws = self._parser.feed_raw(chunk)
        for i, raw in enumerate(raws):
            if raw.startswith(b":"):
                # A proxy's comment: not a messages keep-alive; the relay sends `ping` events instead.
                raws[i] = b""
                continue
            if raw.startswith(b"event: ping"):
                continue  # keep-alives: no progress
            if b"data: {" not in raw and b"data:{" not in raw:
                raise sse.unreadable_event()
            self.events += 1
            if self._model_field is not None and b"message_start" in raw:
                raws[i] = set_model(raw, self._model_field, 1)  # the client's model id
                self._model_field = None
            # Content deltas, the bulk of a stream, are skipped without decoding.
            if b"message_" not in raw and b"error" not in raw:
                continue
            frame = sse.parse_event(raw)
            if frame is None or frame.event not in self._WATCHED:
                continue
            event = frame.event
            if event == "message_stop":
                self.finished = True
                continue
            if event == "error":
                self.error = frame.data.encode()
                continue
            try:
                payload = orjson.loads(frame.data)
            except orjson.JSONDecodeError:
                continue
            if not isinstance(payload, dict):
                continue
            if event == "message_start":
                message = payload.get("message")
                usage = message.get("usage") if isinstance(message, dict) else None
            else:
                usage = payload.get("usage")
                delta = payload.get("delta")
                if isinstance(delta, dict) and delta.get("stop_reason"):
                    self.stopped = True
            if isinstance(usage, dict):
                # message_delta counts are cumulative and may omit fields message_start gave.
                self._raw.update({k: v for k, v in usage.items() if v is not None})
                self.usage = usage_from_vendor(self._raw)
        # Whole events only: what reached the client is always a readable stream, and a stream
        # that fails inside its first event can still be failed over.
        return raws[0] if len(raws) == 1 else b"".join(raws)

    def error_event(self, error_type: str, message: str) -> bytes:
        return stream_error(error_type, message)
