"""Model instances (one model on one channel) and the IP blacklist (ADMIN only)."""

from __future__ import annotations

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from modelgate.api.deps import Admin, State
from modelgate.api.envelope import Envelope, ok
from modelgate.api.schemas import (
    Id,
    BlacklistIn,
    BlacklistOut,
    ModelInstanceOut,
    ModelState,
    ModelUpdateIn,
)

router = APIRouter(prefix="/models", tags=["models"])
blacklist_router = APIRouter(prefix="/ip-blacklist", tags=["ip-blacklist"])


@router.get("", response_model=Envelope[list[ModelInstanceOut]])
async def list_models(
    request: Request, admin: Admin, mg: State,
    channelId: Id | None = None, state: ModelState | None = None, modelId: str | None = Query(default=None),
) -> Response:
    items = await mg.services.models.list(channel=channelId, state=state, model_id=modelId)
    return ok(request, [ModelInstanceOut.of(m) for m in items])


@router.get("/{instance_id}", response_model=Envelope[ModelInstanceOut])
async def get_model(instance_id: Id, request: Request, admin: Admin, mg: State) -> Response:
    return ok(request, ModelInstanceOut.of(await mg.services.models.get(instance_id)))


@router.patch("/{instance_id}", response_model=Envelope[ModelInstanceOut])
async def update_model(instance_id: Id, body: ModelUpdateIn, request: Request, admin: Admin, mg: State) -> Response:
    owned_by = body.ownedBy if "ownedBy" in body.model_fields_set else None
    if "ownedBy" in body.model_fields_set and owned_by is None:
        owned_by = ""  # null clears the label too
    view = await mg.services.models.update(instance_id, state=body.state, owned_by=owned_by,
                                           capabilities=body.capabilities, upstream_model=body.upstreamModel)
    return ok(request, ModelInstanceOut.of(view))


@router.post("/{instance_id}/reactivate", response_model=Envelope[ModelInstanceOut],
             summary="Set a DEPRECATED or DISABLED model ACTIVE again")
async def reactivate(instance_id: Id, request: Request, admin: Admin, mg: State) -> Response:
    return ok(request, ModelInstanceOut.of(await mg.services.models.reactivate(instance_id)))


@blacklist_router.get("", response_model=Envelope[list[BlacklistOut]])
async def list_blacklist(request: Request, admin: Admin, mg: State) -> Response:
    return ok(request, [BlacklistOut.of(e) for e in await mg.services.blacklist.list()])


@blacklist_router.post("", status_code=201, response_model=Envelope[BlacklistOut])
async def add_blacklist(body: BlacklistIn, request: Request, admin: Admin, mg: State) -> Response:
    return ok(request, BlacklistOut.of(await mg.services.blacklist.add(body.cidr, body.reason)), 201)


@blacklist_router.delete("/{entry_id}", response_model=Envelope[None])
async def remove_blacklist(entry_id: Id, request: Request, admin: Admin, mg: State) -> Response:
    await mg.services.blacklist.remove(entry_id)
    return ok(request, None)
