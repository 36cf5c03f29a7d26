"""Every built-in provider kind: it has an adapter and a usable base URL, and a
request built for it reaches a fake of that provider's wire format at the
provider's real path with the provider's real auth header, and comes back
parsed (plain and streamed)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable
from urllib.parse import urlparse

import orjson
import pytest

from modelgate.errors import ErrorType
from modelgate.protocols.ir import ChatRequest, Message, StreamEnd, StreamStart, TextDelta, TextPart
from modelgate.providers.base import Endpoint
from modelgate.providers.registry import KINDS, get_kind
from tests.fakes.anthropic_upstream import FakeAnthropic
from tests.fakes.azure_upstream import FakeAzure
from tests.fakes.bedrock_upstream import FakeBedrock
from tests.fakes.cohere_upstream import FakeCohere
from tests.fakes.gemini_upstream import FakeGemini
from tests.fakes.ollama_upstream import FakeOllama
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.upstream_base import FakeUpstream, decode_stream, send

KEY = "upstream-secret-1"
MODEL = "m-1"

EXPECTED_KINDS = {
    "openai", "openai-compatible", "azure-openai", "anthropic", "gemini", "aws-bedrock", "cohere", "mistral",
    "deepseek", "groq", "together", "fireworks", "openrouter", "xai", "perplexity", "moonshot", "zhipu",
    "dashscope", "siliconflow", "ollama", "vllm", "vertex-ai", "minimax",
}


@dataclass
class Case:
    fake: Callable[[], FakeUpstream]
    base_path: str  # appended to the fake's origin to make the provider's base URL
    chat_path: str
    auth: tuple[str, str | None] | None  # (header, value) the provider checks; None value: present (signed)
    key: str = KEY
    options: dict[str, Any] | None = None


class FakeUsageUnasked(FakeOpenAI):
    """A chat-completions provider that reports stream usage without `stream_options` (Mistral,
    Perplexity, Zhipu): the gateway must not send the option, and still gets usage."""

    async def _stream(self, request, body):
        assert "stream_options" not in body, "this provider rejects or ignores stream_options"
        return await super()._stream(request, {**body, "stream_options": {"include_usage": True}})


def _chat_case(kind: str) -> Case:
    default = KINDS[kind].default_base_url or "http://self-hosted/v1"
    path = urlparse(default).path.rstrip("/")
    unasked = getattr(KINDS[kind].adapter, "stream_usage_option", True) is False
    fake_class = FakeUsageUnasked if unasked else FakeOpenAI
    return Case(lambda: fake_class(api_key=KEY, models=(MODEL,), base_path=path), path,
                f"{path}/chat/completions", ("authorization", f"Bearer {KEY}"))


CHAT_KINDS = ["openai", "openai-compatible", "mistral", "deepseek", "groq", "together", "fireworks", "openrouter",
              "xai", "perplexity", "moonshot", "zhipu", "dashscope", "siliconflow", "vllm", "minimax"]

CASES: dict[str, Case] = {kind: _chat_case(kind) for kind in CHAT_KINDS}
CASES.update({
    "azure-openai": Case(lambda: FakeAzure(api_key=KEY, deployments={MODEL: "gpt-4o-2024-08-06"}), "",
                         f"/openai/deployments/{MODEL}/chat/completions", ("api-key", KEY)),
    "anthropic": Case(lambda: FakeAnthropic(api_key=KEY, models=(MODEL,)), "", "/v1/messages", ("x-api-key", KEY)),
    "gemini": Case(lambda: FakeGemini(api_key=KEY, models=(MODEL,)), "/v1beta",
                   f"/v1beta/models/{MODEL}:generateContent", ("x-goog-api-key", KEY)),
    "cohere": Case(lambda: FakeCohere(api_key=KEY, models=(MODEL,)), "", "/v2/chat", ("authorization", f"Bearer {KEY}")),
    "ollama": Case(lambda: FakeOllama(models=(MODEL,)), "", "/api/chat", None, key=""),
    "aws-bedrock": Case(lambda: FakeBedrock(access_key="AKIAKEY", secret_key=KEY, models=(MODEL,)), "",
                        f"/model/{MODEL}/converse", ("x-amz-date", None), key=f"AKIAKEY:{KEY}",
                        options={"region": "eu-west-1"}),
})


def test_all_kinds_are_registered():
    # ...and the built-in mock, which is no provider
    assert set(KINDS) == EXPECTED_KINDS | {"mock"}
    with pytest.raises(KeyError):
        get_kind("nope")


@pytest.mark.parametrize("kind", sorted(EXPECTED_KINDS))
def test_kind_has_adapter_and_base_url(kind):
    spec = get_kind(kind)
    assert spec.name == kind and spec.label and spec.docs_url.startswith("https://")
    for method in ("build_request", "parse_response", "stream_decoder", "classify_error", "models_request",
                   "parse_models"):
        assert callable(getattr(spec.adapter, method))
    assert isinstance(spec.adapter.wire, str) and spec.adapter.wire
    if spec.default_base_url is None:
        assert spec.base_url_note, f"{kind} has no default base URL and no note saying what to enter"
    else:
        url = urlparse(spec.default_base_url)
        assert url.scheme == ("http" if kind == "ollama" else "https") and url.netloc


@pytest.mark.parametrize("kind", sorted(CASES))
async def test_request_reaches_the_provider_path_with_its_auth(kind):
    case = CASES[kind]
    spec = get_kind(kind)
    fake = await case.fake().start()
    try:
        endpoint = Endpoint("p1:k1", 1, 1, kind, fake.origin + case.base_path, case.key, case.options or {})
        req = ChatRequest("client-model", [Message("user", [TextPart("hello gateway")])], max_tokens=200)
        status, headers, body = await send(spec.adapter.build_request(req, MODEL, endpoint))
        assert status == 200, body
        assert fake.last.path == case.chat_path
        if case.auth:
            header, value = case.auth
            assert fake.last.headers[header] == value if value is not None else fake.last.headers[header]
        resp = spec.adapter.parse_response(body)
        assert "".join(p.text for p in resp.parts if isinstance(p, TextPart)) == "Echo: hello gateway"
        assert resp.stop_reason == "stop" and resp.usage.input_tokens > 0

        req.stream = True
        status, _, body = await send(spec.adapter.build_request(req, MODEL, endpoint))
        assert status == 200
        events = decode_stream(spec.adapter.stream_decoder(), body, seed=len(kind))
        assert isinstance(events[0], StreamStart) and isinstance(events[-1], StreamEnd)
        assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Echo: hello gateway"
        assert events[-1].usage is not None and events[-1].usage.output_tokens > 0

        status, _, body = await send(spec.adapter.models_request(endpoint))
        assert status == 200 and spec.adapter.parse_models(body)

        # A wrong key is refused by the fake and classified as an authentication failure.
        if case.auth:
            wrong = "AKIAKEY:wrong-key" if kind == "aws-bedrock" else "wrong-key"
            bad = Endpoint("p1:k2", 1, 2, kind, endpoint.base_url, wrong, endpoint.options)
            status, headers, body = await send(spec.adapter.build_request(req, MODEL, bad))
            assert status in (400, 401, 403)
            err = spec.adapter.classify_error(status, body, headers)
            assert err.error_type is ErrorType.AUTHENTICATION_ERROR
            assert "wrong-key" not in err.message
    finally:
        await fake.close()


@pytest.mark.parametrize(("kind", "status", "body", "expected"), [
    ("mistral", 400, {"object": "error", "message": "Invalid model: mistral-nope", "type": "invalid_model",
                      "param": None, "code": "1500"}, ErrorType.MODEL_NOT_FOUND),
    ("together", 404, {"error": {"message": "Unable to access model foo.", "type": "invalid_request_error",
                                 "param": None, "code": "model_not_available"}}, ErrorType.MODEL_NOT_FOUND),
    ("openrouter", 400, {"error": {"message": "foo/bar is not a valid model ID", "code": 400}}, ErrorType.MODEL_NOT_FOUND),
    ("openrouter", 402, {"error": {"message": "Insufficient credits.", "code": 402}}, ErrorType.QUOTA_EXCEEDED),
    ("perplexity", 400, {"error": {"message": "Invalid model 'x'.", "type": "invalid_model", "code": 400}},
     ErrorType.MODEL_NOT_FOUND),
    ("moonshot", 429, {"error": {"message": "Your account is suspended, please check your plan and billing details",
                                 "type": "exceeded_current_quota_error"}}, ErrorType.QUOTA_EXCEEDED),
    ("moonshot", 429, {"error": {"message": "max organization concurrency: 3", "type": "rate_limit_reached_error"}},
     ErrorType.RATE_LIMIT_ERROR),
    ("zhipu", 429, {"error": {"code": "1113", "message": "余额不足或无可用资源包,请充值。"}}, ErrorType.QUOTA_EXCEEDED),
    ("zhipu", 400, {"error": {"code": "1211", "message": "模型不存在，请检查模型代码。"}}, ErrorType.MODEL_NOT_FOUND),
    ("zhipu", 429, {"error": {"code": "1302", "message": "您当前使用该API的并发数过高，请降低并发"}}, ErrorType.RATE_LIMIT_ERROR),
    ("dashscope", 400, {"error": {"code": "Arrearage", "message": "Access denied, please make sure your account is in good standing.",
                                  "type": "Arrearage"}}, ErrorType.QUOTA_EXCEEDED),
    ("dashscope", 400, {"error": {"code": "data_inspection_failed", "message": "Input data may contain inappropriate content.",
                                  "type": "data_inspection_failed"}}, ErrorType.INVALID_REQUEST),
    ("siliconflow", 400, {"code": 20012, "message": "Model does not exist. Please check it carefully.", "data": None},
     ErrorType.MODEL_NOT_FOUND),
    ("siliconflow", 403, {"code": 30001, "message": "Sorry, your account balance is insufficient", "data": None},
     ErrorType.QUOTA_EXCEEDED),
    ("deepseek", 402, {"error": {"message": "Insufficient Balance", "type": "unknown_error", "param": None,
                                 "code": "invalid_request_error"}}, ErrorType.QUOTA_EXCEEDED),
    ("vllm", 404, {"object": "error", "message": "The model `x` does not exist.", "type": "NotFoundError",
                   "param": None, "code": 404}, ErrorType.MODEL_NOT_FOUND),
])
def test_provider_specific_error_codes(kind, status, body, expected):
    err = get_kind(kind).adapter.classify_error(status, orjson.dumps(body), {})
    assert err.error_type is expected


def test_mistral_request_adjustments():
    adapter = get_kind("mistral").adapter
    req = ChatRequest("m", [Message("user", [TextPart("x")])], seed=42, user="u1", stream=True)
    body = orjson.loads(adapter.build_request(req, "mistral-small-latest", Endpoint("e", 1, 1, "mistral",
                                                                                    "https://api.mistral.ai/v1", "k")).body)
    assert body["random_seed"] == 42 and "seed" not in body and "user" not in body and "stream_options" not in body
    native = adapter.build_native_request({"model": "x", "messages": [], "seed": 1, "stream": True},
                                          "mistral-small-latest", Endpoint("e", 1, 1, "mistral", "https://api.mistral.ai/v1", "k"), True)
    sent = orjson.loads(native.body)
    assert sent["random_seed"] == 1 and "stream_options" not in sent and sent["model"] == "mistral-small-latest"
