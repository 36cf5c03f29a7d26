"""Chat and messages clients on Gemini's generations (providers/gemini.py: gemini_model, request_thinking).

Gemini 2.5 takes thinking as a budget within each model's range (Pro cannot turn it off), Gemini 3 as a
level, and none of them a budget beside a level; from 2.5 penalties are refused, from 3.x a conversation
that ends with the model; every model takes at most 5 stop sequences, fewer than 65,536 output tokens and no
empty enum value. The fake
refuses what Google documents per model (tests/fakes/gemini_upstream.MODEL_RULES).
"""

from __future__ import annotations

import pytest
from anthropic import AsyncAnthropic
from openai import AsyncOpenAI

from modelgate.protocols.ir import ChatRequest, Message, TextPart
from modelgate.providers.gemini import GeminiModel, build_body, gemini_model
from tests.fakes.gemini_upstream import MODEL_RULES, FakeGemini, generation_refusal

MODELS = tuple(MODEL_RULES)  # 2.5 Flash, Flash-Lite and Pro, 3.1 Pro, 3.8 Flash
MODE = {"type": "function", "function": {
    "name": "set_mode", "description": "Set the mode",
    "parameters": {"type": "object", "properties": {"mode": {"type": "string", "enum": ["", "fast", "slow"]}},
                   "required": ["mode"]}}}


@pytest.mark.parametrize("model, expected", [
    ("gemini-2.5-pro", GeminiModel((2, 5), "pro")),
    ("models/gemini-2.5-flash-001", GeminiModel((2, 5), "flash")),
    ("gemini-2.5-flash-lite", GeminiModel((2, 5), "flash-lite")),
    ("gemini-3.1-pro-preview", GeminiModel((3, 1), "pro")),
    ("gemini-3-flash-preview", GeminiModel((3, 0), "flash")),
    ("gemini-flash-latest", None),
])
def test_the_generation_is_read_from_the_model_id(model, expected):
    assert gemini_model(model) == expected


@pytest.fixture
async def gemini_upstream():
    fake = await FakeGemini(models=MODELS).start()
    yield fake
    await fake.close()


async def test_a_chat_client_s_request_reaches_every_generation(gateway, gemini_upstream):
    wired = await gateway.wire(gemini_upstream.base_url, list(MODELS), kind="gemini",
                               upstream_keys=(gemini_upstream.api_key,), name="gemini")
    api = AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=wired.key, max_retries=0)
    for model in MODELS:
        for effort in ("none", "minimal", "medium", "xhigh"):
            resp = await api.chat.completions.create(
                model=model, reasoning_effort=effort, presence_penalty=0.5, frequency_penalty=0.2,  # type: ignore[arg-type]
                messages=[{"role": "user", "content": "write a haiku"}, {"role": "assistant", "content": "Autumn"}])
            assert resp.choices[0].message.content, (model, effort)
        resp = await api.chat.completions.create(model=model, tools=[MODE],  # type: ignore[list-item]
                                                 messages=[{"role": "user", "content": "go fast"}])
        assert resp.choices[0].message.tool_calls, model
        sent = gemini_upstream.last.json()["tools"][0]["functionDeclarations"][0]
        assert sent["parametersJsonSchema"]["properties"]["mode"]["enum"] == ["fast", "slow"]


async def test_a_messages_client_s_thinking_and_stops_reach_every_generation(gateway, gemini_upstream):
    wired = await gateway.wire(gemini_upstream.base_url, list(MODELS), kind="gemini",
                               upstream_keys=(gemini_upstream.api_key,), name="gemini")
    api = AsyncAnthropic(base_url=f"{gateway.url}/alt", api_key=wired.key, max_retries=0)
    for model in MODELS:
        for thinking in ({"type": "enabled", "budget_tokens": 20000}, {"type": "enabled", "budget_tokens": 64000},
                         {"type": "disabled"}, {"type": "adaptive"}):
            async with api.messages.stream(
                    model=model, max_tokens=128000, thinking=thinking,  # type: ignore[arg-type]
                    stop_sequences=[f"STOP{i}" for i in range(7)], messages=[{"role": "user", "content": "hi"}]) as stream:
                answer = await stream.get_final_message()
            assert answer.content[-1].text == "Echo: hi", (model, thinking)  # type: ignore[union-attr]


@pytest.mark.parametrize("model, budget, sent", [
    ("gemini-2.5-flash", 64000, {"thinkingBudget": 24576, "includeThoughts": True}),  # its most
    ("gemini-2.5-flash-lite", 100, {"thinkingBudget": 512, "includeThoughts": True}),  # its least
    ("gemini-2.5-flash", 0, {"thinkingBudget": 0}),
    ("gemini-2.5-pro", 0, {"thinkingBudget": 128}),  # "This model only works in thinking mode."
    ("gemini-3.1-pro-preview", 20000, {"thinkingLevel": "high", "includeThoughts": True}),
    ("gemini-3.1-pro-preview", 0, {"thinkingLevel": "low"}),  # cannot be turned off: the least
    ("gemini-3.8-flash", -1, {"includeThoughts": True}),  # dynamic: the model's default level, thoughts shown
])
def test_a_thinking_budget_in_the_form_of_the_generation(model, budget, sent):
    effort = None if budget <= 0 else "low" if budget < 4096 else "medium" if budget < 16384 else "high"
    req = ChatRequest("m", [Message("user", [TextPart("hi")])], thinking_budget=budget, thinking_effort=effort)  # type: ignore[arg-type]
    body = build_body(req, {}, model)
    assert body.get("generationConfig", {}).get("thinkingConfig") == sent
    assert generation_refusal(model, body, MODEL_RULES[model]) is None


@pytest.mark.parametrize("model", MODELS)
def test_provider_options_with_a_budget_and_a_level_send_one_of_them(model):
    # An operator's options may hold both; Gemini refuses both ("You can only set only one of thinking
    # budget and thinking level."), and 2.5 any level.
    req = ChatRequest("m", [Message("user", [TextPart("hi")])])
    body = build_body(req, {"thinking_budget": 2048, "thinking_level": "low"}, model)
    config = body["generationConfig"]["thinkingConfig"]
    assert list(config) == (["thinkingLevel"] if MODEL_RULES[model].levels else ["thinkingBudget"])
    assert generation_refusal(model, body, MODEL_RULES[model]) is None
