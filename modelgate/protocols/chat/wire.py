"""Names, constants and small shapes of the chat-completions wire: finish reasons, stream frames,
usage objects and error bodies."""

from __future__ import annotations

import uuid
from typing import Any

import orjson

from modelgate.protocols import sse
from modelgate.protocols.ir import StopReason, Usage, token_count

NATIVE_WIRE = "openai-chat"

FINISH_REASON: dict[str | None, str] = {
    "stop": "stop",
    "stop_sequence": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "content_filter": "content_filter",
    "error": "stop",
    None: "stop",
}

STOP_REASON: dict[str, StopReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
}

DONE = b"data: [DONE]\n\n"
KEEPALIVE = b": keep-alive\n\n"


def usage_from_openai(usage: Any) -> Usage:
    if not isinstance(usage, dict):
        return Usage()
    details = usage.get("prompt_tokens_details")
    return Usage(
        input_tokens=token_count(usage.get("prompt_tokens")),
        output_tokens=token_count(usage.get("completion_tokens")),
        cache_read_tokens=token_count(details.get("cached_tokens")) if isinstance(details, dict) else 0,
    )


def chunk_usage(chunk: dict[str, Any]) -> Usage | None:
    """Usage reported in a stream chunk: top level (OpenAI), or inside the choice (Moonshot)."""
    usage = chunk.get("usage")
    if not isinstance(usage, dict):
        choices = chunk.get("choices")
        usage = choices[0].get("usage") if choices and isinstance(choices[0], dict) else None
    return usage_from_openai(usage) if isinstance(usage, dict) else None


def usage_to_openai(usage: Usage) -> dict[str, Any]:
    body: dict[str, Any] = {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
    }
    if usage.cache_read_tokens:
        body["prompt_tokens_details"] = {"cached_tokens": usage.cache_read_tokens}
    return body


def error_event(error_type: str, message: str) -> bytes:
    """The in-stream error frame OpenAI sends when a stream fails after it started."""
    return sse.encode(orjson.dumps({"error": {"message": message, "type": error_type.lower(), "code": error_type}}))


def validation_body(message: str) -> bytes:
    """The 7.2 body of the chat protocol (also the Responses protocol's)."""
    return orjson.dumps({"error": {"message": message, "type": "invalid_request_error", "code": "invalid_request"}})


def completion_id(upstream_id: str) -> str:
    return upstream_id if upstream_id.startswith("chatcmpl-") else f"chatcmpl-{upstream_id or uuid.uuid4().hex}"
