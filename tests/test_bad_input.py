"""Malformed input never crashes the gateway: every mutated body gets a clear error in the spec's shape."""

from __future__ import annotations

import copy
import random
from typing import Any

import httpx

from tests.fakes.anthropic_upstream import API_KEY as ANTHROPIC_KEY

# Shaped like agents' requests: the fields the gateway reads beyond the conversation (streaming options,
# reasoning, output format, cache marks) are where a mutation reaches code paths the rest does not.
CHAT = {
    "model": "gpt-test", "max_tokens": 20, "temperature": 0.5, "stop": ["x"], "seed": 1,
    "stream": True, "stream_options": {"include_usage": True}, "reasoning_effort": "low",
    "response_format": {"type": "json_object"}, "metadata": {"k": "v"},
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
    "tool_choice": "auto",
    "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"},
                 {"role": "assistant", "content": None,
                  "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                 {"role": "tool", "tool_call_id": "c1", "content": "r"}],
}
MESSAGES = {
    "model": "gpt-test", "max_tokens": 20, "system": "s", "stop_sequences": ["x"], "stream": False,
    "thinking": {"type": "enabled", "budget_tokens": 1024}, "metadata": {"user_id": "u"},
    "output_config": {"effort": "high", "format": {"type": "json_schema", "schema": {"type": "object"}}},
    "cache_control": {"type": "ephemeral"},
    "tools": [{"name": "f", "input_schema": {"type": "object"}}], "tool_choice": {"type": "auto"},
    "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]},
                 {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "r"},
                                              {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                                           "data": "iVBORw0KGgo="}}]}],
}
RESPONSES = {
    "model": "gpt-test", "instructions": "s", "max_output_tokens": 20, "stream": False, "store": False,
    "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}], "tool_choice": "auto",
    "text": {"format": {"type": "json_schema", "name": "o", "schema": {"type": "object"}}},
    "reasoning": {"effort": "low", "summary": "auto"}, "include": ["reasoning.encrypted_content"],
    "input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
              {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
              {"type": "function_call_output", "call_id": "c1", "output": "r"}],
}
def _deep(levels: int) -> Any:
    node: Any = 0
    for i in range(levels):
        node = [node] if i % 2 else {"k": node}
    return node


# 300 levels: past what the gateway can forward (254), still within what the test client can encode.
WEIRD: list[Any] = [None, True, -1, 0, 2**70, 1.5e308, "", "x" * 3000, [], {}, [None], {"": None}, "\u0000\ud7ff",
                    _deep(300), "line\nbreak\r\x00" * 50, -(2**64)]


def paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            out += paths(value, prefix + (key,))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            out += paths(value, prefix + (index,))
    return out


def mutate(body: dict[str, Any], rng: random.Random) -> Any:
    mutated = copy.deepcopy(body)
    for _ in range(rng.randint(1, 3)):
        targets = [p for p in paths(mutated) if p]
        if not targets:
            return copy.deepcopy(rng.choice(WEIRD))
        path = rng.choice(targets)
        parent = mutated
        for step in path[:-1]:
            parent = parent[step]
        if rng.random() < 0.3 and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = copy.deepcopy(rng.choice(WEIRD))
    return mutated


async def test_mutated_bodies_get_spec_shaped_errors_never_500(gateway, openai_upstream):
    wired = await gateway.wire(openai_upstream.base_url, ["gpt-test"], rate_capacity=10_000, rate_refill=1000)
    rng = random.Random(20261123)
    seen_statuses: set[int] = set()
    async with httpx.AsyncClient(base_url=gateway.url, timeout=30) as http:
        for round_ in range(150):
            for path, base, headers in (
                ("/v1/chat/completions", CHAT, {"authorization": f"Bearer {wired.key}"}),
                ("/alt/v1/messages", MESSAGES, {"x-api-key": wired.key, "alt-version": "2023-06-01"}),
                ("/v1/responses", RESPONSES, {"authorization": f"Bearer {wired.key}"}),
            ):
                body = mutate(base, rng)
                resp = await http.post(path, headers=headers, json=body)
                seen_statuses.add(resp.status_code)
                assert resp.status_code < 500 or resp.status_code == 502, (path, body, resp.text)
                assert resp.headers.get("x-trace-id"), "every answer carries its trace id"
                if resp.status_code == 400:
                    error = resp.json()
                    if path.startswith("/alt"):
                        assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
                    else:
                        assert error["error"]["code"] == "invalid_request"
        raw = await http.post("/v1/chat/completions", headers={"authorization": f"Bearer {wired.key}"},
                              content=b"\xff\xfe{not json")
        assert raw.status_code == 400
    assert 400 in seen_statuses and 200 in seen_statuses, seen_statuses


async def test_mutated_count_bodies_get_spec_shaped_errors_never_500(gateway, openai_upstream, anthropic_upstream):
    # Both protocols' counts, on a route of each kind of count: the vendor's own with the client's body
    # (anthropic for messages, openai for Responses), the vendor's own converted (anthropic for
    # Responses) and the local estimate (a chat-completions channel); and Responses compactions.
    limits = {"rate_capacity": 10_000, "rate_refill": 1000}
    estimated = await gateway.wire(openai_upstream.base_url, ["gpt-test"], **limits)
    native = await gateway.wire(openai_upstream.base_url, ["gpt-native"], kind="openai", name="native", **limits)
    openai_upstream.models.add("gpt-native")
    claude = await gateway.wire(anthropic_upstream.base_url, ["claude-haiku-4-5"], kind="anthropic",
                                upstream_keys=(ANTHROPIC_KEY,), name="claude", **limits)
    messages_count = {name: value for name, value in MESSAGES.items() if name not in ("max_tokens", "stream")}
    rng = random.Random(20261124)
    seen_statuses: set[int] = set()
    async with httpx.AsyncClient(base_url=gateway.url, timeout=30) as http:
        for round_ in range(60):
            for path, base, model, key in (
                ("/alt/v1/messages/count_tokens", messages_count, "claude-haiku-4-5", claude.key),
                ("/alt/v1/messages/count_tokens", messages_count, "gpt-test", estimated.key),
                ("/v1/responses/input_tokens", RESPONSES, "gpt-native", native.key),
                ("/v1/responses/input_tokens", RESPONSES, "claude-haiku-4-5", claude.key),
                ("/v1/responses/input_tokens", RESPONSES, "gpt-test", estimated.key),
                ("/v1/responses/compact", RESPONSES, "gpt-native", native.key),  # passed through
                ("/v1/responses/compact", RESPONSES, "gpt-test", estimated.key),  # refused on conversion
            ):
                body = mutate({**base, "model": model}, rng)
                headers = ({"x-api-key": key, "alt-version": "2023-06-01"} if path.startswith("/alt")
                           else {"authorization": f"Bearer {key}"})
                resp = await http.post(path, headers=headers, json=body)
                seen_statuses.add(resp.status_code)
                assert resp.status_code < 500 or resp.status_code == 502, (path, body, resp.text)
                assert resp.headers.get("x-trace-id"), "every answer carries its trace id"
                if resp.status_code == 200 and path.endswith("/compact"):
                    assert resp.json()["object"] == "response.compaction"
                elif resp.status_code == 200:
                    assert type(resp.json()["input_tokens"]) is int
                elif resp.status_code == 400:
                    error = resp.json()
                    if path.startswith("/alt"):
                        assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
                    else:
                        assert error["error"]["code"] == "invalid_request"
    assert 400 in seen_statuses and 200 in seen_statuses, seen_statuses
