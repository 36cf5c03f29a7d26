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
FIELD_NAMES = tuple(f.name for f in fields(CallRecord))


def sanitise(call: CallRecord) -> CallRecord:
    """Bound and escape every text value to its column; clamp integers to the column's range."""
    for name, limit in TEXT_LIMITS.items():
        value = getattr(call, name)
        if value is not None and (len(value) > limit or not value.isprintable()):
            setattr(call, name, shown(value, limit))
    for name in ("prompt_tokens", "completion_tokens"):  # upstream-reported
        value = getattr(call, name)
        if not 0 <= value <= INT32_MAX:
            setattr(call, name, min(max(int(value), 0), INT32_MAX))
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
