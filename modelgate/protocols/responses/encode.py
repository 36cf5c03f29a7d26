"""Responses API bodies out of the IR: the response object, its output items and usage.

The streamed encoder (stream.py) builds the same objects, so a streamed and a
non-streamed call answer with the same `response` in `response.completed`.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Mapping, Optional

import orjson

from modelgate.errors import ErrorType
from modelgate.protocols.ir import ChatResponse, StopReason, TextPart, ThinkingPart, ToolCall, Usage, token_count

# IR stop reasons that end a response early: `status: incomplete` with this reason.
INCOMPLETE_REASON: dict[str | None, str] = {"length": "max_output_tokens", "content_filter": "content_filter"}


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def usage_to_vendor(usage: Usage) -> dict[str, Any]:
    # IR input counts every prompt token, cached ones included, as the vendor's input_tokens does.
    return {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {"cached_tokens": usage.cache_read_tokens,
                                 "cache_write_tokens": usage.cache_write_tokens},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.total_tokens,
    }


def usage_from_vendor(usage: Any) -> Usage:
    if not isinstance(usage, dict):
        return Usage()
    details = usage.get("input_tokens_details")
    details = details if isinstance(details, dict) else {}
    return Usage(input_tokens=token_count(usage.get("input_tokens")), output_tokens=token_count(usage.get("output_tokens")),
                 cache_read_tokens=token_count(details.get("cached_tokens")),
                 cache_write_tokens=token_count(details.get("cache_write_tokens")))


def text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def message_item(item_id: str, text: str | None, status: str = "completed") -> dict[str, Any]:
    content = [text_part(text)] if text is not None else []
    return {"id": item_id, "type": "message", "status": status, "role": "assistant", "content": content}


# `encrypted_content` the gateway wrote carries this tag; an untagged one is the Responses vendor's own
# (a client replaying a pass-through answer), which no other upstream can read.
GATEWAY_SIGNATURE = "mg:"
FOREIGN_ENCRYPTED_CONTENT = "openai:"


def reasoning_item(item_id: str, text: str | None, signature: str | None = None) -> dict[str, Any]:
    # The IR's reasoning is the model's own text (chat `reasoning_content`, messages `thinking`): the
    # vendor's `reasoning_text` content. A vendor signature travels as `encrypted_content`, so a
    # client that replays the item (Codex does) gives it back to the upstream that signed it.
    item: dict[str, Any] = {"id": item_id, "type": "reasoning", "summary": [],
                            "content": [{"type": "reasoning_text", "text": text}] if text is not None else []}
    if signature:
        item["encrypted_content"] = GATEWAY_SIGNATURE + signature
    return item


# The answer context's key for the calls the client reads in another form (decode.call_forms).
CALL_FORMS = "call_forms"
# Answer-context key: where the answer's output items go to be read back by reference (items.ItemMemory).
REMEMBER = "remember"
CallForms = Mapping[str, tuple[Optional[str], str, bool]]


def call_item(item_id: str, call_id: str, name: str, arguments: str, status: str = "completed",
              forms: CallForms | None = None) -> dict[str, Any]:
    """A tool call as the client's item: a `function_call`, under its own name and namespace for one of a
    namespace tool's functions, or a `custom_tool_call` with its raw input for a custom tool."""
    form = forms.get(name) if forms else None
    if form is None:
        return {"id": item_id, "type": "function_call", "status": status, "call_id": call_id, "name": name,
                "arguments": arguments}
    namespace, own, custom = form
    item = ({"id": item_id, "type": "custom_tool_call", "status": status, "call_id": call_id, "name": own,
             "input": custom_input(arguments) if status == "completed" else ""} if custom else
            {"id": item_id, "type": "function_call", "status": status, "call_id": call_id, "name": own,
             "arguments": arguments})
    if namespace:
        item["namespace"] = namespace
    return item


def custom_input(arguments: str) -> str:
    """A custom tool's raw input from the arguments of the function it went as (`{"input": ...}`); text
    that is not such an object is the input itself."""
    try:
        parsed = orjson.loads(arguments or "{}")
    except orjson.JSONDecodeError:
        return arguments
    return parsed["input"] if isinstance(parsed, dict) and isinstance(parsed.get("input"), str) else arguments


def output_items(resp: ChatResponse, forms: CallForms | None = None) -> list[dict[str, Any]]:
    """Output items in the order of the IR parts; neighbouring text (or reasoning) parts form one item."""
    items: list[dict[str, Any]] = []
    for part in resp.parts:
        last = items[-1] if items else None
        if isinstance(part, TextPart):
            if not part.text:
                continue
            if last is not None and last["type"] == "message":
                last["content"][0]["text"] += part.text
            else:
                items.append(message_item(new_id("msg"), part.text))
        elif isinstance(part, ThinkingPart):
            if part.redacted is not None:
                continue  # encrypted by the vendor, no text: a reasoning item would carry nothing
            if last is not None and last["type"] == "reasoning" and not last.get("encrypted_content"):
                last["content"][0]["text"] += part.text
                if part.signature:
                    last["encrypted_content"] = GATEWAY_SIGNATURE + part.signature
            else:
                items.append(reasoning_item(new_id("rs"), part.text, part.signature))
        elif isinstance(part, ToolCall):
            items.append(call_item(new_id("fc"), part.id, part.name, part.arguments or "{}", forms=forms))
    return items


_ECHOED = ("instructions", "max_output_tokens", "metadata", "parallel_tool_calls", "prompt_cache_key", "reasoning",
            "temperature", "text", "tool_choice", "tools", "top_p", "user")


def echoed(body: Mapping[str, Any]) -> dict[str, Any]:
    """The request fields a response object echoes (ResponseSkeleton reads no others). The tool
    definitions, often the larger part, are kept serialised: their tree goes with the request's."""
    fields = {name: body[name] for name in _ECHOED if name in body}
    if fields.get("tools"):
        fields["tools"] = orjson.Fragment(orjson.dumps(fields["tools"]))
    return fields


class ResponseSkeleton:
    """The request's settings a response object echoes, as the vendor's objects do."""

    __slots__ = ("id", "created_at", "model", "fields")

    def __init__(self, body: dict[str, Any], model: str) -> None:
        self.id = new_id("resp")
        self.created_at = int(time.time())
        self.model = model
        reasoning = body.get("reasoning") or {}
        self.fields = {
            "instructions": body.get("instructions"),
            "max_output_tokens": body.get("max_output_tokens"),
            "metadata": body.get("metadata") or {},
            "parallel_tool_calls": body.get("parallel_tool_calls", True) is not False,
            "previous_response_id": None,
            "prompt_cache_key": body.get("prompt_cache_key"),
            "reasoning": {"effort": reasoning.get("effort"), "summary": reasoning.get("summary")},
            "store": False,  # nothing is kept on conversion
            "temperature": body.get("temperature"),
            "text": {"format": (body.get("text") or {}).get("format") or {"type": "text"}},
            "tool_choice": body.get("tool_choice") or "auto",
            "tools": body.get("tools") or [],
            "top_p": body.get("top_p"),
            "truncation": "disabled",
            "user": body.get("user"),
        }

    def build(self, status: str, output: list[dict[str, Any]], usage: Usage | None = None,
              stop_reason: StopReason | None = None, error: dict[str, Any] | None = None) -> dict[str, Any]:
        reason = INCOMPLETE_REASON.get(stop_reason) if status == "incomplete" else None
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "error": error,
            "incomplete_details": {"reason": reason} if reason else None,
            "model": self.model,
            "output": output,
            **self.fields,
            "usage": usage_to_vendor(usage) if usage is not None else None,
        }


def final_status(stop_reason: StopReason | None) -> str:
    return "incomplete" if stop_reason in INCOMPLETE_REASON else "completed"


def encode_response(resp: ChatResponse, model: str, body: dict[str, Any]) -> dict[str, Any]:
    skeleton = ResponseSkeleton(body, model)
    output = output_items(resp, body.get(CALL_FORMS))
    if remember := body.get(REMEMBER):
        remember(output)
    return skeleton.build(final_status(resp.stop_reason), output, resp.usage, resp.stop_reason)


def error_object(error_type: str, message: str) -> dict[str, Any]:
    """The `error` of a failed response: the vendor's code for an upstream rate limit, else `server_error`."""
    code = "rate_limit_exceeded" if error_type == ErrorType.RATE_LIMIT_ERROR.value else "server_error"
    return {"code": code, "message": message}
