"""The ApiResponse envelope (spec 7.4), trace ids, and the error handlers of the management API."""

from __future__ import annotations

import logging
from typing import Any, Generic, TypeVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel
from sqlalchemy.exc import DataError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from modelgate.errors import (
    GatewayError,
    envelope_error,
    envelope_ok,
    error_body,
    internal_error,
)
from modelgate.tracing import current_trace_id, new_trace_id

log = logging.getLogger("modelgate.api")
T = TypeVar("T")
JSON = "application/json"


class ErrorInfo(BaseModel):
    code: str
    message: str


class Envelope(BaseModel, Generic[T]):
    """Every successful answer: `data` holds the payload."""

    success: bool = True
    data: T
    traceId: str
    timestamp: str


class ErrorEnvelope(BaseModel):
    success: bool = False
    error: ErrorInfo
    traceId: str
    timestamp: str


class ShortError(BaseModel):
    """401 / 403 refusals (spec 7.3)."""

    code: str
    message: str


def trace_id(request: Request) -> str:
    return request.scope.setdefault("state", {}).get("trace_id") or "unknown"


def _plain(data: Any) -> Any:
    if isinstance(data, BaseModel):
        return data.model_dump(mode="json")
    if isinstance(data, list):
        return [_plain(x) for x in data]
    return data


def ok(request: Request, data: Any, status: int = 200) -> Response:
    return Response(envelope_ok(_plain(data), trace_id(request)), status_code=status, media_type=JSON)


def error_response(request: Request, err: GatewayError) -> Response:
    body = error_body(err, trace_id(request))
    return Response(body, status_code=err.status, media_type=JSON, headers=err.headers or None)


class TraceMiddleware:
    """Gives each request a trace id (kept if the outer app already set one), sends it as
    X-Trace-Id, and turns any exception that escaped the handlers into a 500 envelope."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state = scope.setdefault("state", {})
        tid = state.get("trace_id") or new_trace_id()
        state["trace_id"] = tid
        current_trace_id.set(tid)
        started = False

        async def send_with_trace(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"x-trace-id"]
                headers.append((b"x-trace-id", tid.encode()))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_trace)
        except Exception:
            log.exception("management API error traceId=%s %s %s", tid, scope.get("method"), scope.get("path"))
            if started:
                raise
            body = envelope_error(internal_error(), tid)
            await send_with_trace({"type": "http.response.start", "status": 500,
                                   "headers": [(b"content-type", JSON.encode()),
                                               (b"content-length", str(len(body)).encode())]})
            await send_with_trace({"type": "http.response.body", "body": body})


def _validation_message(exc: RequestValidationError) -> str:
    parts = []
    for e in exc.errors()[:5]:
        where = ".".join(str(x) for x in e.get("loc", ()) if x not in ("body", "query", "path"))
        parts.append(f"{where}: {e.get('msg')}" if where else str(e.get("msg")))
    return "; ".join(parts) or "invalid request"


_HTTP_CODES = {400: "BAD_REQUEST", 401: "UNAUTHORIZED", 403: "ACCESS_DENIED", 404: "NOT_FOUND",
               405: "METHOD_NOT_ALLOWED", 409: "CONFLICT", 413: "PAYLOAD_TOO_LARGE", 415: "UNSUPPORTED_MEDIA_TYPE"}


def install_error_handlers(app: FastAPI) -> None:
    async def on_gateway_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, GatewayError)
        return error_response(request, exc)

    async def on_validation(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        return error_response(request, GatewayError(400, "VALIDATION_ERROR", _validation_message(exc)))

    async def on_http(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code == 404:
            message = f"no such endpoint: {request.method} {request.url.path}"
        elif exc.status_code == 405:
            message = f"method {request.method} is not allowed on {request.url.path}"
        else:
            message = str(exc.detail)
        code = _HTTP_CODES.get(exc.status_code, "INTERNAL_ERROR" if exc.status_code >= 500 else "BAD_REQUEST")
        return error_response(request, GatewayError(exc.status_code, code, message, headers=dict(exc.headers or {})))

    async def on_out_of_range(request: Request, exc: Exception) -> Response:
        # The last line of defence behind the schemas' bounds: a value the database cannot hold.
        log.warning("management API: a value the database cannot hold traceId=%s: %r", trace_id(request), exc)
        return error_response(request, GatewayError(400, "VALIDATION_ERROR", "a value is out of range"))

    app.add_exception_handler(GatewayError, on_gateway_error)
    app.add_exception_handler(OverflowError, on_out_of_range)
    app.add_exception_handler(DataError, on_out_of_range)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
