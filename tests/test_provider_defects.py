"""Provider defects a real user of each provider would hit (issue 13, items 1-6).

Each test states what the real service sends or demands, with its source."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest

from modelgate.errors import ErrorType, UpstreamError
from modelgate.protocols.chat import ChatCodec
from modelgate.protocols.ir import (
    ChatRequest,
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
    ToolResult,
)
from modelgate.protocols.messages import MessagesCodec
from modelgate.providers.base import Endpoint
from modelgate.providers.bedrock import BedrockAdapter, region_of
from modelgate.providers.registry import KINDS

CAPTURES = Path(__file__).parent / "captures"


def endpoint(kind: str, base_url: str | None = None, options: dict | None = None, key: str = "k") -> Endpoint:
    return Endpoint("p1:k1", 1, 1, kind, base_url or KINDS[kind].default_base_url or "http://h/v1", key,
                    options or {})


def sse(*chunks: dict | str) -> bytes:
    return b"".join(b"data: " + (c.encode() if isinstance(c, str) else orjson.dumps(c)) + b"\n\n" for c in chunks)


def decode(kind: str, raw: bytes) -> list:
    decoder = KINDS[kind].adapter.stream_decoder()
    return decoder.feed(raw) + decoder.close()


def tool_history(call_id: str) -> ChatRequest:
    """A second turn: the assistant called a tool, the client sends its result back."""
    return ChatRequest(
        model="m",
        messages=[
            Message("user", [TextPart("weather in Paris?")]),
            Message("assistant", [ThinkingPart("I should call the tool."),
                                  ToolCall(call_id, "weather", '{"city":"Paris"}')]),
            Message("tool", [ToolResult(call_id, [TextPart("sunny")])]),
        ],
        tools=[Tool("weather", "weather of a city", {"type": "object", "properties": {"city": {"type": "string"}}})],
    )


def body_of(kind: str, req: ChatRequest) -> dict:
    return orjson.loads(KINDS[kind].adapter.build_request(req, "m", endpoint(kind)).body)


# --- 1. Mistral tool-call ids ------------------------------------------------------------------
# Mistral: 400 "Tool call id was toolu_01... but must be a-z, A-Z, 0-9, with a length of 9."
# (reported in langchain-ai/langchain#24668, jackmpcollins/magentic#276)

MISTRAL_ID = re.compile(r"[a-zA-Z0-9]{9}")


@pytest.mark.parametrize("client_id", ["toolu_01A09q90qw90lq917835lq9", "call_abc123XYZ", "x", "abcDEF12_"])
def test_mistral_tool_ids_are_mapped_to_nine_alphanumerics_and_pair_up(client_id):
    body = body_of("mistral", tool_history(client_id))
    call_id = body["messages"][1]["tool_calls"][0]["id"]
    assert MISTRAL_ID.fullmatch(call_id)
    assert body["messages"][2]["tool_call_id"] == call_id


def test_mistral_tool_ids_are_stable_across_turns_and_distinct():
    first = body_of("mistral", tool_history("toolu_01"))["messages"][1]["tool_calls"][0]["id"]
    again = body_of("mistral", tool_history("toolu_01"))["messages"][1]["tool_calls"][0]["id"]
    other = body_of("mistral", tool_history("toolu_02"))["messages"][1]["tool_calls"][0]["id"]
    assert first == again and first != other


def test_mistral_own_ids_pass_unchanged_and_other_kinds_keep_ids():
    assert body_of("mistral", tool_history("D681PevKs"))["messages"][1]["tool_calls"][0]["id"] == "D681PevKs"
    assert body_of("openai", tool_history("toolu_01"))["messages"][1]["tool_calls"][0]["id"] == "toolu_01"


def test_mistral_tool_ids_mapped_on_the_pass_through_path_too():
    adapter = KINDS["mistral"].adapter
    client_body = {"model": "alias", "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_Xy12345678", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_Xy12345678", "content": "ok"},
    ]}
    sent = orjson.loads(adapter.build_native_request(client_body, "mistral-large", endpoint("mistral"), False).body)
    call_id = sent["messages"][1]["tool_calls"][0]["id"]
    assert MISTRAL_ID.fullmatch(call_id) and sent["messages"][2]["tool_call_id"] == call_id
    assert client_body["messages"][1]["tool_calls"][0]["id"] == "call_Xy12345678"  # the client's body untouched


# --- 2. reasoning in list form and in `reasoning` fields -------------------------------------

# A Magistral answer: content is a list of thinking and text chunks (mistralai SDK: ThinkChunk,
# TextChunk; docs.mistral.ai "Reasoning").
MAGISTRAL = {
    "id": "cmpl-1", "object": "chat.completion", "model": "magistral-medium-2509", "created": 1,
    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "tool_calls": None, "content": [
        {"type": "thinking", "thinking": [{"type": "text", "text": "2+2 is 4."}]},
        {"type": "text", "text": "4"},
    ]}}],
    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
}


def test_magistral_fixture_is_what_the_mistralai_sdk_parses():
    from mistralai.client import models

    content = models.ChatCompletionResponse.model_validate(MAGISTRAL).choices[0].message.content
    assert [type(chunk).__name__ for chunk in content] == ["ThinkChunk", "TextChunk"]


def test_mistral_content_list_becomes_thinking_and_text():
    resp = KINDS["mistral"].adapter.parse_response(orjson.dumps(MAGISTRAL))
    assert resp.parts == [ThinkingPart("2+2 is 4."), TextPart("4")]
    chat = orjson.loads(ChatCodec().encode_response(resp, "alias"))
    assert chat["choices"][0]["message"]["content"] == "4"
    messages = orjson.loads(MessagesCodec().encode_response(resp, "alias"))
    assert [(b["type"], b.get("thinking") or b.get("text")) for b in messages["content"]] == [
        ("thinking", "2+2 is 4."), ("text", "4")]


def test_mistral_stream_content_list_deltas():
    raw = sse(
        {"id": "c1", "model": "magistral", "choices": [{"index": 0, "delta": {"role": "assistant", "content": [
            {"type": "thinking", "thinking": [{"type": "text", "text": "hmm"}]}]}, "finish_reason": None}]},
        {"id": "c1", "model": "magistral", "choices": [{"index": 0, "delta": {"content": [
            {"type": "text", "text": "4"}]}, "finish_reason": None}]},
        {"id": "c1", "model": "magistral", "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "stop"}],
         "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}},
        "[DONE]")
    events = decode("mistral", raw)
    assert [e for e in events if isinstance(e, (ThinkingDelta, TextDelta))] == [ThinkingDelta("hmm"), TextDelta("4")]
    assert isinstance(events[-1], StreamEnd) and events[-1].stop_reason == "stop"


def test_groq_message_reasoning_becomes_thinking():
    # Groq with reasoning_format "parsed": message.reasoning (console.groq.com/docs/reasoning)
    body = {"id": "chatcmpl-1", "model": "qwen/qwen3-32b", "choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": "4", "reasoning": "add them"}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
    resp = KINDS["groq"].adapter.parse_response(orjson.dumps(body))
    assert resp.parts == [ThinkingPart("add them"), TextPart("4")]


def test_openrouter_delta_reasoning_becomes_thinking():
    # OpenRouter streams reasoning as delta.reasoning (openrouter.ai/docs, "Reasoning Tokens")
    raw = sse(
        {"id": "gen-1", "model": "deepseek/deepseek-r1", "choices": [{"index": 0, "delta": {
            "role": "assistant", "content": "", "reasoning": "think"}, "finish_reason": None}]},
        {"id": "gen-1", "model": "deepseek/deepseek-r1", "choices": [{"index": 0, "delta": {
            "content": "done", "reasoning": None}, "finish_reason": "stop"}]},
        "[DONE]")
    events = decode("openrouter", raw)
    assert [e for e in events if isinstance(e, (ThinkingDelta, TextDelta))] == [ThinkingDelta("think"),
                                                                                   TextDelta("done")]


# --- 3. DeepSeek thinking with tools --------------------------------------------------------
# api-docs.deepseek.com "Thinking Mode", tool calls: reasoning_content of the tool-call turns
# must be sent back, or the API answers 400.


def test_deepseek_sends_reasoning_back_on_tool_call_turns():
    body = body_of("deepseek", tool_history("call_1"))
    assert body["messages"][1]["reasoning_content"] == "I should call the tool."


def test_reasoning_not_sent_to_providers_that_do_not_ask_for_it():
    assert "reasoning_content" not in body_of("openai", tool_history("call_1"))["messages"][1]


# --- 4. classification ----------------------------------------------------------------------


def classify(kind: str, status: int, body: dict | str, headers: dict | None = None) -> UpstreamError:
    raw = body.encode() if isinstance(body, str) else orjson.dumps(body)
    return KINDS[kind].adapter.classify_error(status, raw, headers or {})


def test_a_responses_only_model_on_chat_completions_is_no_missing_model():
    # OpenAI's 404 for gpt-5-codex, gpt-5-pro on /v1/chat/completions (the model exists: the lifecycle
    # probe must not count it missing)
    error = classify("openai", 404, {"error": {
        "message": "This model is only supported in v1/responses and not in v1/chat/completions.",
        "type": "invalid_request_error", "param": "model", "code": None}})
    assert error.error_type is ErrorType.INVALID_REQUEST


def test_xai_bad_key_400_is_authentication():
    # continuedev/continue#10778, i-am-bee/beeai-framework#447: xAI's body for a bad key
    body = {"code": "Client specified an invalid argument",
            "error": "Incorrect API key provided: xa***ys. You can obtain an API key from https://console.x.ai."}
    assert classify("xai", 400, body).error_type is ErrorType.AUTHENTICATION_ERROR
    other = {"code": "Client specified an invalid argument", "error": "max_tokens must be positive"}
    assert classify("xai", 400, other).error_type is ErrorType.INVALID_REQUEST


def test_groq_daily_token_limit_is_quota_not_rate_limit():
    body = {"error": {"message": "Rate limit reached for model `llama-3.3-70b-versatile` in organization `org_01` "
                                 "service tier `on_demand` on tokens per day (TPD): Limit 100000, Used 99817, "
                                 "Requested 1043. Please try again in 12m33.5s.",
                      "type": "tokens", "code": "rate_limit_exceeded"}}
    error = classify("groq", 429, body, {"retry-after": "754"})
    assert error.error_type is ErrorType.QUOTA_EXCEEDED
    per_minute = {"error": {"message": "Rate limit reached for model `x` on tokens per minute (TPM): Limit 6000",
                            "type": "tokens", "code": "rate_limit_exceeded"}}
    assert classify("groq", 429, per_minute).error_type is ErrorType.RATE_LIMIT_ERROR


def test_openrouter_no_tool_endpoints_is_invalid_request():
    body = {"error": {"message": "No endpoints found that support tool use. To learn more about provider routing, "
                                 "visit: https://openrouter.ai/docs/provider-routing", "code": 404}}
    assert classify("openrouter", 404, body).error_type is ErrorType.INVALID_REQUEST


def test_bedrock_use_case_form_is_not_model_not_found():
    error = BedrockAdapter().classify_error(
        404, orjson.dumps({"message": "Model use case details have not been submitted for this account. Fill out "
                                      "the Anthropic use case details form before using the model."}),
        {"x-amzn-ErrorType": "ResourceNotFoundException:http://internal.amazon.com/coral/com.amazon.bedrock/"})
    assert error.error_type is ErrorType.AUTHENTICATION_ERROR


# --- 5. abnormal finish reasons -------------------------------------------------------------


def chat_answer(finish: str) -> bytes:
    return orjson.dumps({"id": "c", "model": "m", "choices": [
        {"index": 0, "finish_reason": finish, "message": {"role": "assistant", "content": "partial"}}]})


@pytest.mark.parametrize("kind, finish, expected", [
    ("deepseek", "insufficient_system_resource", ErrorType.SERVICE_UNAVAILABLE),
    ("zhipu", "network_error", ErrorType.UPSTREAM_ERROR),
    ("zhipu", "sensitive", "content_filter"),
    ("mistral", "model_length", "length"),
    ("mistral", "error", ErrorType.UPSTREAM_ERROR),
])
def test_chat_kind_finish_reasons(kind, finish, expected):
    adapter = KINDS[kind].adapter
    raw_stream = sse({"id": "c", "model": "m", "choices": [{"index": 0, "delta": {"content": "partial"},
                                                             "finish_reason": finish}]}, "[DONE]")
    events = decode(kind, raw_stream)
    if isinstance(expected, ErrorType):
        with pytest.raises(UpstreamError) as caught:
            adapter.parse_response(chat_answer(finish))
        assert caught.value.error_type is expected
        assert isinstance(events[-1], StreamError) and events[-1].error_type == expected.value
    else:
        assert adapter.parse_response(chat_answer(finish)).stop_reason == expected
        assert isinstance(events[-1], StreamEnd) and events[-1].stop_reason == expected


@pytest.mark.parametrize("finish, expected", [
    ("MALFORMED_RESPONSE", ErrorType.UPSTREAM_ERROR), ("MISSING_THOUGHT_SIGNATURE", ErrorType.UPSTREAM_ERROR),
    ("TOO_MANY_TOOL_CALLS", ErrorType.UPSTREAM_ERROR), ("OTHER", ErrorType.UPSTREAM_ERROR),
    ("IMAGE_PROHIBITED_CONTENT", "content_filter"), ("IMAGE_OTHER", "content_filter"),
    ("IMAGE_RECITATION", "content_filter"),
])
def test_gemini_finish_reasons(finish, expected):
    adapter = KINDS["gemini"].adapter
    answer = {"candidates": [{"content": {"role": "model", "parts": [{"text": "x"}]}, "finishReason": finish}]}
    events = decode("gemini", sse(answer))
    if isinstance(expected, ErrorType):
        with pytest.raises(UpstreamError) as caught:
            adapter.parse_response(orjson.dumps(answer))
        assert caught.value.error_type is expected
        assert isinstance(events[-1], StreamError) and events[-1].error_type == expected.value
    else:
        assert adapter.parse_response(orjson.dumps(answer)).stop_reason == expected
        assert isinstance(events[-1], StreamEnd) and events[-1].stop_reason == expected


def test_every_gemini_finish_reason_is_mapped_deliberately():
    from google.genai import types

    from modelgate.providers.gemini import _FINISH
    # A value a newer SDK adds fails this test until it is mapped (docs/providers.md, Finish reasons).
    assert {reason.value for reason in types.FinishReason} - set(_FINISH) == set()


@pytest.mark.parametrize("reason", ["malformed_model_output", "malformed_tool_use"])
def test_bedrock_malformed_output_is_an_upstream_error(reason):
    with pytest.raises(UpstreamError) as caught:
        BedrockAdapter().parse_response(orjson.dumps({
            "output": {"message": {"role": "assistant", "content": [{"text": "x"}]}}, "stopReason": reason,
            "usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2}}))
    assert caught.value.error_type is ErrorType.UPSTREAM_ERROR


# --- 6. Azure first chunk, Bedrock VPC endpoints, Together -----------------------------------


def test_azure_stream_start_comes_from_the_first_real_chunk():
    events = decode("azure-openai", (CAPTURES / "azure_stream.sse").read_bytes())
    start = events[0]
    assert isinstance(start, StreamStart)
    assert start.id == "chatcmpl-E892Aoy89ODQ3TyvXXjI5UFYxqwFj" and start.model == "gpt-5.4-mini-2026-03-17"
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Hi! How"
    end = events[-1]
    assert isinstance(end, StreamEnd) and end.stop_reason == "stop"
    assert (end.usage.input_tokens, end.usage.output_tokens) == (23, 11)


@pytest.mark.parametrize("base, region", [
    ("https://vpce-0a1b2c3d4e5f-abcd1234.bedrock-runtime.eu-central-1.vpce.amazonaws.com", "eu-central-1"),
    ("https://bedrock-runtime.ap-southeast-2.amazonaws.com", "ap-southeast-2"),
    ("https://bedrock-runtime-fips.us-gov-west-1.amazonaws.com", "us-gov-west-1"),
    ("https://bedrock-runtime.cn-north-1.amazonaws.com.cn", "cn-north-1"),
])
def test_bedrock_region_from_host(base, region):
    assert region_of(endpoint("aws-bedrock", base)) == region


def test_bedrock_vpc_endpoint_models_use_the_regions_control_plane():
    ep = endpoint("aws-bedrock", "https://vpce-0a1b-abcd.bedrock-runtime.eu-west-3.vpce.amazonaws.com",
                  key="AKIDEXAMPLE:secret")
    assert BedrockAdapter().models_request(ep).url.startswith("https://bedrock.eu-west-3.amazonaws.com/")


def test_together_default_base_url_and_bare_array_model_list():
    # together 3.x (the official SDK) defaults to https://api.together.ai; GET /v1/models answers a
    # bare JSON array (docs.together.ai "List all models").
    assert KINDS["together"].default_base_url == "https://api.together.ai/v1"
    listing = [{"id": "meta-llama/Llama-3.3-70B-Instruct-Turbo", "object": "model", "type": "chat"},
               {"id": "BAAI/bge-large-en-v1.5", "object": "model", "type": "embedding"}]
    assert KINDS["together"].adapter.parse_models(orjson.dumps(listing)) == [
        "meta-llama/Llama-3.3-70B-Instruct-Turbo", "BAAI/bge-large-en-v1.5"]
