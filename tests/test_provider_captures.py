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


# --- chat-completions kinds and the vendor's messages API (sources in captures/README.md) ------

def _chunks_as_sse(name: str) -> bytes:
    """Recorded chunk payloads (one JSON object a line, as the vercel/ai fixtures keep them)
    framed the way those providers send them: SSE data events, then `data: [DONE]`."""
    lines = [line for line in (CAPTURES / name).read_text().splitlines() if line.strip()]
    return b"".join(b"data: " + line.encode() + b"\n\n" for line in lines) + b"data: [DONE]\n\n"


def _kind_events(kind: str, body: bytes, seed: int) -> list:
    from modelgate.providers.registry import KINDS

    return decode_stream(KINDS[kind].adapter.stream_decoder(), body, seed=seed)


def _text(events: list) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def _thinking(events: list) -> str:
    return "".join(e.text for e in events if isinstance(e, ThinkingDelta))


def _calls(events: list) -> list[tuple[str, str, dict]]:
    starts = [e for e in events if isinstance(e, ToolCallStart)]
    return [(s.id, s.name, orjson.loads("".join(e.arguments for e in events
                                                if isinstance(e, ToolCallDelta) and e.index == s.index)))
            for s in starts]


def test_openai_chat_stream_capture_with_a_tool_call():
    # openai/openai-python .inline-snapshot/external/2018feb66ae1….bin, recorded from the API
    from modelgate.protocols.ir import StreamStart

    events = _kind_events("openai", (CAPTURES / "openai_chat_stream_tool_call.sse").read_bytes(), seed=7)
    assert isinstance(events[0], StreamStart)
    assert (events[0].id, events[0].model) == ("chatcmpl-ABfwERreu9s99xXsVuOWtIB2UOx62", "gpt-4o-2024-08-06")
    assert _calls(events) == [("call_4XzlGBLtUe9dy3GVNV4jhq7h", "get_weather", {"city": "New York City"})]
    assert _text(events) == ""
    end = events[-1]
    assert isinstance(end, StreamEnd) and end.stop_reason == "tool_calls"
    assert (end.usage.input_tokens, end.usage.output_tokens) == (44, 16)  # the usage chunk after the finish


def test_openai_chat_stream_capture_with_text_and_logprobs():
    # openai/openai-python .inline-snapshot/external/83b060bae42e….bin
    events = _kind_events("openai", (CAPTURES / "openai_chat_stream_text.sse").read_bytes(), seed=8)
    assert _text(events) == "Foo!"
    end = events[-1]
    assert isinstance(end, StreamEnd) and end.stop_reason == "stop"
    assert (end.usage.input_tokens, end.usage.output_tokens) == (9, 2)


def test_anthropic_messages_stream_capture_with_text_and_a_tool_use():
    # anthropics/anthropic-sdk-python tests/lib/streaming/fixtures/tool_use_response.txt
    from modelgate.protocols.ir import StreamStart

    events = _kind_events("anthropic", (CAPTURES / "anthropic_messages_stream_tool_use.sse").read_bytes(), seed=9)
    assert isinstance(events[0], StreamStart) and events[0].id == "msg_019Q1hrJbZG26Fb9BQhrkHEr"
    assert events[0].model == "claude-sonnet-4-20250514" and events[0].usage.input_tokens == 377
    assert _text(events) == "I'll check the current weather in Paris for you."
    assert _calls(events) == [("toolu_01NRLabsLyVHZPKxbKvkfSMn", "get_weather", {"location": "Paris"})]
    end = events[-1]
    assert isinstance(end, StreamEnd) and end.stop_reason == "tool_calls"
    assert (end.usage.input_tokens, end.usage.output_tokens) == (377, 65)


def test_deepseek_reasoner_stream_capture_reasoning_then_a_tool_call():
    # vercel/ai packages/deepseek/src/chat/__fixtures__/deepseek-tool-call.chunks.txt
    events = _kind_events("deepseek", _chunks_as_sse("deepseek_stream_reasoning_tool_call.jsonl"), seed=10)
    thinking = _thinking(events)
    assert thinking.startswith("The user is") and "weather" in thinking
    first_call = next(i for i, e in enumerate(events) if isinstance(e, ToolCallStart))
    assert all(not isinstance(e, ThinkingDelta) for e in events[first_call:]), "reasoning precedes the call"
    assert _calls(events) == [("call_00_ioIn7yN9p1ZOMNpDLwd4MgAF", "weather", {"location": "San Francisco"})]
    end = events[-1]
    assert isinstance(end, StreamEnd) and end.stop_reason == "tool_calls"
    # 320 of the 339 prompt tokens were read from DeepSeek's cache (prompt_cache_hit_tokens)
    assert (end.usage.input_tokens, end.usage.output_tokens, end.usage.cache_read_tokens) == (339, 83, 320)


def test_groq_stream_captures_tool_call_in_one_chunk_and_reasoning_field():
    # vercel/ai packages/groq/src/__fixtures__/groq-tool-call.chunks.txt, groq-reasoning.chunks.txt (excerpt)
    events = _kind_events("groq", _chunks_as_sse("groq_stream_tool_call.jsonl"), seed=11)
    # Groq sends id, name and the whole arguments in one chunk; usage on the finish chunk
    assert _calls(events) == [("tk85n1k4m", "weather", {})]
    end = events[-1]
    assert isinstance(end, StreamEnd) and end.stop_reason == "tool_calls"
    assert (end.usage.input_tokens, end.usage.output_tokens) == (210, 15)

    events = _kind_events("groq", _chunks_as_sse("groq_stream_reasoning_excerpt.jsonl"), seed=12)
    assert _thinking(events).startswith("Okay, let me")
    first_text = next(i for i, e in enumerate(events) if isinstance(e, TextDelta) and e.text)
    assert all(not isinstance(e, ThinkingDelta) for e in events[first_text:])
    assert _text(events).startswith("The word") and _text(events).endswith(" $\\boxed{3}$")
    end = events[-1]
    assert isinstance(end, StreamEnd) and end.stop_reason == "stop"
    assert (end.usage.input_tokens, end.usage.output_tokens) == (17, 1107)


def test_mistral_stream_captures_magistral_thinking_chunks_and_a_bare_tool_call():
    # vercel/ai packages/mistral/src/__fixtures__/mistral-reasoning.chunks.txt, mistral-tool-call.chunks.txt
    events = _kind_events("mistral", _chunks_as_sse("mistral_stream_magistral_thinking.jsonl"), seed=13)
    assert _thinking(events) == "The user is asking for 2+2. This is basic arithmetic. 2+2=4."
    assert _text(events) == "2 + 2 = 4"
    end = events[-1]
    assert isinstance(end, StreamEnd) and end.stop_reason == "stop"
    assert (end.usage.input_tokens, end.usage.output_tokens) == (10, 46)

    # Mistral's tool call has no `index` and no `type`, and comes with the finish reason
    events = _kind_events("mistral", _chunks_as_sse("mistral_stream_tool_call.jsonl"), seed=14)
    assert _calls(events) == [("gSIMJiOkT", "weather", {"location": "San Francisco"})]
    end = events[-1]
    assert isinstance(end, StreamEnd) and end.stop_reason == "tool_calls"
    assert (end.usage.input_tokens, end.usage.output_tokens) == (124, 22)


def test_openai_responses_stream_capture_through_the_pass_through_tap():
    # vercel/ai packages/openai/src/responses/__fixtures__/openai-phase.1.chunks.txt (gpt-5.3-codex)
    from modelgate.protocols.responses.tap import ResponsesStreamTap
    from tests.fakes.upstream_base import random_chunks

    events = [orjson.loads(line) for line in
              (CAPTURES / "openai_responses_stream_phase.jsonl").read_text().splitlines() if line.strip()]
    # framed as the Responses API sends its events: the type as the SSE event name
    body = b"".join(b"event: " + e["type"].encode() + b"\ndata: " + orjson.dumps(e) + b"\n\n" for e in events)
    tap = ResponsesStreamTap("client-alias")
    relayed = b"".join(tap.filter(chunk) for chunk in random_chunks(body, 15))
    assert tap.finished and tap.error is None and tap.events == len(events)
    usage = tap.usage
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens) == (7112, 463, 3072)
    out = [orjson.loads(block.split(b"data: ", 1)[1]) for block in relayed.split(b"\n\n") if block]
    assert len(out) == len(events)
    for sent, got in zip(events, out):
        if "response" in sent:  # the client sees the model it asked for, nothing else changes
            assert got["response"].pop("model") == "client-alias"
            sent["response"].pop("model")
        assert got == sent
