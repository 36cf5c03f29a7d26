"""Per-key token buckets (spec 8): in memory per process, or shared through Redis.

With several gateway instances the bucket must be shared, or each instance
would grant the full rate; `RedisTokenBucketLimiter` keeps it in Redis and
updates it atomically with a Lua script (one round trip per call).
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

from modelgate.config import RateLimitSettings

log = logging.getLogger("modelgate.ratelimit")


class TokenBucketLimiter:
    """One bucket per key id; lazily refilled on each take, so idle keys cost nothing."""

    __slots__ = ("_defaults", "_buckets", "_clock")

    def __init__(self, defaults: RateLimitSettings, clock: Callable[[], float] = time.monotonic) -> None:
        self._defaults = defaults
        self._buckets: dict[int, list[float]] = {}  # key id -> [tokens, last refill time]
        self._clock = clock

    async def take(self, key_id: int, capacity: float | None, refill_per_second: float | None) -> float:
        """Takes one token. Returns 0 when allowed, else the seconds until a token is available."""
        capacity = capacity if capacity is not None else self._defaults.capacity
        rate = refill_per_second if refill_per_second is not None else self._defaults.refill_per_second
        now = self._clock()
        bucket = self._buckets.get(key_id)
        if bucket is None:
            self._buckets[key_id] = [capacity - 1.0, now]
            return 0.0
        tokens = min(capacity, bucket[0] + (now - bucket[1]) * rate)
        bucket[1] = now
        if tokens >= 1.0:
            bucket[0] = tokens - 1.0
            return 0.0
        bucket[0] = tokens
        return (1.0 - tokens) / rate if rate > 0 else 60.0


# KEYS[1] bucket hash; ARGV: capacity, refill per second. Redis TIME keeps every instance on one clock.
_TAKE = """
local capacity = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1])
local at = tonumber(state[2])
if tokens == nil then
  tokens = capacity
  at = now
end
tokens = math.min(capacity, tokens + (now - at) * rate)
local wait = 0
if tokens >= 1 then
  tokens = tokens - 1
elseif rate > 0 then
  wait = (1 - tokens) / rate
else
  wait = 60
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
local ttl = 60
if rate > 0 then ttl = math.ceil(capacity / rate) + 60 end
redis.call('EXPIRE', KEYS[1], ttl)
return tostring(wait)
"""


class RedisTokenBucketLimiter:
    def __init__(self, redis: Any, defaults: RateLimitSettings, prefix: str) -> None:
        self._defaults = defaults
        self._prefix = prefix
        self._script = redis.register_script(_TAKE)

    async def take(self, key_id: int, capacity: float | None, refill_per_second: float | None) -> float:
        capacity = capacity if capacity is not None else self._defaults.capacity
        rate = refill_per_second if refill_per_second is not None else self._defaults.refill_per_second
        try:
            wait = await self._script(keys=[f"{self._prefix}{key_id}"], args=[capacity, rate])
        except Exception as exc:  # Redis down: serving calls beats refusing them all
            log.warning("rate limiter: Redis unavailable (%s); allowing the call", type(exc).__name__)
            return 0.0
        return float(wait)
