"""The Responses protocol end to end: the official openai SDK's `client.responses` → the real
gateway → a chat-completions upstream, a messages upstream (conversion) and a Responses upstream
(pass-through to the `openai` and `azure-openai` kinds)."""

from __future__ import annotations

import base64

import httpx
import openai
import orjson
import pytest
from openai import AsyncOpenAI

from tests.fakes.anthropic_upstream import API_KEY as ANTHROPIC_KEY
from tests.fakes.openai_upstream import FakeOpenAI
from tests.test_chat_e2e import assert_envelope, call_rows
from tests.test_resilience_e2e import events, gw  # noqa: F401  (fixture)

LOOKUP = {"type": "function", "name": "lookup", "description": "Look a word up", "strict": True,
          "parameters": {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"],
                         "additionalProperties": False}}

STREAM_ORDER_TEXT = ["response.created", "response.in_progress", "response.output_item.added",
                     "response.content_part.added", "response.output_text.delta", "response.output_text.done",
                     "response.content_part.done", "response.output_item.done", "response.completed"]


def client(gateway, key: str) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=key, max_retries=0)


async def post(gateway, key: str | None, body: object, path: str = "/v1/responses") -> httpx.Response:
    headers = {"authorization": f"Bearer {key}"} if key else {}
    async with httpx.AsyncClient() as http:
        if isinstance(body, bytes):
            return await http.post(gateway.url + path, headers=headers, content=body)
        return await http.post(gateway.url + path, headers=headers, json=body)


def collapse(types: list[str]) -> list[str]:
    """Event types with runs of the same delta event folded into one."""
    out: list[str] = []
    for kind in types:
        if not (out and out[-1] == kind and kind.endswith(".delta")):
            out.append(kind)
    return out


async def wire_chat(gateway, upstream):
    return await gateway.wire(upstream.base_url, ["gpt-test"])  # openai-compatible: converted


async def wire_messages(gateway, upstream):
    return await gateway.wire(upstream.base_url, ["claude-haiku-4-5"], kind="anthropic",
                              upstream_keys=(ANTHROPIC_KEY,), name="claude")


async def wire_native(gateway, upstream, model: str = "gpt-test"):
    return await gateway.wire(upstream.base_url, [{"model_id": model, "upstream_model": "gpt-test"}],
                              kind="openai", name="native")


# --- conversion to a chat-completions upstream ---------------------------------------------------


async def test_plain_call_to_a_chat_upstream(gateway, openai_upstream):
    wired = await wire_chat(gateway, openai_upstream)
    resp = await client(gateway, wired.key).responses.create(
        model="gpt-test", input="hello there", instructions="be brief", max_output_tokens=50, temperature=0.2,
        top_p=0.9, metadata={"ticket": "42"}, user="u-1", store=False, prompt_cache_key="k",
        include=["reasoning.encrypted_content"], reasoning={"effort": "low", "summary": "auto"},
        text={"format": {"type": "json_object"}})
    assert resp.object == "response" and resp.status == "completed" and resp.id.startswith("resp_")
    assert resp.output_text == "Echo: hello there" and resp.model == "gpt-test"
    assert resp.metadata == {"ticket": "42"}
    assert (resp.usage.input_tokens, resp.usage.output_tokens, resp.usage.total_tokens) == (4, 3, 7)
    assert resp.usage.input_tokens_details.cached_tokens == 0
    sent = openai_upstream.last.json()
    assert sent["messages"] == [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello there"}]
    assert (sent["max_tokens"], sent["temperature"], sent["top_p"], sent["user"]) == (50, 0.2, 0.9, "u-1")
    assert sent["response_format"] == {"type": "json_object"} and sent["reasoning_effort"] == "low"
    [row] = await call_rows(gateway)
    assert (row.protocol, row.status, row.prompt_tokens, row.completion_tokens) == ("responses", 200, 4, 3)


async def test_streamed_call_from_a_chat_upstream_with_the_sdk_helpers(gateway, openai_upstream):
    wired = await wire_chat(gateway, openai_upstream)
    async with client(gateway, wired.key).responses.stream(model="gpt-test", input="stream these words") as stream:
        seen = [event async for event in stream]
        final = await stream.get_final_response()
    assert collapse([e.type for e in seen]) == STREAM_ORDER_TEXT
    assert [e.sequence_number for e in seen] == list(range(len(seen)))
    assert "".join(e.delta for e in seen if e.type == "response.output_text.delta") == "Echo: stream these words"
    assert final.output_text == "Echo: stream these words" and final.status == "completed"
    assert final.usage.output_tokens == 4 and final.usage.input_tokens == 3
    [row] = await call_rows(gateway)
    assert (row.protocol, row.stream, row.prompt_tokens, row.completion_tokens) == ("responses", True, 3, 4)


async def test_function_tool_round_trip_through_a_chat_upstream(gateway, openai_upstream):
    wired = await wire_chat(gateway, openai_upstream)
    api = client(gateway, wired.key)
    first = await api.responses.create(model="gpt-test", input="call tool please", tools=[LOOKUP],
                                       tool_choice="auto", parallel_tool_calls=False)
    [call] = first.output
    assert call.type == "function_call" and call.name == "lookup" and call.call_id == "call_0"
    assert orjson.loads(call.arguments) == {"word": "word-value"}
    sent = openai_upstream.last.json()
    assert sent["tools"] == [{"type": "function", "function": {
        "name": "lookup", "description": "Look a word up", "parameters": LOOKUP["parameters"]}}]
    assert (sent["tool_choice"], sent["parallel_tool_calls"]) == ("auto", False)
    second = await api.responses.create(model="gpt-test", input=[
        {"role": "user", "content": "call tool please"}, call.model_dump(exclude_none=True),
        {"type": "function_call_output", "call_id": call.call_id, "output": "a greeting"}])
    assert second.output_text == "Echo: call tool please"
    assert openai_upstream.last.json()["messages"][1:] == [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_0", "type": "function", "function": {"name": "lookup", "arguments": call.arguments}}]},
        {"role": "tool", "tool_call_id": "call_0", "content": "a greeting"}]


async def test_streamed_function_call_from_a_chat_upstream(gateway, openai_upstream):
    wired = await wire_chat(gateway, openai_upstream)
    async with client(gateway, wired.key).responses.stream(model="gpt-test", input="call tool now",
                                                           tools=[LOOKUP]) as stream:
        seen = [event async for event in stream]
        final = await stream.get_final_response()
    assert collapse([e.type for e in seen]) == [
        "response.created", "response.in_progress", "response.output_item.added",
        "response.function_call_arguments.delta", "response.function_call_arguments.done",
        "response.output_item.done", "response.completed"]
    [call] = final.output
    assert call.type == "function_call" and orjson.loads(call.arguments) == {"word": "word-value"}
    done = next(e for e in seen if e.type == "response.function_call_arguments.done")
    assert done.arguments == call.arguments


async def test_mid_stream_failure_ends_with_response_failed(gateway, openai_upstream):
    wired = await wire_chat(gateway, openai_upstream)
    openai_upstream.cut_stream = True
    async with client(gateway, wired.key).responses.stream(model="gpt-test", input="hello there") as stream:
        seen = [event async for event in stream]
    assert seen[-1].type == "response.failed"
    assert seen[-1].response.error.code == "server_error" and "before completion" in seen[-1].response.error.message
    assert [e.sequence_number for e in seen] == list(range(len(seen)))
    [row] = await call_rows(gateway)
    assert (row.status, row.error_code) == (200, "NETWORK_ERROR")


# --- conversion to a messages-protocol upstream --------------------------------------------------


async def test_plain_and_streamed_calls_to_a_messages_upstream(gateway, anthropic_upstream):
    wired = await wire_messages(gateway, anthropic_upstream)
    api = client(gateway, wired.key)
    resp = await api.responses.create(model="claude-haiku-4-5", input=[
        {"role": "developer", "content": "be brief"},
        {"role": "user", "content": [{"type": "input_text", "text": "hello world"}]}])
    assert resp.output_text == "Echo: hello world" and resp.model == "claude-haiku-4-5"
    sent = anthropic_upstream.last.json()
    assert sent["system"] == "be brief" and sent["max_tokens"] == 4096
    assert sent["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hello world"}]}]
    async with api.responses.stream(model="claude-haiku-4-5", input="stream me") as stream:
        seen = [event async for event in stream]
        final = await stream.get_final_response()
    assert collapse([e.type for e in seen]) == STREAM_ORDER_TEXT
    assert final.output_text == "Echo: stream me" and final.usage.input_tokens > 0


async def test_function_tool_round_trip_through_a_messages_upstream(gateway, anthropic_upstream):
    wired = await wire_messages(gateway, anthropic_upstream)
    api = client(gateway, wired.key)
    async with api.responses.stream(model="claude-haiku-4-5", input="please lookup the word",
                                    tools=[LOOKUP], tool_choice={"type": "function", "name": "lookup"}) as stream:
        first = await stream.get_final_response()
    message, call = first.output
    assert message.type == "message" and message.content[0].text == "Let me use the tools."
    assert call.type == "function_call" and call.call_id.startswith("toolu_") and call.name == "lookup"
    assert orjson.loads(call.arguments) == {"word": "test"}
    assert anthropic_upstream.last.json()["tool_choice"] == {"type": "tool", "name": "lookup"}
    second = await api.responses.create(model="claude-haiku-4-5", tools=[LOOKUP], input=[
        {"role": "user", "content": "please lookup the word"},
        {"role": "assistant", "content": [{"type": "output_text", "text": message.content[0].text}]},
        {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments},
        {"type": "function_call_output", "call_id": call.call_id, "output": "a greeting"}])
    assert second.output_text == "Tool results: a greeting"
    sent = anthropic_upstream.last.json()["messages"]
    assert sent[1]["content"] == [{"type": "text", "text": "Let me use the tools."},
                                  {"type": "tool_use", "id": call.call_id, "name": "lookup", "input": {"word": "test"}}]
    assert sent[2]["content"][0] == {"type": "tool_result", "tool_use_id": call.call_id,
                                     "content": [{"type": "text", "text": "a greeting"}]}


# --- pass-through to a Responses upstream ----------------------------------------------------------


async def test_pass_through_to_an_openai_channel(gateway, openai_upstream):
    wired = await wire_native(gateway, openai_upstream, model="my-gpt")
    api = client(gateway, wired.key)
    resp = await api.responses.create(model="my-gpt", input="hello there", store=True,
                                      reasoning={"summary": "auto"}, extra_body={"vendor_field": 1})
    assert resp.output_text == "Echo: hello there" and resp.id.startswith("resp_fake")
    sent = openai_upstream.last
    assert sent.path == "/v1/responses" and sent.headers["authorization"] == "Bearer up-key-1"
    body = sent.json()
    assert body["model"] == "gpt-test" and body["vendor_field"] == 1 and body["store"] is True
    follow = await api.responses.create(model="my-gpt", input="and again", previous_response_id=resp.id)
    assert follow.previous_response_id == resp.id
    assert openai_upstream.last.json()["previous_response_id"] == resp.id
    rows = await call_rows(gateway, 2)
    assert [(r.protocol, r.provider_kind, r.prompt_tokens > 0, r.completion_tokens) for r in rows] == [
        ("responses", "openai", True, 3), ("responses", "openai", True, 3)]


async def test_streamed_pass_through_is_relayed_as_is_and_its_usage_recorded(gateway, openai_upstream):
    wired = await wire_native(gateway, openai_upstream, model="my-gpt")
    async with client(gateway, wired.key).responses.stream(model="my-gpt", input="call tool x",
                                                           tools=[LOOKUP]) as stream:
        seen = [event async for event in stream]
        final = await stream.get_final_response()
    assert [e.sequence_number for e in seen] == list(range(len(seen)))
    assert final.output[0].type == "function_call" and final.id.startswith("resp_fake")
    assert final.model == "my-gpt" and seen[0].response.model == "my-gpt"  # never the upstream's name
    [row] = await call_rows(gateway)
    assert (row.protocol, row.stream, row.completion_tokens) == ("responses", True, 5)
    assert row.prompt_tokens == final.usage.input_tokens > 0
    call = final.output[0]
    second = await client(gateway, wired.key).responses.create(
        model="my-gpt", previous_response_id=final.id, tools=[LOOKUP],
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "a greeting"}])
    assert second.output_text == "Tool results: a greeting"
    sent = openai_upstream.last.json()
    assert sent["previous_response_id"] == final.id and sent["input"][0]["call_id"] == call.call_id


async def test_pass_through_to_an_azure_openai_channel(gateway):
    azure = await FakeOpenAI(api_key="azure-key", base_path="/openai/v1", auth_header="api-key").start()
    try:
        wired = await gateway.wire(azure.origin, [{"model_id": "gpt-test", "upstream_model": "gpt-test"}],
                                   kind="azure-openai", upstream_keys=("azure-key",), name="azure")
        resp = await client(gateway, wired.key).responses.create(model="gpt-test", input="hello azure")
        assert resp.output_text == "Echo: hello azure"
        assert azure.last.path == "/openai/v1/responses" and azure.last.headers["api-key"] == "azure-key"
    finally:
        await azure.close()


async def test_a_cut_pass_through_stream_ends_with_an_error_event(gateway, openai_upstream):
    wired = await wire_native(gateway, openai_upstream)
    openai_upstream.cut_stream = True
    resp = await post(gateway, wired.key, {"model": "gpt-test", "input": "hello there", "stream": True})
    frames = [orjson.loads(line[6:]) for line in resp.text.splitlines() if line.startswith("data: ")]
    assert frames[-2]["type"] == "response.output_item.done"
    assert frames[-1] == {"type": "error", "code": "server_error", "message": frames[-1]["message"],
                          "param": None, "sequence_number": frames[-2]["sequence_number"] + 1}


# --- compaction (POST /v1/responses/compact) --------------------------------------------------------


async def test_compaction_is_passed_through_to_a_responses_upstream(gateway, openai_upstream):
    # The SDK's `responses.compact`: the vendor's own compaction, its encrypted item relayed untouched.
    wired = await wire_native(gateway, openai_upstream, model="team-gpt")
    conversation = [{"role": "user", "content": "refactor the parser"},
                    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]}]
    compacted = await client(gateway, wired.key).responses.compact(model="team-gpt", input=conversation,
                                                                  instructions="be brief")
    assert compacted.object == "response.compaction"
    assert [item.type for item in compacted.output] == ["message", "compaction"]
    sent = openai_upstream.last
    assert sent.path == "/v1/responses/compact"
    assert sent.json() == {"model": "gpt-test", "input": conversation, "instructions": "be brief"}
    # Opaque state, relayed as the upstream wrote it (the fake encodes the input it compacted).
    assert orjson.loads(base64.b64decode(compacted.output[-1].encrypted_content)) == conversation
    [row] = await call_rows(gateway)
    assert (row.protocol, row.status, row.model) == ("responses", 200, "team-gpt")
    assert row.prompt_tokens == compacted.usage.input_tokens and row.completion_tokens == 7


async def test_compaction_on_a_converted_route_is_a_clear_400(gateway, openai_upstream):
    wired = await wire_chat(gateway, openai_upstream)
    with pytest.raises(openai.BadRequestError) as caught:
        await client(gateway, wired.key).responses.compact(model="gpt-test", input="hi")
    error = caught.value.response.json()["error"]
    assert error["code"] == "invalid_request" and "cannot compact" in error["message"]
    assert openai_upstream.requests == []
    async with httpx.AsyncClient(base_url=gateway.url) as http:
        streamed = await http.post("/v1/responses/compact", headers={"authorization": f"Bearer {wired.key}"},
                                   json={"model": "gpt-test", "input": "hi", "stream": True})
    assert streamed.status_code == 400 and "'stream'" in streamed.json()["error"]["message"]


# --- errors ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", [None, "sk-wrong"])
async def test_401_without_a_valid_bearer_key(gateway, openai_upstream, key):
    await wire_chat(gateway, openai_upstream)
    resp = await post(gateway, key, {"model": "gpt-test", "input": "hi"})
    assert resp.status_code == 401 and set(resp.json()) == {"code", "message"}
    assert resp.json()["code"] == "UNAUTHORIZED"


async def test_rate_limit_and_blacklist_use_the_short_bodies(gateway, openai_upstream):
    wired = await gateway.wire(openai_upstream.base_url, ["gpt-test"], rate_capacity=1, rate_refill=0.001)
    assert (await post(gateway, wired.key, {"model": "gpt-test", "input": "hi"})).status_code == 200
    limited = await post(gateway, wired.key, {"model": "gpt-test", "input": "hi"})
    assert limited.status_code == 429 and limited.json()["error"]["code"] == "RATE_LIMIT_EXCEEDED"
    await gateway.services.blacklist.add("127.0.0.0/8")
    await gateway.runtime.refresh()
    denied = await post(gateway, wired.key, {"model": "gpt-test", "input": "hi"})
    assert denied.status_code == 403 and denied.json()["code"] == "ACCESS_DENIED"


@pytest.mark.parametrize("body", [
    b"not json",
    {"input": "hi"},
    {"model": "gpt-test"},
    {"model": "gpt-test", "input": 5},
    {"model": "gpt-test", "input": [{"role": "wizard", "content": "hi"}]},
    {"model": "gpt-test", "input": [{"role": "user", "content": [{"type": "input_video"}]}]},
    {"model": "gpt-test", "input": [{"type": "function_call", "call_id": "c"}]},
    {"model": "gpt-test", "input": "hi", "max_output_tokens": 0},
    {"model": "gpt-test", "input": "hi", "temperature": 3},
    {"model": "gpt-test", "input": "hi", "tools": [{"type": "function"}]},
    {"model": "gpt-test", "input": "hi", "tool_choice": "sometimes"},
    {"model": "gpt-test", "input": "hi", "text": {"format": {"type": "xml"}}},
    {"model": "gpt-test", "input": "hi", "reasoning": {"effort": "maximal"}},
    {"model": "gpt-test", "input": "hi", "stream": "yes"},
    {"model": "gpt-test", "input": "hi", "metadata": {"n": 1}},
])
async def test_400_validation_in_the_chat_shape(gateway, openai_upstream, body):
    wired = await wire_chat(gateway, openai_upstream)
    resp = await post(gateway, wired.key, body)
    assert resp.status_code == 400 and set(resp.json()) == {"error"}
    error = resp.json()["error"]
    assert (error["type"], error["code"]) == ("invalid_request_error", "invalid_request") and error["message"]
    assert not openai_upstream.requests


@pytest.mark.parametrize("field", [{"previous_response_id": "resp_1"}, {"conversation": "conv_1"},
                                   {"input": [{"type": "item_reference", "id": "msg_1"}]},
                                   {"input": [{"type": "item_reference", "id": 7}]}])
async def test_stored_state_on_conversion_is_a_clear_400(gateway, openai_upstream, field):
    wired = await wire_chat(gateway, openai_upstream)
    with pytest.raises(openai.BadRequestError) as caught:
        await client(gateway, wired.key).responses.create(model="gpt-test", **{"input": "hi", **field})
    assert "keeps no responses" in caught.value.message and "store: false" in caught.value.message
    assert caught.value.body["code"] == "invalid_request"
    assert not openai_upstream.requests


async def test_a_compaction_request_on_conversion_is_a_clear_400(gateway, openai_upstream):
    # Codex's remote compaction asks for the vendor's compaction item: dropped, it would wait for one in vain.
    wired = await wire_chat(gateway, openai_upstream)
    with pytest.raises(openai.BadRequestError) as caught:
        await client(gateway, wired.key).responses.create(
            model="gpt-test", input=[{"role": "user", "content": "go on"}, {"type": "compaction_trigger"}])
    assert "input[1]" in caught.value.message and "compact on the client" in caught.value.message
    assert not openai_upstream.requests


async def test_an_earlier_compaction_item_is_dropped_on_conversion_and_its_user_messages_kept(gateway, openai_upstream):
    # A conversation compacted on a Responses upstream, then sent to a converted route: the encrypted
    # state is the vendor's to read; the user messages the compaction kept beside it still count.
    wired = await wire_chat(gateway, openai_upstream)
    resp = await client(gateway, wired.key).responses.create(model="gpt-test", input=[
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "refactor the parser"}]},
        {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAA-opaque"},
        {"role": "user", "content": "go on"}])
    assert resp.status == "completed"
    sent = openai_upstream.last.json()["messages"]
    assert [(m["role"], m["content"]) for m in sent] == [("user", "refactor the parser"), ("user", "go on")]


async def test_retrieving_a_stored_response_is_a_clear_400(gateway, openai_upstream):
    wired = await wire_chat(gateway, openai_upstream)
    with pytest.raises(openai.BadRequestError) as caught:
        await client(gateway, wired.key).responses.retrieve("resp_123")
    assert "stores no responses" in caught.value.message
    async with httpx.AsyncClient() as http:
        assert (await http.get(f"{gateway.url}/v1/responses/resp_123")).status_code == 401


async def test_hosted_tools_are_dropped_on_conversion_and_forwarded_on_pass_through(gateway, openai_upstream):
    tools = [LOOKUP, {"type": "web_search"}, {"type": "namespace", "name": "mcp", "description": "d", "tools": []}]
    wired = await wire_chat(gateway, openai_upstream)
    await client(gateway, wired.key).responses.create(model="gpt-test", input="hi", tools=tools)
    assert [t["function"]["name"] for t in openai_upstream.last.json()["tools"]] == ["lookup"]
    native = await wire_native(gateway, openai_upstream, model="native-gpt")
    await client(gateway, native.key).responses.create(model="native-gpt", input="hi", tools=tools)
    assert openai_upstream.last.json()["tools"] == tools


async def test_unknown_model_is_404_and_an_upstream_failure_502_in_the_envelope(gateway, openai_upstream):
    wired = await wire_native(gateway, openai_upstream)
    resp = await post(gateway, wired.key, {"model": "nope", "input": "hi"})
    assert_envelope(resp, 404, "NOT_FOUND")
    openai_upstream.fail_next(401, {"error": {"message": "Incorrect API key provided: up-key-1.",
                                              "type": "invalid_request_error", "code": "invalid_api_key"}})
    resp = await post(gateway, wired.key, {"model": "gpt-test", "input": "hi"})
    assert_envelope(resp, 502, "AUTHENTICATION_ERROR")
    assert "up-key-1" not in resp.text


# --- resilience: the same executor as the other protocols -----------------------------------------


async def test_retry_then_failover_from_a_responses_upstream_to_a_chat_backup(gw, openai_upstream):  # noqa: F811
    wired = await wire_native(gw, openai_upstream)
    backup = await FakeOpenAI(api_key="backup-key").start()
    try:
        svc = gw.services
        provider = await svc.providers.create("backup-provider", "openai-compatible", base_url=backup.base_url,
                                              keys=["backup-key"])
        channel = await svc.channels.create("backup-channel", provider.id, models=["gpt-test"], priority=1)
        await svc.applications.authorize_channel(wired.app_id, channel.id)
        await gw.runtime.refresh()
        openai_upstream.fail_next(500, {"error": {"message": "boom", "type": "server_error", "code": None}})
        resp = await client(gw, wired.key).responses.create(model="gpt-test", input="hello there")
        # Another channel is tried before a retry (docs/decisions.md): the chat backup answers, no wait.
        assert not resp.id.startswith("resp_fake") and gw.clock.sleeps == []
        assert len(backup.requests) == 1 and backup.last.path == "/v1/chat/completions"
        [event] = await events(gw, "FAILOVER")
        assert event.error_type == "UPSTREAM_ERROR"
        # The failed primary cools down: the next call, streamed, goes to the backup first.
        async with client(gw, wired.key).responses.stream(model="gpt-test", input="hello there") as stream:
            final = await stream.get_final_response()
        assert final.output_text == "Echo: hello there" and not final.id.startswith("resp_fake")
        assert len(backup.requests) == 2
    finally:
        await backup.close()


async def test_breaker_and_lifecycle_probe_count_responses_calls(gw, openai_upstream):  # noqa: F811
    wired = await gw.wire(openai_upstream.base_url, ["gpt-test", {"model_id": "old", "upstream_model": "gone"}],
                          kind="openai")
    api = client(gw, wired.key)
    for _ in range(3):
        with pytest.raises(openai.APIStatusError) as caught:
            await api.responses.create(model="old", input="hi")
        assert caught.value.status_code == 502
    [event] = await events(gw, "MODEL_DEPRECATED")
    assert event.model == "old"
    openai_upstream.fail_next(401, {"error": {"message": "bad key", "type": "invalid_request_error",
                                              "code": "invalid_api_key"}}, times=5)
    for _ in range(5):
        with pytest.raises(openai.APIStatusError):
            await api.responses.create(model="gpt-test", input="hi")
    with pytest.raises(openai.APIStatusError) as caught:
        await api.responses.create(model="gpt-test", input="hi")
    assert caught.value.status_code == 503 and caught.value.response.headers["retry-after"] == "30"


async def test_a_converted_response_echoes_the_tools_as_sent_streamed_or_not(gateway, openai_upstream):
    # The call keeps them serialised while the upstream works (protocols/responses/encode.echoed).
    wired = await wire_chat(gateway, openai_upstream)
    sdk = client(gateway, wired.key)
    resp = await sdk.responses.create(model="gpt-test", input="hi", tools=[LOOKUP], metadata={"k": "v"})
    async with sdk.responses.stream(model="gpt-test", input="hi", tools=[LOOKUP]) as stream:
        created = [e async for e in stream if e.type == "response.created"]
        final = await stream.get_final_response()
    for echoed in (resp, created[0].response, final):
        assert [tool.model_dump(exclude_none=True) for tool in echoed.tools] == [LOOKUP]
    assert resp.metadata == {"k": "v"}


ASK = {"role": "user", "content": "what does hi mean?"}


async def speak_then_call(api: AsyncOpenAI, upstream, stream: bool):
    """The first step of a tool loop whose model speaks before its call: the (message, call) items it answers."""
    upstream.script = lambda body: ("Let me look that up.", [{
        "id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": '{"word": "hi"}'}}],
        "tool_calls") if len(body["messages"]) == 1 else ("It means hello.", [], "stop")
    if stream:
        async with api.responses.stream(model="gpt-test", input=[ASK], tools=[LOOKUP]) as events:
            first = await events.get_final_response()
    else:
        first = await api.responses.create(model="gpt-test", input=[ASK], tools=[LOOKUP])
    said, call = first.output
    return said, call


def next_step(said, call) -> list:
    """The next step's input as the AI SDK sends it: the message referred to by its id, the call, its output."""
    return [ASK, {"type": "item_reference", "id": said.id}, call.model_dump(exclude_none=True),
            {"type": "function_call_output", "call_id": call.call_id, "output": "a greeting"}]


# The AI SDK's `openai(model)` stores by default and sends the assistant's text and reasoning of the step before
# as item references (@ai-sdk/openai 3.0, convertToOpenAIResponsesInput); tests/test_responses_clients.py runs it.
@pytest.mark.parametrize("stream", [False, True])
async def test_a_reference_to_an_item_of_a_converted_answer_reads_it_back(gateway, openai_upstream, stream):
    wired = await wire_chat(gateway, openai_upstream)
    api = client(gateway, wired.key)
    said, call = await speak_then_call(api, openai_upstream, stream)
    assert said.type == "message" and call.type == "function_call"
    second = await api.responses.create(model="gpt-test", tools=[LOOKUP], input=next_step(said, call))
    assert second.output_text == "It means hello."
    assistant = openai_upstream.last.json()["messages"][1]
    assert assistant["content"] == "Let me look that up."  # the referenced message, read back
    assert assistant["tool_calls"][0]["id"] == "call_1"


async def test_an_answer_to_a_request_that_does_not_store_is_not_kept(gateway, openai_upstream):
    wired = await wire_chat(gateway, openai_upstream)
    api = client(gateway, wired.key)
    first = await api.responses.create(model="gpt-test", input="hi", store=False)
    with pytest.raises(openai.BadRequestError) as caught:
        await api.responses.create(model="gpt-test", input=[{"type": "item_reference", "id": first.output[0].id}])
    assert "does not hold" in caught.value.message and "store: false" in caught.value.message
