"""The contract every provider wire format implements.

One module per wire format (openai_chat, anthropic_messages, gemini, ...) holds
a `WireAdapter`; the registry maps the 21 provider kinds onto those adapters
with their default base URLs. Adapters are pure translators: they build an
`UpstreamRequest` and parse bytes. The gateway owns all I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol

from modelgate.errors import ErrorType, UpstreamError, redact
from modelgate.protocols.ir import ChatRequest, ChatResponse, StreamEvent


@dataclass(slots=True, frozen=True)
class Endpoint:
    """One upstream base URL with one upstream key: the unit of the circuit breaker."""

    id: str  # stable, e.g. "p3:k7"; safe to log (holds no secret)
    provider_id: int
    key_id: int
    kind: str
    base_url: str
    api_key: str = field(repr=False)  # decrypted upstream key; never logged
    options: Mapping[str, Any] = field(default_factory=dict)  # kind-specific (api_version, region...)


@dataclass(slots=True)
class UpstreamRequest:
    method: str
    url: str
    headers: dict[str, str]
    body: bytes | None = None


class StreamDecoder(Protocol):
    """Turns raw upstream stream bytes, in arbitrary chunking, into IR events."""

    def feed(self, chunk: bytes) -> list[StreamEvent]: ...

    def close(self) -> list[StreamEvent]:
        """Upstream EOF: emits StreamEnd if not yet emitted, or StreamError if cut short."""
        ...


class WireAdapter(Protocol):
    wire: str  # e.g. "openai-chat"; equals a client protocol's `native_wire` for pass-through
    # Optional `positional_system = True`: IR `system` turns may stay in place in `messages`;
    # without it the gateway hoists them into `ChatRequest.system` first.

    def build_request(self, req: ChatRequest, upstream_model: str, endpoint: Endpoint) -> UpstreamRequest: ...

    def parse_response(self, body: bytes) -> ChatResponse: ...

    def stream_decoder(self) -> StreamDecoder: ...

    def classify_error(self, status: int, body: bytes, headers: Mapping[str, str]) -> UpstreamError: ...

    def models_request(self, endpoint: Endpoint) -> UpstreamRequest: ...

    def parse_models(self, body: bytes) -> list[str]: ...


class PassThroughAdapter(Protocol):
    """A wire that is also a client protocol: the client body is forwarded to it as is."""

    wire: str

    def build_native_request(
        self, body: dict[str, Any], upstream_model: str, endpoint: Endpoint, stream: bool,
        client_headers: Mapping[str, str] | None = None,
    ) -> UpstreamRequest: ...

    def classify_error(self, status: int, body: bytes, headers: Mapping[str, str]) -> UpstreamError: ...


class NativeWireAdapter(WireAdapter, PassThroughAdapter, Protocol):
    """An adapter that converts to its wire and also forwards client bodies of the same wire."""


async def prepare(adapter: WireAdapter, endpoint: Endpoint) -> None:
    """Obtain or renew the endpoint's credentials before a request is built (cloud identity chains:
    `providers/credentials.py`); nothing for adapters that only use the stored key."""
    hook = getattr(adapter, "prepare", None)
    if hook is not None:
        await hook(endpoint)


def refusal(adapter: WireAdapter, status: int, body: bytes, headers: Mapping[str, str],
             endpoint: Endpoint) -> UpstreamError:
    """The classified upstream error, with the endpoint's key taken out of the provider's text."""
    error = adapter.classify_error(status, body, headers)
    error.message = redact(error.message, endpoint.api_key)
    return error


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """Parse a Retry-After header given in seconds (the form model providers use)."""
    value = headers.get("retry-after") or headers.get("Retry-After")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def classify_by_status(status: int, message: str, headers: Mapping[str, str]) -> UpstreamError:
    """Default mapping of an HTTP status to a spec 7.5 error type.

    Adapters refine it with the provider's own error codes (quota vs rate
    limit on 429, model-not-found on 400/404) before falling back to this.
    """
    if status == 429:
        kind = ErrorType.RATE_LIMIT_ERROR
    elif status in (401, 403):
        kind = ErrorType.AUTHENTICATION_ERROR
    elif status == 402:
        kind = ErrorType.QUOTA_EXCEEDED
    elif status == 404:
        kind = ErrorType.MODEL_NOT_FOUND if "model" in message.lower() else ErrorType.UPSTREAM_ERROR
    elif status in (408, 504):
        kind = ErrorType.TIMEOUT_ERROR
    elif status in (503, 529):
        kind = ErrorType.SERVICE_UNAVAILABLE
    elif 400 <= status < 500:
        kind = ErrorType.INVALID_REQUEST
    elif status >= 500:
        kind = ErrorType.UPSTREAM_ERROR
    else:
        kind = ErrorType.UNKNOWN_ERROR
    return UpstreamError(kind, message, status, retry_after_seconds(headers))
