"""`GET /alt/v1/models[/{model_id}]`: the models the key may use, in the messages protocol's
shapes (agents discover models there). Its `count_tokens` is gateway/counting.py's."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any
from urllib.parse import parse_qs

import orjson

from modelgate import errors
from modelgate.errors import GatewayError
from modelgate.gateway.asgi import Receive, Scope, Send, request_headers, send_bytes, send_error
from modelgate.gateway.inference import served_routes
from modelgate.protocols import messages
from modelgate.routing.snapshot import Route
from modelgate.tracing import new_trace_id

_CODEC = messages.MessagesCodec()  # the protocol's key and error shape


class MessagesExtras:
    def __init__(self, inference: Any) -> None:
        self.inference = inference  # InferenceHandler: authentication and the runtime

    async def list_models(self, scope: Scope, receive: Receive, send: Send, model_id: str | None = None) -> None:
        """`GET /alt/v1/models` in the vendor's page shape, or with `model_id` one model
        (`GET /alt/v1/models/{model_id}`, the SDK's `models.retrieve`)."""
        trace_id = new_trace_id()
        headers = request_headers(scope)
        try:
            handler = self.inference
            _, app = await handler.authenticate(_CODEC.api_key(headers), handler.client_ip(scope, headers))
            snapshot = handler.rt.snapshot
            if model_id is None:
                body = _page(sorted(snapshot.models_for(app), key=lambda r: r.model_id), _query(scope))
            else:
                body = _model_entry(served_routes(snapshot, app, model_id)[0])
        except GatewayError as err:
            await send_error(send, err, trace_id, _CODEC.validation_body)
            return
        await send_bytes(send, 200, orjson.dumps(body), trace_id)


def _model_entry(route: Route) -> dict[str, Any]:
    # `lifecycle` is required by the vendor SDK's ModelInfo; a deprecated model instance is not served,
    # so every model listed is active.
    return {"type": "model", "id": route.model_id, "display_name": route.model_id,
            "created_at": _rfc3339(route.created), "lifecycle": "active"}


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
