"""Console users (ADMIN only)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from modelgate.api import deps
from modelgate.api.deps import Admin, State
from modelgate.api.envelope import Envelope, ok
from modelgate.api.schemas import Id, UserCreateIn, UserOut, UserUpdateIn
from modelgate.errors import conflict

router = APIRouter(prefix="/users", tags=["users"])


@router.get("", response_model=Envelope[list[UserOut]])
async def list_users(request: Request, admin: Admin, mg: State) -> Response:
    return ok(request, [UserOut.of(u) for u in await mg.services.users.list()])


@router.post("", status_code=201, response_model=Envelope[UserOut])
async def create_user(body: UserCreateIn, request: Request, admin: Admin, mg: State) -> Response:
    user = await mg.services.users.create(body.username, body.password, body.role, body.enabled)
    return ok(request, UserOut.of(user), 201)


@router.get("/{user_id}", response_model=Envelope[UserOut])
async def get_user(user_id: Id, request: Request, admin: Admin, mg: State) -> Response:
    return ok(request, UserOut.of(await mg.services.users.get(user_id)))


@router.patch("/{user_id}", response_model=Envelope[UserOut])
async def update_user(user_id: Id, body: UserUpdateIn, request: Request, admin: Admin, mg: State) -> Response:
    if user_id == admin.user.id and (body.enabled is False or body.role == "USER"):
        raise conflict("you cannot disable or demote yourself; ask another admin")
    user = await mg.services.users.update(user_id, role=body.role, enabled=body.enabled, password=body.password)
    if body.enabled is False or body.password is not None:
        keep = request.cookies.get(deps.COOKIE) if user_id == admin.user.id else None
        await deps.sessions(request).revoke_user(user_id, keep_token=keep)
    return ok(request, UserOut.of(user))


@router.delete("/{user_id}", response_model=Envelope[None])
async def delete_user(user_id: Id, request: Request, admin: Admin, mg: State) -> Response:
    if user_id == admin.user.id:
        raise conflict("you cannot delete yourself")
    await mg.services.users.delete(user_id)
    return ok(request, None)
