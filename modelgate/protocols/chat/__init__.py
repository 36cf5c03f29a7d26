"""The chat-completions protocol (`POST /v1/chat/completions`, spec 2.1 and 4.1).

Pure functions only, one concern per module: `wire` (names, finish reasons, frames, usage, error
bodies), `validate`, `view` (the typed fast path of validation), `decode` (into the IR), `encode`
(IR answers), `stream` (IR stream events as chunks) and `tap` (a native stream relayed). The codec
below is what the gateway calls; the names re-exported here are what other packages use.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from modelgate.errors import ClientProtocol
from modelgate.protocols.base import Headers, bearer_token
from modelgate.protocols.chat import view
from modelgate.protocols.chat.decode import output_limit, to_ir
from modelgate.protocols.chat.encode import encode_response
from modelgate.protocols.chat.stream import ChatStreamEncoder
from modelgate.protocols.chat.tap import ChatStreamTap
from modelgate.protocols.chat.validate import validate
from modelgate.protocols.chat.wire import (
    KEEPALIVE,
    NATIVE_WIRE,
    STOP_REASON,
    chunk_usage,
    usage_from_openai,
    validation_body,
)
from modelgate.protocols.ir import ChatRequest, ChatResponse, Usage

# What other packages use (the upstream adapter, the Responses protocol, tests).
__all__ = ["NATIVE_WIRE", "STOP_REASON", "ChatCodec", "ChatStreamEncoder", "chunk_usage", "usage_from_openai",
           "validation_body"]


class ChatCodec:
    protocol = ClientProtocol.CHAT
    native_wire = NATIVE_WIRE

    def api_key(self, headers: Headers) -> bytes | None:
        return bearer_token(headers)

    def check_headers(self, headers: Headers) -> None:
        return None

    def validation_body(self, message: str, details: dict[str, Any] | None = None) -> bytes:
        return validation_body(message)  # the protocol's error has no details

    def validate(self, body: Any, headers: Mapping[bytes, bytes] | None = None) -> tuple[str, bool]:
        return validate(body)

    def read_typed(self, raw: bytes, headers: Mapping[bytes, bytes]) -> tuple[Any, str, bool] | None:
        return view.read(raw)

    def prefetch(self, body: Any) -> None:
        return None  # a body holds all it says

    def to_ir(self, body: dict[str, Any]) -> ChatRequest:
        return to_ir(body)

    def encode_response(self, resp: ChatResponse, model: str, body: dict[str, Any] | None = None) -> bytes:
        return encode_response(resp, model)

    def output_limit(self, body: Mapping[str, Any]) -> int | None:
        return output_limit(body)

    def answer_context(self, body: Mapping[str, Any]) -> dict[str, Any]:
        return {"stream_options": body.get("stream_options")}

    def stream_encoder(self, model: str, body: dict[str, Any]) -> ChatStreamEncoder:
        options = body.get("stream_options") or {}
        return ChatStreamEncoder(model, bool(options.get("include_usage")))

    def upstream_headers(self, headers: Mapping[bytes, bytes]) -> dict[str, str]:
        return {}  # nothing of a chat client's headers is the upstream's business

    def keepalive(self) -> bytes:
        return KEEPALIVE

    def native_usage(self, body: dict[str, Any]) -> Usage:
        return usage_from_openai(body.get("usage"))

    def native_stream_tap(self, body: Mapping[str, Any]) -> ChatStreamTap:
        options = body.get("stream_options") or {}
        return ChatStreamTap(client_wants_usage=bool(options.get("include_usage")), model=body.get("model"))
