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
