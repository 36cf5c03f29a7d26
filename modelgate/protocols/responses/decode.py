"""Responses API requests: validation (7.2, chat shape) and decoding into the IR.

The gateway is stateless on conversion: it keeps no responses, so anything that refers to
stored state (`previous_response_id`, `conversation`, stored prompts, `item_reference`
items, uploaded files) can only be served by an upstream that speaks the Responses API
itself (pass-through). On conversion those are a clear 400. See docs/conversion.md.
"""

from __future__ import annotations

from typing import Any, cast

from modelgate.errors import GatewayError, invalid_request
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
    ToolChoiceMode,
    ToolResult,
)
from modelgate.protocols.responses.encode import FOREIGN_ENCRYPTED_CONTENT, GATEWAY_SIGNATURE

MESSAGE_ROLES = ("user", "assistant", "system", "developer")
_TEXT_PARTS = ("input_text", "output_text")
_PART_TYPES = (*_TEXT_PARTS, "input_image", "input_file", "refusal")
_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
_SUMMARIES = ("auto", "concise", "detailed")
# Request fields that point at state kept by the vendor: only a Responses upstream can serve them.
STATEFUL_FIELDS = ("previous_response_id", "conversation", "prompt")


def _bad(message: str) -> GatewayError:
    return invalid_request(message)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_range(body: dict[str, Any], name: str, low: float, high: float) -> None:
    value = body.get(name)
    if value is not None and (not _is_number(value) or not low <= value <= high):
        raise _bad(f"'{name}' must be a number between {low:g} and {high:g}")


def _check_part(part: Any, where: str) -> None:
    if not isinstance(part, dict) or part.get("type") not in _PART_TYPES:
        raise _bad(f"'{where}.type' must be one of {', '.join(_PART_TYPES)}")
    kind = part["type"]
    if kind in _TEXT_PARTS and not isinstance(part.get("text"), str):
        raise _bad(f"'{where}.text' must be a string")
    if kind == "refusal" and not isinstance(part.get("refusal"), str):
        raise _bad(f"'{where}.refusal' must be a string")
    if kind == "input_image" and not (isinstance(part.get("image_url"), str) or isinstance(part.get("file_id"), str)):
        raise _bad(f"'{where}' needs 'image_url' (a URL or a data: URL) or 'file_id'")


def _check_content(content: Any, where: str) -> None:
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        raise _bad(f"'{where}' must be a string or an array of content parts")
    for i, part in enumerate(content):
        _check_part(part, f"{where}[{i}]")


def _check_item(item: Any, where: str) -> None:
    if not isinstance(item, dict):
        raise _bad(f"'{where}' must be an object")
    kind = item.get("type", "message")
    if not isinstance(kind, str):
        raise _bad(f"'{where}.type' must be a string")
    if kind == "message":
        if item.get("role") not in MESSAGE_ROLES:
            raise _bad(f"'{where}.role' must be one of {', '.join(MESSAGE_ROLES)}")
        _check_content(item.get("content"), f"{where}.content")
    elif kind == "function_call":
        for name in ("call_id", "name", "arguments"):
            if not isinstance(item.get(name), str):
                raise _bad(f"'{where}.{name}' must be a string")
    elif kind == "function_call_output":
        if not isinstance(item.get("call_id"), str):
            raise _bad(f"'{where}.call_id' must be a string")
        _check_content(item.get("output"), f"{where}.output")
    elif kind == "reasoning":
        for name in ("summary", "content"):
            entries = item.get(name)
            if entries is None and name == "content":
                continue
            if not isinstance(entries, list) or not all(
                    isinstance(e, dict) and isinstance(e.get("text"), str) for e in entries):
                raise _bad(f"'{where}.{name}' must be an array of {{type, text}} parts")
        if item.get("encrypted_content") is not None and not isinstance(item["encrypted_content"], str):
            raise _bad(f"'{where}.encrypted_content' must be a string")
    # Other item types (hosted tool calls, item_reference, ...) are the vendor's to check:
    # they pass through to a Responses upstream and are dealt with in to_ir otherwise.


def check_tools(tools: Any) -> None:
    if not isinstance(tools, list):
        raise _bad("'tools' must be an array")
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict) or not isinstance(tool.get("type"), str):
            raise _bad(f"'tools[{i}]' must be an object with a string 'type'")
        if tool["type"] != "function":
            continue
        if not isinstance(tool.get("name"), str) or not tool["name"]:
            raise _bad(f"'tools[{i}].name' must be a non-empty string")
        if tool.get("parameters") is not None and not isinstance(tool["parameters"], dict):
            raise _bad(f"'tools[{i}].parameters' must be a JSON-schema object")
        if tool.get("description") is not None and not isinstance(tool["description"], str):
            raise _bad(f"'tools[{i}].description' must be a string")
        if tool.get("strict") is not None and not isinstance(tool["strict"], bool):
            raise _bad(f"'tools[{i}].strict' must be a boolean")


def _check_tool_choice(choice: Any) -> None:
    if isinstance(choice, str):
        if choice not in ("auto", "none", "required"):
            raise _bad("'tool_choice' must be 'auto', 'none', 'required' or an object")
        return
    if not isinstance(choice, dict) or not isinstance(choice.get("type"), str):
        raise _bad("'tool_choice' must be 'auto', 'none', 'required' or an object with a 'type'")
    if choice["type"] == "function" and not isinstance(choice.get("name"), str):
        raise _bad("'tool_choice.name' must be a string for type 'function'")
    if choice["type"] == "allowed_tools":
        if choice.get("mode") not in ("auto", "required") or not isinstance(choice.get("tools"), list):
            raise _bad("'tool_choice' of type 'allowed_tools' needs 'mode' (auto, required) and 'tools'")


def _check_text(text: Any) -> None:
    if not isinstance(text, dict):
        raise _bad("'text' must be an object")
    fmt = text.get("format")
    if fmt is None:
        return
    if not isinstance(fmt, dict) or fmt.get("type") not in ("text", "json_object", "json_schema"):
        raise _bad("'text.format.type' must be 'text', 'json_object' or 'json_schema'")
    if fmt["type"] == "json_schema" and (not isinstance(fmt.get("name"), str) or not isinstance(fmt.get("schema"), dict)):
        raise _bad("'text.format' of type 'json_schema' needs 'name' (a string) and 'schema' (an object)")


def _check_reasoning(reasoning: Any) -> None:
    if not isinstance(reasoning, dict):
        raise _bad("'reasoning' must be an object")
    if reasoning.get("effort") is not None and reasoning["effort"] not in _EFFORTS:
        raise _bad(f"'reasoning.effort' must be one of {', '.join(_EFFORTS)}")
    if reasoning.get("summary") is not None and reasoning["summary"] not in _SUMMARIES:
        raise _bad(f"'reasoning.summary' must be one of {', '.join(_SUMMARIES)}")


def validate(body: Any) -> tuple[str, bool]:
    if not isinstance(body, dict):
        raise _bad("The request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _bad("'model' is required and must be a non-empty string")
    items = body.get("input")
    if items is None:
        if not any(body.get(name) for name in STATEFUL_FIELDS):
            raise _bad("'input' is required (a string or an array of input items)")
    elif isinstance(items, list):
        for i, item in enumerate(items):
            _check_item(item, f"input[{i}]")
    elif not isinstance(items, str):
        raise _bad("'input' must be a string or an array of input items")
    for name in ("instructions", "previous_response_id", "prompt_cache_key", "user", "safety_identifier"):
        if body.get(name) is not None and not isinstance(body[name], str):
            raise _bad(f"'{name}' must be a string")
    if body.get("tools") is not None:
        check_tools(body["tools"])
    if body.get("tool_choice") is not None:
        _check_tool_choice(body["tool_choice"])
    max_tokens = body.get("max_output_tokens")
    if max_tokens is not None and (not _is_int(max_tokens) or max_tokens < 1):
        raise _bad("'max_output_tokens' must be a positive integer")
    _check_range(body, "temperature", 0, 2)
    _check_range(body, "top_p", 0, 1)
    if body.get("text") is not None:
        _check_text(body["text"])
    if body.get("reasoning") is not None:
        _check_reasoning(body["reasoning"])
    for name in ("stream", "store", "parallel_tool_calls", "background"):
        if body.get(name) is not None and not isinstance(body[name], bool):
            raise _bad(f"'{name}' must be a boolean")
    metadata = body.get("metadata")
    if metadata is not None and (not isinstance(metadata, dict)
                                 or not all(isinstance(v, str) for v in metadata.values())):
        raise _bad("'metadata' must be an object of string values")
    include = body.get("include")
    if include is not None and (not isinstance(include, list) or not all(isinstance(i, str) for i in include)):
        raise _bad("'include' must be an array of strings")
    return model, bool(body.get("stream"))


# --- decoding into the IR -------------------------------------------------------


def _stateless(message: str) -> GatewayError:
    return _bad(f"{message}: this gateway keeps no responses when it converts to another provider's "
                "format. Send the whole conversation in 'input' (with store: false, as Codex does).")


def _parts(content: str | list[dict[str, Any]], where: str) -> list[TextPart | ImagePart]:
    if isinstance(content, str):
        return [TextPart(content)]
    parts: list[TextPart | ImagePart] = []
    for i, part in enumerate(content):
        kind = part["type"]
        if kind in _TEXT_PARTS:
            parts.append(TextPart(part["text"]))
        elif kind == "refusal":
            parts.append(TextPart(part["refusal"]))
        elif kind == "input_image":
            if not isinstance(part.get("image_url"), str):
                raise _stateless(f"'{where}[{i}]' refers to an uploaded file ('file_id')")
            parts.append(ImagePart(url=part["image_url"]))
        else:  # input_file
            raise _bad(f"'{where}[{i}]': file inputs need a model served over the Responses API "
                       "(an openai or azure-openai channel)")
    return parts


def _tool_choice(body: dict[str, Any]) -> tuple[ToolChoice | None, set[str] | None]:
    """The IR tool choice, and the tool names `allowed_tools` narrows the request to."""
    choice = body.get("tool_choice")
    parallel = body.get("parallel_tool_calls")
    parallel = parallel if isinstance(parallel, bool) else None
    if choice is None:
        return (ToolChoice("auto", parallel=parallel) if parallel is not None else None), None
    if isinstance(choice, str):
        return ToolChoice(cast(ToolChoiceMode, choice), parallel=parallel), None  # validate let only modes through
    kind = choice["type"]
    if kind == "function":
        return ToolChoice("tool", choice["name"], parallel), None
    if kind == "allowed_tools":
        names = {t.get("name") for t in choice["tools"] if isinstance(t, dict) and t.get("type") == "function"}
        return ToolChoice(choice["mode"], parallel=parallel), {n for n in names if isinstance(n, str)}
    raise _bad(f"'tool_choice' of type '{kind}' names a tool only the vendor can run; "
               "this model is served by another provider")


def _response_format(body: dict[str, Any]) -> dict[str, Any] | None:
    fmt = (body.get("text") or {}).get("format")
    if not fmt or fmt["type"] == "text":
        return None
    if fmt["type"] == "json_object":
        return {"type": "json_object"}
    schema = {key: fmt[key] for key in ("name", "schema", "description", "strict") if fmt.get(key) is not None}
    return {"type": "json_schema", "json_schema": schema}


def to_ir(body: dict[str, Any]) -> ChatRequest:
    for name in STATEFUL_FIELDS:
        if body.get(name):
            raise _stateless(f"'{name}' refers to state kept by the vendor")
    if body.get("background"):
        raise _stateless("'background: true' needs a stored response to poll")
    system: list[str] = [body["instructions"]] if body.get("instructions") else []
    messages: list[Message] = []

    def assistant_part(part: Part) -> None:
        # Reasoning, text and function calls of one model turn arrive as separate items.
        if messages and messages[-1].role == "assistant":
            messages[-1].parts.append(part)
        else:
            messages.append(Message("assistant", [part]))

    items = body["input"]
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    for i, item in enumerate(items):
        kind = item.get("type", "message")
        where = f"input[{i}]"
        if kind == "message":
            role = item["role"]
            parts = _parts(item["content"], f"{where}.content")
            if role in ("system", "developer"):
                system.extend(p.text for p in parts if isinstance(p, TextPart))
            elif role == "user":
                messages.append(Message("user", list(parts)))
            else:
                for part in parts:
                    assistant_part(part)
        elif kind == "function_call":
            assistant_part(ToolCall(item["call_id"], item["name"], item["arguments"] or "{}"))
        elif kind == "function_call_output":
            result = ToolResult(item["call_id"], _parts(item["output"], f"{where}.output"))
            if messages and messages[-1].role == "tool":
                messages[-1].parts.append(result)
            else:
                messages.append(Message("tool", [result]))
        elif kind == "reasoning":
            texts = [c["text"] for c in item.get("content") or ()] or [s["text"] for s in item["summary"]]
            signature = item.get("encrypted_content")
            if signature:
                signature = (signature.removeprefix(GATEWAY_SIGNATURE) if signature.startswith(GATEWAY_SIGNATURE)
                             else FOREIGN_ENCRYPTED_CONTENT + signature)
            if texts or signature:
                assistant_part(ThinkingPart("\n\n".join(texts), signature))
        elif kind == "item_reference":
            raise _stateless(f"'{where}' is a reference to a stored item")
        elif kind == "compaction_trigger":
            # Codex's request for the vendor's compaction: dropped, the answer would lack the compaction
            # item the client waits for.
            raise _bad(f"'{where}' asks for the vendor's compaction of the conversation, which only a Responses "
                       "upstream (openai, azure-openai) makes: on this model, compact on the client")
        # Items of hosted tools (web search, code interpreter, ...) are results only the vendor
        # produces; they have no IR form and are dropped. So is a `compaction` item, the vendor's
        # encrypted state: the user messages a compaction keeps beside it still reach the model.
    choice, allowed = _tool_choice(body)
    tools = [
        Tool(t["name"], t.get("description"), t.get("parameters") or {})
        for t in body.get("tools") or ()
        if t["type"] == "function" and (allowed is None or t["name"] in allowed)
    ]
    reasoning = body.get("reasoning") or {}
    return ChatRequest(
        model=body["model"],
        messages=messages,
        system=system,
        max_tokens=body.get("max_output_tokens"),
        temperature=body.get("temperature"),
        top_p=body.get("top_p"),
        tools=tools,
        tool_choice=choice,
        response_format=_response_format(body),
        reasoning_effort=reasoning.get("effort"),
        user=body.get("user") or body.get("safety_identifier"),
        stream=bool(body.get("stream")),
    )
