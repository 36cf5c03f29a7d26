"""SSE event parsing: the one-`data:`-line fast path reads every event exactly as the general parser does."""

from __future__ import annotations

import pytest

from modelgate.protocols import sse

# Events as SSEParser.feed_raw yields them (terminated by a blank line), per the SSE spec's field rules:
# one optional space after the colon is dropped, comment lines ignored, several data lines joined.
EVENTS = [
    b'data: {"a":1}\n\n', b'data:{"a":1}\n\n', b"event: ping\ndata: {}\n\n", b"event:ping\ndata: {}\n\n",
    b"event: x\ndata: a\ndata: b\n\n", b": keep-alive\n\n", b"data: \n\n", b"data:  two spaces\n\n",
    b"event:  spaced\ndata: y\n\n", b"id: 3\ndata: z\n\n", b"event: e\nid: 1\ndata: q\n\n", b"data: \xff\xfe\n\n",
    b"event: \xc3\xa9\ndata: \xc3\xa9\n\n", b"data: a:b: c\n\n", b"event: e\n\n", b"retry: 5\n\n",
    b"event: message_start\ndata: {\"type\":\"message_start\"}\n\n",
]


@pytest.mark.parametrize("raw", EVENTS)
def test_fast_path_reads_events_as_the_general_parser_does(raw: bytes) -> None:
    fast, general = sse.parse_event(raw), sse._parse_lines(raw)
    if general is None:
        assert fast is None
    else:
        assert (fast.event, fast.data, fast.raw) == (general.event, general.data, general.raw)


def test_common_frames() -> None:
    assert sse.parse_event(b"data: [DONE]\n\n").data == "[DONE]"
    event = sse.parse_event(b"event: content_block_delta\ndata: {}\n\n")
    assert (event.event, event.data) == ("content_block_delta", "{}")
    assert sse.encode(b"{}") == b"data: {}\n\n"
    assert sse.encode(b"{}", "ping") == b"event: ping\ndata: {}\n\n"


def test_chat_stream_chunks_are_the_bytes_of_the_whole_chunk_object() -> None:
    import orjson

    from modelgate.protocols.chat import ChatStreamEncoder
    from modelgate.protocols.ir import StreamEnd, StreamStart, TextDelta

    encoder = ChatStreamEncoder('model "é"', include_usage=False)
    encoder.encode(StreamStart("abc", "upstream"))
    expected = {"id": "chatcmpl-abc", "object": "chat.completion.chunk", "created": encoder.created,
                "model": 'model "é"'}
    assert encoder.encode(TextDelta("hi\n")) == b"data: " + orjson.dumps(
        {**expected, "choices": [{"index": 0, "delta": {"content": "hi\n"}, "finish_reason": None, "logprobs": None}]}
    ) + b"\n\n"
    end = encoder.encode(StreamEnd("stop")).split(b"\n\n")[0]
    assert orjson.loads(end[6:])["choices"][0] == {"index": 0, "delta": {}, "finish_reason": "stop", "logprobs": None}


# --- the decoders' reading of a stream's bulk events straight from their bytes -------------------

def _chat_stream() -> list[bytes]:
    import orjson

    def chunk(delta: dict, finish: str | None = None, **extra: object) -> bytes:
        return b"data: " + orjson.dumps({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
                                         "model": "m", "choices": [{"index": 0, "delta": delta,
                                                                    "finish_reason": finish}], **extra}) + b"\n\n"
    return [
        chunk({"role": "assistant", "content": ""}), chunk({"content": "Hel"}), chunk({"content": "lo ✓"}),
        chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                               "function": {"name": "f", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"a":'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]}),
        chunk({}, "tool_calls"),
        b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],'
        b'"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}\n\n',
        b"data: [DONE]\n\n",
    ]


def _messages_stream() -> list[bytes]:
    import orjson

    def event(name: str, **data: object) -> bytes:
        return b"event: " + name.encode() + b"\ndata: " + orjson.dumps({"type": name, **data}) + b"\n\n"
    return [
        event("message_start", message={"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
                                         "content": [], "usage": {"input_tokens": 5, "output_tokens": 1}}),
        event("content_block_start", index=0, content_block={"type": "text", "text": ""}),
        event("ping"),
        event("content_block_delta", index=0, delta={"type": "text_delta", "text": "Hel"}),
        event("content_block_delta", index=0, delta={"type": "text_delta", "text": "lo ✓"}),
        event("content_block_stop", index=0),
        event("content_block_start", index=1, content_block={"type": "tool_use", "id": "toolu_1", "name": "f",
                                                              "input": {}}),
        event("content_block_delta", index=1, delta={"type": "input_json_delta", "partial_json": '{"a":'}),
        event("content_block_delta", index=1, delta={"type": "input_json_delta", "partial_json": "1}"}),
        event("content_block_stop", index=1),
        event("message_delta", delta={"stop_reason": "tool_use", "stop_sequence": None}, usage={"output_tokens": 7}),
        event("message_stop"),
    ]


def _decode(kind: str, events: list[bytes], split: int) -> list:
    from modelgate.providers.anthropic_messages import AnthropicStreamDecoder
    from modelgate.providers.openai_chat import OpenAIStreamDecoder

    decoder = OpenAIStreamDecoder() if kind == "chat" else AnthropicStreamDecoder()
    data = b"".join(events)
    out = []
    for i in range(0, len(data), split):
        out += decoder.feed(data[i:i + split])
    return out + decoder.close()


def _spelled_otherwise(raw: bytes) -> bytes:
    """The same event in a form the SSE spec reads alike: no space after `data:`, an `id:` line, CRLF."""
    return b"id: 7\r\n" + raw.replace(b"data: ", b"data:").replace(b"\n", b"\r\n")


@pytest.mark.parametrize("kind", ["chat", "messages"])
@pytest.mark.parametrize("split", [1, 7, 64, 100_000])
def test_a_decoder_reads_every_spelling_of_an_event_alike(kind: str, split: int) -> None:
    events = _chat_stream() if kind == "chat" else _messages_stream()
    usual = _decode(kind, events, split)
    assert usual == _decode(kind, [_spelled_otherwise(raw) for raw in events], split)
    assert [type(e).__name__ for e in usual].count("TextDelta") == 2


@pytest.mark.parametrize("kind", ["chat", "messages"])
def test_invalid_utf8_in_a_text_delta_reads_as_the_replacement_character(kind: str) -> None:
    # SSE streams are UTF-8 decoded with replacement (the SSE spec): one bad byte is U+FFFD, not a failure.
    events = _chat_stream() if kind == "chat" else _messages_stream()
    bad = [raw.replace("✓".encode(), b"\xff") for raw in events]
    replaced = [raw.replace("✓".encode(), "\ufffd".encode()) for raw in events]
    assert _decode(kind, bad, 100_000) == _decode(kind, replaced, 100_000)
