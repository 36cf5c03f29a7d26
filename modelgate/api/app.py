"""The management API application: mount it at /api/v1.

    from modelgate.api import create_management_app, ManagementState
    outer.mount("/api/v1", create_management_app(state))

Routes are declared without the /api/v1 prefix; the OpenAPI document is at
/api/v1/openapi.json and the interactive docs at /api/v1/docs.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from starlette.responses import HTMLResponse

from modelgate.api.audit import AuditMiddleware
from modelgate.api.docs_page import render as render_docs
from modelgate.api.envelope import (
    ErrorEnvelope,
    ShortError,
    TraceMiddleware,
    install_error_handlers,
)
from modelgate.api.routes import (
    admin,
    applications,
    auth,
    channels,
    config,
    models,
    observe,
    providers,
    users,
)
from modelgate.api.state import ManagementState
from modelgate.services.catalog import CatalogService
from modelgate.services.events import EventService
from modelgate.services.sessions import LoginThrottle, SessionService
from modelgate.services.stats import StatsService

API_PREFIX = "/api/v1"

_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorEnvelope, "description": "VALIDATION_ERROR / BAD_REQUEST"},
    401: {"model": ShortError, "description": "UNAUTHORIZED: no or expired login session"},
    403: {"model": ShortError, "description": "ACCESS_DENIED: role insufficient or CSRF token missing"},
    404: {"model": ErrorEnvelope, "description": "NOT_FOUND"},
    409: {"model": ErrorEnvelope, "description": "CONFLICT"},
    500: {"model": ErrorEnvelope, "description": "INTERNAL_ERROR"},
}

TAGS = [
    {"name": "auth", "description": "Login sessions (cookie `mg_session`) and CSRF tokens"},
    {"name": "plan-catalog", "description": "Provider plans, prices and model capabilities"},
    {"name": "stats", "description": "Usage from the call log"},
    {"name": "channels", "description": "Routes to providers, breakers, health checks (ADMIN)"},
    {"name": "providers", "description": "Upstream providers and encrypted keys (ADMIN)"},
    {"name": "models", "description": "Model instances and their lifecycle (ADMIN)"},
    {"name": "applications", "description": "Applications: timeout and authorised channels"},
    {"name": "keys", "description": "Gateway API keys (sk-...)"},
    {"name": "users", "description": "Console users (ADMIN)"},
    {"name": "ip-blacklist", "description": "Blocked addresses and networks (ADMIN)"},
    {"name": "call-log", "description": "One row per inference call"},
    {"name": "resilience", "description": "Retry, failover and breaker events (ADMIN)"},
    {"name": "api-tokens", "description": "Management API tokens, sent as `Authorization: Bearer` (ADMIN)"},
    {"name": "config", "description": "Declarative configuration: apply (dry run first) and export (ADMIN)"},
    {"name": "audit-log", "description": "Admin actions and logins: who, what, when, from where (ADMIN)"},
]


def create_management_app(state: ManagementState) -> FastAPI:
    app = FastAPI(
        title="modelgate management API",
        version="1",
        description="Served under /api/v1. Every answer is an ApiResponse envelope "
                    "(success, data | error, traceId, timestamp); auth refusals use short bodies.",
        openapi_tags=TAGS,
        responses=_ERRORS,
        # The docs page must know it lives under the mount point.
        servers=[{"url": API_PREFIX}],
        root_path_in_servers=False,
        docs_url=None,  # FastAPI's pages load their scripts from a CDN; ours is rendered here
        redoc_url=None,
    )
    app.state.mg = state
    app.state.sessions = SessionService(state.db, state.clock, state.session_ttl_seconds)
    store = None
    if state.redis is not None:
        from modelgate.shared.login_failures import RedisFailureStore

        store = RedisFailureStore(state.redis, state.clock)
    app.state.throttle = LoginThrottle(state.clock, state.login_max_failures, state.login_lock_seconds,
                                       state.login_ip_max_failures, store)
    app.state.catalog_service = CatalogService(state.catalog)
    app.state.stats_service = StatsService(state.db, state.catalog, state.clock)
    app.state.event_service = EventService(state.db)
    docs_html: list[str] = []

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        if not docs_html:
            docs_html.append(render_docs(app.openapi(), f"{API_PREFIX}/openapi.json"))
        return HTMLResponse(docs_html[0])

    install_error_handlers(app)
    app.add_middleware(AuditMiddleware)
    app.add_middleware(TraceMiddleware)  # added last: the outermost, so the audit row has the trace id
    for router in (
        auth.router, observe.catalog_router, observe.stats_router, channels.router, providers.router,
        models.router, models.blacklist_router, applications.router, applications.keys_router, users.router,
        observe.logs_router, observe.events_router, admin.tokens_router, admin.audit_router, config.router,
    ):
        app.include_router(router)
    return app
