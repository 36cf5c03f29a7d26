"""The messages protocol (`POST /alt/v1/messages`): the Anthropic Messages API wire format.

Pure functions only: validation, decoding into the IR, encoding IR responses and
stream events as the vendor's JSON bodies and SSE frames. See docs/conversion.md
for what is mapped, approximated or dropped on the way to and from the IR.

Usage convention: IR `Usage.input_tokens` counts every prompt token, cached or
not (like chat `prompt_tokens`); the vendor's `input_tokens` excludes the cache
read/write counts. Conversions add or subtract the cache counts accordingly.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from typing import Any

import orjson

from modelgate import errors
from modelgate.errors import ClientProtocol, ErrorType
from modelgate.protocols import messages_view, sse
from modelgate.protocols.base import Headers, bearer_token
from modelgate.protocols.model_name import model_field, set_model
from modelgate.protocols.ir import (
    ChatRequest,
    ChatResponse,
    ImagePart,
    Message,
    Part,
    StreamEnd,
    StreamError,
    StreamEvent,
    StreamStart,
    TextDelta,
    TextPart,
    ThinkingDelta,
    ThinkingPart,
    Tool,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    ToolChoice,
    ToolResult,
    Usage,
    UsageUpdate,
)
from modelgate.safetext import shown

NATIVE_WIRE = "anthropic-messages"
ALT_VERSION = b"2023-06-01"

# IR stop reason -> vendor stop_reason. `content_filter` becomes `refusal`, the
# vendor's own "the model declined" reason; an IR `error` never reaches a
# successful body, so it reads as a normal end.
STOP_TO_VENDOR: dict[str | None, str] = {
    None: "end_turn",
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "stop_sequence": "stop_sequence",
    "content_filter": "refusal",
    "error": "end_turn",
}

# vendor stop_reason -> IR. `pause_turn` (a server tool paused a long turn) is a
# normal end for a client of another protocol; a full context window is a length stop.
STOP_FROM_VENDOR: dict[str, str] = {
    "end_turn": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "stop_sequence": "stop_sequence",
    "refusal": "content_filter",
    "pause_turn": "stop",
    "model_context_window_exceeded": "length",
}

# spec 7.5 error type -> the vendor error type a client SDK understands.
_VENDOR_ERROR_TYPE = {
    ErrorType.RATE_LIMIT_ERROR.value: "rate_limit_error",
    ErrorType.SERVICE_UNAVAILABLE.value: "overloaded_error",
    ErrorType.TIMEOUT_ERROR.value: "timeout_error",
    ErrorType.AUTHENTICATION_ERROR.value: "authentication_error",
    ErrorType.QUOTA_EXCEEDED.value: "billing_error",
    ErrorType.INVALID_REQUEST.value: "invalid_request_error",
    ErrorType.MODEL_NOT_FOUND.value: "not_found_error",
}

_ROLES = ("user", "assistant")
_TOOL_CHOICES = ("auto", "any", "tool", "none")


# The beta under which `role: "system"` entries may appear inside `messages`; Claude Code sends
# this dated name and, when a 400 names it together with the `anthropic-beta` header, retries
# without it. Later betas sharing the prefix (`...-clear-at-<date>`) are other features.
MID_CONVERSATION_SYSTEM_BETA = "mid-conversation-system-2026-04-07"
_MID_CONVERSATION_SYSTEM = re.compile(r"mid-conversation-system-\d{4}-\d{2}-\d{2}")


def betas(headers: Mapping[bytes, bytes]) -> list[str]:
    """The betas a request names in `anthropic-beta` (comma-separated, possibly repeated)."""
    raw = headers.get(b"anthropic-beta")
    if not raw:
        return []
    return [b.strip() for b in raw.decode("latin-1").split(",") if b.strip()]


def allows_mid_conversation_system(names: list[str]) -> bool:
    return any(_MID_CONVERSATION_SYSTEM.fullmatch(name) for name in names)


def vendor_headers(headers: Mapping[bytes, bytes]) -> dict[str, str]:
    """The client's vendor headers an upstream of the same protocol must see unchanged:
    `anthropic-version` (`alt-version` is its alias here) and `anthropic-beta`."""
    out: dict[str, str] = {}
    version = headers.get(b"anthropic-version") or headers.get(b"alt-version")
    if version:
        out["anthropic-version"] = version.decode("latin-1")
    beta = headers.get(b"anthropic-beta")
    if beta:
        out["anthropic-beta"] = beta.decode("latin-1")
    return out


# --- SSE ------------------------------------------------------------------


def sse_frame(event: str, data: dict[str, Any]) -> bytes:
    """One vendor SSE frame: `event: <type>` + `data: <json>` + blank line."""
    return sse.encode(orjson.dumps(data), event)


# --- usage ----------------------------------------------------------------


def usage_from_vendor(u: dict[str, Any] | None) -> Usage:
    """Vendor usage object -> IR usage (input made inclusive of cache counts)."""
    if not isinstance(u, dict):
        return Usage()
    read = _int(u.get("cache_read_input_tokens"))
    write = _int(u.get("cache_creation_input_tokens"))
    return Usage(
        input_tokens=_int(u.get("input_tokens")) + read + write,
        output_tokens=_int(u.get("output_tokens")),
        cache_read_tokens=read,
        cache_write_tokens=write,
    )


def usage_to_vendor(u: Usage) -> dict[str, int]:
    out = {
        "input_tokens": max(0, u.input_tokens - u.cache_read_tokens - u.cache_write_tokens),
        "output_tokens": u.output_tokens,
    }
    if u.cache_write_tokens:
        out["cache_creation_input_tokens"] = u.cache_write_tokens
    if u.cache_read_tokens:
        out["cache_read_input_tokens"] = u.cache_read_tokens
    return out


def _int(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


# --- validation -------------------------------------------------------------


def _bad(message: str) -> errors.GatewayError:
    return errors.invalid_request(message)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check_str(obj: dict[str, Any], key: str, where: str) -> None:
    if not isinstance(obj.get(key), str):
        raise _bad(f"{where}.{key}: Field required (a string)" if key not in obj else f"{where}.{key}: must be a string")


def _check_image(block: dict[str, Any], where: str) -> None:
    source = block.get("source")
    if not isinstance(source, dict):
        raise _bad(f"{where}.source: must be an object")
    kind = source.get("type")
    if kind == "base64":
        _check_str(source, "media_type", f"{where}.source")
        _check_str(source, "data", f"{where}.source")
    elif kind == "url":
        _check_str(source, "url", f"{where}.source")
    else:
        raise _bad(f"{where}.source.type: must be 'base64' or 'url'")


def _check_block(block: Any, where: str, role: str) -> None:
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        raise _bad(f"{where}: must be a content block object with a string 'type'")
    kind = block["type"]
    if kind == "text":
        _check_str(block, "text", where)
    elif kind == "image":
        _check_image(block, where)
    elif kind == "document":
        if not isinstance(block.get("source"), dict):
            raise _bad(f"{where}.source: must be an object")
    elif kind == "tool_use":
        if role != "assistant":
            raise _bad(f"{where}: tool_use blocks are only allowed in assistant messages")
        _check_str(block, "id", where)
        _check_str(block, "name", where)
        if not isinstance(block.get("input"), dict):
            raise _bad(f"{where}.input: must be an object")
    elif kind == "tool_result":
        if role != "user":
            raise _bad(f"{where}: tool_result blocks are only allowed in user messages")
        _check_str(block, "tool_use_id", where)
        content = block.get("content")
        if isinstance(content, list):
            for j, inner in enumerate(content):
                _check_block(inner, f"{where}.content.{j}", role)
        elif content is not None and not isinstance(content, str):
            raise _bad(f"{where}.content: must be a string or an array of content blocks")
        if "is_error" in block and not isinstance(block["is_error"], bool):
            raise _bad(f"{where}.is_error: must be a boolean")
    elif kind == "thinking":
        _check_str(block, "thinking", where)
        if block.get("signature") is not None and not isinstance(block["signature"], str):
            raise _bad(f"{where}.signature: must be a string")
    elif kind == "redacted_thinking":
        _check_str(block, "data", where)
    # Other block types (server tool results, search results...) are newer vendor
    # features: accepted here so native pass-through keeps working; the IR drops them.


def _check_messages(messages: Any, system_allowed: bool) -> None:
    if not isinstance(messages, list) or not messages:
        raise _bad("messages: Field required (a non-empty array)" if messages is None else "messages: must be a non-empty array")
    last = len(messages) - 1
    for i, msg in enumerate(messages):
        where = f"messages.{i}"
        if not isinstance(msg, dict):
            raise _bad(f"{where}: must be an object with 'role' and 'content'")
        role = msg.get("role")
        if role == "system":
            if not system_allowed:
                raise _bad(
                    f"{where}.role: 'system' entries inside messages need the beta "
                    f"'{MID_CONVERSATION_SYSTEM_BETA}' in the 'anthropic-beta' header; without that beta "
                    "use the top-level 'system' field")
            _check_system(msg.get("content"), f"{where}.content")
            if not msg.get("content"):
                raise _bad(f"{where}.content: must not be empty")
            continue
        if role not in _ROLES:
            raise _bad(f"{where}.role: must be 'user' or 'assistant'")
        content = msg.get("content")
        if isinstance(content, str):
            empty = content == ""
        elif isinstance(content, list):
            for j, block in enumerate(content):
                _check_block(block, f"{where}.content.{j}", role)
            empty = not content
        else:
            raise _bad(f"{where}.content: must be a string or an array of content blocks")
        # The vendor's rule: only a final assistant turn (a prefill) may be empty.
        if empty and not (i == last and role == "assistant"):
            raise _bad(f"{where}: all messages must have non-empty content except for the optional final assistant message")


def _check_system(system: Any, where: str = "system") -> None:
    if system is None or isinstance(system, str):
        return
    if not isinstance(system, list):
        raise _bad(f"{where}: must be a string or an array of text blocks")
    for i, block in enumerate(system):
        if not isinstance(block, dict) or block.get("type") != "text" or not isinstance(block.get("text"), str):
            raise _bad(f"{where}.{i}: must be a text block {{type: 'text', text: <string>}}")


def _check_tools(tools: Any) -> None:
    if not isinstance(tools, list):
        raise _bad("tools: must be an array of tool definitions")
    for i, tool in enumerate(tools):
        where = f"tools.{i}"
        if not isinstance(tool, dict):
            raise _bad(f"{where}: must be an object")
        _check_str(tool, "name", where)
        if _is_custom_tool(tool):
            if not isinstance(tool.get("input_schema"), dict):
                raise _bad(f"{where}.input_schema: Field required (a JSON schema object)")
            if tool.get("description") is not None and not isinstance(tool["description"], str):
                raise _bad(f"{where}.description: must be a string")


def _is_custom_tool(tool: dict[str, Any]) -> bool:
    # Vendor server tools (web search, code execution...) carry a versioned `type`.
    return tool.get("type") in (None, "custom")


# Vendor-defined client tools: the client runs them, the vendor only knows their input schema.
# On conversion they become function tools with that schema, as the vendor documents it
# (https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/bash-tool and .../text-editor-tool).
_BASH_SCHEMA = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "description": "The bash command to run. Required unless the tool is being restarted."},
        "restart": {"type": "boolean", "description": "Specifying true will restart this tool."},
    },
}
_EDITOR_COMMANDS = ["view", "create", "str_replace", "insert"]
_EDITOR_SCHEMA = {
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


def _ir_tool(tool: dict[str, Any], where: str) -> Tool | None:
    """The IR form of a tool definition; None for a vendor server tool (only the vendor runs it)."""
    if _is_custom_tool(tool):
        return Tool(tool["name"], tool.get("description"), tool["input_schema"], cache_mark(tool))
    kind = str(tool.get("type"))
    for pattern, description, schema in _CLIENT_TOOLS:
        if pattern.fullmatch(kind):
            return Tool(tool["name"], description, schema, cache_mark(tool))
    if kind.startswith("computer_"):
        raise _bad(f"{where}: the vendor's computer-use tool ({kind}) needs a model served over the messages "
                   "protocol; declare it as a custom tool with an input_schema for other models")
    return None


def _check_tool_choice(choice: Any) -> None:
    if not isinstance(choice, dict):
        raise _bad("tool_choice: must be an object such as {type: 'auto'}")
    kind = choice.get("type")
    if kind not in _TOOL_CHOICES:
        raise _bad("tool_choice.type: must be one of 'auto', 'any', 'tool', 'none'")
    if kind == "tool" and not isinstance(choice.get("name"), str):
        raise _bad("tool_choice.name: Field required (a string) when type is 'tool'")
    dpt = choice.get("disable_parallel_tool_use")
    if dpt is not None and not isinstance(dpt, bool):
        raise _bad("tool_choice.disable_parallel_tool_use: must be a boolean")


def _check_model_and_messages(body: Any, beta_names: list[str] | None) -> str:
    if not isinstance(body, dict):
        raise _bad("Request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _bad("model: Field required (a non-empty string)" if model is None else "model: must be a non-empty string")
    _check_messages(body.get("messages"), allows_mid_conversation_system(beta_names or []))
    return model


def validate(body: Any, beta_names: list[str] | None = None) -> tuple[str, bool]:
    model = _check_model_and_messages(body, beta_names)
    max_tokens = body.get("max_tokens")
    if max_tokens is None:
        raise _bad("max_tokens: Field required")
    if not _is_int(max_tokens) or max_tokens < 1:
        raise _bad("max_tokens: must be a positive integer")
    return model, _check_common(body)


def validate_count(body: Any, beta_names: list[str] | None = None) -> str:
    """A `count_tokens` body: like a message request without `max_tokens`; returns the model."""
    model = _check_model_and_messages(body, beta_names)
    _check_common(body)
    return model


def _check_common(body: dict[str, Any]) -> bool:
    """The optional fields both request kinds share; returns `stream`."""
    _check_system(body.get("system"))
    for key in ("temperature", "top_p"):  # both 0 ... 1 in the vendor's API reference
        value = body.get(key)
        if value is not None and (not _is_number(value) or not 0 <= value <= 1):
            raise _bad(f"{key}: must be a number between 0 and 1")
    if body.get("top_k") is not None and not _is_int(body["top_k"]):
        raise _bad("top_k: must be an integer")
    stops = body.get("stop_sequences")
    if stops is not None and (not isinstance(stops, list) or not all(isinstance(s, str) for s in stops)):
        raise _bad("stop_sequences: must be an array of strings")
    if body.get("tools") is not None:
        _check_tools(body["tools"])
    if body.get("tool_choice") is not None:
        _check_tool_choice(body["tool_choice"])
    stream = body.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise _bad("stream: must be a boolean")
    metadata = body.get("metadata")
    if metadata is not None:
        if not isinstance(metadata, dict):
            raise _bad("metadata: must be an object")
        if metadata.get("user_id") is not None and not isinstance(metadata["user_id"], str):
            raise _bad("metadata.user_id: must be a string")
    return stream


def check_version(headers: Headers) -> None:
    version = headers.get(b"alt-version")
    if version is not None:
        if version != ALT_VERSION:
            raise _bad(f"Unsupported alt-version '{shown(version.decode(errors='replace'), 64)}'; use 2023-06-01")
        return
    # The vendor's own header name is an alias, so its official SDK works unmodified; its newer
    # releases send later dates of the same wire protocol, which we accept.
    vendor = headers.get(b"anthropic-version")
    if vendor is None:
        raise _bad("The 'alt-version' header is required (use 2023-06-01)")
    if not (len(vendor) == 10 and vendor[4:5] == b"-" and vendor[7:8] == b"-" and vendor >= ALT_VERSION):
        raise _bad(f"Unsupported anthropic-version '{shown(vendor.decode(errors='replace'), 64)}' "
                   "(the alias of alt-version); "
                   "use 2023-06-01")


# --- decoding into the IR ---------------------------------------------------


def cache_mark(block: dict[str, Any]) -> str | None:
    """The IR cache mark of a block's `cache_control` (`{type: ephemeral, ttl?}`), else None."""
    control = block.get("cache_control")
    if control is None or not isinstance(control, dict) or control.get("type") != "ephemeral":
        return None
    ttl = control.get("ttl")
    return ttl if isinstance(ttl, str) and ttl else "5m"


def cache_control(mark: str) -> dict[str, str]:
    """The vendor's `cache_control` for an IR cache mark (the default lifetime is not spelled out)."""
    return {"type": "ephemeral"} if mark == "5m" else {"type": "ephemeral", "ttl": mark}


def _image_part(block: dict[str, Any]) -> ImagePart:
    source = block["source"]
    if source.get("type") == "url":
        return ImagePart(url=source["url"], cache=cache_mark(block))
    return ImagePart(data=source["data"], media_type=source["media_type"], cache=cache_mark(block))


def _document_part(block: dict[str, Any], where: str) -> TextPart:
    source = block["source"]
    if source.get("type") == "text" and isinstance(source.get("data"), str):
        return TextPart(source["data"], cache_mark(block))
    if source.get("type") == "content" and isinstance(source.get("content"), str):
        return TextPart(source["content"], cache_mark(block))
    # PDFs and file references have no form in the IR (nor in chat completions).
    raise _bad(f"{where}: document blocks other than plain text need a model served over the messages protocol")


def _result_content(content: Any, where: str) -> list[TextPart | ImagePart]:
    if content is None:
        return []
    if isinstance(content, str):
        return [TextPart(content)]
    parts: list[TextPart | ImagePart] = []
    for j, block in enumerate(content):
        kind = block["type"]
        if kind == "text":
            parts.append(TextPart(block["text"], cache_mark(block)))
        elif kind == "image":
            parts.append(_image_part(block))
        elif kind == "document":
            parts.append(_document_part(block, f"{where}.{j}"))
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
    out: list[Message] = []

    def add(msg_role: str, part: Part) -> None:
        # Runs of tool results become one IR `tool` turn, other blocks one
        # `user`/`assistant` turn, in the order the client gave them.
        if out and out[-1].role == msg_role:
            out[-1].parts.append(part)
        else:
            out.append(Message(msg_role, [part]))  # type: ignore[arg-type]

    for j, block in enumerate(content):
        where = f"messages.{i}.content.{j}"
        kind = block["type"]
        if kind == "text":
            add(role, TextPart(block["text"], cache_mark(block)))
        elif kind == "image":
            add(role, _image_part(block))
        elif kind == "document":
            add(role, _document_part(block, where))
        elif kind == "tool_use":
            add(role, ToolCall(block["id"], block["name"], orjson.dumps(block["input"]).decode(), cache_mark(block)))
        elif kind == "tool_result":
            result = ToolResult(
                block["tool_use_id"],
                _result_content(block.get("content"), f"{where}.content"),
                bool(block.get("is_error", False)),
                cache_mark(block),
            )
            add("tool", result)
        elif kind == "thinking":
            add(role, ThinkingPart(block["thinking"], block.get("signature")))
        elif kind == "redacted_thinking":
            add(role, ThinkingPart("", redacted=block["data"]))
        # Server-tool blocks have no IR form: dropped.
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


_EFFORTS = {"low": "low", "medium": "medium", "high": "high", "max": "high", "xhigh": "high"}


def reasoning_effort(body: dict[str, Any]) -> str | None:
    """The reasoning effort a request asks for: `output_config.effort` where given, else from
    `thinking.budget_tokens` (under 4 096: low, under 16 384: medium, else high)."""
    output_config = body.get("output_config")
    effort = output_config.get("effort") if isinstance(output_config, dict) else None
    if isinstance(effort, str) and effort in _EFFORTS:
        return _EFFORTS[effort]
    thinking = body.get("thinking")
    if not isinstance(thinking, dict) or thinking.get("type") != "enabled":
        return None
    budget = thinking.get("budget_tokens")
    if not _is_int(budget):
        return None
    return "low" if budget < 4096 else "medium" if budget < 16384 else "high"


def thinking_budget(body: dict[str, Any]) -> int | None:
    """`thinking` as an IR budget: `enabled` its budget_tokens, `adaptive` -1 (the model decides),
    `disabled` 0; None when the request does not say."""
    thinking = body.get("thinking")
    kind = thinking.get("type") if isinstance(thinking, dict) else None
    if kind == "enabled" and _is_int(thinking.get("budget_tokens")) and thinking["budget_tokens"] > 0:
        return thinking["budget_tokens"]
    return {"adaptive": -1, "disabled": 0}.get(kind)  # type: ignore[arg-type]


def thinking_field(budget: int | None) -> dict[str, Any] | None:
    """The vendor's `thinking` request field for an IR budget (the inverse of `thinking_budget`);
    Bedrock's and Vertex's Claude models take it too."""
    if budget is None:
        return None
    if budget < 0:
        return {"type": "adaptive"}
    return {"type": "enabled", "budget_tokens": budget} if budget else {"type": "disabled"}


def to_ir(body: dict[str, Any]) -> ChatRequest:
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
    tools = [tool for i, t in enumerate(body.get("tools") or []) if (tool := _ir_tool(t, f"tools.{i}")) is not None]
    metadata = body.get("metadata") or {}
    return ChatRequest(
        model=body["model"],
        messages=messages,
        system=system_list,
        system_cache=system_cache,
        max_tokens=body.get("max_tokens"),  # absent on count_tokens
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
    )


# --- encoding out of the IR -------------------------------------------------


def message_id(upstream_id: str | None) -> str:
    if upstream_id and upstream_id.startswith("msg_"):
        return upstream_id
    return "msg_" + (upstream_id or uuid.uuid4().hex)


def tool_input(arguments: str) -> dict[str, Any]:
    """The `input` object of a tool_use block from IR JSON arguments text.

    The vendor's `input` is always an object; arguments that are empty or not a
    JSON object (a model's malformed output) become {}.
    """
    try:
        value = orjson.loads(arguments) if arguments else {}
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def encode_response(resp: ChatResponse, model: str) -> bytes:
    content: list[dict[str, Any]] = []
    for part in resp.parts:
        if isinstance(part, TextPart):
            if part.text:
                content.append({"type": "text", "text": part.text})
        elif isinstance(part, ThinkingPart):
            if part.redacted is not None:
                content.append({"type": "redacted_thinking", "data": part.redacted})
            else:
                content.append({"type": "thinking", "thinking": part.text, "signature": part.signature or ""})
        elif isinstance(part, ToolCall):
            content.append({"type": "tool_use", "id": part.id, "name": part.name, "input": tool_input(part.arguments)})
    body = {
        "id": message_id(resp.id),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": STOP_TO_VENDOR.get(resp.stop_reason, "end_turn"),
        "stop_sequence": resp.stop_sequence,
        "usage": usage_to_vendor(resp.usage),
    }
    return orjson.dumps(body)


def vendor_error_type(error_type: str) -> str:
    return _VENDOR_ERROR_TYPE.get(error_type, "api_error")


def stream_error(error_type: str, message: str) -> bytes:
    return sse_frame("error", {"type": "error", "error": {"type": vendor_error_type(error_type), "message": message}})


PING = sse_frame("ping", {"type": "ping"})


# --- streaming ----------------------------------------------------------------


_TEXT_BLOCK = ("text", -1)


class MessagesStreamEncoder:
    """IR stream events -> the vendor's SSE event sequence, on the fly.

    The vendor streams one content block at a time: start, deltas, stop, with
    indexes counting up from 0. A chat-completions upstream may interleave text
    and several tool calls, so blocks are opened in arrival order and an event
    for a block that cannot open yet is held back:

    - text or thinking blocks close as soon as anything else arrives;
    - a tool_use block closes once its arguments so far are complete JSON (the
      usual sequential tool-call stream), otherwise later blocks' events wait in
      a queue until it is complete or the stream ends. Only interleaving
      upstreams ever wait; their events are released in order.
    """

    def __init__(self, model: str) -> None:
        self.model = model
        self.started = False
        self.done = False
        self.usage = Usage()
        self._next_index = 0
        self._open: tuple[str, int] | None = None  # ("text"|"thinking", -1) or ("tool", ir index)
        self._open_index = -1
        self._args: list[str] = []  # arguments text of the open tool block
        self._text_head = b""  # the encoded start of a text delta of the open block
        self._known_tools: set[int] = set()
        self._closed_tools: set[int] = set()
        self._queue: list[StreamEvent] = []

    # StreamEncoder protocol
    def keepalive(self) -> bytes:
        return PING

    def error_event(self, error_type: str, message: str) -> bytes:
        self.done = True
        return stream_error(error_type, message)

    def encode(self, event: StreamEvent) -> bytes:
        if type(event) is TextDelta and self._open == _TEXT_BLOCK and not self._queue and not self.done:
            # The bulk of a stream: more text for the open text block, framed from its encoded head.
            return self._text_head + orjson.dumps(event.text) + b"}}\n\n" if event.text else b""
        if self.done:
            return b""
        out: list[bytes] = []
        if isinstance(event, StreamStart):
            self.usage = self.usage.merged(event.usage)
            self._start(out, event.id)
        elif isinstance(event, (TextDelta, ThinkingDelta, ToolCallStart, ToolCallDelta)):
            self._start(out, None)
            self._route(event, out, force=False)
        elif isinstance(event, UsageUpdate):
            self.usage = self.usage.merged(event.usage)
        elif isinstance(event, StreamEnd):
            self._start(out, None)
            self._drain(out, force=True)
            self._close(out)
            self.usage = self.usage.merged(event.usage)
            self._finish(out, event)
        elif isinstance(event, StreamError):
            out.append(self.error_event(event.error_type, event.message))
        return b"".join(out)

    def _start(self, out: list[bytes], upstream_id: str | None) -> None:
        if self.started:
            return
        self.started = True
        message = {
            "id": message_id(upstream_id),
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage_to_vendor(self.usage),
        }
        out.append(sse_frame("message_start", {"type": "message_start", "message": message}))

    def _finish(self, out: list[bytes], end: StreamEnd) -> None:
        self.done = True
        delta = {"stop_reason": STOP_TO_VENDOR.get(end.stop_reason, "end_turn"), "stop_sequence": end.stop_sequence}
        # Cumulative counts: chat upstreams only know the input count at the end.
        usage = usage_to_vendor(self.usage)
        out.append(sse_frame("message_delta", {"type": "message_delta", "delta": delta, "usage": usage}))
        out.append(sse_frame("message_stop", {"type": "message_stop"}))

    @staticmethod
    def _target(event: StreamEvent) -> tuple[str, int]:
        if isinstance(event, TextDelta):
            return _TEXT_BLOCK
        if isinstance(event, ThinkingDelta):
            return ("redacted" if event.redacted is not None else "thinking", -1)
        return ("tool", event.index)  # type: ignore[union-attr]

    def _args_complete(self) -> bool:
        try:
            orjson.loads("".join(self._args))
        except orjson.JSONDecodeError:
            return False
        return True

    def _can_switch(self, force: bool) -> bool:
        return force or self._open is None or self._open[0] != "tool" or self._args_complete()

    def _route(self, event: StreamEvent, out: list[bytes], force: bool) -> None:
        """A live event: register tool calls, place the event, release what it unblocked."""
        if isinstance(event, ToolCallStart):
            if event.index in self._known_tools:
                return  # a repeated header chunk of a call already seen
            self._known_tools.add(event.index)
        elif isinstance(event, ToolCallDelta) and event.index not in self._known_tools:
            return  # arguments without a header: no block to put them in
        self._place(event, out, force)
        if self._queue and self._can_switch(force):
            self._drain(out, force)

    def _place(self, event: StreamEvent, out: list[bytes], force: bool) -> None:
        target = self._target(event)
        if isinstance(event, ToolCallDelta) and event.index in self._closed_tools:
            return  # the call's JSON was already complete; a vendor block cannot reopen
        # A tool call and a redacted block each open a block of their own.
        if target == self._open and not (isinstance(event, ToolCallStart) or target[0] == "redacted"):
            self._delta(event, out)
        elif not self._queue and self._can_switch(force):
            self._close(out)
            self._open_block(event, out)
        else:
            self._queue.append(event)

    def _drain(self, out: list[bytes], force: bool) -> None:
        # Events re-queued during a pass keep their order: `_place` queues
        # everything behind the first event that still has to wait.
        while self._queue and self._can_switch(force):
            pending, self._queue = self._queue, []
            for event in pending:
                self._place(event, out, force)

    def _open_block(self, event: StreamEvent, out: list[bytes]) -> None:
        index = self._next_index
        self._next_index += 1
        self._open_index = index
        self._open = self._target(event)
        if isinstance(event, ToolCallStart):
            block: dict[str, Any] = {"type": "tool_use", "id": event.id, "name": event.name, "input": {}}
            self._args = []
        elif isinstance(event, ThinkingDelta) and event.redacted is not None:
            block = {"type": "redacted_thinking", "data": event.redacted}  # whole at its start, as the vendor sends it
        elif isinstance(event, ThinkingDelta):
            block = {"type": "thinking", "thinking": "", "signature": ""}
        else:
            block = {"type": "text", "text": ""}
        out.append(sse_frame("content_block_start", {"type": "content_block_start", "index": index, "content_block": block}))
        # sse_frame("content_block_delta", {..., "delta": {"type": "text_delta", "text": <text>}}) up to the text
        self._text_head = (b'event: content_block_delta\ndata: {"type":"content_block_delta","index":%d,'
                           b'"delta":{"type":"text_delta","text":' % index)
        if not isinstance(event, ToolCallStart) and block["type"] != "redacted_thinking":
            self._delta(event, out)

    def _delta(self, event: StreamEvent, out: list[bytes]) -> None:
        if isinstance(event, TextDelta):
            if not event.text:
                return
            delta: dict[str, Any] = {"type": "text_delta", "text": event.text}
        elif isinstance(event, ThinkingDelta):
            if event.text:
                self._frame_delta({"type": "thinking_delta", "thinking": event.text}, out)
            if event.signature:
                self._frame_delta({"type": "signature_delta", "signature": event.signature}, out)
            return
        elif isinstance(event, ToolCallDelta):
            if not event.arguments:
                return
            self._args.append(event.arguments)
            delta = {"type": "input_json_delta", "partial_json": event.arguments}
        else:
            return
        self._frame_delta(delta, out)

    def _frame_delta(self, delta: dict[str, Any], out: list[bytes]) -> None:
        out.append(
            sse_frame("content_block_delta", {"type": "content_block_delta", "index": self._open_index, "delta": delta})
        )

    def _close(self, out: list[bytes]) -> None:
        if self._open is None:
            return
        if self._open[0] == "tool":
            self._closed_tools.add(self._open[1])
        out.append(sse_frame("content_block_stop", {"type": "content_block_stop", "index": self._open_index}))
        self._open = None


# --- pass-through of a native upstream ---------------------------------------




class MessagesStreamTap:
    """Reads usage from a native vendor stream without changing its events.

    Only `message_start`, `message_delta` and `message_stop` frames are parsed;
    the bulk of the stream (content deltas) is skipped by event name. The model
    name appears once, in `message_start`, the stream's first frame: that frame is
    held until complete and its `model` spliced to the client's id; every later
    byte is forwarded as it came.
    """

    _WATCHED = frozenset({"message_start", "message_delta", "message_stop", "error"})

    end_marker = sse_frame("message_stop", {"type": "message_stop"})  # after a stop_reason, if missing
    after_error = b""  # an `error` event is itself the end of a messages stream

    def __init__(self, model: str | None = None) -> None:
        self.usage: Usage | None = None
        self.finished = False
        self.stopped = False  # saw a message_delta with a stop_reason
        self.error: bytes | None = None  # the data of an upstream `error` event, once one came
        self.events = 0  # events seen, pings and comments aside (those are no progress)
        self._parser = sse.SSEParser()
        self._raw: dict[str, Any] = {}  # vendor usage fields, cumulative
        self._model_field = model_field(model) if model is not None else None

    def filter(self, chunk: bytes) -> bytes:
        raws = self._parser.feed_raw(chunk)
        for i, raw in enumerate(raws):
            if raw.startswith(b":"):
                # A proxy's comment: not a messages keep-alive; the relay sends `ping` events instead.
                raws[i] = b""
                continue
            if raw.startswith(b"event: ping"):
                continue  # keep-alives: no progress
            if b"data: {" not in raw and b"data:{" not in raw:
                raise sse.unreadable_event()
            self.events += 1
            if self._model_field is not None and b"message_start" in raw:
                raws[i] = set_model(raw, self._model_field, 1)  # the client's model id
                self._model_field = None
            # Content deltas, the bulk of a stream, are skipped without decoding.
            if b"message_" not in raw and b"error" not in raw:
                continue
            frame = sse.parse_event(raw)
            event = frame.event if frame is not None else None
            if event not in self._WATCHED:
                continue
            if event == "message_stop":
                self.finished = True
                continue
            if event == "error":
                self.error = frame.data.encode()
                continue
            try:
                payload = orjson.loads(frame.data)
            except orjson.JSONDecodeError:
                continue
            if not isinstance(payload, dict):
                continue
            if event == "message_start":
                usage = (payload.get("message") or {}).get("usage")
            else:
                usage = payload.get("usage")
                delta = payload.get("delta")
                if isinstance(delta, dict) and delta.get("stop_reason"):
                    self.stopped = True
            if isinstance(usage, dict):
                # message_delta counts are cumulative and may omit fields message_start gave.
                self._raw.update({k: v for k, v in usage.items() if v is not None})
                self.usage = usage_from_vendor(self._raw)
        # Whole events only: what reached the client is always a readable stream, and a stream
        # that fails inside its first event can still be failed over.
        return raws[0] if len(raws) == 1 else b"".join(raws)

    def error_event(self, error_type: str, message: str) -> bytes:
        return stream_error(error_type, message)


class MessagesCodec:
    protocol = ClientProtocol.MESSAGES
    native_wire = NATIVE_WIRE

    def api_key(self, headers: Headers) -> bytes | None:
        # x-api-key per the spec; the vendor's current SDK sends its key as a Bearer token.
        return headers.get(b"x-api-key") or bearer_token(headers)

    def check_headers(self, headers: Headers) -> None:
        check_version(headers)

    def validation_body(self, message: str) -> bytes:
        return orjson.dumps({"type": "error", "error": {"type": "invalid_request_error", "message": message}})

    def validate(self, body: Any, headers: Mapping[bytes, bytes] | None = None) -> tuple[str, bool]:
        return validate(body, betas(headers) if headers else None)

    def read_typed(self, raw: bytes, headers: Mapping[bytes, bytes]) -> tuple[Any, str, bool] | None:
        return messages_view.read(raw, allows_mid_conversation_system(betas(headers)))

    def upstream_headers(self, headers: Mapping[bytes, bytes]) -> dict[str, str]:
        return vendor_headers(headers)

    def to_ir(self, body: dict[str, Any]) -> ChatRequest:
        return to_ir(body)

    def encode_response(self, resp: ChatResponse, model: str, body: dict[str, Any] | None = None) -> bytes:
        return encode_response(resp, model)

    def stream_encoder(self, model: str, body: dict[str, Any]) -> MessagesStreamEncoder:
        return MessagesStreamEncoder(model)

    def keepalive(self) -> bytes:
        return PING

    def native_usage(self, body: dict[str, Any]) -> Usage:
        return usage_from_vendor(body.get("usage"))

    def native_stream_tap(self, body: dict[str, Any]) -> MessagesStreamTap:
        return MessagesStreamTap(body.get("model"))
