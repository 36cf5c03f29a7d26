"""Validation of messages requests (`validate`, `validate_count`) and of the version header:
each refusal names the field, in the spec's 7.2 shape."""

from __future__ import annotations

from typing import Any

from modelgate import errors
from modelgate.protocols.base import Headers, is_int, is_number
from modelgate.protocols.paths import Path, dotted
from modelgate.protocols.messages.wire import (
    ALT_VERSION,
    MID_CONVERSATION_SYSTEM_BETA,
    allows_mid_conversation_system,
)
from modelgate.safetext import shown

_ROLES = ("user", "assistant")
_TOOL_CHOICES = ("auto", "any", "tool", "none")


def _bad(message: str) -> errors.GatewayError:
    return errors.invalid_request(message)




def _check_str(obj: dict[str, Any], key: str, where: Path) -> None:
    if not isinstance(obj.get(key), str):
        at = dotted((where, key))
        raise _bad(f"{at}: Field required (a string)" if key not in obj else f"{at}: must be a string")


def _check_image(block: dict[str, Any], where: Path) -> None:
    source = block.get("source")
    if not isinstance(source, dict):
        raise _bad(f"{dotted(where)}.source: must be an object")
    kind = source.get("type")
    if kind == "base64":
        _check_str(source, "media_type", (where, "source"))
        _check_str(source, "data", (where, "source"))
    elif kind == "url":
        _check_str(source, "url", (where, "source"))
    else:
        raise _bad(f"{dotted(where)}.source.type: must be 'base64' or 'url'")


def _check_block(block: Any, where: Path, role: str) -> None:
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        raise _bad(f"{dotted(where)}: must be a content block object with a string 'type'")
    kind = block["type"]
    if kind == "text":
        _check_str(block, "text", where)
    elif kind == "image":
        _check_image(block, where)
    elif kind == "document":
        if not isinstance(block.get("source"), dict):
            raise _bad(f"{dotted(where)}.source: must be an object")
    elif kind == "tool_use":
        if role != "assistant":
            raise _bad(f"{dotted(where)}: tool_use blocks are only allowed in assistant messages")
        _check_str(block, "id", where)
        _check_str(block, "name", where)
        if not isinstance(block.get("input"), dict):
            raise _bad(f"{dotted(where)}.input: must be an object")
    elif kind == "tool_result":
        if role != "user":
            raise _bad(f"{dotted(where)}: tool_result blocks are only allowed in user messages")
        _check_str(block, "tool_use_id", where)
        content = block.get("content")
        if isinstance(content, list):
            for j, inner in enumerate(content):
                _check_block(inner, ((where, "content"), j), role)
        elif content is not None and not isinstance(content, str):
            raise _bad(f"{dotted(where)}.content: must be a string or an array of content blocks")
        if "is_error" in block and not isinstance(block["is_error"], bool):
            raise _bad(f"{dotted(where)}.is_error: must be a boolean")
    elif kind == "thinking":
        _check_str(block, "thinking", where)
        if block.get("signature") is not None and not isinstance(block["signature"], str):
            raise _bad(f"{dotted(where)}.signature: must be a string")
    elif kind == "redacted_thinking":
        _check_str(block, "data", where)
    # Other block types (server tool results, search results...) are newer vendor
    # features: accepted here so native pass-through keeps working; the IR drops them.


def _check_messages(messages: Any, system_allowed: bool) -> None:
    if not isinstance(messages, list) or not messages:
        raise _bad("messages: Field required (a non-empty array)" if messages is None else "messages: must be a non-empty array")
    last = len(messages) - 1
    for i, msg in enumerate(messages):
        where = ("messages", i)
        if not isinstance(msg, dict):
            raise _bad(f"{dotted(where)}: must be an object with 'role' and 'content'")
        role = msg.get("role")
        if role == "system":
            if not system_allowed:
                raise _bad(
                    f"{dotted(where)}.role: 'system' entries inside messages need the beta "
                    f"'{MID_CONVERSATION_SYSTEM_BETA}' in the 'anthropic-beta' header; without that beta "
                    "use the top-level 'system' field")
            _check_system(msg.get("content"), (where, "content"))
            if not msg.get("content"):
                raise _bad(f"{dotted(where)}.content: must not be empty")
            continue
        if role not in _ROLES:
            raise _bad(f"{dotted(where)}.role: must be 'user' or 'assistant'")
        content = msg.get("content")
        if isinstance(content, str):
            empty = content == ""
        elif isinstance(content, list):
            blocks = (where, "content")
            for j, block in enumerate(content):
                _check_block(block, (blocks, j), role)
            empty = not content
        else:
            raise _bad(f"{dotted(where)}.content: must be a string or an array of content blocks")
        # The vendor's rule: only a final assistant turn (a prefill) may be empty.
        if empty and not (i == last and role == "assistant"):
            raise _bad(f"{dotted(where)}: all messages must have non-empty content except for the optional final "
                       "assistant message")


def _check_system(system: Any, where: Path = "system") -> None:
    if system is None or isinstance(system, str):
        return
    if not isinstance(system, list):
        raise _bad(f"{dotted(where)}: must be a string or an array of text blocks")
    for i, block in enumerate(system):
        if not isinstance(block, dict) or block.get("type") != "text" or not isinstance(block.get("text"), str):
            raise _bad(f"{dotted((where, i))}: must be a text block {{type: 'text', text: <string>}}")


def check_tools(tools: Any) -> None:
    if not isinstance(tools, list):
        raise _bad("tools: must be an array of tool definitions")
    for i, tool in enumerate(tools):
        where = ("tools", i)
        if not isinstance(tool, dict):
            raise _bad(f"{dotted(where)}: must be an object")
        _check_str(tool, "name", where)
        if is_custom_tool(tool):
            if not isinstance(tool.get("input_schema"), dict):
                raise _bad(f"{dotted(where)}.input_schema: Field required (a JSON schema object)")
            if tool.get("description") is not None and not isinstance(tool["description"], str):
                raise _bad(f"{dotted(where)}.description: must be a string")


def is_custom_tool(tool: dict[str, Any]) -> bool:
    # Vendor server tools (web search, code execution...) carry a versioned `type`.
    return tool.get("type") in (None, "custom")


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
    if not is_int(max_tokens) or max_tokens < 1:
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
        if value is not None and (not is_number(value) or not 0 <= value <= 1):
            raise _bad(f"{key}: must be a number between 0 and 1")
    if body.get("top_k") is not None and not is_int(body["top_k"]):
        raise _bad("top_k: must be an integer")
    stops = body.get("stop_sequences")
    if stops is not None and (not isinstance(stops, list) or not all(isinstance(s, str) for s in stops)):
        raise _bad("stop_sequences: must be an array of strings")
    if body.get("tools") is not None:
        check_tools(body["tools"])
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
