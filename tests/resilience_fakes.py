"""Fakes shared by the resilience tests: a hand-driven clock, an event list, builders."""

from __future__ import annotations

from modelgate.errors import ErrorType, UpstreamError
from modelgate.providers.base import Endpoint
from modelgate.routing.events import ResilienceEventData
from modelgate.routing.snapshot import Route


class FakeClock:
    """Time moves only when a test (or a sleeping coroutine) moves it."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def advance(self, seconds: float) -> None:
        self.now += seconds


class ListSink:
    def __init__(self) -> None:
        self.events: list[ResilienceEventData] = []

    def record_event(self, event: ResilienceEventData) -> None:
        self.events.append(event)

    def types(self) -> list[str]:
        return [e.event_type for e in self.events]


def endpoint(provider_id: int, key_id: int, kind: str = "openai") -> Endpoint:
    return Endpoint(
        id=f"p{provider_id}:k{key_id}", provider_id=provider_id, key_id=key_id, kind=kind,
        base_url=f"https://upstream{provider_id}.test/v1", api_key=f"sk-upstream-secret-{provider_id}-{key_id}",
    )


def route(
    channel_id: int,
    endpoints: tuple[Endpoint, ...] | None = None,
    *,
    priority: int = 0,
    weight: int = 1,
    model: str = "gpt-4o",
    upstream_model: str | None = None,
    instance_id: int | None = None,
    provider_id: int | None = None,
) -> Route:
    provider_id = provider_id if provider_id is not None else channel_id
    return Route(
        model_instance_id=instance_id if instance_id is not None else channel_id * 100,
        model_id=model,
        upstream_model=upstream_model or model,
        channel_id=channel_id,
        channel_name=f"channel-{channel_id}",
        priority=priority,
        weight=weight,
        provider_id=provider_id,
        provider_kind="openai",
        owned_by="openai",
        created=1700000000,
        capabilities=("streaming",),
        endpoints=endpoints if endpoints is not None else (endpoint(provider_id, 1),),
    )


def upstream(kind: ErrorType, retry_after: float | None = None, status: int | None = None) -> UpstreamError:
    return UpstreamError(kind, f"upstream said {kind.value.lower()}", status, retry_after)
