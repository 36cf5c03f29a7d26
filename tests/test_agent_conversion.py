"""Thinking and reasoning between the messages protocol and generic chat-completions upstreams (issue 10
item 5), at the codec level: what a chat upstream's `reasoning_content` becomes and what is sent back."""

from __future__ import annotations

import orjson

from modelgate.protocols import messages
from modelgate.protocols.ir import ThinkingPart
from modelgate.providers.openai_chat import OpenAIChatAdapter, is_reasoning_family
from modelgate.providers.base import Endpoint

adapter = OpenAIChatAdapter()
ENDPOINT = Endpoint("e", 1, 1, "openai-compatible", "http://127.0.0.1:9/v1", "k")


def test_reasoning_content_becomes_an_unsigned_thinking_block():
    # The shape DeepSeek / vLLM / Qwen answer with (generic `reasoning_content`).
    answer = {"id": "c1", "object": "chat.completion", "created": 1, "model": "r1",
              "choices": [{"index": 0, "finish_reason": "stop", "message": {
                  "role": "assistant", "reasoning_content": "think first", "content": "answer"}}],
              "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}}
    resp = adapter.parse_response(orjson.dumps(answer))
    assert resp.parts[0] == ThinkingPart("think first")
    body = orjson.loads(messages.encode_response(resp, "my-model"))
    assert body["content"][0] == {"type": "thinking", "thinking": "think first", "signature": ""}
    assert body["content"][1] == {"type": "text", "text": "answer"} and body["model"] == "my-model"


def test_thinking_is_not_replayed_to_a_generic_chat_upstream():
    client = {"model": "m", "max_tokens": 50, "messages": [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "unsigned foreign thought", "signature": ""},
            {"type": "thinking", "thinking": "a vendor's thought", "signature": "EqQBCkYIBxgCKkA"},
            {"type": "text", "text": "a"}]},
        {"role": "user", "content": "q2"}]}
    sent = orjson.loads(adapter.build_request(messages.to_ir(client), "m", ENDPOINT).body)
    assistant = sent["messages"][1]
    assert assistant == {"role": "assistant", "content": "a"}
    assert b"thought" not in orjson.dumps(sent)


def test_budget_and_effort_map_to_reasoning_effort():
    def effort(**body):
        return messages.reasoning_effort(body)

    assert effort(thinking={"type": "enabled", "budget_tokens": 1024}) == "low"
    assert effort(thinking={"type": "enabled", "budget_tokens": 8000}) == "medium"
    assert effort(thinking={"type": "enabled", "budget_tokens": 31999}) == "high"
    # the vendor's own level, which each target takes as its nearest (max on gpt-5.6 and Claude from 4.6)
    assert effort(thinking={"type": "adaptive"}, output_config={"effort": "max"}) == "max"
    assert effort(thinking={"type": "adaptive"}, output_config={"effort": "ultra"}) is None  # no such level
    assert effort(thinking={"type": "disabled"}) is None and effort() is None


def test_a_thinking_setting_of_no_known_form_asks_for_nothing():
    # Validate leaves `thinking` to the vendor (pass-through forwards it); a conversion that cannot
    # read it converts without reasoning rather than failing (an unhashable `type` raised TypeError: 500).
    base = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    for thinking in ({"type": {"a": 1}}, {"type": []}, {"type": "someday"}, {"type": "enabled"}, 5, []):
        ir = messages.to_ir({**base, "thinking": thinking})
        assert (ir.thinking_budget, ir.thinking_effort) == (None, None), thinking


def test_reasoning_families_by_name():
    for name in ("o1", "o3-mini", "o4-mini-2025-04-16", "gpt-5", "gpt-5-mini", "gpt-5.1", "openai/o3"):
        assert is_reasoning_family(name), name
    for name in ("gpt-4o", "gpt-4.1-mini", "omni-moderation", "llama-3", "o"):
        assert not is_reasoning_family(name), name
