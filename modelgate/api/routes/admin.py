"""Management API tokens and the audit log (ADMIN)."""

from __future__ import annotations

from datetime import datetime
from typing import cast

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, Field
from starlette.responses import Response

from modelgate.api.deps import Admin, LoggedInAdmin, State
from modelgate.api.envelope import Envelope, ok
from modelgate.api.schemas import In, Role
from modelgate.services.admin_tokens import AdminTokenView
from modelgate.services.audit import AuditView

tokens_router = APIRouter(prefix="/api-tokens", tags=["api-tokens"])
audit_router = APIRouter(prefix="/audit-log", tags=["audit-log"])


class ApiTokenIn(In):
    name: str = Field(min_length=1, max_length=128)
    role: Role = "ADMIN"
    expiresInDays: float | None = Field(default=None, gt=0, le=3650)


class ApiTokenOut(BaseModel):
    id: int
    name: str
    prefix: str
    role: Role
    userId: int
    createdBy: str
    createdAt: datetime
    expiresAt: datetime | None
    lastUsedAt: datetime | None
    revokedAt: datetime | None

    @classmethod
    def of(cls, t: AdminTokenView) -> ApiTokenOut:
        return cls(id=t.id, name=t.name, prefix=t.prefix, role=cast(Role, t.role), userId=t.user_id,
                   createdBy=t.created_by, createdAt=t.created_at, expiresAt=t.expires_at,
                   lastUsedAt=t.last_used_at, revokedAt=t.revoked_at)


class CreatedApiTokenOut(BaseModel):
    token: ApiTokenOut
    plaintext: str  # `mgt_…`: shown once, send as `Authorization: Bearer`


class AuditOut(BaseModel):
    id: int
    createdAt: datetime
    actor: str
    userId: int | None
    via: str
    action: str
    target: str
    status: int
    clientIp: str | None
    traceId: str | None

    @classmethod
    def of(cls, e: AuditView) -> AuditOut:
        return cls(id=e.id, createdAt=e.created_at, actor=e.actor, userId=e.user_id, via=e.via, action=e.action,
                   target=e.target, status=e.status, clientIp=e.client_ip, traceId=e.trace_id)


class AuditPageOut(BaseModel):
    items: list[AuditOut]
    total: int
    limit: int
    offset: int


@tokens_router.get("", response_model=Envelope[list[ApiTokenOut]], summary="Every token, revoked ones included")
async def list_tokens(request: Request, admin: Admin, mg: State) -> Response:
    return ok(request, [ApiTokenOut.of(t) for t in await mg.services.admin_tokens.list()])


@tokens_router.post("", response_model=Envelope[CreatedApiTokenOut], status_code=201,
                    summary="Create a token (shown once); needs a console login, not a token")
async def create_token(body: ApiTokenIn, request: Request, admin: LoggedInAdmin, mg: State) -> Response:
    created = await mg.services.admin_tokens.create(body.name, body.role, admin.user.id, body.expiresInDays)
    response = ok(request, CreatedApiTokenOut(token=ApiTokenOut.of(created.token), plaintext=created.plaintext),
                  status=201)
    response.headers["cache-control"] = "no-store"
    return response


@tokens_router.delete("/{tokenId}", response_model=Envelope[ApiTokenOut], summary="Revoke a token at once")
async def revoke_token(tokenId: int, request: Request, admin: Admin, mg: State) -> Response:
    return ok(request, ApiTokenOut.of(await mg.services.admin_tokens.revoke(tokenId)))


@audit_router.get("", response_model=Envelope[AuditPageOut], summary="Admin actions and logins, newest first")
async def audit_log(
    request: Request, admin: Admin, mg: State, actor: str | None = None, action: str | None = None,
    since: datetime | None = None, until: datetime | None = None,
    limit: int = Query(default=50, ge=1, le=500), offset: int = Query(default=0, ge=0),
) -> Response:
    page = await mg.services.audit.query(actor=actor, action=action, since=since, until=until, limit=limit,
                                         offset=offset)
    return ok(request, AuditPageOut(items=[AuditOut.of(e) for e in page.items], total=page.total,
                                    limit=page.limit, offset=page.offset))
