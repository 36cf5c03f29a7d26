"""Cross-protocol calls end to end.

- the official openai SDK → gateway → a messages-protocol upstream (fake Anthropic);
- the coding-agent workload: the official anthropic SDK, streaming, a long system prompt,
  dozens of tools and many tool-use turns → gateway → a chat-completions upstream (fake OpenAI).
"""

from __future__ import annotations

import orjson
from anthropic import AsyncAnthropic
from openai import AsyncOpenAI

from tests.fakes.anthropic_upstream import API_KEY, Reply
from tests.fakes.bedrock_upstream import FakeBedrock
from tests.fakes.gemini_upstream import FakeGemini


async def wire_messages_upstream(gateway, anthropic_upstream):
    return await gateway.wire(anthropic_upstream.base_url, ["claude-haiku-4-5"], kind="anthropic",
                              upstream_keys=(API_KEY,), name="claude")


def openai_client(gateway, key: str) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=key, max_retries=0)


LOOKUP = {"type": "function", "function": {
    "name": "lookup", "description": "Look a word up",
    "parameters": {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]}}}


async def test_blank_texts_of_a_chat_history_never_reach_a_messages_upstream(gateway, anthropic_upstream):
    # Chat agents keep whitespace-only assistant turns and empty tool outputs in their history; the
    # vendor refuses such text blocks, and the refused turn would come back in every later request.
    wired = await wire_messages_upstream(gateway, anthropic_upstream)
    resp = await openai_client(gateway, wired.key).chat.completions.create(
        model="claude-haiku-4-5", max_tokens=64, tools=[LOOKUP],
        messages=[{"role": "system", "content": " "}, {"role": "user", "content": "look up gateway"},
                  {"role": "assistant", "content": "\n\n", "tool_calls": [{"id": "call_1", "type": "function",
                   "function": {"name": "lookup", "arguments": '{"word": "gateway"}'}}]},
                  {"role": "tool", "tool_call_id": "call_1", "content": ""},
                  {"role": "assistant", "content": " "}, {"role": "user", "content": "and now?"}])
    assert resp.choices[0].message.content or resp.choices[0].message.tool_calls
    sent = anthropic_upstream.last.json()
    assert "system" not in sent
    assert sent["messages"][1] == {"role": "assistant", "content": [
        {"type": "tool_use", "id": "call_1", "name": "lookup", "input": {"word": "gateway"}}]}
    assert sent["messages"][2]["content"][0] == {"type": "tool_result", "tool_use_id": "call_1"}


# An OpenAI-SDK agent loop's last call: the history holds the loop's tool calls and results, and the
# client offers no tools (it wants the summary, not another call). OpenAI takes that; the Messages API
# and Bedrock Converse refuse tool blocks in a request without tools (the fakes cite both).
TOOL_HISTORY = [
    {"role": "user", "content": "look up gateway"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": '{"word": "gateway"}'}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "a server in front of others"},
    {"role": "user", "content": "now sum it up"},
]


async def test_a_tool_less_call_after_a_tool_loop_reaches_a_messages_upstream(gateway, anthropic_upstream):
    wired = await wire_messages_upstream(gateway, anthropic_upstream)
    resp = await openai_client(gateway, wired.key).chat.completions.create(
        model="claude-haiku-4-5", max_tokens=64, messages=TOOL_HISTORY)
    assert resp.choices[0].message.content.endswith("now sum it up")  # the fake echoes the last user turn
    sent = anthropic_upstream.last.json()
    assert "tools" not in sent
    assert sent["messages"][1:] == [
        {"role": "assistant", "content": [
            {"type": "text", "text": '[tool call call_1: lookup, arguments {"word": "gateway"}]'}]},
        {"role": "user", "content": [
            {"type": "text", "text": "[result of tool call call_1]\na server in front of others"},
            {"type": "text", "text": "now sum it up"}]}]


async def test_a_tool_less_call_after_a_tool_loop_reaches_bedrock(gateway):
    fake = await FakeBedrock().start()
    try:
        model = fake.models[0]
        wired = await gateway.wire(fake.base_url, [model], kind="aws-bedrock", upstream_keys=(fake.api_key,),
                                   name="bedrock")
        api = openai_client(gateway, wired.key)
        resp = await api.chat.completions.create(model=model, max_tokens=64, messages=TOOL_HISTORY)
        assert resp.choices[0].message.content
        # tool_choice none, which Converse cannot say, is kept by offering no tools at all
        resp = await api.chat.completions.create(model=model, max_tokens=64, messages=TOOL_HISTORY,
                                                 tools=[LOOKUP], tool_choice="none")
        assert resp.choices[0].finish_reason == "stop" and not resp.choices[0].message.tool_calls
        assert "toolConfig" not in fake.bodies[-1]
        assert not any("toolUse" in block or "toolResult" in block
                       for message in fake.bodies[-1]["messages"] for block in message["content"])
    finally:
        await fake.close()


async def test_a_history_with_another_providers_tool_ids_reaches_a_messages_upstream(gateway, anthropic_upstream):
    # A chat agent's history made with Kimi (`functions.NAME:INDEX` ids), now served by Claude.
    wired = await wire_messages_upstream(gateway, anthropic_upstream)
    history = [dict(m) for m in TOOL_HISTORY]
    history[1] = {**history[1], "tool_calls": [{**history[1]["tool_calls"][0], "id": "functions.lookup:0"}]}
    history[2] = {**history[2], "tool_call_id": "functions.lookup:0"}
    resp = await openai_client(gateway, wired.key).chat.completions.create(
        model="claude-haiku-4-5", max_tokens=64, tools=[LOOKUP], messages=history)
    assert resp.choices[0].message.content or resp.choices[0].message.tool_calls
    sent = anthropic_upstream.last.json()["messages"]
    assert sent[1]["content"][0]["id"] == sent[2]["content"][0]["tool_use_id"] != "functions.lookup:0"


async def test_a_system_prompt_alone_and_a_greeting_first_reach_claude_bedrock_and_gemini(gateway,
                                                                                          anthropic_upstream):
    # OpenAI answers a request holding only a system prompt, or opening with the assistant's greeting;
    # the Messages API and Gemini refuse an empty conversation, Converse both (the fakes likewise).
    fake, gemini = await FakeBedrock().start(), await FakeGemini().start()
    try:
        claude = await wire_messages_upstream(gateway, anthropic_upstream)
        bedrock = await gateway.wire(fake.base_url, [fake.models[0]], kind="aws-bedrock",
                                     upstream_keys=(fake.api_key,), name="bedrock")
        google = await gateway.wire(gemini.base_url, ["gemini-2.5-flash"], kind="gemini",
                                    upstream_keys=(gemini.api_key,), name="gemini")
        for wired, model in ((claude, "claude-haiku-4-5"), (bedrock, fake.models[0]), (google, "gemini-2.5-flash")):
            api = openai_client(gateway, wired.key)
            for messages in ([{"role": "system", "content": "Greet the user as a pirate."}],
                             [{"role": "assistant", "content": "Ahoy! What be yer question?"},
                              {"role": "user", "content": "where is the treasure"}]):
                resp = await api.chat.completions.create(model=model, max_tokens=64, messages=messages)
                assert resp.choices[0].message.content
    finally:
        await fake.close()
        await gemini.close()


async def test_chat_clients_sampling_settings_reach_claude_through_anthropic_and_bedrock(gateway, anthropic_upstream):
    # Chat clients (Open WebUI, LobeChat) send temperature with top_p, which Claude from Sonnet 4.5 on
    # refuses, and line-wise stops, which Claude refuses when only whitespace.
    model = "anthropic.claude-sonnet-4-5-20250929-v1:0"
    fake = await FakeBedrock(models=(model,)).start()
    try:
        claude = await wire_messages_upstream(gateway, anthropic_upstream)
        bedrock = await gateway.wire(fake.base_url, [model], kind="aws-bedrock", upstream_keys=(fake.api_key,),
                                     name="bedrock")
        for wired, name in ((claude, "claude-haiku-4-5"), (bedrock, model)):
            resp = await openai_client(gateway, wired.key).chat.completions.create(
                model=name, max_tokens=64, temperature=0.7, top_p=0.9, messages=[{"role": "user", "content": "hi"}])
            assert resp.choices[0].message.content == "Echo: hi"
            # a line-wise stop, which the vendor refuses (a whitespace-only stop sequence)
            resp = await openai_client(gateway, wired.key).chat.completions.create(
                model=name, max_tokens=64, stop=["\n"], messages=[{"role": "user", "content": "hi"}])
            assert resp.choices[0].message.content == "Echo: hi"
    finally:
        await fake.close()


async def test_openai_sdk_plain_call_to_a_messages_upstream(gateway, anthropic_upstream):
    wired = await wire_messages_upstream(gateway, anthropic_upstream)
    resp = await openai_client(gateway, wired.key).chat.completions.create(
        model="claude-haiku-4-5", max_tokens=64, temperature=0.5, stop=["STOP"],
        messages=[{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello world"}],
    )
    assert resp.choices[0].message.content == "Echo: hello world"
    assert resp.choices[0].finish_reason == "stop"
    assert resp.id.startswith("chatcmpl-") and resp.model == "claude-haiku-4-5"
    assert resp.usage.total_tokens == resp.usage.prompt_tokens + resp.usage.completion_tokens > 0
    sent = anthropic_upstream.last.json()
    assert sent["system"] == "be brief"
    assert (sent["max_tokens"], sent["temperature"], sent["stop_sequences"]) == (64, 0.5, ["STOP"])
    assert sent["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hello world"}]}]


async def test_length_stop_maps_to_finish_reason_length(gateway, anthropic_upstream):
    wired = await wire_messages_upstream(gateway, anthropic_upstream)
    anthropic_upstream.reply_next(Reply(text="cut sh", stop_reason="max_tokens"))
    resp = await openai_client(gateway, wired.key).chat.completions.create(
        model="claude-haiku-4-5", max_tokens=2, messages=[{"role": "user", "content": "long story"}])
    assert resp.choices[0].finish_reason == "length"


async def test_openai_sdk_stream_from_a_messages_upstream(gateway, anthropic_upstream):
    wired = await wire_messages_upstream(gateway, anthropic_upstream)
    stream = await openai_client(gateway, wired.key).chat.completions.create(
        model="claude-haiku-4-5", stream=True, stream_options={"include_usage": True},
        messages=[{"role": "user", "content": "stream these five words please"}],
    )
    chunks = [c async for c in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Echo: stream these five words please"
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["stop"]
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0
    assert chunks[-1].usage.prompt_tokens > 0


async def test_openai_sdk_tool_round_trip_through_a_messages_upstream(gateway, anthropic_upstream):
    wired = await wire_messages_upstream(gateway, anthropic_upstream)
    api = openai_client(gateway, wired.key)
    first = await api.chat.completions.create(
        model="claude-haiku-4-5", tools=[LOOKUP], tool_choice="auto",
        messages=[{"role": "user", "content": "please lookup the word"}])
    message = first.choices[0].message
    assert first.choices[0].finish_reason == "tool_calls"
    (call,) = message.tool_calls
    assert call.function.name == "lookup" and "word" in orjson.loads(call.function.arguments)
    assert anthropic_upstream.last.json()["tools"][0]["input_schema"] == LOOKUP["function"]["parameters"]
    second = await api.chat.completions.create(
        model="claude-haiku-4-5", tools=[LOOKUP],
        messages=[{"role": "user", "content": "please lookup the word"}, message.model_dump(exclude_none=True),
                  {"role": "tool", "tool_call_id": call.id, "content": "a definition"}])
    assert second.choices[0].message.content == "Tool results: a definition"
    sent = anthropic_upstream.last.json()["messages"]
    assert sent[1]["role"] == "assistant" and sent[1]["content"][-1]["type"] == "tool_use"
    assert sent[1]["content"][-1]["id"] == call.id
    assert sent[2] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": call.id, "content": [{"type": "text", "text": "a definition"}]}]}


async def test_openai_sdk_streamed_tool_call_from_a_messages_upstream(gateway, anthropic_upstream):
    wired = await wire_messages_upstream(gateway, anthropic_upstream)
    stream = await openai_client(gateway, wired.key).chat.completions.create(
        model="claude-haiku-4-5", tools=[LOOKUP], stream=True,
        messages=[{"role": "user", "content": "lookup something"}])
    names, arguments, finish = [], "", None
    async for chunk in stream:
        choice = chunk.choices[0]
        for delta in choice.delta.tool_calls or ():
            if delta.function.name:
                names.append(delta.function.name)
            arguments += delta.function.arguments or ""
        finish = choice.finish_reason or finish
    assert names == ["lookup"] and "word" in orjson.loads(arguments) and finish == "tool_calls"


# --- the coding-agent workload -----------------------------------------------------------------

TOOLS = [
    {"name": f"tool_{i:02d}", "description": f"Tool number {i}: " + "does things. " * 20,
     "input_schema": {"type": "object", "properties": {"path": {"type": "string"}, "line": {"type": "integer"}},
                      "required": ["path"]}}
    for i in range(40)
]
SYSTEM = "You are a coding agent. " + "Follow the repository conventions carefully. " * 600


def agent_history(turns: int) -> list[dict]:
    history: list[dict] = [{"role": "user", "content": "Fix the failing test."}]
    for turn in range(turns):
        tool_ids = [f"toolu_{turn}_{k}" for k in range(2)]
        history.append({"role": "assistant", "content": [
            {"type": "text", "text": f"Step {turn}: reading files."},
            *({"type": "tool_use", "id": tid, "name": TOOLS[(turn + k) % 40]["name"],
               "input": {"path": f"src/file_{turn}_{k}.py", "line": turn}} for k, tid in enumerate(tool_ids)),
        ]})
        history.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": tid, "content": f"contents of file {turn}/{k}\n" * 5}
            for k, tid in enumerate(tool_ids)
        ]})
    return history


async def test_coding_agent_long_tool_loop_streamed_to_a_chat_upstream(gateway, openai_upstream):
    wired = await gateway.wire(openai_upstream.base_url, ["gpt-test"])
    sdk = AsyncAnthropic(base_url=f"{gateway.url}/alt", api_key=wired.key, max_retries=0)
    history = agent_history(12)
    history.append({"role": "user", "content": [{"type": "text", "text": "call tool tool_05 next"}]})
    async with sdk.messages.stream(model="gpt-test", max_tokens=4096, system=SYSTEM, tools=TOOLS,
                                   messages=history) as stream:
        final = await stream.get_final_message()
    tool_uses = [b for b in final.content if b.type == "tool_use"]
    assert final.stop_reason == "tool_use" and len(tool_uses) == 40, "the fake calls every tool in parallel"
    assert [b.name for b in tool_uses] == [t["name"] for t in TOOLS]
    assert all(b.input == {"path": "path-value", "line": 1} for b in tool_uses)
    assert final.usage.input_tokens > 0 and final.usage.output_tokens > 0
    sent = openai_upstream.last.json()
    assert sent["stream"] is True and len(sent["tools"]) == 40
    assert sent["messages"][0] == {"role": "system", "content": SYSTEM}
    # every turn arrives in order: user, then per step an assistant turn with 2 calls and 2 tool results
    roles = [m["role"] for m in sent["messages"][1:]]
    assert roles == ["user"] + ["assistant", "tool", "tool"] * 12 + ["user"]
    calls = [c["id"] for m in sent["messages"] if m["role"] == "assistant" for c in m["tool_calls"]]
    results = [m["tool_call_id"] for m in sent["messages"] if m["role"] == "tool"]
    assert calls == results == [f"toolu_{t}_{k}" for t in range(12) for k in range(2)]


async def test_a_converted_call_failing_over_to_the_clients_own_protocol_forwards_the_clients_body(
        gateway, openai_upstream, anthropic_upstream):
    """A converted call lets the client's decoded tree go once its upstream request is built; a failover
    to an upstream of the client's protocol then gets the client's body decoded again: the same JSON,
    every field as the client sent it."""
    import httpx

    first = await gateway.wire(openai_upstream.base_url, [{"model_id": "claude-haiku-4-5", "upstream_model": "gpt-test"}],
                               name="chat-first")
    svc = gateway.services
    provider = await svc.providers.create("claude-provider", "anthropic", base_url=anthropic_upstream.base_url,
                                          keys=[API_KEY])
    channel = await svc.channels.create("claude-channel", provider.id, models=["claude-haiku-4-5"], priority=1)
    await svc.applications.authorize_channel(first.app_id, channel.id)
    await gateway.runtime.refresh()
    sent = {
        "model": "claude-haiku-4-5", "max_tokens": 64, "system": [{"type": "text", "text": "Be brief. ☃"}],
        "tools": [{"name": "lookup", "description": "Look a word up",
                   "input_schema": {"type": "object", "properties": {"word": {"type": "string"}}}}],
        "messages": [
            {"role": "user", "content": "look up snow"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "lookup",
                                               "input": {"word": "snow", "n": 1.5}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "frozen rain"}]},
        ],
    }
    headers = {"x-api-key": first.key, "alt-version": "2023-06-01", "content-type": "application/json"}
    async with httpx.AsyncClient(base_url=gateway.url) as http:
        # The first call converts; from the second on, the application's calls are decoded whole at once.
        assert (await http.post("/alt/v1/messages", content=orjson.dumps(sent), headers=headers)).status_code == 200
        openai_upstream.fail_next(429, {"error": {"message": "You exceeded your current quota.",
                                                  "type": "insufficient_quota", "param": None,
                                                  "code": "insufficient_quota"}})
        resp = await http.post("/alt/v1/messages", content=orjson.dumps(sent), headers=headers)
    assert resp.status_code == 200, resp.text
    assert (len(openai_upstream.requests), len(anthropic_upstream.requests)) == (2, 1)
    assert anthropic_upstream.last.json() == sent


async def test_while_the_upstream_works_a_converted_call_holds_no_decoded_conversation(gateway, openai_upstream):
    """Freed after the answer, the tree of a 150 KB conversation has left the CPU's caches and costs
    several times what it costs freed at once (docs/decisions.md): the call keeps only the client's bytes."""
    import gc

    import httpx

    wired = await gateway.wire(openai_upstream.base_url, ["gpt-test"])
    marker = "toolu_marker_7f3a"
    alive: list[int] = []

    def count_client_blocks() -> None:
        # Lists of content blocks of the messages protocol's shape (the collector tracks lists, not
        # dicts of strings); nothing on the chat side has a `tool_use_id`.
        alive.append(sum(1 for o in gc.get_objects() if type(o) is list and any(
            type(block) is dict and block.get("tool_use_id") == marker for block in o)))

    openai_upstream.on_request = count_client_blocks
    sent = orjson.dumps({"model": "gpt-test", "max_tokens": 64, "messages": [  # bytes: the test holds no tree
        {"role": "user", "content": "look up snow"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": marker, "name": "lookup", "input": {"w": "snow"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": marker, "content": "frozen rain"}]},
    ]})
    headers = {"x-api-key": wired.key, "alt-version": "2023-06-01", "content-type": "application/json"}
    async with httpx.AsyncClient(base_url=gateway.url) as http:
        for _ in range(2):  # the first call reads through the typed view, the next ones decode at once
            resp = await http.post("/alt/v1/messages", content=sent, headers=headers)
            assert resp.status_code == 200, resp.text
    assert openai_upstream.last.json()["messages"][-1] == {"role": "tool", "tool_call_id": marker,
                                                           "content": "frozen rain"}
    assert alive == [0, 0]


async def test_while_the_upstream_works_a_pass_through_call_holds_no_decoded_conversation(gateway, openai_upstream):
    """The same for a body the typed view leaves to the codec's own path (a field it does not know):
    it is decoded whole, and forwarded as the client's bytes."""
    import gc

    import httpx

    wired = await gateway.wire(openai_upstream.base_url, ["gpt-test"])
    marker = "text marker 51c0"
    alive: list[int] = []
    openai_upstream.on_request = lambda: alive.append(sum(1 for o in gc.get_objects() if type(o) is list and any(
        type(part) is dict and part.get("text") == marker for part in o)))
    sent = orjson.dumps({"model": "gpt-test", "x_vendor_option": {"a": [1]},
                         "messages": [{"role": "user", "content": [{"type": "text", "text": marker}]}]})
    async with httpx.AsyncClient(base_url=gateway.url) as http:
        for _ in range(2):
            resp = await http.post("/v1/chat/completions", content=sent,
                                   headers={"authorization": f"Bearer {wired.key}", "content-type": "application/json"})
            assert resp.status_code == 200, resp.text
    assert openai_upstream.last.body == sent
    assert alive == [0, 0]
