"""Chat and Responses clients on every generation of Claude (providers/claude.py).

Each Claude generation refuses some of what chat clients send: Opus 4.7 and later a temperature ("`temperature`
is deprecated for this model."), 4.7 and later a thinking budget, Opus 5.5 and Fable 5.1 a forced tool call,
and manual thinking (3.7 to 4.5) a tool loop whose last turn lacks the model's signed thinking. A client's
`reasoning_effort` becomes the thinking each generation takes. The fakes refuse what the vendor documents
per model (tests/fakes/anthropic_upstream.MODEL_RULES), on the Messages API and through Bedrock's Converse.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from openai import AsyncOpenAI

from modelgate.protocols.ir import ChatRequest, Message, TextPart, ThinkingPart, Tool, ToolCall, ToolChoice, ToolResult
from modelgate.protocols.messages import MessagesCodec
from modelgate.providers import anthropic_messages, bedrock
from modelgate.providers.claude import Generation, generation, output_schema
from tests.fakes.anthropic_upstream import API_KEY, MODEL_RULES, FakeAnthropic
from tests.fakes.bedrock_upstream import FakeBedrock

MODELS = tuple(MODEL_RULES)  # Sonnet/Haiku 4.5 and Opus 4.1, Sonnet 4.6, Opus 4.7, 4.8, 5, 5.5, Fable 5.1
LOOKUP = {"type": "function", "function": {
    "name": "lookup", "description": "Look a word up",
    "parameters": {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]}}}
RESPONSES_TOOLS = [{"type": "function", "name": "lookup", "parameters": LOOKUP["function"]["parameters"]}]


@pytest.mark.parametrize("model, expected", [
    ("claude-opus-4-8", Generation("opus", (4, 8))),
    ("claude-sonnet-4-20250514", Generation("sonnet", (4, 0))),  # a date, not a minor version
    ("claude-3-7-sonnet-20250219", Generation("sonnet", (3, 7))),
    ("claude-3-opus-20240229", Generation("opus", (3, 0))),
    ("us.anthropic.claude-opus-4-1-20250805-v1:0", Generation("opus", (4, 1))),
    ("global.anthropic.claude-opus-4-8-20260601-v1:0", Generation("opus", (4, 8))),
    ("claude-opus-4-5@20251101", Generation("opus", (4, 5))),
    ("claude-fable-5-1", Generation("fable", (5, 1))),
    ("claude-opus-5", Generation("opus", (5, 0))),
    ("claude-mythos-preview", Generation("mythos", (5, 0))),
    ("arn:aws:bedrock:us-west-2:123456789012:application-inference-profile/abc", None),
    ("my-alias", None),
])
def test_the_generation_is_read_from_every_cloud_s_model_id(model, expected):
    assert generation(model) == expected


@pytest.fixture
async def claude_upstream():
    fake = await FakeAnthropic(models=MODELS).start()
    yield fake
    await fake.close()


async def chat_client(gateway, fake) -> AsyncOpenAI:
    wired = await gateway.wire(fake.base_url, list(MODELS), kind="anthropic", upstream_keys=(API_KEY,), name="claude")
    return AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=wired.key, max_retries=0)


async def test_a_chat_client_s_sampling_settings_reach_every_generation(gateway, claude_upstream):
    # Open WebUI and LobeChat send a temperature and top_p with every request.
    api = await chat_client(gateway, claude_upstream)
    for model in MODELS:
        resp = await api.chat.completions.create(model=model, temperature=0.3, top_p=0.9,
                                                 messages=[{"role": "user", "content": "hi"}])
        assert resp.choices[0].message.content == "Echo: hi", model
        sent = claude_upstream.last.json()
        if MODEL_RULES[model].fixed_sampling:
            assert not {"temperature", "top_p", "top_k"} & set(sent), model
        else:
            assert sent["temperature"] == 0.3, model


@pytest.mark.parametrize("stream", [False, True])
async def test_reasoning_effort_becomes_the_thinking_each_generation_takes(gateway, claude_upstream, stream):
    api = await chat_client(gateway, claude_upstream)
    for model in MODELS:
        kwargs = dict(model=model, reasoning_effort="high", temperature=0.2,
                      messages=[{"role": "user", "content": "why is the sky blue"}])
        if stream:
            reasoning = "".join([getattr(chunk.choices[0].delta, "reasoning_content", None) or ""
                                 async for chunk in await api.chat.completions.create(stream=True, **kwargs)
                                 if chunk.choices])
        else:
            resp = await api.chat.completions.create(**kwargs)
            assert resp.choices[0].message.content == "Echo: why is the sky blue", model
            reasoning = getattr(resp.choices[0].message, "reasoning_content", None)
        # the model's thinking, shown to the client (Claude from 4.7 omits it unless asked to summarize)
        assert reasoning == "Thinking about: why is the sky blue", model
        sent = claude_upstream.last.json()
        if "enabled" in MODEL_RULES[model].thinking and "adaptive" not in MODEL_RULES[model].thinking:
            assert sent["thinking"] == {"type": "enabled", "budget_tokens": 24576}, model
            assert sent["max_tokens"] > 24576 and "temperature" not in sent, model
        else:
            assert sent["thinking"]["type"] == "adaptive" and sent["output_config"]["effort"] == "high", model


async def test_a_client_s_max_tokens_counts_the_thinking_as_openai_s_does(gateway, claude_upstream):
    api = await chat_client(gateway, claude_upstream)
    await api.chat.completions.create(model="claude-sonnet-4-5", reasoning_effort="high", max_tokens=2000,
                                      messages=[{"role": "user", "content": "hi"}])
    sent = claude_upstream.last.json()
    assert (sent["max_tokens"], sent["thinking"]) == (2000, {"type": "enabled", "budget_tokens": 1999})
    # no room for the smallest budget (1,024): no thinking rather than a refusal
    await api.chat.completions.create(model="claude-sonnet-4-5", reasoning_effort="high", max_tokens=500,
                                      messages=[{"role": "user", "content": "hi"}])
    assert "thinking" not in claude_upstream.last.json()


async def test_forced_tool_calls_reach_every_generation(gateway, claude_upstream):
    # Thinking, manual or adaptive, refuses a forced tool call: the thinking goes, the call's structure wins.
    # Opus 5.5 and Fable 5.1 refuse one always: the call is then left to the model (tool_choice auto), which
    # calls the tool the user names.
    api = await chat_client(gateway, claude_upstream)
    for model in MODELS:
        for choice in ("required", {"type": "function", "function": {"name": "lookup"}}):
            resp = await api.chat.completions.create(
                model=model, reasoning_effort="medium", tools=[LOOKUP], tool_choice=choice,  # type: ignore[arg-type]
                messages=[{"role": "user", "content": "lookup gateway"}])
            assert [c.function.name for c in resp.choices[0].message.tool_calls or ()] == ["lookup"], model


async def test_a_chat_agent_loop_goes_on_with_reasoning_on_every_generation(gateway, claude_upstream):
    # A chat client cannot send Claude's signed thinking back; manual thinking would refuse the loop's next
    # turn ("a final `assistant` message must start with a thinking block"): that turn goes without.
    api = await chat_client(gateway, claude_upstream)
    for model in MODELS:
        history: list = [{"role": "user", "content": "lookup gateway"}]
        first = await api.chat.completions.create(model=model, reasoning_effort="low", tools=[LOOKUP], messages=history)
        message = first.choices[0].message
        assert message.tool_calls, model
        history += [message.model_dump(exclude_none=True),
                    {"role": "tool", "tool_call_id": message.tool_calls[0].id, "content": "a server in front"}]
        second = await api.chat.completions.create(model=model, reasoning_effort="low", tools=[LOOKUP],
                                                   messages=history)
        assert second.choices[0].message.content == "Tool results: a server in front", model


async def test_a_chat_agent_loop_s_tool_less_last_call_keeps_its_reasoning(gateway, claude_upstream):
    # The loop's last call offers no tools: its history goes as text, so no tool turn needs signed thinking.
    api = await chat_client(gateway, claude_upstream)
    history = [{"role": "user", "content": "lookup gateway"},
               {"role": "assistant", "content": None, "tool_calls": [
                   {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]},
               {"role": "tool", "tool_call_id": "call_1", "content": "a server in front"},
               {"role": "user", "content": "sum it up"}]
    resp = await api.chat.completions.create(model="claude-sonnet-4-5", reasoning_effort="low", messages=history)  # type: ignore[arg-type]
    reasoning = getattr(resp.choices[0].message, "reasoning_content", None) or ""
    assert reasoning.startswith("Thinking about:") and reasoning.endswith("sum it up")
    assert claude_upstream.last.json()["thinking"]["type"] == "enabled"


async def responses_tool_turn(api: AsyncOpenAI, model: str) -> tuple[Any, list[Any]]:
    """A Responses agent's (Codex's) first turn, a tool call with its reasoning sent back signed as
    `encrypted_content`, and the input of its next turn: the history with the tool's result."""
    first = await api.responses.create(model=model, input="lookup gateway", tools=RESPONSES_TOOLS,  # type: ignore[arg-type]
                                       reasoning={"effort": "medium"}, include=["reasoning.encrypted_content"])
    call = next(item for item in first.output if item.type == "function_call")
    return first, [{"role": "user", "content": "lookup gateway"}, *[item.model_dump(exclude_none=True) for item in first.output],
                   {"type": "function_call_output", "call_id": call.call_id, "output": "a server in front"}]


async def test_a_responses_agent_keeps_manual_thinking_through_its_tool_loop(gateway, claude_upstream):
    # The tool loop's next turn opens with the model's own thinking, so it keeps thinking on.
    api = await chat_client(gateway, claude_upstream)
    first, history = await responses_tool_turn(api, "claude-sonnet-4-5")
    kinds = [item.type for item in first.output]
    assert kinds[0] == "reasoning" and "function_call" in kinds
    second = await api.responses.create(model="claude-sonnet-4-5", tools=RESPONSES_TOOLS,  # type: ignore[arg-type]
                                        reasoning={"effort": "medium"}, input=history)
    assert second.output_text == "Tool results: a server in front"
    sent = claude_upstream.last.json()
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 8192}
    assert sent["messages"][1]["content"][0]["type"] == "thinking"


async def test_a_responses_agent_s_tool_less_last_call_reaches_a_model_that_binds_its_thinking(gateway, claude_upstream):
    # Opus 5.5 binds its thinking to the conversation, tools included: once the last call offers none, the
    # history's signed thinking would be refused ("The block is bound to a different conversation.").
    api = await chat_client(gateway, claude_upstream)
    _, history = await responses_tool_turn(api, "claude-opus-5-5")
    last = await api.responses.create(model="claude-opus-5-5", reasoning={"effort": "medium"},
                                      input=[*history, {"role": "user", "content": "sum it up"}])
    assert last.output_text.startswith("Echo:")


# --- Bedrock: the same rules inside Converse -----------------------------------------------------


def converse(req: ChatRequest, model: str) -> dict:
    return bedrock.build_body(req, model)


def chat(**kw) -> ChatRequest:
    kw.setdefault("messages", [Message("user", [TextPart("lookup gateway")])])
    return ChatRequest("m", **kw)


@pytest.mark.parametrize("model, thinking, effort", [
    ("anthropic.claude-3-5-haiku-20241022-v1:0", None, None),  # before 3.7: no thinking
    ("anthropic.claude-sonnet-4-5-20250929-v1:0", {"type": "enabled", "budget_tokens": 8192}, None),
    ("anthropic.claude-sonnet-4-6", {"type": "adaptive"}, "medium"),
    ("global.anthropic.claude-opus-4-8-20260601-v1:0", {"type": "adaptive", "display": "summarized"}, "medium"),
])
def test_bedrock_claude_gets_the_thinking_of_its_generation(model, thinking, effort):
    body = converse(chat(reasoning_effort="medium", temperature=0.5, top_k=5), model)
    additional = body.get("additionalModelRequestFields") or {}
    assert additional.get("thinking") == thinking
    assert (additional.get("output_config") or {}).get("effort") == effort
    if thinking is not None:
        # temperature and top_k are refused beside thinking; max_tokens leaves the thinking room
        assert "temperature" not in body["inferenceConfig"] and "top_k" not in additional
        assert body["inferenceConfig"]["maxTokens"] > thinking.get("budget_tokens", 0)


async def test_chat_clients_reach_every_claude_generation_through_bedrock(gateway):
    models = tuple(f"anthropic.{m}-v1:0" for m in MODELS)
    fake = await FakeBedrock(models=models).start()
    try:
        wired = await gateway.wire(fake.base_url, list(models), kind="aws-bedrock", upstream_keys=(fake.api_key,),
                                   name="bedrock")
        api = AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=wired.key, max_retries=0)
        for model in models:
            resp = await api.chat.completions.create(model=model, temperature=0.3, top_p=0.9, reasoning_effort="high",
                                                     tools=[LOOKUP], tool_choice="required",
                                                     messages=[{"role": "user", "content": "lookup gateway"}])
            assert resp.choices[0].message.tool_calls, model
    finally:
        await fake.close()


def test_a_messages_client_s_thinking_takes_the_form_of_the_generation_behind_bedrock():
    # Claude Code asks Opus 4.6 and later for adaptive thinking, older models for a budget; behind a gateway
    # alias it may reach another generation than the one it asked.
    budget = chat(thinking_budget=4000, thinking_effort="medium", max_tokens=32000)
    adaptive = chat(thinking_budget=-1, thinking_effort="high", max_tokens=32000)
    assert converse(budget, "anthropic.claude-opus-4-8-v1:0")["additionalModelRequestFields"] == {
        "thinking": {"type": "adaptive"}, "output_config": {"effort": "medium"}}
    assert converse(adaptive, "anthropic.claude-sonnet-4-5-20250929-v1:0")["additionalModelRequestFields"] == {
        "thinking": {"type": "enabled", "budget_tokens": 24576}}
    assert "additionalModelRequestFields" not in converse(budget, "anthropic.claude-3-5-haiku-20241022-v1:0")


@pytest.mark.parametrize("effort, model, sent", [
    ("max", "anthropic.claude-opus-4-8-v1:0", "max"), ("xhigh", "anthropic.claude-opus-4-8-v1:0", "xhigh"),
    ("max", "anthropic.claude-sonnet-4-6", "max"),  # max from 4.6 (the effort page)
    ("xhigh", "anthropic.claude-sonnet-4-6", "high"),  # xhigh from 4.7
    ("xhigh", "anthropic.claude-haiku-5-v1:0", "high"),  # never on Haiku
])
def test_a_messages_client_s_own_effort_reaches_claude_behind_bedrock_as_the_generation_takes_it(effort, model, sent):
    # Claude Code's /effort max and xhigh (output_config.effort beside adaptive thinking) on a Bedrock Claude:
    # kept where the generation has the level, else the nearest it has.
    body = {"model": "claude-opus-4-8", "max_tokens": 64000, "thinking": {"type": "adaptive"},
            "output_config": {"effort": effort}, "messages": [{"role": "user", "content": "hi"}]}
    fields = converse(MessagesCodec().to_ir(body), model)["additionalModelRequestFields"]
    assert fields == {"thinking": {"type": "adaptive"}, "output_config": {"effort": sent}}


# --- the rules one by one, on the Messages API body ------------------------------------------------


def messages_body(req: ChatRequest, model: str) -> dict:
    return anthropic_messages.messages_body(req, model)


async def test_a_chat_history_that_ends_with_the_assistant_reaches_every_generation(gateway, claude_upstream):
    # OpenAI answers it as a new turn (OpenCode's subagents and continue-buttons send one); Claude from 4.6
    # refuses a conversation that ends with the assistant, older Claude continues the text.
    api = await chat_client(gateway, claude_upstream)
    for model in MODELS:
        resp = await api.chat.completions.create(model=model, messages=[
            {"role": "user", "content": "write a haiku"}, {"role": "assistant", "content": "Autumn wind"}])
        assert resp.choices[0].message.content, model
        last = claude_upstream.last.json()["messages"][-1]
        assert last["role"] == ("assistant" if MODEL_RULES[model].prefill else "user"), model


async def test_a_client_s_max_tokens_are_cut_to_what_the_generation_gives(gateway, claude_upstream):
    # Claude Code asks for 128,000 behind an alias that may serve an older Claude (64,000; Opus 4.1 32,000).
    wired = await gateway.wire(claude_upstream.base_url, list(MODELS), kind="anthropic", upstream_keys=(API_KEY,),
                               name="claude")
    api = AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=wired.key, max_retries=0)
    for model in MODELS:
        resp = await api.chat.completions.create(model=model, max_tokens=128000,
                                                 messages=[{"role": "user", "content": "hi"}])
        assert resp.choices[0].message.content == "Echo: hi", model
        assert claude_upstream.last.json()["max_tokens"] == MODEL_RULES[model].max_output, model
    through_bedrock = converse(chat(max_tokens=128000), "anthropic.claude-opus-4-1-20250805-v1:0")
    assert through_bedrock["inferenceConfig"]["maxTokens"] == 32000


def test_effort_none_turns_thinking_off_or_to_the_least_where_it_cannot_be():
    assert "thinking" not in messages_body(chat(reasoning_effort="none"), "claude-sonnet-4-5")
    assert "output_config" not in messages_body(chat(reasoning_effort="none"), "claude-opus-4-8")
    body = messages_body(chat(reasoning_effort="none"), "claude-opus-5-5")  # thinking cannot be turned off
    assert "thinking" not in body and body["output_config"] == {"effort": "low"}


def test_xhigh_effort_where_the_generation_has_it():
    assert messages_body(chat(reasoning_effort="xhigh"), "claude-opus-4-8")["output_config"] == {"effort": "xhigh"}
    assert messages_body(chat(reasoning_effort="xhigh"), "claude-sonnet-4-6")["output_config"] == {"effort": "high"}
    assert messages_body(chat(reasoning_effort="minimal"), "claude-opus-4-8")["output_config"] == {"effort": "low"}
    # OpenAI's max (Codex's max and ultra) is Claude's max too, from 4.6
    assert messages_body(chat(reasoning_effort="max"), "claude-opus-4-8")["output_config"] == {"effort": "max"}
    before = messages_body(chat(reasoning_effort="max"), "claude-opus-4-5")  # manual thinking: high's budget
    assert before["thinking"] == messages_body(chat(reasoning_effort="high"), "claude-opus-4-5")["thinking"]


def test_models_that_think_by_default_get_room_for_it():
    # From Claude 5, thinking is on by default and counts toward max_tokens.
    assert messages_body(chat(), "claude-opus-5")["max_tokens"] > anthropic_messages.DEFAULT_MAX_TOKENS
    assert messages_body(chat(), "claude-sonnet-4-5")["max_tokens"] == anthropic_messages.DEFAULT_MAX_TOKENS


def test_manual_thinking_stays_on_where_the_tool_turn_opens_with_the_model_s_signed_thinking():
    def loop(*first: object) -> ChatRequest:
        return chat(reasoning_effort="low", tools=[Tool("lookup", None, {"type": "object"})], messages=[
            Message("user", [TextPart("lookup gateway")]),
            Message("assistant", [*first, ToolCall("toolu_1", "lookup", "{}")]),  # type: ignore[list-item]
            Message("tool", [ToolResult("toolu_1", [TextPart("found")])])])

    assert "thinking" in messages_body(loop(ThinkingPart("t", "sig-1")), "claude-sonnet-4-5")
    assert "thinking" in messages_body(loop(ThinkingPart("", redacted="opaque")), "claude-sonnet-4-5")
    assert "thinking" not in messages_body(loop(TextPart("Let me look.")), "claude-sonnet-4-5")
    assert "thinking" not in messages_body(loop(ThinkingPart("t")), "claude-sonnet-4-5")  # unsigned: not sent
    # adaptive thinking has no such rule
    assert messages_body(loop(TextPart("Let me look.")), "claude-opus-4-8")["thinking"]["type"] == "adaptive"


def test_forced_tool_choice_is_kept_where_the_generation_takes_it():
    tools = [Tool("lookup", None, {"type": "object"})]
    forced = chat(tools=tools, tool_choice=ToolChoice("tool", "lookup"))
    assert messages_body(forced, "claude-opus-5")["tool_choice"] == {"type": "tool", "name": "lookup"}
    assert messages_body(forced, "claude-opus-5-5")["tool_choice"] == {"type": "auto"}


# --- structured outputs (claude.output_schema) -------------------------------------------------------------


def as_format(schema: Any) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": "out", "schema": schema}}


def asking(response_format: dict[str, Any]) -> ChatRequest:
    return ChatRequest("m", [Message("user", [TextPart("hi")])], response_format=response_format)


def test_a_schema_in_the_structured_output_subset_as_the_vendor_s_sdks_send_one():
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object", "additionalProperties": True,
        "properties": {
            "name": {"type": "string", "minLength": 2, "description": "Who"},
            "when": {"type": "string", "format": "date-time"},
            "site": {"type": "string", "format": "hostname-ish"},
            "odd": {"type": "string", "format": ["not", "a", "name"]},
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 5},
            "note": {"type": ["string", "null"]},
            "kind": {"enum": ["a", "b"]},
            "ref": {"$ref": "#/$defs/Point"},
            "either": {"oneOf": [{"type": "integer"}, {"type": "boolean"}]},
        },
        "required": ["name"],
        "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number", "multipleOf": 0.5}}}},
    }
    assert output_schema(asking(as_format(schema)), "claude-haiku-4-5") == {
        "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number", "description": "{multipleOf: 0.5}"}},
                            "additionalProperties": False}},
        "type": "object",
        "properties": {
            "name": {"description": "Who\n\n{minLength: 2}", "type": "string"},
            "when": {"type": "string", "format": "date-time"},
            "site": {"type": "string", "description": '{format: "hostname-ish"}'},
            "odd": {"type": "string", "description": '{format: ["not","a","name"]}'},
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "description": "{maxItems: 5}"},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "kind": {"enum": ["a", "b"]},
            "ref": {"$ref": "#/$defs/Point"},
            "either": {"anyOf": [{"type": "integer"}, {"type": "boolean"}]},
        },
        "additionalProperties": False,
        "required": ["name"],
    }


@pytest.mark.parametrize("response_format, model", [
    (as_format({"type": "object", "properties": {"any": {}}}), "claude-sonnet-4-5"),  # a typeless node: no form
    (as_format({"type": ["string", "null"], "anyOf": [{"type": "string"}]}), "claude-sonnet-4-5"),
    (as_format({"type": {"not": "a type"}}), "claude-sonnet-4-5"),
    (as_format({"type": "object"}), "claude-sonnet-4-20250514"),  # before 4.5
    (as_format({"type": "object"}), "claude-3-7-sonnet-20250219"),
    (as_format({"type": "object"}), "operators-alias"),  # no generation named
    ({"type": "json_object"}, "claude-opus-4-6"),  # no schema to give
])
def test_otherwise_the_answer_s_json_is_asked_for_in_words(response_format, model):
    assert output_schema(asking(response_format), model) is None
    body = bedrock.build_body(asking(response_format), f"anthropic.{model}-v1:0")
    assert "outputConfig" not in body and "JSON" in body["system"][-1]["text"]


@pytest.mark.parametrize("options, native", [({}, False), ({"claude_structured_outputs": True}, True)])
async def test_claude_on_vertex_gets_structured_outputs_only_where_the_policy_allows_them(options, native):
    from modelgate.providers.base import Endpoint, prepare
    from modelgate.providers.vertex import VertexAdapter
    from tests.fakes.upstream_base import send
    from tests.fakes.vertex_upstream import LOCATION, PROJECT, FakeVertexClaude

    fake = await FakeVertexClaude().start()
    try:
        endpoint = Endpoint("p1:k1", 1, 1, "vertex-ai", fake.origin, orjson.dumps(fake.service_account).decode(),
                            {"project": PROJECT, "location": LOCATION, **options})
        adapter = VertexAdapter()
        await prepare(adapter, endpoint)
        request = adapter.build_request(asking(as_format({"type": "object", "properties": {}})),
                                        "claude-sonnet-4-5@20250929", endpoint)
        status, _, answer = await send(request)
    finally:
        await fake.close()
    body = orjson.loads(request.body)
    assert ("format" in body.get("output_config", {})) is native and ("system" in body) is not native
    assert status == 200 and (adapter.parse_response(answer).parts[0].text == "{}") is native  # JSON of the schema
