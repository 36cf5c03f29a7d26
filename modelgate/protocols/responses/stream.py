"""Responses API streams: IR events → the vendor's typed SSE events, and the pass-through tap.

A converted stream is the vendor's sequence, each event numbered by `sequence_number`:

    response.created, response.in_progress,
    per output item: response.output_item.added,
        message:   content_part.added, output_text.delta..., output_text.done, content_part.done
        reasoning: content_part.added, reasoning_text.delta..., reasoning_text.done, content_part.done
        function_call: function_call_arguments.delta..., function_call_arguments.done
    response.output_item.done,
    response.completed (or response.incomplete for a length / content-filter stop) with usage,
    or response.failed when the upstream fails after the first byte.

Events are written as the IR events arrive; nothing waits for the end of the stream. Every
event names its item (`output_index`, `item_id`), so calls whose argument fragments an
upstream interleaves stay open side by side; a message or reasoning item closes as soon as
anything else arrives.
"""

from __future__ import annotations

from typing import Any

import orjson

from modelgate.protocols import sse
from modelgate.protocols.ir import (
    StreamEnd,
    StreamError,
    StreamEvent,
    StreamStart,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallStart,
    Usage,
    UsageUpdate,
)
from modelgate.protocols.responses.encode import (
    ResponseSkeleton,
    error_object,
    final_status,
    function_call_item,
    message_item,
    new_id,
    reasoning_item,
    text_part,
    usage_from_vendor,
)

KEEPALIVE = b": keep-alive\n\n"


class _Item:
    """One output item being streamed."""

    __slots__ = ("kind", "index", "id", "chunks", "call_id", "name", "signature")

    def __init__(self, kind: str, index: int, item_id: str, call_id: str = "", name: str = "") -> None:
        self.kind = kind  # message | reasoning | function_call
        self.index = index
        self.id = item_id
        self.chunks: list[str] = []
        self.call_id = call_id
        self.name = name
        self.signature: str | None = None

    @property
    def text(self) -> str:
        return "".join(self.chunks)

    def done(self) -> dict[str, Any]:
        if self.kind == "message":
            return message_item(self.id, self.text)
        if self.kind == "reasoning":
            return reasoning_item(self.id, self.text, self.signature)
        return function_call_item(self.id, self.call_id, self.name, self.text or "{}")


class ResponsesStreamEncoder:
    def __init__(self, model: str, body: dict[str, Any]) -> None:
        self.skeleton = ResponseSkeleton(body, model)
        self.usage = Usage()
        self.started = False
        self.finished = False
        self._seq = 0
        self._output: list[dict[str, Any] | None] = []  # finished items by output_index
        self._text: _Item | None = None  # the open message or reasoning item
        self._calls: dict[int, _Item] = {}  # open function calls by IR tool index
        self._seen_calls: set[int] = set()

    def keepalive(self) -> bytes:
        return KEEPALIVE

    def _event(self, kind: str, payload: dict[str, Any]) -> bytes:
        data = {"type": kind, **payload, "sequence_number": self._seq}
        self._seq += 1
        return sse.encode(orjson.dumps(data), kind)

    def encode(self, event: StreamEvent) -> bytes:
        if self.finished:
            return b""
        out: list[bytes] = []
        if isinstance(event, (StreamStart, UsageUpdate, StreamEnd)):
            self.usage = self.usage.merged(event.usage)
        if not isinstance(event, UsageUpdate):
            self._start(out)
        if isinstance(event, TextDelta):
            if event.text:
                self._text_delta("message", event.text, None, out)
        elif isinstance(event, ThinkingDelta):
            if event.text or event.signature:
                self._text_delta("reasoning", event.text, event.signature, out)
        elif isinstance(event, ToolCallStart):
            self._call_start(event, out)
        elif isinstance(event, ToolCallDelta):
            call = self._calls.get(event.index)
            if call is not None and event.arguments:
                call.chunks.append(event.arguments)
                out.append(self._event("response.function_call_arguments.delta", {
                    "item_id": call.id, "output_index": call.index, "delta": event.arguments}))
        elif isinstance(event, StreamEnd):
            self._close_all(out)
            self.finished = True
            status = final_status(event.stop_reason)
            response = self.skeleton.build(status, self._finished_output(), self.usage, event.stop_reason)
            out.append(self._event(f"response.{status}", {"response": response}))
        elif isinstance(event, StreamError):
            out.append(self.error_event(event.error_type, event.message))
        return b"".join(out)

    def error_event(self, error_type: str, message: str) -> bytes:
        """`response.failed` with the items finished so far: the end of a stream that broke."""
        if self.finished:
            return b""
        out: list[bytes] = []
        self._start(out)
        self.finished = True
        response = self.skeleton.build("failed", self._finished_output(), self.usage,
                                       error=error_object(error_type, message))
        out.append(self._event("response.failed", {"response": response}))
        return b"".join(out)

    def _start(self, out: list[bytes]) -> None:
        if self.started:
            return
        self.started = True
        response = self.skeleton.build("in_progress", [])
        out.append(self._event("response.created", {"response": response}))
        out.append(self._event("response.in_progress", {"response": response}))

    def _finished_output(self) -> list[dict[str, Any]]:
        return [item for item in self._output if item is not None]

    def _open(self, kind: str, call_id: str = "", name: str = "") -> _Item:
        prefix = {"message": "msg", "reasoning": "rs", "function_call": "fc"}[kind]
        item = _Item(kind, len(self._output), new_id(prefix), call_id, name)
        self._output.append(None)
        return item

    def _text_delta(self, kind: str, text: str, signature: str | None, out: list[bytes]) -> None:
        item = self._text
        if item is None or item.kind != kind:
            self._close_all(out)
            item = self._text = self._open(kind)
            if kind == "message":
                added, part = message_item(item.id, None, "in_progress"), text_part("")
            else:
                added, part = reasoning_item(item.id, None), {"type": "reasoning_text", "text": ""}
            out.append(self._event("response.output_item.added", {"output_index": item.index, "item": added}))
            out.append(self._event("response.content_part.added", {
                "item_id": item.id, "output_index": item.index, "content_index": 0, "part": part}))
        if signature:
            item.signature = signature
        if text:
            item.chunks.append(text)
            delta = "response.output_text.delta" if kind == "message" else "response.reasoning_text.delta"
            payload: dict[str, Any] = {"item_id": item.id, "output_index": item.index, "content_index": 0,
                                       "delta": text}
            if kind == "message":
                payload["logprobs"] = []
            out.append(self._event(delta, payload))

    def _call_start(self, event: ToolCallStart, out: list[bytes]) -> None:
        if event.index in self._seen_calls:
            return  # a repeated header chunk of a call already open
        self._seen_calls.add(event.index)
        self._close_text(out)
        call = self._calls[event.index] = self._open("function_call", event.id, event.name)
        added = function_call_item(call.id, call.call_id, call.name, "", "in_progress")
        out.append(self._event("response.output_item.added", {"output_index": call.index, "item": added}))

    def _close_text(self, out: list[bytes]) -> None:
        item = self._text
        if item is None:
            return
        self._text = None
        text = item.text
        done = item.done()
        if item.kind == "message":
            out.append(self._event("response.output_text.done", {
                "item_id": item.id, "output_index": item.index, "content_index": 0, "text": text, "logprobs": []}))
            part = text_part(text)
        else:
            out.append(self._event("response.reasoning_text.done", {
                "item_id": item.id, "output_index": item.index, "content_index": 0, "text": text}))
            part = {"type": "reasoning_text", "text": text}
        out.append(self._event("response.content_part.done", {
            "item_id": item.id, "output_index": item.index, "content_index": 0, "part": part}))
        self._finish_item(item, done, out)

    def _close_all(self, out: list[bytes]) -> None:
        self._close_text(out)
        for call in sorted(self._calls.values(), key=lambda c: c.index):
            if not call.chunks:
                # A call without arguments (`""` from some upstreams) is a call with `{}`.
                call.chunks.append("{}")
                out.append(self._event("response.function_call_arguments.delta", {
                    "item_id": call.id, "output_index": call.index, "delta": "{}"}))
            out.append(self._event("response.function_call_arguments.done", {
                "item_id": call.id, "output_index": call.index, "arguments": call.text}))
            self._finish_item(call, call.done(), out)
        self._calls.clear()

    def _finish_item(self, item: _Item, done: dict[str, Any], out: list[bytes]) -> None:
        self._output[item.index] = done
        out.append(self._event("response.output_item.done", {"output_index": item.index, "item": done}))


# --- pass-through of a native upstream ------------------------------------------

# Events that carry the whole response object (its `model` and, at the end, its usage).
_LIFECYCLE = (b"response.created", b"response.in_progress", b"response.queued", b"response.completed",
              b"response.incomplete", b"response.failed")
_TERMINAL = frozenset({"response.completed", "response.incomplete", "response.failed"})


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
            at = raw.find(b'"sequence_number":')
            if at >= 0:
                digits = raw[at + 18:at + 40].lstrip().split(b",")[0].split(b"}")[0].strip()
                if digits.isdigit():
                    self._next_seq = int(digits) + 1
            head = raw[:80]
            if any(name in head for name in _LIFECYCLE):
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
        event, payload = self._payload(raw)
        response = payload.get("response") if isinstance(payload, dict) else None
        if not isinstance(response, dict):
            return raw
        if payload.get("type") in _TERMINAL:
            self.finished = True
            if isinstance(response.get("usage"), dict):
                self.usage = usage_from_vendor(response["usage"])
            if payload["type"] == "response.failed":
                error = response.get("error")
                self._failed(error if isinstance(error, dict) else {})
        if response.get("model") == self.model:
            return raw
        response["model"] = self.model
        return sse.encode(orjson.dumps(payload), event.event)  # type: ignore[union-attr]

    def error_event(self, error_type: str, message: str) -> bytes:
        """The vendor's stream-level `error` event, numbered after the upstream's last event."""
        error = error_object(error_type, message)
        data = {"type": "error", "code": error["code"], "message": message, "param": None,
                "sequence_number": self._next_seq}
        self._next_seq += 1
        return sse.encode(orjson.dumps(data), "error")
