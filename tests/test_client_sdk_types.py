"""What the gateway answers, checked against the official SDKs' own types, strictly (pydantic validation).

The SDKs build their response objects without validation (`construct`), so a client test passes even when
a field the SDK declares required is missing; these validators do not. Every IR answer and stream a
converted call can produce (any parts, stop reason, usage; any interleaving of deltas) is encoded for the
chat and messages clients and validated: ChatCompletion / ChatCompletionChunk (openai), Message /
RawMessageStreamEvent (anthropic), the two count answers and the messages protocol's error bodies. (The Responses encoder has its own, in
tests/test_responses_codec.py.)
"""

from __future__ import annotations

from typing import Any, get_args

import orjson
from anthropic.types import Message as VendorMessage
from anthropic.types import ErrorResponse, MessageTokensCount, RawMessageStreamEvent
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import InputTokenCountResponse
from pydantic import TypeAdapter

from modelgate.errors import ErrorType
from modelgate.protocols.chat import ChatCodec
from modelgate.protocols.ir import (
    ChatResponse,
    StopReason,
    StreamEnd,
    StreamStart,
    TextDelta,
    TextPart,
    ThinkingDelta,
    ThinkingPart,
    ToolCall,
    Usage,
    UsageUpdate,
)
from modelgate.protocols.messages import MessagesCodec
from modelgate.protocols.responses import ResponsesCodec
from tests.test_messages_codec import interleaved_stream

CHAT, MESSAGES = ChatCodec(), MessagesCodec()
STREAM_BODY = {"model": "client-model", "stream": True, "stream_options": {"include_usage": True}}
VENDOR_EVENT = TypeAdapter(RawMessageStreamEvent)

counts = st.integers(0, 2**31 - 1)
usages = st.builds(Usage, counts, counts, counts, counts)
texts = st.text(max_size=12)
parts = st.lists(st.one_of(
    st.builds(TextPart, texts),
    st.builds(ThinkingPart, texts, st.none() | texts),
    st.builds(ToolCall, st.text(min_size=1, max_size=8), st.text(min_size=1, max_size=8),
              st.dictionaries(st.text(max_size=4), st.integers(-1000, 1000)).map(lambda d: orjson.dumps(d).decode())),
), max_size=5)
answers = st.builds(ChatResponse, st.text(min_size=1, max_size=8), texts, parts,
                    st.none() | st.sampled_from(get_args(StopReason)), st.none() | texts, usages)


def _data_lines(sse: bytes) -> list[Any]:
    return [orjson.loads(line[6:]) for line in sse.split(b"\n") if line.startswith(b"data: ") and line != b"data: [DONE]"]


@settings(max_examples=200, deadline=None)
@given(answer=answers)
def test_converted_answers_validate_as_the_sdks_types(answer: ChatResponse) -> None:
    chat = orjson.loads(CHAT.encode_response(answer, "client-model", CHAT.answer_context({"model": "client-model"})))
    ChatCompletion.model_validate(chat)
    VendorMessage.model_validate(orjson.loads(MESSAGES.encode_response(answer, "client-model", {})))


@settings(max_examples=150, deadline=None)
@given(case=interleaved_stream(), thinking=st.lists(texts, max_size=3), start=st.none() | usages, end=usages,
       update=st.none() | usages, stop=st.sampled_from(get_args(StopReason)))
def test_converted_streams_validate_as_the_sdks_types(case: Any, thinking: list[str], start: Usage | None,
                                                       end: Usage, update: Usage | None, stop: StopReason) -> None:
    deltas, _, _ = case
    events: list[Any] = [StreamStart("msg_1", "up", start), *(ThinkingDelta(t) for t in thinking)]
    events += [ThinkingDelta("", "sig")] if thinking else []
    events += [*deltas, *([UsageUpdate(update)] if update else []), StreamEnd(stop, None, end)]
    chat = CHAT.stream_encoder("client-model", STREAM_BODY)
    chunks = _data_lines(b"".join(chat.encode(event) for event in events))
    assert chunks
    for chunk in chunks:
        ChatCompletionChunk.model_validate(chunk)
    messages = MESSAGES.stream_encoder("client-model", {})
    vendor_events = _data_lines(b"".join(messages.encode(event) for event in events))
    assert [e["type"] for e in vendor_events][::len(vendor_events) - 1] == ["message_start", "message_stop"]
    for event in vendor_events:
        VENDOR_EVENT.validate_python(event)


def test_count_answers_validate_as_the_sdks_types() -> None:
    assert MessageTokensCount.model_validate(orjson.loads(MESSAGES.count_answer(12))).input_tokens == 12
    assert InputTokenCountResponse.model_validate(orjson.loads(ResponsesCodec().count_answer(12))).input_tokens == 12


def test_messages_error_bodies_validate_as_the_sdks_error_type() -> None:
    # The 7.2 body and the in-stream error event of every error type: the SDK raises its errors from them.
    ErrorResponse.model_validate(orjson.loads(MESSAGES.validation_body("messages: Field required")))
    encoder = MESSAGES.stream_encoder("client-model", {})
    for error_type in ErrorType:
        [event] = _data_lines(encoder.error_event(error_type.value, "the upstream failed"))
        assert ErrorResponse.model_validate(event).error.message == "the upstream failed"
