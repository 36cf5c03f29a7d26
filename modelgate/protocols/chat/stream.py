"""IR stream events as chat.completion.chunk SSE frames."""

from __future__ import annotations

import time
import uuid
from typing import Any

import orjson

from modelgate.protocols import sse
from modelgate.protocols.chat.wire import DONE, FINISH_REASON, KEEPALIVE, completion_id, error_event, usage_to_openai
from modelgate.protocols.ir import (
    StreamEnd, StreamError, StreamEvent, StreamStart, TextDelta, ThinkingDelta, ToolCallDelta, ToolCallStart, Usage,
    UsageUpdate,
)


class ChatStreamEncoder:
    """IR stream events → chat.completion.chunk SSE frames."""

    __slots__ = ("model", "include_usage", "id", "created", "usage", "_head", "_text_head")

    def __init__(self, model: str, include_usage: bool) -> None:
        self.model = model
        self.include_usage = include_usage
        self.created = int(time.time())
        self.usage = Usage()
        self._set_id(f"chatcmpl-{uuid.uuid4().hex}")

    def _set_id(self, completion: str) -> None:
        self.id = completion
        # Every chunk starts with the same bytes: encoded once per stream, not once per chunk.
        head = orjson.dumps({"id": self.id, "object": "chat.completion.chunk", "created": self.created,
                             "model": self.model})
        self._head = b"data: " + head[:-1] + b',"choices":[{"index":0,"delta":'
        self._text_head = self._head + b'{"content":'

    def _chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        # The bytes of orjson.dumps({..., "choices": [{"index": 0, "delta": delta, "finish_reason": ...,
        # "logprobs": None}]}) framed as one SSE event.
        return (self._head + orjson.dumps(delta) + b',"finish_reason":' + orjson.dumps(finish_reason)
                + b',"logprobs":null}]}\n\n')

    def encode(self, event: StreamEvent) -> bytes:
        if isinstance(event, TextDelta):  # the bulk of a stream: self._chunk({"content": event.text}), in fewer steps
            return self._text_head + orjson.dumps(event.text) + b'},"finish_reason":null,"logprobs":null}]}\n\n'
        if isinstance(event, ToolCallDelta):
            return self._chunk({"tool_calls": [{"index": event.index, "function": {"arguments": event.arguments}}]})
        if isinstance(event, ToolCallStart):
            call = {"index": event.index, "id": event.id, "type": "function",
                    "function": {"name": event.name, "arguments": ""}}
            return self._chunk({"tool_calls": [call]})
        if isinstance(event, ThinkingDelta):
            # a signature or redacted block alone has nothing a chat client can show
            return self._chunk({"reasoning_content": event.text}) if event.text else b""
        if isinstance(event, StreamStart):
            self._set_id(completion_id(event.id))
            self.usage = self.usage.merged(event.usage)
            return self._chunk({"role": "assistant", "content": ""})
        if isinstance(event, UsageUpdate):
            self.usage = self.usage.merged(event.usage)
            return b""
        if isinstance(event, StreamEnd):
            self.usage = self.usage.merged(event.usage)
            out = self._chunk({}, FINISH_REASON.get(event.stop_reason, "stop"))
            if self.include_usage:
                usage_chunk = {
                    "id": self.id,
                    "object": "chat.completion.chunk",
                    "created": self.created,
                    "model": self.model,
                    "choices": [],
                    "usage": usage_to_openai(self.usage),
                }
                out += sse.encode(orjson.dumps(usage_chunk))
            return out + DONE
        if isinstance(event, StreamError):
            return error_event(event.error_type, event.message) + DONE
        return b""

    def keepalive(self) -> bytes:
        return KEEPALIVE

    def error_event(self, error_type: str, message: str) -> bytes:
        # The error frame, then the stream's own end, so clients waiting for [DONE] finish cleanly.
        return error_event(error_type, message) + DONE
