"""Error types and the exact error bodies of spec section 7.

Three body shapes exist and each error says which one it uses:
- short (7.3): auth, IP blacklist, role and rate-limit refusals, on every path;
- validation (7.2): protocol validation, shaped per client protocol;
- envelope (7.4): everything else (404, 409, 500, 502, 503, 400 parameter errors).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import orjson


class ErrorType(str, enum.Enum):
    """Upstream error classes of spec 7.5; the name is the 502 `error.code`."""

    RATE_LIMIT_ERROR = "RATE_LIMIT_ERROR"
    TIMEOUT_ERROR = "TIMEOUT_ERROR"
    SERVICE_UNAVAILABLE = "SERVICE_UNAVAILABLE"
    UPSTREAM_ERROR = "UPSTREAM_ERROR"
    NETWORK_ERROR = "NETWORK_ERROR"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"
    QUOTA_EXCEEDED = "QUOTA_EXCEEDED"
    AUTHENTICATION_ERROR = "AUTHENTICATION_ERROR"
    INVALID_REQUEST = "INVALID_REQUEST"
    MODEL_NOT_FOUND = "MODEL_NOT_FOUND"


class UpstreamError(Exception):
    """A classified failure of one upstream attempt."""

    def __init__(
        self,
        error_type: ErrorType,
        message: str,
        status: int | None = None,
        retry_after: float | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.error_type = error_type
        self.message = message
        self.status = status
        self.retry_after = retry_after
        # The vendor's machine-readable cause (the messages wire's `error.details`, with its `error_code`):
        # SDKs branch on it, e.g. to send a conversation again without a message thread.
        self.details = details

    def __repr__(self) -> str:
        return f"UpstreamError({self.error_type.value}, {self.status}, {self.message!r})"


class Shape(enum.Enum):
    SHORT = "short"
    VALIDATION = "validation"
    ENVELOPE = "envelope"


class ClientProtocol(enum.Enum):
    CHAT = "chat"
    MESSAGES = "messages"
    RESPONSES = "responses"


class GatewayError(Exception):
    """An error answered to the caller. `code` is the spec code string."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        shape: Shape = Shape.ENVELOPE,
        headers: dict[str, str] | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.shape = shape
        self.headers = headers or {}
        self.details = details  # a 7.2 body's machine-readable cause, where the client protocol has one


def unauthorized(message: str = "Invalid or missing API key") -> GatewayError:
    return GatewayError(401, "UNAUTHORIZED", message, Shape.SHORT)


def access_denied(message: str) -> GatewayError:
    return GatewayError(403, "ACCESS_DENIED", message, Shape.SHORT)


def rate_limited(message: str = "Rate limit exceeded", retry_after: float | None = None) -> GatewayError:
    headers = {"retry-after": str(max(1, int(retry_after + 0.999)))} if retry_after else None
    return GatewayError(429, "RATE_LIMIT_EXCEEDED", message, Shape.SHORT, headers)


def gateway_full(in_flight: int) -> GatewayError:
    """This worker holds as many calls as it can: refuse at once (7.3's 429), before any upstream
    is asked, rather than fail late; a retry soon will likely find room (or another worker)."""
    return rate_limited(f"The gateway is at capacity ({in_flight} calls in flight); retry shortly", 1.0)


def invalid_request(message: str, details: dict[str, Any] | None = None) -> GatewayError:
    """Protocol validation failure (7.2); the body shape follows the client protocol."""
    return GatewayError(400, "invalid_request", message, Shape.VALIDATION, details=details)


def not_found(message: str = "Not found") -> GatewayError:
    return GatewayError(404, "NOT_FOUND", message)


def conflict(message: str) -> GatewayError:
    return GatewayError(409, "CONFLICT", message)


def validation_error(message: str) -> GatewayError:
    """A 400 parameter error of the management API (7.4 envelope)."""
    return GatewayError(400, "VALIDATION_ERROR", message)


def internal_error(message: str = "Internal gateway error") -> GatewayError:
    return GatewayError(500, "INTERNAL_ERROR", message)


def breaker_open(retry_after: float) -> GatewayError:
    return GatewayError(
        503,
        "UPSTREAM_ERROR",
        "Upstream circuit breaker is open; retry later",
        headers={"retry-after": str(max(1, int(retry_after + 0.999)))},
    )


def from_upstream(err: UpstreamError) -> GatewayError:
    """The caller-visible error once retries and failover are exhausted."""
    if err.error_type is ErrorType.RATE_LIMIT_ERROR:
        return rate_limited(f"Upstream rate limit: {err.message}", err.retry_after)
    if err.error_type is ErrorType.INVALID_REQUEST:
        # The body can never succeed: the caller's 400, in its own protocol's 7.2 shape.
        return GatewayError(400, err.error_type.value, err.message, Shape.VALIDATION, details=err.details)
    return GatewayError(502, err.error_type.value, err.message)


def redact(text: str, secret: str) -> str:
    """Removes an upstream key from a provider's error text, whole or in recognisable pieces.

    Some providers quote the key they refused; callers must never see one (spec 5 rule 7).
    """
    if len(secret) < 8:
        return text.replace(secret, "[redacted]") if secret else text
    text = text.replace(secret, "[redacted]")
    for start in range(len(secret) - 11):
        piece = secret[start : start + 12]
        if piece in text:
            text = text.replace(piece, "[redacted]")
    return text


def utc_timestamp() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


ValidationBody = Callable[[str, dict[str, Any] | None], bytes]  # a codec's validation_body


def error_body(err: GatewayError, trace_id: str, validation_body: ValidationBody | None = None) -> bytes:
    """The body of `err` in its shape; `validation_body` is the client protocol's 7.2 shape (its
    codec's `validation_body`), absent on the management API, whose 400s use the envelope."""
    if err.shape is Shape.SHORT:
        if err.status == 429:
            return orjson.dumps({"error": {"code": err.code, "message": err.message}})
        return orjson.dumps({"code": err.code, "message": err.message})
    if err.shape is Shape.VALIDATION:
        if validation_body is not None:
            return validation_body(err.message, err.details)
        return envelope_error(GatewayError(400, "VALIDATION_ERROR", err.message), trace_id)
    return envelope_error(err, trace_id)


def envelope_error(err: GatewayError, trace_id: str) -> bytes:
    return orjson.dumps(
        {
            "success": False,
            "error": {"code": err.code, "message": err.message},
            "traceId": trace_id,
            "timestamp": utc_timestamp(),
        }
    )


def envelope_ok(data: object, trace_id: str) -> bytes:
    return orjson.dumps({"success": True, "data": data, "traceId": trace_id, "timestamp": utc_timestamp()})
