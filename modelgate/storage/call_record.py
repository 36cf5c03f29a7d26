"""One inference call as the call log records it, and the single place its values are made safe.

Several values come from outside the gateway: the model name and client address from the caller,
token counts from the upstream. A value the database refuses (too long for its column, a NUL that
PostgreSQL text cannot hold, an integer past the column's range) would fail the whole batch it is
in, so every row is bounded and sanitised before it is journaled or queued.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any

from modelgate.safetext import escape_controls, shown

INT32_MAX = 2**31 - 1  # INTEGER columns on PostgreSQL


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(slots=True)
class CallRecord:
    """One inference call: the CallLog columns except id."""

    trace_id: str
    protocol: str  # chat | messages | responses
    model: str
    status: int  # HTTP status answered to the caller
    created_at: datetime = field(default_factory=_now)
    api_key_id: int | None = None
    application_id: int | None = None
    channel_id: int | None = None
    provider_kind: str | None = None
    stream: bool = False
    error_code: str | None = None
    latency_ms: float = 0.0
    first_byte_ms: float | None = None
    attempts: int = 1
    prompt_tokens: int = 0  # every prompt token, cached or not
    completion_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    client_ip: str | None = None


# Column lengths of storage.models.CallLog.
TEXT_LIMITS = {"trace_id": 36, "protocol": 16, "model": 128, "provider_kind": 32, "error_code": 32,
               "client_ip": 64}
INT_FIELDS = ("status", "api_key_id", "application_id", "channel_id", "attempts", "prompt_tokens",
              "completion_tokens", "cache_read_tokens", "cache_write_tokens")
TOKEN_FIELDS = ("prompt_tokens", "completion_tokens", "cache_read_tokens", "cache_write_tokens")
FIELD_NAMES = tuple(f.name for f in fields(CallRecord))


def _count(value: object) -> int:
    try:
        number = int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError, OverflowError):
        return 0
    return min(max(number, 0), INT32_MAX)


def sanitise(call: CallRecord) -> CallRecord:
    """Bound and escape the values that come from outside: the model name and client address (text,
    cut to their column and escaped), the upstream's token counts (whole numbers in the column's range).

    The other fields are the gateway's own (trace id, codes, kinds); `last_resort` covers them too.
    Runs on every call: the checks are the cheap ones unless a value needs repair.
    """
    model = call.model
    if len(model) > 128 or not model.isprintable():
        call.model = shown(model, 128)
    ip = call.client_ip
    if ip is not None and (len(ip) > 64 or not ip.isprintable()):
        call.client_ip = shown(ip, 64)
    for name in TOKEN_FIELDS:
        tokens = getattr(call, name)
        if type(tokens) is not int or not 0 <= tokens <= INT32_MAX:
            setattr(call, name, _count(tokens))
    return call


def last_resort(call: CallRecord) -> CallRecord:
    """The form of a row the database refused even after `sanitise`: ASCII text, integers in range."""
    values: dict[str, Any] = {}
    for name in FIELD_NAMES:
        value = getattr(call, name)
        if isinstance(value, str):
            limit = TEXT_LIMITS.get(name, 64)
            value = escape_controls(value).encode("ascii", "backslashreplace").decode("ascii")
            value = value[:limit]
        elif isinstance(value, int) and not isinstance(value, bool) and name in INT_FIELDS:
            value = min(max(value, -INT32_MAX), INT32_MAX)
        values[name] = value
    return CallRecord(**values)
