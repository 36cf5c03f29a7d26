"""Everything one gateway process holds: storage, caches, the upstream client, resilience."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import socket
from typing import Any, Mapping

import aiohttp
from sqlalchemy import select

from modelgate import logs
from modelgate.auth.crypto import SecretBox, load_encryption_key
from modelgate.auth.ratelimit import RedisTokenBucketLimiter, TokenBucketLimiter
from modelgate.config import Settings
from modelgate.errors import ErrorType, UpstreamError
from modelgate.gateway.upstream_checks import UpstreamChecks
from modelgate.providers.base import UpstreamRequest
from modelgate.providers.mock import MOCK_UPSTREAM
from modelgate.providers.registry import get_kind
from modelgate.routing.events import Clock, EventType, SystemClock
from modelgate.routing.executor import Executor
from modelgate.routing.lifecycle import ModelProbe, adapter_lister
from modelgate.routing.snapshot import Snapshot
from modelgate.services import Services
from modelgate.storage.db import Database
from modelgate.storage.models import ResilienceEvent
from modelgate.storage.snapshot_loader import load_snapshot
from modelgate.storage.usage_writer import UsageWriter

log = logging.getLogger("modelgate.runtime")

CONFIG_CHANNEL = "config-changed"


class Runtime:
    def __init__(self, settings: Settings, clock: Clock | None = None) -> None:
        self.settings = settings
        self.clock = clock
        self.snapshot = Snapshot()
        self.limiter = TokenBucketLimiter(settings.gateway.rate_limit)
        # Streams: only the connect phase has an aiohttp timeout; the rest is watched by the relay.
        self.stream_timeout = aiohttp.ClientTimeout(total=None, connect=settings.upstream.connect_timeout_seconds)
        self._refresh_wanted = asyncio.Event()
        self._tasks: list[asyncio.Task[Any]] = []
        self._publishing: set[asyncio.Task[Any]] = set()
        self._key_hashes: dict[bytes, str] = {}
        self._forced_seen: int | None = None  # last BREAKER_FORCED row applied
        self._loads_started = 0
        self._installed_load = 0

    async def start(self) -> None:
        settings = self.settings
        self.box = SecretBox(load_encryption_key(settings))
        self.db = Database.from_settings(settings)
        self.services = Services(self.db, self.box, settings, on_change=self.config_changed)
        self.redis = None
        if settings.redis_url:
            import redis.asyncio as aioredis

            self.redis = aioredis.from_url(settings.redis_url)
            self.limiter = RedisTokenBucketLimiter(self.redis, settings.gateway.rate_limit,
                                                   f"{settings.redis_prefix}bucket:")
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
        self._tasks.append(asyncio.create_task(self._flush_logs(), name="log-flush"))
        if self.redis is not None:
            self._tasks.append(asyncio.create_task(self._listen_for_changes(), name="config-changes"))
        if self.executor.lifecycle is not None:
            probe = ModelProbe(
                self.executor.lifecycle,
                adapter_lister(lambda kind: get_kind(kind).adapter, self.checks.http),
                self.checks.routes,
                SystemClock(),  # a schedule in real time, whatever clock the calls are timed with
                settings.gateway.lifecycle.probe_interval_seconds,
            )
            self._tasks.append(asyncio.create_task(probe.run(), name="model-probe"))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.writer.stop()
        await MOCK_UPSTREAM.stop()
        logs.flush()
        await self.http.close()
        await self.db.dispose()
        if self.redis is not None:
            await self.redis.aclose()

    async def fetch(self, req: UpstreamRequest, timeout: float) -> tuple[int, Mapping[str, str], bytes]:
        """One whole (non-streamed) upstream exchange; transport failures become typed errors."""
        try:
            async with self.http.request(req.method, req.url, headers=req.headers, data=req.body,
                                         timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
                return resp.status, resp.headers, await resp.read()
        except (asyncio.TimeoutError, aiohttp.ServerTimeoutError):
            raise UpstreamError(ErrorType.TIMEOUT_ERROR, f"Upstream did not answer within {timeout:.0f} s")
        except aiohttp.ClientError as exc:
            raise UpstreamError(ErrorType.NETWORK_ERROR, f"Upstream connection failed ({type(exc).__name__})")

    def hash_key(self, raw: bytes) -> str:
        # Memoised: sha256 per call is cheap but the dict lookup is cheaper; bounded by the key count.
        digest = self._key_hashes.get(raw)
        if digest is None:
            digest = hashlib.sha256(raw).hexdigest()
            if len(self._key_hashes) < 100_000:
                self._key_hashes[raw] = digest
        return digest

    async def refresh(self) -> None:
        # Loads can overlap (the timer's and a change's); a load that started earlier must not
        # replace the view of one that started later.
        self._loads_started += 1
        started = self._loads_started
        snapshot = await load_snapshot(self.db, self.box, self.settings)
        if not MOCK_UPSTREAM.started and any(
                r.provider_kind == "mock" for routes in snapshot.routes_by_model.values() for r in routes):
            await MOCK_UPSTREAM.start()
        if started > self._installed_load:
            self._installed_load = started
            self.snapshot = snapshot
            if self.executor.lifecycle is not None:
                self.executor.lifecycle.routable_again(
                    {r.model_instance_id for routes in snapshot.routes_by_model.values() for r in routes})
        await self._apply_forced_recoveries()

    async def _apply_forced_recoveries(self) -> None:
        """Close the breakers that an admin forced closed since the last refresh (in any process)."""
        query = select(ResilienceEvent.id, ResilienceEvent.endpoint).where(
            ResilienceEvent.event_type == EventType.BREAKER_FORCED.value,
            ResilienceEvent.id > (self._forced_seen or 0),
        ).order_by(ResilienceEvent.id)
        async with self.db.session() as session:
            rows = (await session.execute(query)).all()
        if self._forced_seen is not None:  # on the first refresh only mark where history ends
            for _, endpoint in rows:
                if endpoint:
                    self.executor.breakers.force_recover(endpoint, emit=False)
        if rows:
            self._forced_seen = rows[-1][0]
        elif self._forced_seen is None:
            self._forced_seen = 0

    def refresh_soon(self) -> None:
        self._refresh_wanted.set()

    def config_changed(self) -> None:
        """A committed configuration change: reload here, and tell the other instances through Redis."""
        self.refresh_soon()
        if self.redis is not None:
            task = asyncio.create_task(self._publish_change())
            self._publishing.add(task)
            task.add_done_callback(self._publishing.discard)

    async def _publish_change(self) -> None:
        try:
            await self.redis.publish(self.settings.redis_prefix + CONFIG_CHANNEL, b"changed")
        except Exception as exc:
            log.warning("could not announce a configuration change through Redis: %r", exc)

    async def _listen_for_changes(self) -> None:
        while True:
            try:
                async with self.redis.pubsub() as pubsub:
                    await pubsub.subscribe(self.settings.redis_prefix + CONFIG_CHANNEL)
                    async for message in pubsub.listen():
                        if message.get("type") == "message":
                            self.refresh_soon()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the periodic refresh still runs; retry the subscription
                log.warning("Redis subscription lost (%r); retrying in 5 s", exc)
                await asyncio.sleep(5)

    async def _flush_logs(self) -> None:
        while True:
            await asyncio.sleep(0.5)
            logs.flush()

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
