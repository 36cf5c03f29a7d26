"""Pass-through fitted to the model behind it (claude.fitted, openai_chat.fitted, openai_responses.fitted).

A client that calls a channel's alias cannot know which model answers, and agents size their requests for no
model in particular: pi asks any Claude it does not know for manual thinking (`enabled` + `budget_tokens`),
which Claude refuses from 4.7; Claude Code asks for adaptive thinking and an effort, which Claude before 4.6
refuses; opencode asks every chat model for `max_tokens: 32000`, which gpt-4o-mini (cap 16,384) and every
OpenAI reasoning model ("Use 'max_completion_tokens' instead") refuse. The fakes refuse what the vendors
document model by model (tests/fakes/anthropic_upstream.MODEL_RULES, tests/fakes/openai_upstream.REASONING_RULES
and OUTPUT_CAPS). A body the model takes is forwarded as the client sent it; one it refuses reaches it in the
form it takes, meaning kept: the thinking the client asked for, its effort, its tool choice where allowed.
"""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest

from tests.fakes.anthropic_upstream import (
    API_KEY, BOTH_KNOBS, MODEL_RULES, ONE_SAMPLING_KNOB, FakeAnthropic, generation_refusal,
)
from tests.fakes.openai_upstream import (
    OUTPUT_CAPS, REASONING_RULES, RESPONSES_ONLY, FakeOpenAI, reasoning_refusal, responses_refusal,
)

CLAUDE = tuple(MODEL_RULES)  # Sonnet and Haiku 4.5, Opus 4.1, Sonnet 4.6, Opus 4.7 to 5.5, Fable 5.1
TOOL = {"name": "Read", "description": "Read a file",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}

# What real messages clients send beside the conversation (field-notes.md; pi 0.73's anthropic-messages API).
MESSAGES_BODIES: dict[str, dict[str, Any]] = {
    "plain": {"max_tokens": 4096},
    "claude-code": {"max_tokens": 32000, "thinking": {"type": "adaptive", "display": "summarized"},
                    "output_config": {"effort": "high"}},
    "claude-code-xhigh": {"max_tokens": 64000, "thinking": {"type": "adaptive"}, "output_config": {"effort": "xhigh"}},
    "pi-thinking": {"max_tokens": 16384, "thinking": {"type": "enabled", "budget_tokens": 8192}},
    "manual-large": {"max_tokens": 128000, "thinking": {"type": "enabled", "budget_tokens": 100000}},
    "disabled": {"max_tokens": 4096, "thinking": {"type": "disabled"}},
    "sampling": {"max_tokens": 4096, "temperature": 0.7, "top_p": 0.9},
    "top-k-thinking": {"max_tokens": 8192, "top_k": 40, "thinking": {"type": "enabled", "budget_tokens": 2048}},
    "forced-tool": {"max_tokens": 4096, "tool_choice": {"type": "tool", "name": "Read"}},
    "forced-tool-thinking": {"max_tokens": 8192, "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
                             "thinking": {"type": "enabled", "budget_tokens": 2048}},
    "effort-only": {"max_tokens": 4096, "output_config": {"effort": "medium"}},
    # an agent framework's output tool (pydantic-ai's `required` choice) with thinking on
    "forced-tool-adaptive": {"max_tokens": 8192, "tool_choice": {"type": "any"}, "thinking": {"type": "adaptive"},
                             "output_config": {"effort": "high"}},
}


def claude_refusal(body: dict[str, Any]) -> str | None:
    """What the fake (as the vendor) refuses of this body for its model."""
    if "temperature" in body and "top_p" in body and ONE_SAMPLING_KNOB.search(body["model"]):
        return BOTH_KNOBS
    return generation_refusal(body, MODEL_RULES[body["model"]])


@pytest.fixture
async def claude():
    fake = await FakeAnthropic(models=CLAUDE).start()
    yield fake
    await fake.close()


async def send_messages(gateway, fake, model: str, extra: dict[str, Any]) -> tuple[httpx.Response, dict[str, Any]]:
    wired = await gateway.wire(fake.base_url, [{"model_id": f"team-{model}", "upstream_model": model}], kind="anthropic",
                               upstream_keys=(API_KEY,), name=f"c-{model}-{len(fake.requests)}")
    client = {"model": f"team-{model}", "messages": [{"role": "user", "content": "hi"}], "tools": [TOOL], **extra}
    async with httpx.AsyncClient(timeout=30) as http:
        resp = await http.post(f"{gateway.url}/alt/v1/messages", content=orjson.dumps(client),
                               headers={"x-api-key": wired.key, "anthropic-version": "2023-06-01",
                                        "content-type": "application/json"})
    return resp, client


@pytest.mark.parametrize("model", CLAUDE)
async def test_messages_clients_reach_every_claude_generation_behind_an_alias(gateway, claude, model):
    rules = MODEL_RULES[model]
    for name, extra in MESSAGES_BODIES.items():
        resp, client = await send_messages(gateway, claude, model, extra)
        assert resp.status_code == 200, (model, name, resp.text)
        sent = claude.last.json()
        assert claude_refusal(sent) is None
        if claude_refusal({**client, "model": model}) is None:
            assert sent == {**client, "model": model}, (model, name)  # taken as sent: forwarded as sent
        elif "tool_choice" in client and rules.forced_tools:
            assert sent["tool_choice"] == client["tool_choice"], (model, name)  # the call's structure wins


async def test_manual_thinking_becomes_adaptive_with_its_effort_where_refused(gateway, claude):
    # pi's request for a Claude it does not know, to Opus 4.8 and 5.5 (adaptive only, from 4.7)
    for model in ("claude-opus-4-8", "claude-opus-5-5"):
        resp, _ = await send_messages(gateway, claude, model, MESSAGES_BODIES["pi-thinking"])
        assert resp.status_code == 200, resp.text
        sent = claude.last.json()
        assert sent["thinking"] == {"type": "adaptive"}
        assert sent["output_config"] == {"effort": "medium"}  # a budget of 8,192: the effort page's medium


async def test_adaptive_thinking_becomes_a_budget_before_4_6(gateway, claude):
    # Claude Code's request, to Sonnet 4.5 (manual thinking only, no effort parameter)
    resp, _ = await send_messages(gateway, claude, "claude-sonnet-4-5", MESSAGES_BODIES["claude-code"])
    assert resp.status_code == 200, resp.text
    sent = claude.last.json()
    assert sent["thinking"]["type"] == "enabled" and sent["thinking"]["display"] == "summarized"
    assert 1024 <= sent["thinking"]["budget_tokens"] < sent["max_tokens"] == 32000
    assert "output_config" not in sent


async def test_thinking_that_cannot_be_turned_off_gets_the_least_effort(gateway, claude):
    resp, _ = await send_messages(gateway, claude, "claude-opus-5-5", MESSAGES_BODIES["disabled"])
    assert resp.status_code == 200, resp.text
    sent = claude.last.json()
    assert "thinking" not in sent and sent["output_config"] == {"effort": "low"}


async def test_the_model_s_output_cap_bounds_max_tokens_and_its_thinking(gateway, claude):
    resp, _ = await send_messages(gateway, claude, "claude-opus-4-1", MESSAGES_BODIES["manual-large"])
    assert resp.status_code == 200, resp.text
    sent = claude.last.json()
    assert sent["max_tokens"] == 32000 and sent["thinking"] == {"type": "enabled", "budget_tokens": 31999}


OPENAI = (*REASONING_RULES, *OUTPUT_CAPS)
# What real chat clients send (opencode's openai-compatible provider; the OpenAI SDK's parameters).
CHAT_BODIES: dict[str, dict[str, Any]] = {
    "plain": {},
    "opencode": {"max_tokens": 32000, "tools": [{"type": "function", "function": {
        "name": "bash", "description": "Run a command",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}]},
    "sampling": {"max_tokens": 1000, "temperature": 0.2, "top_p": 0.5, "frequency_penalty": 0.1, "presence_penalty": 0.1},
    "stop": {"stop": ["\n\n"], "parallel_tool_calls": False, "tools": [{"type": "function", "function": {"name": "t"}}]},
    "minimal": {"max_completion_tokens": 2000, "reasoning_effort": "minimal"},
    "xhigh": {"reasoning_effort": "xhigh"},
    "max": {"reasoning_effort": "max"},
    "none": {"reasoning_effort": "none"},
}


async def each_sent(gateway, model: str, path: str, base: dict[str, Any], bodies: dict[str, dict[str, Any]]):
    """(name, client body, what the vendor got) for each of `bodies` sent to `path` under an alias of the OpenAI
    `model` (an `openai` channel); each must be answered."""
    fake = await FakeOpenAI(models=(model,)).start()
    try:
        wired = await gateway.wire(fake.base_url, [{"model_id": "team-coder", "upstream_model": model}], kind="openai")
        async with httpx.AsyncClient(timeout=30) as http:
            for name, extra in bodies.items():
                client = {"model": "team-coder", **base, **extra}
                resp = await http.post(f"{gateway.url}{path}", json=client, headers={"authorization": f"Bearer {wired.key}"})
                assert resp.status_code == 200, (model, name, resp.text)
                yield name, client, fake.last.json()
    finally:
        await fake.close()


@pytest.mark.parametrize("model", [model for model in OPENAI if model not in RESPONSES_ONLY])
async def test_chat_clients_reach_every_openai_model_behind_an_alias(gateway, model):
    messages = {"messages": [{"role": "user", "content": "hi"}]}
    async for name, client, sent in each_sent(gateway, model, "/v1/chat/completions", messages, CHAT_BODIES):
        rules = REASONING_RULES.get(model)
        if rules is not None:
            assert "max_tokens" not in sent and reasoning_refusal(sent, rules) is None, (model, name)
            if "max_tokens" in client:
                assert sent["max_completion_tokens"] == client["max_tokens"]  # the same limit, renamed
            if reasoning_refusal({**client, "model": model}, rules) is None and "max_tokens" not in client:
                assert sent == {**client, "model": model}, (model, name)
        else:  # a model that does not reason: the same request without an effort
            cap = OUTPUT_CAPS[model]
            asked = client.get("max_tokens")
            kept = {name: value for name, value in client.items() if name != "reasoning_effort"}
            assert sent == {**kept, "model": model, **({"max_tokens": cap} if asked and asked > cap else {})}


# What real Responses clients send beside the input (Codex's `reasoning` with its configured effort and a
# summary; the OpenAI Agents SDK's model settings).
RESPONSES_BODIES: dict[str, dict[str, Any]] = {
    "plain": {},
    "codex": {"reasoning": {"effort": "medium", "summary": "auto"}, "include": ["reasoning.encrypted_content"],
              "store": False, "parallel_tool_calls": False, "tools": [{
                  "type": "function", "name": "shell", "description": "Run a command", "strict": False,
                  "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}]},
    "codex-xhigh": {"reasoning": {"effort": "xhigh", "summary": "auto"}},
    "codex-ultra": {"reasoning": {"effort": "max", "summary": "auto"}},  # Codex's `ultra` and `max` (openai/codex#30585)
    "minimal": {"reasoning": {"effort": "minimal"}, "max_output_tokens": 2000},
    "none": {"reasoning": {"effort": "none"}},
    "summary-only": {"reasoning": {"summary": "auto"}},
    "sampling": {"temperature": 0.2, "top_p": 0.5, "max_output_tokens": 1000},
}


@pytest.mark.parametrize("model", OPENAI)
async def test_responses_clients_reach_every_openai_model_behind_an_alias(gateway, model):
    async for name, client, sent in each_sent(gateway, model, "/v1/responses", {"input": "hi"}, RESPONSES_BODIES):
        assert responses_refusal(sent) is None, (model, name)
        if responses_refusal({**client, "model": model}) is None:
            assert sent == {**client, "model": model}, (model, name)  # taken as sent: forwarded as sent
        else:  # what the client asked for, in the form the model takes: only the refused part goes
            assert sent["input"] == "hi" and sent.get("tools") == client.get("tools"), (model, name)
            assert (sent.get("reasoning") or {}).get("summary") == (client.get("reasoning") or {}).get("summary")


async def test_codex_s_effort_is_the_nearest_level_of_the_model_behind_the_alias(gateway):
    fake = await FakeOpenAI(models=("gpt-5", "gpt-5.1", "gpt-4.1")).start()
    try:
        wired = await gateway.wire(fake.base_url, [{"model_id": f"team-{m}", "upstream_model": m}
                                                   for m in ("gpt-5", "gpt-5.1", "gpt-4.1")], kind="openai")
        async with httpx.AsyncClient(timeout=30) as http:
            async def reasoning_sent(model: str, effort: str) -> Any:
                resp = await http.post(f"{gateway.url}/v1/responses", headers={"authorization": f"Bearer {wired.key}"},
                                       json={"model": model, "input": "hi", "temperature": 0.3,
                                             "include": ["reasoning.encrypted_content", "message.output_text.logprobs"],
                                             "reasoning": {"effort": effort, "summary": "auto"}})
                assert resp.status_code == 200, resp.text
                sent = fake.last.json()
                return sent.get("reasoning"), "temperature" in sent, len(sent["include"])

            # the nearest level; no sampling to a reasoning model
            assert await reasoning_sent("team-gpt-5", "xhigh") == ({"effort": "high", "summary": "auto"}, False, 2)
            assert await reasoning_sent("team-gpt-5.1", "minimal") == ({"effort": "low", "summary": "auto"}, False, 2)
            assert await reasoning_sent("team-gpt-5.1", "max") == ({"effort": "high", "summary": "auto"}, False, 2)
            # no effort, and no encrypted reasoning asked back, from a model that does not reason
            assert await reasoning_sent("team-gpt-4.1", "high") == ({"summary": "auto"}, True, 1)
    finally:
        await fake.close()


@pytest.mark.parametrize("model", OUTPUT_CAPS)
async def test_a_converted_effort_is_left_out_for_a_model_that_does_not_reason(gateway, model):
    # Codex (Responses) through an openai-compatible channel: converted to chat completions, where these models
    # refuse any effort ("Unrecognized request argument supplied: reasoning_effort").
    fake = await FakeOpenAI(models=(model,)).start()
    try:
        wired = await gateway.wire(fake.base_url, [model], kind="openai-compatible")
        async with httpx.AsyncClient(timeout=30) as http:
            resp = await http.post(f"{gateway.url}/v1/responses", headers={"authorization": f"Bearer {wired.key}"},
                                   json={"model": model, "input": "hi", **RESPONSES_BODIES["codex"]})
        assert resp.status_code == 200, resp.text
        assert resp.json()["output"][-1]["content"][0]["text"] == "Echo: hi"
        assert "reasoning_effort" not in fake.last.json()
    finally:
        await fake.close()
