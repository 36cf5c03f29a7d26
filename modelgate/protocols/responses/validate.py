"""Responses API requests: validation (the 7.2 errors, in the chat protocol's shape)."""

from __future__ import annotations

from typing import Any

from modelgate.errors import invalid_request
from modelgate.protocols.base import is_int, is_number, requested_model
from modelgate.protocols.paths import Path, indexed

MESSAGE_ROLES = ("user", "assistant", "system", "developer")
TEXT_PARTS = ("input_text", "output_text")
_PART_TYPES = (*TEXT_PARTS, "input_image", "input_file", "refusal")
_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")  # the SDK's ReasoningEffort (openai 3.57)
_SUMMARIES = ("auto", "concise", "detailed")
# Request fields that point at state kept by the vendor: only a Responses upstream can serve them.
STATEFUL_FIELDS = ("previous_response_id", "conversation", "prompt")




def _check_range(body: dict[str, Any], name: str, low: float, high: float) -> None:
    value = body.get(name)
    if value is not None and (not is_number(value) or not low <= value <= high):
        raise invalid_request(f"'{name}' must be a number between {low:g} and {high:g}")


def _check_part(part: Any, where: Path) -> None:
    if not isinstance(part, dict) or part.get("type") not in _PART_TYPES:
        raise invalid_request(f"'{indexed(where)}.type' must be one of {', '.join(_PART_TYPES)}")
    kind = part["type"]
    if kind in TEXT_PARTS and not isinstance(part.get("text"), str):
        raise invalid_request(f"'{indexed(where)}.text' must be a string")
    if kind == "refusal" and not isinstance(part.get("refusal"), str):
        raise invalid_request(f"'{indexed(where)}.refusal' must be a string")
    if kind == "input_image" and not (isinstance(part.get("image_url"), str) or isinstance(part.get("file_id"), str)):
        raise invalid_request(f"'{indexed(where)}' needs 'image_url' (a URL or a data: URL) or 'file_id'")


def _check_content(content: Any, where: Path) -> None:
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        raise invalid_request(f"'{indexed(where)}' must be a string or an array of content parts")
    for i, part in enumerate(content):
        _check_part(part, (where, i))


def _check_item(item: Any, where: Path) -> None:
    if not isinstance(item, dict):
        raise invalid_request(f"'{indexed(where)}' must be an object")
    kind = item.get("type", "message")
    if not isinstance(kind, str):
        raise invalid_request(f"'{indexed(where)}.type' must be a string")
    if kind == "message":
        if item.get("role") not in MESSAGE_ROLES:
            raise invalid_request(f"'{indexed(where)}.role' must be one of {', '.join(MESSAGE_ROLES)}")
        _check_content(item.get("content"), (where, "content"))
    elif kind in ("function_call", "custom_tool_call"):
        for name in ("call_id", "name", "arguments" if kind == "function_call" else "input"):
            if not isinstance(item.get(name), str):
                raise invalid_request(f"'{indexed(where)}.{name}' must be a string")
        if item.get("namespace") is not None and not isinstance(item["namespace"], str):
            raise invalid_request(f"'{indexed(where)}.namespace' must be a string")
    elif kind in ("function_call_output", "custom_tool_call_output"):
        if not isinstance(item.get("call_id"), str):
            raise invalid_request(f"'{indexed(where)}.call_id' must be a string")
        _check_content(item.get("output"), (where, "output"))
    elif kind == "reasoning":
        for name in ("summary", "content"):
            entries = item.get(name)
            if entries is None and name == "content":
                continue
            if not isinstance(entries, list) or not all(
                    isinstance(e, dict) and isinstance(e.get("text"), str) for e in entries):
                raise invalid_request(f"'{indexed(where)}.{name}' must be an array of {{type, text}} parts")
        if item.get("encrypted_content") is not None and not isinstance(item["encrypted_content"], str):
            raise invalid_request(f"'{indexed(where)}.encrypted_content' must be a string")
    # Other item types (hosted tool calls, item_reference, ...) are the vendor's to check:
    # they pass through to a Responses upstream and are dealt with in to_ir otherwise.


def check_tools(tools: Any, where: Path = "tools") -> None:
    if not isinstance(tools, list):
        raise invalid_request(f"'{indexed(where)}' must be an array")
    for i, tool in enumerate(tools):
        at = (where, i)
        if not isinstance(tool, dict) or not isinstance(tool.get("type"), str):
            raise invalid_request(f"'{indexed(at)}' must be an object with a string 'type'")
        if tool["type"] == "namespace" and where == "tools":  # a group of function and custom tools
            if not isinstance(tool.get("name"), str) or not tool["name"]:
                raise invalid_request(f"'{indexed(at)}.name' must be a non-empty string")
            check_tools(tool.get("tools"), (at, "tools"))
            continue
        if tool["type"] not in ("function", "custom"):
            continue
        if not isinstance(tool.get("name"), str) or not tool["name"]:
            raise invalid_request(f"'{indexed(at)}.name' must be a non-empty string")
        if tool["type"] == "custom":
            if tool.get("format") is not None and not isinstance(tool["format"], dict):
                raise invalid_request(f"'{indexed(at)}.format' must be an object")
            continue
        if tool.get("parameters") is not None and not isinstance(tool["parameters"], dict):
            raise invalid_request(f"'{indexed(at)}.parameters' must be a JSON-schema object")
        if tool.get("description") is not None and not isinstance(tool["description"], str):
            raise invalid_request(f"'{indexed(at)}.description' must be a string")
        if tool.get("strict") is not None and not isinstance(tool["strict"], bool):
            raise invalid_request(f"'{indexed(at)}.strict' must be a boolean")


def _check_tool_choice(choice: Any) -> None:
    if isinstance(choice, str):
        if choice not in ("auto", "none", "required"):
            raise invalid_request("'tool_choice' must be 'auto', 'none', 'required' or an object")
        return
    if not isinstance(choice, dict) or not isinstance(choice.get("type"), str):
        raise invalid_request("'tool_choice' must be 'auto', 'none', 'required' or an object with a 'type'")
    if choice["type"] in ("function", "custom") and not isinstance(choice.get("name"), str):
        raise invalid_request(f"'tool_choice.name' must be a string for type '{choice['type']}'")
    if choice["type"] == "allowed_tools":
        if choice.get("mode") not in ("auto", "required") or not isinstance(choice.get("tools"), list):
            raise invalid_request("'tool_choice' of type 'allowed_tools' needs 'mode' (auto, required) and 'tools'")


def _check_text(text: Any) -> None:
    if not isinstance(text, dict):
        raise invalid_request("'text' must be an object")
    fmt = text.get("format")
    if fmt is None:
        return
    if not isinstance(fmt, dict) or fmt.get("type") not in ("text", "json_object", "json_schema"):
        raise invalid_request("'text.format.type' must be 'text', 'json_object' or 'json_schema'")
    if fmt["type"] == "json_schema" and (not isinstance(fmt.get("name"), str) or not isinstance(fmt.get("schema"), dict)):
        raise invalid_request("'text.format' of type 'json_schema' needs 'name' (a string) and 'schema' (an object)")


def _check_reasoning(reasoning: Any) -> None:
    if not isinstance(reasoning, dict):
        raise invalid_request("'reasoning' must be an object")
    if reasoning.get("effort") is not None and reasoning["effort"] not in _EFFORTS:
        raise invalid_request(f"'reasoning.effort' must be one of {', '.join(_EFFORTS)}")
    if reasoning.get("summary") is not None and reasoning["summary"] not in _SUMMARIES:
        raise invalid_request(f"'reasoning.summary' must be one of {', '.join(_SUMMARIES)}")


def validate(body: Any) -> tuple[str, bool]:
    model = requested_model(body)
    items = body.get("input")
    if items is None:
        if not any(body.get(name) for name in STATEFUL_FIELDS):
            raise invalid_request("'input' is required (a string or an array of input items)")
    elif isinstance(items, list):
        for i, item in enumerate(items):
            _check_item(item, ("input", i))
    elif not isinstance(items, str):
        raise invalid_request("'input' must be a string or an array of input items")
    for name in ("instructions", "previous_response_id", "prompt_cache_key", "user", "safety_identifier"):
        if body.get(name) is not None and not isinstance(body[name], str):
            raise invalid_request(f"'{name}' must be a string")
    if body.get("tools") is not None:
        check_tools(body["tools"])
    if body.get("tool_choice") is not None:
        _check_tool_choice(body["tool_choice"])
    max_tokens = body.get("max_output_tokens")
    if max_tokens is not None and (not is_int(max_tokens) or max_tokens < 1):
        raise invalid_request("'max_output_tokens' must be a positive integer")
    _check_range(body, "temperature", 0, 2)
    _check_range(body, "top_p", 0, 1)
    if body.get("text") is not None:
        _check_text(body["text"])
    if body.get("reasoning") is not None:
        _check_reasoning(body["reasoning"])
    for name in ("stream", "store", "parallel_tool_calls", "background"):
        if body.get(name) is not None and not isinstance(body[name], bool):
            raise invalid_request(f"'{name}' must be a boolean")
    metadata = body.get("metadata")
    if metadata is not None and (not isinstance(metadata, dict)
                                 or not all(isinstance(v, str) for v in metadata.values())):
        raise invalid_request("'metadata' must be an object of string values")
    include = body.get("include")
    if include is not None and (not isinstance(include, list) or not all(isinstance(i, str) for i in include)):
        raise invalid_request("'include' must be an array of strings")
    return model, bool(body.get("stream"))
