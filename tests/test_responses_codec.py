"""The Responses codec without I/O: decoding, the response object and the typed event stream,
checked against the official openai SDK's types (`openai.types.responses`) and its own stream
accumulator, plus Hypothesis properties as for the other codecs."""

from __future__ import annotations

import asyncio

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai import omit
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from modelgate.errors import GatewayError, Shape
from modelgate.protocols.ir import (
    vendor_signature,
    ChatResponse,
    ImagePart,
    Message,
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
    ToolChoice,
    ToolResult,
    Usage,
    UsageUpdate,
)
from modelgate.protocols.responses import ResponsesCodec
from modelgate.providers.openai_chat import request_body
from tests.fakes.upstream_base import random_chunks

codec = ResponsesCodec()
EVENT = TypeAdapter(ResponseStreamEvent)


def events_of(raw: bytes) -> list[dict]:
    out = []
    for block in raw.decode().split("\n\n"):
        lines = block.split("\n")
        if len(lines) == 2 and lines[0].startswith("event: ") and lines[1].startswith("data: "):
            data = orjson.loads(lines[1][6:])
            assert data["type"] == lines[0][7:]  # the SSE event name is the event's type
            out.append(data)
        else:
            assert not block.strip() or block.startswith(":"), block
    return out


def encode_all(ir_events, model: str = "client-model", body: dict | None = None) -> list[dict]:
    encoder = codec.stream_encoder(model, body or {"model": model, "input": "x"})
    return events_of(b"".join(encoder.encode(e) for e in ir_events))


def sdk_final(events: list[dict]) -> Response | None:
    """The response the official SDK assembles from the events (its `stream.get_final_response()`)."""
    state = ResponseStreamState(input_tools=omit, text_format=omit)
    final = None
    for data in events:
        for event in state.handle_event(EVENT.validate_python(data)):
            if event.type in ("response.completed", "response.incomplete"):
                final = event.response
    return final


# --- decoding ----------------------------------------------------------------------------------------


def test_a_codex_request_decodes_into_the_ir():
    body = {
        "model": "m", "instructions": "You are Codex.", "stream": True, "store": False,
        "tool_choice": "auto", "parallel_tool_calls": True, "reasoning": {"summary": "auto"},
        "include": ["reasoning.encrypted_content"], "prompt_cache_key": "s-1", "client_metadata": {"x": "y"},
        "tools": [{"type": "function", "name": "shell", "description": "run", "strict": False,
                   "parameters": {"type": "object", "properties": {"command": {"type": "array"}}}},
                  {"type": "web_search"}],
        "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "rules"}]},
            {"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "look"},
                {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "auto"}]},
            {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "plan"}],
             "encrypted_content": "sig"},
            {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "shell", "arguments": '{"command":["ls"]}'},
            {"type": "function_call_output", "call_id": "c1", "output": "a.txt"},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]},
            {"type": "web_search_call", "id": "ws_1", "status": "completed"},
        ],
    }
    assert codec.validate(body) == ("m", True)
    ir = codec.to_ir(body)
    assert ir.system == ["You are Codex.", "rules"]
    assert ir.messages == [
        Message("user", [TextPart("look"), ImagePart(url="data:image/png;base64,AAAA")]),
        # untagged encrypted_content is the Responses vendor's own: kept, marked as foreign reasoning
        Message("assistant", [ThinkingPart("plan", "openai:sig"), ToolCall("c1", "shell", '{"command":["ls"]}')]),
        Message("tool", [ToolResult("c1", [TextPart("a.txt")])]),
        Message("assistant", [TextPart("done")]),
    ]
    assert [t.name for t in ir.tools] == ["shell"]  # the hosted web search cannot run elsewhere
    assert ir.tool_choice == ToolChoice("auto", parallel=True) and ir.stream


@pytest.mark.parametrize(("choice", "expected", "tools"), [
    ("required", ToolChoice("required"), ["a", "b"]),
    ({"type": "function", "name": "b"}, ToolChoice("tool", "b"), ["a", "b"]),
    ({"type": "allowed_tools", "mode": "required", "tools": [{"type": "function", "name": "a"}]},
     ToolChoice("required"), ["a"]),
])
def test_tool_choice(choice, expected, tools):
    fn = [{"type": "function", "name": n, "parameters": {"type": "object"}} for n in ("a", "b")]
    body = {"model": "m", "input": "x", "tools": fn, "tool_choice": choice}
    codec.validate(body)
    ir = codec.to_ir(body)
    assert ir.tool_choice == expected and [t.name for t in ir.tools] == tools


def test_text_format_and_reasoning():
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    body = {"model": "m", "input": "x", "reasoning": {"effort": "high"},
            "text": {"format": {"type": "json_schema", "name": "out", "schema": schema, "strict": True}}}
    codec.validate(body)
    ir = codec.to_ir(body)
    assert ir.response_format == {"type": "json_schema", "json_schema": {"name": "out", "schema": schema, "strict": True}}
    assert ir.reasoning_effort == "high"


@pytest.mark.parametrize("body", [
    {"model": "m", "input": "x", "tool_choice": {"type": "web_search_preview"}},
    {"model": "m", "input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]},
    {"model": "m", "input": [{"role": "user", "content": [{"type": "input_image", "file_id": "f"}]}]},
    {"model": "m", "input": "x", "background": True},
])
def test_what_cannot_be_converted_is_a_400(body):
    codec.validate(body)
    with pytest.raises(GatewayError) as info:
        codec.to_ir(body)
    assert info.value.status == 400 and info.value.shape is Shape.VALIDATION


def test_validation_body_is_the_chat_shape():
    assert orjson.loads(codec.validation_body("bad")) == {
        "error": {"message": "bad", "type": "invalid_request_error", "code": "invalid_request"}}


# --- the response object -----------------------------------------------------------------------------


def test_non_streamed_response_is_a_valid_sdk_response():
    resp = ChatResponse("up-1", "upstream-name", [
        ThinkingPart("think", "sig-1"), TextPart("Hello"), TextPart(" world"), ToolCall("call_1", "f", ""),
    ], "tool_calls", usage=Usage(10, 5, cache_read_tokens=4))
    body = {"model": "client-model", "input": "x", "metadata": {"k": "v"}, "instructions": "i",
            "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}]}
    parsed = Response.model_validate(orjson.loads(codec.encode_response(resp, "client-model", body)))
    assert parsed.status == "completed" and parsed.model == "client-model" and parsed.output_text == "Hello world"
    reasoning, message, call = parsed.output
    assert reasoning.type == "reasoning" and reasoning.content[0].text == "think"
    assert reasoning.encrypted_content and "sig-1" in reasoning.encrypted_content  # opaque, tagged by the gateway
    assert message.type == "message" and call.type == "function_call" and call.arguments == "{}"
    assert (parsed.usage.input_tokens, parsed.usage.output_tokens, parsed.usage.total_tokens) == (10, 5, 15)
    assert parsed.usage.input_tokens_details.cached_tokens == 4
    assert parsed.usage.output_tokens_details.reasoning_tokens == 0
    assert (parsed.metadata, parsed.instructions) == ({"k": "v"}, "i")


def test_a_converted_call_keeps_every_field_the_response_echoes():
    # While its upstream works a converted call holds only the request's answer context.
    sent = {"model": "client-model", "input": [{"role": "user", "content": "x"}], "instructions": "i",
            "max_output_tokens": 9, "metadata": {"k": "v"}, "parallel_tool_calls": False, "prompt_cache_key": "p",
            "reasoning": {"effort": "low", "summary": "auto"}, "temperature": 0.3, "top_p": 0.8, "user": "u",
            "text": {"format": {"type": "json_object"}}, "tool_choice": {"type": "function", "name": "f"},
            "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}]}
    resp = ChatResponse("up-1", "upstream-name", [TextPart("Hello")], "stop", usage=Usage(1, 1))

    def answer(body):
        out = orjson.loads(codec.encode_response(resp, "client-model", body))
        return {k: v for k, v in out.items() if k not in ("id", "created_at", "output")}  # fresh ids

    assert answer(codec.answer_context(sent)) == answer(sent)
    assert answer(sent)["tools"] == sent["tools"] and answer(sent)["text"] == sent["text"]


@pytest.mark.parametrize(("stop", "reason"), [("length", "max_output_tokens"), ("content_filter", "content_filter")])
def test_an_early_stop_is_an_incomplete_response(stop, reason):
    resp = ChatResponse("u", "m", [TextPart("cut")], stop)
    parsed = Response.model_validate(orjson.loads(codec.encode_response(resp, "m", {"model": "m", "input": "x"})))
    assert parsed.status == "incomplete" and parsed.incomplete_details.reason == reason
    events = encode_all([StreamStart("u", "m"), TextDelta("cut"), StreamEnd(stop)])
    assert events[-1]["type"] == "response.incomplete"
    assert events[-1]["response"]["incomplete_details"] == {"reason": reason}


def test_reasoning_replayed_by_the_client_keeps_its_signature():
    resp = ChatResponse("u", "m", [ThinkingPart("why", "sig"), TextPart("because")], "stop")
    out = orjson.loads(codec.encode_response(resp, "m", {"model": "m", "input": "x"}))["output"]
    body = {"model": "m", "input": [{"role": "user", "content": "q"}, *out]}
    codec.validate(body)
    assert codec.to_ir(body).messages[1] == Message("assistant", [ThinkingPart("why", "sig"), TextPart("because")])


def test_the_responses_vendors_own_encrypted_reasoning_is_never_sent_to_another_vendor_as_a_signature():
    # A client replaying an answer passed through from the Responses vendor (its `encrypted_content`
    # only that vendor can read) whose call is then converted, e.g. failed over to a Claude channel.
    body = {"model": "m", "input": [
        {"role": "user", "content": "q"},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAAABo-openai-blob"},
        {"role": "assistant", "content": "a"}, {"role": "user", "content": "more"}]}
    codec.validate(body)
    thinking = codec.to_ir(body).messages[1].parts[0]
    assert isinstance(thinking, ThinkingPart) and vendor_signature(thinking) is None


# --- the stream --------------------------------------------------------------------------------------


def test_text_and_tool_stream_is_the_vendor_sequence():
    events = encode_all([
        StreamStart("u", "up", Usage(input_tokens=7)), ThinkingDelta("hmm"), ThinkingDelta("", "sig"),
        TextDelta("Hi"), TextDelta(" there"), ToolCallStart(0, "call_a", "f"), ToolCallDelta(0, '{"a":'),
        ToolCallDelta(0, "1}"), ToolCallStart(1, "call_b", "g"), UsageUpdate(Usage(output_tokens=5)),
        StreamEnd("tool_calls"),
    ])
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert [e["type"] for e in events] == [
        "response.created", "response.in_progress",
        "response.output_item.added", "response.content_part.added", "response.reasoning_text.delta",
        "response.reasoning_text.done", "response.content_part.done", "response.output_item.done",
        "response.output_item.added", "response.content_part.added", "response.output_text.delta",
        "response.output_text.delta", "response.output_text.done", "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added", "response.function_call_arguments.delta",
        "response.function_call_arguments.delta", "response.function_call_arguments.done",
        "response.output_item.done",  # one item at a time, as the vendor streams them
        "response.output_item.added", "response.function_call_arguments.delta",
        "response.function_call_arguments.done", "response.output_item.done",
        "response.completed",
    ]
    for event in events:
        EVENT.validate_python(event)
    final = sdk_final(events)
    assert final is not None and final.model == "client-model"
    assert [item.type for item in final.output] == ["reasoning", "message", "function_call", "function_call"]
    replayed = {"model": "m", "input": [{"role": "user", "content": "q"},
                                        final.output[0].model_dump(exclude_none=True)]}
    assert codec.to_ir(replayed).messages[1].parts[0].signature == "sig"  # what the upstream signed
    assert final.output_text == "Hi there"
    assert (final.output[2].arguments, final.output[3].arguments) == ('{"a":1}', "{}")
    assert (final.usage.input_tokens, final.usage.output_tokens) == (7, 5)


def test_a_failure_ends_the_stream_with_response_failed():
    encoder = codec.stream_encoder("m", {"model": "m", "input": "x"})
    raw = encoder.encode(StreamStart("u", "m")) + encoder.encode(TextDelta("part"))
    raw += encoder.encode(StreamError("RATE_LIMIT_ERROR", "slow down"))
    raw += encoder.encode(StreamEnd("stop"))  # nothing after the end
    events = events_of(raw)
    assert events[-1]["type"] == "response.failed"
    failed = EVENT.validate_python(events[-1])
    assert failed.response.status == "failed" and failed.response.error.code == "rate_limit_exceeded"
    assert encoder.error_event("UPSTREAM_ERROR", "again") == b""  # one terminal event only


def test_the_fake_responses_upstream_speaks_the_sdk_types():
    from tests.fakes.openai_upstream import FakeOpenAI
    from tests.fakes.upstream_base import send
    from modelgate.providers.base import UpstreamRequest

    async def run() -> tuple[bytes, bytes]:
        fake = await FakeOpenAI().start()
        try:
            headers = {"authorization": "Bearer up-key-1", "content-type": "application/json"}
            tools = [{"type": "function", "name": "f", "parameters": {"type": "object"}}]
            plain = await send(UpstreamRequest("POST", fake.base_url + "/responses", headers,
                                               orjson.dumps({"model": "gpt-test", "input": "hi"})))
            streamed = await send(UpstreamRequest("POST", fake.base_url + "/responses", headers, orjson.dumps(
                {"model": "gpt-test", "input": "call tool", "tools": tools, "stream": True})))
            return plain[2], streamed[2]
        finally:
            await fake.close()

    plain, streamed = asyncio.run(run())
    assert Response.model_validate(orjson.loads(plain)).output_text == "Echo: hi"
    events = events_of(streamed)
    for event in events:
        EVENT.validate_python(event)
    assert sdk_final(events).output[0].type == "function_call"


# --- the pass-through tap ------------------------------------------------------------------------------


CREATED = {"type": "response.created", "sequence_number": 0, "response": {"id": "resp_1", "model": "up-model"}}
COMPLETED = {"type": "response.completed", "sequence_number": 4, "response": {
    "id": "resp_1", "model": "up-model", "usage": {"input_tokens": 11, "input_tokens_details": {"cached_tokens": 2},
                              "output_tokens": 4, "output_tokens_details": {"reasoning_tokens": 1},
                              "total_tokens": 15}}}


def frame(data: dict) -> bytes:
    return b"event: " + data["type"].encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), size=st.integers(1, 64))
def test_tap_relays_the_stream_with_the_client_model_and_reads_usage_under_any_chunking(seed, size):
    deltas = b"".join(frame({"type": "response.output_text.delta", "delta": f"w{i}", "sequence_number": i})
                      for i in range(1, 4))
    stream = frame(CREATED) + deltas + frame(COMPLETED)
    tap = codec.native_stream_tap({"model": "client-model"})
    out = b"".join(tap.filter(chunk) for chunk in random_chunks(stream, seed, size))
    renamed = [{**e, "response": {**e["response"], "model": "client-model"}} for e in (CREATED, COMPLETED)]
    assert out == frame(renamed[0]) + deltas + frame(renamed[1]) and tap.finished
    assert tap.usage == Usage(11, 4, cache_read_tokens=2)


def test_tap_error_event_continues_the_numbering():
    tap = codec.native_stream_tap({"model": "m"})
    tap.filter(frame({"type": "response.output_text.delta", "delta": "w", "sequence_number": 41}))
    assert not tap.finished
    [event] = events_of(tap.error_event("NETWORK_ERROR", "cut"))
    assert EVENT.validate_python(event).sequence_number == 42


# --- properties ------------------------------------------------------------------------------------------

texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12)


@st.composite
def ir_streams(draw):
    """An IR event stream as upstreams produce it: text, thinking and tool calls, possibly interleaved."""
    events = [StreamStart("u", "m", Usage(input_tokens=draw(st.integers(0, 99))))]
    calls = 0
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["text", "thinking", "call", "args", "usage"]))
        if kind == "text":
            events.append(TextDelta(draw(texts)))
        elif kind == "thinking":
            events.append(ThinkingDelta(draw(texts), draw(st.none() | texts)))
        elif kind == "call":
            events.append(ToolCallStart(calls, f"call_{calls}", draw(texts)))
            calls += 1
        elif kind == "args" and calls:
            events.append(ToolCallDelta(draw(st.integers(0, calls - 1)), draw(texts)))
        elif kind == "usage":
            events.append(UsageUpdate(Usage(output_tokens=draw(st.integers(0, 99)))))
    events.append(draw(st.sampled_from([StreamEnd("stop"), StreamEnd("length"), StreamEnd("tool_calls"),
                                        StreamError("UPSTREAM_ERROR", "boom")])))
    return events


@settings(max_examples=150, deadline=None)
@given(ir_streams())
def test_any_ir_stream_becomes_a_well_formed_typed_stream(ir_events):
    events = encode_all(ir_events)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert [e["type"] for e in events[:2]] == ["response.created", "response.in_progress"]
    terminal = [e for e in events if e["type"] in ("response.completed", "response.incomplete", "response.failed")]
    assert terminal == [events[-1]]
    open_items: dict[int, str] = {}
    done: dict[int, dict] = {}
    for event in events:
        EVENT.validate_python(event)
        index = event.get("output_index")
        if event["type"] == "response.output_item.added":
            assert index == len(open_items)  # items are numbered in the order they open
            assert set(open_items) == set(done)  # one at a time: the one before is done (the vendor's order)
            open_items[index] = event["item"]["id"]
        elif event["type"] == "response.output_item.done":
            assert index in open_items and index not in done
            done[index] = event["item"]
        elif index is not None:
            assert open_items.get(index) == event["item_id"] and index not in done  # deltas only while open
    final = events[-1]["response"]
    assert final["output"] == [done[i] for i in sorted(done)]
    text = "".join(e.text for e in ir_events if isinstance(e, TextDelta))
    if final["status"] != "failed":
        assert sdk_final(events) is not None
        assert "".join(c["text"] for item in final["output"] if item["type"] == "message"
                       for c in item["content"]) == text
        calls = [item for item in final["output"] if item["type"] == "function_call"]
        started = [e for e in ir_events if isinstance(e, ToolCallStart)]
        assert [c["call_id"] for c in calls] == [e.id for e in started]


@st.composite
def conversations(draw):
    """A Responses input of user turns, assistant text and function-call round trips."""
    items, expected = [], []
    for turn in range(draw(st.integers(1, 5))):
        user = draw(texts)
        items.append({"role": "user", "content": user})
        expected.append({"role": "user", "content": user})
        if draw(st.booleans()):
            name = draw(st.from_regex(r"[a-z_]{1,10}", fullmatch=True))
            call = {"type": "function_call", "call_id": f"c{turn}", "name": name, "arguments": "{}"}
            result = draw(texts)
            items += [call, {"type": "function_call_output", "call_id": f"c{turn}", "output": result}]
            expected += [{"role": "assistant", "content": None, "tool_calls": [
                {"id": f"c{turn}", "type": "function", "function": {"name": name, "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": f"c{turn}", "content": result}]
        answer = draw(texts)
        items.append({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": answer}]})
        expected.append({"role": "assistant", "content": answer})
    return items, expected


@settings(max_examples=100, deadline=None)
@given(conversations(), st.none() | texts)
def test_any_conversation_reaches_a_chat_upstream_turn_for_turn(conversation, instructions):
    items, expected = conversation
    body = {"model": "m", "input": items, **({"instructions": instructions} if instructions else {})}
    codec.validate(body)
    sent = request_body(codec.to_ir(body), "up")["messages"]
    system = [{"role": "system", "content": instructions}] if instructions else []
    assert sent == system + expected
