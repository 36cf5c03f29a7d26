"""Writes an audit row for every change made through the management API.

Pure ASGI around the routed app: after the answer it knows the status, the route
template (scope["route"]) and the caller the auth dependency resolved. Logins are
recorded by the login route itself (it knows the username tried).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from modelgate.api import deps

NOT_AUDITED = frozenset({"/auth/login"})


class AuditMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in deps.UNSAFE:
            await self.app(scope, receive, send)
            return
        status = 500

        async def capture(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, capture)
        finally:
            await self._record(scope, status)

    @staticmethod
    async def _record(scope: Scope, status: int) -> None:
        state = scope.get("state") or {}
        active = state.get("session")
        path = scope["path"]
        root = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root):]
        if active is None or path in NOT_AUDITED:
            return  # unauthenticated attempts are answered 401/403 and leave no actor to name
        route = scope.get("route")
        template = getattr(route, "path", path)
        request = Request(scope)
        mg = request.app.state.mg
        await mg.services.audit.record(
            actor=active.user.username, user_id=active.user.id, via=active.via,
            action=f"{scope['method']} {template}", target=path, status=status,
            client_ip=deps.client_ip(request), trace_id=state.get("trace_id"),
        )
