"""Responses API streams: IR events → the vendor's typed SSE events.

A converted stream is the vendor's sequence, each event numbered by `sequence_number`:

    response.created, response.in_progress,
    per output item: response.output_item.added,
        message:   content_part.added, output_text.delta..., output_text.done, content_part.done
        reasoning: content_part.added, reasoning_text.delta..., reasoning_text.done, content_part.done
        function_call: function_call_arguments.delta..., function_call_arguments.done
    response.output_item.done,
    response.completed (or response.incomplete for a length / content-filter stop) with usage,
    or response.failed when the upstream fails after the first byte.

The vendor streams one output item at a time: added, deltas, done, then the next, and clients rely on
it (pi reads every argument delta into the latest item, whatever `item_id` it names): items open in
arrival order, one at a time (protocols/block_order.py).
"""

from __future__ import annotations

from typing import Any

import orjson

from modelgate.protocols import sse
from modelgate.protocols.block_order import OneBlockAtATime, complete_json
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
    CALL_FORMS,
    REMEMBER,
    CallForms,
    ResponseSkeleton,
    error_object,
    final_status,
    call_item,
    message_item,
    new_id,
    reasoning_item,
    text_part,
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

    def done(self, forms: CallForms | None = None) -> dict[str, Any]:
        if self.kind == "message":
            return message_item(self.id, self.text)
        if self.kind == "reasoning":
            return reasoning_item(self.id, self.text, self.signature)
        return call_item(self.id, self.call_id, self.name, self.text or "{}", forms=forms)


class ResponsesStreamEncoder(OneBlockAtATime):
    def __init__(self, model: str, body: dict[str, Any]) -> None:
        super().__init__()
        self.skeleton = ResponseSkeleton(body, model)
        self.forms: CallForms = body.get(CALL_FORMS) or {}  # calls the client reads in another form
        self.remember = body.get(REMEMBER)  # where the output items go to be read back by reference
        self.usage = Usage()
        self.started = False
        self.finished = False
        self._seq = 0
        self._output: list[dict[str, Any] | None] = []  # finished items by output_index
        self._text: _Item | None = None  # the open message or reasoning item
        self._call: _Item | None = None  # the open function call
        self._call_index = -1  # its IR tool index

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
        if isinstance(event, (TextDelta, ThinkingDelta, ToolCallStart, ToolCallDelta)):
            self._route(event, out)
        elif isinstance(event, StreamEnd):
            self._drain(out, force=True)
            self._close_all(out)
            self.finished = True
            status = final_status(event.stop_reason)
            output = self._finished_output()
            if self.remember is not None:
                self.remember(output)
            response = self.skeleton.build(status, output, self.usage, event.stop_reason)
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

    def _place(self, event: StreamEvent, out: list[bytes], force: bool) -> None:
        if isinstance(event, ToolCallDelta):
            if event.index in self._closed_calls or not event.arguments:
                return  # the call's JSON was already complete: its item cannot reopen
            if self._call is not None and event.index == self._call_index:
                self._call_delta(self._call, event.arguments, out)
            else:
                self._queue.append(event)  # its call waits in the queue: it follows it
            return
        elif isinstance(event, (TextDelta, ThinkingDelta)):
            kind = "message" if isinstance(event, TextDelta) else "reasoning"
            if not (event.text or (isinstance(event, ThinkingDelta) and event.signature)):
                return
            if self._text is not None and self._text.kind == kind:
                self._text_delta(self._text, event, out)
                return
        if self._queue or not self._can_switch(force):
            self._queue.append(event)
            return
        self._close_all(out)
        if isinstance(event, ToolCallStart):
            self._call_start(event, out)
        elif isinstance(event, (TextDelta, ThinkingDelta)):
            self._text_delta(self._open_text("message" if isinstance(event, TextDelta) else "reasoning", out),
                             event, out)

    def _can_switch(self, force: bool) -> bool:
        return force or self._call is None or complete_json(self._call.chunks)

    def _open_text(self, kind: str, out: list[bytes]) -> _Item:
        item = self._text = self._open(kind)
        if kind == "message":
            added, part = message_item(item.id, None, "in_progress"), text_part("")
        else:
            added, part = reasoning_item(item.id, None), {"type": "reasoning_text", "text": ""}
        out.append(self._event("response.output_item.added", {"output_index": item.index, "item": added}))
        out.append(self._event("response.content_part.added", {
            "item_id": item.id, "output_index": item.index, "content_index": 0, "part": part}))
        return item

    def _text_delta(self, item: _Item, event: TextDelta | ThinkingDelta, out: list[bytes]) -> None:
        if isinstance(event, ThinkingDelta) and event.signature:
            item.signature = event.signature
        if event.text:
            item.chunks.append(event.text)
            delta = "response.output_text.delta" if item.kind == "message" else "response.reasoning_text.delta"
            payload: dict[str, Any] = {"item_id": item.id, "output_index": item.index, "content_index": 0,
                                       "delta": event.text}
            if item.kind == "message":
                payload["logprobs"] = []
            out.append(self._event(delta, payload))

    def _call_start(self, event: ToolCallStart, out: list[bytes]) -> None:
        call = self._call = self._open("function_call", event.id, event.name)
        self._call_index = event.index
        added = call_item(call.id, call.call_id, call.name, "", "in_progress", self.forms)
        out.append(self._event("response.output_item.added", {"output_index": call.index, "item": added}))

    def _call_delta(self, call: _Item, arguments: str, out: list[bytes]) -> None:
        call.chunks.append(arguments)
        if not self._custom(call):  # a custom tool's raw input is known once its arguments are whole
            out.append(self._event("response.function_call_arguments.delta", {
                "item_id": call.id, "output_index": call.index, "delta": arguments}))

    def _custom(self, call: _Item) -> bool:
        form = self.forms.get(call.name)
        return form is not None and form[2]

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
        """Close the open item, whichever it is."""
        self._close_text(out)
        call = self._call
        if call is None:
            return
        self._call = None
        self._closed_calls.add(self._call_index)
        if self._custom(call):
            done = call.done(self.forms)
            for kind, field in (("delta", "delta"), ("done", "input")):
                out.append(self._event(f"response.custom_tool_call_input.{kind}", {
                    "item_id": call.id, "output_index": call.index, field: done["input"]}))
            self._finish_item(call, done, out)
            return
        if not call.chunks:
            # A call without arguments (`""` from some upstreams) is a call with `{}`.
            call.chunks.append("{}")
            out.append(self._event("response.function_call_arguments.delta", {
                "item_id": call.id, "output_index": call.index, "delta": "{}"}))
        out.append(self._event("response.function_call_arguments.done", {
            "item_id": call.id, "output_index": call.index, "arguments": call.text}))
        self._finish_item(call, call.done(self.forms), out)

    def _finish_item(self, item: _Item, done: dict[str, Any], out: list[bytes]) -> None:
        self._output[item.index] = done
        out.append(self._event("response.output_item.done", {"output_index": item.index, "item": done}))
