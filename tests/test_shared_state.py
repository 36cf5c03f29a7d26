"""Several gateway processes on one Redis behave as one gateway: breakers, trial leases, cooldowns,
lifecycle counts, configuration versions, and Redis cut mid-traffic.

Each test uses its own Redis key prefix (removed after) and skips when Redis is absent.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import textwrap

import httpx
import pytest
from sqlalchemy import func, select

from modelgate.routing.breaker import BreakerState
from modelgate.storage.models import CallLog
from tests.gateway_harness import GatewayHarness, harness_settings
from tests.redis_support import REDIS_HOST, REDIS_PORT, REDIS_URL, drop_prefix, require_redis, unique_prefix
from tests.tcp_proxy import TcpProxy

FAIL = {"error": {"message": "boom", "type": "server_error", "code": None}}


@pytest.fixture
async def prefix():
    await require_redis()
    value = unique_prefix()
    yield value
    await drop_prefix(value)


def shared_settings(tmp_path, prefix, **overrides):
    overrides.setdefault("redis_url", REDIS_URL)
    overrides.setdefault("redis_timeout_seconds", 2.0)  # a loaded test machine is not a Redis outage
    settings = harness_settings(tmp_path, redis_prefix=prefix, **overrides)
    settings.gateway.retry.upstream_error.max_retries = 0
    settings.gateway.breaker.consecutive_failures = 3
    settings.gateway.cache_refresh_seconds = 600.0  # only Redis makes the other instance notice changes
    return settings


async def start_pair(settings):
    first = await GatewayHarness(settings).start()
    second = await GatewayHarness(settings).start()
    return first, second


async def post(instance: GatewayHarness, key: str, content: str = "hi") -> httpx.Response:
    async with httpx.AsyncClient(timeout=30) as http:
        return await http.post(f"{instance.url}/v1/chat/completions", headers={"authorization": f"Bearer {key}"},
                               json={"model": "gpt-test", "messages": [{"role": "user", "content": content}]})


async def eventually(predicate, seconds: float = 3.0) -> bool:
    for _ in range(int(seconds / 0.02)):
        if predicate():
            return True
        await asyncio.sleep(0.02)
    return predicate()


async def test_breaker_opened_through_one_instance_is_open_on_the_other(tmp_path, prefix, openai_upstream):
    first, second = await start_pair(shared_settings(tmp_path, prefix))
    try:
        wired = await first.wire(openai_upstream.base_url, ["gpt-test"])
        await second.runtime.refresh()
        endpoint = f"p{wired.provider_id}:k1"
        # Failures counted across instances: 2 through the first, 1 through the second open it.
        openai_upstream.fail_next(500, FAIL, times=3)
        assert (await post(first, wired.key)).status_code == 502
        assert (await post(first, wired.key)).status_code == 502
        await asyncio.sleep(0.1)  # let the first's failure reach Redis before the third
        assert (await post(second, wired.key)).status_code == 502
        breakers = (first.runtime.executor.breakers, second.runtime.executor.breakers)
        assert await eventually(lambda: all(b.state(endpoint) is BreakerState.OPEN for b in breakers)), \
            [b.state(endpoint) for b in breakers]
        seen = len(openai_upstream.requests)
        for instance in (first, second):
            resp = await post(instance, wired.key)
            assert resp.status_code == 503 and int(resp.headers["retry-after"]) >= 1
        assert len(openai_upstream.requests) == seen, "an open breaker sends nothing upstream"
        # Exactly one BREAKER_OPENED event for the deployment.
        await first.runtime.writer.flush()
        await second.runtime.writer.flush()
        from modelgate.storage.models import ResilienceEvent

        async with first.runtime.db.session() as s:
            opened = (await s.execute(select(func.count()).select_from(ResilienceEvent)
                                      .where(ResilienceEvent.event_type == "BREAKER_OPENED"))).scalar_one()
        assert opened == 1
    finally:
        await second.stop()
        await first.stop()


HOLD_LEASE = textwrap.dedent("""
    import asyncio, sys
    from modelgate.config import Settings
    from modelgate.routing.breaker import BreakerRegistry
    from modelgate.routing.events import SystemClock
    from modelgate.shared.breakers import SharedBreakers
    from modelgate.shared.redis_link import RedisLink

    async def main():
        settings = Settings(redis_url=sys.argv[1], redis_prefix=sys.argv[2])
        settings.gateway.breaker.half_open_calls = 1
        settings.gateway.breaker.recovery_seconds = float(sys.argv[4])
        settings.gateway.breaker.half_open_trial_timeout_seconds = float(sys.argv[5])
        breakers = SharedBreakers(BreakerRegistry(settings.gateway.breaker, SystemClock()), RedisLink(settings))
        breakers._half_open.add(sys.argv[3])  # as if told by pub/sub
        print("held" if await breakers.admit(sys.argv[3]) else "refused", flush=True)
        await asyncio.sleep(3600)

    asyncio.run(main())
""")


async def test_a_trial_lease_held_by_a_killed_process_expires(tmp_path, prefix, openai_upstream):
    settings = shared_settings(tmp_path, prefix)
    breaker = settings.gateway.breaker
    breaker.half_open_calls, breaker.recovery_seconds, breaker.half_open_trial_timeout_seconds = 1, 0.3, 3.0
    first = await GatewayHarness(settings).start()
    try:
        wired = await first.wire(openai_upstream.base_url, ["gpt-test"])
        endpoint = f"p{wired.provider_id}:k1"
        openai_upstream.fail_next(500, FAIL, times=3)
        for _ in range(3):
            assert (await post(first, wired.key)).status_code == 502
        assert await eventually(lambda: first.runtime.executor.breakers.state(endpoint) is BreakerState.OPEN)
        await asyncio.sleep(0.4)  # recovery passed: the next admission takes the only trial slot
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLD_LEASE, REDIS_URL, prefix, endpoint, "0.3", "3.0"],
            stdout=subprocess.PIPE, text=True)
        try:
            assert holder.stdout.readline().strip() == "held"
        finally:
            holder.send_signal(signal.SIGKILL)
            holder.wait(timeout=10)
        refused = await post(first, wired.key)  # the dead process still holds the slot
        assert refused.status_code == 503
        ok = None
        for _ in range(100):  # its lease runs out after 3 s; then a trial is admitted and closes the breaker
            await asyncio.sleep(0.1)
            ok = await post(first, wired.key)
            if ok.status_code == 200:
                break
        assert ok is not None and ok.status_code == 200
        assert await eventually(lambda: first.runtime.executor.breakers.state(endpoint) is BreakerState.CLOSED)
    finally:
        await first.stop()


async def test_failover_cooldown_reaches_the_other_instance(tmp_path, prefix, openai_upstream):
    first, second = await start_pair(shared_settings(tmp_path, prefix))
    try:
        wired = await first.wire(openai_upstream.base_url, ["gpt-test"])
        await second.runtime.refresh()
        endpoint = f"p{wired.provider_id}:k1"
        openai_upstream.fail_next(500, FAIL)
        assert (await post(first, wired.key)).status_code == 502
        assert await eventually(lambda: second.runtime.executor.failover.cooling(endpoint))
    finally:
        await second.stop()
        await first.stop()


async def test_model_not_found_is_counted_once_for_the_deployment(tmp_path, prefix, openai_upstream):
    first, second = await start_pair(shared_settings(tmp_path, prefix))
    try:
        wired = await first.wire(openai_upstream.base_url, ["gpt-test"])
        await second.runtime.refresh()
        gone = {"error": {"message": "The model `gpt-test` does not exist", "type": "invalid_request_error",
                          "code": "model_not_found"}}
        openai_upstream.fail_next(404, gone, times=3)
        # 3 observations spread over two instances reach the threshold of 3: deprecated once.
        for instance in (first, second, first):
            assert (await post(instance, wired.key)).status_code == 502
        models = await first.services.models.list()
        assert [m.state for m in models] == ["DEPRECATED"]
    finally:
        await second.stop()
        await first.stop()


async def test_configuration_version_is_checked_cheaply_and_catches_a_lost_notice(tmp_path, prefix,
                                                                               openai_upstream):
    settings = shared_settings(tmp_path, prefix)
    settings.gateway.cache_refresh_seconds = 0.1
    first, second = await start_pair(settings)
    try:
        wired = await first.wire(openai_upstream.base_url, ["gpt-test"])
        assert await eventually(lambda: second.runtime.snapshot.keys_by_hash)  # pub/sub
        await asyncio.sleep(0.3)  # the last of the wiring's notices
        loads = second.runtime._loads_started
        await asyncio.sleep(0.5)  # five version checks, nothing changed: nothing reloaded
        assert second.runtime._loads_started == loads
        # A change whose notice is lost: only the version moves.
        keys = await first.services.api_keys.list()
        first.runtime.services.ctx.on_change = None
        await first.services.api_keys.disable(keys[0].id)
        await first.runtime.link.run(lambda r: r.incr(first.runtime.config_version.key))
        assert await eventually(lambda: not second.runtime.snapshot.keys_by_hash, seconds=2.0)
        assert (await post(second, wired.key)).status_code == 401
    finally:
        await second.stop()
        await first.stop()


async def test_redis_cut_mid_traffic_loses_no_call_log_row_and_the_bucket_resumes(tmp_path, prefix,
                                                                               openai_upstream):
    proxy = await TcpProxy(REDIS_HOST, REDIS_PORT).start()
    settings = shared_settings(tmp_path, prefix, redis_url=proxy.url(), redis_timeout_seconds=0.2,
                               redis_retry_seconds=0.3)
    gateway = await GatewayHarness(settings).start()
    try:
        wired = await gateway.wire(openai_upstream.base_url, ["gpt-test"], rate_capacity=1000, rate_refill=0.001)
        statuses = [(await post(gateway, wired.key)).status_code for _ in range(5)]
        proxy.cut("hang")
        statuses += [(await post(gateway, wired.key)).status_code for _ in range(5)]
        proxy.cut("refuse")
        statuses += [(await post(gateway, wired.key)).status_code for _ in range(5)]
        assert not gateway.runtime.link.up
        proxy.restore()
        for _ in range(50):  # the first call after the retry time finds Redis again
            await asyncio.sleep(0.1)
            statuses.append((await post(gateway, wired.key)).status_code)
            if gateway.runtime.link.up:
                break
        assert gateway.runtime.link.up, "shared state resumed"
        link, bucket = gateway.runtime.link, gateway.runtime.link.key("bucket", wired_key_id(gateway))
        before = float(await link.run(lambda r: r.hget(bucket, "tokens")))
        statuses += [(await post(gateway, wired.key)).status_code for _ in range(5)]
        after = float(await link.run(lambda r: r.hget(bucket, "tokens")))
        assert statuses == [200] * len(statuses)
        assert 4.5 < before - after < 5.5, "the shared bucket counts every call again"
        await gateway.runtime.writer.flush()
        async with gateway.runtime.db.session() as s:
            rows = (await s.execute(select(func.count()).select_from(CallLog))).scalar_one()
        assert rows == len(statuses), "no call-log row lost"
    finally:
        await gateway.stop()
        await proxy.close()


def wired_key_id(gateway: GatewayHarness) -> int:
    (entry,) = gateway.runtime.snapshot.keys_by_hash.values()
    return entry.id


async def login(instance: GatewayHarness, username: str, password: str) -> int:
    async with httpx.AsyncClient(timeout=30) as http:
        resp = await http.post(f"{instance.url}/api/v1/auth/login", json={"username": username, "password": password})
        return resp.status_code


async def test_login_throttle_is_one_for_the_deployment(tmp_path, prefix):
    """Failed logins counted through either instance lock the pair, and a spray the address, on both."""
    first, second = await start_pair(shared_settings(tmp_path, prefix))
    try:
        await first.services.users.create("alice", "alice-password")
        # 5 failures per username+address: 3 through one instance, 2 through the other.
        for instance in (first, first, first, second, second):
            assert await login(instance, "alice", "wrong-password") == 401
        for instance in (first, second):
            assert await login(instance, "alice", "alice-password") == 429
        # 20 per address whatever the usernames: a spray split over both instances.
        for i in range(15):  # 5 already counted against this address
            assert await login((first, second)[i % 2], f"guess-{i}", "wrong-password") == 401
        for instance in (first, second):
            assert await login(instance, "someone-else", "wrong-password") == 429
    finally:
        await second.stop()
        await first.stop()


async def test_login_throttle_counts_in_memory_while_redis_is_away(tmp_path, prefix):
    proxy = await TcpProxy(REDIS_HOST, REDIS_PORT).start()
    settings = shared_settings(tmp_path, prefix, redis_url=proxy.url(), redis_timeout_seconds=0.2)
    gateway = await GatewayHarness(settings).start()
    try:
        await gateway.services.users.create("alice", "alice-password")
        proxy.cut("refuse")
        for _ in range(5):
            assert await login(gateway, "alice", "wrong-password") == 401
        assert await login(gateway, "alice", "alice-password") == 429
        assert not gateway.runtime.link.up
    finally:
        await gateway.stop()
        await proxy.close()


async def test_console_and_metrics_show_the_deployments_breakers_not_the_answering_workers(
        tmp_path, prefix, openai_upstream):
    first, second = await start_pair(shared_settings(tmp_path, prefix))
    try:
        wired = await first.wire(openai_upstream.base_url, ["gpt-test"])
        await second.runtime.refresh()
        endpoint = f"p{wired.provider_id}:k1"
        await second.services.users.create("ops", "ops-password", role="ADMIN")
        listener = next(t for t in second.runtime._tasks if t.get_name() == "config-changes")
        listener.cancel()  # the second hears no announcement: what it reports must come from Redis

        async with httpx.AsyncClient(base_url=second.url, timeout=30) as http:
            assert (await http.post("/api/v1/auth/login",
                                    json={"username": "ops", "password": "ops-password"})).status_code == 200

            async def console_breaker() -> dict:
                resp = await http.get(f"/api/v1/channels/{wired.channel_ids[0]}/breakers")
                (breaker,) = resp.json()["data"]
                return breaker

            openai_upstream.fail_next(500, FAIL, times=3)
            for _ in range(2):  # failures through the first only
                assert (await post(first, wired.key)).status_code == 502
            await asyncio.sleep(0.1)
            assert (await console_breaker())["failures"] == 2
            assert (await post(first, wired.key)).status_code == 502  # the third opens it
            await asyncio.sleep(0.1)
            breaker = await console_breaker()
            assert breaker["state"] == "OPEN" and breaker["retryAfterSeconds"] > 0
            assert breaker["openedAt"] is not None
            metrics = (await http.get("/metrics")).text
            assert f'modelgate_breaker_state{{endpoint="{endpoint}"}} 2.0' in metrics
    finally:
        await second.stop()
        await first.stop()


async def test_concurrent_takes_share_round_trips_and_stay_within_the_bucket(prefix):
    from modelgate.auth.ratelimit import RedisTokenBucketLimiter
    from modelgate.config import RateLimitSettings, Settings
    from modelgate.shared.redis_link import RedisLink

    link = RedisLink(Settings(redis_url=REDIS_URL, redis_prefix=prefix, redis_timeout_seconds=2.0))
    limiter = RedisTokenBucketLimiter(link, RateLimitSettings(capacity=5, refill_per_second=0.001))
    round_trips = 0
    run = link.run

    async def counting(op):
        nonlocal round_trips
        round_trips += 1
        return await run(op)

    link.run = counting
    try:
        waits = await asyncio.gather(*(limiter.take(key, None, None) for key in [1] * 20 + [2] * 3))
    finally:
        await link.close()
    assert waits[:5] == [0.0] * 5 and all(w > 0 for w in waits[5:20]), "in order, within the bucket"
    assert waits[20:] == [0.0] * 3, "another key has its own bucket"
    assert round_trips <= 2, f"{round_trips} round trips for 23 concurrent takes"


async def test_a_large_bucket_is_taken_in_small_leases_and_still_not_exceeded(prefix):
    """Capacity 1000, refill 100/s: leases of 10 tokens (1 % of capacity, 0.1 s of refill) per worker."""
    import time

    from modelgate.auth.ratelimit import RedisTokenBucketLimiter, lease_size
    from modelgate.config import RateLimitSettings, Settings
    from modelgate.shared.redis_link import RedisLink

    assert lease_size(120, 2) == 1, "default buckets are taken one token at a time"
    settings = Settings(redis_url=REDIS_URL, redis_prefix=prefix, redis_timeout_seconds=2.0)
    links = [RedisLink(settings), RedisLink(settings)]  # two workers
    rate = RateLimitSettings(capacity=1000, refill_per_second=100)
    workers = [RedisTokenBucketLimiter(link, rate) for link in links]
    round_trips = 0
    for link in links:
        run = link.run

        async def counting(op, run=run):
            nonlocal round_trips
            round_trips += 1
            return await run(op)

        link.run = counting
    started = time.monotonic()
    try:
        admitted = 0
        for i in range(1200):
            admitted += await workers[i % 2].take(9, None, None) == 0
    finally:
        for link in links:
            await link.close()
    elapsed = time.monotonic() - started
    assert admitted <= 1000 + 100 * elapsed, "never more than the bucket held"
    assert admitted >= 1000 - 2 * 10, "at most one unused lease per worker"
    assert round_trips <= 1000 / 10 + 200 + 10, f"{round_trips} round trips"


# The AI SDK's `openai(model)` refers to the items of the step before (tests/test_responses_e2e.py). Its next
# step may reach another worker or instance: its connection was closed while the agent ran a tool.
@pytest.mark.parametrize("stream", [False, True])
async def test_an_item_reference_reads_back_on_the_other_instance(tmp_path, prefix, openai_upstream, stream):
    from openai import AsyncOpenAI

    from tests.test_responses_e2e import LOOKUP, next_step, speak_then_call

    first, second = await start_pair(shared_settings(tmp_path, prefix))
    try:
        wired = await first.wire(openai_upstream.base_url, ["gpt-test"])  # openai-compatible: converted
        await second.runtime.refresh()
        one, other = (AsyncOpenAI(base_url=f"{instance.url}/v1", api_key=wired.key, max_retries=0)
                      for instance in (first, second))
        said, call = await speak_then_call(one, openai_upstream, stream)
        step = next_step(said, call)
        counted = await other.responses.input_tokens.count(model="gpt-test", input=step, tools=[LOOKUP])
        assert counted.input_tokens > 0
        assert (await other.responses.create(model="gpt-test", input=step, tools=[LOOKUP])).output_text == \
            "It means hello."
        assert openai_upstream.last.json()["messages"][1]["content"] == "Let me look that up."
    finally:
        await second.stop()
        await first.stop()


async def test_items_in_redis_are_read_as_written_within_their_hour_and_nothing_else(prefix):
    import orjson
    import redis.asyncio as aioredis

    from modelgate.config import Settings
    from modelgate.protocols.responses.items import ItemMemory
    from modelgate.shared.items import SharedItems
    from modelgate.shared.redis_link import RedisLink

    settings = Settings(redis_url=REDIS_URL, redis_prefix=prefix, redis_timeout_seconds=2.0)
    links = [RedisLink(settings), RedisLink(settings)]  # two processes
    memories = [ItemMemory(), ItemMemory()]
    shared = [SharedItems(memory, link) for memory, link in zip(memories, links)]
    raw = aioredis.from_url(REDIS_URL)
    said = {"type": "message", "id": "msg_a", "role": "assistant", "content": [{"type": "output_text", "text": "hi"}]}
    try:
        memories[0].remember([said])
        await shared[0].close()  # the write has landed
        ttl = await raw.pttl(f"{prefix}item:msg_a")
        assert 3_590_000 < ttl <= 3_600_000, "kept in Redis for the memory's hour"
        await raw.set(f"{prefix}item:msg_b", b"not an item", px=60_000)
        await raw.set(f"{prefix}item:msg_c", orjson.dumps({"type": "message", "id": "msg_c"}), px=1_000)
        assert memories[1].fetch is not None
        await memories[1].fetch(["msg_a", "msg_b", "msg_c", "msg_nobody"])
        assert memories[1].recall("msg_a") == said
        assert not memories[1].holds("msg_b") and not memories[1].holds("msg_nobody")
        assert memories[1].holds("msg_c")  # for the second left of its hour, not an hour more
        assert memories[1].max_age - 1.5 < memories[1].clock() - memories[1]._items["msg_c"][0]
    finally:
        await raw.aclose()
        for link in links:
            await link.close()


async def test_with_redis_away_a_reference_is_refused_at_once_as_one_nobody_holds(tmp_path, prefix, openai_upstream):
    proxy = await TcpProxy(REDIS_HOST, REDIS_PORT).start()
    gateway = await GatewayHarness(shared_settings(tmp_path, prefix, redis_url=proxy.url(),
                                                   redis_timeout_seconds=0.3)).start()
    try:
        wired = await gateway.wire(openai_upstream.base_url, ["gpt-test"])
        proxy.cut("hang")
        async with httpx.AsyncClient(timeout=30) as http:
            for _ in range(2):  # the first finds Redis gone; the second does not ask it
                resp = await http.post(f"{gateway.url}/v1/responses", headers={"authorization": f"Bearer {wired.key}"},
                                       json={"model": "gpt-test", "input": [{"type": "item_reference", "id": "msg_x"}]})
                assert resp.status_code == 400, resp.text
                assert "does not hold" in resp.json()["error"]["message"]
        assert not gateway.runtime.link.up
    finally:
        await gateway.stop()
        await proxy.close()
