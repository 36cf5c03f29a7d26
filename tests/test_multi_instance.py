"""Two gateway instances sharing one database and one Redis behave as one gateway."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest

from tests.gateway_harness import GatewayHarness, harness_settings

REDIS_URL = "redis://127.0.0.1:6379/0"


@pytest.fixture
async def redis_available():
    import redis.asyncio as aioredis

    client = aioredis.from_url(REDIS_URL)
    try:
        await client.ping()
    except Exception as exc:
        pytest.skip(f"Redis at 127.0.0.1:6379 is not reachable: {exc}")
    finally:
        await client.aclose()


@pytest.fixture
async def pair(tmp_path, redis_available):
    settings = harness_settings(tmp_path, redis_url=REDIS_URL, redis_prefix=f"mgtest-{uuid.uuid4().hex[:8]}:",
                                redis_timeout_seconds=2.0)
    settings.gateway.cache_refresh_seconds = 600.0  # only Redis can make the second instance notice changes
    first = await GatewayHarness(settings).start()
    second = await GatewayHarness(settings).start()
    yield first, second
    await second.stop()
    await first.stop()


async def post(instance: GatewayHarness, key: str) -> httpx.Response:
    async with httpx.AsyncClient() as http:
        return await http.post(f"{instance.url}/v1/chat/completions", headers={"authorization": f"Bearer {key}"},
                               json={"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]})


async def until_status(instance: GatewayHarness, key: str, status: int, failure: str, pause: float = 0.05) -> None:
    """Calls `instance` until it answers `status` (what other instances changed reaches it by pub/sub
    or its poll), or fails the test with `failure` after 100 tries."""
    for _ in range(100):
        if (await post(instance, key)).status_code == status:
            return
        await asyncio.sleep(pause)
    pytest.fail(failure)


async def test_token_bucket_is_shared_between_instances(pair, openai_upstream):
    first, second = pair
    wired = await first.wire(openai_upstream.base_url, ["gpt-test"], rate_capacity=3, rate_refill=0.001)
    await second.runtime.refresh()
    statuses = [(await post(instance, wired.key)).status_code for instance in (first, second, first, second)]
    assert statuses == [200, 200, 200, 429]


async def test_configuration_change_reaches_the_other_instance_through_redis(pair, openai_upstream):
    first, second = pair
    wired = await first.wire(openai_upstream.base_url, ["gpt-test"])
    # the new key reaches the second instance by pub/sub, not by its 600 s timer
    await until_status(second, wired.key, 200, "the second instance never saw the new key")
    keys = await first.services.api_keys.list()
    await first.services.api_keys.disable(keys[0].id)
    await until_status(second, wired.key, 401, "the second instance kept accepting a disabled key")



async def test_forced_recovery_reaches_every_instance(tmp_path, redis_available, openai_upstream):
    """An admin's forced recovery is recorded once and applied by every process's breakers."""
    settings = harness_settings(tmp_path, redis_url=REDIS_URL, redis_prefix=f"mgtest-{uuid.uuid4().hex[:8]}:",
                                redis_timeout_seconds=2.0)
    settings.gateway.retry.upstream_error.max_retries = 0
    first = await GatewayHarness(settings).start()
    second = await GatewayHarness(settings).start()
    try:
        wired = await first.wire(openai_upstream.base_url, ["gpt-test"])
        await second.runtime.refresh()
        openai_upstream.fail_next(500, {"error": {"message": "boom", "type": "server_error", "code": None}},
                                  times=settings.gateway.breaker.consecutive_failures)
        for _ in range(settings.gateway.breaker.consecutive_failures):
            assert (await post(first, wired.key)).status_code == 502
        for instance in (first, second):  # one breaker for the deployment
            await until_status(instance, wired.key, 503, "the breaker is not open on every instance", pause=0.02)
        await first.services.breakers.request_recovery(wired.channel_ids[0], actor="ops")
        for instance in (second, first):  # each applies it through the recorded event, when its poll comes
            await until_status(instance, wired.key, 200, "an instance's breaker stayed open")
    finally:
        await second.stop()
        await first.stop()
