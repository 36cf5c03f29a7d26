"""A validated chat-completions request as the IR."""

from __future__ import annotations

from typing import Any, Mapping, cast

from modelgate.protocols.ir import (
    ChatRequest, ImagePart, Message, Part, TextPart, ThinkingPart, Tool, ToolCall, ToolChoice, ToolResult,
)
from modelgate.protocols.messages import cache_mark


def output_limit(body: Mapping[str, Any]) -> int | None:
    """The output tokens a request asks for at most (the current field, else the one it replaced)."""
    return body.get("max_completion_tokens") or body.get("max_tokens")


def to_ir(body: dict[str, Any]) -> ChatRequest:
    """The IR of a request `validate` accepted: system and developer turns become the system prompt."""
    system: list[str] = []
    system_cache: dict[int, str] = {}
    messages: list[Message] = []
    for message in body["messages"]:
        role = message["role"]
        content = message.get("content")
        if role in ("system", "developer"):
            for part in text_parts(content):
                if part.cache:
                    system_cache[len(system)] = part.cache
                system.append(part.text)
        elif role == "user":
            messages.append(Message("user", cast(list[Part], text_parts(content))))
        elif role == "assistant":
            parts: list[Any] = []
            reasoning = message.get("reasoning_content")
            if isinstance(reasoning, str) and reasoning:
                parts.append(ThinkingPart(reasoning))
            parts.extend(part for part in text_parts(content) if part.text)
            for call in message.get("tool_calls") or ():
                function = call["function"]
                parts.append(ToolCall(call["id"], function["name"], function.get("arguments") or "{}"))
            messages.append(Message("assistant", parts))
        else:
            content_parts = cast(list[TextPart | ImagePart], text_parts(content))
            result = ToolResult(message["tool_call_id"], content_parts)
            if messages and messages[-1].role == "tool":
                messages[-1].parts.append(result)  # parallel tool results form one turn
            else:
                messages.append(Message("tool", [result]))
    stop = body.get("stop")
    tools = [
        Tool(t["function"]["name"], t["function"].get("description"), t["function"].get("parameters") or {})
        for t in body.get("tools") or ()
    ]
    response_format = body.get("response_format")
    if response_format and response_format.get("type") == "text":
        response_format = None
    return ChatRequest(
        model=body["model"],
        messages=messages,
        system=system,
        system_cache=system_cache,
        max_tokens=output_limit(body),
        temperature=body.get("temperature"),
        top_p=body.get("top_p"),
        stop=[stop] if isinstance(stop, str) else list(stop or ()),
        tools=tools,
        tool_choice=_tool_choice_to_ir(body.get("tool_choice"), body.get("parallel_tool_calls")),
        response_format=response_format,
        seed=body.get("seed"),
        frequency_penalty=body.get("frequency_penalty"),
        presence_penalty=body.get("presence_penalty"),
        user=body.get("user"),
        stream=bool(body.get("stream")),
        reasoning_effort=effort if isinstance(effort := body.get("reasoning_effort"), str) else None,
    )


def text_parts(content: str | list[dict[str, Any]] | None) -> list[TextPart]:
    """A validated chat content as IR text parts: one per array part, one for a string. Some
    clients mark parts with the messages protocol's `cache_control` (OpenRouter's convention):
    kept as cache marks for upstreams that take them."""
    if isinstance(content, list):
        return [TextPart(part["text"]) if "cache_control" not in part else TextPart(part["text"], cache_mark(part))
                for part in content]
    return [TextPart(content)] if isinstance(content, str) else []


def _tool_choice_to_ir(choice: Any, parallel: Any) -> ToolChoice | None:
    parallel_flag = parallel if isinstance(parallel, bool) else None
    if choice is None:
        return ToolChoice("auto", parallel=parallel_flag) if parallel_flag is not None else None
    if isinstance(choice, dict):
        return ToolChoice("tool", choice["function"]["name"], parallel_flag)
    return ToolChoice(choice, parallel=parallel_flag)  # validate() rewrote a bare tool name
