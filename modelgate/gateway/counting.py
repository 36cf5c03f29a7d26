"""Counting a request's input tokens before it is sent: `POST /alt/v1/messages/count_tokens`
(messages) and `POST /v1/responses/input_tokens` (Responses), which agents and SDKs call to
size their context.

The provider's own count where the route's wire has one: the client's body as is when the
route speaks the client's protocol (adapter `native_count_request`), else the IR in the
provider's count form (`count_request`); `parse_count` reads the answer. Elsewhere, or when
that endpoint is missing, keeps failing or takes longer than `gateway.count_timeout_seconds`
(retries and failover included), a local tokenizer estimate.
`x-modelgate-token-count: provider|estimate` says which. Same key, application and channel
rules as inference; no call-log usage (nothing was generated).
"""

from __future__ import annotations

import logging
from typing import Any

from modelgate import logs
from modelgate.errors import ErrorType, GatewayError, UpstreamError
from modelgate.gateway import token_estimate
from modelgate.gateway.asgi import Receive, Scope, Send, read_body, request_headers, send_bytes, send_error
from modelgate.gateway.inference import MAX_BODY_BYTES, parse_json, served_routes
from modelgate.protocols.base import CountingCodec
from modelgate.providers.base import Endpoint, prepare, refusal
from modelgate.providers.registry import get_kind
from modelgate.providers.tool_rules import fit_tool_names
from modelgate.routing.executor import CallContext
from modelgate.routing.snapshot import Route
from modelgate.tracing import new_trace_id

log = logging.getLogger("modelgate.gateway")

COUNT_HEADER = b"x-modelgate-token-count"


class _NoCount(Exception):
    """The chosen upstream cannot count this request: estimate instead."""


def _counting_adapter(route: Route, codec: CountingCodec) -> Any:
    """The route's adapter if it can count a request of `codec`'s protocol, else None."""
    adapter: Any = get_kind(route.provider_kind).adapter_for(codec.native_wire)
    if adapter.wire == codec.native_wire:
        return adapter if hasattr(adapter, "native_count_request") else None
    return adapter if hasattr(adapter, "count_request") else None


# How long a channel's model whose count route is missing (404/405/501, an unknown model there, or a
# model its count cannot take) is counted by the estimate without asking again. Claude Code counts
# before every request: a round trip to a route known to be missing delayed each of them.
UNCOUNTABLE_SECONDS = 3600.0


class TokenCounter:
    def __init__(self, inference: Any) -> None:
        self.inference = inference  # InferenceHandler: authentication and the runtime
        # (channel id, upstream model) -> the executor clock's time until which it is not asked to count.
        # Bounded by the configuration (channels x their models).
        self._uncountable: dict[tuple[int, str], float] = {}

    async def count_tokens(self, scope: Scope, receive: Receive, send: Send, codec: CountingCodec) -> None:
        trace_id = new_trace_id()
        headers = request_headers(scope)
        handler = self.inference
        rt = handler.rt
        try:
            key, app = await handler.authenticate(codec.api_key(headers), handler.client_ip(scope, headers))
            codec.check_headers(headers)
            body = parse_json(await read_body(receive, MAX_BODY_BYTES))
            model = codec.validate_count(body, headers)
            routes = served_routes(rt.snapshot, app, model)
            if (pending := codec.prefetch(body)) is not None:
                await pending
            limit = min(app.timeout_seconds, rt.settings.gateway.count_timeout_seconds)
            ctx = CallContext(trace_id, key, app, model, False, rt.executor.deadline(limit), advisory=True)
            count, source = await self._count(ctx, routes, body, codec, codec.upstream_headers(headers))
        except GatewayError as err:
            logs.info(log, "count refused trace_id=%s status=%s code=%s: %s", trace_id, err.status, err.code, err.message)
            await send_error(send, err, trace_id, codec.validation_body)
            return
        await send_bytes(send, 200, codec.count_answer(count), trace_id, extra=[(COUNT_HEADER, source.encode())])

    async def _count(self, ctx: CallContext, routes: list[Route], body: dict[str, Any], codec: CountingCodec,
                     client_headers: dict[str, str]) -> tuple[int, str]:
        now = self.inference.rt.executor.clock.monotonic()
        countable = [r for r in routes if _counting_adapter(r, codec) is not None
                     and self._uncountable.get((r.channel_id, r.upstream_model), 0.0) <= now]
        if countable:
            try:
                count = await self.inference.rt.executor.run(
                    ctx, countable, lambda route, endpoint: self._provider_count(ctx, route, endpoint, body, codec,
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
        return await token_estimate.estimate(codec.to_ir(body), route.upstream_model), "estimate"

    async def _provider_count(self, ctx: CallContext, route: Route, endpoint: Endpoint, body: dict[str, Any],
                              codec: CountingCodec, client_headers: dict[str, str]) -> int:
        # Cloud credentials obtained off the event loop, by the kind's adapter, as for inference (a
        # pass-through adapter signs with its kind's: Azure's Entra token).
        await prepare(get_kind(route.provider_kind).adapter, endpoint)
        adapter = _counting_adapter(route, codec)  # not None: _count chose countable routes
        if adapter.wire == codec.native_wire:
            req = adapter.native_count_request(body, route.upstream_model, endpoint, client_headers)
        else:
            ir, _ = fit_tool_names(codec.to_ir(body).with_system_hoisted(), adapter)
            req = adapter.count_request(ir, route.upstream_model, endpoint)
        remaining = self.inference.rt.executor.remaining(ctx)
        if remaining <= 0:
            raise UpstreamError(ErrorType.TIMEOUT_ERROR, "The application's timeout was reached")
        status, resp_headers, data = await self.inference.rt.fetch(req, remaining)
        if status >= 400:
            error = refusal(adapter, status, data, resp_headers, endpoint)
            unsupported = getattr(adapter, "count_unsupported", None)  # a refusal that means "cannot count this"
            if (error.error_type is ErrorType.MODEL_NOT_FOUND or status in (404, 405, 501)
                    or (unsupported is not None and unsupported(error))):
                # An endpoint without a count route is no missing model: it never feeds deprecation.
                expires = self.inference.rt.executor.clock.monotonic() + UNCOUNTABLE_SECONDS
                self._uncountable[(route.channel_id, route.upstream_model)] = expires
                raise _NoCount()
            raise error
        try:
            return int(adapter.parse_count(data))
        except (ValueError, KeyError, TypeError, AttributeError):
            raise UpstreamError(ErrorType.UPSTREAM_ERROR, "Upstream answered the count with an unexpected body")
