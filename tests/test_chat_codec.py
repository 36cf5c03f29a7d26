"""The chat-completions codec and wire adapter, without I/O."""

from __future__ import annotations

import orjson
from hypothesis import given
from hypothesis import strategies as st

from modelgate.protocols.chat import ChatCodec
from modelgate.protocols.ir import (
    StreamEnd,
    StreamStart,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallStart,
    Usage,
    UsageUpdate,
)
from modelgate.providers.base import Endpoint
from modelgate.providers.openai_chat import OpenAIChatAdapter, request_body
from tests.fakes.upstream_base import decode_stream

codec = ChatCodec()
ENDPOINT = Endpoint("p1:k1", 1, 1, "openai", "https://api.example.test/v1", "up-key")


def frames(body: bytes) -> list[dict]:
    out = []
    for block in body.decode().split("\n\n"):
        if block.startswith("data: ") and block != "data: [DONE]":
            out.append(orjson.loads(block[6:]))
    return out


def test_stream_decoder_reads_usage_inside_the_choice():
    chunk = {"id": "c1", "model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop",
                                                     "usage": {"prompt_tokens": 4, "completion_tokens": 9}}]}
    body = b"data: " + orjson.dumps(chunk) + b"\n\ndata: [DONE]\n\n"
    events = decode_stream(OpenAIChatAdapter().stream_decoder(), body)
    assert events[-1] == StreamEnd("stop", None, Usage(4, 9))


def test_stream_tap_reads_usage_and_hides_the_chunk_the_client_did_not_ask_for():
    usage_chunk = b'data: {"id":"c","choices":[],"usage":{"prompt_tokens":2,"completion_tokens":3}}\n\n'
    text_chunk = b'data: {"id":"c","choices":[{"index":0,"delta":{"content":"hi"}}],"usage":null}\n\n'
    stream = text_chunk + usage_chunk + b"data: [DONE]\n\n"
    hidden = codec.native_stream_tap({})
    out = b"".join(hidden.filter(stream[i:i + 5]) for i in range(0, len(stream), 5))
    assert out == text_chunk + b"data: [DONE]\n\n"
    assert hidden.usage == Usage(2, 3) and hidden.finished
    shown = codec.native_stream_tap({"stream_options": {"include_usage": True}})
    assert shown.filter(stream) == stream


def test_stream_encoder_numbers_tool_calls_and_ends_with_usage_and_done():
    encoder = codec.stream_encoder("client-model", {"stream_options": {"include_usage": True}})
    out = b"".join(encoder.encode(e) for e in [
        StreamStart("msg_1", "up", Usage(input_tokens=7)), TextDelta("Hi"),
        ToolCallStart(0, "toolu_a", "f"), ToolCallDelta(0, '{"a":'), ToolCallDelta(0, "1}"),
        ToolCallStart(1, "toolu_b", "g"), UsageUpdate(Usage(output_tokens=5)), StreamEnd("tool_calls"),
    ])
    assert out.endswith(b"data: [DONE]\n\n")
    chunks = frames(out)
    assert {c["model"] for c in chunks} == {"client-model"}
    calls = [tc for c in chunks if c["choices"] for tc in c["choices"][0]["delta"].get("tool_calls", [])]
    assert [(tc["index"], tc.get("id")) for tc in calls] == [(0, "toolu_a"), (0, None), (0, None), (1, "toolu_b")]
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == {
        "prompt_tokens": 7, "completion_tokens": 5, "total_tokens": 12}


def test_stream_encoder_sends_reasoning_text_and_nothing_for_a_bare_signature():
    encoder = codec.stream_encoder("m", {})
    out = b"".join(encoder.encode(e) for e in [
        StreamStart("msg_1", "up"), ThinkingDelta("why"), ThinkingDelta("", "sig"), TextDelta("Hi"), StreamEnd("stop"),
    ])
    deltas = [c["choices"][0]["delta"] for c in frames(out) if c["choices"]]
    assert [d["reasoning_content"] for d in deltas if "reasoning_content" in d] == ["why"]


texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=20)


@given(
    turns=st.lists(st.tuples(st.sampled_from(["user", "assistant"]), texts), min_size=1, max_size=8),
    system=st.lists(texts, max_size=2),
    stop=st.lists(texts, max_size=4),
    tool_names=st.lists(st.from_regex(r"[a-z_]{1,12}", fullmatch=True), max_size=5, unique=True),
)
def test_chat_body_to_ir_to_chat_body_keeps_messages_tools_and_stops(turns, system, stop, tool_names):
    body = {
        "model": "m",
        "messages": [{"role": "system", "content": s} for s in system] + [{"role": r, "content": t} for r, t in turns],
        "stop": stop,
        "tools": [{"type": "function", "function": {"name": n, "description": "d", "parameters": {"type": "object"}}}
                  for n in tool_names],
    }
    codec.validate(body)
    rebuilt = request_body(codec.to_ir(body), "upstream")
    assert rebuilt["messages"] == body["messages"]
    assert rebuilt.get("stop", []) == stop
    assert [t["function"]["name"] for t in rebuilt.get("tools", [])] == tool_names


@given(cuts=st.lists(st.integers(min_value=1, max_value=400), max_size=30), crlf=st.booleans(),
       wants_usage=st.booleans())
def test_stream_tap_output_does_not_depend_on_chunking(cuts, crlf, wants_usage):
    text = [b'data: {"id":"c","choices":[{"index":0,"delta":{"content":"%d"}}],"usage":null}\n\n' % i
            for i in range(5)]
    usage = b'data: {"id":"c","choices":[],"usage":{"prompt_tokens":2,"completion_tokens":3}}\n\n'
    stream = b"".join(text) + usage + b"data: [DONE]\n\n"
    expected = stream if wants_usage else b"".join(text) + b"data: [DONE]\n\n"
    if crlf:
        stream = stream.replace(b"\n", b"\r\n")
    tap = codec.native_stream_tap({"stream_options": {"include_usage": wants_usage}})
    out, position = b"", 0
    for cut in sorted(set(cuts)) + [len(stream)]:
        out += tap.filter(stream[position:cut])
        position = max(position, cut)
    assert out == expected and tap.usage == Usage(2, 3) and tap.finished


def test_text_part_arrays_decode_into_text_parts_on_every_role():
    from modelgate.protocols.ir import TextPart, ToolCall, ToolResult

    parts = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    body = {"model": "m", "messages": [
        {"role": "developer", "content": parts},
        {"role": "user", "content": parts},
        {"role": "assistant", "content": parts,
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": parts},
    ]}
    codec.validate(body)
    ir = codec.to_ir(body)
    assert ir.system == ["a", "b"]
    assert [m.role for m in ir.messages] == ["user", "assistant", "tool"]
    assert ir.messages[0].parts == [TextPart("a"), TextPart("b")]
    assert ir.messages[1].parts == [TextPart("a"), TextPart("b"), ToolCall("c1", "f", "{}")]
    assert ir.messages[2].parts == [ToolResult("c1", [TextPart("a"), TextPart("b")])]


def test_bare_tool_name_choice_is_rewritten_in_the_body():
    from modelgate.protocols.ir import ToolChoice

    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": [tool], "tool_choice": "f"}
    codec.validate(body)
    assert body["tool_choice"] == {"type": "function", "function": {"name": "f"}}
    assert codec.to_ir(body).tool_choice == ToolChoice("tool", "f")
