"""Responses API streams relayed from a Responses upstream (pass-through)."""

from __future__ import annotations

import re
from typing import Any

import msgspec
import orjson

from modelgate.protocols import sse, typed_view
from modelgate.protocols.ir import Usage
from modelgate.protocols.model_name import model_field, set_model
from modelgate.protocols.responses.encode import error_object, usage_from_vendor

# Events that carry the whole response object (its `model` and, at the end, its usage), by the name in an
# event's head: one regular-expression search, where a search for each name cost 1.3 µs an event.
_LIFECYCLE = re.compile(rb"response\.(?:created|in_progress|queued|completed|incomplete|failed)\b").search
_TERMINAL = frozenset({"response.completed", "response.incomplete", "response.failed"})
_NULL = msgspec.Raw(b"null")


class _ResponseHead(msgspec.Struct, gc=False):
    """What the tap reads of a lifecycle event's response object: the rest (the request's instructions
    and tools, echoed in every lifecycle event: 75 KB of an agent's) is checked, not built as objects."""

    model: msgspec.Raw = _NULL
    usage: msgspec.Raw = _NULL
    error: msgspec.Raw = _NULL


class _LifecycleEvent(msgspec.Struct, gc=False):
    type: str | None = None
    response: _ResponseHead | None = None


_read_lifecycle = msgspec.json.Decoder(_LifecycleEvent).decode


class ResponsesStreamTap:
    """Relays a Responses upstream's stream, reading its usage from the terminal event.

    Content events, the bulk of a stream, are forwarded as they are, looked at only for their
    `sequence_number` (so an error event the gateway adds after a cut continues the numbering).
    The few events that carry the response object are decoded to read usage and to answer
    with the model id the client asked for, never the upstream's name. Bytes are forwarded as
    soon as the events they hold are complete. An event whose data is not a JSON object is an
    unreadable answer; the upstream's `error` event and `response.failed` are its failures,
    reported like any other (`error` holds them in the OpenAI error-body form, for the classifier).
    """

    # The NativeStreamTap attributes the relay reads (stop reason, progress): a Responses stream
    # ends with its terminal event (or `error`), so there is no end marker to add.
    stopped = False
    end_marker = b""
    after_error = b""

    def __init__(self, model: str) -> None:
        self.model = model
        self._model_field = model_field(model)
        self.usage: Usage | None = None
        self.finished = False
        self.error: bytes | None = None
        self.events = 0  # events seen (keep-alive comments are no progress for the stall limit)
        self._parser = sse.SSEParser()
        self._next_seq = 0

    def filter(self, chunk: bytes) -> bytes:
        raws = self._parser.feed_raw(chunk)
        for i, raw in enumerate(raws):
            if raw.startswith(b":"):
                continue  # a comment (keep-alive)
            if b"data: {" not in raw and b"data:{" not in raw:
                raise sse.unreadable_event()
            self.events += 1
            # The service writes it last, after a lifecycle event's whole response object (75 KB of an agent's).
            at = raw.rfind(b'"sequence_number":')
            if at >= 0:
                digits = raw[at + 18:at + 40].lstrip().split(b",")[0].split(b"}")[0].strip()
                if digits.isdigit():
                    self._next_seq = int(digits) + 1
            head = raw[:80]
            if _LIFECYCLE(head):
                raws[i] = self._lifecycle(raw)
            elif head.startswith(b"event: error") or b'"type":"error"' in head or b'"type": "error"' in head:
                self._read_error(raw)
        return b"".join(raws)

    @staticmethod
    def _payload(raw: bytes) -> tuple[sse.SSEEvent | None, Any]:
        event = sse.parse_event(raw)
        try:
            return event, orjson.loads(event.data) if event is not None else None
        except orjson.JSONDecodeError:
            raise sse.unreadable_event() from None

    def _read_error(self, raw: bytes) -> None:
        _, payload = self._payload(raw)
        if isinstance(payload, dict) and payload.get("type") == "error":
            # The SDK's typed form has `code` and `message` at the top; the service nests them in `error`.
            nested = payload.get("error")
            self._failed(nested if isinstance(nested, dict) else payload)

    def _failed(self, error: dict[str, Any]) -> None:
        message = error.get("message")
        self.error = orjson.dumps({"error": {
            "message": message if isinstance(message, str) else "The upstream's response failed",
            "type": error.get("type") if isinstance(error.get("type"), str) else None,
            "code": error.get("code") if isinstance(error.get("code"), str) else None}})

    def _lifecycle(self, raw: bytes) -> bytes:
        event = sse.parse_event(raw)
        if event is None:
            return raw
        try:
            head = _read_lifecycle(event.data)
            if head.response is None:
                return raw
            model = typed_view.value(head.response.model)
            usage = typed_view.value(head.response.usage)
            error = typed_view.value(head.response.error)
        except msgspec.ValidationError:  # a value of another type than the service's: read whole
            return self._lifecycle_whole(raw, event)
        except (msgspec.DecodeError, RecursionError, orjson.JSONDecodeError):
            raise sse.unreadable_event() from None
        self._read(head.type, usage, error)
        if model == self.model:
            return raw
        if isinstance(model, str):
            return set_model(raw, self._model_field, 1)  # the response's, the event's first `model` key
        return self._lifecycle_whole(raw, event)

    def _lifecycle_whole(self, raw: bytes, event: sse.SSEEvent) -> bytes:
        try:
            payload = orjson.loads(event.data)
        except orjson.JSONDecodeError:
            raise sse.unreadable_event() from None
        response = payload.get("response") if isinstance(payload, dict) else None
        if not isinstance(response, dict):
            return raw
        self._read(payload.get("type"), response.get("usage"), response.get("error"))
        if response.get("model") == self.model:
            return raw
        response["model"] = self.model
        return sse.encode(orjson.dumps(payload), event.event)

    def _read(self, kind: Any, usage: Any, error: Any) -> None:
        if isinstance(kind, str) and kind in _TERMINAL:
            self.finished = True
            if isinstance(usage, dict):
                self.usage = usage_from_vendor(usage)
            if kind == "response.failed":
                self._failed(error if isinstance(error, dict) else {})

    def error_event(self, error_type: str, message: str) -> bytes:
        """The vendor's stream-level `error` event, numbered after the upstream's last event."""
        error = error_object(error_type, message)
        data = {"type": "error", "code": error["code"], "message": message, "param": None,
                "sequence_number": self._next_seq}
        self._next_seq += 1
        return sse.encode(orjson.dumps(data), "error")
