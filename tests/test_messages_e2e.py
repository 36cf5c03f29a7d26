"""Messages protocol end to end: the official anthropic SDK (base URL `{gateway}/alt`) → gateway →
the fake Anthropic upstream (pass-through) and the fake OpenAI upstream (conversion)."""

from __future__ import annotations

import base64

import anthropic
import httpx
import orjson
import pytest
from anthropic import AsyncAnthropic

from tests.fakes.anthropic_upstream import API_KEY, Reply

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 16).decode()
WEATHER = {
    "name": "get_weather",
    "description": "Weather for a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
CLOCK = {"name": "get_time", "input_schema": {"type": "object", "properties": {"tz": {"type": "string"}}}}


def client(gateway, key: str) -> AsyncAnthropic:
    """The SDK calling the gateway the way spec 4.3 documents: `x-api-key` and version 2023-06-01.

    This SDK release sends `Authorization: Bearer` and a newer `anthropic-version` by
    default, so both headers are set explicitly (see test_unmodified_sdk_defaults).
    """
    return AsyncAnthropic(base_url=f"{gateway.url}/alt", max_retries=0,
                          default_headers={"x-api-key": key, "anthropic-version": "2023-06-01"})


async def native(gateway, upstream, models=("claude-haiku-4-5",)):
    return await gateway.wire(upstream.base_url, list(models), kind="anthropic", upstream_keys=(API_KEY,),
                              name="claude")


# --- pass-through to a messages-protocol upstream ----------------------------------------------


async def test_plain_message_pass_through(gateway, anthropic_upstream):
    wired = await native(gateway, anthropic_upstream)
    msg = await client(gateway, wired.key).messages.create(
        model="claude-haiku-4-5", max_tokens=100, system="be brief", stop_sequences=["ZZZ"],
        extra_body={"temperature": 0.3},  # this SDK version no longer names sampling fields
        messages=[{"role": "user", "content": "hello there"}],
    )
    assert (msg.type, msg.role, msg.model) == ("message", "assistant", "claude-haiku-4-5")
    assert msg.id.startswith("msg_")
    assert [b.type for b in msg.content] == ["text"] and msg.content[0].text == "Echo: hello there"
    assert msg.stop_reason == "end_turn"
    assert msg.usage.input_tokens > 0 and msg.usage.output_tokens > 0
    sent = anthropic_upstream.last
    assert sent.headers["x-api-key"] == API_KEY  # the upstream key, never the gateway key
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert wired.key not in sent.body.decode()
    body = sent.json()
    assert (body["model"], body["system"], body["temperature"], body["stop_sequences"]) == (
        "claude-haiku-4-5", "be brief", 0.3, ["ZZZ"])


async def test_streamed_pass_through_is_assembled_by_the_sdk(gateway, anthropic_upstream):
    wired = await native(gateway, anthropic_upstream)
    async with client(gateway, wired.key).messages.stream(
        model="claude-haiku-4-5", max_tokens=100, messages=[{"role": "user", "content": "one two three four"}],
    ) as stream:
        text = "".join([t async for t in stream.text_stream])
        final = await stream.get_final_message()
    assert text == "Echo: one two three four" == final.content[0].text
    assert final.stop_reason == "end_turn" and final.usage.output_tokens > 0 and final.usage.input_tokens > 0


async def test_raw_stream_keeps_vendor_events(gateway, anthropic_upstream):
    wired = await native(gateway, anthropic_upstream)
    async with httpx.AsyncClient(base_url=gateway.url) as http:
        resp = await http.post("/alt/v1/messages", headers={"x-api-key": wired.key, "alt-version": "2023-06-01"},
                               json={"model": "claude-haiku-4-5", "max_tokens": 50, "stream": True,
                                     "messages": [{"role": "user", "content": "hi"}]})
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/event-stream")
    names = [line[7:] for line in resp.text.splitlines() if line.startswith("event: ")]
    assert names[0] == "message_start" and "ping" in names and names[-1] == "message_stop"
    assert {"content_block_start", "content_block_delta", "content_block_stop", "message_delta"} <= set(names)


async def test_tool_use_round_trip_pass_through(gateway, anthropic_upstream):
    wired = await native(gateway, anthropic_upstream)
    sdk = client(gateway, wired.key)
    question = {"role": "user", "content": "use get_weather for Paris"}
    first = await sdk.messages.create(model="claude-haiku-4-5", max_tokens=200, tools=[WEATHER, CLOCK],
                                      messages=[question])
    assert first.stop_reason == "tool_use"
    call = next(b for b in first.content if b.type == "tool_use")
    assert (call.name, call.input) == ("get_weather", {"city": "test"})
    second = await sdk.messages.create(
        model="claude-haiku-4-5", max_tokens=200, tools=[WEATHER, CLOCK],
        messages=[question, {"role": "assistant", "content": first.content},
                  {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "sunny"}]}],
    )
    assert second.content[0].text == "Tool results: sunny" and second.stop_reason == "end_turn"


async def test_image_input_pass_through(gateway, anthropic_upstream):
    wired = await native(gateway, anthropic_upstream)
    msg = await client(gateway, wired.key).messages.create(
        model="claude-haiku-4-5", max_tokens=100,
        messages=[{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
            {"type": "text", "text": "what is this?"}]}],
    )
    assert msg.content[0].text == "I see 1 image(s): image/png"
    assert anthropic_upstream.last.json()["messages"][0]["content"][0]["source"]["data"] == PNG


async def test_upstream_model_not_found_is_502_envelope(gateway, anthropic_upstream):
    wired = await native(gateway, anthropic_upstream, models=("claude-retired",))
    with pytest.raises(anthropic.APIStatusError) as info:
        await client(gateway, wired.key).messages.create(
            model="claude-retired", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
    assert info.value.status_code == 502
    body = info.value.response.json()
    assert body["success"] is False and body["error"]["code"] == "MODEL_NOT_FOUND"
    assert "claude-retired" in body["error"]["message"]


async def test_mid_stream_upstream_error_reaches_the_sdk(gateway, anthropic_upstream):
    wired = await native(gateway, anthropic_upstream)
    anthropic_upstream.reply_next(Reply(text="partial", stream_error=("overloaded_error", "Overloaded")))
    with pytest.raises(anthropic.APIStatusError) as info:
        async with client(gateway, wired.key).messages.stream(
            model="claude-haiku-4-5", max_tokens=10, messages=[{"role": "user", "content": "hi"}]) as stream:
            async for _ in stream:
                pass
    assert "Overloaded" in str(info.value)


# --- conversion to a chat-completions upstream --------------------------------------------------


async def chat_wired(gateway, openai_upstream):
    return await gateway.wire(openai_upstream.base_url, ["gpt-test"])


async def test_plain_message_converted_to_chat_upstream(gateway, openai_upstream):
    wired = await chat_wired(gateway, openai_upstream)
    msg = await client(gateway, wired.key).messages.create(
        model="gpt-test", max_tokens=64, system=[{"type": "text", "text": "sys one"}], extra_body={"top_k": 5},
        stop_sequences=["END"], metadata={"user_id": "u-1"},
        messages=[{"role": "user", "content": [{"type": "text", "text": "hello there"}]}],
    )
    assert msg.model == "gpt-test" and msg.id.startswith("msg_")
    assert msg.content[0].text == "Echo: hello there" and msg.stop_reason == "end_turn"
    assert msg.usage.input_tokens > 0 and msg.usage.output_tokens > 0
    body = openai_upstream.last.json()
    assert body["messages"][0] == {"role": "system", "content": "sys one"}
    assert (body["max_tokens"], body["stop"], body["user"]) == (64, ["END"], "u-1")
    assert "top_k" not in body


async def test_streamed_conversion_is_assembled_by_the_sdk(gateway, openai_upstream):
    wired = await chat_wired(gateway, openai_upstream)
    async with client(gateway, wired.key).messages.stream(
        model="gpt-test", max_tokens=64, messages=[{"role": "user", "content": "one two three"}],
    ) as stream:
        text = "".join([t async for t in stream.text_stream])
        final = await stream.get_final_message()
    assert text == "Echo: one two three" == final.content[0].text
    assert final.stop_reason == "end_turn"
    assert final.usage.input_tokens > 0 and final.usage.output_tokens > 0  # usage only came at the end upstream


async def test_parallel_tool_use_round_trip_converted(gateway, openai_upstream):
    wired = await chat_wired(gateway, openai_upstream)
    sdk = client(gateway, wired.key)
    question = {"role": "user", "content": "call tool please"}
    async with sdk.messages.stream(model="gpt-test", max_tokens=200, tools=[WEATHER, CLOCK],
                                   tool_choice={"type": "any"}, messages=[question]) as stream:
        first = await stream.get_final_message()
    assert first.stop_reason == "tool_use"
    calls = [b for b in first.content if b.type == "tool_use"]
    assert [c.name for c in calls] == ["get_weather", "get_time"]
    assert calls[0].input["city"]
    assert openai_upstream.last.json()["tool_choice"] == "required"
    results = [{"type": "tool_result", "tool_use_id": c.id, "content": f"result {i}"} for i, c in enumerate(calls)]
    second = await sdk.messages.create(
        model="gpt-test", max_tokens=200, tools=[WEATHER, CLOCK],
        messages=[question, {"role": "assistant", "content": first.content},
                  {"role": "user", "content": [*results, {"type": "text", "text": "summarise"}]}],
    )
    assert second.content[0].text == "Echo: summarise"
    sent = openai_upstream.last.json()["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool", "user"]
    assert [c["id"] for c in sent[1]["tool_calls"]] == [c.id for c in calls]
    assert [(m["tool_call_id"], m["content"]) for m in sent[2:4]] == [(calls[0].id, "result 0"), (calls[1].id, "result 1")]


async def test_image_input_converted_to_chat_image_part(gateway, openai_upstream):
    wired = await chat_wired(gateway, openai_upstream)
    await client(gateway, wired.key).messages.create(
        model="gpt-test", max_tokens=64,
        messages=[{"role": "user", "content": [
            {"type": "text", "text": "describe"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
            {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}}]}],
    )
    content = openai_upstream.last.json()["messages"][0]["content"]
    assert content == [
        {"type": "text", "text": "describe"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
    ]


# --- protocol validation (spec 7.2) -------------------------------------------------------------


async def post(gateway, headers: dict[str, str], body: object) -> httpx.Response:
    async with httpx.AsyncClient(base_url=gateway.url) as http:
        return await http.post("/alt/v1/messages", headers=headers, content=orjson.dumps(body))


GOOD = {"model": "claude-haiku-4-5", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}


def assert_messages_400(resp: httpx.Response, needle: str) -> None:
    assert resp.status_code == 400
    body = resp.json()
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    assert set(body) == {"type", "error"} and set(body["error"]) == {"type", "message"}
    assert needle in body["error"]["message"]


@pytest.mark.parametrize("version_headers", [{}, {"alt-version": "2020-01-01"}, {"anthropic-version": "1999"}])
async def test_missing_or_wrong_version_is_400(gateway, anthropic_upstream, version_headers):
    wired = await native(gateway, anthropic_upstream)
    resp = await post(gateway, {"x-api-key": wired.key, **version_headers}, GOOD)
    assert_messages_400(resp, "alt-version")
    assert not anthropic_upstream.requests


@pytest.mark.parametrize("version_header", ["alt-version", "anthropic-version"])
async def test_either_version_header_name_works(gateway, anthropic_upstream, version_header):
    wired = await native(gateway, anthropic_upstream)
    resp = await post(gateway, {"x-api-key": wired.key, version_header: "2023-06-01"}, GOOD)
    assert resp.status_code == 200 and resp.json()["type"] == "message"


@pytest.mark.parametrize(
    ("drop", "needle"), [("model", "model"), ("messages", "messages"), ("max_tokens", "max_tokens")])
async def test_missing_required_fields_are_400(gateway, anthropic_upstream, drop, needle):
    wired = await native(gateway, anthropic_upstream)
    body = {k: v for k, v in GOOD.items() if k != drop}
    resp = await post(gateway, {"x-api-key": wired.key, "alt-version": "2023-06-01"}, body)
    assert_messages_400(resp, needle)


async def test_sdk_sees_a_bad_request_error(gateway, anthropic_upstream):
    wired = await native(gateway, anthropic_upstream)
    with pytest.raises(anthropic.BadRequestError) as info:
        await client(gateway, wired.key).messages.create(
            model="claude-haiku-4-5", max_tokens=0, messages=[{"role": "user", "content": "hi"}])
    assert info.value.body == {"type": "error", "error": {"type": "invalid_request_error",
                                                          "message": "max_tokens: must be a positive integer"}}


async def test_unmodified_sdk_defaults(gateway, anthropic_upstream):
    """Issue 5: the vendor's SDK works with only its base URL changed."""
    wired = await native(gateway, anthropic_upstream)
    sdk = AsyncAnthropic(base_url=f"{gateway.url}/alt", api_key=wired.key, max_retries=0)
    msg = await sdk.messages.create(model="claude-haiku-4-5", max_tokens=10,
                                    messages=[{"role": "user", "content": "hi"}])
    assert msg.content[0].text == "Echo: hi"
