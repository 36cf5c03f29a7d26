"""The ASGI application: inference routes on a direct dispatch, the rest to the management app."""

from __future__ import annotations

import gc
import hmac
import logging
from typing import Any

import orjson

from modelgate import errors
from modelgate.config import Settings, load_settings
from modelgate.gateway import metrics
from modelgate.gateway.asgi import Message, Receive, Scope, Send, send_bytes, send_error
from modelgate.gateway.counting import TokenCounter
from modelgate.gateway.inference import InferenceHandler
from modelgate.gateway.messages_extras import MessagesExtras
from modelgate.gateway.runtime import Runtime
from modelgate.logs import configure_logging
from modelgate.protocols.chat import ChatCodec
from modelgate.protocols.messages import MessagesCodec
from modelgate.protocols.responses import ResponsesCodec, ResponsesCompactCodec
from modelgate.safetext import shown
from modelgate.tracing import new_trace_id

log = logging.getLogger("modelgate.app")

# Agent requests decode into trees of thousands of containers. With the default gen-0 threshold (700)
# every such request sets off collections that walk its tree, and each full collection walks the whole
# start-up heap too. A server process freezes its start-up heap (never collected, never walked) and
# collects young objects less often: most request trees are freed by reference counting first
# (measured in bench/agent.py; docs/decisions.md).
GC_THRESHOLDS = (50_000, 20, 100)


def tune_gc() -> None:
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


class GatewayApp:
    def __init__(self, settings: Settings, runtime: Runtime | None = None, server_process: bool = False) -> None:
        self.settings = settings
        self.server_process = server_process  # owns its process: may tune the collector
        self.runtime = runtime or Runtime(settings)
        self.inference = InferenceHandler(self.runtime)
        self.extras = MessagesExtras(self.inference)
        self.counter = TokenCounter(self.inference)
        self.chat = ChatCodec()
        self.messages = MessagesCodec()
        self.responses = ResponsesCodec(self.runtime.items)
        self.compact = ResponsesCompactCodec()
        self.management: Any = None  # the management API and console, built on first use

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            await self.http(scope, receive, send)
        elif kind == "lifespan":
            await self.lifespan(receive, send)
        elif kind == "websocket":
            await send({"type": "websocket.close", "code": 1000})

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope["path"].rstrip("/") or "/"
        method = scope["method"]
        if method == "POST":
            if path == "/v1/chat/completions":
                return await self.inference.infer(scope, receive, send, self.chat)
            if path == "/alt/v1/messages":
                return await self.inference.infer(scope, receive, send, self.messages)
            if path == "/v1/responses":
                return await self.inference.infer(scope, receive, send, self.responses)
            if path == "/alt/v1/messages/count_tokens":
                return await self.counter.count_tokens(scope, receive, send, self.messages)
            if path == "/v1/responses/input_tokens":
                return await self.counter.count_tokens(scope, receive, send, self.responses)
            if path == "/v1/responses/compact":
                return await self.inference.infer(scope, receive, send, self.compact)
        elif method == "HEAD" and path == "/alt":
            # Claude Code probes its base URL at every start.
            return await send_bytes(send, 200, b"", new_trace_id())
        elif method == "GET":
            if path == "/v1/models":
                return await self.inference.list_models(scope, receive, send)
            if path == "/alt/v1/models":
                return await self.extras.list_models(scope, receive, send)
            if path.startswith("/v1/models/"):  # a model id may hold slashes (`org/model`)
                return await self.inference.list_models(scope, receive, send, path[len("/v1/models/"):])
            if path.startswith("/alt/v1/models/"):
                return await self.extras.list_models(scope, receive, send, path[len("/alt/v1/models/"):])
            if path == "/healthz":  # liveness: the process answers
                return await send_bytes(send, 200, b'{"status":"ok"}', new_trace_id())
            if path == "/readyz":
                return await self.readiness(send)
            if path == "/metrics":
                if not self._metrics_allowed(scope):
                    return await send_error(send, errors.unauthorized("A metrics token is required"), new_trace_id())
                body, content_type = metrics.render(await self.runtime.breaker_view())
                return await send_bytes(send, 200, body, new_trace_id(), content_type.encode())
        if not path.startswith(("/v1/", "/alt/")):
            return await (self.management or self._build_management())(scope, receive, send)
        if path.startswith("/v1/responses/"):
            # Retrieving, deleting or cancelling a stored response: the gateway stores none.
            return await self.inference.stateless_refusal(scope, receive, send, self.responses)
        await send_error(send, errors.not_found(f"No route for {shown(method, 16)} {shown(scope['path'], 256)}"), new_trace_id())

    async def readiness(self, send: Send) -> None:
        ready, checks = await self.runtime.readiness()
        body = orjson.dumps({"status": "ready" if ready else "unavailable", "checks": checks})
        await send_bytes(send, 200 if ready else 503, body, new_trace_id())

    def _metrics_allowed(self, scope: Scope) -> bool:
        token = self.settings.metrics_token
        if not token:
            return True
        sent = next((v for k, v in scope["headers"] if k == b"authorization"), b"")
        return hmac.compare_digest(sent, b"Bearer " + token.encode())

    async def lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.startup()
                except Exception as exc:
                    log.exception("start-up failed")
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                try:
                    await self.runtime.stop()
                finally:
                    await send({"type": "lifespan.shutdown.complete"})
                return

    async def startup(self) -> None:
        configure_logging(self.settings.log_level, self.settings.log_format)  # again in each worker process
        await self.runtime.start()
        if self.server_process:
            tune_gc()

    def _build_management(self) -> Any:
        # On first use: a worker that only serves inference never loads the management API,
        # its framework and the plan catalog (about 15 MB).
        self.management = management_app(self.runtime)
        return self.management


def management_app(runtime: Runtime) -> Any:
    """The management API at /api/v1 and the console at /console, on the same server."""
    from starlette.applications import Starlette
    from starlette.responses import RedirectResponse, Response
    from starlette.routing import Mount, Route

    from modelgate.api import API_PREFIX, ManagementState, create_management_app
    from modelgate.api.console import console_app
    from modelgate.api.security_headers import SecurityHeaders
    from modelgate.catalog import load_catalog

    state = ManagementState(
        db=runtime.db,
        services=runtime.services,
        settings=runtime.settings,
        catalog=load_catalog(runtime.settings.catalog_file),
        breakers=runtime.executor.breakers,
        health_check=runtime.checks.health_check,
        redis=runtime.link,
    )
    routes: list[Any] = [Mount(API_PREFIX, app=create_management_app(state))]
    console = console_app()
    if console is not None:
        routes.append(Route("/", lambda request: RedirectResponse("/console/")))
        routes.append(Mount("/console", app=console))

    async def not_found(request: Any, exc: Exception) -> Response:
        trace_id = new_trace_id()
        body = errors.envelope_error(
            errors.not_found(f"No route for {shown(request.method, 16)} {shown(request.url.path, 256)}"), trace_id)
        return Response(body, 404, {"x-trace-id": trace_id}, media_type="application/json")

    app = Starlette(routes=routes, exception_handlers={404: not_found, 405: not_found})
    return SecurityHeaders(_SettleChanges(app, runtime.settle))


class _SettleChanges:
    """A request that changed the configuration is answered once this process applies the change."""

    def __init__(self, app: Any, settle: Any) -> None:
        self.app = app
        self.settle = settle

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            return await self.app(scope, receive, send)

        async def send_settled(message: Message) -> None:
            if message["type"] == "http.response.start":
                try:
                    await self.settle()
                except Exception:  # the periodic refresh retries; the change itself is committed
                    log.exception("applying a configuration change failed")
            await send(message)

        await self.app(scope, receive, send_settled)


def create_app() -> GatewayApp:
    """ASGI factory for servers that import the app in each worker (settings from env/config)."""
    return GatewayApp(load_settings(), server_process=True)
