"""The built-in `mock` provider kind, called through the real gateway with the official SDKs."""

from __future__ import annotations

import json

import anthropic
import openai
import pytest

from modelgate.providers.mock import MOCK_UPSTREAM, answer, stream_chunks
from tests.gateway_harness import GatewayHarness, harness_settings

WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                                                     "unit": {"enum": ["C", "F"]}},
                   "required": ["city", "days", "unit"]}}}


@pytest.fixture
async def gateway(tmp_path):
    settings = harness_settings(tmp_path)
    # Errors are answered at once: no waiting between retries in these tests.
    for policy in ("upstream_error", "rate_limit_error", "service_unavailable"):
        getattr(settings.gateway.retry, policy).max_retries = 0
    harness = await GatewayHarness(settings).start()
    yield harness
    await harness.stop()
    await MOCK_UPSTREAM.stop()


async def _wire(harness: GatewayHarness, models: list, options: dict | None = None, name: str = "m") -> str:
    svc = harness.services
    provider = await svc.providers.create(f"{name}-mock", "mock", options=options)
    assert provider.base_url.endswith(".invalid/v1") and provider.keys == []
    channel = await svc.channels.create(f"{name}-channel", provider.id, models=models)
    app = await svc.applications.create(f"{name}-app")
    await svc.applications.authorize_channel(app.id, channel.id)
    key = (await svc.api_keys.create(app.id)).plaintext
    await harness.runtime.refresh()
    return key


async def test_chat_and_messages_answers_are_deterministic(gateway):
    key = await _wire(gateway, ["demo", {"model_id": "alias", "upstream_model": "upstream-name"}])
    chat = openai.AsyncOpenAI(base_url=gateway.url + "/v1", api_key=key, max_retries=0)
    first = await chat.chat.completions.create(model="demo", messages=[{"role": "user", "content": "hello there"}])
    again = await chat.chat.completions.create(model="demo", messages=[{"role": "user", "content": "hello there"}])
    assert first.choices[0].message.content == again.choices[0].message.content == \
        "Mock answer from demo: hello there"
    assert first.model == "demo"
    assert (first.usage.prompt_tokens, first.usage.completion_tokens) == (2, 6)
    mapped = await chat.chat.completions.create(model="alias", messages=[{"role": "user", "content": "x"}])
    # the upstream was sent the mapped name
    assert mapped.choices[0].message.content == "Mock answer from upstream-name: x"

    alt = anthropic.AsyncAnthropic(base_url=gateway.url + "/alt", api_key=key, max_retries=0)
    msg = await alt.messages.create(model="demo", max_tokens=64, messages=[{"role": "user", "content": "hi"}])
    assert msg.content[0].text == "Mock answer from demo: hi" and msg.stop_reason == "end_turn"
    assert msg.usage.input_tokens == 1


async def test_streams_in_both_protocols(gateway):
    key = await _wire(gateway, ["demo"])
    chat = openai.AsyncOpenAI(base_url=gateway.url + "/v1", api_key=key, max_retries=0)
    stream = await chat.chat.completions.create(model="demo", stream=True, stream_options={"include_usage": True},
                                                messages=[{"role": "user", "content": "one two three"}])
    pieces, usage = [], None
    async for chunk in stream:
        pieces.extend(c.delta.content or "" for c in chunk.choices)
        usage = chunk.usage or usage
    assert "".join(pieces) == "Mock answer from demo: one two three"
    assert len([p for p in pieces if p]) == 7 and usage.completion_tokens == 7

    alt = anthropic.AsyncAnthropic(base_url=gateway.url + "/alt", api_key=key, max_retries=0)
    async with alt.messages.stream(model="demo", max_tokens=64, messages=[{"role": "user", "content": "yo"}]) as s:
        final = await s.get_final_message()
    assert final.content[0].text == "Mock answer from demo: yo"


async def test_tool_call_then_tool_result(gateway):
    key = await _wire(gateway, ["demo"])
    chat = openai.AsyncOpenAI(base_url=gateway.url + "/v1", api_key=key, max_retries=0)
    messages = [{"role": "user", "content": "weather in Paris?"}]
    first = await chat.chat.completions.create(model="demo", messages=messages, tools=[WEATHER_TOOL])
    call = first.choices[0].message.tool_calls[0]
    assert first.choices[0].finish_reason == "tool_calls" and call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "mock", "days": 1, "unit": "C"}
    messages += [first.choices[0].message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": "sunny"}]
    second = await chat.chat.completions.create(model="demo", messages=messages, tools=[WEATHER_TOOL])
    assert second.choices[0].message.content == "Mock answer from demo: the tool returned sunny"

    alt = anthropic.AsyncAnthropic(base_url=gateway.url + "/alt", api_key=key, max_retries=0)
    tool = {"name": "get_weather", "input_schema": WEATHER_TOOL["function"]["parameters"]}
    msg = await alt.messages.create(model="demo", max_tokens=64, tools=[tool],
                                    messages=[{"role": "user", "content": "weather?"}])
    assert msg.stop_reason == "tool_use" and msg.content[-1].input == {"city": "mock", "days": 1, "unit": "C"}


async def test_errors_from_model_name_and_options(gateway):
    key = await _wire(gateway, ["boom-error-503", "fine"], name="a")
    chat = openai.AsyncOpenAI(base_url=gateway.url + "/v1", api_key=key, max_retries=0)
    with pytest.raises(openai.APIStatusError) as caught:
        await chat.chat.completions.create(model="boom-error-503", messages=[{"role": "user", "content": "x"}])
    # spec 7.5: an upstream failure is a 502 with its type as the code
    assert caught.value.status_code == 502 and "SERVICE_UNAVAILABLE" in caught.value.response.text

    key = await _wire(gateway, ["flaky"], options={"error_status": 500, "error_every": 2}, name="b")
    chat = openai.AsyncOpenAI(base_url=gateway.url + "/v1", api_key=key, max_retries=0)
    outcomes = []
    for _ in range(4):
        try:
            await chat.chat.completions.create(model="flaky", messages=[{"role": "user", "content": "x"}])
            outcomes.append(200)
        except openai.APIStatusError as exc:
            outcomes.append(exc.status_code)
    assert outcomes[0] == 200 and outcomes[1] != 200 and outcomes[2] == 200 and outcomes[3] != 200


async def test_health_check_and_latency_option(gateway):
    await _wire(gateway, ["demo"], options={"latency_ms": 30})
    channel = (await gateway.services.channels.list())[0]
    result = await gateway.runtime.checks.health_check(channel.id)
    assert result.ok and result.latency_ms >= 30


def test_answer_without_user_text_and_stream_without_usage():
    text, call, prompt = answer({"model": "m", "messages": []})
    assert text == "Mock answer from m: " and call is None and prompt == 1
    events = stream_chunks({"model": "m", "messages": [{"role": "user", "content": "a"}]}, 0)
    assert events[-1] == b"data: [DONE]\n\n" and not any(b'"usage"' in e for e in events)
    text, call, _ = answer({"model": "m", "messages": [{"role": "user", "content": "a"}], "tool_choice": "none",
                            "tools": [WEATHER_TOOL]})
    assert call is None and text.endswith(": a")


def test_a_tool_schema_of_any_shape_gets_an_answer():
    # Tool schemas reach the mock as the client wrote them (validate checks only that they are objects):
    # a `type` or `required` of another JSON type gives a placeholder value, never an exception.
    for parameters, expected in (
        ({"type": "object", "properties": {"a": {"type": {"x": 1}}, "b": {"type": ["null", "integer"]}},
          "required": ["a", "b"]}, {"a": "mock", "b": 1}),
        ({"type": "object", "properties": {"a": {"type": "string"}}, "required": 5}, {}),
        ({"type": "object", "properties": {"a": {"type": [[]]}}, "required": ["a", 7]}, {"a": "mock"}),
    ):
        tool = {"type": "function", "function": {"name": "f", "parameters": parameters}}
        _, call, _ = answer({"model": "m", "messages": [{"role": "user", "content": "a"}], "tools": [tool]})
        assert json.loads(call["function"]["arguments"]) == expected, parameters
