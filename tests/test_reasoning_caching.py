"""Prompt caching and reasoning on conversion (issue 10 item 5, issue 13 items 5 and 8).

- cache breakpoints: messages `cache_control` (and chat clients' `cache_control` on content parts)
  become IR cache marks, sent to Bedrock's Claude models as `cachePoint` blocks and to
  messages-protocol upstreams (`anthropic`, Claude on Vertex) as `cache_control`;
- signed thinking and redacted thinking go back to the upstream that produced them byte for byte;
  foreign or unsigned thinking is dropped, never sent as if signed;
- a client's thinking request drives Bedrock Claude's `thinking`, Gemini's `thinkingConfig` and
  the thinking switches of Moonshot, Zhipu and DashScope;
- every finish / stop reason the providers' SDKs define is mapped deliberately.

Bodies are checked with the providers' own validators (botocore's ParamValidator, google-genai
types, the anthropic SDK's param types), as in test_provider_sdk_validation.py.
"""

from __future__ import annotations

import typing

import botocore.session
import orjson
import pytest
from anthropic import AsyncAnthropic
from botocore.validate import ParamValidator
from openai import AsyncOpenAI
from sqlalchemy import select

from modelgate.errors import ErrorType
from modelgate.protocols import messages
from modelgate.protocols.chat import ChatCodec
from modelgate.protocols.ir import (
    ChatRequest,
    Message,
    TextPart,
    ThinkingDelta,
    ThinkingPart,
    Tool,
    ToolCall,
    ToolResult,
)
from modelgate.protocols.sse import SSEParser
from modelgate.providers import anthropic_messages, bedrock, gemini
from modelgate.providers.bedrock import BedrockAdapter
from modelgate.storage.models import CallLog
from tests.fakes.anthropic_upstream import API_KEY
from tests.fakes.bedrock_upstream import FakeBedrock, event
from tests.fakes.upstream_base import decode_stream
from tests.sdk_check import typed_dict_problems
from tests.test_provider_sdk_validation import body as adapter_body

CLAUDE = "anthropic.claude-sonnet-4-5-20250929-v1:0"  # a Claude that thinks (from 3.7 on)
_CONVERSE = botocore.session.get_session().get_service_model("bedrock-runtime")


def converse_problems(sent: dict, model: str = CLAUDE, stream: bool = False) -> str:
    operation = _CONVERSE.operation_model("ConverseStream" if stream else "Converse")
    report = ParamValidator().validate({"modelId": model, **sent}, operation.input_shape)
    return report.generate_report() if report.has_errors() else ""


EPHEMERAL = {"type": "ephemeral"}
SCHEMA = {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}


def agent_request(**extra) -> dict:
    """A messages request marked the way coding agents mark it: the tools, the system prompt's
    last block and the latest user turn (a tool result) each end a cached prefix."""
    return {
        "model": "claude", "max_tokens": 4096,
        "system": [{"type": "text", "text": "You are a coding agent."},
                   {"type": "text", "text": "Project rules: be terse.", "cache_control": EPHEMERAL}],
        "tools": [{"name": "Read", "description": "Read a file", "input_schema": SCHEMA},
                  {"name": "Bash", "description": "Run a command", "input_schema": SCHEMA,
                   "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "List the files.", "cache_control": EPHEMERAL}]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py b.py", "cache_control": EPHEMERAL}]},
        ],
        **extra,
    }


# --- cache marks: decoding ----------------------------------------------------------------------


def test_messages_cache_control_becomes_ir_cache_marks():
    ir = messages.to_ir(agent_request())
    assert ir.system_cache == {1: "5m"}
    assert [t.cache for t in ir.tools] == [None, "1h"]
    assert ir.messages[0].parts == [TextPart("List the files.", cache="5m")]
    assert ir.messages[1].parts[0].cache is None
    assert ir.messages[2].parts == [ToolResult("toolu_1", [TextPart("a.py b.py")], cache="5m")]


def test_top_level_cache_control_marks_the_last_block_that_takes_one():
    # Automatic caching (the SDK's top-level `cache_control`): the vendor puts the breakpoint on the last
    # cacheable block in prompt order (tools, system, messages); thinking blocks take none.
    request = agent_request(cache_control={"type": "ephemeral", "ttl": "1h"})
    request["messages"][-1]["content"][0].pop("cache_control")
    request["messages"].append({"role": "assistant", "content": [
        {"type": "text", "text": "Two files."}, {"type": "thinking", "thinking": "done", "signature": "sig"}]})
    ir = messages.to_ir(request)
    text, thinking = ir.messages[-1].parts
    assert text.cache == "1h" and isinstance(thinking, ThinkingPart)
    assert ir.messages[-2].parts[0].cache is None and ir.messages[0].parts[0].cache == "5m"  # others as sent
    explicit = messages.to_ir(agent_request(cache_control=EPHEMERAL | {"ttl": "1h"}))
    assert explicit.messages[-1].parts[0].cache == "5m"  # the block's own mark stays
    no_turns = messages.to_ir({"model": "m", "max_tokens": 5, "system": "rules", "cache_control": EPHEMERAL,
                               "messages": [{"role": "user", "content": [
                                   {"type": "thinking", "thinking": "t", "signature": "s"}]}]})
    assert no_turns.system_cache == {0: "5m"}


def test_mid_conversation_system_cache_marks_survive_hoisting():
    ir = messages.to_ir({"model": "m", "max_tokens": 5, "system": "first", "messages": [
        {"role": "user", "content": "hi"},
        {"role": "system", "content": [{"type": "text", "text": "later", "cache_control": EPHEMERAL}]},
        {"role": "user", "content": "go"}]})
    hoisted = ir.with_system_hoisted()
    assert hoisted.system == ["first", "later"] and hoisted.system_cache == {1: "5m"}


def test_chat_clients_cache_control_on_content_parts_is_kept():
    ir = ChatCodec().to_ir({"model": "m", "messages": [
        {"role": "system", "content": [{"type": "text", "text": "rules"},
                                       {"type": "text", "text": "long doc", "cache_control": EPHEMERAL}]},
        {"role": "user", "content": [{"type": "text", "text": "q", "cache_control": EPHEMERAL}]}]})
    assert ir.system == ["rules", "long doc"] and ir.system_cache == {1: "5m"}
    assert ir.messages[0].parts == [TextPart("q", cache="5m")]


# --- cache marks: Bedrock cachePoint -----------------------------------------------------------


def test_bedrock_claude_gets_a_cache_point_after_each_marked_block():
    sent = adapter_body("aws-bedrock", messages.to_ir(agent_request()), model=CLAUDE, key="AKID:secret")
    assert converse_problems(sent) == ""
    point = {"cachePoint": {"type": "default"}}
    assert sent["system"] == [{"text": "You are a coding agent."}, {"text": "Project rules: be terse."}, point]
    tools = sent["toolConfig"]["tools"]
    assert [next(iter(t)) for t in tools] == ["toolSpec", "toolSpec", "cachePoint"]
    assert tools[2] == {"cachePoint": {"type": "default", "ttl": "1h"}}
    first, _, last = sent["messages"]
    assert first["content"] == [{"text": "List the files."}, point]
    assert [next(iter(b)) for b in last["content"]] == ["toolResult", "cachePoint"]


def test_bedrock_models_other_than_claude_get_no_cache_points():
    sent = adapter_body("aws-bedrock", messages.to_ir(agent_request()), model="meta.llama3-70b-instruct-v1:0",
                        key="AKID:secret")
    assert b"cachePoint" not in orjson.dumps(sent)
    assert converse_problems(sent, "meta.llama3-70b-instruct-v1:0") == ""


# --- cache marks: messages-protocol upstreams on conversion ---------------------------------------


def test_chat_client_cache_marks_reach_an_anthropic_upstream_as_cache_control():
    from anthropic.types import message_create_params as params

    ir = ChatCodec().to_ir({"model": "m", "max_tokens": 100, "messages": [
        {"role": "system", "content": [{"type": "text", "text": "long doc", "cache_control": EPHEMERAL}]},
        {"role": "user", "content": [{"type": "text", "text": "q", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]}],
        "tools": [{"type": "function", "function": {"name": "Bash", "parameters": SCHEMA}}]})
    ir.tools[0].cache = "5m"
    sent = adapter_body("anthropic", ir)
    assert sent["system"] == [{"type": "text", "text": "long doc", "cache_control": EPHEMERAL}]
    assert sent["messages"][0]["content"] == [
        {"type": "text", "text": "q", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    assert sent["tools"][0]["cache_control"] == EPHEMERAL
    assert typed_dict_problems(sent, params.MessageCreateParamsNonStreaming) == []


def test_unmarked_single_system_stays_a_string():
    sent = anthropic_messages.messages_body(ChatRequest("m", [Message("user", [TextPart("q")])], system=["s"]), "up")
    assert sent["system"] == "s"


# --- signed and redacted thinking ----------------------------------------------------------------

SIGNED = {"reasoningContent": {"reasoningText": {"text": "Think: 2+2.", "signature": "EqQBCkYIARgCIkBsig+/=="}}}
REDACTED = {"reasoningContent": {"redactedContent": "UmVkYWN0ZWQ=="}}


def bedrock_answer() -> bytes:
    return orjson.dumps({"output": {"message": {"role": "assistant", "content": [
        SIGNED, REDACTED, {"toolUse": {"toolUseId": "tooluse_1", "name": "Bash", "input": {"command": "ls"}}}]}},
        "stopReason": "tool_use", "usage": {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15}})


def test_bedrock_reasoning_reaches_a_messages_client_signed_and_goes_back_byte_for_byte():
    from anthropic.types import Message as SdkMessage

    resp = BedrockAdapter().parse_response(bedrock_answer())
    client_view = orjson.loads(messages.encode_response(resp, "claude"))
    SdkMessage.model_validate(client_view)  # the vendor SDK reads it
    thinking, redacted, _ = client_view["content"]
    assert thinking == {"type": "thinking", "thinking": "Think: 2+2.", "signature": "EqQBCkYIARgCIkBsig+/=="}
    assert redacted == {"type": "redacted_thinking", "data": "UmVkYWN0ZWQ=="}
    # The client sends the assistant turn back as it got it, with the tool's result (and its tools).
    replay = messages.to_ir({"model": "claude", "max_tokens": 100, "tools": [
        {"name": "Bash", "description": "Run a command", "input_schema": SCHEMA}], "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": client_view["content"]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tooluse_1", "content": "a.py"}]}]})
    sent = adapter_body("aws-bedrock", replay, model=CLAUDE, key="AKID:secret")
    assert converse_problems(sent) == ""
    assert sent["messages"][1]["content"][:2] == [SIGNED, REDACTED]


def test_foreign_and_unsigned_thinking_is_never_sent_as_signed():
    turn = Message("assistant", [ThinkingPart("gemini's", "gemini:c2ln"), ThinkingPart("deepseek's"),
                                 ThinkingPart("empty signature", ""), TextPart("answer")])
    req = ChatRequest("m", [Message("user", [TextPart("q")]), turn, Message("user", [TextPart("more")])])
    bedrock_sent = adapter_body("aws-bedrock", req, model=CLAUDE, key="AKID:secret")
    assert bedrock_sent["messages"][1]["content"] == [{"text": "answer"}]
    anthropic_sent = anthropic_messages.messages_body(req, "claude-x")
    assert anthropic_sent["messages"][1]["content"] == [{"type": "text", "text": "answer"}]


def test_messages_upstream_redacted_thinking_round_trips_on_conversion():
    resp = anthropic_messages.parse_message({"id": "msg_1", "model": "c", "role": "assistant", "content": [
        {"type": "thinking", "thinking": "t", "signature": "s1"}, {"type": "redacted_thinking", "data": "opaque=="},
        {"type": "text", "text": "hi"}], "stop_reason": "end_turn", "usage": {"input_tokens": 1, "output_tokens": 1}})
    req = ChatRequest("m", [Message("user", [TextPart("q")]), Message("assistant", list(resp.parts)),
                            Message("user", [TextPart("more")])])
    assert anthropic_messages.messages_body(req, "c")["messages"][1]["content"] == [
        {"type": "thinking", "thinking": "t", "signature": "s1"}, {"type": "redacted_thinking", "data": "opaque=="},
        {"type": "text", "text": "hi"}]


def stream_frames(blocks: list[dict]) -> bytes:
    frames = [event("messageStart", {"role": "assistant"})]
    for index, block in enumerate(blocks):
        if "reasoningContent" in block and "redactedContent" in block["reasoningContent"]:
            deltas = [{"reasoningContent": {"redactedContent": block["reasoningContent"]["redactedContent"]}}]
        elif "reasoningContent" in block:
            text = block["reasoningContent"]["reasoningText"]
            deltas = [{"reasoningContent": {"text": text["text"][:5]}}, {"reasoningContent": {"text": text["text"][5:]}},
                      {"reasoningContent": {"signature": text["signature"]}}]
        else:
            deltas = [{"text": block["text"]}]
        frames += [event("contentBlockDelta", {"contentBlockIndex": index, "delta": d}) for d in deltas]
        frames.append(event("contentBlockStop", {"contentBlockIndex": index}))
    frames += [event("messageStop", {"stopReason": "end_turn"}),
               event("metadata", {"usage": {"inputTokens": 3, "outputTokens": 4, "totalTokens": 7}})]
    return b"".join(frames)


def client_stream_blocks(sse_bytes: bytes) -> list[dict]:
    """The content blocks a messages client assembles from a stream, as the vendor SDK does."""
    blocks: dict[int, dict] = {}
    for frame in SSEParser().feed(sse_bytes):
        data = orjson.loads(frame.data)
        if data["type"] == "content_block_start":
            blocks[data["index"]] = dict(data["content_block"])
        elif data["type"] == "content_block_delta":
            block, delta = blocks[data["index"]], data["delta"]
            if delta["type"] == "thinking_delta":
                block["thinking"] += delta["thinking"]
            elif delta["type"] == "signature_delta":
                block["signature"] += delta["signature"]
            elif delta["type"] == "text_delta":
                block["text"] += delta["text"]
    return [blocks[i] for i in sorted(blocks)]


def test_bedrock_stream_reasoning_reaches_a_messages_client_with_signature_delta_and_redacted_block():
    events = decode_stream(BedrockAdapter().stream_decoder(), stream_frames([SIGNED, REDACTED, {"text": "Four."}]))
    assert ThinkingDelta("", redacted="UmVkYWN0ZWQ==") in events
    encoder = messages.MessagesStreamEncoder("claude")
    sse_bytes = b"".join(encoder.encode(e) for e in events)
    assert b'"type":"signature_delta","signature":"EqQBCkYIARgCIkBsig+/=="' in sse_bytes
    assert client_stream_blocks(sse_bytes) == [
        {"type": "thinking", "thinking": "Think: 2+2.", "signature": "EqQBCkYIARgCIkBsig+/=="},
        {"type": "redacted_thinking", "data": "UmVkYWN0ZWQ=="},
        {"type": "text", "text": "Four."}]


def test_two_redacted_blocks_in_a_row_stay_two_blocks():
    encoder = messages.MessagesStreamEncoder("claude")
    from modelgate.protocols.ir import StreamEnd, StreamStart
    sse_bytes = b"".join(encoder.encode(e) for e in [
        StreamStart("m1", ""), ThinkingDelta("", redacted="a"), ThinkingDelta("", redacted="b"), StreamEnd("stop")])
    assert client_stream_blocks(sse_bytes) == [{"type": "redacted_thinking", "data": "a"},
                                               {"type": "redacted_thinking", "data": "b"}]


# --- the client's thinking request ---------------------------------------------------------------


@pytest.mark.parametrize("thinking, expected", [
    ({"type": "enabled", "budget_tokens": 2048}, {"type": "enabled", "budget_tokens": 2048}),
    ({"type": "adaptive"}, {"type": "adaptive"}),
    ({"type": "disabled"}, {"type": "disabled"}),
])
def test_messages_thinking_reaches_bedrock_claude_natively(thinking, expected):
    # Claude 4.6 takes every kind of thinking request (test_claude_generations: the others)
    model = "anthropic.claude-sonnet-4-6"
    ir = messages.to_ir(agent_request(thinking=thinking))
    options = {"additional_model_request_fields": {"thinking": {"type": "enabled", "budget_tokens": 1024}}}
    sent = adapter_body("aws-bedrock", ir, model=model, key="AKID:secret", options=options)
    assert sent["additionalModelRequestFields"]["thinking"] == expected  # the client's request wins
    assert converse_problems(sent, model) == ""


def test_without_a_client_request_the_provider_option_thinking_stays():
    options = {"additional_model_request_fields": {"thinking": {"type": "enabled", "budget_tokens": 1024}}}
    sent = adapter_body("aws-bedrock", messages.to_ir(agent_request()), model=CLAUDE, key="A:B", options=options)
    assert sent["additionalModelRequestFields"] == options["additional_model_request_fields"]


def test_thinking_of_a_messages_client_reaches_claude_on_vertex():
    body = anthropic_messages.messages_body(messages.to_ir(agent_request(
        thinking={"type": "enabled", "budget_tokens": 3000})), "claude-sonnet-4@20250514")
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 3000}
    assert body["system"][1]["cache_control"] == EPHEMERAL


@pytest.mark.parametrize("request_fields, options, expected", [
    ({"thinking": {"type": "enabled", "budget_tokens": 2048}}, {}, {"thinkingBudget": 2048, "includeThoughts": True}),
    ({"thinking": {"type": "adaptive"}}, {}, {"thinkingBudget": -1, "includeThoughts": True}),
    ({"thinking": {"type": "disabled"}}, {"include_thoughts": True}, {"thinkingBudget": 0, "includeThoughts": True}),
    ({"output_config": {"effort": "low"}}, {"thinking_level": "high"}, {"thinkingBudget": 1024, "includeThoughts": True}),
    ({}, {"thinking_level": "high"}, {"thinkingLevel": "high"}),
    ({"thinking": {"type": "enabled", "budget_tokens": 5000}}, {"include_thoughts": False},
     {"thinkingBudget": 5000, "includeThoughts": False}),
])
def test_gemini_thinking_config_from_the_clients_request(request_fields, options, expected):
    from google.genai import types

    ir = messages.to_ir({"model": "m", "max_tokens": 100, "messages": [{"role": "user", "content": "q"}],
                         **request_fields})
    sent = adapter_body("gemini", ir, options=options)
    types.GenerationConfig.model_validate(sent["generationConfig"])
    assert sent["generationConfig"]["thinkingConfig"] == expected


def test_gemini_thinking_from_a_chat_clients_reasoning_effort():
    ir = ChatCodec().to_ir({"model": "m", "messages": [{"role": "user", "content": "q"}], "reasoning_effort": "medium"})
    assert gemini.build_body(ir)["generationConfig"]["thinkingConfig"] == {"thinkingBudget": 8192, "includeThoughts": True}
    ir.reasoning_effort = "none"
    assert gemini.build_body(ir)["generationConfig"]["thinkingConfig"] == {"thinkingBudget": 0}


def thinking_request(thinking: dict | None, stream: bool = False) -> ChatRequest:
    extra = {"thinking": thinking} if thinking else {}
    return messages.to_ir({"model": "m", "max_tokens": 100, "stream": stream, "messages": [{"role": "user", "content": "q"}],
                           **extra})


@pytest.mark.parametrize("kind", ["zhipu", "moonshot"])
@pytest.mark.parametrize("thinking, expected", [
    ({"type": "enabled", "budget_tokens": 2048}, {"type": "enabled"}),
    ({"type": "adaptive"}, {"type": "enabled"}),
    ({"type": "disabled"}, {"type": "disabled"}),
])
def test_zhipu_and_moonshot_thinking_switch(kind, thinking, expected):
    sent = adapter_body(kind, thinking_request(thinking), options={"thinking": {"type": "enabled"}})
    assert sent["thinking"] == expected


@pytest.mark.parametrize("kind", ["zhipu", "moonshot", "dashscope"])
def test_no_thinking_request_leaves_the_provider_default(kind):
    sent = adapter_body(kind, thinking_request(None))
    assert not {"thinking", "enable_thinking", "thinking_budget"} & set(sent)
    options = {"thinking": {"type": "disabled"}, "enable_thinking": False}
    sent = adapter_body(kind, thinking_request(None), options=options)
    expected = {"enable_thinking": False} if kind == "dashscope" else {"thinking": {"type": "disabled"}}
    assert {k: sent[k] for k in expected} == expected


@pytest.mark.parametrize("thinking, expected", [
    ({"type": "enabled", "budget_tokens": 2048}, {"enable_thinking": True, "thinking_budget": 2048}),
    ({"type": "adaptive"}, {"enable_thinking": True}),
    ({"type": "disabled"}, {"enable_thinking": False}),
])
def test_dashscope_thinking_switch(thinking, expected):
    sent = adapter_body("dashscope", thinking_request(thinking, stream=True))
    assert {k: sent[k] for k in ("enable_thinking", "thinking_budget") if k in sent} == expected


@pytest.mark.parametrize("options", [{}, {"enable_thinking": True, "thinking_budget": 4096}])
def test_dashscope_thinks_only_on_streams(options):
    # "parameter.enable_thinking must be set to false for non-streaming calls" (DashScope's error codes)
    sent = adapter_body("dashscope", thinking_request({"type": "enabled", "budget_tokens": 2048}), options=options)
    assert sent["enable_thinking"] is False and "thinking_budget" not in sent


def test_responses_effort_none_turns_zhipu_thinking_off():
    from modelgate.protocols.responses import ResponsesCodec

    ir = ResponsesCodec().to_ir({"model": "m", "input": "q", "reasoning": {"effort": "none"}})
    assert adapter_body("zhipu", ir)["thinking"] == {"type": "disabled"}


# --- finish and stop reasons: every SDK value mapped (Gemini's: test_provider_defects.py) --------------------------------------------


@pytest.mark.parametrize("finish, expected", [
    ("ESCALATION", "content_filter"), ("CONTINUATION", "length"),
    ("PUP_LIMITED_DISABLED", ErrorType.AUTHENTICATION_ERROR),
])
def test_newest_gemini_finish_reasons(finish, expected):
    from modelgate.errors import UpstreamError

    answer = orjson.dumps({"candidates": [{"content": {"role": "model", "parts": [{"text": "x"}]},
                                           "finishReason": finish}]})
    if isinstance(expected, ErrorType):
        with pytest.raises(UpstreamError) as caught:
            gemini.GeminiAdapter().parse_response(answer)
        assert caught.value.error_type is expected
    else:
        assert gemini.GeminiAdapter().parse_response(answer).stop_reason == expected


def test_every_bedrock_stop_reason_of_the_service_model_is_mapped():
    assert set(_CONVERSE.shape_for("StopReason").enum) - set(bedrock._STOP) == set()


def test_every_messages_stop_reason_of_the_vendor_sdk_is_mapped():
    from anthropic.types import StopReason

    assert set(typing.get_args(StopReason)) - set(messages.STOP_FROM_VENDOR) == set()


# --- end to end: the anthropic SDK through the gateway to Bedrock Claude -------------------------


@pytest.fixture
async def fake_bedrock():
    fake = await FakeBedrock(models=(CLAUDE,)).start()
    yield fake
    await fake.close()


async def call_log_rows(gateway) -> list[CallLog]:
    await gateway.runtime.writer.flush()
    async with gateway.runtime.db.session() as s:
        return list((await s.scalars(select(CallLog).order_by(CallLog.id))).all())


def sdk_request(history: list[dict]) -> dict:
    request = agent_request(thinking={"type": "enabled", "budget_tokens": 2048})
    request["messages"] = history
    return {k: v for k, v in request.items() if k != "model"}


@pytest.mark.parametrize("stream", [False, True])
async def test_claude_code_style_turns_through_bedrock_keep_cache_and_signed_thinking(gateway, fake_bedrock, stream):
    wired = await gateway.wire(fake_bedrock.base_url, [{"model_id": "claude", "upstream_model": CLAUDE}],
                               kind="aws-bedrock", upstream_keys=(fake_bedrock.api_key,), name="bedrock")
    client = AsyncAnthropic(base_url=f"{gateway.url}/alt", api_key=wired.key, max_retries=0)
    history: list[dict] = [{"role": "user", "content": [
        {"type": "text", "text": "List the files.", "cache_control": EPHEMERAL}]}]

    async def turn():
        if stream:
            async with client.messages.stream(model="claude", **sdk_request(history)) as s:
                return await s.get_final_message()
        return await client.messages.create(model="claude", **sdk_request(history))

    first = await turn()
    assert [b.type for b in first.content] == ["thinking", "redacted_thinking", "tool_use"]
    assert first.content[0].signature == fake_bedrock.issued[0]["reasoningContent"]["reasoningText"]["signature"]
    assert first.content[1].data == fake_bedrock.issued[1]["reasoningContent"]["redactedContent"]
    assert first.usage.cache_creation_input_tokens and not first.usage.cache_read_input_tokens
    sent = fake_bedrock.bodies[-1]
    assert sent["additionalModelRequestFields"]["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert sent["system"][-1] == {"cachePoint": {"type": "default"}}
    assert sent["toolConfig"]["tools"][-1] == {"cachePoint": {"type": "default", "ttl": "1h"}}

    # Claude Code sends the assistant turn back unchanged with the tool result; the fake refuses
    # any reasoning it did not issue, byte for byte.
    history += [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": first.content[2].id,
                                              "content": "a.py b.py"}]}]
    second = await turn()
    assert second.content[-1].type == "text" and "a.py b.py" in second.content[-1].text
    assert fake_bedrock.bodies[-1]["messages"][1]["content"][:2] == fake_bedrock.issued[:2]
    assert second.usage.cache_read_input_tokens

    rows = await call_log_rows(gateway)
    assert [(r.cache_write_tokens > 0, r.cache_read_tokens > 0) for r in rows] == [(True, False), (False, True)]
    assert rows[0].cache_write_tokens == first.usage.cache_creation_input_tokens
    assert rows[1].cache_read_tokens == second.usage.cache_read_input_tokens


async def test_automatic_caching_of_the_sdk_reaches_bedrock_as_a_cache_point(gateway, fake_bedrock):
    wired = await gateway.wire(fake_bedrock.base_url, [{"model_id": "claude", "upstream_model": CLAUDE}],
                               kind="aws-bedrock", upstream_keys=(fake_bedrock.api_key,), name="bedrock")
    client = AsyncAnthropic(base_url=f"{gateway.url}/alt", api_key=wired.key, max_retries=0)
    await client.messages.create(model="claude", max_tokens=100, cache_control={"type": "ephemeral"},
                                 system="You are a coding agent.",
                                 messages=[{"role": "user", "content": "List the files."}])
    sent = fake_bedrock.bodies[-1]
    assert converse_problems(sent) == ""
    assert sent["messages"][-1]["content"] == [{"text": "List the files."}, {"cachePoint": {"type": "default"}}]
    assert sent["system"] == [{"text": "You are a coding agent."}]


async def test_openai_sdk_cache_control_parts_reach_an_anthropic_upstream(gateway, anthropic_upstream):
    wired = await gateway.wire(anthropic_upstream.base_url, ["claude-haiku-4-5"], kind="anthropic",
                               upstream_keys=(API_KEY,), name="claude")
    client = AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=wired.key, max_retries=0)
    await client.chat.completions.create(model="claude-haiku-4-5", max_tokens=50, messages=[
        {"role": "system", "content": [{"type": "text", "text": "long rules", "cache_control": EPHEMERAL}]},  # type: ignore[typeddict-unknown-key]
        {"role": "user", "content": "hello"}])
    sent = anthropic_upstream.last.json()
    assert sent["system"] == [{"type": "text", "text": "long rules", "cache_control": EPHEMERAL}]


def test_tool_call_cache_mark_on_bedrock():
    req = ChatRequest("m", [Message("user", [TextPart("q")]),
                            Message("assistant", [ToolCall("t1", "Bash", "{}", cache="5m")]),
                            Message("tool", [ToolResult("t1", [TextPart("ok")])])],
                      tools=[Tool("Bash", None, SCHEMA)])
    sent = adapter_body("aws-bedrock", req, model=CLAUDE, key="A:B")
    assert [next(iter(b)) for b in sent["messages"][1]["content"]] == ["toolUse", "cachePoint"]
    assert converse_problems(sent) == ""


def test_messages_upstream_stream_redacted_thinking_reaches_the_ir():
    frames = b"".join(messages.sse_frame(name, data) for name, data in [
        ("message_start", {"type": "message_start", "message": {"id": "msg_1", "model": "c", "usage": {"input_tokens": 1}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "redacted_thinking", "data": "opaque=="}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}}),
        ("message_stop", {"type": "message_stop"})])
    events = decode_stream(anthropic_messages.AnthropicStreamDecoder(), frames)
    assert ThinkingDelta("", redacted="opaque==") in events


def test_responses_clients_get_no_empty_item_for_redacted_thinking():
    from modelgate.protocols.ir import ChatResponse
    from modelgate.protocols.responses.encode import output_items

    items = output_items(ChatResponse("r", "m", [ThinkingPart("", redacted="opaque=="), TextPart("hi")], "stop"))
    assert [item["type"] for item in items] == ["message"]
