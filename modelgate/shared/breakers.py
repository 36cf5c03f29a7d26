"""Circuit breakers shared by every process of a deployment, through Redis.

The decisions stay those of `routing.breaker` (`trip_reason`, the half-open
rules, the events); only where the state lives changes. Per endpoint, Redis
holds the state, the consecutive-failure count, the failure window (one hash
field per second) and the half-open trial slots, as leases that expire after
`half_open_trial_timeout_seconds` so a process that dies holding one cannot block the
endpoint. Every change is one atomic Lua script, on Redis's clock.

The hot path stays local where that is correct:
- CLOSED endpoints are admitted without asking Redis; successes are counted
  locally and sent in one batch every `FLUSH_SECONDS`, failures at once.
- An endpoint seen OPEN (through the pub/sub notice its opener sends, or the
  answer of any script) is refused locally until its retry time; only then,
  and while HALF_OPEN, does admission ask Redis (for a trial lease).
So a breaker opened through one worker refuses on every worker within the
pub/sub delivery time (milliseconds), and at the latest after that worker's
next outcome on the endpoint. While Redis is unreachable every call goes to
the per-instance registry instead, and back to Redis when it returns.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

from modelgate.config import BreakerSettings
from modelgate.errors import UpstreamError
from modelgate.routing.breaker import (
    BreakerRegistry,
    BreakerState,
    BreakerStatus,
    EventContext,
    is_fault,
    trip_reason,
)
from modelgate.routing.events import Clock, EventType
from modelgate.shared.redis_link import RedisLink, RedisUnavailable

log = logging.getLogger("modelgate.breaker")

FLUSH_SECONDS = 0.05
CHANNEL = "breakers"

# Common prelude: Redis time in seconds and milliseconds.
_NOW = """
local t = redis.call('TIME')
local now = tonumber(t[1])
local now_ms = now * 1000 + math.floor(tonumber(t[2]) / 1000)
"""

# KEYS: state hash, calls-per-second hash, failures-per-second hash.
# ARGV: successes before the trailing failures, trailing failures, window seconds, recovery ms, ttl seconds.
# Returns {state, consecutive, calls in window, failures in window, ms until admitted again}.
_ADD_OUTCOMES = _NOW + """
local state = redis.call('HGET', KEYS[1], 'state') or 'CLOSED'
if state ~= 'CLOSED' then
  local wait = 0
  if state == 'OPEN' then
    wait = math.max(0, tonumber(redis.call('HGET', KEYS[1], 'opened_ms')) + tonumber(ARGV[4]) - now_ms)
  end
  return {state, 0, 0, 0, wait}
end
local successes = tonumber(ARGV[1])
local failures = tonumber(ARGV[2])
if successes + failures > 0 then
  redis.call('HINCRBY', KEYS[2], now, successes + failures)
end
if failures > 0 then
  redis.call('HINCRBY', KEYS[3], now, failures)
end
local consecutive
if successes > 0 then
  consecutive = failures
  redis.call('HSET', KEYS[1], 'consecutive', consecutive)
else
  consecutive = redis.call('HINCRBY', KEYS[1], 'consecutive', failures)
end
local horizon = now - tonumber(ARGV[3])
local calls, failed = 0, 0
local seconds = redis.call('HGETALL', KEYS[2])
for i = 1, #seconds, 2 do
  if tonumber(seconds[i]) <= horizon then
    redis.call('HDEL', KEYS[2], seconds[i])
    redis.call('HDEL', KEYS[3], seconds[i])
  else
    calls = calls + tonumber(seconds[i + 1])
    failed = failed + tonumber(redis.call('HGET', KEYS[3], seconds[i]) or '0')
  end
end
for i = 1, 3 do redis.call('EXPIRE', KEYS[i], ARGV[5]) end
return {state, consecutive, calls, failed, 0}
"""

# KEYS: state, calls, failures, trials. ARGV: the state it must be in, ttl seconds. Returns 1 if it opened.
_OPEN = _NOW + """
local state = redis.call('HGET', KEYS[1], 'state') or 'CLOSED'
if state ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4])
redis.call('HSET', KEYS[1], 'state', 'OPEN', 'opened_ms', now_ms, 'consecutive', 0, 'successes', 0)
redis.call('EXPIRE', KEYS[1], ARGV[2])
return 1
"""

# KEYS: state, trials. ARGV: recovery ms, trial slots, lease ms, lease id, ttl seconds.
# Returns {state, admitted (0/1), ms until admitted again, became half-open (0/1)}.
_ACQUIRE = _NOW + """
local state = redis.call('HGET', KEYS[1], 'state') or 'CLOSED'
if state == 'CLOSED' then return {state, 1, 0, 0} end
local turned = 0
if state == 'OPEN' then
  local ready_at = tonumber(redis.call('HGET', KEYS[1], 'opened_ms')) + tonumber(ARGV[1])
  if now_ms < ready_at then return {state, 0, ready_at - now_ms, 0} end
  state = 'HALF_OPEN'
  turned = 1
  redis.call('HSET', KEYS[1], 'state', state, 'successes', 0)
  redis.call('DEL', KEYS[2])
  redis.call('EXPIRE', KEYS[1], ARGV[5])
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now_ms)  -- leases of trials that never reported
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[2]) then return {state, 0, 1000, turned} end
redis.call('ZADD', KEYS[2], now_ms + tonumber(ARGV[3]), ARGV[4])
redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[3]))
return {state, 1, 0, turned}
"""

# KEYS: state, trials. ARGV: lease id. Returns the successful trials so far, or -1 when not HALF_OPEN.
_TRIAL_SUCCEEDED = """
if redis.call('HGET', KEYS[1], 'state') ~= 'HALF_OPEN' then return -1 end
if redis.call('ZREM', KEYS[2], ARGV[1]) == 0 then return -1 end  -- its lease expired: it no longer counts
return redis.call('HINCRBY', KEYS[1], 'successes', 1)
"""

# KEYS: state hashes. ARGV: recovery ms. Returns per key {state, opened ms, consecutive, ms until admitted}.
_VIEW = _NOW + """
local out = {}
for i, key in ipairs(KEYS) do
  local s = redis.call('HMGET', key, 'state', 'opened_ms', 'consecutive')
  local state = s[1] or 'CLOSED'
  local opened = tonumber(s[2] or '0')
  local wait = 0
  if state == 'OPEN' then wait = math.max(0, opened + tonumber(ARGV[1]) - now_ms) end
  out[i] = {state, opened, tonumber(s[3] or '0'), wait}
end
return out
"""

# KEYS: state, calls, failures, trials. ARGV: the state it must be in ('' = any). Returns 1 if it closed.
_CLOSE = """
local state = redis.call('HGET', KEYS[1], 'state') or 'CLOSED'
if ARGV[1] ~= '' and state ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
return 1
"""


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class SharedBreakers:
    """The executor's breaker interface, with the state in Redis and `local` as the fallback."""

    def __init__(self, local: BreakerRegistry, link: RedisLink) -> None:
        self.local = local
        self.link = link
        self.settings: BreakerSettings = local.settings
        self.clock: Clock = local.clock
        client = link.client
        self._add = client.register_script(_ADD_OUTCOMES)
        self._open_script = client.register_script(_OPEN)
        self._acquire = client.register_script(_ACQUIRE)
        self._trial_ok = client.register_script(_TRIAL_SUCCEEDED)
        self._close_script = client.register_script(_CLOSE)
        self._view = client.register_script(_VIEW)
        self.channel = link.key(CHANNEL)
        self._open_until: dict[str, float] = {}  # endpoint -> monotonic time it may admit again
        self._half_open: set[str] = set()  # admission asks Redis for a trial lease
        self._leases: dict[str, list[str]] = {}  # endpoint -> trial leases held by calls of this process
        self._successes: dict[str, int] = {}  # counted, not yet sent
        self._tasks: set[asyncio.Task[Any]] = set()
        self._flusher: asyncio.Task[Any] | None = None
        ttl = settings_ttl(self.settings)
        self._ttl = ttl

    # --- keys -------------------------------------------------------------------------

    def _keys(self, endpoint_id: str) -> list[str]:
        base = self.link.key("breaker", endpoint_id)
        return [base, f"{base}:calls", f"{base}:failures", f"{base}:trials"]

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _cached_open(self, endpoint_id: str) -> bool:
        until = self._open_until.get(endpoint_id)
        return until is not None and self.clock.monotonic() < until

    # --- admission ----------------------------------------------------------------------

    async def admit(self, endpoint_id: str, ctx: EventContext | None = None) -> bool:
        if self._cached_open(endpoint_id):
            return False
        if not self.link.up:
            return self.local.acquire(endpoint_id, ctx)
        if endpoint_id not in self._open_until and endpoint_id not in self._half_open:
            return True  # CLOSED as far as anyone told us: no round trip
        lease = uuid.uuid4().hex
        keys = self._keys(endpoint_id)
        try:
            state, admitted, wait_ms, turned = await self.link.run(lambda _: self._acquire(
                keys=[keys[0], keys[3]],
                args=[int(self.settings.recovery_seconds * 1000), self.settings.half_open_calls,
                      int(self.settings.half_open_trial_timeout_seconds * 1000), lease, self._ttl]))
        except RedisUnavailable:
            return self.local.acquire(endpoint_id, ctx)
        state = _text(state)
        if turned:
            self.local.transition_seen(EventType.BREAKER_HALF_OPEN, endpoint_id, ctx,
                                       detail=f"recovery time of {self.settings.recovery_seconds:g}s passed")
        if state == BreakerState.CLOSED.value:
            self._forget(endpoint_id)
            return True
        if state == BreakerState.HALF_OPEN.value:
            self._open_until.pop(endpoint_id, None)
            self._half_open.add(endpoint_id)
            if admitted:
                self._leases.setdefault(endpoint_id, []).append(lease)
                return True
        self._open_until[endpoint_id] = self.clock.monotonic() + int(wait_ms) / 1000
        return False

    def acquire(self, endpoint_id: str, ctx: EventContext | None = None) -> bool:
        """Synchronous view (no trial lease): only for callers that cannot await."""
        return not self._cached_open(endpoint_id) and (self.link.up or self.local.acquire(endpoint_id, ctx))

    def release(self, endpoint_id: str) -> None:
        leases = self._leases.get(endpoint_id)
        if not leases:
            self.local.release(endpoint_id)
            return
        lease = leases.pop()
        key = self._keys(endpoint_id)[3]
        self._spawn(self._quietly(lambda r: r.zrem(key, lease)))

    async def _quietly(self, op: Any) -> None:
        try:
            await self.link.run(op)
        except RedisUnavailable:
            pass  # the lease expires on its own

    def allows_retry(self, endpoint_id: str) -> bool:
        if self._cached_open(endpoint_id):
            return False
        return self.link.up or self.local.allows_retry(endpoint_id)

    # --- outcomes -----------------------------------------------------------------------

    def record(self, endpoint_id: str, err: UpstreamError | None, ctx: EventContext | None = None) -> None:
        failed = is_fault(err)
        leases = self._leases.get(endpoint_id)
        if leases:
            self._spawn(self._trial_outcome(endpoint_id, leases.pop(), err, failed, ctx))
            return
        if not self.link.up:
            self.local.record(endpoint_id, err, ctx)
            return
        if failed:
            successes = self._successes.pop(endpoint_id, 0)
            self._spawn(self._send_outcomes(endpoint_id, successes, 1, err, ctx))
            return
        self._successes[endpoint_id] = self._successes.get(endpoint_id, 0) + 1
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._flush_later())

    async def _flush_later(self) -> None:
        await asyncio.sleep(FLUSH_SECONDS)
        pending, self._successes = self._successes, {}
        for endpoint_id, successes in pending.items():
            await self._send_outcomes(endpoint_id, successes, 0, None, None)

    async def _send_outcomes(self, endpoint_id: str, successes: int, failures: int, err: UpstreamError | None,
                             ctx: EventContext | None) -> None:
        keys = self._keys(endpoint_id)
        try:
            state, consecutive, calls, failed, wait_ms = await self.link.run(lambda _: self._add(
                keys=keys[:3], args=[successes, failures, int(self.settings.window_seconds),
                                     int(self.settings.recovery_seconds * 1000), self._ttl]))
        except RedisUnavailable:
            if failures:
                self.local.record(endpoint_id, err, ctx)
            return
        state = _text(state)
        if state == BreakerState.OPEN.value:
            self._open_until[endpoint_id] = self.clock.monotonic() + int(wait_ms) / 1000
            return
        if state == BreakerState.HALF_OPEN.value:
            self._half_open.add(endpoint_id)
            return
        if not failures:
            return
        why = trip_reason(self.settings, int(consecutive), int(calls), int(failed))
        if why is not None:
            await self._open(endpoint_id, BreakerState.CLOSED, err, ctx, why)

    async def _trial_outcome(self, endpoint_id: str, lease: str, err: UpstreamError | None, failed: bool,
                             ctx: EventContext | None) -> None:
        keys = self._keys(endpoint_id)
        try:
            if failed:
                await self._open(endpoint_id, BreakerState.HALF_OPEN, err, ctx, "a trial call failed")
                return
            succeeded = int(await self.link.run(lambda _: self._trial_ok(keys=[keys[0], keys[3]], args=[lease])))
            if succeeded < self.settings.half_open_calls:
                return
            closed = await self.link.run(lambda _: self._close_script(keys=keys, args=[BreakerState.HALF_OPEN.value]))
        except RedisUnavailable:
            return  # the lease expires; the breaker stays as Redis has it
        if closed:
            self._forget(endpoint_id)
            self.local.transition_seen(EventType.BREAKER_CLOSED, endpoint_id, ctx,
                                       detail=f"{self.settings.half_open_calls} trial calls succeeded")
            await self._announce(f"closed {endpoint_id}")

    async def _open(self, endpoint_id: str, expected: BreakerState, err: UpstreamError | None,
                    ctx: EventContext | None, why: str) -> None:
        keys = self._keys(endpoint_id)
        try:
            opened = await self.link.run(lambda _: self._open_script(keys=keys, args=[expected.value, self._ttl]))
        except RedisUnavailable:
            return
        recovery = self.settings.recovery_seconds
        self._half_open.discard(endpoint_id)
        self._open_until[endpoint_id] = self.clock.monotonic() + recovery
        if opened:  # exactly one process made the transition: it records it and tells the others
            self.local.transition_seen(EventType.BREAKER_OPENED, endpoint_id, ctx,
                                       err.error_type.value if err is not None else None, why)
            await self._announce(f"open {endpoint_id} {int(recovery * 1000)}")

    async def _announce(self, message: str) -> None:
        try:
            await self.link.run(lambda r: r.publish(self.channel, message))
        except RedisUnavailable:
            pass  # the others learn it from their next outcome or admission

    def notice(self, message: bytes | str) -> None:
        """A transition announced by another process (pub/sub)."""
        parts = _text(message).split()
        if len(parts) == 3 and parts[0] == "open":
            self._half_open.discard(parts[1])
            self._open_until[parts[1]] = self.clock.monotonic() + int(parts[2]) / 1000
        elif len(parts) == 2 and parts[0] in ("closed", "forced"):
            self._forget(parts[1])

    def _forget(self, endpoint_id: str) -> None:
        self._open_until.pop(endpoint_id, None)
        self._half_open.discard(endpoint_id)

    # --- admin and console ---------------------------------------------------------------

    def force_recover(self, endpoint_id: str, detail: str = "forced by an administrator",
                      emit: bool = True) -> BreakerState:
        previous = self.state(endpoint_id)
        self.local.force_recover(endpoint_id, detail, emit)
        self._forget(endpoint_id)
        keys = self._keys(endpoint_id)
        self._spawn(self._quietly(lambda _: self._close_script(keys=keys, args=[""])))
        return previous

    def state(self, endpoint_id: str) -> BreakerState:
        if self._cached_open(endpoint_id):
            return BreakerState.OPEN
        if endpoint_id in self._half_open:
            return BreakerState.HALF_OPEN
        return self.local.state(endpoint_id) if not self.link.up else BreakerState.CLOSED

    def retry_after(self, endpoint_id: str) -> float:
        until = self._open_until.get(endpoint_id)
        if until is not None:
            return max(0.0, until - self.clock.monotonic())
        return self.local.retry_after(endpoint_id)

    def states(self) -> dict[str, BreakerStatus]:
        """What this process knows: endpoints it saw OPEN or HALF_OPEN, and its own fallback registry."""
        out = dict(self.local.states()) if not self.link.up else {}
        for endpoint_id in set(self._open_until) | self._half_open:
            state = self.state(endpoint_id)
            if state is BreakerState.CLOSED:
                continue
            wait = self.retry_after(endpoint_id)
            out[endpoint_id] = BreakerStatus(endpoint_id, state, 0, None, wait if wait > 0 else None)
        return out

    async def view(self, endpoint_ids: list[str]) -> dict[str, BreakerStatus]:
        """The deployment's state of these endpoints, as Redis holds it (every worker's and instance's
        outcomes), for the console and /metrics; this process's view while Redis is away."""
        if not endpoint_ids:
            return {}
        try:
            rows = await self.link.run(lambda _: self._view(
                keys=[self._keys(e)[0] for e in endpoint_ids], args=[int(self.settings.recovery_seconds * 1000)]))
        except RedisUnavailable:
            return self.states()
        out = {}
        for endpoint_id, (state, opened_ms, consecutive, wait_ms) in zip(endpoint_ids, rows):
            out[endpoint_id] = BreakerStatus(endpoint_id, BreakerState(_text(state)), int(consecutive),
                                             int(opened_ms) / 1000 if int(opened_ms) else None,
                                             int(wait_ms) / 1000 if int(wait_ms) > 0 else None)
        return out

    async def close(self) -> None:
        if self._flusher is not None:
            self._flusher.cancel()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, *( [self._flusher] if self._flusher else []), return_exceptions=True)


def settings_ttl(settings: BreakerSettings) -> int:
    """Seconds an idle endpoint's keys live: long enough for its window and its recovery."""
    return int(settings.window_seconds + settings.recovery_seconds
               + settings.half_open_trial_timeout_seconds) + 60
