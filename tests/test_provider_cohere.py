from __future__ import annotations

import orjson
import pytest

from modelgate.errors import ErrorType
from modelgate.protocols.ir import (
    ChatRequest,
    ImagePart,
    Message,
    StreamEnd,
    StreamError,
    StreamStart,
    TextDelta,
    TextPart,
    ThinkingDelta,
    ThinkingPart,
    Tool,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    ToolChoice,
    ToolResult,
)
from modelgate.providers.base import Endpoint
from modelgate.providers.cohere import CohereAdapter
from tests.fakes.cohere_upstream import FakeCohere, cohere_error
from tests.fakes.upstream_base import decode_stream, send

adapter = CohereAdapter()
MODEL = "command-a-03-2025"
WEATHER = Tool("get_weather", "Weather", {"type": "object", "properties": {"city": {"type": "string"}}})


@pytest.fixture
async def fake():
    f = await FakeCohere().start()
    yield f
    await f.close()


def endpoint(fake: FakeCohere, key: str | None = None) -> Endpoint:
    return Endpoint("p1:k1", 1, 1, "cohere", fake.base_url, key or fake.api_key)


def user(text: str) -> Message:
    return Message("user", [TextPart(text)])


async def test_plain_request_and_response(fake):
    req = ChatRequest("m", [user("hi")], system=["sys"], max_tokens=64, temperature=0.3, top_p=0.9, top_k=5,
                      stop=["##"], seed=1, frequency_penalty=0.2, presence_penalty=0.1,
                      response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}})
    status, _, body = await send(adapter.build_request(req, MODEL, endpoint(fake)))
    assert status == 200
    rec = fake.last
    assert rec.path == "/v2/chat" and rec.headers["authorization"] == f"Bearer {fake.api_key}"
    sent = rec.json()
    assert sent == {
        "model": MODEL, "stream": False,
        "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}],
        "max_tokens": 64, "temperature": 0.3, "p": 0.9, "k": 5, "seed": 1, "frequency_penalty": 0.2,
        "presence_penalty": 0.1, "stop_sequences": ["##"],
        "response_format": {"type": "json_object", "json_schema": {"type": "object"}},
    }
    resp = adapter.parse_response(body)
    assert resp.parts == [TextPart("Echo: hi")]
    assert resp.stop_reason == "stop" and resp.id
    # billed units, not the raw token counts that include Cohere's prompt template
    billed = orjson.loads(body)["usage"]["billed_units"]
    assert (resp.usage.input_tokens, resp.usage.output_tokens) == (billed["input_tokens"], billed["output_tokens"])


@pytest.mark.parametrize("seed", [0, 1, 2])
async def test_stream_in_random_chunks(fake, seed):
    req = ChatRequest("m", [user("one two three")], stream=True)
    status, headers, body = await send(adapter.build_request(req, MODEL, endpoint(fake)))
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    events = decode_stream(adapter.stream_decoder(), body, seed)
    assert isinstance(events[0], StreamStart) and events[0].id
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Echo: one two three"
    assert isinstance(events[-1], StreamEnd) and events[-1].stop_reason == "stop"
    assert events[-1].usage.input_tokens > 0
    assert sum(isinstance(e, (StreamEnd, StreamError)) for e in events) == 1


async def test_cut_stream_is_an_error(fake):
    fake.cut_stream = True
    _, _, body = await send(adapter.build_request(ChatRequest("m", [user("a b")], stream=True), MODEL, endpoint(fake)))
    events = decode_stream(adapter.stream_decoder(), body)
    assert isinstance(events[-1], StreamError) and not any(isinstance(e, StreamEnd) for e in events)


async def test_tool_calls(fake):
    req = ChatRequest("m", [user("weather?")], tools=[WEATHER], tool_choice=ToolChoice("required"))
    _, _, body = await send(adapter.build_request(req, MODEL, endpoint(fake)))
    sent = fake.last.json()
    assert sent["tool_choice"] == "REQUIRED"
    assert sent["tools"] == [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
                                                               "parameters": WEATHER.parameters}}]
    resp = adapter.parse_response(body)
    assert isinstance(resp.parts[0], ThinkingPart) and resp.parts[0].text == "I will call get_weather."
    call = resp.parts[1]
    assert isinstance(call, ToolCall) and call.name == "get_weather" and call.id.startswith("get_weather_")
    assert orjson.loads(call.arguments) == {"city": "Paris"}
    assert resp.stop_reason == "tool_calls"

    history = [user("weather?"), Message("assistant", resp.parts),
               Message("tool", [ToolResult(call.id, [TextPart("sunny")])])]
    _, _, body2 = await send(adapter.build_request(ChatRequest("m", history, tools=[WEATHER]), MODEL, endpoint(fake)))
    msgs = fake.last.json()["messages"]
    assert msgs[1] == {"role": "assistant", "tool_plan": "I will call get_weather.", "tool_calls": [
        {"id": call.id, "type": "function", "function": {"name": "get_weather", "arguments": call.arguments}}]}
    assert msgs[2] == {"role": "tool", "tool_call_id": call.id, "content": "sunny"}
    assert adapter.parse_response(body2).parts == [TextPart("The tool said sunny")]


async def test_tool_call_stream(fake):
    req = ChatRequest("m", [user("weather?")], tools=[WEATHER], stream=True)
    _, _, body = await send(adapter.build_request(req, MODEL, endpoint(fake)))
    events = decode_stream(adapter.stream_decoder(), body, seed=9)
    assert "".join(e.text for e in events if isinstance(e, ThinkingDelta)).strip() == "I will call get_weather."
    start = next(e for e in events if isinstance(e, ToolCallStart))
    assert start.index == 0 and start.name == "get_weather"
    assert orjson.loads("".join(e.arguments for e in events if isinstance(e, ToolCallDelta))) == {"city": "Paris"}
    assert events[-1].stop_reason == "tool_calls"


def test_tool_choice_and_images():
    ep = Endpoint("e", 1, 1, "cohere", "", "k")
    tools = [WEATHER, Tool("other", None, {"type": "object", "properties": {}})]
    body = orjson.loads(adapter.build_request(
        ChatRequest("m", [Message("user", [TextPart("x"), ImagePart(data="AAAA", media_type="image/png")])],
                    tools=tools, tool_choice=ToolChoice("tool", "other")), "c", ep).body)
    assert body["tool_choice"] == "REQUIRED" and [t["function"]["name"] for t in body["tools"]] == ["other"]
    assert body["messages"][0]["content"] == [
        {"type": "text", "text": "x"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]
    none = orjson.loads(adapter.build_request(ChatRequest("m", [user("x")], tools=tools, tool_choice=ToolChoice("none")), "c", ep).body)
    assert none["tool_choice"] == "NONE"
    assert adapter.build_request(ChatRequest("m", [user("x")]), "c", ep).url == "https://api.cohere.com/v2/chat"


@pytest.mark.parametrize(("status", "message", "expected"), [
    (429, "You are using a Trial key, which is limited to 20 API calls / minute. You can continue to use the Trial key for free or upgrade to a Production key with higher rate limits at 'https://dashboard.cohere.com/api-keys'.", ErrorType.RATE_LIMIT_ERROR),
    (429, "You are using a Trial key, which is limited to 1000 API calls / month.", ErrorType.QUOTA_EXCEEDED),
    (400, "invalid request: message must be at least 1 token long or tool results must be specified.", ErrorType.INVALID_REQUEST),
    (498, "invalid api token", ErrorType.AUTHENTICATION_ERROR),
    (500, "internal server error, this has been reported to our developers.", ErrorType.UPSTREAM_ERROR),
    (503, "service unavailable", ErrorType.SERVICE_UNAVAILABLE),
    (504, "request timed out", ErrorType.TIMEOUT_ERROR),
])
async def test_scripted_errors(fake, status, message, expected):
    fake.fail_next(status, cohere_error(message))
    s, headers, body = await send(adapter.build_request(ChatRequest("m", [user("x")]), MODEL, endpoint(fake)))
    err = adapter.classify_error(s, body, headers)
    assert err.error_type is expected and err.message == message


async def test_real_errors_from_fake(fake):
    status, headers, body = await send(adapter.build_request(ChatRequest("m", [user("x")]), "command-zzz", endpoint(fake)))
    assert status == 404
    assert adapter.classify_error(status, body, headers).error_type is ErrorType.MODEL_NOT_FOUND
    status, headers, body = await send(adapter.build_request(ChatRequest("m", [user("x")]), MODEL, endpoint(fake, "bad")))
    assert status == 401
    assert adapter.classify_error(status, body, headers).error_type is ErrorType.AUTHENTICATION_ERROR


def test_error_finish_in_stream():
    dec = adapter.stream_decoder()
    events = dec.feed(b'event: message-start\ndata: {"type":"message-start","id":"x","delta":{"message":{"role":"assistant"}}}\n\n'
                      b'event: message-end\ndata: {"type":"message-end","delta":{"finish_reason":"ERROR","error":"boom"}}\n\n')
    events += dec.close()
    assert [type(e) for e in events] == [StreamStart, StreamError]


async def test_models(fake):
    status, _, body = await send(adapter.models_request(endpoint(fake)))
    assert status == 200 and fake.last.path == "/v1/models" and fake.last.query["endpoint"] == "chat"
    assert adapter.parse_models(body) == [MODEL]
