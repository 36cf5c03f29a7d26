"""Out-of-band upstream calls: channel health checks and the model-list probe."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Mapping

from modelgate.errors import UpstreamError
from modelgate.providers.base import Endpoint, UpstreamRequest, prepare, refusal
from modelgate.providers.registry import get_kind
from modelgate.routing.health import EndpointCheck, HealthCheckResult
from modelgate.routing.snapshot import Route

CHECK_TIMEOUT_SECONDS = 15.0


class UpstreamChecks:
    def __init__(self, runtime: Any) -> None:
        self.rt = runtime

    async def http(self, req: UpstreamRequest) -> tuple[int, Mapping[str, str], bytes]:
        return await self.rt.fetch(req, CHECK_TIMEOUT_SECONDS)

    def routes(self) -> list[Route]:
        return [route for routes in self.rt.snapshot.routes_by_model.values() for route in routes]

    async def _check_endpoint(self, kind: str, endpoint: Endpoint) -> EndpointCheck:
        adapter = get_kind(kind).adapter
        started = time.perf_counter()
        try:
            await prepare(adapter, endpoint)
            status, headers, body = await self.http(adapter.models_request(endpoint))
            if status >= 400:
                raise refusal(adapter, status, body, headers, endpoint)
        except UpstreamError as err:
            latency = (time.perf_counter() - started) * 1000.0
            return EndpointCheck(endpoint.id, False, latency, err.error_type.value, err.message)
        return EndpointCheck(endpoint.id, True, (time.perf_counter() - started) * 1000.0)

    async def health_check(self, channel_id: int) -> HealthCheckResult:
        """Lists the provider's models through every endpoint of the channel and times each."""
        await self.rt.services.channels.get(channel_id)  # 404 for an unknown channel
        route = next((r for r in self.routes() if r.channel_id == channel_id), None)
        if route is None:
            return HealthCheckResult(channel_id, False, 0.0, None,
                                     "The channel has no routable endpoint (disabled, or no active model or key)")
        checks = list(await asyncio.gather(*(self._check_endpoint(route.provider_kind, e) for e in route.endpoints)))
        healthy = [c for c in checks if c.ok]
        if healthy:
            return HealthCheckResult(channel_id, True, min(c.latency_ms for c in healthy), endpoints=checks,
                                     model=route.upstream_model)
        last = checks[-1]
        return HealthCheckResult(channel_id, False, last.latency_ms, last.error_type, last.message,
                                 model=route.upstream_model, endpoints=checks)
