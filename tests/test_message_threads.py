"""Message threads (beta `message-threads-*`) through the gateway, with the vendor's own SDK.

On the vendor's client the SDKs' tool runners run over a thread: the first turn asks the vendor to hold
the conversation (`thread: {type: "create"}`), each later one names the reply it continues and sends only
the new messages, without `system` and `tools` (anthropic 2.13 `lib/threads`). A vendor that cannot thread
a request says so in `error.details.error_code`, and the runner then sends the whole conversation.

- Pass-through to the vendor: the thread is the vendor's and is forwarded as is. When the vendor no longer
  holds it (another channel's account, an expired thread), its `thread_not_found` reaches the SDK intact,
  which starts a new thread with the whole conversation; it is no missing model.
- Conversion: no other wire holds threads, so the gateway answers `thread_unsupported_request` and the SDK
  goes on without one. Dropping `thread` sent a continuation's tool results alone, without the call they
  answer or the tools (a 400 from every real chat-completions service).
"""

from __future__ import annotations

import orjson
import pytest
from anthropic import AsyncAnthropic, BadRequestError
from anthropic.lib.tools import beta_async_tool

from tests.fakes.anthropic_upstream import API_KEY
from tests.test_chat_e2e import call_rows
from tests.test_responses_clients import script_chat, script_messages

THREADS_BETA = "message-threads-2026-08-12"


def sdk(gateway, key: str) -> AsyncAnthropic:
    return AsyncAnthropic(base_url=f"{gateway.url}/alt", api_key=key, max_retries=0)


async def wire(gateway, route: str, openai_upstream, anthropic_upstream):
    """`chat`: converted; `anthropic`: the vendor's API, which holds threads; `compatible`: an Anthropic-compatible
    API behind the same kind."""
    if route == "chat":
        openai_upstream.script = script_chat("weather", {"city": "Paris"}, "Forecast")
        return await gateway.wire(openai_upstream.base_url, [{"model_id": "claude-haiku-4-5",
                                                              "upstream_model": "gpt-test"}]), openai_upstream
    anthropic_upstream.script = script_messages("weather", {"city": "Paris"}, "Forecast")
    # The fake holds threads as the vendor's own API does; a compatible API does not ("compatible" below).
    options = {"message_threads": True} if route == "anthropic" else None
    return await gateway.wire(anthropic_upstream.base_url, ["claude-haiku-4-5"], kind="anthropic",
                              upstream_keys=(API_KEY,), name="claude", options=options), anthropic_upstream


async def run_tool_loop(client: AsyncAnthropic, stream: bool, between_turns=lambda: None) -> list:
    @beta_async_tool
    async def weather(city: str) -> str:
        """The weather in a city"""
        between_turns()
        return f"sunny in {city}"

    runner = client.beta.messages.tool_runner(
        model="claude-haiku-4-5", max_tokens=200, tools=[weather], stream=stream,
        system="Answer briefly.", messages=[{"role": "user", "content": "What is the weather in Paris?"}])
    if not stream:
        return [message async for message in runner]
    return [await message_stream.get_final_message() async for message_stream in runner]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("route", ["chat", "anthropic", "compatible"])
async def test_the_sdk_tool_runner_completes_on_every_route(gateway, openai_upstream, anthropic_upstream, route,
                                                             stream):
    wired, upstream = await wire(gateway, route, openai_upstream, anthropic_upstream)
    messages = await run_tool_loop(sdk(gateway, wired.key), stream)
    assert [block.type for block in messages[0].content] == ["text", "tool_use"]
    assert messages[-1].content[-1].text == "Forecast: sunny in Paris"
    if route != "anthropic":
        # Refused once with the vendor's code before anything was sent, then the whole conversation each turn.
        first, second = (request.json() for request in upstream.requests)
        if route == "chat":
            assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "tool"]
        else:  # an Anthropic-compatible API (DeepSeek's, Kimi's) behind the `anthropic` kind
            assert "thread" not in first and "thread" not in second
            assert [m["role"] for m in second["messages"]] == ["user", "assistant", "user"]
        assert second["tools"] == first["tools"]
        rows = await call_rows(gateway, 3)
        assert [(r.status, r.error_code) for r in rows] == [(400, "invalid_request"), (200, None), (200, None)]
    else:
        # The vendor holds the thread: the second turn sends the tool result alone and names the first reply.
        first, second = (request.json() for request in upstream.requests)
        assert first["thread"] == {"type": "create"} and "tools" in first
        assert second["thread"] == {"type": "continue", "previous_message_id": messages[0].id}
        assert "tools" not in second and "system" not in second
        assert [m["role"] for m in second["messages"]] == ["user"]
        assert THREADS_BETA in upstream.requests[1].headers["anthropic-beta"]


async def test_a_converted_thread_is_refused_with_the_vendor_s_code(gateway, openai_upstream, anthropic_upstream):
    wired, upstream = await wire(gateway, "chat", openai_upstream, anthropic_upstream)
    with pytest.raises(BadRequestError) as caught:
        await sdk(gateway, wired.key).beta.messages.create(
            model="claude-haiku-4-5", max_tokens=50, betas=[THREADS_BETA], thread={"type": "create"},
            messages=[{"role": "user", "content": "hi"}])
    assert caught.value.error_code == "thread_unsupported_request"
    body = caught.value.response.json()
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    assert "'thread'" in body["error"]["message"]
    assert upstream.requests == []  # nothing was sent: a thread cannot be converted


@pytest.mark.parametrize("stream", [False, True])
async def test_a_thread_the_vendor_lost_is_replayed_whole_by_the_sdk(gateway, openai_upstream, anthropic_upstream,
                                                                   stream):
    wired, upstream = await wire(gateway, "anthropic", openai_upstream, anthropic_upstream)
    messages = await run_tool_loop(sdk(gateway, wired.key), stream, between_turns=upstream.threads.clear)
    assert messages[-1].content[-1].text == "Forecast: sunny in Paris"
    lost, replayed = (request.json() for request in upstream.requests[1:])
    assert lost["thread"]["type"] == "continue"
    assert replayed["thread"] == {"type": "create"} and len(replayed["messages"]) == 3 and "tools" in replayed
    rows = await call_rows(gateway, 3)
    assert [(r.status, r.error_code) for r in rows] == [(200, None), (400, "INVALID_REQUEST"), (200, None)]
    # The vendor's 404 named a thread, not the model: nothing counts toward deprecating it, nothing is retried.
    assert [m.state for m in await gateway.services.models.list()] == ["ACTIVE"]
    assert len(upstream.requests) == 3


def test_the_vendor_s_details_never_carry_the_upstream_key():
    from modelgate.providers.anthropic_messages import AnthropicMessagesAdapter
    from modelgate.providers.base import Endpoint, refusal

    body = orjson.dumps({"type": "error", "error": {
        "type": "not_found_error", "message": "No usable Thread state was found",
        "details": {"error_code": "thread_not_found", "note": f"key {API_KEY}"}}})
    endpoint = Endpoint("p1:k1", 1, 1, "anthropic", "https://api.anthropic.com", API_KEY)
    error = refusal(AnthropicMessagesAdapter(), 404, body, {}, endpoint)
    assert error.error_type.value == "INVALID_REQUEST"
    assert error.details == {"error_code": "thread_not_found", "note": "key [redacted]"}


@pytest.mark.parametrize("base_url, options, held", [
    (None, {}, True),  # the kind's default: the vendor's own API
    ("https://api.anthropic.com/v1", {}, True),
    ("https://api.deepseek.com/anthropic", {}, False),  # compatible APIs document no threads
    ("https://llm-proxy.internal", {"message_threads": True}, True),  # a proxy in front of the vendor
    ("https://api.anthropic.com", {"message_threads": False}, False),
])
def test_a_thread_is_sent_on_only_to_an_api_that_holds_threads(base_url, options, held):
    from modelgate.errors import GatewayError
    from modelgate.providers.anthropic_messages import AnthropicMessagesAdapter
    from modelgate.providers.base import Endpoint

    endpoint = Endpoint("p1:k1", 1, 1, "anthropic", base_url, API_KEY, options)
    body = {"model": "m", "max_tokens": 5, "thread": {"type": "create"}, "messages": [{"role": "user", "content": "hi"}]}
    try:
        request = AnthropicMessagesAdapter().build_native_request(body, "claude-haiku-4-5", endpoint, False)
    except GatewayError as refused:
        assert not held and refused.status == 400 and refused.details == {"error_code": "thread_unsupported_request"}
    else:
        assert held and orjson.loads(request.body)["thread"] == {"type": "create"}
