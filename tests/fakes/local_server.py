"""A loopback aiohttp server on a free port, for fakes that need only a few routes."""

from __future__ import annotations

import ssl
from typing import Any

from aiohttp import web


class LocalServer:
    def __init__(self, routes: list[web.RouteDef], tls: ssl.SSLContext | None = None) -> None:
        self.app = web.Application()
        self.app.add_routes(routes)
        # A handler still running at the end of a test (a hang, a stalled stream) is cancelled at once
        # rather than awaited for aiohttp's default 60 s.
        self.runner = web.AppRunner(self.app, shutdown_timeout=0.1)
        self.tls = tls
        self.url = ""

    async def __aenter__(self) -> "LocalServer":
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0, ssl_context=self.tls)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"{'https' if self.tls else 'http'}://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.runner.cleanup()
