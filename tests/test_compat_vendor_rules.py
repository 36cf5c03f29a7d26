"""Claude Code's and OpenAI-SDK clients' requests on the chat-completions vendors (openai_compat knobs).

Claude Code sends several system blocks, text beside its tool results, a temperature or stops at times and
a thinking budget; OpenAI-SDK clients a forced tool choice, penalties and `reasoning_effort`. Each vendor
refuses some of it (tests/fakes/compat_rules.py quotes their words): the bodies the gateway builds, converted
and passed through, must pass every vendor's rules."""

from __future__ import annotations

import orjson
import pytest

from modelgate.protocols.messages import MessagesCodec
from modelgate.providers.base import Endpoint
from modelgate.providers.registry import KINDS
from tests.fakes.compat_rules import vendor_refusal

VENDORS = ("mistral", "minimax", "xai", "moonshot", "deepseek", "zhipu", "dashscope", "perplexity", "fireworks")
TOOLS = [{"name": "Bash", "description": "Run a command",
          "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}]


def claude_code_request(stream: bool, **extra) -> dict:
    return {
        "model": "m", "max_tokens": 32000, "stream": stream, "tools": TOOLS, "temperature": 0.5,
        "stop_sequences": ["\n\nHuman:"], "thinking": {"type": "enabled", "budget_tokens": 4096},
        "system": [{"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1"},
                   {"type": "text", "text": "You are Claude Code."}],
        "messages": [
            {"role": "user", "content": "list the files"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_01", "name": "Bash",
                                               "input": {"command": "ls"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "a.py"},
                                         {"type": "text", "text": "<system-reminder>be brief</system-reminder>"}]}],
        **extra}


def endpoint(kind: str, options: dict | None = None) -> Endpoint:
    return Endpoint("p1:k1", 1, 1, kind, KINDS[kind].default_base_url or "http://h/v1", "k", options or {})


@pytest.mark.parametrize("kind", VENDORS)
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("choice", [None, {"type": "any"}, {"type": "tool", "name": "Bash"}])
def test_claude_code_s_requests_pass_every_vendor_s_rules(kind, stream, choice):
    body = claude_code_request(stream, **({"tool_choice": choice} if choice else {}))
    sent = orjson.loads(KINDS[kind].adapter.build_request(MessagesCodec().to_ir(body), "m", endpoint(kind)).body)
    assert vendor_refusal(kind, sent) is None
    texts = orjson.dumps(sent["messages"]).decode()
    assert "be brief" in texts and "You are Claude Code." in texts  # folded or joined, never lost


@pytest.mark.parametrize("kind", VENDORS)
def test_an_openai_sdk_client_s_request_passes_through_every_vendor_s_rules(kind):
    body = {"model": "m", "temperature": 0.2, "presence_penalty": 0.1, "frequency_penalty": 0.1, "stop": ["END"],
            "reasoning_effort": "medium", "tool_choice": "required",
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}],
            "messages": [{"role": "system", "content": "be brief"}, {"role": "system", "content": "be kind"},
                         {"role": "user", "content": "hi"}, {"role": "user", "content": "are you there?"},
                         {"role": "system", "content": "answer in French"}]}
    up = KINDS[kind].adapter.build_native_request(body, "m", endpoint(kind, {"enable_thinking": True}), False)
    sent = orjson.loads(up.body)
    assert vendor_refusal(kind, sent) is None
    assert sent["tool_choice"] in ("auto", "required")


def test_mistral_gets_the_text_beside_tool_results_in_the_last_result():
    sent = orjson.loads(KINDS["mistral"].adapter.build_request(
        MessagesCodec().to_ir(claude_code_request(False)), "m", endpoint("mistral")).body)
    assert sent["messages"][-1]["role"] == "tool"
    assert sent["messages"][-1]["content"] == "a.py\n\n<system-reminder>be brief</system-reminder>"


def test_perplexity_gets_alternating_turns():
    body = {"model": "m", "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"},
                                       {"role": "user", "content": "are you there?"},
                                       {"role": "system", "content": "answer in French"}]}
    sent = orjson.loads(KINDS["perplexity"].adapter.build_native_request(body, "m", endpoint("perplexity"), False).body)
    assert sent["messages"] == [{"role": "system", "content": "be brief"},
                                {"role": "user", "content": "hi\n\nare you there?\n\nanswer in French"}]


def test_minimax_gets_one_system_message_first():
    sent = orjson.loads(KINDS["minimax"].adapter.build_request(
        MessagesCodec().to_ir(claude_code_request(False)), "m", endpoint("minimax")).body)
    assert [m["role"] for m in sent["messages"]][:2] == ["system", "user"]
    assert sent["messages"][0]["content"] == "x-anthropic-billing-header: cc_version=2.1\n\nYou are Claude Code."
