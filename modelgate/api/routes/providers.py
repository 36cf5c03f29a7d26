"""Upstream providers and their encrypted keys (ADMIN only). Keys are never returned, only a hint."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from modelgate.api.deps import Admin, State
from modelgate.api.envelope import Envelope, ok
from modelgate.api.schemas import (
    Id,
    ProviderCreateIn,
    ProviderKeyIn,
    ProviderKeyOut,
    ProviderKindOut,
    ProviderOut,
    ProviderUpdateIn,
)

router = APIRouter(prefix="/providers", tags=["providers"])


@router.get("/kinds", response_model=Envelope[list[ProviderKindOut]], summary="Provider kinds the gateway speaks")
async def kinds(request: Request, admin: Admin) -> Response:
    from modelgate.providers.registry import KINDS

    return ok(request, [
        ProviderKindOut(kind=k.name, label=k.label, defaultBaseUrl=k.default_base_url, baseUrlNote=k.base_url_note,
                        docsUrl=k.docs_url, keyRequired=k.key_required, keylessAuth=list(k.keyless_auth),
                        options=list(k.option_names))
        for k in KINDS.values()
    ])


@router.get("", response_model=Envelope[list[ProviderOut]])
async def list_providers(request: Request, admin: Admin, mg: State) -> Response:
    return ok(request, [ProviderOut.of(p) for p in await mg.services.providers.list()])


@router.post("", status_code=201, response_model=Envelope[ProviderOut])
async def create_provider(body: ProviderCreateIn, request: Request, admin: Admin, mg: State) -> Response:
    provider = await mg.services.providers.create(body.name, body.kind, body.baseUrl, body.options, body.keys,
                                                  body.enabled)
    return ok(request, ProviderOut.of(provider), 201)


@router.get("/{provider_id}", response_model=Envelope[ProviderOut])
async def get_provider(provider_id: Id, request: Request, admin: Admin, mg: State) -> Response:
    return ok(request, ProviderOut.of(await mg.services.providers.get(provider_id)))


@router.patch("/{provider_id}", response_model=Envelope[ProviderOut])
async def update_provider(
    provider_id: Id, body: ProviderUpdateIn, request: Request, admin: Admin, mg: State
) -> Response:
    provider = await mg.services.providers.update(
        provider_id, name=body.name, base_url=body.baseUrl, options=body.options, enabled=body.enabled
    )
    return ok(request, ProviderOut.of(provider))


@router.delete("/{provider_id}", response_model=Envelope[None],
               summary="Delete a provider (409 while channels use it)")
async def delete_provider(provider_id: Id, request: Request, admin: Admin, mg: State) -> Response:
    await mg.services.providers.delete(provider_id)
    return ok(request, None)


@router.post("/{provider_id}/keys", status_code=201, response_model=Envelope[ProviderKeyOut],
             summary="Add an upstream key (stored encrypted)")
async def add_key(provider_id: Id, body: ProviderKeyIn, request: Request, admin: Admin, mg: State) -> Response:
    return ok(request, ProviderKeyOut.of(await mg.services.providers.add_key(provider_id, body.key, body.label)),
              201)


@router.delete("/{provider_id}/keys/{key_id}", response_model=Envelope[None])
async def remove_key(provider_id: Id, key_id: Id, request: Request, admin: Admin, mg: State) -> Response:
    await mg.services.providers.remove_key(provider_id, key_id)
    return ok(request, None)


@router.post("/{provider_id}/keys/{key_id}/enable", response_model=Envelope[ProviderKeyOut])
async def enable_key(provider_id: Id, key_id: Id, request: Request, admin: Admin, mg: State) -> Response:
    return ok(request, ProviderKeyOut.of(await mg.services.providers.enable_key(provider_id, key_id)))


@router.post("/{provider_id}/keys/{key_id}/disable", response_model=Envelope[ProviderKeyOut])
async def disable_key(provider_id: Id, key_id: Id, request: Request, admin: Admin, mg: State) -> Response:
    return ok(request, ProviderKeyOut.of(await mg.services.providers.disable_key(provider_id, key_id)))
