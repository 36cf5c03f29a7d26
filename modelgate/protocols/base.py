"""The contract of a client-facing protocol (chat completions, messages, Responses).

A codec owns everything protocol-specific about a call: where the key is, the
headers the protocol requires, validation and its 7.2 error shape, decoding
into the IR, and encoding IR responses and stream events back in the client's
format. When the channel's adapter speaks the codec's `native_wire`, the gateway
skips the IR and forwards the client body as is (pass-through); the codec then
only reads usage from the upstream answer (`native_usage`, `native_stream_tap`).
"""

from __future__ import annotations

from typing import Any, Awaitable, Mapping, Protocol, TypeGuard

from modelgate.errors import ClientProtocol, invalid_request
from modelgate.protocols.ir import ChatRequest, ChatResponse, StreamEvent, Usage

Headers = Mapping[bytes, bytes]  # request headers, lower-case names


class StreamEncoder(Protocol):
    def encode(self, event: StreamEvent) -> bytes:
        """SSE bytes for one IR event (may be b"" when the event has no client form)."""
        ...

    def keepalive(self) -> bytes:
        """Bytes that keep an idle stream open without changing its meaning."""
        ...

    def error_event(self, error_type: str, message: str) -> bytes:
        """The protocol's in-stream error, for a failure after the first byte; ends the stream."""
        ...


class NativeStreamTap(Protocol):
    """Watches pass-through stream bytes for usage and stop reason, without altering them.

    `filter` may drop an upstream chunk the client did not ask for (the usage
    chunk the gateway requested on its own) and returns the bytes to forward.
    """

    usage: Usage | None
    finished: bool  # saw the protocol's normal end of stream
    stopped: bool  # saw the stop reason (the answer is complete even if the end marker never comes)
    error: bytes | None  # the data of an upstream error event, once one came
    end_marker: bytes  # the protocol's end of stream, for an upstream that closed without it
    after_error: bytes  # what ends the stream after an error event
    events: int  # events seen so far, keep-alives aside: the stall limit's measure of progress

    def filter(self, chunk: bytes) -> bytes: ...

    def error_event(self, error_type: str, message: str) -> bytes:
        """The protocol's in-stream error, for a stream the upstream cut or the gateway must end."""
        ...


class ClientCodec(Protocol):
    protocol: ClientProtocol
    native_wire: str

    def api_key(self, headers: Headers) -> bytes | None:
        """The gateway key the client sent, where this protocol carries it."""
        ...

    def check_headers(self, headers: Headers) -> None:
        """Protocol headers the request must carry; raises errors.invalid_request."""
        ...

    def validation_body(self, message: str, details: dict[str, Any] | None = None) -> bytes:
        """The protocol's 7.2 error body for a request that failed validation (or that the upstream refused),
        with the machine-readable `details` where the protocol carries them."""
        ...

    def validate(self, body: Any, headers: Mapping[bytes, bytes] | None = None) -> tuple[str, bool]:
        """Check a client body against the protocol; returns (model, stream).

        `headers` are the request's (lower-case names): some body features are gated by them
        (messages betas). Raises errors.invalid_request (400, protocol 7.2 shape) on any violation.
        May rewrite, in place, a form the protocol allows but no upstream accepts (a chat bare tool name).
        """
        ...

    def read_typed(self, raw: bytes, headers: Mapping[bytes, bytes]) -> tuple[Any, str, bool] | None:
        """(body, model, stream) of a usual request that `validate` accepts, read through the
        codec's typed view (protocols/typed_view.py) with no dict tree; None: let validate decide."""
        ...

    def upstream_headers(self, headers: Mapping[bytes, bytes]) -> dict[str, str]:
        """The client's protocol headers an upstream of the same wire must see unchanged (pass-through)."""
        ...

    def prefetch(self, body: Any) -> Awaitable[None] | None:
        """What must be read before `to_ir` can decode a validated body that will be converted (the
        Responses items other processes kept); None when there is nothing to read, as for most bodies."""
        ...

    def to_ir(self, body: dict[str, Any]) -> ChatRequest:
        """Decode a validated body; raises errors.invalid_request for what cannot be converted."""
        ...

    def output_limit(self, body: Mapping[str, Any]) -> int | None:
        """The output tokens the request asks for at most (its protocol's field), None where it sets none."""
        ...

    def answer_context(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """What of a decoded request `encode_response` and `stream_encoder` read (settings some protocols
        echo, stream options): all a converted call keeps of it, besides its bytes, while its upstream works."""
        ...

    def encode_response(self, resp: ChatResponse, model: str, body: dict[str, Any]) -> bytes:
        """The non-streamed client body for an IR response; `model` is what the client asked for,
        `body` the request's `answer_context`."""
        ...

    def stream_encoder(self, model: str, body: dict[str, Any]) -> StreamEncoder:
        """An encoder for one response; `body` is the request's `answer_context`."""
        ...

    def keepalive(self) -> bytes:
        """What keeps an idle stream of this protocol open, on every route (pass-through too)."""
        ...

    def native_usage(self, body: dict[str, Any]) -> Usage: ...

    def native_stream_tap(self, body: Mapping[str, Any]) -> NativeStreamTap: ...


class CountingCodec(ClientCodec, Protocol):
    """A protocol with an endpoint that counts a request's input tokens before it is sent
    (messages `count_tokens`, Responses `input_tokens`)."""

    def validate_count(self, body: Any, headers: Headers) -> str:
        """Check a count body (a request's fields, some optional here); returns the model."""
        ...

    def count_answer(self, input_tokens: int) -> bytes:
        """The protocol's answer to a count."""
        ...


def bearer_token(headers: Headers) -> bytes | None:
    value = headers.get(b"authorization")
    if value and value[:7].lower() == b"bearer ":
        return value[7:].strip()
    return None


# JSON value tests of the codecs' validation: in JSON a boolean is neither an integer nor a number.
def is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def requested_model(body: Any) -> str:
    """The model a chat or Responses request names; their 7.2 errors for a body that is not an
    object or names none."""
    if not isinstance(body, dict):
        raise invalid_request("The request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise invalid_request("'model' is required and must be a non-empty string")
    return model
