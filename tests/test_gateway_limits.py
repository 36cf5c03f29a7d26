"""The gateway's own limits: a caller that leaves a non-streamed call, a worker that is full,
the open-file limit. Local conditions never reach the breaker."""

from __future__ import annotations

import asyncio
import resource

import httpx
import orjson
from sqlalchemy import select

from modelgate.storage.models import CallLog

GOOD = {"model": "gpt-test", "messages": [{"role": "user", "content": "hello"}]}


async def rows(gateway) -> list[CallLog]:
    await gateway.runtime.writer.flush()
    async with gateway.runtime.db.session() as session:
        return list((await session.scalars(select(CallLog).order_by(CallLog.id))).all())


async def test_a_non_streamed_call_whose_client_left_is_cancelled_and_logged_499(gateway, openai_upstream):
    wired = await gateway.wire(openai_upstream.base_url, ["gpt-test"])
    openai_upstream.delay = 5.0
    async with httpx.AsyncClient(base_url=gateway.url) as client:
        with_timeout = client.post("/v1/chat/completions", headers={"authorization": f"Bearer {wired.key}"},
                                   json=GOOD, timeout=0.5)
        try:
            await with_timeout
        except httpx.TimeoutException:
            pass
    for _ in range(100):  # the gateway notices the closed connection
        logged = await rows(gateway)
        if logged:
            break
        await asyncio.sleep(0.05)
    [row] = logged
    assert (row.status, row.error_code) == (499, "CLIENT_DISCONNECTED")
    assert row.latency_ms < 4000  # cancelled, not run to the upstream's answer
    assert gateway.runtime.in_flight == 0
    assert all(s.failures == 0 for s in gateway.runtime.executor.breakers.states().values())  # no upstream fault


async def test_a_full_gateway_refuses_at_once_with_429_and_retry_after(gateway, openai_upstream):
    wired = await gateway.wire(openai_upstream.base_url, ["gpt-test"])
    gateway.runtime.max_in_flight = 1
    openai_upstream.delay = 1.0
    headers = {"authorization": f"Bearer {wired.key}"}
    async with httpx.AsyncClient(base_url=gateway.url, timeout=10) as client:
        held = asyncio.ensure_future(client.post("/v1/chat/completions", headers=headers, json=GOOD))
        while gateway.runtime.in_flight == 0:
            await asyncio.sleep(0.01)
        refused = await client.post("/v1/chat/completions", headers=headers, json=GOOD)
        assert (await held).status_code == 200
    assert refused.status_code == 429
    assert refused.headers["retry-after"] == "1"
    body = orjson.loads(refused.content)
    assert body == {"error": {"code": "RATE_LIMIT_EXCEEDED", "message": body["error"]["message"]}}  # spec 7.3
    assert "capacity" in body["error"]["message"]
    assert len(openai_upstream.requests) == 1  # the refused call never reached the upstream
    assert [r.status for r in await rows(gateway)] == [429, 200]
    states = gateway.runtime.executor.breakers.states()
    assert all(s.failures == 0 for s in states.values())


async def test_the_open_file_soft_limit_is_raised_to_the_hard_limit(gateway):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert soft == hard or hard == resource.RLIM_INFINITY
    assert gateway.runtime.max_in_flight <= (soft - 256) // 2
