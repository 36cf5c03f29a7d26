"""Channels, their models, breaker state, forced recovery and health checks (ADMIN only)."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, Request
from starlette.responses import Response

from modelgate.services.breakers import endpoint_ids
from modelgate.api.deps import Admin, State
from modelgate.api.envelope import Envelope, ok
from modelgate.api.schemas import (
    Id,
    BreakerOut,
    ChannelCreateIn,
    ChannelOut,
    ChannelUpdateIn,
    HealthCheckOut,
    HealthEndpointOut,
    ModelInstanceOut,
    ModelsIn,
    RecoverIn,
    RecoverOut,
    model_specs,
)
from modelgate.api.state import ManagementState
from modelgate.errors import GatewayError
from modelgate.services.views import ChannelView, ProviderView

router = APIRouter(prefix="/channels", tags=["channels"])


async def breakers_of(mg: ManagementState, provider: ProviderView) -> list[BreakerOut]:
    endpoints = endpoint_ids(provider)
    # With Redis the deployment's state (every worker's outcomes), not only this worker's.
    states = await mg.breakers.view([e for e, _ in endpoints]) if mg.breakers is not None else {}
    out = []
    for endpoint_id, hint in endpoints:
        status = states.get(endpoint_id)
        if mg.breakers is None:
            out.append(BreakerOut(endpointId=endpoint_id, keyHint=hint, state="UNKNOWN", failures=0, openedAt=None,
                                  retryAfterSeconds=None))
        elif status is None:  # never called since start-up
            out.append(BreakerOut(endpointId=endpoint_id, keyHint=hint, state="CLOSED", failures=0, openedAt=None,
                                  retryAfterSeconds=None))
        else:
            opened = datetime.fromtimestamp(status.opened_at, UTC) if status.opened_at else None
            out.append(BreakerOut(endpointId=endpoint_id, keyHint=hint, state=status.state.value,
                                  failures=status.failures, openedAt=opened, retryAfterSeconds=status.retry_after))
    return out


async def channel_out(mg: ManagementState, channel: ChannelView) -> ChannelOut:
    provider = await mg.services.providers.get(channel.provider_id)
    return ChannelOut(
        id=channel.id, name=channel.name, providerId=channel.provider_id, providerName=channel.provider_name,
        providerKind=channel.provider_kind, priority=channel.priority, weight=channel.weight,
        enabled=channel.enabled, models=[ModelInstanceOut.of(m) for m in channel.models],
        breakers=await breakers_of(mg, provider), createdAt=channel.created_at,
    )


@router.get("", response_model=Envelope[list[ChannelOut]])
async def list_channels(request: Request, admin: Admin, mg: State) -> Response:
    channels = await mg.services.channels.list()
    providers = {p.id: p for p in await mg.services.providers.list()}
    out = [
        ChannelOut(
            id=c.id, name=c.name, providerId=c.provider_id, providerName=c.provider_name,
            providerKind=c.provider_kind, priority=c.priority, weight=c.weight, enabled=c.enabled,
            models=[ModelInstanceOut.of(m) for m in c.models], breakers=await breakers_of(mg, providers[c.provider_id]),
            createdAt=c.created_at,
        )
        for c in channels
    ]
    return ok(request, out)


@router.post("", status_code=201, response_model=Envelope[ChannelOut])
async def create_channel(body: ChannelCreateIn, request: Request, admin: Admin, mg: State) -> Response:
    channel = await mg.services.channels.create(body.name, body.providerId, model_specs(body.models), body.priority,
                                                body.weight, body.enabled)
    return ok(request, await channel_out(mg, channel), 201)


@router.get("/{channel_id}", response_model=Envelope[ChannelOut])
async def get_channel(channel_id: Id, request: Request, admin: Admin, mg: State) -> Response:
    return ok(request, await channel_out(mg, await mg.services.channels.get(channel_id)))


@router.patch("/{channel_id}", response_model=Envelope[ChannelOut])
async def update_channel(channel_id: Id, body: ChannelUpdateIn, request: Request, admin: Admin, mg: State) -> Response:
    channel = await mg.services.channels.update(channel_id, name=body.name, provider=body.providerId,
                                                priority=body.priority, weight=body.weight, enabled=body.enabled)
    return ok(request, await channel_out(mg, channel))


@router.delete("/{channel_id}", response_model=Envelope[None])
async def delete_channel(channel_id: Id, request: Request, admin: Admin, mg: State) -> Response:
    await mg.services.channels.delete(channel_id)
    return ok(request, None)


@router.post("/{channel_id}/enable", response_model=Envelope[ChannelOut])
async def enable_channel(channel_id: Id, request: Request, admin: Admin, mg: State) -> Response:
    return ok(request, await channel_out(mg, await mg.services.channels.update(channel_id, enabled=True)))


@router.post("/{channel_id}/disable", response_model=Envelope[ChannelOut])
async def disable_channel(channel_id: Id, request: Request, admin: Admin, mg: State) -> Response:
    return ok(request, await channel_out(mg, await mg.services.channels.update(channel_id, enabled=False)))


@router.put("/{channel_id}/models", response_model=Envelope[ChannelOut],
            summary="Replace the models served (kept models keep their state)")
async def set_models(channel_id: Id, body: ModelsIn, request: Request, admin: Admin, mg: State) -> Response:
    return ok(request, await channel_out(mg, await mg.services.channels.set_models(channel_id,
                                                                                   model_specs(body.models))))


@router.post("/{channel_id}/models", response_model=Envelope[ChannelOut], summary="Add models (409 if served)")
async def add_models(channel_id: Id, body: ModelsIn, request: Request, admin: Admin, mg: State) -> Response:
    return ok(request, await channel_out(mg, await mg.services.channels.add_models(channel_id,
                                                                                   model_specs(body.models))))


@router.delete("/{channel_id}/models/{model_id:path}", response_model=Envelope[ChannelOut])
async def remove_model(channel_id: Id, model_id: str, request: Request, admin: Admin, mg: State) -> Response:
    return ok(request, await channel_out(mg, await mg.services.channels.remove_models(channel_id, [model_id])))


@router.get("/{channel_id}/breakers", response_model=Envelope[list[BreakerOut]])
async def channel_breakers(channel_id: Id, request: Request, admin: Admin, mg: State) -> Response:
    channel = await mg.services.channels.get(channel_id)
    return ok(request, await breakers_of(mg, await mg.services.providers.get(channel.provider_id)))


@router.post("/{channel_id}/breaker/recover", response_model=Envelope[RecoverOut],
             summary="Force the breakers of the channel's endpoints closed")
async def recover(channel_id: Id, request: Request, admin: Admin, mg: State,
                  body: RecoverIn | None = None) -> Response:
    if mg.breakers is None:
        raise GatewayError(503, "UPSTREAM_ERROR", "circuit breakers are not available in this process")
    endpoint = body.endpointId if body is not None else None
    ids = await mg.services.breakers.request_recovery(channel_id, endpoint, admin.user.username)
    # Closed here at once; the other processes apply the recorded request at their next refresh.
    recovered = [{"endpointId": e, "previousState": mg.breakers.force_recover(e, emit=False).value} for e in ids]
    return ok(request, RecoverOut(channelId=channel_id, recovered=recovered))


@router.post("/{channel_id}/health-check", response_model=Envelope[HealthCheckOut],
             summary="Probe the channel's endpoints now")
async def health_check(channel_id: Id, request: Request, admin: Admin, mg: State) -> Response:
    await mg.services.channels.get(channel_id)  # 404 for an unknown channel
    if mg.health_check is None:
        raise GatewayError(503, "UPSTREAM_ERROR", "health checks are not available in this process")
    result = await mg.health_check(channel_id)
    return ok(request, HealthCheckOut(
        channelId=channel_id, ok=result.ok, latencyMs=round(result.latency_ms, 2), errorType=result.error_type,
        message=result.message, model=result.model, checkedAt=mg.clock(),
        endpoints=[HealthEndpointOut(endpointId=e.endpoint_id, ok=e.ok, latencyMs=round(e.latency_ms, 2),
                                     errorType=e.error_type, message=e.message) for e in result.endpoints],
    ))
