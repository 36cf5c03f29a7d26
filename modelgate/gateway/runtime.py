"""Everything one gateway process holds: storage, caches, the upstream client, resilience."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import re
import resource
import socket
import time
import weakref
from typing import Any, Callable, Mapping, cast

import aiohttp
from sqlalchemy import select, text

from modelgate import logs
from modelgate.auth.crypto import SecretBox, load_encryption_key
from modelgate.auth.ratelimit import RedisTokenBucketLimiter, TokenBucketLimiter
from modelgate.config import Settings
from modelgate.errors import ErrorType, UpstreamError
from modelgate.gateway import metrics
from modelgate.gateway.upstream_checks import UpstreamChecks
from modelgate.protocols import sse
from modelgate.protocols.responses.items import ItemMemory
from modelgate.providers.base import UpstreamRequest
from modelgate.providers.mock import MOCK_UPSTREAM
from modelgate.providers.output_caps import LearnedCaps
from modelgate.providers.registry import get_kind
from modelgate.routing.breaker import BreakerRegistry
from modelgate.routing.events import Clock, EventType, LoopClock, SystemClock
from modelgate.routing.executor import Executor
from modelgate.routing.lifecycle import ModelProbe, adapter_lister
from modelgate.routing.snapshot import Snapshot
from modelgate.services import Services
from modelgate.shared.breakers import SharedBreakers
from modelgate.shared.change_marker import marker_mtime, marker_path, touch_change_marker
from modelgate.shared.config_version import ConfigVersion
from modelgate.shared.cooldowns import SharedCooldowns
from modelgate.shared.items import SharedItems
from modelgate.shared.lifecycle_counts import SharedNotFoundCounts
from modelgate.shared.redis_link import RedisLink, redis_client
from modelgate.shared.schedule import Schedule
from modelgate.storage.db import Database
from modelgate.storage.models import ResilienceEvent
from modelgate.storage.retention import RetentionJob
from modelgate.storage.snapshot_loader import load_snapshot
from modelgate.storage.usage_writer import UsageWriter

log = logging.getLogger("modelgate.runtime")


ERROR_BODY_BYTES = 64 * 1024  # of a refusal body: enough for any provider's error object


_NOT_SPACE = re.compile(rb"\S")


async def read_capped(resp: aiohttp.ClientResponse, limit: int, truncate: bool = False,
                      started: Callable[[], None] | None = None) -> bytes:
    """The body, read as it arrives and joined once; beyond `limit` bytes an UPSTREAM_ERROR
    (or, with `truncate`, the first `limit` bytes). `started` is called once, at the body's first
    byte that is not whitespace (proxies pad a slow answer with whitespace to keep it open), unless
    the whole body came with it: nothing is waited for after that, and moving the caller's timer for
    nothing cost about 1.4 µs of most calls."""
    if resp.content_length is not None and resp.content_length > limit and not truncate:
        raise body_too_large(limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in resp.content.iter_any():
        if started is not None and _NOT_SPACE.search(chunk):
            if not resp.content.at_eof():
                started()
            started = None
        size += len(chunk)
        if size > limit:
            if not truncate:
                raise body_too_large(limit)
            chunks.append(chunk[: len(chunk) - (size - limit)])
            break
        chunks.append(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def body_too_large(limit: int) -> UpstreamError:
    return UpstreamError(ErrorType.UPSTREAM_ERROR, f"Upstream answer larger than {limit} bytes")


FILES_PER_CALL = 2  # the client's socket and the upstream's
FILES_RESERVED = 256  # database, logs, listening sockets, Redis


def raise_open_file_limit() -> int:
    """Raise this process's open-file soft limit to its hard limit; returns the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        hard = max(soft, 1 << 20)
    if soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as exc:
            log.warning("could not raise the open-file limit from %s to %s: %s", soft, hard, exc)
    return soft


def in_flight_allowed_by_open_files() -> int:
    soft = raise_open_file_limit()
    allowed = max(1, (soft - FILES_RESERVED) // FILES_PER_CALL)
    if allowed < 1000:
        log.warning("the open-file limit (%s) allows only %s calls in flight per worker", soft, allowed)
    return allowed


async def cancel_and_wait(tasks: list[asyncio.Task[Any]]) -> None:
    """Cancel `tasks` and wait for their end. On Python 3.11 asyncio.wait_for (redis-py wraps every socket
    write in one) drops a cancel that arrives as its inner step finishes: a task still running a second
    later (its clean-up takes less) is cancelled again."""
    pending = set(tasks)
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=1.0)
    await asyncio.gather(*tasks, return_exceptions=True)  # all ended: only collects their exceptions


_RUNTIMES: weakref.WeakSet[Runtime] = weakref.WeakSet()


def begin_drain() -> None:
    """Shutdown has begun (SIGTERM): /readyz answers "draining" from now on, while calls are still served."""
    for runtime in _RUNTIMES:
        runtime.draining = True


class Runtime:
    def __init__(self, settings: Settings, clock: Clock | None = None) -> None:
        _RUNTIMES.add(self)
        self.settings = settings
        self.clock = clock
        self.snapshot = Snapshot()
        self.limiter: TokenBucketLimiter | RedisTokenBucketLimiter = TokenBucketLimiter(settings.gateway.rate_limit)
        upstream = settings.upstream
        # `sock_connect`, not `connect`: aiohttp's `connect` includes waiting for a pooled
        # connection, a local wait that must never count as an upstream failure.
        # The rest is watched around each request (first byte, whole call, stream gaps).
        self.connect_limit = aiohttp.ClientTimeout(total=None, sock_connect=upstream.connect_timeout_seconds)
        self.in_flight = 0  # calls of this worker between admission and their end
        self.output_caps = LearnedCaps()  # output-token caps the upstreams' refusals named
        self.items = ItemMemory()  # converted Responses answers' items, for later `item_reference`s
        self.shared_items: SharedItems | None = None
        self.max_in_flight = upstream.max_in_flight
        self._refresh_wanted = asyncio.Event()
        self._tasks: list[asyncio.Task[Any]] = []
        self._publishing: set[asyncio.Task[Any]] = set()
        self._key_hashes: dict[bytes, str] = {}
        self._forced_seen: int | None = None  # last BREAKER_FORCED row applied
        self._loads_started = 0
        self._installed_load = 0
        self._version_seen: int | None = None  # configuration version of the installed snapshot
        self._full_refresh_at = 0.0
        self.draining = False
        self.link: RedisLink | None = None
        self.tracer: Any = None  # modelgate.gateway.otel.CallTracer when OpenTelemetry is configured
        self._changes = 0  # configuration changes made through this process
        self._applied_changes = 0  # of those, the ones the installed snapshot includes

    async def start(self) -> None:
        settings = self.settings
        self.loop = asyncio.get_running_loop()  # the calls' loop: read once, not at every use (LoopClock)
        self.box = SecretBox(load_encryption_key(settings))
        self.db = Database.from_settings(settings)
        self.services = Services(self.db, self.box, settings, on_change=self.config_changed)
        self.config_version: ConfigVersion | None = None
        if settings.redis_url:
            self.link = RedisLink(settings)
            self.config_version = ConfigVersion(self.link)
            local_limiter = cast(TokenBucketLimiter, self.limiter)  # this process's own until now
            self.limiter = RedisTokenBucketLimiter(self.link, settings.gateway.rate_limit, local_limiter)
        self.schedule = Schedule(self.link, self.db)
        # Its own engine: short deadlines, and a pool that management queries cannot exhaust.
        self.writer_db = Database.from_settings(settings, timeout=settings.usage.db_timeout_seconds)
        self.writer = UsageWriter(self.writer_db, settings)
        self.writer.start()
        self.executor = Executor(settings, clock=self.clock or LoopClock(self.loop), sink=metrics.CountingSink(self.writer), deprecate=self)
        self.shared_breakers: SharedBreakers | None = None
        self.shared_cooldowns: SharedCooldowns | None = None
        if self.link is not None:  # one gateway across workers and instances
            local = cast(BreakerRegistry, self.executor.breakers)  # the executor's own until now
            self.shared_breakers = self.executor.breakers = SharedBreakers(local, self.link)
            self.shared_cooldowns = SharedCooldowns(self.executor.failover, self.link, self.shared_breakers.channel)
            if self.executor.lifecycle is not None:
                self.executor.lifecycle.shared = SharedNotFoundCounts(self.link, settings.gateway.lifecycle)
            self.shared_items = SharedItems(self.items, self.link)
        metrics.bind(self)
        if settings.telemetry.otlp_endpoint:
            from modelgate.gateway import otel  # the SDK is imported only when tracing is on

            self.tracer = otel.from_settings(settings)
        upstream = settings.upstream
        sse.max_event_bytes = upstream.max_event_bytes
        self.max_in_flight = min(upstream.max_in_flight, in_flight_allowed_by_open_files())
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
        self._tasks.append(asyncio.create_task(self._watch_change_marker(), name="config-marker"))
        self.retention = RetentionJob(self.db, settings)
        if settings.usage.retention_days > 0:
            self._tasks.append(asyncio.create_task(self.retention.run_forever(self._retention_pass),
                                                   name="retention"))
        if self.link is not None:
            self._tasks.append(asyncio.create_task(self._listen_for_changes(), name="config-changes"))
        if self.executor.lifecycle is not None:
            adapter_for = lambda kind: get_kind(kind).adapter  # noqa: E731
            probe = ModelProbe(
                self.executor.lifecycle,
                adapter_lister(adapter_for, self.checks.http),
                self.checks.routes,
                SystemClock(),  # a schedule in real time, whatever clock the calls are timed with
                settings.gateway.lifecycle.probe_interval_seconds,
                self.schedule.runs_here,
                adapter_for,
            )
            self._tasks.append(asyncio.create_task(probe.run(), name="model-probe"))

    async def stop(self) -> None:
        self.draining = True
        await cancel_and_wait(self._tasks)
        await self.schedule.close()
        if self.shared_breakers is not None:
            await self.shared_breakers.close()
        if self.shared_items is not None:
            await self.shared_items.close()
        await self.writer.stop()
        await MOCK_UPSTREAM.stop()
        if self.tracer is not None:
            await asyncio.to_thread(self.tracer.shutdown)
        logs.flush()
        await self.http.close()
        # A silent database or Redis must not hold the shutdown: after the writer's limit
        # (usage.shutdown_flush_seconds) the rest takes at most usage.db_timeout_seconds.
        closing = [self.writer_db.dispose(), self.db.dispose()]
        if self.link is not None:
            closing.append(self.link.close())
        limit = self.settings.usage.db_timeout_seconds
        try:
            async with asyncio.timeout(limit):
                for result in await asyncio.gather(*closing, return_exceptions=True):
                    if isinstance(result, Exception):
                        log.warning("closing database or Redis connections failed: %r", result)
        except TimeoutError:
            log.warning("closing database or Redis connections took over %gs; left to the exit", limit)

    async def readiness(self) -> tuple[bool, dict[str, str]]:
        """For load balancers: ready = database reachable, snapshot loaded, not draining.

        An unreachable Redis is reported but does not make the instance unready: it serves
        with per-instance state, and taking every instance out would turn a Redis outage
        into a full one.
        """
        checks: dict[str, str] = {}
        ready = True
        try:
            async with asyncio.timeout(2.0), self.db.engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
            checks["database"] = "ok"
        except Exception as exc:
            checks["database"] = f"unreachable ({type(exc).__name__})"
            ready = False
        if self.link is not None:
            checks["redis"] = "ok" if await self.link.ping() else "unreachable: limits and breakers are per instance"
        checks["snapshot"] = "loaded" if self._installed_load else "not loaded"
        ready = ready and bool(self._installed_load)
        checks["draining"] = "yes" if self.draining else "no"
        return ready and not self.draining, checks

    async def breaker_view(self) -> dict[str, Any]:
        """Breaker states of every routed endpoint, the deployment's when Redis holds them."""
        ids = {e.id for routes in self.snapshot.routes_by_model.values() for r in routes for e in r.endpoints}
        return await self.executor.breakers.view(sorted(ids))

    async def fetch(self, req: UpstreamRequest, timeout: float) -> tuple[int, Mapping[str, str], bytes]:
        """One whole (non-streamed) upstream exchange within `timeout` seconds, with the
        per-attempt connect, first-byte and body limits; transport failures become typed errors."""
        upstream = self.settings.upstream
        first_byte = min(timeout, upstream.response_timeout_seconds or timeout)
        loop = self.loop
        # One timer for the call's limit and the attempt's current one (first byte, then body), set for
        # whichever comes first: a second, nested asyncio.timeout cost ~5 µs of every call. Where both
        # fall at once, the call's limit is the one reported.
        now = loop.time()
        deadline = now + timeout
        body_started = False

        def on_body() -> None:  # the answer's first byte: from here the body limit applies
            nonlocal body_started
            body_started = True
            body_limit = upstream.body_timeout_seconds
            limit.reschedule(min(deadline, loop.time() + body_limit) if body_limit else deadline)

        try:
            async with asyncio.timeout_at(min(deadline, now + first_byte)) as limit:
                resp = await self.http.request(req.method, req.url, headers=req.headers, data=req.body,
                                               timeout=self.connect_limit)
                try:
                    if resp.status >= 400:  # a refusal: its head is enough to classify it
                        body = await read_capped(resp, ERROR_BODY_BYTES, truncate=True, started=on_body)
                    else:
                        body = await read_capped(resp, upstream.max_body_bytes, started=on_body)
                except BaseException:
                    resp.close()  # not back to the pool: the rest of its body is unread
                    raise
            resp.release()
            return resp.status, resp.headers, body
        except aiohttp.ConnectionTimeoutError:
            raise UpstreamError(ErrorType.TIMEOUT_ERROR,
                                f"Upstream did not accept a connection within {upstream.connect_timeout_seconds:g} s")
        except (asyncio.TimeoutError, aiohttp.ServerTimeoutError):
            if limit.expired() and limit.when() < deadline:  # type: ignore[operator]
                if body_started:
                    raise UpstreamError(ErrorType.TIMEOUT_ERROR, "Upstream did not finish its answer within "
                                        f"{upstream.body_timeout_seconds:g} s of its first byte") from None
                raise UpstreamError(ErrorType.TIMEOUT_ERROR, f"Upstream sent no answer within {first_byte:g} s") from None
            raise UpstreamError(ErrorType.TIMEOUT_ERROR, f"Upstream did not answer within {timeout:.0f} s")
        except aiohttp.ClientError as exc:
            raise UpstreamError(ErrorType.NETWORK_ERROR, f"Upstream connection failed ({type(exc).__name__})")

    def hash_key(self, raw: bytes) -> str:
        # Memoised for keys that exist only: every presented key, valid or not, would let
        # unauthenticated callers grow the memo. Bounded by the number of keys ever issued.
        digest = self._key_hashes.get(raw)
        if digest is None:
            digest = hashlib.sha256(raw).hexdigest()
            if digest in self.snapshot.keys_by_hash and len(self._key_hashes) < 100_000:
                self._key_hashes[raw] = digest
        return digest

    async def refresh(self) -> None:
        # Loads can overlap (the timer's and a change's); a load that started earlier must not
        # replace the view of one that started later.
        self._loads_started += 1
        started = self._loads_started
        # Read before loading: a change committed during the load bumps it again and reloads.
        version = await self.config_version.current() if self.config_version is not None else None
        changes = self._changes
        snapshot = await load_snapshot(self.db, self.box, self.settings)
        self._version_seen = version
        self._full_refresh_at = time.monotonic() + self.settings.gateway.full_refresh_seconds
        if not MOCK_UPSTREAM.started and any(
                r.provider_kind == "mock" for routes in snapshot.routes_by_model.values() for r in routes):
            await MOCK_UPSTREAM.start()
        if started > self._installed_load:
            self._installed_load = started
            self._applied_changes = max(self._applied_changes, changes)
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

    async def settle(self) -> None:
        """Install the changes this process made, so the request that made them answers only once
        they apply (a key created through the API works for the very next call)."""
        if self._applied_changes < self._changes:
            await self.refresh()

    def config_changed(self) -> None:
        """A committed configuration change: reload here, and tell the other instances through Redis."""
        self._changes += 1
        self.refresh_soon()
        touch_change_marker(self.settings)  # sibling workers on this host, with or without Redis
        if self.config_version is not None:
            task = asyncio.create_task(self.config_version.announce())
            self._publishing.add(task)
            task.add_done_callback(self._publishing.discard)

    async def _listen_for_changes(self) -> None:
        assert self.config_version is not None
        client = redis_client(self.settings, for_pubsub=True)
        lost = False
        try:
            while True:
                try:
                    async with client.pubsub() as pubsub:
                        await pubsub.subscribe(self.config_version.channel, *self._notice_channels())
                        if lost:  # changes made while unsubscribed
                            self.refresh_soon()
                            lost = False
                        async for message in pubsub.listen():
                            if message.get("type") == "message":
                                self._notice(message["channel"], message["data"])
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # the version check still runs; retry the subscription
                    if not lost:
                        log.warning("Redis subscription lost (%s); retrying every 2 s", type(exc).__name__)
                    lost = True
                    await asyncio.sleep(2)
        finally:
            await client.aclose()

    def _notice_channels(self) -> list[str]:
        return [self.shared_breakers.channel] if self.shared_breakers is not None else []

    def _notice(self, channel: bytes, data: bytes) -> None:
        """A message from another process (or this one) through Redis pub/sub."""
        if self.shared_breakers is None or channel.decode() != self.shared_breakers.channel:
            self.refresh_soon()
            return
        text = data.decode(errors="replace")
        if not (self.shared_cooldowns is not None and self.shared_cooldowns.notice(text)):
            self.shared_breakers.notice(text)

    async def _retention_pass(self) -> None:
        # Once per deployment and period when Redis can say which process runs it.
        if await self.schedule.runs_here("retention", self.retention.interval):
            await self.retention.run_once()

    async def _watch_change_marker(self) -> None:
        """The CLI touches `data_dir/config-changed` after a change: on the same host a running server
        applies it within a quarter second, with or without Redis."""
        marker = marker_path(self.settings)
        seen = marker_mtime(marker)
        while True:
            await asyncio.sleep(0.25)
            now = marker_mtime(marker)
            if now != seen:
                seen = now
                self.refresh_soon()

    async def _flush_logs(self) -> None:
        while True:
            await asyncio.sleep(0.5)
            logs.flush()

    async def _refresh_loop(self) -> None:
        interval = self.settings.gateway.cache_refresh_seconds
        while True:
            # Not wait_for: on Python 3.11 it drops a cancel that meets the event's wake-up, and stop()
            # would wait on this loop for ever.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(interval):
                    await self._refresh_wanted.wait()
            wanted = self._refresh_wanted.is_set()
            self._refresh_wanted.clear()
            try:
                if wanted or await self._stale():
                    await self.refresh()
            except Exception:
                log.exception("snapshot refresh failed; keeping the previous configuration")

    async def _stale(self) -> bool:
        """Whether the periodic check must reload: always without Redis (or while it is down);
        with Redis when the configuration version moved or a full refresh is due."""
        if self.config_version is None:
            return True
        if time.monotonic() >= self._full_refresh_at:
            return True
        version = await self.config_version.current()
        return version is None or version != self._version_seen

    async def deprecate(self, model_instance_id: int, reason: str) -> None:
        """The lifecycle hook: repeated MODEL_NOT_FOUND takes the instance out of routing."""
        await self.services.models.update(model_instance_id, state="DEPRECATED")
        log.warning("model instance %s deprecated: %s", model_instance_id, reason)
