"""An IR answer as a chat.completion object."""

from __future__ import annotations

import time
from typing import Any

import orjson

from modelgate.protocols.chat.wire import FINISH_REASON, completion_id, usage_to_openai
from modelgate.protocols.ir import ChatResponse, TextPart, ThinkingPart, ToolCall


def encode_response(resp: ChatResponse, model: str) -> bytes:
    text = "".join(p.text for p in resp.parts if isinstance(p, TextPart))
    reasoning = "".join(p.text for p in resp.parts if isinstance(p, ThinkingPart))
    calls = [p for p in resp.parts if isinstance(p, ToolCall)]
    message: dict[str, Any] = {"role": "assistant", "content": text if (text or not calls) else None}
    if reasoning:
        message["reasoning_content"] = reasoning
    if calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in calls
        ]
    return orjson.dumps(
        {
            "id": completion_id(resp.id),
            "object": "chat.completion",
            "created": resp.created or int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": FINISH_REASON.get(resp.stop_reason, "stop"),
                    "logprobs": None,
                }
            ],
            "usage": usage_to_openai(resp.usage),
        }
    )
