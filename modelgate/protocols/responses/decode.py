"""Responses API requests decoded into the IR.

The gateway is stateless on conversion: it keeps no responses, so anything that refers to
stored state (`previous_response_id`, `conversation`, stored prompts, `item_reference`
items, uploaded files) can only be served by an upstream that speaks the Responses API
itself (pass-through). On conversion those are a clear 400, but for references to the items
of the gateway's own converted answers, which it keeps a while (items.py). See
docs/conversion.md.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, cast

import orjson

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
from modelgate.protocols.paths import Path, indexed
from modelgate.protocols.responses.encode import FOREIGN_ENCRYPTED_CONTENT, GATEWAY_SIGNATURE
from modelgate.protocols.responses.validate import STATEFUL_FIELDS, TEXT_PARTS


def _stateless(message: str) -> GatewayError:
    return invalid_request(f"{message}: this gateway keeps no responses when it converts to another provider's "
                           "format. Send the whole conversation in 'input' (with store: false, as Codex does).")


def _parts(content: str | list[dict[str, Any]], where: Path) -> list[TextPart | ImagePart]:
    if isinstance(content, str):
        return [TextPart(content)]
    parts: list[TextPart | ImagePart] = []
    for i, part in enumerate(content):
        kind = part["type"]
        if kind in TEXT_PARTS:
            parts.append(TextPart(part["text"]))
        elif kind == "refusal":
            parts.append(TextPart(part["refusal"]))
        elif kind == "input_image":
            if not isinstance(part.get("image_url"), str):
                raise _stateless(f"'{indexed((where, i))}' refers to an uploaded file ('file_id')")
            parts.append(ImagePart(url=part["image_url"]))
        else:  # input_file
            raise invalid_request(f"'{indexed((where, i))}': file inputs need a model served over the Responses API "
                                  "(an openai or azure-openai channel)")
    return parts


# Codex's namespace for functions given without one; it dispatches a call without a namespace there.
DEFAULT_NAMESPACE = "functions"


def flat_name(namespace: str | None, name: str) -> str:
    """The one name a function of a namespace tool goes by on conversion (other vendors have no
    namespaces): `mcp__github__` and `create_issue` -> `mcp__github__create_issue`, as Codex named its
    MCP tools before namespaces; a function of the default namespace keeps its name."""
    if not namespace or namespace == DEFAULT_NAMESPACE:
        return name
    return f"{namespace.rstrip('_')}__{name.lstrip('_')}"


_CALLABLE = ("function", "custom")


def _callable(tools: Iterable[dict[str, Any]]) -> list[tuple[str, str | None, dict[str, Any]]]:
    """The function and custom tools of a request, a namespace's included: (the flat name each goes by,
    its namespace, the tool)."""
    found: list[tuple[str, str | None, dict[str, Any]]] = []
    for tool in tools:
        kind = tool["type"]
        if kind == "function" or kind == "custom":
            found.append((tool["name"], None, tool))
        elif kind == "namespace":
            for inner in tool["tools"]:
                if inner["type"] in _CALLABLE and isinstance(inner.get("name"), str):
                    found.append((flat_name(tool["name"], inner["name"]), tool["name"], inner))
    return found


def call_forms(tools: Any) -> dict[str, tuple[str | None, str, bool]]:
    """The flat names of the request's tools whose calls the client reads in another form than a plain
    function call -> (namespace, own name, custom): Codex dispatches by name and namespace, and runs a
    custom tool (its freeform `apply_patch`) from a `custom_tool_call` item's raw `input`."""
    return {flat: (namespace if flat != tool["name"] else None, tool["name"], tool["type"] == "custom")
            for flat, namespace, tool in _callable(tools or ())
            if flat != tool["name"] or tool["type"] == "custom"}


# A custom tool takes raw text; other vendors take a function, whose one argument carries it.
CUSTOM_INPUT_SCHEMA = {"type": "object", "properties": {"input": {"type": "string"}}, "required": ["input"]}


def _custom_tool(name: str, tool: dict[str, Any]) -> Tool:
    fmt: dict[str, Any] = tool["format"] if isinstance(tool.get("format"), dict) else {}
    note = "Give the tool's whole input, as plain text, in the string argument `input`."
    if fmt.get("type") == "grammar" and isinstance(fmt.get("definition"), str):
        note += f" The input follows this {fmt.get('syntax') or ''} grammar:\n{fmt['definition']}"
    description = tool.get("description")
    return Tool(name, f"{description}\n\n{note}" if isinstance(description, str) else note, CUSTOM_INPUT_SCHEMA)


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
    if kind in ("function", "custom"):  # a custom tool goes as a function of the same name
        return ToolChoice("tool", choice["name"], parallel), None
    if kind == "allowed_tools":
        names = {t.get("name") for t in choice["tools"] if isinstance(t, dict) and t.get("type") == "function"}
        return ToolChoice(choice["mode"], parallel=parallel), {n for n in names if isinstance(n, str)}
    raise invalid_request(f"'tool_choice' of type '{kind}' names a tool only the vendor can run; "
                          "this model is served by another provider")


def _response_format(body: dict[str, Any]) -> dict[str, Any] | None:
    fmt = (body.get("text") or {}).get("format")
    if not fmt or fmt["type"] == "text":
        return None
    if fmt["type"] == "json_object":
        return {"type": "json_object"}
    schema = {key: fmt[key] for key in ("name", "schema", "description", "strict") if fmt.get(key) is not None}
    return {"type": "json_schema", "json_schema": schema}


def references(body: Mapping[str, Any]) -> list[str]:
    """The ids of a validated body's `item_reference`s (none in a typed view's partial body: it takes no
    such item)."""
    items = body.get("input")
    if not isinstance(items, list):
        return []
    return [item["id"] for item in items
            if item.get("type") == "item_reference" and isinstance(item.get("id"), str)]


def output_limit(body: Mapping[str, Any]) -> int | None:
    """The output tokens a request asks for at most."""
    return body.get("max_output_tokens")


def to_ir(body: dict[str, Any], recall: Callable[[str], dict[str, Any] | None] | None = None) -> ChatRequest:
    """`recall`: an item this gateway produced earlier, by id (items.ItemMemory), for `item_reference`s."""
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
        where = ("input", i)
        if kind == "item_reference":
            kept = recall(item["id"]) if recall is not None and isinstance(item.get("id"), str) else None
            if kept is None:
                raise _stateless(f"'{indexed(where)}' is a reference to a stored item this gateway does not hold (it keeps "
                                 "the items of its own converted answers for an hour; shared through Redis when one is configured)")
            item, kind = kept, kept["type"]
        if kind == "message":
            role = item["role"]
            parts = _parts(item["content"], (where, "content"))
            if role in ("system", "developer"):
                system.extend(p.text for p in parts if isinstance(p, TextPart))
            elif role == "user":
                messages.append(Message("user", list(parts)))
            else:
                for part in parts:
                    assistant_part(part)
        elif kind == "function_call":
            name = flat_name(item["namespace"], item["name"]) if item.get("namespace") else item["name"]
            assistant_part(ToolCall(item["call_id"], name, item["arguments"] or "{}"))
        elif kind == "custom_tool_call":
            name = flat_name(item.get("namespace"), item["name"])
            assistant_part(ToolCall(item["call_id"], name, orjson.dumps({"input": item["input"]}).decode()))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            result = ToolResult(item["call_id"], _parts(item["output"], (where, "output")))
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
        elif kind == "compaction_trigger":
            # Codex's request for the vendor's compaction: dropped, the answer would lack the compaction
            # item the client waits for.
            raise invalid_request(f"'{indexed(where)}' asks for the vendor's compaction of the conversation, which only a "
                                  "Responses upstream (openai, azure-openai) makes: on this model, compact on the client")
        # Items of hosted tools (web search, code interpreter, ...) are results only the vendor
        # produces; they have no IR form and are dropped. So is a `compaction` item, the vendor's
        # encrypted state: the user messages a compaction keeps beside it still reach the model.
    choice, allowed = _tool_choice(body)
    tools = [
        Tool(name, t.get("description"), t.get("parameters") or {}) if t["type"] == "function" else _custom_tool(name, t)
        for name, _, t in _callable(body.get("tools") or ())
        if allowed is None or name in allowed or t["name"] in allowed
    ]
    reasoning = body.get("reasoning") or {}
    return ChatRequest(
        model=body["model"],
        messages=messages,
        system=system,
        max_tokens=output_limit(body),
        temperature=body.get("temperature"),
        top_p=body.get("top_p"),
        tools=tools,
        tool_choice=choice,
        response_format=_response_format(body),
        reasoning_effort=reasoning.get("effort"),
        user=body.get("user") or body.get("safety_identifier"),
        stream=bool(body.get("stream")),
    )
