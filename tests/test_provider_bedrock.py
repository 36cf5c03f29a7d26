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
from modelgate.providers.bedrock import BedrockAdapter, build_body, region_of
from tests.fakes.bedrock_upstream import FakeBedrock, event_frame
from tests.fakes.upstream_base import decode_stream, send

adapter = BedrockAdapter()
MODEL = "anthropic.claude-3-5-haiku-20241022-v1:0"
WEATHER = Tool("get_weather", "Weather", {"type": "object", "properties": {"city": {"type": "string"}}})


@pytest.fixture
async def fake():
    f = await FakeBedrock().start()
    yield f
    await f.close()


def endpoint(fake: FakeBedrock, key: str | None = None) -> Endpoint:
    return Endpoint("p1:k1", 1, 1, "aws-bedrock", fake.base_url, key or fake.key, {"region": fake.region})


def user(text: str) -> Message:
    return Message("user", [TextPart(text)])


async def test_signed_converse_request(fake):
    req = ChatRequest("m", [user("hello bedrock")], system=["sys"], max_tokens=99, temperature=0.4, top_p=0.7,
                      stop=["END"], seed=3, top_k=5)
    up = adapter.build_request(req, MODEL, endpoint(fake))
    assert up.url.endswith("/model/anthropic.claude-3-5-haiku-20241022-v1:0/converse")
    assert up.headers["authorization"].startswith(f"AWS4-HMAC-SHA256 Credential={fake.access_key}/")
    assert fake.secret_key not in str(up.headers)
    status, _, body = await send(up)
    assert status == 200, body
    sent = fake.last.json()
    assert sent == {"messages": [{"role": "user", "content": [{"text": "hello bedrock"}]}],
                    "system": [{"text": "sys"}],
                    # topP left out beside a temperature: Claude takes one of them (a test below)
                    "inferenceConfig": {"maxTokens": 99, "temperature": 0.4, "stopSequences": ["END"]},
                    # Claude's own top_k, which Converse has no field for
                    "additionalModelRequestFields": {"top_k": 5}}
    resp = adapter.parse_response(body)
    assert resp.parts == [TextPart("Echo: hello bedrock")] and resp.stop_reason == "stop"
    assert resp.usage.input_tokens > 0 and resp.usage.output_tokens > 0


async def test_inference_profile_arn_is_signed_as_sent():
    arn = "arn:aws:bedrock:eu-west-1:123456789012:inference-profile/eu.anthropic.claude-3-5-haiku-20241022-v1:0"
    fake = await FakeBedrock(models=(arn,)).start()
    try:
        up = adapter.build_request(ChatRequest("m", [user("x")]), arn, endpoint(fake))
        assert "/model/arn:aws:bedrock:eu-west-1:123456789012:inference-profile%2Feu.anthropic" in up.url
        status, _, body = await send(up)
        assert status == 200, body
    finally:
        await fake.close()


async def test_session_token_and_api_key(fake):
    up = adapter.build_request(ChatRequest("m", [user("x")]), MODEL, endpoint(fake, fake.key + ":SESSIONTOKEN"))
    assert up.headers["x-amz-security-token"] == "SESSIONTOKEN"
    status, _, _ = await send(adapter.build_request(ChatRequest("m", [user("x")]), MODEL, endpoint(fake, fake.api_key)))
    assert status == 200 and fake.last.headers["authorization"] == f"Bearer {fake.api_key}"


async def test_bad_credentials_are_authentication_errors(fake):
    for key in (f"{fake.access_key}:wrong-secret", "AKIAOTHER:secret"):
        status, headers, body = await send(adapter.build_request(ChatRequest("m", [user("x")]), MODEL, endpoint(fake, key)))
        assert status == 403
        err = adapter.classify_error(status, body, headers)
        assert err.error_type is ErrorType.AUTHENTICATION_ERROR and "wrong-secret" not in err.message
    with pytest.raises(UpstreamError):
        adapter.build_request(ChatRequest("m", [user("x")]), MODEL, endpoint(fake, "a:b:c:d"))


@pytest.mark.parametrize("seed", [0, 1, 2])
async def test_stream_event_frames_in_random_chunks(fake, seed):
    req = ChatRequest("m", [user("one two three")], stream=True)
    up = adapter.build_request(req, MODEL, endpoint(fake))
    assert up.url.endswith("/converse-stream")
    status, headers, body = await send(up)
    assert status == 200 and headers["content-type"] == "application/vnd.amazon.eventstream"
    events = decode_stream(adapter.stream_decoder(), body, seed)
    assert isinstance(events[0], StreamStart)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Echo: one two three"
    assert isinstance(events[-1], StreamEnd) and events[-1].stop_reason == "stop"
    assert events[-1].usage.output_tokens > 0
    assert sum(isinstance(e, (StreamEnd, StreamError)) for e in events) == 1


async def test_cut_stream_is_an_error(fake):
    fake.cut_stream = True
    _, _, body = await send(adapter.build_request(ChatRequest("m", [user("a b")], stream=True), MODEL, endpoint(fake)))
    events = decode_stream(adapter.stream_decoder(), body)
    assert isinstance(events[-1], StreamError) and not any(isinstance(e, StreamEnd) for e in events)
    # bytes cut inside a frame are also an error, not success
    dec = adapter.stream_decoder()
    dec.feed(body[:-3])
    assert isinstance(dec.close()[-1], StreamError)


async def test_exception_inside_stream(fake):
    fake.stream_exception = ("throttlingException", "Too many requests, please wait before trying again.")
    _, _, body = await send(adapter.build_request(ChatRequest("m", [user("a")], stream=True), MODEL, endpoint(fake)))
    events = decode_stream(adapter.stream_decoder(), body, 3)
    assert isinstance(events[-1], StreamError) and events[-1].error_type == "RATE_LIMIT_ERROR"


async def test_tool_use_round_trip(fake):
    req = ChatRequest("m", [user("weather?")], tools=[WEATHER], tool_choice=ToolChoice("tool", "get_weather"))
    _, _, body = await send(adapter.build_request(req, MODEL, endpoint(fake)))
    assert fake.last.json()["toolConfig"] == {
        "tools": [{"toolSpec": {"name": "get_weather", "description": "Weather", "inputSchema": {"json": WEATHER.parameters}}}],
        "toolChoice": {"tool": {"name": "get_weather"}}}
    resp = adapter.parse_response(body)
    call = resp.parts[0]
    assert isinstance(call, ToolCall) and call.id == "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q"
    assert orjson.loads(call.arguments) == {"city": "Paris"} and resp.stop_reason == "tool_calls"

    history = [user("weather?"), Message("assistant", [call]),
               Message("tool", [ToolResult(call.id, [TextPart("sunny")])]), user("thanks")]
    status, _, body2 = await send(adapter.build_request(ChatRequest("m", history, tools=[WEATHER]), MODEL, endpoint(fake)))
    assert status == 200
    sent = fake.last.json()
    # the tool result and the following user text share one user turn
    assert sent["messages"][2] == {"role": "user", "content": [
        {"toolResult": {"toolUseId": call.id, "content": [{"text": "sunny"}], "status": "success"}}, {"text": "thanks"}]}
    assert "toolConfig" in sent and "toolChoice" not in sent["toolConfig"]


@pytest.mark.parametrize("tools, choice", [([], None), ([WEATHER], ToolChoice("none"))])
async def test_a_request_offering_no_tools_sends_its_tool_history_as_text(fake, tools, choice):
    # Converse refuses toolUse/toolResult blocks without a toolConfig, and has no `none` choice: a
    # chat client's last call of an agent loop (no tools, or tool_choice none) still gets an answer,
    # and the model is offered no tool to call.
    call = ToolCall("tooluse_1", "get_weather", '{"city": "Paris"}')
    history = [user("weather?"), Message("assistant", [TextPart("Looking."), call]),
               Message("tool", [ToolResult(call.id, [TextPart("sunny")]), ToolResult("tooluse_2", [], is_error=True)]),
               user("sum it up")]
    status, _, _ = await send(adapter.build_request(ChatRequest("m", history, tools=tools, tool_choice=choice),
                                                    MODEL, endpoint(fake)))
    assert status == 200
    sent = fake.last.json()
    assert "toolConfig" not in sent
    assert sent["messages"][1:] == [
        {"role": "assistant", "content": [
            {"text": "Looking."}, {"text": '[tool call tooluse_1: get_weather, arguments {"city": "Paris"}]'}]},
        {"role": "user", "content": [{"text": "[result of tool call tooluse_1]\nsunny"},
                                     {"text": "[result of tool call tooluse_2 (an error)] (no output)"},
                                     {"text": "sum it up"}]}]


async def test_tool_ids_outside_converse_s_rule_are_made_valid_and_still_pair_up(fake):
    # ToolUseId is `[a-zA-Z0-9_.:-]+`, at most 64 characters (the service model; the fake checks it):
    # Kimi's `functions.lookup:0` is taken as it is, an id with `/` or one too long is replaced.
    ids = ["functions.lookup:0", "call/1", "x" * 70]
    history = [user("go"), Message("assistant", [ToolCall(i, "get_weather", "{}") for i in ids]),
               Message("tool", [ToolResult(i, [TextPart("ok")]) for i in ids])]
    status, _, _ = await send(adapter.build_request(ChatRequest("m", history, tools=[WEATHER]), MODEL, endpoint(fake)))
    assert status == 200
    sent = fake.last.json()["messages"]
    uses = [b["toolUse"]["toolUseId"] for b in sent[1]["content"]]
    assert uses == [b["toolResult"]["toolUseId"] for b in sent[2]["content"]]
    assert uses[0] == "functions.lookup:0" and len(set(uses)) == 3 and all(len(i) <= 64 for i in uses)


@pytest.mark.parametrize("messages", [
    [],  # a chat client's system prompt alone
    [Message("assistant", [TextPart("Hi! How can I help?")]), user("weather?")],  # a chatbot's greeting first
])
async def test_a_conversation_gets_a_user_turn_first(fake, messages):
    # "A conversation must start with a user message." (the fake refuses it, as Converse does)
    status, _, _ = await send(adapter.build_request(ChatRequest("m", messages, system=["be brief"]), MODEL,
                                                    endpoint(fake)))
    assert status == 200
    sent = fake.last.json()["messages"]
    assert sent[0] == {"role": "user", "content": [{"text": OPENING_USER_TEXT}]}
    assert [m["role"] for m in sent] == ["user", "assistant", "user"][:len(messages) + 1]


@pytest.mark.parametrize("model, kept", [("anthropic.claude-sonnet-4-5-20250929-v1:0", {"temperature": 0.3}),
                                         ("meta.llama3-3-70b-instruct-v1:0", {"temperature": 0.3, "topP": 0.9})])
async def test_claude_gets_temperature_or_top_p_not_both(model, kept):
    # Claude from Sonnet 4.5 on refuses both (the fake relays its refusal as Converse does); other
    # families take both.
    fake = await FakeBedrock(models=(model,)).start()
    try:
        status, _, _ = await send(adapter.build_request(ChatRequest("m", [user("hi")], temperature=0.3, top_p=0.9),
                                                        model, endpoint(fake)))
        assert status == 200
        config = fake.last.json()["inferenceConfig"]
        assert {k: v for k, v in config.items() if k in ("temperature", "topP")} == kept
    finally:
        await fake.close()


def test_claude_gets_no_blank_stop_sequences():
    # Claude refuses an empty or whitespace-only stop sequence (claude.stop_sequences); other
    # families keep theirs.
    req = ChatRequest("m", [user("hi")], stop=["\n", "END"])
    assert build_body(req, MODEL)["inferenceConfig"]["stopSequences"] == ["END"]
    assert build_body(req, "meta.llama3-3-70b-instruct-v1:0")["inferenceConfig"]["stopSequences"] == ["\n", "END"]


async def test_blank_texts_never_reach_converse(fake):
    # Converse refuses a blank text block anywhere (tests/fakes/bedrock_upstream.py cites the reports):
    # a tool that printed nothing, whitespace between blocks, an empty system prompt. Refused once, a
    # turn is refused on every later turn too, since the history keeps it.
    call = ToolCall("tooluse_1", "get_weather", "{}")
    history = [user("weather?"), Message("assistant", [TextPart("\n\n"), call]),
               Message("tool", [ToolResult(call.id, [TextPart("")])]),
               Message("tool", [ToolResult("tooluse_2", [TextPart("  "), TextPart("partly cloudy")])]), user("thanks")]
    req = ChatRequest("m", history, system=["", "be brief"], tools=[WEATHER])
    status, _, body = await send(adapter.build_request(req, MODEL, endpoint(fake)))
    assert status == 200, body
    sent = fake.last.json()
    assert sent["system"] == [{"text": "be brief"}]
    assert sent["messages"][1] == {"role": "assistant", "content": [
        {"toolUse": {"toolUseId": "tooluse_1", "name": "get_weather", "input": {}}}]}
    results = [block["toolResult"]["content"] for block in sent["messages"][2]["content"] if "toolResult" in block]
    assert results == [[{"text": "(no output)"}], [{"text": "partly cloudy"}]]


async def test_tool_use_stream(fake):
    req = ChatRequest("m", [user("weather?")], tools=[WEATHER], stream=True)
    _, _, body = await send(adapter.build_request(req, MODEL, endpoint(fake)))
    events = decode_stream(adapter.stream_decoder(), body, 7)
    start = next(e for e in events if isinstance(e, ToolCallStart))
    assert start.index == 0 and start.name == "get_weather"
    assert orjson.loads("".join(e.arguments for e in events if isinstance(e, ToolCallDelta))) == {"city": "Paris"}
    assert events[-1].stop_reason == "tool_calls"


async def test_images(fake):
    msg = Message("user", [TextPart("look"), ImagePart(data="iVBORw0K", media_type="image/png")])
    _, _, body = await send(adapter.build_request(ChatRequest("m", [msg]), MODEL, endpoint(fake)))
    assert fake.last.json()["messages"][0]["content"][1] == {"image": {"format": "png", "source": {"bytes": "iVBORw0K"}}}
    assert adapter.parse_response(body).parts == [TextPart("Echo: look [1 image(s)]")]
    with pytest.raises(UpstreamError):
        adapter.build_request(ChatRequest("m", [Message("user", [ImagePart(url="https://x/y.png")])]), MODEL, endpoint(fake))


async def test_unknown_model(fake):
    status, headers, body = await send(adapter.build_request(ChatRequest("m", [user("x")]), "nope.model-v1:0", endpoint(fake)))
    assert status == 400
    assert adapter.classify_error(status, body, headers).error_type is ErrorType.MODEL_NOT_FOUND


@pytest.mark.parametrize(("status", "error_type", "message", "expected"), [
    (429, "ThrottlingException", "Too many requests, please wait before trying again.", ErrorType.RATE_LIMIT_ERROR),
    (429, "ThrottlingException", "Too many tokens per day, please wait before trying again.", ErrorType.QUOTA_EXCEEDED),
    (503, "ServiceUnavailableException", "Bedrock is unable to process your request.", ErrorType.SERVICE_UNAVAILABLE),
    (429, "ModelNotReadyException", "Model is not ready for inference.", ErrorType.SERVICE_UNAVAILABLE),
    (404, "ResourceNotFoundException", "Model not found.", ErrorType.MODEL_NOT_FOUND),
    (403, "AccessDeniedException", "You don't have access to the model with the specified model ID.", ErrorType.AUTHENTICATION_ERROR),
    (400, "ValidationException", "messages.0.content: field required", ErrorType.INVALID_REQUEST),
    (408, "ModelTimeoutException", "Model timed out.", ErrorType.TIMEOUT_ERROR),
    (500, "InternalServerException", "Internal error.", ErrorType.UPSTREAM_ERROR),
    (400, "ServiceQuotaExceededException", "Your request exceeds the service quota for your account.", ErrorType.QUOTA_EXCEEDED),
])
async def test_scripted_errors(fake, status, error_type, message, expected):
    fake.fail_next(status, {"message": message}, headers={"x-amzn-ErrorType": f"{error_type}:http://internal.amazon.com/coral/com.amazon.bedrock/"})
    s, headers, body = await send(adapter.build_request(ChatRequest("m", [user("x")]), MODEL, endpoint(fake)))
    err = adapter.classify_error(s, body, headers)
    assert err.error_type is expected and err.message == message


async def test_models_listing(fake):
    status, _, body = await send(adapter.models_request(endpoint(fake)))
    assert status == 200 and fake.last.path == "/foundation-models"
    assert adapter.parse_models(body) == [MODEL]
    ep = Endpoint("e", 1, 1, "aws-bedrock", "https://bedrock-runtime.ap-northeast-1.amazonaws.com", "A:B")
    assert adapter.models_request(ep).url.startswith("https://bedrock.ap-northeast-1.amazonaws.com/foundation-models")


def test_region_resolution():
    assert region_of(Endpoint("e", 1, 1, "aws-bedrock", "https://bedrock-runtime.us-west-2.amazonaws.com", "a:b")) == "us-west-2"
    assert region_of(Endpoint("e", 1, 1, "aws-bedrock", "https://proxy.example", "a:b", {"region": "eu-central-1"})) == "eu-central-1"
    assert region_of(Endpoint("e", 1, 1, "aws-bedrock", "https://proxy.example", "a:b")) == "us-east-1"


def test_corrupt_frame_is_an_error():
    frame = bytearray(event_frame({":event-type": "messageStart", ":message-type": "event"}, b'{"role":"assistant"}'))
    frame[-1] ^= 0xFF  # break the message CRC
    dec = adapter.stream_decoder()
    assert isinstance(dec.feed(bytes(frame))[-1], StreamError)
