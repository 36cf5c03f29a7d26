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
from modelgate.providers.base import OPENING_USER_TEXT, Endpoint
from modelgate.providers.gemini import GeminiAdapter, gemini_schema
from tests.fakes.gemini_upstream import FakeGemini, google_error
from tests.fakes.upstream_base import decode_stream, send

WEATHER = Tool("get_weather", "Weather for a city", {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "properties": {"city": {"type": "string", "description": "City name"},
                   "unit": {"type": ["string", "null"], "enum": ["c", "f"]}},
    "required": ["city"],
    "additionalProperties": False,
})


@pytest.fixture
async def fake():
    f = await FakeGemini().start()
    yield f
    await f.close()


def endpoint(fake: FakeGemini, key: str | None = None) -> Endpoint:
    return Endpoint("p1:k1", 1, 1, "gemini", fake.base_url, key or fake.api_key)


def user(text: str) -> Message:
    return Message("user", [TextPart(text)])


adapter = GeminiAdapter()


@pytest.mark.parametrize("messages", [
    [],  # a chat client's system prompt alone: "contents is not specified" (the fake refuses it so)
    [Message("assistant", [TextPart("Hi! How can I help?")]), user("weather?")],  # a greeting first
])
async def test_a_conversation_gets_a_user_turn_first(fake, messages):
    status, _, _ = await send(adapter.build_request(ChatRequest("m", messages, system=["Be brief."]),
                                                    "gemini-2.5-flash", endpoint(fake)))
    assert status == 200
    contents = fake.last.json()["contents"]
    assert contents[0] == {"role": "user", "parts": [{"text": OPENING_USER_TEXT}]}
    assert [c["role"] for c in contents] == ["user", "model", "user"][:len(messages) + 1]


async def test_plain_request_and_response(fake):
    req = ChatRequest("m", [user("hi there")], system=["Be brief."], max_tokens=50, temperature=0.2,
                      top_p=0.9, top_k=40, stop=["END"], seed=7, presence_penalty=0.1, frequency_penalty=0.3,
                      response_format={"type": "json_object"})
    up = adapter.build_request(req, "gemini-2.5-flash", endpoint(fake))
    status, _, body = await send(up)
    assert status == 200
    rec = fake.last
    assert rec.path == "/v1beta/models/gemini-2.5-flash:generateContent"
    assert rec.headers["x-goog-api-key"] == fake.api_key
    assert "authorization" not in rec.headers
    sent = rec.json()
    assert sent["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert sent["contents"] == [{"role": "user", "parts": [{"text": "hi there"}]}]
    # no penalties: 2.5 refuses them ("Penalty is not enabled for models/gemini-2.5-flash"; the fake too)
    assert sent["generationConfig"] == {
        "maxOutputTokens": 50, "temperature": 0.2, "topP": 0.9, "topK": 40, "seed": 7,
        "stopSequences": ["END"], "responseMimeType": "application/json",
    }
    resp = adapter.parse_response(body)
    assert [p.text for p in resp.parts] == ["Echo: hi there"]
    assert resp.stop_reason == "stop"
    assert resp.id == "resp-fake-1" and resp.model == "gemini-2.5-flash"
    assert resp.usage.input_tokens > 0 and resp.usage.output_tokens > 0


async def test_empty_texts_never_reach_gemini(fake):
    # Gemini refuses an empty text part anywhere ("... has an empty text parameter"), the system
    # instruction's included: a chat client's `{"role": "system", "content": ""}` must not carry one.
    req = ChatRequest("m", [user("hi there"), Message("assistant", [TextPart("")]), user("again")],
                      system=["", "Be brief."])
    status, _, body = await send(adapter.build_request(req, "gemini-2.5-flash", endpoint(fake)))
    assert status == 200, body
    sent = fake.last.json()
    assert sent["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert sent["contents"] == [{"role": "user", "parts": [{"text": "hi there"}, {"text": "again"}]}]


@pytest.mark.parametrize("seed", [0, 1, 2])
async def test_stream_in_random_chunks(fake, seed):
    req = ChatRequest("m", [user("one two three")], stream=True)
    up = adapter.build_request(req, "gemini-2.5-flash", endpoint(fake))
    assert up.url.endswith(":streamGenerateContent?alt=sse")
    status, headers, body = await send(up)
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    events = decode_stream(adapter.stream_decoder(), body, seed)
    assert isinstance(events[0], StreamStart) and events[0].usage.input_tokens > 0
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Echo: one two three"
    end = events[-1]
    assert isinstance(end, StreamEnd) and end.stop_reason == "stop"
    assert end.usage.output_tokens > 0
    assert sum(isinstance(e, (StreamEnd, StreamError)) for e in events) == 1


async def test_cut_stream_is_an_error(fake):
    fake.cut_stream = True
    req = ChatRequest("m", [user("one two three")], stream=True)
    _, _, body = await send(adapter.build_request(req, "gemini-2.5-flash", endpoint(fake)))
    events = decode_stream(adapter.stream_decoder(), body)
    assert isinstance(events[-1], StreamError)
    assert not any(isinstance(e, StreamEnd) for e in events)


async def test_tool_call_round_trip(fake):
    req = ChatRequest("m", [user("weather in Paris?")], tools=[WEATHER],
                      tool_choice=ToolChoice("tool", "get_weather"))
    _, _, body = await send(adapter.build_request(req, "gemini-2.5-flash", endpoint(fake)))
    sent = fake.last.json()
    decl = sent["tools"][0]["functionDeclarations"][0]
    # The client's JSON schema itself, as Google's gemini-cli sends its tools.
    assert decl["parametersJsonSchema"] == WEATHER.parameters and "parameters" not in decl
    assert sent["toolConfig"] == {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}}
    resp = adapter.parse_response(body)
    call = resp.parts[0]
    assert isinstance(call, ToolCall) and call.name == "get_weather"
    assert orjson.loads(call.arguments) == {"city": "Paris"}
    assert call.id.startswith("call_")
    assert resp.stop_reason == "tool_calls"

    # Second turn: the tool result goes back as a functionResponse matched by name.
    history = [user("weather in Paris?"), Message("assistant", [call]),
               Message("tool", [ToolResult(call.id, [TextPart("18C sunny")])])]
    req2 = ChatRequest("m", history, tools=[WEATHER])
    _, _, body2 = await send(adapter.build_request(req2, "gemini-2.5-flash", endpoint(fake)))
    sent2 = fake.last.json()
    assert sent2["contents"][1] == {"role": "model", "parts": [
        {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
         "thoughtSignature": "skip_thought_signature_validator"}]}
    assert sent2["contents"][2] == {"role": "user", "parts": [
        {"functionResponse": {"name": "get_weather", "response": {"output": "18C sunny"}}}]}
    assert adapter.parse_response(body2).parts[0].text.startswith("get_weather returned")


async def test_tool_call_stream(fake):
    req = ChatRequest("m", [user("weather?")], tools=[WEATHER], stream=True)
    _, _, body = await send(adapter.build_request(req, "gemini-2.5-flash", endpoint(fake)))
    events = decode_stream(adapter.stream_decoder(), body, seed=5)
    start = next(e for e in events if isinstance(e, ToolCallStart))
    assert start.index == 0 and start.name == "get_weather" and start.id
    args = "".join(e.arguments for e in events if isinstance(e, ToolCallDelta))
    assert orjson.loads(args) == {"city": "Paris"}
    assert isinstance(events[-1], StreamEnd) and events[-1].stop_reason == "tool_calls"


async def test_images_become_inline_and_file_data(fake):
    msg = Message("user", [TextPart("look"), ImagePart(data="aGVsbG8=", media_type="image/png"),
                           ImagePart(url="data:image/jpeg;base64,AAAA"),
                           ImagePart(url="https://example.com/cat.webp?x=1")])
    await send(adapter.build_request(ChatRequest("m", [msg]), "gemini-2.5-flash", endpoint(fake)))
    parts = fake.last.json()["contents"][0]["parts"]
    assert parts[1] == {"inlineData": {"mimeType": "image/png", "data": "aGVsbG8="}}
    assert parts[2] == {"inlineData": {"mimeType": "image/jpeg", "data": "AAAA"}}
    assert parts[3] == {"fileData": {"mimeType": "image/webp", "fileUri": "https://example.com/cat.webp?x=1"}}


async def test_errors_from_fake_are_classified(fake):
    req = ChatRequest("m", [user("hi")])
    status, headers, body = await send(adapter.build_request(req, "gemini-9-nope", endpoint(fake)))
    assert status == 404
    assert adapter.classify_error(status, body, headers).error_type is ErrorType.MODEL_NOT_FOUND

    status, headers, body = await send(adapter.build_request(req, "gemini-2.5-flash", endpoint(fake, "wrong")))
    assert status == 400
    err = adapter.classify_error(status, body, headers)
    assert err.error_type is ErrorType.AUTHENTICATION_ERROR
    assert "wrong" not in err.message


@pytest.mark.parametrize(("status", "err", "expected", "retry_after"), [
    (429, google_error(429, "RESOURCE_EXHAUSTED", "You exceeded your current quota, please check your plan and billing details.", [
        {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [
            {"quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
             "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier", "quotaValue": "10"}]},
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"}]),
     ErrorType.RATE_LIMIT_ERROR, 37.0),
    (429, google_error(429, "RESOURCE_EXHAUSTED", "You exceeded your current quota, please check your plan and billing details.", [
        {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [
            {"quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier", "quotaValue": "250"}]}]),
     ErrorType.QUOTA_EXCEEDED, None),
    (403, google_error(403, "PERMISSION_DENIED", "Permission denied"), ErrorType.AUTHENTICATION_ERROR, None),
    (401, google_error(401, "UNAUTHENTICATED", "Request had invalid authentication credentials."), ErrorType.AUTHENTICATION_ERROR, None),
    (503, google_error(503, "UNAVAILABLE", "The model is overloaded. Please try again later."), ErrorType.SERVICE_UNAVAILABLE, None),
    (400, google_error(400, "INVALID_ARGUMENT", "Invalid JSON payload received."), ErrorType.INVALID_REQUEST, None),
    (500, google_error(500, "INTERNAL", "An internal error has occurred."), ErrorType.UPSTREAM_ERROR, None),
    (504, google_error(504, "DEADLINE_EXCEEDED", "Deadline expired"), ErrorType.TIMEOUT_ERROR, None),
    (400, google_error(400, "FAILED_PRECONDITION", "User location is not supported for the API use."), ErrorType.AUTHENTICATION_ERROR, None),
])
async def test_scripted_errors(fake, status, err, expected, retry_after):
    fake.fail_next(status, err)
    s, headers, body = await send(adapter.build_request(ChatRequest("m", [user("x")]), "gemini-2.5-flash", endpoint(fake)))
    assert s == status
    classified = adapter.classify_error(s, body, headers)
    assert classified.error_type is expected
    assert classified.retry_after == retry_after
    assert classified.message == err["error"]["message"]


def test_error_inside_stream():
    dec = adapter.stream_decoder()
    events = dec.feed(b'data: {"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}}\r\n\r\n')
    events += dec.close()
    assert [type(e) for e in events] == [StreamError]
    assert events[0].error_type == "SERVICE_UNAVAILABLE"


def test_blocked_prompt_ends_with_content_filter():
    body = orjson.dumps({"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 5}})
    assert adapter.parse_response(body).stop_reason == "content_filter"
    events = decode_stream(adapter.stream_decoder(), b"data: " + body + b"\r\n\r\n")
    assert isinstance(events[-1], StreamEnd) and events[-1].stop_reason == "content_filter"


def test_finish_reasons():
    def finish(reason: str) -> str | None:
        body = {"candidates": [{"content": {"parts": [{"text": "x"}], "role": "model"}, "finishReason": reason}]}
        return adapter.parse_response(orjson.dumps(body)).stop_reason
    assert finish("MAX_TOKENS") == "length"
    assert finish("SAFETY") == "content_filter"
    assert finish("RECITATION") == "content_filter"
    with pytest.raises(UpstreamError) as caught:
        finish("MALFORMED_FUNCTION_CALL")  # an abandoned answer is an upstream error, not a stop
    assert caught.value.error_type is ErrorType.UPSTREAM_ERROR


async def test_models_listing(fake):
    status, _, body = await send(adapter.models_request(endpoint(fake)))
    assert status == 200
    assert fake.last.path == "/v1beta/models" and fake.last.headers["x-goog-api-key"] == fake.api_key
    assert adapter.parse_models(body) == ["gemini-2.5-flash"]  # embedding-only models are left out


def test_schema_reduction():
    schema = {
        "type": "object",
        "$defs": {"Pt": {"type": "object", "properties": {"x": {"type": "number", "format": "double"}}}},
        "properties": {
            "p": {"$ref": "#/$defs/Pt"},
            "mode": {"const": "fast"},
            "tags": {"type": "array", "items": {"type": "string", "format": "uri"}, "maxItems": 3},
            "maybe": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "n": {"type": "integer", "enum": [1, 2]},
        },
        "required": ["p", "ghost"],
        "additionalProperties": False,
    }
    assert gemini_schema(schema) == {
        "type": "OBJECT",
        "properties": {
            "p": {"type": "OBJECT", "properties": {"x": {"type": "NUMBER", "format": "double"}}},
            "mode": {"type": "STRING", "enum": ["fast"], "format": "enum"},
            "tags": {"type": "ARRAY", "items": {"type": "STRING"}, "maxItems": 3},
            "maybe": {"type": "INTEGER", "nullable": True},
            "n": {"type": "INTEGER"},
        },
        "required": ["p"],
    }


def test_no_argument_tool_has_no_parameters():
    req = ChatRequest("m", [user("x")], tools=[Tool("now", None, {"type": "object", "properties": {}})])
    body = orjson.loads(adapter.build_request(req, "g", Endpoint("e", 1, 1, "gemini", "", "k")).body)
    assert body["tools"] == [{"functionDeclarations": [{"name": "now"}]}]
