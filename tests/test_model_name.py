"""set_model: the `model` keys of an upstream's answer bytes set to the client's model id."""

from __future__ import annotations

import orjson

from modelgate.protocols.model_name import model_field, set_model

CHUNK = (b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"%s",'
         b'"choices":[{"index":0,"delta":{"content":"%s"},"finish_reason":null}]}\n\n')


def _data(event: bytes) -> dict:
    return orjson.loads(event[len(b"data: "):])


def test_a_chunk_that_names_the_clients_id_is_forwarded_byte_for_byte():
    chunk = CHUNK % (b"gpt-4o", b"Hello")
    assert set_model(chunk, model_field("gpt-4o")) == chunk


def test_an_upstream_snapshot_name_becomes_the_clients_id():
    chunk = CHUNK % (b"gpt-4o-2024-08-06", b"Hello")
    out = set_model(chunk, model_field("gpt-4o"))
    assert _data(out) == {**_data(chunk), "model": "gpt-4o"}


def test_text_that_reads_model_is_content_not_a_key():
    chunk = CHUNK % (b"gpt-4o", b"model")
    assert set_model(chunk, model_field("gpt-4o")) == chunk
    renamed = set_model(CHUNK % (b"gpt-4o-mini", b"model"), model_field("gpt-4o"))
    assert _data(renamed)["model"] == "gpt-4o"
    assert _data(renamed)["choices"][0]["delta"]["content"] == "model"


def test_every_model_key_is_set_even_after_one_that_already_matches():
    events = (CHUNK % (b"gpt-4o", b"a")) + (CHUNK % (b"gpt-4o-2024-08-06", b"b"))
    out = set_model(events, model_field("gpt-4o"))
    first, second = out.split(b"\n\n")[:2]
    assert _data(first)["model"] == _data(second)["model"] == "gpt-4o"
    assert set_model(events, model_field("gpt-4o"), 1) == events  # the first key only


def test_spaced_keys_and_escaped_names_are_read_as_json():
    body = b'{"model" : "vendor/\\"odd\\" name", "choices": []}'
    out = set_model(body, model_field('my "alias"'))
    assert orjson.loads(out) == {"model": 'my "alias"', "choices": []}
    assert set_model(b'{"id":"x","choices":[]}', model_field("gpt-4o")) == b'{"id":"x","choices":[]}'


def _with_model(value: object, model: str, left: list[int]) -> object:
    """The JSON value with its string `model` keys set to `model`, in document order, while `left[0]`
    allows (-1: all): what set_model must do to the text."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key == "model" and isinstance(item, str) and left[0] != 0:
                out[key] = model
                left[0] -= left[0] > 0
            else:
                out[key] = _with_model(item, model, left)
        return out
    if isinstance(value, list):
        return [_with_model(item, model, left) for item in value]
    return value


def test_set_model_agrees_with_json_on_many_shapes():
    import random

    rng = random.Random(14)
    names = ["gpt-4o", "gpt-4o-2024-08-06", "model", 'quo"te', "back\\slash", "ünï", ""]
    for _ in range(400):
        upstream, client = rng.choice(names), rng.choice(names)
        body: dict = {"id": "x", "model": upstream,
                      "choices": [{"delta": {"content": rng.choice(names)}}]}
        if rng.random() < 0.3:
            body["usage"] = {"model": rng.choice(names)}
        if rng.random() < 0.2:
            body["content"] = "model"
        text = orjson.dumps(body)
        if rng.random() < 0.3:
            text = text.replace(b'"model":', b'"model" : ')
        count = rng.choice([0, 1])
        out = set_model(text, model_field(client), count)
        expected = _with_model(body, client, [count or -1])
        assert orjson.loads(out) == expected, (text, client, count)
