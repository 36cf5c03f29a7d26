"""Forced breaker recovery, shared by the management API and the CLI.

Breakers live in the memory of each gateway process. A recovery request is
therefore written as a BREAKER_FORCED event row; every process (every worker,
every instance) applies the rows it has not seen at its next snapshot refresh,
which the change notification triggers at once (and Redis spreads further).
"""

from __future__ import annotations

from modelgate.errors import not_found
from modelgate.providers.registry import KINDS
from modelgate.routing.events import EventType
from modelgate.services.context import ServiceContext
from modelgate.services.views import ProviderView
from modelgate.storage.models import ResilienceEvent


def endpoint_ids(provider: ProviderView) -> list[tuple[str, str | None]]:
    """(endpoint id, key hint) of each endpoint the gateway builds for this provider
    (same rule as storage.snapshot_loader: one per enabled key, or one keyless)."""
    keys = [k for k in provider.keys if k.enabled]
    if keys:
        return [(f"p{provider.id}:k{k.id}", k.hint or None) for k in keys]
    kind = KINDS.get(provider.kind)
    if kind is not None and not kind.needs_key(provider.options or {}):
        return [(f"p{provider.id}:k0", None)]
    return []


class BreakerService:
    def __init__(self, ctx: ServiceContext, providers: object, channels: object) -> None:
        self.ctx = ctx
        self.providers = providers
        self.channels = channels

    async def request_recovery(self, channel: int | str, endpoint_id: str | None = None,
                               actor: str = "an administrator") -> list[str]:
        """Ask every gateway process to close the breakers of a channel's endpoints; returns their ids."""
        found = await self.channels.get(channel)  # type: ignore[attr-defined]
        provider = await self.providers.get(found.provider_id)  # type: ignore[attr-defined]
        ids = [e for e, _ in endpoint_ids(provider)]
        if endpoint_id is not None:
            if endpoint_id not in ids:
                raise not_found(f"endpoint {endpoint_id!r} is not an endpoint of channel {found.id}")
            ids = [endpoint_id]
        async with self.ctx.change() as s:
            for eid in ids:
                s.add(ResilienceEvent(event_type=EventType.BREAKER_FORCED.value, channel_id=found.id,
                                      endpoint=eid, detail=f"forced by {actor}"))
        return ids
