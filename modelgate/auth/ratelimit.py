"""Per-key token buckets (spec 8): in memory per process, or shared through Redis.

With several gateway instances the bucket must be shared, or each instance
would grant the full rate; `RedisTokenBucketLimiter` keeps it in Redis and
updates it atomically with a Lua script (one round trip per batch of takes). While Redis
is unreachable each process uses its own bucket (the link logs the change once).
"""

from __future__ import annotations

import asyncio
import time
from typing import Callable

from modelgate.config import RateLimitSettings
from modelgate.shared.redis_link import RedisLink, RedisUnavailable


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


# KEYS: bucket hashes (one per take; a key may repeat). ARGV: capacity, refill per second and tokens wanted
# of each take. Returns {tokens granted, wait} per take, applied in order: up to the tokens wanted while
# the bucket holds them, else what it holds, else 0 and the seconds until one is there.
# Redis TIME keeps every instance on one clock.
_TAKE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local out = {}
for i, key in ipairs(KEYS) do
  local capacity = tonumber(ARGV[3 * i - 2])
  local rate = tonumber(ARGV[3 * i - 1])
  local want = tonumber(ARGV[3 * i])
  local state = redis.call('HMGET', key, 'tokens', 'at')
  local tokens = tonumber(state[1])
  local at = tonumber(state[2])
  if tokens == nil then
    tokens = capacity
    at = now
  end
  -- never negative: a stored time rounded up must not take tokens away
  tokens = math.min(capacity, tokens + math.max(0, now - at) * rate)
  local granted = math.min(want, math.floor(tokens))
  local wait = 0
  if granted >= 1 then
    tokens = tokens - granted
  elseif rate > 0 then
    wait = (1 - tokens) / rate
  else
    wait = 60
  end
  redis.call('HSET', key, 'tokens', tostring(tokens), 'at', string.format('%.6f', now))
  local ttl = 60
  if rate > 0 then ttl = math.ceil(capacity / rate) + 60 end
  redis.call('EXPIRE', key, ttl)
  out[i] = {granted, tostring(wait)}
end
return out
"""

LEASE_SECONDS = 1.0  # tokens taken ahead are used within this, or dropped


def lease_size(capacity: float, rate: float) -> int:
    """Tokens a worker takes at once from a shared bucket: 1 (exact) unless the bucket is large, then at
    most 1 % of its capacity, 0.1 s of its refill and 64, so a key's admitted calls stay within its bucket
    (they are taken from it) and at most one lease per worker is taken early."""
    return max(1, min(64, int(capacity // 100), int(rate * 0.1)))


class RedisTokenBucketLimiter:
    """Takes from the shared buckets in batches: the takes of calls that arrive while a script is in
    flight wait and go together in the next one, so under load a worker makes one round trip for
    many calls (and at most one is in flight), each take still applied atomically and in order.
    Keys with a large bucket take a small lease of tokens at once (`lease_size`) and spend it locally."""

    def __init__(self, link: RedisLink, defaults: RateLimitSettings, local: TokenBucketLimiter | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._defaults = defaults
        self._link = link
        self._prefix = link.key("bucket", "")
        self._script = link.client.register_script(_TAKE)
        self._local = local or TokenBucketLimiter(defaults)
        self._clock = clock
        self._waiting: list[tuple[int, float, float, asyncio.Future[float]]] = []
        self._sender: asyncio.Task[None] | None = None
        self._leases: dict[int, list[float]] = {}  # key id -> [tokens left, usable until]

    async def take(self, key_id: int, capacity: float | None, refill_per_second: float | None) -> float:
        capacity = capacity if capacity is not None else self._defaults.capacity
        rate = refill_per_second if refill_per_second is not None else self._defaults.refill_per_second
        lease = self._leases.get(key_id)
        if lease is not None and lease[0] >= 1 and self._clock() < lease[1]:
            lease[0] -= 1
            return 0.0
        future: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self._waiting.append((key_id, capacity, rate, future))
        if self._sender is None:
            self._sender = asyncio.get_running_loop().create_task(self._send())
        return await future

    async def _send(self) -> None:
        try:
            while self._waiting:
                batch, self._waiting = self._waiting, []
                args: list[float] = []
                asking: set[int] = set()
                for key_id, capacity, rate, _ in batch:  # one lease per key and batch; the others take one
                    args += (capacity, rate, 1 if key_id in asking else lease_size(capacity, rate))
                    asking.add(key_id)
                try:
                    answers = await self._link.run(lambda _: self._script(
                        keys=[f"{self._prefix}{key_id}" for key_id, _, _, _ in batch], args=args))
                except RedisUnavailable:
                    answers = []
                    for key_id, capacity, rate, _ in batch:
                        wait = await self._local.take(key_id, capacity, rate)
                        answers.append((0 if wait else 1, wait))
                except BaseException as exc:  # cancelled at shutdown: its callers must not wait for ever
                    for *_, future in batch:
                        if not future.done():
                            future.cancel() if isinstance(exc, asyncio.CancelledError) else future.set_exception(exc)
                    raise
                for (key_id, _, _, future), (granted, wait) in zip(batch, answers):
                    granted = int(granted)
                    if granted > 1:
                        now = self._clock()
                        lease = self._leases.get(key_id)
                        left = lease[0] if lease is not None and now < lease[1] else 0
                        self._leases[key_id] = [left + granted - 1, now + LEASE_SECONDS]
                    if not future.done():  # its call may have been cancelled meanwhile
                        future.set_result(0.0 if granted else float(wait))
        finally:
            self._sender = None
