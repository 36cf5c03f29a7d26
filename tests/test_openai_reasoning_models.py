"""Messages clients (Claude Code) on OpenAI's models (providers/openai_models.py, openai_chat.request_body).

OpenAI refuses a `user` over 64 characters (Claude Code's `metadata.user_id` is about 150), an object tool
schema without properties (argument-less MCP tools), and, model by model, reasoning efforts, `stop`,
`parallel_tool_calls` and function tools beside an effort. The fake refuses what OpenAI documents per model
(tests/fakes/openai_upstream.REASONING_RULES).
"""

from __future__ import annotations

import pytest
from anthropic import AsyncAnthropic

from modelgate.protocols.ir import ChatRequest, Message, TextPart
from modelgate.providers.openai_chat import request_body
from modelgate.providers.openai_models import reasoning_model
from tests.fakes.openai_upstream import OUTPUT_CAPS, REASONING_RULES, RESPONSES_ONLY, FakeOpenAI

# o3, o4-mini, gpt-5, gpt-5-mini, gpt-5.1, gpt-5.2, gpt-5.4, gpt-5.6-terra, gpt-6-sol, gpt-5.2-chat-latest: those that
# serve Chat Completions, where a messages client's call is converted to
MODELS = tuple(model for model in REASONING_RULES if model not in RESPONSES_ONLY)
CLAUDE_CODE_USER = '{"device_id":"' + "a" * 64 + '","account_uuid":"4f1c0e9a-2b7d-4c55-9e0f-1a2b3c4d5e6f","session_id":"0b5e"}'
TOOLS = [{"name": "Read", "description": "Read a file",
          "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
         {"name": "ListMcpResources", "description": "List resources", "input_schema": {"type": "object"}}]


@pytest.fixture
async def openai_upstream():
    fake = await FakeOpenAI(models=("gpt-test", *MODELS)).start()
    yield fake
    await fake.close()


async def messages_client(gateway, fake) -> AsyncAnthropic:
    wired = await gateway.wire(fake.base_url, ["gpt-test", *MODELS], kind="openai", name="openai")
    return AsyncAnthropic(base_url=f"{gateway.url}/alt", api_key=wired.key, max_retries=0)


async def test_claude_code_s_requests_reach_every_openai_reasoning_generation(gateway, openai_upstream):
    api = await messages_client(gateway, openai_upstream)
    for model in ("gpt-test", *MODELS):
        for budget in (2048, 8000, 20000):  # efforts low, medium, high
            resp = await api.messages.create(
                model=model, max_tokens=21000, thinking={"type": "enabled", "budget_tokens": budget}, tools=TOOLS,  # type: ignore[arg-type]
                tool_choice={"type": "auto", "disable_parallel_tool_use": True}, stop_sequences=["\n\nHuman:"],
                metadata={"user_id": CLAUDE_CODE_USER}, messages=[{"role": "user", "content": "hi"}])
            assert resp.content[0].text == "Echo: hi", model  # type: ignore[union-attr]
            sent = openai_upstream.last.json()
            assert sent["user"] != CLAUDE_CODE_USER and len(sent["user"]) == 64, model
            rules = REASONING_RULES.get(model)
            if rules is not None and "reasoning_effort" in sent:
                assert sent["reasoning_effort"] in rules.efforts, model


async def test_claude_code_s_highest_efforts_reach_each_model_as_its_nearest_level(gateway, openai_upstream):
    # Claude Code's /effort xhigh and max (output_config.effort beside adaptive thinking): max on gpt-5.6, xhigh
    # where the model's highest is xhigh, high below; each a level the model takes.
    api = await messages_client(gateway, openai_upstream)
    for model in MODELS:
        for effort in ("xhigh", "max"):
            resp = await api.messages.create(
                model=model, max_tokens=16000, thinking={"type": "adaptive"},  # type: ignore[arg-type]
                extra_body={"output_config": {"effort": effort}}, messages=[{"role": "user", "content": "hi"}])
            assert resp.content[0].text == "Echo: hi", (model, effort)  # type: ignore[union-attr]
            rules = reasoning_model(model)
            assert rules is not None
            assert openai_upstream.last.json().get("reasoning_effort") == rules.effort(effort), (model, effort)
    sent = {model: reasoning_model(model).effort("max") for model in ("gpt-5.6-terra", "gpt-5.4", "gpt-5.1")}  # type: ignore[union-attr]
    assert sent == {"gpt-5.6-terra": "max", "gpt-5.4": "xhigh", "gpt-5.1": "high"}


def test_a_messages_client_s_highest_effort_to_a_reasoning_model_of_unknown_levels_is_high():
    # An Azure deployment under a name of its own, marked reasoning: every reasoning model takes high.
    for effort in ("xhigh", "max"):
        req = ChatRequest("m", [Message("user", [TextPart("hi")])], thinking_effort=effort)  # type: ignore[arg-type]
        assert request_body(req, "team-deployment", reasoning=True)["reasoning_effort"] == "high"
    asked = ChatRequest("m", [Message("user", [TextPart("hi")])], reasoning_effort="max")  # the client's own level
    assert request_body(asked, "team-deployment", reasoning=True)["reasoning_effort"] == "max"


async def test_claude_code_s_max_tokens_reach_models_with_a_smaller_cap(gateway):
    # Claude Code asks for 32,000 to 64,000 tokens; gpt-4o takes at most 16,384.
    fake = await FakeOpenAI(models=tuple(OUTPUT_CAPS)).start()
    try:
        wired = await gateway.wire(fake.base_url, list(OUTPUT_CAPS), kind="openai", name="openai")
        api = AsyncAnthropic(base_url=f"{gateway.url}/alt", api_key=wired.key, max_retries=0)
        for model, cap in OUTPUT_CAPS.items():
            async with api.messages.stream(model=model, max_tokens=64000,
                                           messages=[{"role": "user", "content": "hi"}]) as stream:
                assert (await stream.get_final_message()).content[0].text == "Echo: hi", model  # type: ignore[union-attr]
            assert fake.last.json()["max_tokens"] == cap, model
    finally:
        await fake.close()


async def test_the_end_user_id_stays_one_stable_id(gateway, openai_upstream):
    api = await messages_client(gateway, openai_upstream)
    users = []
    for user_id in (CLAUDE_CODE_USER, CLAUDE_CODE_USER, CLAUDE_CODE_USER + "x", "alice"):
        await api.messages.create(model="gpt-test", max_tokens=10, metadata={"user_id": user_id},
                                  messages=[{"role": "user", "content": "hi"}])
        users.append(openai_upstream.last.json()["user"])
    assert users[0] == users[1] != users[2] and users[3] == "alice"


@pytest.mark.parametrize("name, efforts", [
    ("o3", ("low", "medium", "high")), ("o4-mini-2025-04-16", ("low", "medium", "high")),
    ("gpt-5", ("minimal", "low", "medium", "high")), ("gpt-5-mini", ("minimal", "low", "medium", "high")),
    ("gpt-5.1", ("none", "low", "medium", "high")),
    ("gpt-5.2", ("none", "low", "medium", "high", "xhigh")),  # earendil-works/pi#1334
    ("gpt-5.4-mini", ("none", "low", "medium", "high", "xhigh")), ("openai/gpt-5.5", ("none", "low", "medium", "high", "xhigh")),
    ("gpt-5.6-sol", ("none", "low", "medium", "high", "xhigh", "max")),
    ("gpt-6-sol", ("none", "low", "medium", "high", "xhigh", "max")),
    # the codex models always reason: openai/codex#6647, earendil-works/pi#4622, codex-rs/core/models.json
    ("gpt-5-codex", ("low", "medium", "high")), ("gpt-5.1-codex", ("low", "medium", "high")),
    ("gpt-5.1-codex-max", ("low", "medium", "high", "xhigh")), ("gpt-5.2-codex", ("low", "medium", "high", "xhigh")),
    ("gpt-5.3-codex", ("low", "medium", "high", "xhigh")),
    ("gpt-5-codex-mini", ("medium", "high")), ("gpt-5.1-codex-mini", ("medium", "high")),
    ("gpt-5-pro", ("high",)), ("gpt-5.4-pro", ("medium", "high", "xhigh")),  # OpenAI's reference; models.dev#2296
    ("gpt-5-chat-latest", ()),  # "Unsupported parameter: 'reasoning.effort'" (Laisky/one-api#120)
    ("gpt-5.2-chat-latest", ("medium",)),  # medium only (BerriAI/litellm#38842)
])
def test_the_generation_is_read_from_the_name(name, efforts):
    model = reasoning_model(name)
    assert model is not None and model.efforts == efforts


@pytest.mark.parametrize("name", ["gpt-4o", "gpt-4.1-mini", "gpt-oss-120b", "omni-moderation", "llama-3", "o"])
def test_other_models_are_no_openai_reasoning_model(name):
    assert reasoning_model(name) is None


@pytest.mark.parametrize("name, requested, sent", [
    ("gpt-5.1", "minimal", "low"),  # "'minimal' is not supported with the 'gpt-5.1' model"
    ("gpt-5", "none", "minimal"),  # "All models before gpt-5.1 ... do not support none"
    ("o3", "none", "low"),
    ("o3", "xhigh", "high"),
    ("gpt-5.4", "xhigh", "xhigh"),
    ("gpt-5.2", "xhigh", "xhigh"),  # kept, no longer moved to high
    ("gpt-5.4", "max", "xhigh"),
    ("gpt-6-sol", "max", "max"),
    ("gpt-5.1-codex", "none", "low"),  # "'none' is not supported with the 'gpt-5.1-codex' model"
    ("gpt-5.2-codex", "minimal", "low"),
    ("gpt-5-pro", "medium", "high"),
    ("gpt-5.4", "ultra", "ultra"),  # a level newer than the table: as the client asked
    ("gpt-5.2-chat-latest", "high", "medium"),
    ("gpt-5-chat-latest", "high", None),
])
def test_an_effort_moves_to_the_nearest_level_the_model_takes(name, requested, sent):
    model = reasoning_model(name)
    assert model is not None and model.effort(requested) == sent
