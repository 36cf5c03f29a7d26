"""Declarative configuration through the API: apply (with a dry run) and export (ADMIN)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field
from starlette.responses import Response

from modelgate.api.deps import Admin, State
from modelgate.api.envelope import Envelope, ok
from modelgate.api.schemas import In

router = APIRouter(prefix="/config", tags=["config"])


class ApplyIn(In):
    config: dict[str, Any]  # the gateway.yaml document (docs/management-api.md#declarative-configuration)
    # Values of the environment variables the config's upstream keys name, resolved by the caller.
    secrets: dict[str, str] = Field(default_factory=dict)


class CreatedKeyOut(BaseModel):
    application: str
    name: str
    plaintext: str  # shown once


class ApplyOut(BaseModel):
    changes: list[str]
    applied: bool
    createdKeys: list[CreatedKeyOut]


@router.post("/apply", response_model=Envelope[ApplyOut],
             summary="Make the gateway match a configuration document; dryRun=true only lists the changes")
async def apply_config(body: ApplyIn, request: Request, admin: Admin, mg: State, dryRun: bool = False) -> Response:
    result = await mg.services.declarative.apply(body.config, body.secrets, dry_run=dryRun)
    response = ok(request, ApplyOut(changes=result.changes, applied=result.applied, createdKeys=[
        CreatedKeyOut(application=k.application, name=k.name, plaintext=k.plaintext) for k in result.created_keys]))
    response.headers["cache-control"] = "no-store"
    return response


@router.get("/export", response_model=Envelope[dict[str, Any]],
            summary="The current configuration in the apply format, without secrets")
async def export_config(request: Request, admin: Admin, mg: State) -> Response:
    return ok(request, await mg.services.declarative.export())
