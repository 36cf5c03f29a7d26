"""Runs the real gateway (uvicorn, real sockets) inside the test's event loop.

Tests configure it through the service layer, exactly as an operator would
through the CLI or the management API, then call it with the official SDKs.
"""

from __future__ import annotations

import asyncio
import base64
import os
from dataclasses import dataclass
from typing import Any

import uvicorn

from modelgate.config import Settings
from modelgate.gateway.app import GatewayApp
from modelgate.routing.events import Clock
from modelgate.server import prepare


@dataclass
class Wiring:
    key: str  # gateway key plaintext
    app_id: int
    channel_ids: list[int]
    provider_id: int


class GatewayHarness:
    server_class: type[uvicorn.Server] = uvicorn.Server

    def __init__(self, settings: Settings, clock: Clock | None = None) -> None:
        self.settings = settings
        self.app = GatewayApp(settings)
        if clock is not None:
            self.app.runtime.clock = clock
        self.server: uvicorn.Server | None = None
        self._task: asyncio.Task[Any] | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def runtime(self) -> Any:
        return self.app.runtime

    @property
    def services(self) -> Any:
        return self.app.runtime.services

    async def start(self) -> "GatewayHarness":
        await prepare(self.settings)
        config = uvicorn.Config(self.app, host="127.0.0.1", port=0, loop="none", http="httptools",
                                lifespan="on", log_level="warning", access_log=False,
                                timeout_graceful_shutdown=self.settings.server.drain_seconds,
                                proxy_headers=False)  # as modelgate.server runs it
        self.server = self.server_class(config)
        self._task = asyncio.create_task(self.server.serve())
        while not self.server.started:
            if self._task.done():
                self._task.result()  # start-up failed: raise its error
            await asyncio.sleep(0.01)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self.server is not None and self._task is not None:
            self.server.should_exit = True
            await self._task

    async def wire(
        self,
        base_url: str,
        models: list[Any],
        kind: str = "openai-compatible",
        upstream_keys: tuple[str, ...] = ("up-key-1",),
        name: str = "main",
        app_name: str | None = None,
        priority: int = 0,
        authorise: bool = True,
        rate_capacity: float | None = None,
        rate_refill: float | None = None,
        timeout_seconds: float | None = None,
        options: dict[str, Any] | None = None,
    ) -> Wiring:
        """Provider + channel + application + key, then a snapshot refresh."""
        svc = self.services
        provider = await svc.providers.create(f"{name}-provider", kind, base_url=base_url, options=options,
                                              keys=list(upstream_keys))
        channel = await svc.channels.create(f"{name}-channel", provider.id, models=models, priority=priority)
        app = await svc.applications.create(app_name or f"{name}-app", timeout_seconds=timeout_seconds)
        if authorise:
            await svc.applications.authorize_channel(app.id, channel.id)
        created = await svc.api_keys.create(app.id, rate_capacity=rate_capacity, rate_refill=rate_refill)
        await self.runtime.refresh()
        return Wiring(created.plaintext, app.id, [channel.id], provider.id)


def harness_settings(tmp_path: Any, **overrides: Any) -> Settings:
    settings = Settings(
        data_dir=str(tmp_path / "data"),
        encryption_key=base64.b64encode(os.urandom(32)).decode(),
        log_level="WARNING",
    )
    settings.usage.flush_interval_seconds = 0.05
    for dotted, value in overrides.items():
        target = settings
        *parents, leaf = dotted.split("__")
        for part in parents:
            target = getattr(target, part)
        setattr(target, leaf, value)
    return settings
