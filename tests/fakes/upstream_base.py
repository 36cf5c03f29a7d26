"""Shared plumbing of the fake upstreams: an aiohttp server on 127.0.0.1 with a
random port, request recording and scripted failures.

Each provider fake subclasses `FakeUpstream`, adds its routes and answers in
that provider's real wire format. `send` performs an adapter's
`UpstreamRequest` the way the gateway would, so tests exercise the real bytes.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

import aiohttp
import orjson
from aiohttp import web

from modelgate.providers.base import UpstreamRequest


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return orjson.loads(self.body)


@dataclass
class Failure:
    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json"


class FakeUpstream:
    """Base of every fake: subclasses register routes in `routes()`."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self._failures: deque[Failure] = deque()
        self.cut_stream = False  # next streams stop before their proper end
        self.on_request: Callable[[], None] | None = None  # runs while the gateway awaits the answer
        self._runner: web.AppRunner | None = None
        self.port = 0

    def routes(self, app: web.Application) -> None:
        raise NotImplementedError

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> "FakeUpstream":
        app = web.Application(middlewares=[self._middleware])
        self.routes(app)
        # Cancel a handler still running when the test ends (a stalled stream) instead of awaiting it.
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def close(self) -> None:
        if self._runner:
            await self._runner.cleanup()

    def fail_next(self, status: int, body: Any, headers: dict[str, str] | None = None,
                  times: int = 1, content_type: str = "application/json") -> None:
        """Answer the next `times` requests with this error instead of the real answer."""
        raw = body if isinstance(body, bytes) else orjson.dumps(body)
        for _ in range(times):
            self._failures.append(Failure(status, raw, headers or {}, content_type))

    @property
    def last(self) -> Recorded:
        return self.requests[-1]

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Any) -> web.StreamResponse:
        body = await request.read()
        self.requests.append(
            Recorded(request.method, request.path, dict(request.query),
                     {k.lower(): v for k, v in request.headers.items()}, body)
        )
        if self.on_request is not None:
            self.on_request()
        if self._failures:
            f = self._failures.popleft()
            return web.Response(status=f.status, body=f.body, headers=f.headers, content_type=f.content_type)
        return await handler(request)

    async def write_stream(self, request: web.Request, frames: list[bytes], content_type: str,
                           final_frames: int = 1) -> web.StreamResponse:
        """Send stream frames; with `cut_stream` the last `final_frames` frames are withheld."""
        resp = web.StreamResponse(headers={"content-type": content_type})
        await resp.prepare(request)
        if self.cut_stream:
            frames = frames[:-final_frames]
        for frame in frames:
            await resp.write(frame)
        await resp.write_eof()
        return resp


def json_response(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(status=status, body=orjson.dumps(data), headers=headers, content_type="application/json")


async def send(req: UpstreamRequest) -> tuple[int, dict[str, str], bytes]:
    """Perform an adapter-built request exactly as built (no extra headers of our own)."""
    async with aiohttp.ClientSession(skip_auto_headers=("User-Agent",)) as session:
        async with session.request(req.method, req.url, headers=req.headers, data=req.body) as resp:
            body = await resp.read()
            return resp.status, {k.lower(): v for k, v in resp.headers.items()}, body


def random_chunks(data: bytes, seed: int = 0, max_size: int = 7) -> list[bytes]:
    """Split bytes at random points, as a network would."""
    rng = random.Random(seed)
    out, i = [], 0
    while i < len(data):
        n = rng.randint(1, max_size)
        out.append(data[i : i + n])
        i += n
    return out


def decode_stream(decoder: Any, body: bytes, seed: int = 0) -> list[Any]:
    """Feed a whole stream body to a decoder in small random chunks, then close it."""
    events: list[Any] = []
    for chunk in random_chunks(body, seed):
        events.extend(decoder.feed(chunk))
    events.extend(decoder.close())
    return events
