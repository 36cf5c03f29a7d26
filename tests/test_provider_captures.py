"""Stream decoders fed real recorded provider traffic (tests/captures, each file names its source),
and what a client does next with it."""

from __future__ import annotations

from pathlib import Path

import orjson

from modelgate.protocols.ir import (
    ChatRequest,
    ChatResponse,
    Message,
    StreamEnd,
    TextDelta,
    TextPart,
    ThinkingDelta,
    ThinkingPart,
    Tool,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    ToolResult,
)
from modelgate.protocols.messages import MessagesCodec
from modelgate.providers.gemini import SKIP_SIGNATURE, GeminiAdapter, build_body
from tests.fakes.upstream_base import decode_stream

CAPTURES = Path(__file__).parent / "captures"
# The signature Gemini gave its function call in gemini_stream_function_call.sse
RECORDED_SIGNATURE = orjson.loads(
    (CAPTURES / "gemini_stream_function_call.sse").read_text().split("data: ", 1)[1]
)["candidates"][0]["content"]["parts"][0]["thoughtSignature"]


def test_gemini_function_call_stream_keeps_the_thought_signature():
    events = decode_stream(GeminiAdapter().stream_decoder(), (CAPTURES / "gemini_stream_function_call.sse").read_bytes())
    signatures = [e.signature for e in events if isinstance(e, ThinkingDelta)]
    assert signatures == ["gemini:" + RECORDED_SIGNATURE]
    start = next(e for e in events if isinstance(e, ToolCallStart))
    assert start.name == "getWeather"
    args = "".join(e.arguments for e in events if isinstance(e, ToolCallDelta))
    assert orjson.loads(args) == {"location": "Tokyo"}
    end = events[-1]
    assert isinstance(end, StreamEnd) and end.stop_reason == "tool_calls"
    assert (end.usage.input_tokens, end.usage.output_tokens) == (83, 14 + 104)  # thoughts count as output


def test_gemini_text_stream_capture():
    events = decode_stream(GeminiAdapter().stream_decoder(), (CAPTURES / "gemini_stream_text.sse").read_bytes(),
                           seed=3)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "今日の東京の天気は曇りで、気温は22度です。\n"
    assert isinstance(events[-1], StreamEnd) and events[-1].stop_reason == "stop"
    assert events[-1].usage.input_tokens == 138 and events[-1].usage.output_tokens == 15


def _second_turn(assistant_parts: list) -> ChatRequest:
    return ChatRequest(
        model="gemini-2.5-flash",
        messages=[Message("user", [TextPart("今日の東京の天気を教えて")]),
                  Message("assistant", assistant_parts),
                  Message("tool", [ToolResult(assistant_parts[-1].id, [TextPart('{"temperature": 22}')])])],
        tools=[Tool("getWeather", "weather", {"type": "object", "properties": {"location": {"type": "string"}}})],
    )


def test_gemini_signature_is_replayed_on_the_next_turn_through_a_messages_client():
    # Gemini's answer (the recorded call) goes to a messages client...
    answer = ChatResponse(id="r", model="gemini-2.5-flash", stop_reason="tool_calls", parts=[
        ThinkingPart("", "gemini:" + RECORDED_SIGNATURE), ToolCall("call_1", "getWeather", '{"location":"Tokyo"}')])
    encoded = orjson.loads(MessagesCodec().encode_response(answer, "alias"))
    # ...which sends the assistant turn back as it got it, with the tool result.
    client_turn = {"model": "alias", "max_tokens": 100, "messages": [
        {"role": "user", "content": "今日の東京の天気を教えて"},
        {"role": "assistant", "content": encoded["content"]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "22"}]},
    ], "tools": [{"name": "getWeather", "input_schema": {"type": "object"}}]}
    body = build_body(MessagesCodec().to_ir(client_turn))
    call = next(p for c in body["contents"] for p in c["parts"] if "functionCall" in p)
    assert call["thoughtSignature"] == RECORDED_SIGNATURE


def test_calls_without_a_gemini_signature_get_the_documented_sentinel():
    body = build_body(_second_turn([ToolCall("toolu_1", "getWeather", '{"location":"Tokyo"}')]))
    call = next(p for c in body["contents"] for p in c["parts"] if "functionCall" in p)
    assert call["thoughtSignature"] == SKIP_SIGNATURE
    # a signature of another provider is not Gemini's
    body = build_body(_second_turn([ThinkingPart("x", "EqQBCkgIAxABGAIiQL-bedrock-or-claude"),
                                    ToolCall("toolu_1", "getWeather", "{}")]))
    call = next(p for c in body["contents"] for p in c["parts"] if "functionCall" in p)
    assert call["thoughtSignature"] == SKIP_SIGNATURE


def test_bedrock_does_not_replay_gemini_signatures():
    from modelgate.providers.bedrock import build_body as bedrock_body

    blocks = bedrock_body(_second_turn([ThinkingPart("", "gemini:" + RECORDED_SIGNATURE),
                                        ToolCall("toolu_1", "getWeather", "{}")]))["messages"][1]["content"]
    assert [next(iter(b)) for b in blocks] == ["toolUse"]
