"""Minimal ASGI plumbing for the inference hot path.

The inference endpoints are plain ASGI callables rather than framework routes:
a framework's request/response objects, dependency injection and middleware
stack cost more per call than the whole of our own work (measured in bench/).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from modelgate.errors import GatewayError, ValidationBody, error_body, invalid_request

# The ASGI types, as Starlette spells them: its apps and ours wrap each other.
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

JSON = b"application/json"
SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),  # tell reverse proxies not to buffer the stream
]


class ClientDisconnected(Exception):
    pass


async def read_body(receive: Receive, limit: int) -> bytes:
    chunks = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnected()
        chunk = message.get("body", b"")
        if chunk:
            size += len(chunk)
            if size > limit:
                raise invalid_request(f"The request body is larger than {limit} bytes")
            chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def request_headers(scope: Scope) -> dict[bytes, bytes]:
    return {name: value for name, value in scope["headers"]}


async def send_bytes(
    send: Send,
    status: int,
    body: bytes,
    trace_id: str,
    content_type: bytes = JSON,
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    # With a length the server sends the body as is, not as a chunked stream (and clients know its size).
    headers = [(b"content-type", content_type), (b"content-length", b"%d" % len(body)),
               (b"x-trace-id", trace_id.encode())]
    if extra:
        headers.extend(extra)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def send_error(send: Send, err: GatewayError, trace_id: str,
                     validation_body: ValidationBody | None = None) -> None:
    """`err` in its spec shape; `validation_body` gives a client protocol's 7.2 shape."""
    extra = [(name.encode(), value.encode()) for name, value in err.headers.items()]
    await send_bytes(send, err.status, error_body(err, trace_id, validation_body), trace_id, extra=extra)
