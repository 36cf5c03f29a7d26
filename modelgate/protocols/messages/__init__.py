"""The messages protocol (`POST /alt/v1/messages`): the Anthropic Messages API wire format.

Pure functions only, one concern per module: `wire` (names, headers, SSE frames, usage, cache
marks), `validate`, `view` (the typed fast path of validation), `decode` (into the IR), `encode`
(IR answers and errors), `stream` (IR stream events as SSE) and `tap` (a native stream relayed).
The codec below is what the gateway calls; the names re-exported here are what other packages use.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from modelgate.errors import ClientProtocol
from modelgate.protocols.base import Headers, bearer_token
from modelgate.protocols.ir import ChatRequest, ChatResponse, Usage
from modelgate.protocols.messages import view
from modelgate.protocols.messages.decode import output_limit, reasoning_effort, thinking_field, to_ir
from modelgate.protocols.messages.encode import PING, encode_response, tool_input, vendor_error_type
from modelgate.protocols.messages.stream import MessagesStreamEncoder
from modelgate.protocols.messages.tap import MessagesStreamTap
from modelgate.protocols.messages.validate import check_version, validate, validate_count
from modelgate.protocols.messages.wire import (
    MID_CONVERSATION_SYSTEM_BETA,
    NATIVE_WIRE,
    STOP_FROM_VENDOR,
    allows_mid_conversation_system,
    betas,
    cache_control,
    cache_mark,
    sse_frame,
    usage_from_vendor,
    vendor_headers,
)

# What other packages use (the upstream adapter, count_tokens, tests).
__all__ = [
    "MID_CONVERSATION_SYSTEM_BETA", "NATIVE_WIRE", "STOP_FROM_VENDOR", "MessagesCodec", "MessagesStreamEncoder",
    "betas", "cache_control", "cache_mark", "encode_response", "reasoning_effort", "sse_frame", "thinking_field",
    "to_ir", "tool_input", "usage_from_vendor", "validate_count", "vendor_error_type", "vendor_headers",
]


class MessagesCodec:
    protocol = ClientProtocol.MESSAGES
    native_wire = NATIVE_WIRE

    def api_key(self, headers: Headers) -> bytes | None:
        # x-api-key per the spec; the vendor's current SDK sends its key as a Bearer token.
        return headers.get(b"x-api-key") or bearer_token(headers)

    def check_headers(self, headers: Headers) -> None:
        check_version(headers)

    def validation_body(self, message: str, details: dict[str, Any] | None = None) -> bytes:
        error: dict[str, Any] = {"type": "invalid_request_error", "message": message}
        if details:
            error["details"] = details
        return orjson.dumps({"type": "error", "error": error})

    def validate(self, body: Any, headers: Mapping[bytes, bytes] | None = None) -> tuple[str, bool]:
        return validate(body, betas(headers) if headers else None)

    def validate_count(self, body: Any, headers: Headers) -> str:
        return validate_count(body, betas(headers))

    def count_answer(self, input_tokens: int) -> bytes:
        return orjson.dumps({"input_tokens": input_tokens})

    def read_typed(self, raw: bytes, headers: Mapping[bytes, bytes]) -> tuple[Any, str, bool] | None:
        return view.read(raw, allows_mid_conversation_system(betas(headers)))

    def upstream_headers(self, headers: Mapping[bytes, bytes]) -> dict[str, str]:
        return vendor_headers(headers)

    def prefetch(self, body: Any) -> None:
        return None  # a body holds all it says

    def to_ir(self, body: dict[str, Any]) -> ChatRequest:
        return to_ir(body)

    def output_limit(self, body: Mapping[str, Any]) -> int | None:
        return output_limit(body)

    def answer_context(self, body: Mapping[str, Any]) -> dict[str, Any]:
        return {}  # a message echoes nothing of the request

    def encode_response(self, resp: ChatResponse, model: str, body: dict[str, Any] | None = None) -> bytes:
        return encode_response(resp, model)

    def stream_encoder(self, model: str, body: dict[str, Any]) -> MessagesStreamEncoder:
        return MessagesStreamEncoder(model)

    def keepalive(self) -> bytes:
        return PING

    def native_usage(self, body: dict[str, Any]) -> Usage:
        return usage_from_vendor(body.get("usage"))

    def native_stream_tap(self, body: Mapping[str, Any]) -> MessagesStreamTap:
        return MessagesStreamTap(body.get("model"))
