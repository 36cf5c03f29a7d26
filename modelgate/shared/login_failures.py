"""Failed-login counters shared by every process of a deployment, in Redis.

One counter per throttle key (username+address, address), each an INCR with its
expiry pushed to `lock` after the latest failure: the same forgiving rule as the
memory store, on Redis's clock. Checking both keys and counting a failure on both
are one script each, so concurrent logins on several workers cannot both slip
under a limit. While Redis is unreachable the process counts in its own memory.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from modelgate.services.sessions import MemoryFailureStore
from modelgate.shared.redis_link import RedisLink, RedisUnavailable

# KEYS: counters. ARGV: their limits. Returns the longest wait in ms of a counter at its limit.
_WAIT = """
local longest = 0
for i, key in ipairs(KEYS) do
  local count = tonumber(redis.call('GET', key) or '0')
  if count >= tonumber(ARGV[i]) then
    longest = math.max(longest, redis.call('PTTL', key))
  end
end
return longest
"""

# KEYS: counters. ARGV: lock ms.
_FAIL = """
for _, key in ipairs(KEYS) do
  redis.call('INCR', key)
  redis.call('PEXPIRE', key, ARGV[1])
end
return 1
"""


class RedisFailureStore:
    def __init__(self, link: RedisLink, clock: Callable[[], datetime]) -> None:
        self.link = link
        self.local = MemoryFailureStore(clock)
        self._wait = link.client.register_script(_WAIT)
        self._fail = link.client.register_script(_FAIL)

    def _key(self, key: str) -> str:
        return self.link.key("login", key)

    async def wait(self, checks: list[tuple[str, int]], lock: timedelta) -> float:
        keys = [self._key(k) for k, _ in checks]
        try:
            ms = await self.link.run(lambda _: self._wait(keys=keys, args=[limit for _, limit in checks]))
        except RedisUnavailable:
            return await self.local.wait(checks, lock)
        return max(0, int(ms)) / 1000

    async def fail(self, keys: list[str], lock: timedelta) -> None:
        names = [self._key(k) for k in keys]
        try:
            await self.link.run(lambda _: self._fail(keys=names, args=[int(lock.total_seconds() * 1000)]))
        except RedisUnavailable:
            await self.local.fail(keys, lock)

    async def clear(self, key: str) -> None:
        await self.local.clear(key)
        try:
            await self.link.run(lambda r: r.delete(self._key(key)))
        except RedisUnavailable:
            pass
