"""The messages protocol's endpoints beyond `/v1/messages` that agents rely on.

- `POST /alt/v1/messages/count_tokens`: the provider's own count where its wire has one
  (adapter `count_request`/`native_count_request` + `parse_count`), else a local tokenizer
  estimate; `x-modelgate-token-count: provider|estimate` says which. Same key, application
  and channel rules as inference; no call-log usage (nothing was generated).
- `GET /alt/v1/models`: the models the key may use, in the vendor's list shape.
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import Any
from urllib.parse import parse_qs

import orjson

from modelgate import errors, logs
from modelgate.errors import ErrorType, GatewayError, UpstreamError
from modelgate.gateway import token_estimate
from modelgate.gateway.asgi import Receive, Scope, Send, read_body, request_headers, send_bytes, send_error
from modelgate.gateway.inference import MAX_BODY_BYTES, parse_json, served_routes
from modelgate.protocols import messages
from modelgate.providers.base import Endpoint, refusal
from modelgate.providers.registry import get_kind
from modelgate.routing.executor import CallContext
from modelgate.routing.snapshot import Route
from modelgate.tracing import new_trace_id

log = logging.getLogger("modelgate.gateway")

COUNT_HEADER = b"x-modelgate-token-count"
_CODEC = messages.MessagesCodec()  # the protocol's key, version header and error shape


class _NoCount(Exception):
    """The chosen upstream cannot count this request: estimate instead."""


class MessagesExtras:
    def __init__(self, inference: Any) -> None:
        self.inference = inference  # InferenceHandler: authentication and the runtime

    async def _authenticate(self, scope: Scope, headers: dict[bytes, bytes]) -> Any:
        handler = self.inference
        return await handler.authenticate(_CODEC.api_key(headers), handler.client_ip(scope, headers))

    # --- POST /alt/v1/messages/count_tokens ---------------------------------------------------

    async def count_tokens(self, scope: Scope, receive: Receive, send: Send) -> None:
        trace_id = new_trace_id()
        headers = request_headers(scope)
        rt = self.inference.rt
        try:
            key, app = await self._authenticate(scope, headers)
            _CODEC.check_headers(headers)
            body = parse_json(await read_body(receive, MAX_BODY_BYTES))
            model = messages.validate_count(body, messages.betas(headers))
            routes = served_routes(rt.snapshot, app, model)
            ctx = CallContext(trace_id, key, app, model, False, rt.executor.deadline(app.timeout_seconds))
            count, source = await self._count(ctx, routes, body, messages.vendor_headers(headers))
        except GatewayError as err:
            logs.info(log, "count refused trace_id=%s status=%s code=%s: %s", trace_id, err.status, err.code, err.message)
            await send_error(send, err, trace_id, _CODEC.validation_body)
            return
        await send_bytes(send, 200, orjson.dumps({"input_tokens": count}), trace_id,
                         extra=[(COUNT_HEADER, source.encode())])

    async def _count(self, ctx: CallContext, routes: list[Route], body: dict[str, Any],
                     client_headers: dict[str, str]) -> tuple[int, str]:
        countable = [r for r in routes if hasattr(get_kind(r.provider_kind).adapter, "parse_count")]
        if countable:
            try:
                count = await self.inference.rt.executor.run(
                    ctx, countable, lambda route, endpoint: self._provider_count(ctx, route, endpoint, body,
                                                                                client_headers))
                return count, "provider"
            except _NoCount:
                pass
            except GatewayError as err:
                if err.status == 400:  # the upstream refused the body: the caller's to fix
                    raise
                # The upstream is failing: an estimate spares the agent paid calls to learn the size.
                log.warning("count answered by an estimate trace_id=%s: %s", ctx.trace_id, err.message)
        route = ctx.route or routes[0]
        return await token_estimate.estimate(messages.to_ir(body), route.upstream_model), "estimate"

    async def _provider_count(self, ctx: CallContext, route: Route, endpoint: Endpoint, body: dict[str, Any],
                              client_headers: dict[str, str]) -> int:
        adapter: Any = get_kind(route.provider_kind).adapter  # one that counts: _count checked parse_count
        if adapter.wire == messages.NATIVE_WIRE:
            req = adapter.native_count_request(body, route.upstream_model, endpoint, client_headers)
        else:
            req = adapter.count_request(messages.to_ir(body).with_system_hoisted(), route.upstream_model, endpoint)
        remaining = self.inference.rt.executor.remaining(ctx)
        if remaining <= 0:
            raise UpstreamError(ErrorType.TIMEOUT_ERROR, "The application's timeout was reached")
        status, resp_headers, data = await self.inference.rt.fetch(req, remaining)
        if status >= 400:
            error = refusal(adapter, status, data, resp_headers, endpoint)
            if error.error_type is ErrorType.MODEL_NOT_FOUND or status in (404, 405, 501):
                # An endpoint without a count route is no missing model: it never feeds deprecation.
                raise _NoCount()
            raise error
        try:
            return int(adapter.parse_count(data))
        except (ValueError, KeyError, TypeError, AttributeError):
            raise UpstreamError(ErrorType.UPSTREAM_ERROR, "Upstream answered the count with an unexpected body")

    # --- GET /alt/v1/models ------------------------------------------------------------------

    async def list_models(self, scope: Scope, receive: Receive, send: Send, model_id: str | None = None) -> None:
        """`GET /alt/v1/models` in the vendor's page shape, or with `model_id` one model
        (`GET /alt/v1/models/{model_id}`, the SDK's `models.retrieve`)."""
        trace_id = new_trace_id()
        headers = request_headers(scope)
        try:
            _, app = await self._authenticate(scope, headers)
            snapshot = self.inference.rt.snapshot
            if model_id is None:
                body = _page(sorted(snapshot.models_for(app), key=lambda r: r.model_id), _query(scope))
            else:
                body = _model_entry(served_routes(snapshot, app, model_id)[0])
        except GatewayError as err:
            await send_error(send, err, trace_id, _CODEC.validation_body)
            return
        await send_bytes(send, 200, orjson.dumps(body), trace_id)


def _model_entry(route: Route) -> dict[str, Any]:
    return {"type": "model", "id": route.model_id, "display_name": route.model_id,
            "created_at": _rfc3339(route.created)}


def _page(routes: list[Route], query: dict[str, str]) -> dict[str, Any]:
    """The vendor's pagination: `limit`, and `after_id` / `before_id` cursors."""
    limit = _limit(query.get("limit"))
    ids = [r.model_id for r in routes]
    start, end = 0, len(routes)
    if query.get("after_id") in ids:
        start = ids.index(query["after_id"]) + 1
    if query.get("before_id") in ids:
        end = ids.index(query["before_id"])
        start = max(start, end - limit)
    page = routes[start:end][:limit]
    data = [_model_entry(r) for r in page]
    return {"data": data, "has_more": start + len(page) < end,
            "first_id": data[0]["id"] if data else None, "last_id": data[-1]["id"] if data else None}


def _query(scope: Scope) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(scope.get("query_string", b"").decode("latin-1")).items()}


def _limit(value: str | None) -> int:
    """The vendor's page size: 1 to 1000, 20 by default."""
    if value is None:
        return 20
    if not value.isdigit() or not 1 <= int(value) <= 1000:
        raise errors.invalid_request("limit: must be an integer from 1 to 1000")
    return int(value)


def _rfc3339(unix_seconds: int) -> str:
    return datetime.fromtimestamp(unix_seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
