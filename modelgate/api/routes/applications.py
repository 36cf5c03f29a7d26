"""Applications and their gateway API keys.

ADMIN sees and manages every application; a USER creates applications (owned
by them) and manages those and their keys. Authorising channels is ADMIN only.
"""

from __future__ import annotations

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from modelgate.api.deps import (
    Admin,
    Session,
    State,
    is_admin,
    owned_application_ids,
    visible_application,
)
from modelgate.api.envelope import Envelope, ok
from modelgate.api.schemas import (
    Id,
    ApiKeyCreateIn,
    ApiKeyOut,
    ApiKeyUpdateIn,
    ApplicationCreateIn,
    ApplicationOut,
    ApplicationUpdateIn,
    ChannelIdsIn,
    CreatedKeyOut,
)
from modelgate.api.state import ManagementState
from modelgate.errors import access_denied, not_found
from modelgate.services.sessions import ActiveSession
from modelgate.services.views import ApiKeyView

router = APIRouter(tags=["applications"])
keys_router = APIRouter(tags=["keys"])


@router.get("/applications", response_model=Envelope[list[ApplicationOut]])
async def list_applications(request: Request, session: Session, mg: State) -> Response:
    apps = await mg.services.applications.list()
    if not is_admin(session):
        apps = [a for a in apps if a.owner_id == session.user.id]
    return ok(request, [ApplicationOut.of(a) for a in apps])


@router.post("/applications", status_code=201, response_model=Envelope[ApplicationOut])
async def create_application(body: ApplicationCreateIn, request: Request, session: Session, mg: State) -> Response:
    if not is_admin(session) and (body.channelIds or body.ownerId not in (None, session.user.id)):
        raise access_denied("Only an ADMIN authorises channels or creates applications for other users")
    owner = body.ownerId if body.ownerId is not None else session.user.id
    if body.ownerId is not None:
        await mg.services.users.get(body.ownerId)  # 404 for an unknown owner
    for channel_id in body.channelIds:  # check before creating, so a bad id leaves nothing behind
        await mg.services.channels.get(channel_id)
    app = await mg.services.applications.create(body.name, body.description, body.timeout, body.enabled, owner)
    for channel_id in body.channelIds:
        app = await mg.services.applications.authorize_channel(app.id, channel_id)
    return ok(request, ApplicationOut.of(app), 201)


@router.get("/applications/{app_id}", response_model=Envelope[ApplicationOut])
async def get_application(app_id: Id, request: Request, session: Session, mg: State) -> Response:
    return ok(request, ApplicationOut.of(await visible_application(mg, session, app_id)))


@router.patch("/applications/{app_id}", response_model=Envelope[ApplicationOut])
async def update_application(
    app_id: Id, body: ApplicationUpdateIn, request: Request, session: Session, mg: State
) -> Response:
    await visible_application(mg, session, app_id)
    app = await mg.services.applications.update(
        app_id, name=body.name, description=body.description, timeout_seconds=body.timeout, enabled=body.enabled
    )
    return ok(request, ApplicationOut.of(app))


@router.delete("/applications/{app_id}", response_model=Envelope[None])
async def delete_application(app_id: Id, request: Request, session: Session, mg: State) -> Response:
    await visible_application(mg, session, app_id)
    await mg.services.applications.delete(app_id)
    return ok(request, None)


@router.put("/applications/{app_id}/channels", response_model=Envelope[ApplicationOut],
            summary="Replace the authorised channels (ADMIN)")
async def set_channels(app_id: Id, body: ChannelIdsIn, request: Request, admin: Admin, mg: State) -> Response:
    app = await mg.services.applications.get(app_id)
    wanted = list(dict.fromkeys(body.channelIds))
    for channel_id in wanted:
        await mg.services.channels.get(channel_id)
    for channel_id in app.channel_ids:
        if channel_id not in wanted:
            app = await mg.services.applications.revoke_channel(app_id, channel_id)
    for channel_id in wanted:
        if channel_id not in app.channel_ids:
            app = await mg.services.applications.authorize_channel(app_id, channel_id)
    return ok(request, ApplicationOut.of(app))


@router.post("/applications/{app_id}/channels/{channel_id}", response_model=Envelope[ApplicationOut],
             summary="Authorise one channel (ADMIN)")
async def authorize_channel(app_id: Id, channel_id: Id, request: Request, admin: Admin, mg: State) -> Response:
    return ok(request, ApplicationOut.of(await mg.services.applications.authorize_channel(app_id, channel_id)))


@router.delete("/applications/{app_id}/channels/{channel_id}", response_model=Envelope[ApplicationOut],
               summary="Revoke one channel (ADMIN)")
async def revoke_channel(app_id: Id, channel_id: Id, request: Request, admin: Admin, mg: State) -> Response:
    return ok(request, ApplicationOut.of(await mg.services.applications.revoke_channel(app_id, channel_id)))


# --- keys -------------------------------------------------------------------------------------

async def _visible_key(mg: ManagementState, session: ActiveSession, key_id: Id) -> ApiKeyView:
    key = await mg.services.api_keys.get(key_id)
    if not is_admin(session):
        app = await mg.services.applications.get(key.application_id)
        if app.owner_id != session.user.id:
            raise not_found(f"API key {key_id} not found")
    return key


@keys_router.get("/applications/{app_id}/keys", response_model=Envelope[list[ApiKeyOut]])
async def list_app_keys(app_id: Id, request: Request, session: Session, mg: State) -> Response:
    await visible_application(mg, session, app_id)
    return ok(request, [ApiKeyOut.of(k) for k in await mg.services.api_keys.list(app_id)])


@keys_router.post("/applications/{app_id}/keys", status_code=201, response_model=Envelope[CreatedKeyOut],
                  summary="Create a key; the sk- plaintext is in this answer only")
async def create_key(app_id: Id, body: ApiKeyCreateIn, request: Request, session: Session, mg: State) -> Response:
    await visible_application(mg, session, app_id)
    created = await mg.services.api_keys.create(app_id, body.name, body.rateCapacity, body.rateRefillPerSecond)
    response = ok(request, CreatedKeyOut(key=ApiKeyOut.of(created.key), plaintext=created.plaintext), 201)
    response.headers["cache-control"] = "no-store"
    return response


@keys_router.get("/keys", response_model=Envelope[list[ApiKeyOut]])
async def list_keys(
    request: Request, session: Session, mg: State,
    applicationId: Id | None = Query(default=None), includeDeleted: bool = False,
) -> Response:
    if applicationId is not None:
        await visible_application(mg, session, applicationId)
    keys = await mg.services.api_keys.list(applicationId, include_deleted=includeDeleted)
    allowed = await owned_application_ids(mg, session)
    if allowed is not None:
        keys = [k for k in keys if k.application_id in allowed]
    return ok(request, [ApiKeyOut.of(k) for k in keys])


@keys_router.get("/keys/{key_id}", response_model=Envelope[ApiKeyOut])
async def get_key(key_id: Id, request: Request, session: Session, mg: State) -> Response:
    return ok(request, ApiKeyOut.of(await _visible_key(mg, session, key_id)))


@keys_router.patch("/keys/{key_id}", response_model=Envelope[ApiKeyOut],
                   summary="Rename or set the key's rate limit (null = global default)")
async def update_key(key_id: Id, body: ApiKeyUpdateIn, request: Request, session: Session, mg: State) -> Response:
    key = await _visible_key(mg, session, key_id)
    if body.name is not None:
        key = await mg.services.api_keys.rename(key_id, body.name)
    if {"rateCapacity", "rateRefillPerSecond"} & body.model_fields_set:
        capacity = body.rateCapacity if "rateCapacity" in body.model_fields_set else key.rate_capacity
        refill = (body.rateRefillPerSecond if "rateRefillPerSecond" in body.model_fields_set
                  else key.rate_refill_per_second)
        key = await mg.services.api_keys.update_rate_limit(key_id, capacity, refill)
    return ok(request, ApiKeyOut.of(key))


@keys_router.post("/keys/{key_id}/disable", response_model=Envelope[ApiKeyOut])
async def disable_key(key_id: Id, request: Request, session: Session, mg: State) -> Response:
    await _visible_key(mg, session, key_id)
    return ok(request, ApiKeyOut.of(await mg.services.api_keys.disable(key_id)))


@keys_router.post("/keys/{key_id}/enable", response_model=Envelope[ApiKeyOut])
async def enable_key(key_id: Id, request: Request, session: Session, mg: State) -> Response:
    await _visible_key(mg, session, key_id)
    return ok(request, ApiKeyOut.of(await mg.services.api_keys.enable(key_id)))


@keys_router.delete("/keys/{key_id}", response_model=Envelope[ApiKeyOut],
                    summary="Delete for good: the key never authenticates again")
async def delete_key(key_id: Id, request: Request, session: Session, mg: State) -> Response:
    await _visible_key(mg, session, key_id)
    return ok(request, ApiKeyOut.of(await mg.services.api_keys.delete(key_id)))
