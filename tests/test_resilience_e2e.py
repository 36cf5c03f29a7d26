"""Resilience end to end: the official openai SDK (no SDK retries) → the real gateway → a
misbehaving fake OpenAI upstream. Only the gateway retries; its waits go through an injected
clock, so they are asserted exactly and pass instantly."""

from __future__ import annotations

import asyncio
import time

import openai
import pytest
from openai import AsyncOpenAI

from modelgate.services.events import EventService
from tests.fakes.openai_upstream import FakeOpenAI
from tests.gateway_harness import GatewayHarness, harness_settings

MESSAGES = [{"role": "user", "content": "hello there"}]


class ShiftClock:
    """Real monotonic time plus every wait the gateway asked for; the waits pass at once."""

    def __init__(self) -> None:
        self.offset = 0.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return time.monotonic() + self.offset

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.offset += seconds

    def advance(self, seconds: float) -> None:
        self.offset += seconds


@pytest.fixture
async def gw(tmp_path):
    clock = ShiftClock()
    settings = harness_settings(tmp_path)
    settings.gateway.retry.jitter = False
    settings.gateway.lifecycle.probe_interval_seconds = 0  # its hourly sleep would not wait on this clock
    harness = await GatewayHarness(settings, clock).start()
    harness.clock = clock
    yield harness
    await harness.stop()


def sdk(gw, key: str) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=f"{gw.url}/v1", api_key=key, max_retries=0)


def openai_error(message: str, code: str | None, kind: str = "invalid_request_error") -> dict:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


RATE_LIMITED = openai_error("Rate limit reached for gpt-test on requests per min (RPM).", "rate_limit_exceeded",
                            "requests")
SERVER_ERROR = openai_error("The server had an error while processing your request.", None, "server_error")
OVERLOADED = openai_error("The engine is currently overloaded, please try again later.", None, "server_error")
NO_QUOTA = openai_error("You exceeded your current quota, please check your plan and billing details.",
                        "insufficient_quota", "insufficient_quota")
BAD_KEY = openai_error("Incorrect API key provided.", "invalid_api_key")


async def events(gw, kind: str) -> list:
    await gw.runtime.writer.flush()
    return (await EventService(gw.runtime.db).list(event_type=kind)).items


def assert_envelope(exc: openai.APIStatusError, status: int, code: str) -> dict:
    assert exc.status_code == status
    body = exc.response.json()
    assert body["success"] is False and body["error"]["code"] == code
    assert body["traceId"] == exc.response.headers["x-trace-id"]
    assert "up-key" not in body["error"]["message"]
    return body


async def test_429_without_retry_after_backs_off_2_4_8_16_32_then_answers_429(gw, openai_upstream):
    gw.settings.gateway.breaker.consecutive_failures = 10  # the retry table alone: every attempt counts
    wired = await gw.wire(openai_upstream.base_url, ["gpt-test"])
    openai_upstream.fail_next(429, RATE_LIMITED, times=6)
    with pytest.raises(openai.RateLimitError) as caught:
        await sdk(gw, wired.key).chat.completions.create(model="gpt-test", messages=MESSAGES)
    assert len(openai_upstream.requests) == 6
    assert gw.clock.sleeps == [2.0, 4.0, 8.0, 16.0, 32.0]
    assert caught.value.response.json() == {
        "error": {"code": "RATE_LIMIT_EXCEEDED", "message": caught.value.response.json()["error"]["message"]}
    }
    [event] = await events(gw, "RETRY_EXHAUSTED")
    assert (event.error_type, event.model, event.channel_id) == ("RATE_LIMIT_ERROR", "gpt-test", wired.channel_ids[0])


async def test_429_with_retry_after_is_honoured_then_succeeds(gw, openai_upstream):
    wired = await gw.wire(openai_upstream.base_url, ["gpt-test"])
    openai_upstream.fail_next(429, RATE_LIMITED, headers={"retry-after": "3"}, times=2)
    resp = await sdk(gw, wired.key).chat.completions.create(model="gpt-test", messages=MESSAGES)
    assert resp.choices[0].message.content == "Echo: hello there"
    assert len(openai_upstream.requests) == 3
    assert gw.clock.sleeps == [3.0, 3.0]


async def test_429_with_retry_after_passes_it_on_when_exhausted(gw, openai_upstream):
    gw.settings.gateway.breaker.consecutive_failures = 10  # the retry table alone: every attempt counts
    wired = await gw.wire(openai_upstream.base_url, ["gpt-test"])
    openai_upstream.fail_next(429, RATE_LIMITED, headers={"retry-after": "3"}, times=6)
    with pytest.raises(openai.RateLimitError) as caught:
        await sdk(gw, wired.key).chat.completions.create(model="gpt-test", messages=MESSAGES)
    assert gw.clock.sleeps == [3.0] * 5
    assert caught.value.response.headers["retry-after"] == "3"


async def test_500_retries_1_2_4_then_502_upstream_error(gw, openai_upstream):
    wired = await gw.wire(openai_upstream.base_url, ["gpt-test"])
    openai_upstream.fail_next(500, SERVER_ERROR, times=4)
    with pytest.raises(openai.APIStatusError) as caught:
        await sdk(gw, wired.key).chat.completions.create(model="gpt-test", messages=MESSAGES)
    assert_envelope(caught.value, 502, "UPSTREAM_ERROR")
    assert len(openai_upstream.requests) == 4
    assert gw.clock.sleeps == [1.0, 2.0, 4.0]


async def test_503_retries_every_5_seconds_then_502_service_unavailable(gw, openai_upstream):
    wired = await gw.wire(openai_upstream.base_url, ["gpt-test"])
    openai_upstream.fail_next(503, OVERLOADED, times=4)
    with pytest.raises(openai.APIStatusError) as caught:
        await sdk(gw, wired.key).chat.completions.create(model="gpt-test", messages=MESSAGES)
    assert_envelope(caught.value, 502, "SERVICE_UNAVAILABLE")
    assert gw.clock.sleeps == [5.0, 5.0, 5.0]


async def test_quota_is_not_retried(gw, openai_upstream):
    wired = await gw.wire(openai_upstream.base_url, ["gpt-test"])
    openai_upstream.fail_next(429, NO_QUOTA)
    with pytest.raises(openai.APIStatusError) as caught:
        await sdk(gw, wired.key).chat.completions.create(model="gpt-test", messages=MESSAGES)
    assert_envelope(caught.value, 502, "QUOTA_EXCEEDED")
    assert len(openai_upstream.requests) == 1 and gw.clock.sleeps == []


async def test_upstream_401_is_not_retried(gw, openai_upstream):
    wired = await gw.wire(openai_upstream.base_url, ["gpt-test"], upstream_keys=("revoked-key",))
    with pytest.raises(openai.APIStatusError) as caught:
        await sdk(gw, wired.key).chat.completions.create(model="gpt-test", messages=MESSAGES)
    assert_envelope(caught.value, 502, "AUTHENTICATION_ERROR")
    assert len(openai_upstream.requests) == 1 and gw.clock.sleeps == []


async def test_timeout_answers_502_timeout_error_within_the_app_timeout(gw, openai_upstream):
    wired = await gw.wire(openai_upstream.base_url, ["gpt-test"], timeout_seconds=1)
    openai_upstream.delay = 1.5
    started = time.monotonic()
    with pytest.raises(openai.APIStatusError) as caught:
        await sdk(gw, wired.key).chat.completions.create(model="gpt-test", messages=MESSAGES)
    assert time.monotonic() - started < 1.4
    assert_envelope(caught.value, 502, "TIMEOUT_ERROR")
    # the whole budget went into the one try: no retry may pass the deadline
    assert len(openai_upstream.requests) == 1 and gw.clock.sleeps == []


async def test_connection_resets_are_retried_as_network_errors(gw, openai_upstream):
    wired = await gw.wire(openai_upstream.base_url, ["gpt-test"])
    openai_upstream.reset_next = 2
    resp = await sdk(gw, wired.key).chat.completions.create(model="gpt-test", messages=MESSAGES)
    assert resp.choices[0].message.content == "Echo: hello there"
    assert len(openai_upstream.requests) == 3
    assert gw.clock.sleeps == [0.5, 1.0]


async def test_connection_resets_exhausted_answer_502_network_error(gw, openai_upstream):
    wired = await gw.wire(openai_upstream.base_url, ["gpt-test"])
    openai_upstream.reset_next = 4
    with pytest.raises(openai.APIStatusError) as caught:
        await sdk(gw, wired.key).chat.completions.create(model="gpt-test", messages=MESSAGES)
    assert_envelope(caught.value, 502, "NETWORK_ERROR")
    assert gw.clock.sleeps == [0.5, 1.0, 2.0]


async def test_stream_failing_before_the_first_byte_is_retried(gw, openai_upstream):
    wired = await gw.wire(openai_upstream.base_url, ["gpt-test"])
    openai_upstream.fail_next(500, SERVER_ERROR)
    stream = await sdk(gw, wired.key).chat.completions.create(model="gpt-test", messages=MESSAGES, stream=True)
    text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text == "Echo: hello there"
    assert gw.clock.sleeps == [1.0]


async def test_stream_broken_midway_ends_with_the_error_event(gw, openai_upstream):
    wired = await gw.wire(openai_upstream.base_url, ["gpt-test"])
    openai_upstream.cut_stream = True
    received: list[str] = []

    async def consume() -> None:
        stream = await sdk(gw, wired.key).chat.completions.create(
            model="gpt-test", messages=[{"role": "user", "content": "one two three four"}], stream=True
        )
        async for chunk in stream:
            if chunk.choices:
                received.append(chunk.choices[0].delta.content or "")

    with pytest.raises(openai.APIError) as caught:
        await asyncio.wait_for(consume(), 10)
    assert "".join(received).startswith("Echo:")  # the stream had started: no retry, no failover
    assert "NETWORK_ERROR" in str(caught.value.body) or "network_error" in str(caught.value.body)
    assert len(openai_upstream.requests) == 1
    [status] = gw.runtime.executor.breakers.states().values()
    assert status.failures == 1  # the broken stream counted against its endpoint


async def test_failover_to_a_second_channel(gw, openai_upstream):
    wired = await gw.wire(openai_upstream.base_url, ["gpt-test"], priority=0)
    backup = await FakeOpenAI(api_key="backup-key").start()
    try:
        svc = gw.services
        provider = await svc.providers.create("backup-provider", "openai-compatible", base_url=backup.base_url,
                                              keys=["backup-key"])
        channel = await svc.channels.create("backup-channel", provider.id, models=["gpt-test"], priority=1)
        await svc.applications.authorize_channel(wired.app_id, channel.id)
        await gw.runtime.refresh()
        openai_upstream.fail_next(429, NO_QUOTA)
        resp = await sdk(gw, wired.key).chat.completions.create(model="gpt-test", messages=MESSAGES)
        assert resp.choices[0].message.content == "Echo: hello there"
        assert (len(openai_upstream.requests), len(backup.requests)) == (1, 1)
        assert backup.last.headers["authorization"] == "Bearer backup-key"
        [event] = await events(gw, "FAILOVER")
        assert (event.channel_id, event.error_type) == (wired.channel_ids[0], "QUOTA_EXCEEDED")
        assert f"(channel {channel.id})" in event.detail
        # the failed channel cools down: the next call goes straight to the backup
        await sdk(gw, wired.key).chat.completions.create(model="gpt-test", messages=MESSAGES)
        assert (len(openai_upstream.requests), len(backup.requests)) == (1, 2)
    finally:
        await backup.close()


async def test_breaker_opens_then_answers_503_with_retry_after_then_recovers(gw, openai_upstream):
    wired = await gw.wire(openai_upstream.base_url, ["gpt-test"])
    client = sdk(gw, wired.key)
    openai_upstream.fail_next(401, BAD_KEY, times=5)
    for _ in range(5):
        with pytest.raises(openai.APIStatusError) as caught:
            await client.chat.completions.create(model="gpt-test", messages=MESSAGES)
        assert caught.value.status_code == 502
    with pytest.raises(openai.APIStatusError) as caught:
        await client.chat.completions.create(model="gpt-test", messages=MESSAGES)
    assert_envelope(caught.value, 503, "UPSTREAM_ERROR")
    assert caught.value.response.headers["retry-after"] == "30"
    assert len(openai_upstream.requests) == 5  # the open breaker kept the call away from the upstream
    [opened] = await events(gw, "BREAKER_OPENED")
    assert opened.error_type == "AUTHENTICATION_ERROR"
    gw.clock.advance(30)
    for _ in range(3):  # the half-open trial calls
        resp = await client.chat.completions.create(model="gpt-test", messages=MESSAGES)
        assert resp.choices[0].message.content == "Echo: hello there"
    [status] = gw.runtime.executor.breakers.states().values()
    assert status.state.value == "CLOSED"
    assert [len(await events(gw, k)) for k in ("BREAKER_HALF_OPEN", "BREAKER_CLOSED")] == [1, 1]


async def test_model_not_found_three_times_deprecates_the_instance(gw, openai_upstream):
    wired = await gw.wire(openai_upstream.base_url,
                          ["gpt-test", {"model_id": "old-model", "upstream_model": "gpt-retired"}])
    client = sdk(gw, wired.key)
    for _ in range(3):
        with pytest.raises(openai.APIStatusError) as caught:
            await client.chat.completions.create(model="old-model", messages=MESSAGES)
        assert_envelope(caught.value, 502, "MODEL_NOT_FOUND")
    assert len(openai_upstream.requests) == 3 and gw.clock.sleeps == []
    [event] = await events(gw, "MODEL_DEPRECATED")
    assert event.model == "old-model"
    for _ in range(100):  # the snapshot refresh follows the state change
        listed = [m.id for m in (await client.models.list()).data]
        if "old-model" not in listed:
            break
        await asyncio.sleep(0.02)
    assert listed == ["gpt-test"]
    with pytest.raises(openai.NotFoundError):
        await client.chat.completions.create(model="old-model", messages=MESSAGES)
    assert len(openai_upstream.requests) == 3
    # An admin re-activates it; if the upstream still lacks the model, it is deprecated again.
    instance = next(m for m in await gw.services.models.list() if m.model_id == "old-model")
    await gw.services.models.reactivate(instance.id)
    await gw.runtime.refresh()
    for _ in range(3):
        with pytest.raises(openai.APIStatusError):
            await client.chat.completions.create(model="old-model", messages=MESSAGES)
    assert len(await events(gw, "MODEL_DEPRECATED")) == 2
    assert (await gw.services.models.get(instance.id)).state == "DEPRECATED"


async def test_a_converted_call_is_retried_with_the_same_upstream_body(gw, openai_upstream):
    # The first attempt let the decoded request go; the retry decodes the client's bytes again.
    import httpx
    import orjson

    wired = await gw.wire(openai_upstream.base_url, ["gpt-test"])
    openai_upstream.fail_next(500, SERVER_ERROR)
    sent = {"model": "gpt-test", "max_tokens": 64, "system": "be brief", "messages": [
        {"role": "user", "content": "look up snow"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"w": 1}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "frozen rain"}]}]}
    async with httpx.AsyncClient(base_url=gw.url) as http:
        resp = await http.post("/alt/v1/messages", content=orjson.dumps(sent), headers={
            "x-api-key": wired.key, "alt-version": "2023-06-01", "content-type": "application/json"})
    assert resp.status_code == 200, resp.text
    assert resp.json()["type"] == "message" and gw.clock.sleeps == [1.0]
    first, second = openai_upstream.requests
    assert second.json() == first.json()
    assert first.json()["messages"][-1] == {"role": "tool", "tool_call_id": "toolu_1", "content": "frozen rain"}
