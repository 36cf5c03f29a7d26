"""MODEL_NOT_FOUND observations counted once per deployment, in Redis.

One sorted set per model instance holds the observation times (Redis's clock);
a script adds one, drops those older than the window and, when the count
reaches the threshold, claims the deprecation with a flag so that exactly one
process deprecates the instance.
"""

from __future__ import annotations

import uuid

from modelgate.config import LifecycleSettings
from modelgate.shared.redis_link import RedisLink, RedisUnavailable

# KEYS: observations zset, claim flag. ARGV: window ms, threshold, member, ttl seconds.
# Returns {count in window, 1 if this call claimed the deprecation}.
_OBSERVE = """
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now_ms, ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_ms - tonumber(ARGV[1]))
redis.call('EXPIRE', KEYS[1], ARGV[4])
local count = redis.call('ZCARD', KEYS[1])
if count >= tonumber(ARGV[2]) and redis.call('SET', KEYS[2], '1', 'NX', 'EX', ARGV[4]) then
  return {count, 1}
end
return {count, 0}
"""


class SharedNotFoundCounts:
    def __init__(self, link: RedisLink, settings: LifecycleSettings) -> None:
        self.link = link
        self.settings = settings
        self._observe = link.client.register_script(_OBSERVE)

    def _keys(self, model_instance_id: int) -> list[str]:
        base = self.link.key("not-found", model_instance_id)
        return [base, f"{base}:claimed"]

    async def observe(self, model_instance_id: int) -> tuple[int, bool] | None:
        """(observations within the window, whether this call deprecates); None while Redis is away."""
        window = self.settings.not_found_window_seconds
        try:
            count, claimed = await self.link.run(lambda _: self._observe(
                keys=self._keys(model_instance_id),
                args=[int(window * 1000), self.settings.not_found_threshold, uuid.uuid4().hex, int(window) + 60]))
        except RedisUnavailable:
            return None
        return int(count), bool(claimed)

    async def forget(self, model_instance_id: int) -> None:
        """Count from zero again (re-activated, or a deprecation that failed and must be retried)."""
        try:
            await self.link.run(lambda r: r.delete(*self._keys(model_instance_id)))
        except RedisUnavailable:
            pass
