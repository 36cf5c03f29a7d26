"""Everything one gateway process holds: storage, caches, the upstream client, resilience."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import socket
from typing import Any

import aiohttp

from modelgate.auth.crypto import SecretBox, load_encryption_key
from modelgate.auth.ratelimit import TokenBucketLimiter
from modelgate.config import Settings
from modelgate.routing.events import Clock
from modelgate.gateway.upstream_checks import UpstreamChecks
from modelgate.providers.registry import get_kind
from modelgate.routing.executor import Executor
from modelgate.routing.lifecycle import ModelProbe, adapter_lister
from modelgate.routing.snapshot import Snapshot
from modelgate.services import Services
from modelgate.storage.db import Database
from modelgate.storage.snapshot_loader import load_snapshot
from modelgate.storage.usage_writer import UsageWriter

log = logging.getLogger("modelgate.runtime")


class Runtime:
    def __init__(self, settings: Settings, clock: Clock | None = None) -> None:
        self.settings = settings
        self.clock = clock
        self.snapshot = Snapshot()
        self.limiter = TokenBucketLimiter(settings.gateway.rate_limit)
        self.connect_timeout = settings.upstream.connect_timeout_seconds
        self._refresh_wanted = asyncio.Event()
        self._tasks: list[asyncio.Task[Any]] = []
        self._key_hashes: dict[bytes, str] = {}

    async def start(self) -> None:
        settings = self.settings
        self.box = SecretBox(load_encryption_key(settings))
        self.db = Database.from_settings(settings)
        self.services = Services(self.db, self.box, settings, on_change=self.refresh_soon)
        self.writer = UsageWriter(self.db, settings)
        self.writer.start()
        self.executor = Executor(settings, clock=self.clock, sink=self.writer, deprecate=self)
        upstream = settings.upstream
        self.http = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(
                limit=upstream.pool_size,
                limit_per_host=upstream.pool_size_per_host,
                ttl_dns_cache=300,
                family=socket.AF_UNSPEC,
            ),
            auto_decompress=True,
            raise_for_status=False,
        )
        self.checks = UpstreamChecks(self)
        await self.refresh()
        self._tasks.append(asyncio.create_task(self._refresh_loop(), name="snapshot-refresh"))
        if self.executor.lifecycle is not None:
            probe = ModelProbe(
                self.executor.lifecycle,
                adapter_lister(lambda kind: get_kind(kind).adapter, self.checks.http),
                self.checks.routes,
                self.executor.clock,
                settings.gateway.lifecycle.probe_interval_seconds,
            )
            self._tasks.append(asyncio.create_task(probe.run(), name="model-probe"))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.writer.stop()
        await self.http.close()
        await self.db.dispose()

    def hash_key(self, raw: bytes) -> str:
        # Memoised: sha256 per call is cheap but the dict lookup is cheaper; bounded by the key count.
        digest = self._key_hashes.get(raw)
        if digest is None:
            digest = hashlib.sha256(raw).hexdigest()
            if len(self._key_hashes) < 100_000:
                self._key_hashes[raw] = digest
        return digest

    async def refresh(self) -> None:
        self.snapshot = await load_snapshot(self.db, self.box, self.settings)

    def refresh_soon(self) -> None:
        self._refresh_wanted.set()

    async def _refresh_loop(self) -> None:
        interval = self.settings.gateway.cache_refresh_seconds
        while True:
            try:
                await asyncio.wait_for(self._refresh_wanted.wait(), interval)
            except TimeoutError:
                pass
            self._refresh_wanted.clear()
            try:
                await self.refresh()
            except Exception:
                log.exception("snapshot refresh failed; keeping the previous configuration")

    async def deprecate(self, model_instance_id: int, reason: str) -> None:
        """The lifecycle hook: repeated MODEL_NOT_FOUND takes the instance out of routing."""
        await self.services.models.update(model_instance_id, state="DEPRECATED")
        log.warning("model instance %s deprecated: %s", model_instance_id, reason)
