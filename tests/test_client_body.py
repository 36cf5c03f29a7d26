"""Pass-through forwarding of a client body: its own bytes, with the top-level fields the gateway set."""

from __future__ import annotations

import gc

import orjson
import pytest

from modelgate.protocols.body import ClientBody, forward
from modelgate.protocols.chat import ChatCodec

RAW = b'{"model": "gpt-x",\n "messages": [{"role": "user", "content": "hi \\u00e9"}], "max_tokens": 5}\n'


def body() -> ClientBody:
    return ClientBody(orjson.loads(RAW), RAW)


def test_unchanged_body_is_forwarded_as_the_clients_own_bytes() -> None:
    assert forward(body(), {"model": "gpt-x"}) is RAW


def test_added_fields_are_spliced_before_the_closing_brace() -> None:
    out = forward(body(), {"model": "gpt-x", "stream_options": {"include_usage": True}})
    assert out.startswith(RAW.rstrip()[:-1])
    assert orjson.loads(out) == {**orjson.loads(RAW), "stream_options": {"include_usage": True}}


@pytest.mark.parametrize("raw", [b"{}", b" { \n} \n", b'{"model": "m"}\t', b'{"model": "m" ,"n": [1]\r\n}'])
def test_added_fields_make_the_same_object_whatever_the_whitespace_around_the_braces(raw: bytes) -> None:
    out = forward(ClientBody(orjson.loads(raw), raw), {"added": [1]})
    assert orjson.loads(out) == {**orjson.loads(raw), "added": [1]}
    assert out.startswith(raw.rstrip()[:-1].rstrip())  # the client's own bytes up to its closing brace


def test_a_renamed_model_is_set_and_the_other_fields_forwarded_as_sent() -> None:
    out = forward(body(), {"model": "upstream-name"})
    assert orjson.loads(out) == {**orjson.loads(RAW), "model": "upstream-name"}
    assert out.count(b'"model"') == 1
    assert b'[{"role": "user", "content": "hi \\u00e9"}]' in out  # the client's own bytes


def test_a_repeated_key_is_forwarded_once_with_its_last_value_in_its_first_place() -> None:
    raw = b'{"model": "a", "n": 1, "model": "b", "x": [1 ,2]}'
    out = forward(ClientBody(orjson.loads(raw), raw), {"model": "c", "added": True})
    assert out == b'{"model":"c","n":1,"x":[1 ,2],"added":true}'


def test_a_field_the_codec_rewrote_is_forwarded_rewritten() -> None:
    raw = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "x"}],
                        "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
                        "tool_choice": "f"})
    client = ClientBody(orjson.loads(raw), raw)
    ChatCodec().validate(client)  # rewrites the bare tool name into the object form
    forwarded = orjson.loads(forward(client, {"model": "m"}))
    assert forwarded["tool_choice"] == {"type": "function", "function": {"name": "f"}}


def test_a_removed_field_is_not_forwarded() -> None:
    client = body()
    del client["max_tokens"]
    assert "max_tokens" not in orjson.loads(forward(client, {"model": "gpt-x"}))


def test_a_plain_dict_is_serialised() -> None:
    assert orjson.loads(forward({"model": "a", "x": 1}, {"model": "b"})) == {"model": "b", "x": 1}


def test_a_value_replaced_by_an_equal_value_of_another_type_is_serialised_afresh() -> None:
    raw = b'{"model": "m", "n": 1}'
    client = ClientBody(orjson.loads(raw), raw)
    client["n"] = True  # equal to 1 in Python, not in JSON
    assert orjson.loads(forward(client, {"model": "m"})) == {"model": "m", "n": True}


def test_a_body_is_freed_by_reference_counting_alone() -> None:
    # A 150 KB agent body is a large tree: left to the cyclic collector it costs every later collection.
    from bench.workloads import AGENT_80, agent_chat_body
    from modelgate.gateway.inference import parse_json
    from modelgate.protocols.body import whole

    raw = agent_chat_body(AGENT_80, "m")
    gc.collect()
    gc.disable()
    try:
        for read in (parse_json, lambda raw: ChatCodec().read_typed(raw, {})[0]):
            body = read(raw)
            whole(body)
            forward(body, {"model": "renamed"})
            del body
            assert gc.collect() == 0
    finally:
        gc.enable()


SHED_RAW = orjson.dumps({
    "model": "gpt-x", "stream": True, "temperature": 0.5, "max_tokens": 5, "user": None,
    "stream_options": {"include_usage": True},
    "messages": [{"role": "user", "content": "hi \u00e9"}],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
})


def test_a_shed_body_holds_its_bytes_and_all_but_its_arrays() -> None:
    # What the gateway reads after the tree is gone stays: the scalars and the objects, such as
    # stream_options of any shape (the stream tap, a retried request). The conversation and the tools go.
    from modelgate.protocols.body import NOT_DECODED, shed

    raw = SHED_RAW[:-1] + b',"metadata":{"k":{"nested":[1]}}}'
    lean = shed(ClientBody(orjson.loads(raw), raw))
    assert lean.raw is raw and lean.partial
    sent = orjson.loads(raw)
    kept = ("model", "stream", "temperature", "max_tokens", "user", "stream_options", "metadata")
    assert {name: lean[name] for name in kept} == {name: sent[name] for name in kept}
    assert all(lean[name] is NOT_DECODED for name in ("messages", "tools"))


def test_a_shed_body_is_decoded_again_and_forwarded_as_sent() -> None:
    from modelgate.protocols.body import shed, whole

    lean = shed(ClientBody(orjson.loads(SHED_RAW), SHED_RAW))
    assert whole(lean) == orjson.loads(SHED_RAW)
    assert forward(lean, {"model": "gpt-x"}) is SHED_RAW
    assert orjson.loads(forward(lean, {"model": "renamed"})) == {**orjson.loads(SHED_RAW), "model": "renamed"}


def test_a_body_validate_rewrote_is_not_shed() -> None:
    # Its bytes no longer say what it holds: decoding them again would undo the rewrite.
    from modelgate.protocols.body import shed

    raw = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "x"}],
                        "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
                        "tool_choice": "f"})
    client = ClientBody(orjson.loads(raw), raw)
    ChatCodec().validate(client)
    assert shed(client) is client
    removed = body()
    del removed["max_tokens"]
    assert shed(removed) is removed


def test_a_partial_body_is_not_shed_again() -> None:
    from modelgate.protocols.body import shed

    client = ChatCodec().read_typed(RAW, {})[0]
    assert shed(client) is client and client.raw is RAW
