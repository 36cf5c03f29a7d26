"""One Redis connection per process, with short timeouts and a small breaker around it.

A Redis that hangs or refuses must not slow or fail calls: every command has
a short connect/read limit (`redis_timeout_seconds`), and after a failure the
link reports itself down for `redis_retry_seconds`, during which callers use
their per-instance state without touching Redis. The first call after that
tries Redis again; success brings shared state back. Each change of state is
logged once.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Awaitable, Callable, TypeVar

from modelgate.config import Settings

log = logging.getLogger("modelgate.redis")

T = TypeVar("T")


class RedisUnavailable(Exception):
    """Redis is down (or was just found down): use the per-instance state."""


def redis_client(settings: Settings, *, for_pubsub: bool = False) -> Any:
    import redis.asyncio as aioredis

    assert settings.redis_url is not None, "a Redis client is made only when REDIS_URL is set"
    timeout = settings.redis_timeout_seconds
    return aioredis.from_url(
        settings.redis_url,
        socket_connect_timeout=timeout,
        # A subscription waits for messages indefinitely; keep-alives and health checks find a dead peer.
        socket_timeout=None if for_pubsub else timeout,
        socket_keepalive=True,
        health_check_interval=5 if for_pubsub else 0,
        retry_on_timeout=False,
    )


class RedisLink:
    def __init__(self, settings: Settings, client: Any | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self.client = client if client is not None else redis_client(settings)
        self.prefix = settings.redis_prefix
        self._clock = clock
        self._up = True
        self._retry_at = 0.0
        self.last_error: str | None = None

    @property
    def up(self) -> bool:
        return self._up

    def key(self, *parts: object) -> str:
        return self.prefix + ":".join(str(p) for p in parts)

    async def run(self, op: Callable[[Any], Awaitable[T]]) -> T:
        """Run `op(client)`, or raise RedisUnavailable at once while Redis is known down."""
        if not self._up:
            now = self._clock()
            if now < self._retry_at:
                raise RedisUnavailable(self.last_error)
            self._retry_at = now + self.settings.redis_retry_seconds  # one caller tries; the rest fall back
        try:
            result = await op(self.client)
        except Exception as exc:  # refused, timed out, loading, read-only: all mean "not usable now"
            self._went_down(exc)
            raise RedisUnavailable(self.last_error) from exc
        if not self._up:
            self._up = True
            log.warning("Redis is reachable again: limits, breakers and counters are shared again")
        return result

    def _went_down(self, exc: BaseException) -> None:
        self.last_error = f"{type(exc).__name__}: {str(exc)[:200]}"
        self._retry_at = self._clock() + self.settings.redis_retry_seconds
        if self._up:
            self._up = False
            log.warning(
                "Redis is unreachable (%s): limits, breakers and counters are per instance until it returns; "
                "retrying every %gs", self.last_error, self.settings.redis_retry_seconds)

    async def ping(self) -> bool:
        try:
            await self.run(lambda r: r.ping())
        except RedisUnavailable:
            return False
        return True

    async def close(self) -> None:
        await self.client.aclose()
