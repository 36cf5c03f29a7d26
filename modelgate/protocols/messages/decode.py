"""Decoding a validated messages request into the IR (see docs/conversion.md for what is mapped,
approximated or dropped)."""

from __future__ import annotations

import re
from typing import Any, Mapping

import orjson

from modelgate import errors
from modelgate.protocols.base import is_int
from modelgate.protocols.ir import (
    ChatRequest,
    ImagePart,
    Message,
    Part,
    TextPart,
    ThinkingPart,
    Tool,
    ToolCall,
    ToolChoice,
    ToolResult,
)
from modelgate.protocols.messages.validate import is_custom_tool
from modelgate.protocols.messages.wire import cache_mark, thread_refusal
from modelgate.protocols.paths import Path, dotted


# Vendor-defined client tools: the client runs them, the vendor only knows their input schema.
# On conversion they become function tools with that schema, as the vendor documents it
# (https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/bash-tool and .../text-editor-tool).
_BASH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "description": "The bash command to run. Required unless the tool is being restarted."},
        "restart": {"type": "boolean", "description": "Specifying true will restart this tool."},
    },
}
_EDITOR_COMMANDS = ["view", "create", "str_replace", "insert"]
_EDITOR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "enum": _EDITOR_COMMANDS, "description": "The command to run."},
        "path": {"type": "string", "description": "Absolute path to the file or directory."},
        "file_text": {"type": "string", "description": "The content of the file to create (`create`)."},
        "old_str": {"type": "string", "description": "The exact text to replace (`str_replace`)."},
        "new_str": {"type": "string", "description": "The new text (`str_replace`, `insert`)."},
        "insert_line": {"type": "integer", "description": "The line after which to insert (`insert`)."},
        "view_range": {"type": "array", "items": {"type": "integer"},
                       "description": "[start, end] lines to view; -1 as end means the end of the file (`view`)."},
    },
    "required": ["command", "path"],
}
_CLIENT_TOOLS = (
    (re.compile(r"bash_\d{8}"), "Run commands in a bash shell.", _BASH_SCHEMA),
    # text_editor_20250124 also has `undo_edit`; the later versions dropped it.
    (re.compile(r"text_editor_20250124|text_editor_2024\d{4}"), "View, create and edit text files.",
     {**_EDITOR_SCHEMA, "properties": {**_EDITOR_SCHEMA["properties"], "command": {
         "type": "string", "enum": [*_EDITOR_COMMANDS, "undo_edit"], "description": "The command to run."}}}),
    (re.compile(r"text_editor_\d{8}"), "View, create and edit text files.", _EDITOR_SCHEMA),
)


def _ir_tool(tool: dict[str, Any], where: Path) -> Tool | None:
    """The IR form of a tool definition; None for a vendor server tool (only the vendor runs it)."""
    if is_custom_tool(tool):
        return Tool(tool["name"], tool.get("description"), tool["input_schema"], cache_mark(tool))
    kind = str(tool.get("type"))
    for pattern, description, schema in _CLIENT_TOOLS:
        if pattern.fullmatch(kind):
            return Tool(tool["name"], description, schema, cache_mark(tool))
    if kind.startswith("computer_"):
        raise errors.invalid_request(f"{dotted(where)}: the vendor's computer-use tool ({kind}) needs a model served over the messages "
                   "protocol; declare it as a custom tool with an input_schema for other models")
    return None


def _image_part(block: dict[str, Any]) -> ImagePart:
    source = block["source"]
    if source.get("type") == "url":
        return ImagePart(url=source["url"], cache=cache_mark(block))
    return ImagePart(data=source["data"], media_type=source["media_type"], cache=cache_mark(block))


def _document_part(block: dict[str, Any], where: Path) -> TextPart:
    source = block["source"]
    if source.get("type") == "text" and isinstance(source.get("data"), str):
        return TextPart(source["data"], cache_mark(block))
    if source.get("type") == "content" and isinstance(source.get("content"), str):
        return TextPart(source["content"], cache_mark(block))
    # PDFs and file references have no form in the IR (nor in chat completions).
    raise errors.invalid_request(f"{dotted(where)}: document blocks other than plain text need a model served over the messages protocol")


def _result_content(content: Any, where: Path) -> list[TextPart | ImagePart]:
    """The parts of the tool result at `where`."""
    if content is None:
        return []
    if isinstance(content, str):
        return [TextPart(content)]
    parts: list[TextPart | ImagePart] = []
    for k, block in enumerate(content):
        kind = block["type"]
        if kind == "text":
            parts.append(TextPart(block["text"], cache_mark(block)))
        elif kind == "image":
            parts.append(_image_part(block))
        elif kind == "document":
            parts.append(_document_part(block, ((where, "content"), k)))
    return parts


def _decode_message(i: int, msg: dict[str, Any]) -> list[Message]:
    role = msg["role"]
    content = msg["content"]
    if role == "system":  # a mid-conversation system entry (validated under its beta)
        blocks = [{"text": content}] if isinstance(content, str) else content
        return [Message("system", [TextPart(b["text"], cache_mark(b)) for b in blocks if b["text"]])]
    if isinstance(content, str):
        # An empty string is only valid as a final assistant prefill, which adds nothing.
        return [Message(role, [TextPart(content)])] if content else []
    # Runs of tool results become one IR `tool` turn, other blocks one `user`/`assistant` turn,
    # in the order the client gave them.
    out: list[Message] = []
    at: Path = (("messages", i), "content")
    for j, block in enumerate(content):
        kind = block["type"]
        turn = role
        part: Part
        if kind == "text":
            part = TextPart(block["text"], cache_mark(block))
        elif kind == "tool_use":
            part = ToolCall(block["id"], block["name"], orjson.dumps(block["input"]).decode(), cache_mark(block))
        elif kind == "tool_result":
            turn = "tool"
            part = ToolResult(block["tool_use_id"], _result_content(block.get("content"), (at, j)),
                              bool(block.get("is_error", False)), cache_mark(block))
        elif kind == "thinking":
            part = ThinkingPart(block["thinking"], block.get("signature"))
        elif kind == "redacted_thinking":
            part = ThinkingPart("", redacted=block["data"])
        elif kind == "image":
            part = _image_part(block)
        elif kind == "document":
            part = _document_part(block, (at, j))
        else:
            continue  # server-tool blocks have no IR form: dropped
        if out and out[-1].role == turn:
            out[-1].parts.append(part)
        else:
            out.append(Message(turn, [part]))
    return out


def _tool_choice(choice: dict[str, Any] | None) -> ToolChoice | None:
    if choice is None:
        return None
    parallel = False if choice.get("disable_parallel_tool_use") else None
    kind = choice["type"]
    if kind == "any":
        return ToolChoice("required", parallel=parallel)
    if kind == "tool":
        return ToolChoice("tool", name=choice["name"], parallel=parallel)
    return ToolChoice(kind, parallel=parallel)


_EFFORTS = ("low", "medium", "high", "xhigh", "max")  # the vendor's output_config.effort levels


def reasoning_effort(body: dict[str, Any]) -> str | None:
    """The reasoning effort a request asks for: `output_config.effort` where given, else from
    `thinking.budget_tokens` (under 4 096: low, under 16 384: medium, else high)."""
    output_config = body.get("output_config")
    effort = output_config.get("effort") if isinstance(output_config, dict) else None
    if isinstance(effort, str) and effort in _EFFORTS:
        return effort
    thinking = body.get("thinking")
    if not isinstance(thinking, dict) or thinking.get("type") != "enabled":
        return None
    budget = thinking.get("budget_tokens")
    if not is_int(budget):
        return None
    return "low" if budget < 4096 else "medium" if budget < 16384 else "high"


def response_format(body: dict[str, Any]) -> dict[str, Any] | None:
    """`output_config.format` (structured outputs; the SDK's `messages.parse`), or the beta's top-level
    `output_format` where it is not given, as the IR's response format in the chat form. Without
    `strict`: OpenAI's strict mode refuses schemas the vendor takes (a property left out of `required`)."""
    output_config = body.get("output_config")
    fmt, where = (output_config.get("format") if isinstance(output_config, dict) else None), "output_config.format"
    if fmt is None:
        fmt, where = body.get("output_format"), "output_format"
    if fmt is None:
        return None
    if not isinstance(fmt, dict) or fmt.get("type") != "json_schema" or not isinstance(fmt.get("schema"), dict):
        raise errors.invalid_request(f"{where}: must be {{type: 'json_schema', schema: {{...}}}}")
    return {"type": "json_schema", "json_schema": {"name": "output", "schema": fmt["schema"]}}


_BUDGETS = {"adaptive": -1, "disabled": 0}


def thinking_budget(body: dict[str, Any]) -> int | None:
    """`thinking` as an IR budget: `enabled` its budget_tokens, `adaptive` -1 (the model decides),
    `disabled` 0; None when the request does not say (or says what is not one of these)."""
    thinking = body.get("thinking")
    if not isinstance(thinking, dict):
        return None
    kind = thinking.get("type")
    budget = thinking.get("budget_tokens")
    if kind == "enabled" and is_int(budget) and budget > 0:
        return budget
    return _BUDGETS.get(kind) if isinstance(kind, str) else None


def thinking_field(budget: int | None) -> dict[str, Any] | None:
    """The vendor's `thinking` request field for an IR budget (the inverse of `thinking_budget`);
    Bedrock's and Vertex's Claude models take it too."""
    if budget is None:
        return None
    if budget < 0:
        return {"type": "adaptive"}
    return {"type": "enabled", "budget_tokens": budget} if budget else {"type": "disabled"}


def _mark_last_block(mark: str, messages: list[Message], system: list[str], system_cache: dict[int, str],
                     tools: list[Tool]) -> None:
    """Top-level `cache_control` (automatic caching): the vendor puts the breakpoint on the last block
    that can take one, in prompt order (tools, system, messages); thinking takes none. A mark the
    client set on that block itself stays."""
    for message in reversed(messages):
        for part in reversed(message.parts):
            if not isinstance(part, ThinkingPart):
                part.cache = part.cache or mark
                return
    if system:
        system_cache.setdefault(len(system) - 1, mark)
    elif tools:
        tools[-1].cache = tools[-1].cache or mark


def output_limit(body: Mapping[str, Any]) -> int | None:
    """The output tokens a request asks for at most (absent on count_tokens)."""
    return body.get("max_tokens")


def to_ir(body: dict[str, Any]) -> ChatRequest:
    if body.get("thread") is not None:
        raise thread_refusal("this model is served in another provider's format, which holds no message threads")
    system = body.get("system")
    system_cache: dict[int, str] = {}
    if isinstance(system, str):
        system_list = [system] if system else []
    else:
        system_list = []
        for block in system or []:
            if (mark := cache_mark(block)) is not None:
                system_cache[len(system_list)] = mark
            system_list.append(block["text"])
    messages: list[Message] = []
    for i, msg in enumerate(body["messages"]):
        messages.extend(_decode_message(i, msg))
    tools = [tool for i, t in enumerate(body.get("tools") or []) if (tool := _ir_tool(t, ("tools", i))) is not None]
    if (mark := cache_mark(body)) is not None:
        _mark_last_block(mark, messages, system_list, system_cache, tools)
    metadata = body.get("metadata") or {}
    return ChatRequest(
        model=body["model"],
        messages=messages,
        system=system_list,
        system_cache=system_cache,
        max_tokens=output_limit(body),
        temperature=body.get("temperature"),
        top_p=body.get("top_p"),
        top_k=body.get("top_k"),
        stop=list(body.get("stop_sequences") or []),
        tools=tools,
        tool_choice=_tool_choice(body.get("tool_choice")),
        user=metadata.get("user_id"),
        stream=bool(body.get("stream", False)),
        thinking_effort=reasoning_effort(body),  # type: ignore[arg-type]
        thinking_budget=thinking_budget(body),
        response_format=response_format(body),
    )
