"""Login, logout, the current user and password change."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from modelgate.api import deps
from modelgate.api.deps import Session, State
from modelgate.api.envelope import Envelope, ok, trace_id
from modelgate.api.schemas import LoginIn, PasswordChangeIn, SessionOut, UserOut
from modelgate.errors import rate_limited, unauthorized, validation_error

router = APIRouter(prefix="/auth", tags=["auth"])


def _secure(request: Request, mg) -> bool:
    forwarded = request.headers.get("x-forwarded-proto") if mg.settings.gateway.trust_forwarded_for else None
    return mg.settings.production or request.url.scheme == "https" or forwarded == "https"


@router.post("/login", response_model=Envelope[SessionOut], summary="Log in; sets the mg_session cookie")
async def login(body: LoginIn, request: Request, mg: State) -> Response:
    throttle = deps.throttle(request)
    ip = deps.client_ip(request)
    wait = await throttle.retry_after(body.username, ip)

    async def audit(status: int, user_id: int | None = None) -> None:
        await mg.services.audit.record(actor=body.username, user_id=user_id, via="login", action="POST /auth/login",
                                       target="/auth/login", status=status, client_ip=ip,
                                       trace_id=trace_id(request))

    if wait > 0:
        await audit(429)
        raise rate_limited("Too many failed logins; try again later", wait)
    user = await mg.services.users.authenticate(body.username, body.password)
    if user is None:
        await throttle.failed(body.username, ip)
        await audit(401)
        raise unauthorized("Invalid username or password")
    await audit(200, user.id)
    await throttle.succeeded(body.username, ip)
    new = await deps.sessions(request).create(user.id)
    response = ok(request, SessionOut(user=UserOut.of(user), csrfToken=new.csrf_token, expiresAt=new.expires_at))
    response.set_cookie(
        deps.COOKIE, new.token, max_age=int(mg.session_ttl_seconds), path="/", httponly=True,
        samesite="strict", secure=_secure(request, mg),
    )
    return response


@router.post("/logout", response_model=Envelope[None], summary="End the current session")
async def logout(request: Request, active: Session) -> Response:
    await deps.sessions(request).revoke(request.cookies.get(deps.COOKIE, ""))
    response = ok(request, None)
    response.delete_cookie(deps.COOKIE, path="/", httponly=True, samesite="strict")
    return response


@router.get("/me", response_model=Envelope[SessionOut], summary="The logged-in user and the CSRF token")
async def me(request: Request, active: Session) -> Response:
    return ok(request, SessionOut(user=UserOut.of(active.user), csrfToken=active.csrf_token,
                                  expiresAt=active.expires_at))


@router.post("/password", response_model=Envelope[UserOut], summary="Change your own password")
async def change_password(body: PasswordChangeIn, request: Request, active: Session, mg: State) -> Response:
    if await mg.services.users.authenticate(active.user.username, body.currentPassword) is None:
        raise validation_error("current password is wrong")
    user = await mg.services.users.update(active.user.id, password=body.newPassword)
    # Other sessions (perhaps a stolen cookie) end; this one stays.
    await deps.sessions(request).revoke_user(user.id, keep_token=request.cookies.get(deps.COOKIE))
    return ok(request, UserOut.of(user))
