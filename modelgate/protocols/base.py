"""The contract of a client-facing protocol (chat completions, messages).

A codec validates a client body, decodes it into the IR, and encodes IR
responses and stream events back in the client's format. When the channel's
wire format equals `native_wire`, the gateway skips the IR and forwards the
client body as is (pass-through); the codec then only reads usage from the
upstream answer (`native_usage`, `native_stream_tap`).
"""

from __future__ import annotations

from typing import Any, Protocol

from modelgate.errors import ClientProtocol
from modelgate.protocols.ir import ChatRequest, ChatResponse, StreamEvent, Usage


class StreamEncoder(Protocol):
    def encode(self, event: StreamEvent) -> bytes:
        """SSE bytes for one IR event (may be b"" when the event has no client form)."""
        ...

    def keepalive(self) -> bytes:
        """Bytes that keep an idle stream open without changing its meaning."""
        ...


class NativeStreamTap(Protocol):
    """Watches pass-through stream bytes for usage and stop reason, without altering them.

    `filter` may drop an upstream chunk the client did not ask for (the usage
    chunk the gateway requested on its own) and returns the bytes to forward.
    """

    usage: Usage | None
    finished: bool  # saw the protocol's normal end of stream

    def filter(self, chunk: bytes) -> bytes: ...


class ClientCodec(Protocol):
    protocol: ClientProtocol
    native_wire: str

    def validate(self, body: Any) -> tuple[str, bool]:
        """Check a client body against the protocol; returns (model, stream).

        Raises errors.invalid_request (400, protocol 7.2 shape) on any violation.
        """
        ...

    def to_ir(self, body: dict[str, Any]) -> ChatRequest:
        """Decode a validated body."""
        ...

    def encode_response(self, resp: ChatResponse, model: str) -> bytes:
        """The non-streamed client body for an IR response; `model` is what the client asked for."""
        ...

    def stream_encoder(self, model: str, body: dict[str, Any]) -> StreamEncoder:
        """An encoder for one response; `body` is the client request (stream options)."""
        ...

    def stream_error(self, error_type: str, message: str) -> bytes:
        """The protocol's own in-stream error event, for failures after the first byte."""
        ...

    def native_usage(self, body: dict[str, Any]) -> Usage: ...

    def native_stream_tap(self, body: dict[str, Any]) -> NativeStreamTap: ...
