"""The outcome of a channel health check (run by gateway.upstream_checks, shown by the API)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class EndpointCheck:
    """The outcome of probing one endpoint (base URL + upstream key) of a channel."""

    endpoint_id: str
    ok: bool
    latency_ms: float
    error_type: str | None = None  # an ErrorType name when not ok
    message: str | None = None  # never holds an upstream key


@dataclass(slots=True)
class HealthCheckResult:
    channel_id: int
    ok: bool  # at least one endpoint answered
    latency_ms: float  # of the fastest healthy endpoint, else of the last try
    error_type: str | None = None
    message: str | None = None
    model: str | None = None  # the model used for the probe, if any
    endpoints: list[EndpointCheck] = field(default_factory=list)
