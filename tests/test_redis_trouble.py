"""Redis trouble (issue 9 item 10): a Redis that hangs or refuses neither slows nor fails calls.

Short timeouts, a small breaker around Redis that falls back to the per-instance
bucket, one log line per change of state, and shared state again once Redis is back.
"""

from __future__ import annotations

import logging
import time

import pytest

from modelgate.auth.ratelimit import RedisTokenBucketLimiter
from modelgate.config import RateLimitSettings, Settings
from modelgate.shared.redis_link import RedisLink, RedisUnavailable
from tests.redis_support import REDIS_HOST, REDIS_PORT, drop_prefix, require_redis, unique_prefix
from tests.tcp_proxy import TcpProxy


class ManualClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def link_to(url: str, clock: ManualClock, prefix: str = "mgtest-trouble:") -> RedisLink:
    settings = Settings(redis_url=url, redis_prefix=prefix, redis_timeout_seconds=0.2, redis_retry_seconds=2.0)
    return RedisLink(settings, clock=clock)


@pytest.fixture
async def proxy():
    # The proxy fronts the real Redis when there is one; the refuse/hang cases do not need it.
    p = await TcpProxy(REDIS_HOST, REDIS_PORT).start()
    yield p
    await p.close()


@pytest.mark.parametrize("fault", ["refuse", "hang"])
async def test_unusable_redis_falls_back_to_the_local_bucket_quickly_and_logs_once(proxy, fault, caplog):
    proxy.cut(fault)
    clock = ManualClock()
    link = link_to(proxy.url(), clock)
    limiter = RedisTokenBucketLimiter(link, RateLimitSettings(capacity=2, refill_per_second=0.001))
    caplog.set_level(logging.WARNING, logger="modelgate.redis")
    try:
        started = time.monotonic()
        waits = [await limiter.take(7, None, None) for _ in range(50)]
        elapsed = time.monotonic() - started
    finally:
        await link.close()
    # The local bucket (capacity 2) decides: the fallback still limits, it does not wave calls through.
    assert waits[:2] == [0.0, 0.0] and all(w > 0 for w in waits[2:])
    # Only the first call paid the Redis timeout; the other 49 did not touch Redis.
    assert elapsed < 0.2 * 3, elapsed
    assert not link.up
    downs = [r for r in caplog.records if "unreachable" in r.getMessage()]
    assert len(downs) == 1, [r.getMessage() for r in caplog.records]


async def test_link_skips_redis_until_its_retry_time():
    clock = ManualClock()
    calls = 0

    async def failing(_client):
        nonlocal calls
        calls += 1
        raise ConnectionError("refused")

    link = link_to("redis://127.0.0.1:1/0", clock)
    try:
        with pytest.raises(RedisUnavailable):
            await link.run(failing)
        for _ in range(10):
            with pytest.raises(RedisUnavailable):
                await link.run(failing)
        assert calls == 1
        clock.now += 2.0  # retry time: exactly one caller tries again
        with pytest.raises(RedisUnavailable):
            await link.run(failing)
        with pytest.raises(RedisUnavailable):
            await link.run(failing)
        assert calls == 2
    finally:
        await link.close()


async def test_shared_bucket_resumes_when_redis_returns(proxy, caplog):
    await require_redis()
    prefix = unique_prefix()
    clock = ManualClock()
    link = link_to(proxy.url(), clock, prefix)
    limiter = RedisTokenBucketLimiter(link, RateLimitSettings(capacity=3, refill_per_second=0.001))
    caplog.set_level(logging.WARNING, logger="modelgate.redis")
    try:
        assert await limiter.take(1, None, None) == 0.0  # shared bucket: 2 tokens left in Redis
        proxy.cut("refuse")
        assert await limiter.take(1, None, None) == 0.0  # local bucket while Redis is away
        assert not link.up
        proxy.restore()
        clock.now += 2.0
        assert await limiter.take(1, None, None) == 0.0  # Redis again: 1 token left there
        assert link.up
        assert await limiter.take(1, None, None) == 0.0
        assert await limiter.take(1, None, None) > 0  # the shared bucket is empty
        messages = [r.getMessage() for r in caplog.records]
        assert sum("unreachable" in m for m in messages) == 1
        assert sum("reachable again" in m for m in messages) == 1
    finally:
        await link.close()
        await drop_prefix(prefix)
