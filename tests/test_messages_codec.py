"""The messages-protocol codec: validation, IR decoding, response and stream encoding."""

from __future__ import annotations

import random
from typing import Any

import httpx2 as httpx  # the anthropic SDK is built on httpx2
import orjson
import pytest
from anthropic import Anthropic
from hypothesis import given, settings
from hypothesis import strategies as st

from modelgate.errors import ClientProtocol, GatewayError, Shape, error_body
from modelgate.protocols import sse
from modelgate.protocols.ir import (
    ChatResponse,
    ImagePart,
    StreamEnd,
    StreamError,
    StreamStart,
    TextDelta,
    TextPart,
    ThinkingDelta,
    ThinkingPart,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    ToolResult,
    Usage,
    UsageUpdate,
)
from modelgate.protocols.messages import MessagesCodec

codec = MessagesCodec()


def body(**extra: Any) -> dict[str, Any]:
    return {"model": "claude-x", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}], **extra}


def frames(data: bytes) -> list[tuple[str, dict[str, Any]]]:
    parser = sse.SSEParser()
    return [(e.event or "", orjson.loads(e.data)) for e in parser.feed(data)]


# --- validation -------------------------------------------------------------------


def test_minimal_body_is_valid():
    assert codec.validate(body()) == ("claude-x", False)
    assert codec.validate(body(stream=True)) == ("claude-x", True)
    assert codec.protocol is ClientProtocol.MESSAGES
    assert codec.native_wire == "anthropic-messages"


def test_full_featured_body_is_valid():
    b = body(
        system=[{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}],
        messages=[
            {"role": "user", "content": [
                {"type": "text", "text": "look", "cache_control": {"type": "ephemeral"}},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
                {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}},
            ]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "s"},
                {"type": "redacted_thinking", "data": "xx"},
                {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "ok"}],
                 "is_error": False},
                {"type": "search_result", "source": "x", "title": "t", "content": []},  # newer vendor block
            ]},
            {"role": "assistant", "content": ""},  # empty final prefill is allowed
        ],
        temperature=0.5, top_p=0.9, top_k=5, stop_sequences=["END"],
        tools=[{"name": "f", "description": "d", "input_schema": {"type": "object"}},
               {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}],
        tool_choice={"type": "auto", "disable_parallel_tool_use": True},
        metadata={"user_id": "u1"},
        thinking={"type": "enabled", "budget_tokens": 1024},
    )
    assert codec.validate(b) == ("claude-x", False)


BAD = [
    ([], "JSON object"),
    ({"max_tokens": 1, "messages": [{"role": "user", "content": "x"}]}, "model"),
    (body(model=3), "model"),
    ({"model": "m", "max_tokens": 1}, "messages"),
    (body(messages=[]), "messages"),
    (body(messages=[{"role": "system", "content": "x"}]), "messages.0.role"),
    (body(messages=[{"role": "user", "content": 5}]), "messages.0.content"),
    (body(messages=[{"role": "user", "content": [{"text": "x"}]}]), "messages.0.content.0"),
    (body(messages=[{"role": "user", "content": [{"type": "text", "text": 1}]}]), "messages.0.content.0.text"),
    (body(messages=[{"role": "user", "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {}}]}]),
     "tool_use"),
    (body(messages=[{"role": "user", "content": "q"},
                    {"role": "assistant", "content": [{"type": "tool_result", "tool_use_id": "a"}]}]),
     "tool_result"),
    (body(messages=[{"role": "user", "content": [{"type": "image", "source": {"type": "file", "file_id": "f"}}]}]),
     "source.type"),
    (body(messages=[{"role": "user", "content": [{"type": "image", "source": {"type": "base64", "data": "x"}}]}]),
     "media_type"),
    (body(messages=[{"role": "user", "content": ""}, {"role": "assistant", "content": "a"}]), "non-empty"),
    ({"model": "m", "messages": [{"role": "user", "content": "x"}]}, "max_tokens: Field required"),
    (body(max_tokens=0), "max_tokens"),
    (body(max_tokens="10"), "max_tokens"),
    (body(max_tokens=True), "max_tokens"),
    (body(system=5), "system"),
    (body(system=[{"type": "image"}]), "system.0"),
    (body(temperature="hot"), "temperature"),
    (body(top_k=1.5), "top_k"),
    (body(stop_sequences="END"), "stop_sequences"),
    (body(stop_sequences=["a", 1]), "stop_sequences"),
    (body(tools=[{"name": "f"}]), "tools.0.input_schema"),
    (body(tools={"name": "f"}), "tools"),
    (body(tool_choice="auto"), "tool_choice"),
    (body(tool_choice={"type": "required"}), "tool_choice.type"),
    (body(tool_choice={"type": "tool"}), "tool_choice.name"),
    (body(stream="yes"), "stream"),
    (body(metadata={"user_id": 7}), "metadata.user_id"),
]


@pytest.mark.parametrize(("bad", "needle"), BAD)
def test_invalid_bodies_are_400_in_messages_shape(bad, needle):
    with pytest.raises(GatewayError) as info:
        codec.validate(bad)
    err = info.value
    assert err.status == 400 and err.shape is Shape.VALIDATION
    assert needle in err.message
    assert orjson.loads(error_body(err, "t", codec.validation_body)) == {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": err.message},
    }


# --- decoding -----------------------------------------------------------------------


def test_to_ir_maps_every_field():
    ir = codec.to_ir(body(
        system="sys", temperature=0.2, top_p=0.8, top_k=3, stop_sequences=["A", "B"], stream=True,
        metadata={"user_id": "user-9"},
        tools=[{"name": "get", "description": "d", "input_schema": {"type": "object", "properties": {}}},
               {"type": "web_search_20250305", "name": "web_search"}],
        tool_choice={"type": "any", "disable_parallel_tool_use": True},
    ))
    assert ir.model == "claude-x" and ir.max_tokens == 100 and ir.stream is True
    assert ir.system == ["sys"]
    assert (ir.temperature, ir.top_p, ir.top_k) == (0.2, 0.8, 3)
    assert ir.stop == ["A", "B"]
    assert ir.user == "user-9"
    assert [t.name for t in ir.tools] == ["get"]  # the vendor's server tool has no IR form
    assert ir.tool_choice.mode == "required" and ir.tool_choice.parallel is False


@pytest.mark.parametrize(
    ("choice", "mode", "name", "parallel"),
    [
        ({"type": "auto"}, "auto", None, None),
        ({"type": "none"}, "none", None, None),
        ({"type": "any"}, "required", None, None),
        ({"type": "tool", "name": "f"}, "tool", "f", None),
        ({"type": "tool", "name": "f", "disable_parallel_tool_use": True}, "tool", "f", False),
    ],
)
def test_tool_choice_mapping(choice, mode, name, parallel):
    tc = codec.to_ir(body(tools=[{"name": "f", "input_schema": {"type": "object"}}], tool_choice=choice)).tool_choice
    assert (tc.mode, tc.name, tc.parallel) == (mode, name, parallel)


def test_system_blocks_become_a_list():
    ir = codec.to_ir(body(system=[{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]))
    assert ir.system == ["a", "b"]


def test_tool_results_split_into_tool_turns_in_order():
    ir = codec.to_ir(body(messages=[
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": [
            {"type": "text", "text": "checking"},
            {"type": "tool_use", "id": "t1", "name": "w", "input": {"city": "Paris", "n": [1, 2]}},
            {"type": "tool_use", "id": "t2", "name": "w", "input": {}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "sunny"},
            {"type": "tool_result", "tool_use_id": "t2", "is_error": True,
             "content": [{"type": "text", "text": "boom"},
                         {"type": "image", "source": {"type": "url", "url": "https://i/x.png"}}]},
            {"type": "text", "text": "thanks"},
        ]},
    ]))
    roles = [m.role for m in ir.messages]
    assert roles == ["user", "assistant", "tool", "user"]
    assistant = ir.messages[1].parts
    assert assistant[0] == TextPart("checking")
    assert assistant[1] == ToolCall("t1", "w", '{"city":"Paris","n":[1,2]}')
    assert orjson.loads(assistant[2].arguments) == {}
    assert ir.messages[2].parts == [
        ToolResult("t1", [TextPart("sunny")]),
        ToolResult("t2", [TextPart("boom"), ImagePart(url="https://i/x.png")], is_error=True),
    ]
    assert ir.messages[3].parts == [TextPart("thanks")]


def test_text_between_tool_results_keeps_order():
    ir = codec.to_ir(body(messages=[{"role": "user", "content": [
        {"type": "text", "text": "a"},
        {"type": "tool_result", "tool_use_id": "x", "content": "r"},
        {"type": "text", "text": "b"},
    ]}]))
    assert [m.role for m in ir.messages] == ["user", "tool", "user"]


def test_images_thinking_and_documents():
    ir = codec.to_ir(body(messages=[
        {"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "QUJD"}},
            {"type": "image", "source": {"type": "url", "url": "https://e/x.png"}},
            {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "doc text"}},
        ]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "think", "signature": "sig"},
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "text", "text": "answer"},
        ]},
        {"role": "user", "content": "more"},
        {"role": "assistant", "content": ""},
    ]))
    assert ir.messages[0].parts == [
        ImagePart(data="QUJD", media_type="image/jpeg"), ImagePart(url="https://e/x.png"), TextPart("doc text"),
    ]
    assert ir.messages[1].parts == [ThinkingPart("think", "sig"), ThinkingPart("", redacted="opaque"), TextPart("answer")]
    assert len(ir.messages) == 3  # the empty final prefill adds nothing


def test_pdf_document_cannot_be_converted():
    b = body(messages=[{"role": "user", "content": [
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBE"}}]}])
    codec.validate(b)
    with pytest.raises(GatewayError) as info:
        codec.to_ir(b)
    assert info.value.status == 400 and "document" in info.value.message


# --- non-streamed responses ------------------------------------------------------------


def test_encode_response_shape():
    resp = ChatResponse(
        id="chatcmpl-123", model="gpt-x",
        parts=[ThinkingPart("why"), TextPart("Hello"), TextPart(""), ToolCall("call_1", "f", '{"a": [1]}'),
               ToolCall("call_2", "g", "not json")],
        stop_reason="tool_calls",
        usage=Usage(input_tokens=120, output_tokens=7, cache_read_tokens=100),
    )
    out = orjson.loads(codec.encode_response(resp, "claude-alias"))
    assert out == {
        "id": "msg_chatcmpl-123",
        "type": "message",
        "role": "assistant",
        "model": "claude-alias",
        "content": [
            {"type": "thinking", "thinking": "why", "signature": ""},
            {"type": "text", "text": "Hello"},
            {"type": "tool_use", "id": "call_1", "name": "f", "input": {"a": [1]}},
            {"type": "tool_use", "id": "call_2", "name": "g", "input": {}},
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 20, "output_tokens": 7, "cache_read_input_tokens": 100},
    }


def test_encode_response_keeps_vendor_ids():
    resp = ChatResponse(id="msg_abc", model="m", parts=[TextPart("x")], stop_reason="stop_sequence",
                        stop_sequence="END", usage=Usage(3, 4))
    out = orjson.loads(codec.encode_response(resp, "m"))
    assert out["id"] == "msg_abc"
    assert (out["stop_reason"], out["stop_sequence"]) == ("stop_sequence", "END")
    assert out["usage"] == {"input_tokens": 3, "output_tokens": 4}


@pytest.mark.parametrize(
    ("ir", "vendor"),
    [("stop", "end_turn"), ("length", "max_tokens"), ("tool_calls", "tool_use"),
     ("stop_sequence", "stop_sequence"), ("content_filter", "refusal"), (None, "end_turn")],
)
def test_stop_reason_mapping(ir, vendor):
    resp = ChatResponse(id="", model="m", parts=[], stop_reason=ir)
    out = orjson.loads(codec.encode_response(resp, "m"))
    assert out["stop_reason"] == vendor
    assert out["id"].startswith("msg_") and len(out["id"]) > 4


# --- streams ----------------------------------------------------------------------------


def encode_all(events: list[Any], model: str = "claude-alias") -> bytes:
    enc = codec.stream_encoder(model, {})
    return b"".join(enc.encode(e) for e in events)


def check_well_formed(seq: list[tuple[str, dict[str, Any]]]) -> None:
    """The vendor's event grammar: one block open at a time, indexes counting up."""
    names = [n for n, _ in seq]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    open_index, next_index, open_type = None, 0, None
    for name, data in seq[1:-2]:
        assert data["type"] == name
        if name == "content_block_start":
            assert open_index is None and data["index"] == next_index
            open_index, open_type = data["index"], data["content_block"]["type"]
            next_index += 1
        elif name == "content_block_delta":
            assert data["index"] == open_index
            expected = {"text": {"text_delta"}, "tool_use": {"input_json_delta"},
                        "thinking": {"thinking_delta", "signature_delta"}}[open_type]
            assert data["delta"]["type"] in expected
        elif name == "content_block_stop":
            assert data["index"] == open_index
            open_index = None
    assert open_index is None


def test_text_stream_event_sequence():
    out = encode_all([
        StreamStart("chatcmpl-9", "gpt", Usage(input_tokens=11)),
        TextDelta("Hel"), TextDelta("lo"),
        StreamEnd("stop", None, Usage(11, 2)),
    ])
    seq = frames(out)
    check_well_formed(seq)
    assert out.startswith(b"event: message_start\ndata: {")
    start = seq[0][1]["message"]
    assert start["id"] == "msg_chatcmpl-9" and start["model"] == "claude-alias"
    assert start["usage"]["input_tokens"] == 11 and start["content"] == []
    assert [d["delta"]["text"] for n, d in seq if n == "content_block_delta"] == ["Hel", "lo"]
    assert seq[-2][1] == {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                          "usage": {"input_tokens": 11, "output_tokens": 2}}


def test_keepalive_and_errors():
    enc = codec.stream_encoder("m", {})
    assert enc.keepalive() == b'event: ping\ndata: {"type":"ping"}\n\n'
    out = enc.encode(StreamStart("x", "m")) + enc.encode(TextDelta("a"))
    out += enc.encode(StreamError("SERVICE_UNAVAILABLE", "upstream overloaded"))
    assert enc.encode(TextDelta("late")) == b""
    seq = frames(out)
    assert seq[-1] == ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "upstream overloaded"}})


@pytest.mark.parametrize(
    ("error_type", "vendor"),
    [("RATE_LIMIT_ERROR", "rate_limit_error"), ("SERVICE_UNAVAILABLE", "overloaded_error"),
     ("TIMEOUT_ERROR", "timeout_error"), ("NETWORK_ERROR", "api_error"), ("UPSTREAM_ERROR", "api_error"),
     ("QUOTA_EXCEEDED", "billing_error"), ("AUTHENTICATION_ERROR", "authentication_error")],
)
def test_stream_error_frame(error_type, vendor):
    assert frames(codec.native_stream_tap({}).error_event(error_type, "m")) == [
        ("error", {"type": "error", "error": {"type": vendor, "message": "m"}})
    ]


def test_chat_upstream_with_interleaved_parallel_tool_calls():
    """Text, then two tool calls whose argument fragments interleave, usage only at the end."""
    out = encode_all([
        StreamStart("chatcmpl-1", "gpt"),
        TextDelta("Let me check."),
        ToolCallStart(0, "call_a", "weather"),
        ToolCallDelta(0, '{"city": '),
        ToolCallStart(1, "call_b", "time"),
        ToolCallDelta(1, '{"tz": "UTC"}'),
        ToolCallDelta(0, '"Paris"}'),
        UsageUpdate(Usage(50, 20)),
        StreamEnd("tool_calls"),
    ])
    seq = frames(out)
    check_well_formed(seq)
    starts = [d["content_block"] for n, d in seq if n == "content_block_start"]
    assert starts == [
        {"type": "text", "text": ""},
        {"type": "tool_use", "id": "call_a", "name": "weather", "input": {}},
        {"type": "tool_use", "id": "call_b", "name": "time", "input": {}},
    ]
    assert seq[-2][1]["delta"]["stop_reason"] == "tool_use"
    assert seq[-2][1]["usage"] == {"input_tokens": 50, "output_tokens": 20}


def test_sequential_tool_calls_stream_without_waiting():
    enc = codec.stream_encoder("m", {})
    enc.encode(StreamStart("x", "m"))
    enc.encode(ToolCallStart(0, "a", "f"))
    enc.encode(ToolCallDelta(0, '{"x": 1}'))
    # The first call's JSON is complete, so the second block opens at once.
    out = enc.encode(ToolCallStart(1, "b", "g"))
    assert [n for n, _ in frames(out)] == ["content_block_stop", "content_block_start"]
    assert [n for n, _ in frames(enc.encode(ToolCallDelta(1, "{}")))] == ["content_block_delta"]


def sdk_final_message(sse_body: bytes):
    """Run the official SDK's stream helper over our bytes and return what it assembles."""

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=sse_body)

    client = Anthropic(api_key="k", base_url="http://gw/alt", http_client=httpx.Client(transport=httpx.MockTransport(handler)))
    with client.messages.stream(model="claude-alias", max_tokens=10, messages=[{"role": "user", "content": "x"}]) as s:
        text = "".join(s.text_stream)
        return text, s.get_final_message()


def test_sdk_assembles_the_converted_stream():
    text, msg = sdk_final_message(encode_all([
        StreamStart("chatcmpl-1", "gpt"),
        ThinkingDelta("pondering"),
        TextDelta("Hi "), TextDelta("there"),
        ToolCallStart(0, "call_a", "weather"), ToolCallDelta(0, '{"ci'), ToolCallDelta(0, 'ty": "Oslo"}'),
        ToolCallStart(1, "call_b", "noargs"),
        StreamEnd("tool_calls", None, Usage(40, 9, cache_read_tokens=30)),
    ]))
    assert text == "Hi there"
    assert msg.id == "msg_chatcmpl-1" and msg.model == "claude-alias"
    assert [b.type for b in msg.content] == ["thinking", "text", "tool_use", "tool_use"]
    assert msg.content[0].thinking == "pondering"
    assert msg.content[2].input == {"city": "Oslo"} and msg.content[2].id == "call_a"
    assert msg.content[3].input == {} and msg.content[3].name == "noargs"
    assert msg.stop_reason == "tool_use"
    assert (msg.usage.input_tokens, msg.usage.output_tokens, msg.usage.cache_read_input_tokens) == (10, 9, 30)


@st.composite
def interleaved_stream(draw):
    """A chat-style stream: text pieces and N tool calls, argument fragments interleaved at random."""
    n_tools = draw(st.integers(0, 4))
    args = [
        orjson.dumps(draw(st.dictionaries(st.text("abcxyz", min_size=1, max_size=4),
                                          st.one_of(st.integers(-1000, 1000), st.text(max_size=5)), max_size=3))).decode()
        for _ in range(n_tools)
    ]
    rng = random.Random(draw(st.integers(0, 10_000)))
    queues: list[list[Any]] = []
    for i, a in enumerate(args):
        cuts = sorted(rng.sample(range(1, len(a)), min(len(a) - 1, rng.randint(0, 3)))) if len(a) > 1 else []
        pieces = [a[x:y] for x, y in zip([0, *cuts], [*cuts, len(a)])]
        queues.append([ToolCallStart(i, f"call_{i}", f"tool_{i}")] + [ToolCallDelta(i, p) for p in pieces])
    texts = draw(st.lists(st.text(min_size=1, max_size=6), max_size=5))
    queues.append([TextDelta(t) for t in texts])
    events: list[Any] = []
    started: set[int] = set()
    while any(queues):
        # Tool calls start in index order, as chat upstreams send them.
        ready = [q for q in queues if q and (not isinstance(q[0], ToolCallStart) or q[0].index == len(started))]
        q = rng.choice(ready)
        ev = q.pop(0)
        if isinstance(ev, ToolCallStart):
            started.add(ev.index)
        events.append(ev)
    return events, args, "".join(texts)


@settings(max_examples=150, deadline=None)
@given(interleaved_stream())
def test_any_interleaving_becomes_a_well_formed_vendor_stream(case):
    events, args, text = case
    out = encode_all([StreamStart("id", "m"), *events, StreamEnd("tool_calls" if args else "stop", None, Usage(1, 2))])
    seq = frames(out)
    check_well_formed(seq)
    # Reassemble per block: every tool call's arguments and all text survive exactly.
    blocks: dict[int, dict[str, Any]] = {}
    for name, data in seq:
        if name == "content_block_start":
            blocks[data["index"]] = dict(data["content_block"], buf="")
        elif name == "content_block_delta":
            d = data["delta"]
            blocks[data["index"]]["buf"] += d.get("text", d.get("partial_json", ""))
    tools = [b for b in blocks.values() if b["type"] == "tool_use"]
    assert [t["id"] for t in tools] == [f"call_{i}" for i in range(len(args))]
    assert [t["buf"] for t in tools] == args
    assert "".join(b["buf"] for b in blocks.values() if b["type"] == "text") == text


# --- native pass-through ------------------------------------------------------------------

VENDOR_STREAM = (
    b'event: message_start\ndata: {"type": "message_start", "message": {"id": "msg_1", "type": "message", '
    b'"role": "assistant", "content": [], "model": "claude-x", "stop_reason": null, "stop_sequence": null, '
    b'"usage": {"input_tokens": 25, "cache_read_input_tokens": 5, "output_tokens": 1}}}\n\n'
    b'event: ping\ndata: {"type": "ping"}\n\n'
    b'event: content_block_start\ndata: {"type": "content_block_start", "index": 0, '
    b'"content_block": {"type": "text", "text": ""}}\n\n'
    b'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 0, '
    b'"delta": {"type": "text_delta", "text": "Hi"}}\n\n'
    b'event: content_block_stop\ndata: {"type": "content_block_stop", "index": 0}\n\n'
    b'event: message_delta\ndata: {"type": "message_delta", "delta": {"stop_reason": "end_turn", '
    b'"stop_sequence": null}, "usage": {"output_tokens": 15}}\n\n'
    b'event: message_stop\ndata: {"type": "message_stop"}\n\n'
)


@pytest.mark.parametrize("seed", range(5))
def test_native_tap_reads_usage_without_touching_bytes(seed):
    tap = codec.native_stream_tap({})
    rng = random.Random(seed)
    forwarded, i = b"", 0
    while i < len(VENDOR_STREAM):
        n = rng.randint(1, 40)
        chunk = VENDOR_STREAM[i : i + n]
        i += n
        forwarded += tap.filter(chunk)
        if i < len(VENDOR_STREAM) - 10:
            assert not tap.finished
    assert forwarded == VENDOR_STREAM
    assert tap.finished
    assert tap.usage == Usage(input_tokens=30, output_tokens=15, cache_read_tokens=5)


def test_native_tap_drops_sse_comments_and_keeps_pings():
    """A proxy's `: keep-alive` comments never reach a messages client (its keep-alive is `ping`,
    which the relay sends on every route); the upstream's own pings pass, and neither is progress."""
    ping = b'event: ping\ndata: {"type": "ping"}\n\n'
    start_end = VENDOR_STREAM.index(b"event: content_block_start")
    stream = VENDOR_STREAM[:start_end] + b": keep-alive\n\n" + ping + b":\n\n" + VENDOR_STREAM[start_end:]
    tap = codec.native_stream_tap({})
    first = tap.filter(stream[:start_end])
    events = tap.events
    assert tap.filter(stream[start_end:start_end + len(b": keep-alive\n\n") + len(ping) + 3]) == ping
    assert tap.events == events  # keep-alives are no progress for the stall limit
    assert first + ping + tap.filter(stream[start_end + len(b": keep-alive\n\n") + len(ping) + 3:]) == (
        VENDOR_STREAM[:start_end] + ping + VENDOR_STREAM[start_end:])
    assert codec.keepalive() == b'event: ping\ndata: {"type":"ping"}\n\n'


def test_native_tap_without_message_stop_is_not_finished():
    tap = codec.native_stream_tap({})
    tap.filter(VENDOR_STREAM[: VENDOR_STREAM.index(b"event: message_stop")])
    assert not tap.finished and tap.usage.output_tokens == 15


def test_native_usage():
    usage = codec.native_usage({"usage": {"input_tokens": 10, "output_tokens": 3,
                                          "cache_creation_input_tokens": 4, "cache_read_input_tokens": 6}})
    assert usage == Usage(input_tokens=20, output_tokens=3, cache_read_tokens=6, cache_write_tokens=4)
    assert codec.native_usage({}) == Usage()


@pytest.mark.parametrize("seed", range(5))
def test_native_tap_sets_the_clients_model_in_message_start_only(seed):
    """Issue 10 item 8: the vendor's snapshot name never reaches the client, whatever the chunking."""
    stream = VENDOR_STREAM.replace(b'"model": "claude-x"', b'"model": "claude-x-20250101"', 1)
    stream = stream.replace(b'"text": "Hi"', b'"text": "\\"model\\": \\"keep\\""', 1)
    assert stream.count(b"claude-x-20250101") == 1 and b'\\"model\\"' in stream
    tap = codec.native_stream_tap({"model": "team-model"})
    rng = random.Random(seed)
    forwarded, i = b"", 0
    while i < len(stream):
        n = rng.randint(1, 40)
        forwarded += tap.filter(stream[i : i + n])
        i += n
    assert forwarded == stream.replace(b'"model": "claude-x-20250101"', b'"model":"team-model"')
    assert tap.finished and tap.usage.output_tokens == 15


def test_system_entries_under_the_beta_decode_in_place_and_hoist_for_other_wires():
    beta = {b"anthropic-beta": b"claude-code-20250219, mid-conversation-system-2026-04-07"}
    messages = [{"role": "user", "content": "a"}, {"role": "system", "content": "note"},
                {"role": "user", "content": "b"}]
    assert codec.validate(body(messages=messages), beta) == ("claude-x", False)
    for headers in (None, {b"anthropic-beta": b"mid-conversation-system-clear-at-2026-08-21"}):
        with pytest.raises(GatewayError):
            codec.validate(body(messages=messages), headers)
    ir = codec.to_ir(body(messages=messages, system="top"))
    assert [m.role for m in ir.messages] == ["user", "system", "user"]
    hoisted = ir.with_system_hoisted()
    assert hoisted.system == ["top", "note"] and [m.role for m in hoisted.messages] == ["user", "user"]
    assert ir.system == ["top"]  # the original is left as it was


PDF = {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}}


@pytest.mark.parametrize(("messages", "where"), [
    ([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"},
      {"role": "user", "content": [{"type": "text", "text": "read"}, PDF]}], "messages.2.content.1"),
    ([{"role": "user", "content": "hi"},
      {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                     "content": [{"type": "text", "text": "x"}, PDF]}]}], "messages.2.content.0.content.1"),
])
def test_a_pdf_for_another_protocol_is_refused_with_its_place(messages, where):
    # Chat completions has no form for it: the client learns which block to change.
    with pytest.raises(GatewayError) as info:
        codec.to_ir(body(messages=messages))
    assert info.value.status == 400
    assert info.value.message == (f"{where}: document blocks other than plain text need a model served over "
                                  "the messages protocol")
