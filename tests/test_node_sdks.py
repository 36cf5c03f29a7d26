"""The vendors' official Node SDKs (npm `openai`, `@anthropic-ai/sdk`) and the AI SDK's Anthropic and
OpenAI-chat providers, installed from tests/clients/package.json by `make clients`, each running a tool
loop through the gateway with only its base URL changed (tests/clients/node_sdks.mjs).

Each runs on its own vendor's wire (pass-through) and converted to the other, against the scripted fakes of
tests/test_responses_clients.py: the model speaks, calls `weather`, then answers with the tool's result.
The Anthropic SDK's tool runner runs over a message thread on pass-through (the fake holds it) and goes on
without one on conversion (tests/test_message_threads.py).
"""

from __future__ import annotations

import os

import orjson
import pytest

from tests.test_chat_e2e import call_rows
from tests.test_responses_clients import CLIENTS, need, run, wire

SCRIPT = CLIENTS / "node_sdks.mjs"
ANSWER = "Forecast: sunny in Paris"


async def run_client(gateway, client: str, route: str, openai_upstream, anthropic_upstream, tmp_path,
                     scripted: bool = True):
    """`scripted`: the upstream calls `weather`, then answers with its result; else the fakes' own answers."""
    need(CLIENTS / "node_modules" / "@anthropic-ai" / "sdk", "The Node SDKs (openai, @anthropic-ai/sdk)")
    wired, model, upstream = await wire(gateway, route, openai_upstream, anthropic_upstream,
                                        "weather", {"city": "Paris"}, "Forecast",
                                        anthropic_options={"message_threads": True})  # the fake holds threads
    if not scripted:
        openai_upstream.script = anthropic_upstream.script = openai_upstream.reasoning = None
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "GATEWAY_URL": gateway.url,
           "GATEWAY_KEY": wired.key, "GATEWAY_MODEL": model}
    code, out, err = await run(["node", str(SCRIPT), client], env, CLIENTS)
    assert code == 0, err[-3000:]
    return orjson.loads(out.strip().splitlines()[-1]), model, upstream


@pytest.mark.parametrize("route", ["anthropic", "chat"])
async def test_anthropic_node_sdk_tool_runner_streamed_or_not_counts_and_lists(
        gateway, openai_upstream, anthropic_upstream, tmp_path, route, typed_view_misses):
    seen, model, upstream = await run_client(gateway, "anthropic-sdk", route, openai_upstream, anthropic_upstream,
                                             tmp_path)
    assert typed_view_misses == []  # the SDK's requests, its tool runner's second turns too, took the typed view
    for mode in ("runner", "streamed"):
        assert seen[mode]["turns"] == 2 and seen[mode]["stop"] == "end_turn", seen
        assert seen[mode]["text"] == ANSWER
    assert seen["streamed"]["calls"] == [{"city": "Paris"}]
    assert seen["inputTokens"] > 0 and seen["models"] == [model]
    if route == "anthropic":  # the vendor held the threads: each second turn sent the tool result alone
        continued = [r.json() for r in upstream.requests if (r.json().get("thread") or {}).get("type") == "continue"]
        assert len(continued) == 2 and all(len(body["messages"]) == 1 for body in continued)
    else:  # each runner's first turn refused once with the vendor's code, then the whole conversation
        rows = await call_rows(gateway, 6)
        assert sorted(r.status for r in rows if r.protocol == "messages") == [200, 200, 200, 200, 400, 400]


@pytest.mark.parametrize("route", ["chat", "anthropic"])
async def test_openai_node_sdk_run_tools_streamed_or_not_and_lists(gateway, openai_upstream, anthropic_upstream,
                                                                  tmp_path, route, typed_view_misses):
    seen, model, _ = await run_client(gateway, "openai-sdk", route, openai_upstream, anthropic_upstream, tmp_path)
    assert typed_view_misses == []  # the SDK's requests, its tool runner's second turns too, took the typed view
    assert seen["runner"] == {"text": ANSWER, "calls": 2}
    assert seen["streamed"]["text"] == ANSWER and seen["streamed"]["deltas"] >= 1
    assert seen["streamed"]["usage"]["completion_tokens"] > 0
    assert seen["models"] == [model]


@pytest.mark.parametrize("client", ["ai-sdk-anthropic", "ai-sdk-openai-chat"])
@pytest.mark.parametrize("route", ["chat", "anthropic"])
async def test_ai_sdk_anthropic_and_openai_chat_providers_with_a_tool(gateway, openai_upstream, anthropic_upstream,
                                                                      tmp_path, route, client, typed_view_misses):
    seen, _, upstream = await run_client(gateway, client, route, openai_upstream, anthropic_upstream, tmp_path)
    assert typed_view_misses == []  # the SDK's requests took the typed view
    for mode in ("generate", "stream"):
        assert seen[mode]["text"] == ANSWER, seen
        assert seen[mode]["steps"] == 2 and seen[mode]["finish"] == "stop"
    assert seen["generate"]["outputTokens"] > 0
    assert {"text-delta", "tool-call", "tool-result", "finish"} <= set(seen["stream"]["parts"])
    assert len(upstream.requests) == 4


@pytest.mark.parametrize("client", ["ai-sdk-object-anthropic", "ai-sdk-object-openai-chat"])
@pytest.mark.parametrize("route", ["chat", "anthropic"])
async def test_ai_sdk_structured_objects_whole_and_streamed(gateway, openai_upstream, anthropic_upstream, tmp_path,
                                                           route, client):
    seen, _, upstream = await run_client(gateway, client, route, openai_upstream, anthropic_upstream, tmp_path,
                                         scripted=False)  # the fakes answer JSON of the schema they are given
    assert seen["generated"] == seen["streamed"] and set(seen["generated"]) == {"city", "degrees"}
    assert isinstance(seen["generated"]["degrees"], int) and seen["partials"] >= 1
    asked = upstream.requests[0].json()
    if route == "anthropic":  # Claude's own structured output, whichever protocol the SDK spoke
        assert asked["output_config"]["format"]["schema"]["required"] == ["city", "degrees"]
    elif client == "ai-sdk-object-openai-chat":
        assert asked["response_format"]["type"] == "json_schema"
    else:  # the Anthropic provider asks a model id it does not know for a forced call of a `json` tool
        assert asked["tool_choice"] == "required" and [t["function"]["name"] for t in asked["tools"]] == ["json"]
