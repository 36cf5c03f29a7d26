from __future__ import annotations

import orjson
import pytest

from modelgate.errors import ErrorType
from modelgate.protocols.ir import (
    ChatRequest,
    Message,
    StreamEnd,
    StreamError,
    TextDelta,
    TextPart,
    Tool,
    ToolCall,
    ToolCallStart,
)
from modelgate.providers.azure_openai import DEFAULT_API_VERSION, AzureOpenAIAdapter
from modelgate.providers.base import Endpoint
from tests.fakes.azure_upstream import FakeAzure
from tests.fakes.upstream_base import decode_stream, send

adapter = AzureOpenAIAdapter()
DEPLOYMENT = "prod-gpt4o"


@pytest.fixture
async def fake():
    f = await FakeAzure().start()
    yield f
    await f.close()


def endpoint(fake: FakeAzure, key: str | None = None, **options) -> Endpoint:
    return Endpoint("p1:k1", 1, 1, "azure-openai", fake.base_url, key or "az-key-1", options)


def user(text: str) -> Message:
    return Message("user", [TextPart(text)])


async def test_plain_request(fake):
    req = ChatRequest("m", [user("hello azure")], max_tokens=50, temperature=0.1)
    status, _, body = await send(adapter.build_request(req, DEPLOYMENT, endpoint(fake)))
    assert status == 200
    rec = fake.last
    assert rec.path == f"/openai/deployments/{DEPLOYMENT}/chat/completions"
    assert rec.query == {"api-version": DEFAULT_API_VERSION}
    assert rec.headers["api-key"] == "az-key-1" and "authorization" not in rec.headers
    sent = rec.json()
    assert sent["messages"] == [{"role": "user", "content": "hello azure"}] and sent["max_tokens"] == 50
    resp = adapter.parse_response(body)
    assert resp.parts == [TextPart("Echo: hello azure")]
    assert resp.model == "gpt-4o-2024-08-06" and resp.stop_reason == "stop"
    assert resp.usage.input_tokens > 0


async def test_api_version_option(fake):
    req = ChatRequest("m", [user("x")])
    await send(adapter.build_request(req, DEPLOYMENT, endpoint(fake, api_version="2025-04-01-preview")))
    assert fake.last.query["api-version"] == "2025-04-01-preview"
    status, headers, body = await send(adapter.build_request(req, DEPLOYMENT, endpoint(fake, api_version="1999-01-01")))
    assert status == 404


@pytest.mark.parametrize("seed", [0, 4])
async def test_stream_with_azure_prompt_filter_chunk(fake, seed):
    req = ChatRequest("m", [user("one two three")], stream=True)
    status, _, body = await send(adapter.build_request(req, DEPLOYMENT, endpoint(fake)))
    assert status == 200
    assert fake.last.json()["stream_options"] == {"include_usage": True}
    events = decode_stream(adapter.stream_decoder(), body, seed)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Echo: one two three"
    assert isinstance(events[-1], StreamEnd) and events[-1].usage.output_tokens > 0


async def test_cut_stream(fake):
    fake.cut_stream = True
    _, _, body = await send(adapter.build_request(ChatRequest("m", [user("a b")], stream=True), DEPLOYMENT, endpoint(fake)))
    assert isinstance(decode_stream(adapter.stream_decoder(), body)[-1], StreamError)


async def test_tool_calls(fake):
    tool = Tool("lookup", "Look up", {"type": "object", "properties": {"q": {"type": "string"}}})
    req = ChatRequest("m", [user("call tool please")], tools=[tool])
    _, _, body = await send(adapter.build_request(req, DEPLOYMENT, endpoint(fake)))
    call = adapter.parse_response(body).parts[0]
    assert isinstance(call, ToolCall) and call.name == "lookup" and orjson.loads(call.arguments) == {"q": "q-value"}
    _, _, body = await send(adapter.build_request(ChatRequest("m", [user("call tool please")], tools=[tool], stream=True),
                                                  DEPLOYMENT, endpoint(fake)))
    events = decode_stream(adapter.stream_decoder(), body, 2)
    assert any(isinstance(e, ToolCallStart) and e.name == "lookup" for e in events)
    assert events[-1].stop_reason == "tool_calls"


async def test_errors(fake):
    req = ChatRequest("m", [user("x")])
    status, headers, body = await send(adapter.build_request(req, "no-such-deployment", endpoint(fake)))
    assert status == 404
    assert adapter.classify_error(status, body, headers).error_type is ErrorType.MODEL_NOT_FOUND
    status, headers, body = await send(adapter.build_request(req, DEPLOYMENT, endpoint(fake, "wrong")))
    assert status == 401
    assert adapter.classify_error(status, body, headers).error_type is ErrorType.AUTHENTICATION_ERROR

    fake.fail_next(429, {"error": {"code": "429", "message": "Requests to the ChatCompletions_Create Operation under "
                                   "Azure OpenAI API version 2024-10-21 have exceeded token rate limit of your current "
                                   "OpenAI S0 pricing tier. Please retry after 6 seconds."}}, headers={"retry-after": "6"})
    status, headers, body = await send(adapter.build_request(req, DEPLOYMENT, endpoint(fake)))
    err = adapter.classify_error(status, body, headers)
    assert err.error_type is ErrorType.RATE_LIMIT_ERROR and err.retry_after == 6.0

    fake.fail_next(400, {"error": {"message": "The response was filtered due to the prompt triggering Azure OpenAI's "
                                   "content management policy.", "type": None, "param": "prompt",
                                   "code": "content_filter", "status": 400}})
    status, headers, body = await send(adapter.build_request(req, DEPLOYMENT, endpoint(fake)))
    assert adapter.classify_error(status, body, headers).error_type is ErrorType.INVALID_REQUEST

    fake.fail_next(503, {"error": {"code": "ServiceUnavailable", "message": "The service is temporarily unable to process your request."}})
    status, headers, body = await send(adapter.build_request(req, DEPLOYMENT, endpoint(fake)))
    assert adapter.classify_error(status, body, headers).error_type is ErrorType.SERVICE_UNAVAILABLE


async def test_models(fake):
    status, _, body = await send(adapter.models_request(endpoint(fake)))
    assert status == 200 and fake.last.path == "/openai/models" and fake.last.headers["api-key"] == "az-key-1"
    assert adapter.parse_models(body) == ["gpt-4o-2024-08-06"]


async def test_native_pass_through_uses_azure_url(fake):
    up = adapter.build_native_request({"model": "ignored", "messages": [{"role": "user", "content": "hi"}]},
                                      DEPLOYMENT, endpoint(fake), stream=False)
    status, _, body = await send(up)
    assert status == 200 and fake.last.headers["api-key"] == "az-key-1"
    assert orjson.loads(body)["choices"][0]["message"]["content"] == "Echo: hi"
