"""Model lifecycle: repeated MODEL_NOT_FOUND moves a model instance to DEPRECATED.

Observations come from two places: live calls answered MODEL_NOT_FOUND, and a
scheduled probe that lists each provider's models and notes the instances
whose upstream model is missing. `not_found_threshold` observations within
`not_found_window_seconds` deprecate the instance once, through an injected
hook (the service layer writes the state and refreshes the routing snapshot).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Awaitable, Callable, Iterable, Mapping, Protocol

from modelgate.config import LifecycleSettings
from modelgate.errors import ErrorType
from modelgate.providers.base import (
    Endpoint,
    UpstreamRequest,
    WireAdapter,
    in_model_list,
    prepare,
    read_models,
    refusal,
)
from modelgate.routing.events import (
    Clock,
    EventSink,
    EventType,
    NullSink,
    ResilienceEventData,
)
from modelgate.routing.snapshot import Route

log = logging.getLogger(__name__)


class SharedCounts(Protocol):
    async def observe(self, model_instance_id: int) -> tuple[int, bool] | None: ...

    async def forget(self, model_instance_id: int) -> None: ...


class DeprecateHook(Protocol):
    async def deprecate(self, model_instance_id: int, reason: str) -> None: ...


class LifecycleMonitor:
    def __init__(
        self, settings: LifecycleSettings, clock: Clock, hook: DeprecateHook, sink: EventSink | None = None
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.hook = hook
        self.sink = sink or NullSink()
        self._seen: dict[int, deque[float]] = {}  # model instance id -> observation times
        self._deprecated: set[int] = set()
        # Deployment-wide counts (modelgate.shared.lifecycle_counts); the local ones serve while it is away.
        self.shared: SharedCounts | None = None

    def observations(self, model_instance_id: int) -> int:
        return len(self._window(model_instance_id))

    def _window(self, model_instance_id: int) -> deque[float]:
        seen = self._seen.setdefault(model_instance_id, deque())
        horizon = self.clock.monotonic() - self.settings.not_found_window_seconds
        while seen and seen[0] <= horizon:
            seen.popleft()
        return seen

    async def observe_not_found(self, route: Route, trace_id: str | None = None, detail: str = "") -> bool:
        """Count one MODEL_NOT_FOUND for the route's instance; True when this deprecated it."""
        instance = route.model_instance_id
        if instance in self._deprecated:
            return False
        counted = await self.shared.observe(instance) if self.shared is not None else None
        if counted is None:
            seen = self._window(instance)
            seen.append(self.clock.monotonic())
            count, deprecates = len(seen), len(seen) >= self.settings.not_found_threshold
        else:
            count, deprecates = counted
        if not deprecates:
            return False
        # Mark first so concurrent observations cannot deprecate twice.
        self._deprecated.add(instance)
        reason = (
            f"upstream model {route.upstream_model!r} not found {count} times within "
            f"{self.settings.not_found_window_seconds:g}s"
        )
        if detail:
            reason = f"{reason}; last: {detail}"
        try:
            await self.hook.deprecate(instance, reason)
        except Exception:
            # Try again on the next observation rather than lose the deprecation.
            self._deprecated.discard(instance)
            if self.shared is not None:
                await self.shared.forget(instance)
            log.exception("deprecating model instance %s failed", instance)
            return False
        self._seen.pop(instance, None)
        self.sink.record_event(ResilienceEventData(
            event_type=EventType.MODEL_DEPRECATED.value, trace_id=trace_id, channel_id=route.channel_id,
            model=route.model_id, error_type=ErrorType.MODEL_NOT_FOUND.value, detail=reason,
        ))
        return True

    def reactivated(self, model_instance_id: int) -> None:
        """An admin re-activated the instance: count from zero again."""
        self._deprecated.discard(model_instance_id)
        self._seen.pop(model_instance_id, None)
        if self.shared is not None:
            asyncio.get_running_loop().create_task(self.shared.forget(model_instance_id))

    def routable_again(self, routable: set[int]) -> None:
        """Instances this process deprecated that are routable again were re-activated by an admin."""
        for instance in self._deprecated & routable:
            self.reactivated(instance)


ModelLister = Callable[[Endpoint], Awaitable[list[str]]]
# Performs one upstream request: (status, headers, body).
HttpCall = Callable[[UpstreamRequest], Awaitable[tuple[int, Mapping[str, str], bytes]]]


def adapter_lister(adapter_for: Callable[[str], WireAdapter], http: HttpCall) -> ModelLister:
    """List a provider's models with its wire adapter; `adapter_for` maps a provider kind to it."""

    async def list_models(endpoint: Endpoint) -> list[str]:
        adapter = adapter_for(endpoint.kind)
        await prepare(adapter, endpoint)
        status, headers, body = await http(adapter.models_request(endpoint))
        if status != 200:
            raise refusal(adapter, status, body, headers, endpoint)
        return read_models(adapter, body)

    return list_models


class ModelProbe:
    """Re-checks routable model instances against their provider's model list.

    A model counts as missing only where that list is authoritative for the name used
    (`providers.base.in_model_list` with the kind's adapter: Azure deployments and Bedrock
    inference profiles are skipped, Ollama tags and dated vendor aliases normalised). Live
    MODEL_NOT_FOUND answers stay the main signal.
    """

    def __init__(
        self,
        monitor: LifecycleMonitor,
        list_models: ModelLister,
        routes: Callable[[], Iterable[Route]],
        clock: Clock,
        interval_seconds: float,
        runs_here: Callable[[str, float], Awaitable[bool]] | None = None,
        adapter_for: Callable[[str], WireAdapter] | None = None,
    ) -> None:
        self.monitor = monitor
        self.list_models = list_models
        self.routes = routes
        self.clock = clock
        self.interval_seconds = interval_seconds
        # Whether this process runs the pass (once per deployment when workers share a lease).
        self.runs_here = runs_here
        self.adapter_for = adapter_for

    def _listed(self, route: Route, listed: set[str]) -> bool | None:
        if self.adapter_for is None:
            return route.upstream_model in listed
        return in_model_list(self.adapter_for(route.provider_kind), route.upstream_model, listed)

    async def _listing(self, endpoints: tuple[Endpoint, ...]) -> set[str] | None:
        for endpoint in endpoints:
            try:
                return set(await self.list_models(endpoint))
            except Exception as exc:  # a failing key says nothing about the models; try the next
                log.warning("model probe: listing via endpoint %s failed: %r", endpoint.id, exc)
        return None

    async def probe_once(self) -> list[Route]:
        """One pass; returns the instances seen missing (each counted as one MODEL_NOT_FOUND)."""
        by_provider: dict[int, dict[int, Route]] = {}
        for route in self.routes():
            by_provider.setdefault(route.provider_id, {})[route.model_instance_id] = route
        missing: list[Route] = []
        for instances in by_provider.values():
            if all(self._listed(r, set()) is None for r in instances.values()):
                continue  # the list can answer for none of them: do not even ask
            endpoints = next((r.endpoints for r in instances.values() if r.endpoints), ())
            listed = await self._listing(endpoints)
            # An empty list is a provider without a listing, not a provider without models.
            if not listed:
                continue
            for route in instances.values():
                if self._listed(route, listed) is False:
                    missing.append(route)
                    await self.monitor.observe_not_found(route, detail="absent from the provider's model list")
        return missing

    async def run(self) -> None:
        """Probe every `interval_seconds` until cancelled; 0 disables the probe."""
        if self.interval_seconds <= 0:
            return
        while True:
            await self.clock.sleep(self.interval_seconds)
            try:
                if self.runs_here is None or await self.runs_here("model-probe", self.interval_seconds):
                    await self.probe_once()
            except Exception:
                log.exception("model probe pass failed")
