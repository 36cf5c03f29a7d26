"""Request bodies shaped like real coding-agent traffic, in both client protocols.

A coding agent sends, on every turn, its long system prompt, every tool schema
and the whole conversation so far: tool calls and their (often long) results.
Claude Code's requests were 76-116 KB each. `agent_body` builds such a request
deterministically: a system prompt of `system_kb`, `tools` JSON-schema tools
and `turns` prior turns (user text, assistant tool call, tool result), padded
through the tool results to about `total_kb`.

The same conversation is built in the chat-completions shape and in the
messages shape, so pass-through and both conversion directions carry the
same content.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

WORDS = ("the function returns a list of files matching the pattern and their sizes in bytes "
         "while the caller checks each path against the repository root before reading it").split()


def _text(size: int, seed: int) -> str:
    """Deterministic prose of about `size` characters."""
    out, n, i = [], 0, seed
    while n < size:
        word = WORDS[i % len(WORDS)]
        out.append(word)
        n += len(word) + 1
        i += 7
    return " ".join(out)[:size]


def _schema(i: int) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": _text(120, i)},
            "pattern": {"type": "string", "description": _text(80, i + 1)},
            "limit": {"type": "integer", "minimum": 1, "maximum": 2000, "description": "Lines to read."},
            "flags": {"type": "array", "items": {"type": "string", "enum": ["i", "m", "s", "x"]}},
            "options": {"type": "object", "properties": {"recursive": {"type": "boolean"},
                                                         "follow_links": {"type": "boolean"}}},
        },
        "required": ["path"],
        "additionalProperties": False,
    }


SESSION_ID = "01a20c8c-1661-7483-8e1d-655ffa423fab"  # the ids agents send are UUIDs


@dataclass(frozen=True)
class AgentShape:
    total_kb: int
    system_kb: int
    tools: int
    turns: int


# The two shapes: the large one of the measurements, and a typical Claude Code turn.
AGENT_150 = AgentShape(total_kb=150, system_kb=30, tools=40, turns=30)
AGENT_80 = AgentShape(total_kb=80, system_kb=16, tools=24, turns=16)


def _conversation(shape: AgentShape) -> tuple[str, list[tuple[str, str, str]], list[tuple[str, dict, str]], int]:
    """system text, tools (name, description, schema), turns (request, call args, result), result size."""
    system = _text(shape.system_kb * 1024, 3)
    tools = [(f"tool_{i:02d}", _text(400, i), _schema(i)) for i in range(shape.tools)]
    tools_size = len(orjson.dumps([[n, d, s] for n, d, s in tools]))
    # What is left of the budget goes into the turns; most of it into tool results, as in real traffic.
    per_turn = max(200, (shape.total_kb * 1024 - len(system) - tools_size) // max(1, shape.turns) - 420)
    turns = []
    for t in range(shape.turns):
        args = {"path": f"src/module_{t}.py", "pattern": "def .*", "limit": 200}
        turns.append((_text(160, t), args, _text(per_turn, t + 11)))
    return system, tools, turns, per_turn


def agent_chat_body(shape: AgentShape, model: str, stream: bool = False) -> bytes:
    system, tools, turns, _ = _conversation(shape)
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for t, (ask, args, result) in enumerate(turns):
        call_id = f"call_{t:04d}"
        messages.append({"role": "user", "content": ask})
        messages.append({"role": "assistant", "content": None, "tool_calls": [{
            "id": call_id, "type": "function",
            "function": {"name": tools[t % len(tools)][0], "arguments": orjson.dumps(args).decode()}}]})
        messages.append({"role": "tool", "tool_call_id": call_id, "content": result})
    messages.append({"role": "user", "content": "Now fix the failing test."})
    body: dict[str, Any] = {
        "model": model, "messages": messages, "max_tokens": 1024,
        "tools": [{"type": "function", "function": {"name": n, "description": d, "parameters": s}}
                  for n, d, s in tools],
        "tool_choice": "auto",
    }
    if stream:
        body["stream"] = True
    return orjson.dumps(body)


def agent_messages_body(shape: AgentShape, model: str, stream: bool = False) -> bytes:
    system, tools, turns, _ = _conversation(shape)
    messages: list[dict[str, Any]] = []
    for t, (ask, args, result) in enumerate(turns):
        call_id = f"toolu_{t:04d}"
        if messages:  # the tool result and the next request share one user turn, as agents send them
            messages[-1]["content"].append({"type": "text", "text": ask})
        else:
            messages.append({"role": "user", "content": [{"type": "text", "text": ask}]})
        messages.append({"role": "assistant", "content": [
            {"type": "tool_use", "id": call_id, "name": tools[t % len(tools)][0], "input": args}]})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": call_id, "content": result}]})
    messages[-1]["content"].append({"type": "text", "text": "Now fix the failing test."})
    body: dict[str, Any] = {
        "model": model, "max_tokens": 1024,
        "system": [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
        "messages": messages,
        "tools": [{"name": n, "description": d, "input_schema": s} for n, d, s in tools],
        "tool_choice": {"type": "auto"},
        # What Claude Code 2.1 sends beside the conversation (../shared/field-notes.md).
        "metadata": {"user_id": orjson.dumps({"device_id": "09c736d4", "session_id": SESSION_ID}).decode()},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "output_config": {"effort": "medium"},
    }
    if stream:
        body["stream"] = True
    return orjson.dumps(body)


def agent_responses_body(shape: AgentShape, model: str, stream: bool = False) -> bytes:
    """The same conversation as a Responses API request (Codex's shape): input items with
    function calls and their outputs, flat function tools, instructions, store off."""
    system, tools, turns, _ = _conversation(shape)
    items: list[dict[str, Any]] = []
    for t, (ask, args, result) in enumerate(turns):
        call_id = f"call_{t:04d}"
        items.append({"type": "message", "role": "user", "content": [{"type": "input_text", "text": ask}]})
        items.append({"type": "function_call", "call_id": call_id, "name": tools[t % len(tools)][0],
                      "arguments": orjson.dumps(args).decode()})
        items.append({"type": "function_call_output", "call_id": call_id, "output": result})
    items.append({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Now fix the failing test."}]})
    body: dict[str, Any] = {
        "model": model, "instructions": system, "input": items, "max_output_tokens": 1024, "store": False,
        "tools": [{"type": "function", "name": n, "description": d, "parameters": s} for n, d, s in tools],
        "tool_choice": "auto",
        # What Codex 0.16x sends beside the conversation (../shared/field-notes.md).
        "parallel_tool_calls": True, "include": ["reasoning.encrypted_content"], "prompt_cache_key": SESSION_ID,
        "client_metadata": {"turn_id": SESSION_ID, "thread_id": SESSION_ID},
    }
    if stream:
        body["stream"] = True
    return orjson.dumps(body)
