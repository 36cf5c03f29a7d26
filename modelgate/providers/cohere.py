"""Cohere v2 Chat API wire adapter (POST {base}/v2/chat, Bearer key).

The default base is https://api.cohere.com; models are listed with
GET {base}/v1/models?endpoint=chat (the v2 API has no listing of its own).

Mapping notes (also in docs/providers.md):
- `tool_plan` (the text a model writes before calling tools) and `thinking`
  content are reasoning: both become IR thinking; replayed thinking goes back
  as the assistant's `tool_plan` when that turn calls tools, else is dropped.
- tool_choice: Cohere knows only REQUIRED and NONE; `auto` is the default,
  a named tool is REQUIRED with only that tool offered.
- Usage is taken from `billed_units` (what Cohere charges), falling back to
  `tokens` when billed units are absent.
- citations, documents and safety_mode are not mapped.
"""

from __future__ import annotations

from typing import Any, Mapping

import orjson

from modelgate.errors import ErrorType, UpstreamError
from modelgate.protocols import sse
from modelgate.protocols.ir import (
    ChatRequest,
    ChatResponse,
    ImagePart,
    StopReason,
    StreamEnd,
    StreamError,
    StreamEvent,
    StreamStart,
    TextDelta,
    TextPart,
    ThinkingDelta,
    ThinkingPart,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    ToolResult,
    Usage,
    token_count,
)
from modelgate.providers.base import Endpoint, UpstreamRequest, classify_by_status
from modelgate.providers.openai_chat import function_tools

DEFAULT_BASE_URL = "https://api.cohere.com"

_FINISH: dict[str, StopReason] = {
    "COMPLETE": "stop",
    "STOP_SEQUENCE": "stop_sequence",
    "MAX_TOKENS": "length",
    "TOOL_CALL": "tool_calls",
    "ERROR": "error",
    "TIMEOUT": "error",
}


def _content(parts: list[Any]) -> str | list[dict[str, Any]]:
    if all(isinstance(p, TextPart) for p in parts):
        return "".join(p.text for p in parts)
    out: list[dict[str, Any]] = []
    for p in parts:
        if isinstance(p, TextPart):
            out.append({"type": "text", "text": p.text})
        elif isinstance(p, ImagePart):
            out.append({"type": "image_url", "image_url": {"url": p.as_url()}})
    return out


def build_messages(req: ChatRequest) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": s} for s in req.system]
    for msg in req.messages:
        if msg.role == "user":
            out.append({"role": "user", "content": _content(msg.parts)})
        elif msg.role == "assistant":
            entry: dict[str, Any] = {"role": "assistant"}
            text = "".join(p.text for p in msg.parts if isinstance(p, TextPart))
            calls = [p for p in msg.parts if isinstance(p, ToolCall)]
            if calls:
                entry["tool_calls"] = [
                    {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments or "{}"}}
                    for c in calls
                ]
                plan = "".join(p.text for p in msg.parts if isinstance(p, ThinkingPart))
                if plan:
                    entry["tool_plan"] = plan
            if text or not calls:
                entry["content"] = text
            out.append(entry)
        else:
            for part in msg.parts:
                if isinstance(part, ToolResult):
                    text = "".join(p.text for p in part.content if isinstance(p, TextPart))
                    out.append({"role": "tool", "tool_call_id": part.tool_call_id,
                                "content": f"Error: {text}" if part.is_error else text})
                elif isinstance(part, (TextPart, ImagePart)):
                    out.append({"role": "user", "content": _content([part])})
    return out


def build_body(req: ChatRequest, upstream_model: str) -> dict[str, Any]:
    body: dict[str, Any] = {"model": upstream_model, "messages": build_messages(req), "stream": req.stream}
    for key, value in (
        ("max_tokens", req.max_tokens),
        ("temperature", req.temperature),
        ("p", req.top_p),
        ("k", req.top_k),
        ("seed", req.seed),
        ("frequency_penalty", req.frequency_penalty),
        ("presence_penalty", req.presence_penalty),
    ):
        if value is not None:
            body[key] = value
    if req.stop:
        body["stop_sequences"] = req.stop
    fmt = req.response_format or {}
    if fmt.get("type") == "json_object":
        body["response_format"] = {"type": "json_object"}
    elif fmt.get("type") == "json_schema":
        schema = (fmt.get("json_schema") or {}).get("schema")
        body["response_format"] = {"type": "json_object", **({"json_schema": schema} if schema else {})}
    tools = req.tools
    choice = req.tool_choice
    if choice and choice.mode == "tool":
        tools = [t for t in tools if t.name == choice.name]
    if tools:
        body["tools"] = function_tools(tools)
        if choice and choice.mode in ("required", "tool"):
            body["tool_choice"] = "REQUIRED"
        elif choice and choice.mode == "none":
            body["tool_choice"] = "NONE"
    return body


def _usage(usage: Mapping[str, Any] | None) -> Usage:
    usage = usage or {}
    counts = usage.get("billed_units") or usage.get("tokens") or {}
    return Usage(input_tokens=token_count(counts.get("input_tokens")),
                 output_tokens=token_count(counts.get("output_tokens")))


def classify_cohere(status: int, message: str, headers: Mapping[str, str]) -> UpstreamError:
    lowered = message.lower()
    if status == 404 and "model" in lowered:
        return UpstreamError(ErrorType.MODEL_NOT_FOUND, message, status)
    if status == 498:  # Cohere's "invalid token"
        return UpstreamError(ErrorType.AUTHENTICATION_ERROR, message, status)
    if status == 429 and ("/ month" in lowered or "per month" in lowered):
        # Trial keys have a monthly call cap: waiting minutes will not help.
        return UpstreamError(ErrorType.QUOTA_EXCEEDED, message, status)
    if status == 400 and "model" in lowered and "not found" in lowered:
        return UpstreamError(ErrorType.MODEL_NOT_FOUND, message, status)
    return classify_by_status(status, message, headers)


def _message(body: bytes) -> str:
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body.decode("utf-8", "replace")[:500]
    if isinstance(data, dict) and isinstance(data.get("message"), str):
        return data["message"]
    return body.decode("utf-8", "replace")[:500]


class CohereAdapter:
    wire = "cohere"
    answer_fields: tuple[str, ...] = ("message",)

    def _base(self, endpoint: Endpoint) -> str:
        return (endpoint.base_url or DEFAULT_BASE_URL).rstrip("/")

    def _headers(self, endpoint: Endpoint) -> dict[str, str]:
        return {"content-type": "application/json", "accept": "application/json",
                "authorization": f"Bearer {endpoint.api_key}"}

    def build_request(self, req: ChatRequest, upstream_model: str, endpoint: Endpoint) -> UpstreamRequest:
        headers = self._headers(endpoint)
        if req.stream:
            headers["accept"] = "text/event-stream"
        return UpstreamRequest("POST", self._base(endpoint) + "/v2/chat", headers,
                               orjson.dumps(build_body(req, upstream_model)))

    def parse_response(self, body: bytes) -> ChatResponse:
        data = orjson.loads(body)
        message = data.get("message") or {}
        parts: list[TextPart | ThinkingPart | ToolCall] = []
        if message.get("tool_plan"):
            parts.append(ThinkingPart(message["tool_plan"]))
        for block in message.get("content") or []:
            if block.get("type") == "thinking" and block.get("thinking"):
                parts.append(ThinkingPart(block["thinking"]))
            elif block.get("type") == "text":
                parts.append(TextPart(block.get("text", "")))
        for call in message.get("tool_calls") or []:
            fn = call.get("function") or {}
            parts.append(ToolCall(call.get("id", ""), fn.get("name", ""), fn.get("arguments") or "{}"))
        return ChatResponse(
            id=data.get("id", ""),
            model="",
            parts=parts,
            stop_reason=_FINISH.get(data.get("finish_reason", ""), "stop"),
            usage=_usage(data.get("usage")),
        )

    def stream_decoder(self) -> "CohereStreamDecoder":
        return CohereStreamDecoder()

    def classify_error(self, status: int, body: bytes, headers: Mapping[str, str]) -> UpstreamError:
        return classify_cohere(status, _message(body) or f"HTTP {status}", headers)

    def models_request(self, endpoint: Endpoint) -> UpstreamRequest:
        return UpstreamRequest("GET", self._base(endpoint) + "/v1/models?endpoint=chat&page_size=1000",
                               self._headers(endpoint))

    def parse_models(self, body: bytes) -> list[str]:
        return [m["name"] for m in orjson.loads(body).get("models") or [] if "name" in m]


class CohereStreamDecoder:
    """v2 chat SSE → IR events; `message-end` carries the finish reason and usage."""

    def __init__(self) -> None:
        self._parser = sse.SSEParser()
        self._started = False
        self._ended = False
        self._tool_index: dict[int, int] = {}  # Cohere's event index → our tool call index

    def feed(self, chunk: bytes) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        for event in self._parser.feed(chunk):
            if self._ended:
                break
            self._on(event.data, out)
        return out

    def close(self) -> list[StreamEvent]:
        if self._ended:
            return []
        self._ended = True
        return [StreamError(ErrorType.NETWORK_ERROR.value, "Cohere stream ended before message-end")]

    def _start(self, message_id: str, out: list[StreamEvent]) -> None:
        if not self._started:
            self._started = True
            out.append(StreamStart(message_id, ""))

    def _on(self, data: str, out: list[StreamEvent]) -> None:
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            self._ended = True
            out.append(StreamError(ErrorType.UPSTREAM_ERROR.value, "Cohere sent an unreadable stream event"))
            return
        kind = obj.get("type")
        delta = (obj.get("delta") or {}).get("message") or {}
        if kind == "message-start":
            self._start(obj.get("id", ""), out)
            return
        if kind is None and "message" in obj:  # an error body in place of an event
            self._ended = True
            err = classify_cohere(500, str(obj["message"]), {})
            out.append(StreamError(err.error_type.value, err.message))
            return
        self._start("", out)
        if kind == "content-delta":
            content = delta.get("content") or {}
            if content.get("thinking"):
                out.append(ThinkingDelta(content["thinking"]))
            if content.get("text"):
                out.append(TextDelta(content["text"]))
        elif kind == "tool-plan-delta" and delta.get("tool_plan"):
            out.append(ThinkingDelta(delta["tool_plan"]))
        elif kind == "tool-call-start":
            call = delta.get("tool_calls") or {}
            fn = call.get("function") or {}
            index = self._tool_index[obj.get("index", len(self._tool_index))] = len(self._tool_index)
            out.append(ToolCallStart(index, call.get("id", f"call_{index}"), fn.get("name", "")))
            if fn.get("arguments"):
                out.append(ToolCallDelta(index, fn["arguments"]))
        elif kind == "tool-call-delta":
            args = ((delta.get("tool_calls") or {}).get("function") or {}).get("arguments")
            call_index = self._tool_index.get(obj.get("index", -1))
            if args and call_index is not None:
                out.append(ToolCallDelta(call_index, args))
        elif kind == "message-end":
            end = obj.get("delta") or {}
            self._ended = True
            finish = end.get("finish_reason", "COMPLETE")
            if finish in ("ERROR", "TIMEOUT"):
                out.append(StreamError(ErrorType.UPSTREAM_ERROR.value, end.get("error") or f"Cohere finished with {finish}"))
            else:
                out.append(StreamEnd(_FINISH.get(finish, "stop"), usage=_usage(end.get("usage"))))
