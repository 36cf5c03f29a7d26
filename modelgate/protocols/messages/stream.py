"""Encoding IR stream events as the messages protocol's SSE event sequence."""

from __future__ import annotations

from typing import Any

import orjson

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
from modelgate.protocols.messages.encode import PING, message_id, stream_error
from modelgate.protocols.messages.wire import STOP_TO_VENDOR, sse_frame, usage_to_vendor


_TEXT_BLOCK = ("text", -1)


class MessagesStreamEncoder(OneBlockAtATime):
    """IR stream events -> the vendor's SSE event sequence, on the fly: one content block at a time
    (start, deltas, stop, with indexes counting up from 0; protocols/block_order.py)."""

    def __init__(self, model: str) -> None:
        super().__init__()
        self.model = model
        self.started = False
        self.done = False
        self.usage = Usage()
        self._next_index = 0
        self._open: tuple[str, int] | None = None  # ("text"|"thinking", -1) or ("tool", ir index)
        self._open_index = -1
        self._args: list[str] = []  # arguments text of the open tool block
        self._text_head = b""  # the encoded start of a text delta of the open block

    # StreamEncoder protocol
    def keepalive(self) -> bytes:
        return PING

    def error_event(self, error_type: str, message: str) -> bytes:
        self.done = True
        return stream_error(error_type, message)

    def encode(self, event: StreamEvent) -> bytes:
        if type(event) is TextDelta and self._open == _TEXT_BLOCK and not self._queue and not self.done:
            # The bulk of a stream: more text for the open text block, framed from its encoded head.
            return self._text_head + orjson.dumps(event.text) + b"}}\n\n" if event.text else b""
        if self.done:
            return b""
        out: list[bytes] = []
        if isinstance(event, StreamStart):
            self.usage = self.usage.merged(event.usage)
            self._start(out, event.id)
        elif isinstance(event, (TextDelta, ThinkingDelta, ToolCallStart, ToolCallDelta)):
            self._start(out, None)
            self._route(event, out)
        elif isinstance(event, UsageUpdate):
            self.usage = self.usage.merged(event.usage)
        elif isinstance(event, StreamEnd):
            self._start(out, None)
            self._drain(out, force=True)
            self._close(out)
            self.usage = self.usage.merged(event.usage)
            self._finish(out, event)
        elif isinstance(event, StreamError):
            out.append(self.error_event(event.error_type, event.message))
        return b"".join(out)

    def _start(self, out: list[bytes], upstream_id: str | None) -> None:
        if self.started:
            return
        self.started = True
        message: dict[str, Any] = {
            "id": message_id(upstream_id),
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage_to_vendor(self.usage),
        }
        out.append(sse_frame("message_start", {"type": "message_start", "message": message}))

    def _finish(self, out: list[bytes], end: StreamEnd) -> None:
        self.done = True
        delta = {"stop_reason": STOP_TO_VENDOR.get(end.stop_reason, "end_turn"), "stop_sequence": end.stop_sequence}
        # Cumulative counts: chat upstreams only know the input count at the end.
        usage = usage_to_vendor(self.usage)
        out.append(sse_frame("message_delta", {"type": "message_delta", "delta": delta, "usage": usage}))
        out.append(sse_frame("message_stop", {"type": "message_stop"}))

    @staticmethod
    def _target(event: StreamEvent) -> tuple[str, int]:
        if isinstance(event, TextDelta):
            return _TEXT_BLOCK
        if isinstance(event, ThinkingDelta):
            return ("redacted" if event.redacted is not None else "thinking", -1)
        return ("tool", event.index)  # type: ignore[union-attr]

    def _can_switch(self, force: bool) -> bool:
        return force or self._open is None or self._open[0] != "tool" or complete_json(self._args)

    def _place(self, event: StreamEvent, out: list[bytes], force: bool) -> None:
        target = self._target(event)
        if isinstance(event, ToolCallDelta) and event.index in self._closed_calls:
            return  # the call's JSON was already complete; a vendor block cannot reopen
        # A tool call and a redacted block each open a block of their own.
        if target == self._open and not (isinstance(event, ToolCallStart) or target[0] == "redacted"):
            self._delta(event, out)
        elif not self._queue and self._can_switch(force):
            self._close(out)
            self._open_block(event, out)
        else:
            self._queue.append(event)

    def _open_block(self, event: StreamEvent, out: list[bytes]) -> None:
        index = self._next_index
        self._next_index += 1
        self._open_index = index
        self._open = self._target(event)
        if isinstance(event, ToolCallStart):
            block: dict[str, Any] = {"type": "tool_use", "id": event.id, "name": event.name, "input": {}}
            self._args = []
        elif isinstance(event, ThinkingDelta) and event.redacted is not None:
            block = {"type": "redacted_thinking", "data": event.redacted}  # whole at its start, as the vendor sends it
        elif isinstance(event, ThinkingDelta):
            block = {"type": "thinking", "thinking": "", "signature": ""}
        else:
            block = {"type": "text", "text": ""}
        out.append(sse_frame("content_block_start", {"type": "content_block_start", "index": index, "content_block": block}))
        # sse_frame("content_block_delta", {..., "delta": {"type": "text_delta", "text": <text>}}) up to the text
        self._text_head = (b'event: content_block_delta\ndata: {"type":"content_block_delta","index":%d,'
                           b'"delta":{"type":"text_delta","text":' % index)
        if not isinstance(event, ToolCallStart) and block["type"] != "redacted_thinking":
            self._delta(event, out)

    def _delta(self, event: StreamEvent, out: list[bytes]) -> None:
        if isinstance(event, TextDelta):
            if not event.text:
                return
            delta: dict[str, Any] = {"type": "text_delta", "text": event.text}
        elif isinstance(event, ThinkingDelta):
            if event.text:
                self._frame_delta({"type": "thinking_delta", "thinking": event.text}, out)
            if event.signature:
                self._frame_delta({"type": "signature_delta", "signature": event.signature}, out)
            return
        elif isinstance(event, ToolCallDelta):
            if not event.arguments:
                return
            self._args.append(event.arguments)
            delta = {"type": "input_json_delta", "partial_json": event.arguments}
        else:
            return
        self._frame_delta(delta, out)

    def _frame_delta(self, delta: dict[str, Any], out: list[bytes]) -> None:
        out.append(
            sse_frame("content_block_delta", {"type": "content_block_delta", "index": self._open_index, "delta": delta})
        )

    def _close(self, out: list[bytes]) -> None:
        if self._open is None:
            return
        if self._open[0] == "tool":
            self._closed_calls.add(self._open[1])
        out.append(sse_frame("content_block_stop", {"type": "content_block_stop", "index": self._open_index}))
        self._open = None
