"""Request dependencies: the mounted state, the login session, roles and CSRF."""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, Request

from modelgate.api.state import ManagementState
from modelgate.auth.client_ip import forwarded_address
from modelgate.errors import access_denied, not_found, unauthorized
from modelgate.services.sessions import ActiveSession, LoginThrottle, SessionService
from modelgate.services.views import ApplicationView

COOKIE = "mg_session"
CSRF_HEADER = "X-CSRF-Token"
UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def state(request: Request) -> ManagementState:
    return request.app.state.mg


def sessions(request: Request) -> SessionService:
    return request.app.state.sessions


def throttle(request: Request) -> LoginThrottle:
    return request.app.state.throttle


def client_ip(request: Request) -> str | None:
    mg: ManagementState = request.app.state.mg
    if mg.settings.gateway.trust_forwarded_for:
        forwarded = request.headers.get("x-forwarded-for")
        address = forwarded_address(forwarded) if forwarded else None
        if address is not None:
            return address
    return request.client.host if request.client else None


def bearer(request: Request) -> str | None:
    value = request.headers.get("authorization", "")
    return value[7:].strip() if value[:7].lower() == "bearer " else None


async def current_session(request: Request) -> ActiveSession:
    presented = bearer(request)
    if presented is not None:
        # A management API token: no cookie is involved, so there is no CSRF to guard against.
        identity = await state(request).services.admin_tokens.resolve(presented)
        if identity is None:
            raise unauthorized("Invalid, expired or revoked API token")
        token_session = ActiveSession(identity.user, "", identity.expires_at, token_id=identity.token_id)
        request.state.session = token_session
        return token_session
    token = request.cookies.get(COOKIE)
    active = await sessions(request).resolve(token) if token else None
    if active is None:
        raise unauthorized("Login required")
    if request.method in UNSAFE:
        sent = request.headers.get(CSRF_HEADER, "")
        if not hmac.compare_digest(sent.encode(), active.csrf_token.encode()):
            raise access_denied("Missing or invalid CSRF token")
    request.state.session = active
    return active


async def require_admin(active: Annotated[ActiveSession, Depends(current_session)]) -> ActiveSession:
    if active.user.role != "ADMIN":
        raise access_denied("This endpoint requires the ADMIN role")
    return active


async def require_login_session(active: Annotated[ActiveSession, Depends(require_admin)]) -> ActiveSession:
    """Admin actions that an API token may not do (minting more tokens)."""
    if active.token_id is not None:
        raise access_denied("This endpoint needs a console login, not an API token")
    return active


Session = Annotated[ActiveSession, Depends(current_session)]
LoggedInAdmin = Annotated[ActiveSession, Depends(require_login_session)]
Admin = Annotated[ActiveSession, Depends(require_admin)]
State = Annotated[ManagementState, Depends(state)]


def is_admin(active: ActiveSession) -> bool:
    return active.user.role == "ADMIN"


async def owned_application_ids(mg: ManagementState, active: ActiveSession) -> list[int] | None:
    """None for an admin (everything); else the ids of the applications the user owns."""
    if is_admin(active):
        return None
    return [a.id for a in await mg.services.applications.list() if a.owner_id == active.user.id]


async def visible_application(mg: ManagementState, active: ActiveSession, app_id: int) -> ApplicationView:
    """The application if the caller may see it; other users' applications are 404 to a USER."""
    app = await mg.services.applications.get(app_id)
    if not is_admin(active) and app.owner_id != active.user.id:
        raise not_found(f"application {app_id} not found")
    return app
