from __future__ import annotations

import orjson
import pytest

from modelgate.errors import ErrorType, UpstreamError
from modelgate.protocols.ir import (
    ChatRequest,
    ImagePart,
    Message,
    StreamEnd,
    StreamError,
    StreamStart,
    TextDelta,
    TextPart,
    Tool,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    ToolChoice,
    ToolResult,
)
from modelgate.providers.base import Endpoint
from modelgate.providers.ollama import OllamaAdapter
from tests.fakes.ollama_upstream import FakeOllama
from tests.fakes.upstream_base import decode_stream, send

adapter = OllamaAdapter()
WEATHER = Tool("get_weather", "Weather", {"type": "object", "properties": {"city": {"type": "string"}}})
MODEL = "llama3.2:latest"


@pytest.fixture
async def fake():
    f = await FakeOllama().start()
    yield f
    await f.close()


def endpoint(fake: FakeOllama, key: str = "") -> Endpoint:
    return Endpoint("p1:k1", 1, 1, "ollama", fake.base_url, key)


def user(text: str) -> Message:
    return Message("user", [TextPart(text)])


async def test_plain_request_and_response(fake):
    req = ChatRequest("m", [user("hi")], system=["sys"], max_tokens=100, temperature=0.5, top_p=0.8, top_k=20,
                      stop=["\n\n"], seed=3, response_format={"type": "json_object"})
    status, _, body = await send(adapter.build_request(req, MODEL, endpoint(fake)))
    assert status == 200
    rec = fake.last
    assert rec.path == "/api/chat" and "authorization" not in rec.headers
    sent = rec.json()
    assert sent["stream"] is False  # Ollama streams unless told not to
    assert sent["messages"] == [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}]
    assert sent["options"] == {"temperature": 0.5, "top_p": 0.8, "top_k": 20, "num_predict": 100, "seed": 3,
                               "stop": ["\n\n"]}
    assert sent["format"] == "json"
    resp = adapter.parse_response(body)
    assert resp.parts == [TextPart("Echo: hi")]
    assert resp.stop_reason == "stop" and resp.model == MODEL
    assert resp.usage.input_tokens > 0 and resp.usage.output_tokens > 0


async def test_length_stop(fake):
    req = ChatRequest("m", [user("a long sentence with many words in it")], max_tokens=1)
    _, _, body = await send(adapter.build_request(req, MODEL, endpoint(fake)))
    assert adapter.parse_response(body).stop_reason == "length"


@pytest.mark.parametrize("seed", [0, 1, 2])
async def test_stream_in_random_chunks(fake, seed):
    req = ChatRequest("m", [user("one two three")], stream=True)
    status, headers, body = await send(adapter.build_request(req, MODEL, endpoint(fake)))
    assert status == 200 and headers["content-type"].startswith("application/x-ndjson")
    assert fake.last.json()["stream"] is True
    events = decode_stream(adapter.stream_decoder(), body, seed)
    assert isinstance(events[0], StreamStart) and events[0].model == MODEL
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Echo: one two three"
    assert isinstance(events[-1], StreamEnd) and events[-1].stop_reason == "stop"
    assert events[-1].usage.input_tokens > 0 and events[-1].usage.output_tokens > 0
    assert sum(isinstance(e, (StreamEnd, StreamError)) for e in events) == 1


async def test_cut_stream_is_an_error(fake):
    fake.cut_stream = True
    req = ChatRequest("m", [user("one two three")], stream=True)
    _, _, body = await send(adapter.build_request(req, MODEL, endpoint(fake)))
    events = decode_stream(adapter.stream_decoder(), body)
    assert isinstance(events[-1], StreamError) and not any(isinstance(e, StreamEnd) for e in events)


async def test_tool_calls_and_results(fake):
    req = ChatRequest("m", [user("weather?")], tools=[WEATHER])
    _, _, body = await send(adapter.build_request(req, MODEL, endpoint(fake)))
    assert fake.last.json()["tools"][0] == {"type": "function", "function": {
        "name": "get_weather", "description": "Weather", "parameters": WEATHER.parameters}}
    resp = adapter.parse_response(body)
    call = resp.parts[0]
    assert isinstance(call, ToolCall) and call.name == "get_weather" and call.id
    assert orjson.loads(call.arguments) == {"city": "Paris"}
    assert resp.stop_reason == "tool_calls"

    history = [user("weather?"), Message("assistant", [call]),
               Message("tool", [ToolResult(call.id, [TextPart("sunny")])])]
    _, _, body2 = await send(adapter.build_request(ChatRequest("m", history, tools=[WEATHER]), MODEL, endpoint(fake)))
    sent = fake.last.json()["messages"]
    # arguments go back as an object, the result with the tool's name
    assert sent[1]["tool_calls"] == [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]
    assert sent[2] == {"role": "tool", "content": "sunny", "tool_name": "get_weather"}
    assert adapter.parse_response(body2).parts == [TextPart("get_weather said sunny")]


async def test_tool_call_stream(fake):
    req = ChatRequest("m", [user("weather?")], tools=[WEATHER], stream=True)
    _, _, body = await send(adapter.build_request(req, MODEL, endpoint(fake)))
    events = decode_stream(adapter.stream_decoder(), body, seed=3)
    start = next(e for e in events if isinstance(e, ToolCallStart))
    assert start.index == 0 and start.name == "get_weather"
    assert orjson.loads("".join(e.arguments for e in events if isinstance(e, ToolCallDelta))) == {"city": "Paris"}
    assert events[-1].stop_reason == "tool_calls"


def test_tool_choice_mapping():
    ep = Endpoint("e", 1, 1, "ollama", "", "")
    tools = [WEATHER, Tool("other", None, {"type": "object", "properties": {}})]
    none = orjson.loads(adapter.build_request(ChatRequest("m", [user("x")], tools=tools, tool_choice=ToolChoice("none")), "x", ep).body)
    assert "tools" not in none
    named = orjson.loads(adapter.build_request(ChatRequest("m", [user("x")], tools=tools, tool_choice=ToolChoice("tool", "other")), "x", ep).body)
    assert [t["function"]["name"] for t in named["tools"]] == ["other"]
    assert adapter.build_request(ChatRequest("m", [user("x")]), "x", ep).url == "http://localhost:11434/api/chat"


async def test_images(fake):
    msg = Message("user", [TextPart("see"), ImagePart(data="aGk=", media_type="image/png"),
                           ImagePart(url="data:image/jpeg;base64,AAAA")])
    _, _, body = await send(adapter.build_request(ChatRequest("m", [msg]), MODEL, endpoint(fake)))
    assert fake.last.json()["messages"][0]["images"] == ["aGk=", "AAAA"]
    assert adapter.parse_response(body).parts == [TextPart("Echo: see [2 image(s)]")]
    with pytest.raises(UpstreamError) as exc:
        adapter.build_request(ChatRequest("m", [Message("user", [ImagePart(url="https://x/y.png")])]), MODEL, endpoint(fake))
    assert exc.value.error_type is ErrorType.INVALID_REQUEST


async def test_errors(fake):
    status, headers, body = await send(adapter.build_request(ChatRequest("m", [user("x")]), "nope", endpoint(fake)))
    assert status == 404
    err = adapter.classify_error(status, body, headers)
    assert err.error_type is ErrorType.MODEL_NOT_FOUND and "nope" in err.message
    fake.fail_next(500, {"error": "llama runner process has terminated: exit status 2"})
    status, headers, body = await send(adapter.build_request(ChatRequest("m", [user("x")]), MODEL, endpoint(fake)))
    assert adapter.classify_error(status, body, headers).error_type is ErrorType.UPSTREAM_ERROR
    fake.fail_next(503, {"error": "server busy, please try again.  maximum pending requests exceeded"})
    status, headers, body = await send(adapter.build_request(ChatRequest("m", [user("x")]), MODEL, endpoint(fake)))
    assert adapter.classify_error(status, body, headers).error_type is ErrorType.SERVICE_UNAVAILABLE
    fake.fail_next(400, {"error": "invalid options: num_ctx"})
    status, headers, body = await send(adapter.build_request(ChatRequest("m", [user("x")]), MODEL, endpoint(fake)))
    assert adapter.classify_error(status, body, headers).error_type is ErrorType.INVALID_REQUEST


def test_error_line_inside_stream():
    dec = adapter.stream_decoder()
    events = dec.feed(b'{"model":"m","created_at":"t","message":{"role":"assistant","content":"a"},"done":false}\n'
                      b'{"error":"an error was encountered while running the model: unexpected EOF"}\n')
    events += dec.close()
    assert [type(e).__name__ for e in events] == ["StreamStart", "TextDelta", "StreamError"]


async def test_bearer_key_and_models():
    fake = await FakeOllama(models=("llama3.2:latest", "qwen3:8b"), api_key="olk").start()
    try:
        status, _, _ = await send(adapter.models_request(endpoint(fake)))
        assert status == 401
        status, _, body = await send(adapter.models_request(endpoint(fake, "olk")))
        assert status == 200 and fake.last.path == "/api/tags"
        assert fake.last.headers["authorization"] == "Bearer olk"
        assert adapter.parse_models(body) == ["llama3.2:latest", "qwen3:8b"]
    finally:
        await fake.close()
