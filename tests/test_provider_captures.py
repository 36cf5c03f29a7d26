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


def test_bedrock_converse_stream_capture():
    lines = (CAPTURES / "bedrock_converse_stream.hex").read_text().splitlines()
    raw = bytes.fromhex("".join(line.strip() for line in lines if not line.startswith("#")))
    from modelgate.providers.bedrock import BedrockAdapter

    events = decode_stream(BedrockAdapter().stream_decoder(), raw, seed=5)  # frames split anywhere
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == (
        "Hello! As an AI language model, I don't have feelings, but I'm functioning well and ready to "
        "assist you. How can I help you today?")
    end = events[-1]
    assert isinstance(end, StreamEnd) and end.stop_reason == "stop"
    assert (end.usage.input_tokens, end.usage.output_tokens) == (13, 35)


def test_azure_capture_through_the_chat_kinds_decoder():
    from modelgate.providers.registry import KINDS

    events = decode_stream(KINDS["azure-openai"].adapter.stream_decoder(), (CAPTURES / "azure_stream.sse").read_bytes(),
                           seed=11)
    assert events[0].id == "chatcmpl-E892Aoy89ODQ3TyvXXjI5UFYxqwFj"
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Hi! How"


# Ollama's own API reference (github.com/ollama/ollama docs/api.md, "Chat Request (Streaming)" and
# "Chat request (with tools)"): the first and the final object of a /api/chat stream as the server
# sends them, and a tool-call answer.
OLLAMA_STREAM = (
    b'{"model":"llama3.2","created_at":"2023-08-04T08:52:19.385406455-07:00","message":{"role":"assistant",'
    b'"content":"The","images":null},"done":false}\n'
    b'{"model":"llama3.2","created_at":"2023-08-04T19:22:45.499127Z","done":true,"total_duration":4883583458,'
    b'"load_duration":1334875,"prompt_eval_count":26,"prompt_eval_duration":342546000,"eval_count":282,'
    b'"eval_duration":4535599000}\n')
OLLAMA_TOOL_ANSWER = (
    b'{"model":"llama3.2","created_at":"2024-07-22T20:33:28.123648Z","message":{"role":"assistant","content":"",'
    b'"tool_calls":[{"function":{"name":"get_current_weather","arguments":{"format":"celsius",'
    b'"location":"Paris, FR"}}}]},"done_reason":"stop","done":true,"total_duration":885095291,'
    b'"load_duration":3753500,"prompt_eval_count":122,"prompt_eval_duration":328493000,"eval_count":33,'
    b'"eval_duration":552222000}')


def test_ollama_documented_stream_and_tool_answer():
    from modelgate.providers.ollama import OllamaAdapter

    events = decode_stream(OllamaAdapter().stream_decoder(), OLLAMA_STREAM, seed=2)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "The"
    end = events[-1]
    assert isinstance(end, StreamEnd) and end.stop_reason == "stop"
    assert (end.usage.input_tokens, end.usage.output_tokens) == (26, 282)
    resp = OllamaAdapter().parse_response(OLLAMA_TOOL_ANSWER)
    call = resp.parts[0]
    assert isinstance(call, ToolCall) and call.name == "get_current_weather"
    assert orjson.loads(call.arguments) == {"format": "celsius", "location": "Paris, FR"}
    assert resp.stop_reason == "tool_calls" and resp.usage.input_tokens == 122


def test_cohere_stream_capture_payloads():
    import cohere
    import pydantic

    from modelgate.providers.cohere import CohereAdapter

    lines = [line for line in (CAPTURES / "cohere_stream_payloads.jsonl").read_text().splitlines()
             if line and not line.startswith("#")]
    # The payloads are the SDK's own stream event types...
    for line in lines:
        pydantic.TypeAdapter(cohere.V2ChatStreamResponse).validate_json(line)
    # ...sent as the data of SSE events, the framing Cohere's v2 stream (and its SDK's reader) uses.
    body = b"".join(b"data: " + line.encode() + b"\n\n" for line in lines)
    events = decode_stream(CohereAdapter().stream_decoder(), body, seed=4)
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text.startswith("Coca-Cola is a carbonated soft drink") and text.endswith("companies in the world.")
    end = events[-1]
    assert isinstance(end, StreamEnd) and end.stop_reason == "stop"
    assert (end.usage.input_tokens, end.usage.output_tokens) == (21, 105)  # billed units
