"""Per-kind options and reasoning controls (issue 13 items 8-10)."""

from __future__ import annotations

import orjson
import pytest

from modelgate.errors import ErrorType, UpstreamError
from modelgate.protocols.ir import (
    ChatRequest,
    Message,
    StreamEnd,
    TextDelta,
    TextPart,
    ThinkingPart,
)
from modelgate.providers.base import Endpoint
from modelgate.providers.registry import KINDS
from tests.fakes.upstream_base import decode_stream


def endpoint(kind: str, options: dict | None = None, key: str = "k") -> Endpoint:
    return Endpoint("p1:k1", 1, 1, kind, KINDS[kind].default_base_url or "http://h/v1", key, options or {})


def hello(**fields) -> ChatRequest:
    return ChatRequest(model="alias", messages=[Message("user", [TextPart("hi")])], **fields)


def sent(kind: str, req: ChatRequest, options: dict | None = None, model: str = "m", key: str = "k") -> dict:
    return orjson.loads(KINDS[kind].adapter.build_request(req, model, endpoint(kind, options, key)).body)


def sse(*chunks) -> bytes:
    return b"".join(b"data: " + (c.encode() if isinstance(c, str) else orjson.dumps(c)) + b"\n\n" for c in chunks)


# --- DeepSeek cache hits ----------------------------------------------------------------------
# api-docs.deepseek.com "Context Caching": usage.prompt_cache_hit_tokens / prompt_cache_miss_tokens

DEEPSEEK_USAGE = {"prompt_tokens": 1200, "completion_tokens": 30, "total_tokens": 1230,
                  "prompt_cache_hit_tokens": 1024, "prompt_cache_miss_tokens": 176}


def test_deepseek_cache_hits_are_cache_reads():
    adapter = KINDS["deepseek"].adapter
    answer = {"id": "x", "model": "deepseek-chat", "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}],
        "usage": DEEPSEEK_USAGE}
    usage = adapter.parse_response(orjson.dumps(answer)).usage
    assert (usage.input_tokens, usage.cache_read_tokens, usage.output_tokens) == (1200, 1024, 30)
    events = decode_stream(adapter.stream_decoder(), sse(
        {"id": "x", "model": "deepseek-chat", "choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": None}]},
        {"id": "x", "model": "deepseek-chat", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
         "usage": DEEPSEEK_USAGE}, "[DONE]"))
    assert events[-1].usage.cache_read_tokens == 1024


# --- Ollama -----------------------------------------------------------------------------------

def test_ollama_num_ctx_keep_alive_and_think_from_provider_options():
    from ollama import Options
    from ollama._types import ChatRequest as OllamaChatRequest

    body = sent("ollama", hello(max_tokens=64), {"num_ctx": 32768, "keep_alive": "30m", "think": True})
    assert body["options"] == {"num_ctx": 32768, "num_predict": 64}
    assert body["keep_alive"] == "30m" and body["think"] is True
    request = OllamaChatRequest.model_validate(body)  # the official SDK accepts the body
    assert request.keep_alive == "30m" and set(body["options"]) <= set(Options.model_fields)
    assert "num_ctx" not in sent("ollama", hello()).get("options", {})


# --- Perplexity citations -----------------------------------------------------------------------
# docs.perplexity.ai chat completions response: `citations` (urls) and `search_results`

PPLX = {"id": "p1", "model": "sonar", "object": "chat.completion", "created": 1,
        "citations": ["https://a.example/x", "https://b.example/y"],
        "search_results": [{"title": "A", "url": "https://a.example/x", "date": "2025-01-01"},
                           {"title": "B", "url": "https://b.example/y"}],
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": "It is so [1][2]."}}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 6, "total_tokens": 11}}


def test_perplexity_search_results_are_surfaced_as_sources():
    resp = KINDS["perplexity"].adapter.parse_response(orjson.dumps(PPLX))
    text = "".join(p.text for p in resp.parts if isinstance(p, TextPart))
    assert text == ("It is so [1][2].\n\nSources:\n[1] A https://a.example/x\n[2] B https://b.example/y")
    chunk = {k: v for k, v in PPLX.items() if k != "choices"}
    events = decode_stream(KINDS["perplexity"].adapter.stream_decoder(), sse(
        {**chunk, "choices": [{"index": 0, "delta": {"content": "It is so [1]."}, "finish_reason": None}]},
        {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}, "[DONE]"))
    streamed = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert streamed.endswith("Sources:\n[1] A https://a.example/x\n[2] B https://b.example/y")
    assert isinstance(events[-1], StreamEnd)


def test_other_kinds_do_not_add_sources():
    resp = KINDS["openai"].adapter.parse_response(orjson.dumps(PPLX))
    assert [p.text for p in resp.parts] == ["It is so [1][2]."]


# --- Zhipu sampling range (its SDK: open interval (0, 1)) -------------------------------------

@pytest.mark.parametrize("given, expected", [
    ({"temperature": 0.0}, {"temperature": 0.01, "do_sample": False}),
    ({"temperature": 1.0, "top_p": 1.0}, {"temperature": 0.99, "top_p": 0.99}),
    ({"temperature": 0.7, "top_p": 0.0}, {"temperature": 0.7, "top_p": 0.01}),
])
def test_zhipu_sampling_range_as_its_sdk_sends_it(given, expected):
    body = sent("zhipu", hello(**given))
    assert {k: body[k] for k in expected} == expected
    if "do_sample" not in expected:
        assert "do_sample" not in body


# --- OpenRouter provider preferences, thinking switches ---------------------------------------

def test_openrouter_provider_preferences_pass_through_on_both_paths():
    prefs = {"order": ["anthropic", "google-vertex"], "allow_fallbacks": False, "data_collection": "deny"}
    assert sent("openrouter", hello(), {"provider": prefs})["provider"] == prefs
    adapter = KINDS["openrouter"].adapter
    native = orjson.loads(adapter.build_native_request({"model": "a", "messages": [{"role": "user", "content": "x"}]},
                                                       "m", endpoint("openrouter", {"provider": prefs}), False).body)
    assert native["provider"] == prefs
    own = {"model": "a", "messages": [], "provider": {"sort": "price"}}  # the client's own choice wins
    native = orjson.loads(adapter.build_native_request(own, "m", endpoint("openrouter", {"provider": prefs}), False).body)
    assert native["provider"] == {"sort": "price"}


@pytest.mark.parametrize("kind, options", [
    ("zhipu", {"thinking": {"type": "enabled"}}),
    ("moonshot", {"thinking": {"type": "enabled"}}),
    ("dashscope", {"enable_thinking": True, "thinking_budget": 2048}),
])
def test_thinking_switches_from_provider_options(kind, options):
    # streamed: DashScope thinks only on streams (test_reasoning_caching)
    body = sent(kind, hello(stream=True))
    assert not set(options) & set(body)
    body = sent(kind, hello(stream=True), options)
    assert {k: body[k] for k in options} == options


# --- MiniMax --------------------------------------------------------------------------------

def test_minimax_kind_sampling_errors_and_reasoning():
    kind = KINDS["minimax"]
    assert kind.default_base_url == "https://api.minimax.io/v1"
    body = sent("minimax", hello(temperature=0.0, top_p=1.5), {"reasoning_split": True})
    assert (body["temperature"], body["top_p"], body["reasoning_split"]) == (0.01, 1.0, True)
    # platform.minimax.io "Error Codes": failures come as base_resp, also with HTTP 200
    refused = orjson.dumps({"id": "", "choices": None, "base_resp": {"status_code": 1008,
                                                                    "status_msg": "insufficient balance"}})
    with pytest.raises(UpstreamError) as caught:
        kind.adapter.parse_response(refused)
    assert caught.value.error_type is ErrorType.QUOTA_EXCEEDED
    bad_key = orjson.dumps({"base_resp": {"status_code": 1004, "status_msg": "login fail"}})
    assert kind.adapter.classify_error(401, bad_key, {}).error_type is ErrorType.AUTHENTICATION_ERROR
    answer = {"id": "m1", "model": "MiniMax-M2", "choices": [{"index": 0, "finish_reason": "stop", "message": {
        "role": "assistant", "content": "4", "reasoning_details": [{"type": "reasoning.text", "text": "2+2"}]}}]}
    assert kind.adapter.parse_response(orjson.dumps(answer)).parts == [ThinkingPart("2+2"), TextPart("4")]


# --- Bedrock additionalModelRequestFields ------------------------------------------------------

def _converse_valid(body: dict) -> None:
    import botocore.session
    from botocore.validate import ParamValidator

    shape = botocore.session.get_session().get_service_model("bedrock-runtime").operation_model("Converse").input_shape
    report = ParamValidator().validate({"modelId": "m", **body}, shape)
    assert not report.has_errors(), report.generate_report()


def test_bedrock_claude_top_k_and_thinking_in_additional_fields():
    thinking = {"thinking": {"type": "enabled", "budget_tokens": 2048}}
    body = sent("aws-bedrock", hello(top_k=40), {"additional_model_request_fields": thinking},
                model="anthropic.claude-sonnet-4-20250514-v1:0", key="AKID:secret")
    assert body["additionalModelRequestFields"] == {**thinking, "top_k": 40}
    _converse_valid(body)
    other = sent("aws-bedrock", hello(top_k=40), model="amazon.nova-pro-v1:0", key="AKID:secret")
    assert "additionalModelRequestFields" not in other


# --- Gemini thinkingConfig --------------------------------------------------------------------

@pytest.mark.parametrize("kind, key", [("gemini", "k"), ("vertex-ai", "")])
def test_gemini_thinking_config_from_provider_options(kind, key):
    from google.genai import types

    options = {"thinking_budget": 1024, "include_thoughts": True, "project": "p"}
    if kind == "vertex-ai":
        from modelgate.providers import credentials
        from modelgate.providers.vertex import _credentials

        source = _credentials(endpoint(kind, options, key))
        source._value = type("Token", (), {"token": "t", "valid": True})()  # no Google call in this test
        assert isinstance(source, credentials.GoogleCredentials)
    config = sent(kind, hello(), options, model="gemini-2.5-flash", key=key)["generationConfig"]
    assert config["thinkingConfig"] == {"thinkingBudget": 1024, "includeThoughts": True}
    types.GenerationConfig.model_validate(config)


def test_the_options_each_kind_reads_are_the_documented_ones():
    """The kinds endpoint (and so the console's options field) names the options a kind reads;
    docs/providers.md "Provider options" documents the same set for every kind."""
    import re
    from pathlib import Path

    from modelgate.providers.registry import KINDS

    text = (Path(__file__).parent.parent / "docs" / "providers.md").read_text()
    table = text.split("## Provider options", 1)[1].split("\n## ", 1)[0]
    documented: dict[str, set[str]] = {}
    for row in table.splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        for kind in re.findall(r"`([a-z0-9-]+)`", cells[0]):
            documented.setdefault(kind, set()).update(re.findall(r"`([a-z_]+)", cells[1]))
    assert documented == {k.name: set(k.option_names) for k in KINDS.values() if k.option_names}
