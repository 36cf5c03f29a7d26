"""The official SDKs as clients of the gateway, its upstream a replay server that answers with a
recorded provider stream (tests/captures): both directions are checked independently of our
own reading of the APIs. The request the gateway sent upstream must fit that provider's SDK
request types; the gateway's answer must be what the client's SDK parses and accumulates (its
stream helpers check the event order) into the recorded text, tool call, finish and usage."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from tests.fakes.local_server import LocalServer
from tests.sdk_check import typed_dict_problems

CAPTURES = Path(__file__).parent / "captures"
OPENAI_CAPTURE = "openai_chat_stream_tool_call.sse"  # gpt-4o: get_weather {"city": "New York City"}
ANTHROPIC_CAPTURE = "anthropic_messages_stream_tool_use.sse"  # text, then get_weather {"location": "Paris"}
# The name clients call (a channel alias: the SDK warns about dated model names it deems retired)
ALIAS = "replayed-model"
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}, "location": {"type": "string"}}}


class Replay:
    """An upstream that answers every POST with one recorded stream and keeps what it was sent."""

    def __init__(self, capture: str | bytes) -> None:
        self.body = capture if isinstance(capture, bytes) else (CAPTURES / capture).read_bytes()
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.server = LocalServer([web.post("/{tail:.*}", self._answer)])
        self.url = ""

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        self.requests.append((request.path, await request.json()))
        return web.Response(body=self.body, content_type="text/event-stream")

    async def __aenter__(self) -> "Replay":
        self.url = (await self.server.__aenter__()).url
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.server.__aexit__(*exc)


def openai_client(gateway: Any, key: str) -> Any:
    from openai import AsyncOpenAI

    return AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=key, max_retries=0)


def anthropic_client(gateway: Any, key: str) -> Any:
    from anthropic import AsyncAnthropic

    return AsyncAnthropic(base_url=f"{gateway.url}/alt", api_key=key, max_retries=0,
                          default_headers={"x-api-key": key, "anthropic-version": "2023-06-01"})


def fits_openai_chat(body: dict[str, Any]) -> list[str]:
    from openai.types.chat import completion_create_params as params

    return typed_dict_problems(body, params.CompletionCreateParamsStreaming)


def fits_anthropic_messages(body: dict[str, Any]) -> list[str]:
    from anthropic.types import message_create_params as params

    tp = params.MessageCreateParamsStreaming
    # The SDK (2.x) no longer declares the sampling parameters the API still takes.
    sampling = {f"body.{name}: not a field of {tp.__name__}" for name in ("temperature", "top_p", "top_k")}
    return [p for p in typed_dict_problems(body, tp) if p not in sampling]


async def openai_sdk_turn(gateway: Any, key: str, model: str) -> Any:
    """The chat SDK's stream helper, which accumulates chunks into the final completion."""
    client = openai_client(gateway, key)
    async with client.chat.completions.stream(
            model=model, messages=[{"role": "user", "content": "What's the weather?"}],
            tools=[{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}],
            stream_options={"include_usage": True}) as stream:
        async for _ in stream:
            pass
        return await stream.get_final_completion()


async def anthropic_sdk_turn(gateway: Any, key: str, model: str) -> Any:
    """The messages SDK's stream helper, which accumulates the events into the final message."""
    client = anthropic_client(gateway, key)
    async with client.messages.stream(
            model=model, max_tokens=256, messages=[{"role": "user", "content": "What's the weather?"}],
            tools=[{"name": "get_weather", "input_schema": WEATHER}]) as stream:
        async for _ in stream:
            pass
        return await stream.get_final_message()


# upstream kind -> (recorded stream, path prefix of its base URL, model name in the recording)
RECORDED = {
    "openai": (OPENAI_CAPTURE, "/v1", "gpt-4o-2024-08-06"),
    "anthropic": (ANTHROPIC_CAPTURE, "", "claude-sonnet-4-20250514"),
}


@pytest.mark.parametrize("upstream_kind", ["openai", "anthropic"])
async def test_chat_sdk_parses_the_gateways_stream_of_a_recorded_upstream(gateway, upstream_kind):
    capture, base, model = RECORDED[upstream_kind]
    async with Replay(capture) as upstream:
        wired = await gateway.wire(upstream.url + base, [f"{ALIAS}={model}"], kind=upstream_kind)
        final = await openai_sdk_turn(gateway, wired.key, ALIAS)
    path, sent = upstream.requests[0]
    assert sent["model"] == model
    choice = final.choices[0]
    call = choice.message.tool_calls[0]
    assert choice.finish_reason == "tool_calls" and call.function.name == "get_weather"
    if upstream_kind == "openai":  # same wire: forwarded as is, relayed as recorded
        assert path == "/v1/chat/completions" and fits_openai_chat(sent) == []
        assert call.id == "call_4XzlGBLtUe9dy3GVNV4jhq7h"
        assert json.loads(call.function.arguments) == {"city": "New York City"}
        assert (final.usage.prompt_tokens, final.usage.completion_tokens) == (44, 16)
    else:  # converted both ways
        assert path == "/v1/messages" and fits_anthropic_messages(sent) == []
        assert sent["stream"] is True and sent["tools"][0]["name"] == "get_weather"
        assert choice.message.content == "I'll check the current weather in Paris for you."
        assert call.id == "toolu_01NRLabsLyVHZPKxbKvkfSMn"
        assert json.loads(call.function.arguments) == {"location": "Paris"}
        assert (final.usage.prompt_tokens, final.usage.completion_tokens) == (377, 65)


@pytest.mark.parametrize("upstream_kind", ["openai", "anthropic"])
async def test_messages_sdk_parses_the_gateways_stream_of_a_recorded_upstream(gateway, upstream_kind):
    capture, base, model = RECORDED[upstream_kind]
    async with Replay(capture) as upstream:
        wired = await gateway.wire(upstream.url + base, [f"{ALIAS}={model}"], kind=upstream_kind)
        final = await anthropic_sdk_turn(gateway, wired.key, ALIAS)
    path, sent = upstream.requests[0]
    assert sent["model"] == model
    tool_use = [b for b in final.content if b.type == "tool_use"]
    assert final.stop_reason == "tool_use" and [b.name for b in tool_use] == ["get_weather"]
    if upstream_kind == "anthropic":  # same wire: forwarded as is, relayed as recorded
        assert path == "/v1/messages" and fits_anthropic_messages(sent) == []
        assert final.id == "msg_019Q1hrJbZG26Fb9BQhrkHEr"
        assert [b.text for b in final.content if b.type == "text"] == [
            "I'll check the current weather in Paris for you."]
        assert tool_use[0].input == {"location": "Paris"}
        assert (final.usage.input_tokens, final.usage.output_tokens) == (377, 65)
    else:  # converted both ways
        assert path == "/v1/chat/completions" and fits_openai_chat(sent) == []
        assert sent["stream"] is True and sent["tools"][0]["function"]["name"] == "get_weather"
        assert tool_use[0].id == "call_4XzlGBLtUe9dy3GVNV4jhq7h"
        assert tool_use[0].input == {"city": "New York City"}
        assert [b for b in final.content if b.type == "text"] == []
        assert (final.usage.input_tokens, final.usage.output_tokens) == (44, 16)


async def test_responses_sdk_parses_the_gateways_stream_of_a_recorded_messages_upstream(gateway):
    """The Responses API client (Codex CLI, the AI SDK) against a messages-protocol upstream."""
    model = "claude-sonnet-4-20250514"
    async with Replay(ANTHROPIC_CAPTURE) as upstream:
        wired = await gateway.wire(upstream.url, [f"{ALIAS}={model}"], kind="anthropic")
        client = openai_client(gateway, wired.key)
        async with client.responses.stream(
                model=ALIAS, input="What's the weather?",
                tools=[{"type": "function", "name": "get_weather", "parameters": WEATHER, "strict": False}]) as stream:
            async for _ in stream:
                pass
            final = await stream.get_final_response()
    assert fits_anthropic_messages(upstream.requests[0][1]) == []
    assert final.output_text == "I'll check the current weather in Paris for you."
    calls = [item for item in final.output if item.type == "function_call"]
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("get_weather", {"location": "Paris"})]
    assert (final.usage.input_tokens, final.usage.output_tokens) == (377, 65)


async def test_responses_sdk_parses_a_recorded_responses_stream_passed_through(gateway):
    """The Responses client against an `openai` channel: the body goes upstream as sent (so it must
    still fit the SDK's own request type) and the recorded stream comes back as recorded, with the
    client's model name."""
    from openai.types.responses import response_create_params as params

    events = [json.loads(line) for line in
              (CAPTURES / "openai_responses_stream_phase.jsonl").read_text().splitlines() if line.strip()]
    body = b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)
    async with Replay(body) as upstream:
        wired = await gateway.wire(upstream.url + "/v1", [f"{ALIAS}=gpt-5.3-codex"], kind="openai")
        client = openai_client(gateway, wired.key)
        texts: list[str] = []
        async with client.responses.stream(model=ALIAS, input="AI news today?") as stream:
            async for event in stream:
                if event.type == "response.output_text.done":
                    texts.append(event.text)
            final = await stream.get_final_response()
    path, sent = upstream.requests[0]
    assert path == "/v1/responses" and sent["model"] == "gpt-5.3-codex" and sent["stream"] is True
    assert typed_dict_problems(sent, params.ResponseCreateParamsStreaming) == []
    assert final.id == "resp_0a63f40a2632b74300699f8818e5648196a8fa657ae8091421" and final.model == ALIAS
    assert texts[0].startswith("Got it") and texts[1].startswith("Here are a few **AI headlines")
    assert (final.usage.input_tokens, final.usage.output_tokens) == (7112, 463)
