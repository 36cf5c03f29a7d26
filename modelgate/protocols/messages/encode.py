"""Encoding IR answers as messages bodies, and the protocol's error events."""

from __future__ import annotations

import uuid
from typing import Any

import orjson

from modelgate.errors import ErrorType
from modelgate.protocols.ir import (
    ChatResponse,
    TextPart,
    ThinkingPart,
    ToolCall,
)
from modelgate.protocols.messages.wire import STOP_TO_VENDOR, sse_frame, usage_to_vendor

# spec 7.5 error type -> the vendor error type a client SDK understands.
_VENDOR_ERROR_TYPE = {
    ErrorType.RATE_LIMIT_ERROR.value: "rate_limit_error",
    ErrorType.SERVICE_UNAVAILABLE.value: "overloaded_error",
    ErrorType.TIMEOUT_ERROR.value: "timeout_error",
    ErrorType.AUTHENTICATION_ERROR.value: "authentication_error",
    ErrorType.QUOTA_EXCEEDED.value: "billing_error",
    ErrorType.INVALID_REQUEST.value: "invalid_request_error",
    ErrorType.MODEL_NOT_FOUND.value: "not_found_error",
}


def message_id(upstream_id: str | None) -> str:
    if upstream_id and upstream_id.startswith("msg_"):
        return upstream_id
    return "msg_" + (upstream_id or uuid.uuid4().hex)


def tool_input(arguments: str) -> dict[str, Any]:
    """The `input` object of a tool_use block from IR JSON arguments text.

    The vendor's `input` is always an object; arguments that are empty or not a
    JSON object (a model's malformed output) become {}.
    """
    try:
        value = orjson.loads(arguments) if arguments else {}
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def encode_response(resp: ChatResponse, model: str) -> bytes:
    content: list[dict[str, Any]] = []
    for part in resp.parts:
        if isinstance(part, TextPart):
            if part.text:
                content.append({"type": "text", "text": part.text})
        elif isinstance(part, ThinkingPart):
            if part.redacted is not None:
                content.append({"type": "redacted_thinking", "data": part.redacted})
            else:
                content.append({"type": "thinking", "thinking": part.text, "signature": part.signature or ""})
        elif isinstance(part, ToolCall):
            content.append({"type": "tool_use", "id": part.id, "name": part.name, "input": tool_input(part.arguments)})
    body = {
        "id": message_id(resp.id),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": STOP_TO_VENDOR.get(resp.stop_reason, "end_turn"),
        "stop_sequence": resp.stop_sequence,
        "usage": usage_to_vendor(resp.usage),
    }
    return orjson.dumps(body)


def vendor_error_type(error_type: str) -> str:
    return _VENDOR_ERROR_TYPE.get(error_type, "api_error")


def stream_error(error_type: str, message: str) -> bytes:
    return sse_frame("error", {"type": "error", "error": {"type": vendor_error_type(error_type), "message": message}})


PING = sse_frame("ping", {"type": "ping"})
