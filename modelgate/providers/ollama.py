"""Ollama native API wire adapter (POST {base}/api/chat, GET {base}/api/tags).

The default base is http://localhost:11434 (no /api suffix) and no key is
needed. A key, when set, is sent as `Authorization: Bearer` (ollama.com's
hosted API and authenticating reverse proxies use that).

Mapping notes (also in docs/providers.md):
- Streams are NDJSON: one JSON object a line, the last with `done: true`,
  `done_reason` and the token counts (`prompt_eval_count`, `eval_count`).
- Images must be inline: base64 data (or data: URLs) go in `images`; an
  image given only by http(s) URL cannot be sent and fails the request.
- Tool calls carry arguments as an object and usually no id: ids are
  synthesised; tool results go back as role `tool` with `tool_name`.
- Ollama has no tool_choice: `none` sends no tools, `tool` sends only the
  named tool, `required` cannot be enforced and is sent as auto.
"""

from __future__ import annotations

import uuid
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

DEFAULT_BASE_URL = "http://localhost:11434"

_DONE: dict[str, StopReason] = {"stop": "stop", "length": "length"}


def _image_data(img: ImagePart) -> str:
    inline = img.inline()
    if inline is not None:
        return inline[1]
    raise UpstreamError(ErrorType.INVALID_REQUEST, "Ollama accepts only inline (base64) images, not image URLs")


def _args(text: str) -> Any:
    try:
        return orjson.loads(text or "{}")
    except orjson.JSONDecodeError:
        return {}  # Ollama wants an object; unparseable model output cannot be replayed as one


def build_messages(req: ChatRequest) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": s} for s in req.system]
    names: dict[str, str] = {}
    for msg in req.messages:
        if msg.role == "tool":
            for part in msg.parts:
                if isinstance(part, ToolResult):
                    text = "".join(p.text for p in part.content if isinstance(p, TextPart))
                    entry: dict[str, Any] = {"role": "tool", "content": f"Error: {text}" if part.is_error else text}
                    if part.tool_call_id in names:
                        entry["tool_name"] = names[part.tool_call_id]
                    images = [_image_data(p) for p in part.content if isinstance(p, ImagePart)]
                    if images:
                        entry["images"] = images
                    out.append(entry)
                elif isinstance(part, TextPart):
                    out.append({"role": "user", "content": part.text})
            continue
        entry = {"role": msg.role, "content": "".join(p.text for p in msg.parts if isinstance(p, TextPart))}
        images = [_image_data(p) for p in msg.parts if isinstance(p, ImagePart)]
        if images:
            entry["images"] = images
        calls = [p for p in msg.parts if isinstance(p, ToolCall)]
        if calls:
            for call in calls:
                names[call.id] = call.name
            entry["tool_calls"] = [{"function": {"name": c.name, "arguments": _args(c.arguments)}} for c in calls]
        out.append(entry)
    return out


# Provider-record options sent in the request's `options` (num_ctx: Ollama's server default context
# of a few thousand tokens silently truncates long prompts), and those sent at the top level.
MODEL_OPTIONS = ("num_ctx", "num_gpu", "num_thread", "repeat_penalty")
TOP_LEVEL_OPTIONS = ("keep_alive", "think")


def build_body(req: ChatRequest, upstream_model: str, provider_options: Mapping[str, Any] | None = None
               ) -> dict[str, Any]:
    provider_options = provider_options or {}
    body: dict[str, Any] = {"model": upstream_model, "messages": build_messages(req), "stream": req.stream}
    for name in TOP_LEVEL_OPTIONS:
        if name in provider_options:
            body[name] = provider_options[name]
    options: dict[str, Any] = {name: provider_options[name] for name in MODEL_OPTIONS if name in provider_options}
    for key, value in (
        ("temperature", req.temperature),
        ("top_p", req.top_p),
        ("top_k", req.top_k),
        ("num_predict", req.max_tokens),
        ("seed", req.seed),
        ("presence_penalty", req.presence_penalty),
        ("frequency_penalty", req.frequency_penalty),
    ):
        if value is not None:
            options[key] = value
    if req.stop:
        options["stop"] = req.stop
    if options:
        body["options"] = options
    fmt = req.response_format or {}
    if fmt.get("type") == "json_object":
        body["format"] = "json"
    elif fmt.get("type") == "json_schema":
        body["format"] = (fmt.get("json_schema") or {}).get("schema") or "json"
    tools = req.tools
    choice = req.tool_choice
    if choice and choice.mode == "none":
        tools = []
    elif choice and choice.mode == "tool":
        tools = [t for t in tools if t.name == choice.name]
    if tools:
        body["tools"] = function_tools(tools)
    return body


def _usage(data: Mapping[str, Any]) -> Usage:
    return Usage(input_tokens=token_count(data.get("prompt_eval_count")),
                 output_tokens=token_count(data.get("eval_count")))


def _new_id() -> str:
    return "chatcmpl-" + uuid.uuid4().hex[:24]


def _tool_call(call: Mapping[str, Any]) -> ToolCall:
    fn = call.get("function") or {}
    args = fn.get("arguments")
    text = args if isinstance(args, str) else orjson.dumps(args if args is not None else {}).decode()
    return ToolCall(call.get("id") or "call_" + uuid.uuid4().hex[:24], fn.get("name", ""), text)


def _stop(data: Mapping[str, Any], has_tool_calls: bool) -> StopReason:
    if has_tool_calls:
        return "tool_calls"
    return _DONE.get(data.get("done_reason") or "stop", "stop")


def _error_message(body: bytes) -> str:
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body.decode("utf-8", "replace")[:500]
    if isinstance(data, dict) and isinstance(data.get("error"), str):
        return data["error"]
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        return str(data["error"].get("message", ""))
    return body.decode("utf-8", "replace")[:500]


def classify_message(status: int, message: str, headers: Mapping[str, str]) -> UpstreamError:
    lowered = message.lower()
    # `model "x" not found, try pulling it first` (404), also seen as 400/500 from older servers.
    if "not found" in lowered and "model" in lowered:
        return UpstreamError(ErrorType.MODEL_NOT_FOUND, message, status)
    if status == 503 or "server busy" in lowered:
        return UpstreamError(ErrorType.SERVICE_UNAVAILABLE, message, status)
    return classify_by_status(status, message, headers)


class OllamaAdapter:
    wire = "ollama"
    answer_fields: tuple[str, ...] = ("message",)

    def _base(self, endpoint: Endpoint) -> str:
        return (endpoint.base_url or DEFAULT_BASE_URL).rstrip("/")

    def _headers(self, endpoint: Endpoint) -> dict[str, str]:
        headers = {"content-type": "application/json"}
        if endpoint.api_key:
            headers["authorization"] = f"Bearer {endpoint.api_key}"
        return headers

    def build_request(self, req: ChatRequest, upstream_model: str, endpoint: Endpoint) -> UpstreamRequest:
        return UpstreamRequest("POST", self._base(endpoint) + "/api/chat", self._headers(endpoint),
                               orjson.dumps(build_body(req, upstream_model, endpoint.options)))

    def parse_response(self, body: bytes) -> ChatResponse:
        data = orjson.loads(body)
        message = data.get("message") or {}
        parts: list[TextPart | ThinkingPart | ToolCall] = []
        if message.get("thinking"):
            parts.append(ThinkingPart(message["thinking"]))
        if message.get("content"):
            parts.append(TextPart(message["content"]))
        parts.extend(_tool_call(c) for c in message.get("tool_calls") or [])
        return ChatResponse(
            id=_new_id(),
            model=data.get("model", ""),
            parts=parts,
            stop_reason=_stop(data, any(isinstance(p, ToolCall) for p in parts)),
            usage=_usage(data),
        )

    def stream_decoder(self) -> "OllamaStreamDecoder":
        return OllamaStreamDecoder()

    def classify_error(self, status: int, body: bytes, headers: Mapping[str, str]) -> UpstreamError:
        return classify_message(status, _error_message(body) or f"HTTP {status}", headers)

    def models_request(self, endpoint: Endpoint) -> UpstreamRequest:
        return UpstreamRequest("GET", self._base(endpoint) + "/api/tags", self._headers(endpoint))

    @staticmethod
    def list_name(model: str) -> str:
        """Ollama reads `llama3.2` as `llama3.2:latest`; its list always shows the tag."""
        return model if ":" in model.rsplit("/", 1)[-1] else model + ":latest"

    def parse_models(self, body: bytes) -> list[str]:
        return [m.get("model") or m["name"] for m in orjson.loads(body).get("models") or []]


class OllamaStreamDecoder:
    """NDJSON chunks → IR events; the `done: true` line ends the stream."""

    def __init__(self) -> None:
        self._lines = sse.Framer(b"\n")  # linear and bounded, like the SSE parser
        self._started = False
        self._ended = False
        self._tool_calls = 0

    def feed(self, chunk: bytes) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        for line in self._lines.feed(chunk):
            if self._ended:
                break
            self._line(line, out)
        return out

    def close(self) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        line = self._lines.pending
        if not self._ended and line.strip():
            self._line(line, out)
        if not self._ended:
            self._ended = True
            out.append(StreamError(ErrorType.NETWORK_ERROR.value, "Ollama stream ended before done"))
        return out

    def _line(self, line: bytes, out: list[StreamEvent]) -> None:
        if not line.strip():
            return
        try:
            data = orjson.loads(line)
        except orjson.JSONDecodeError:
            self._ended = True
            out.append(StreamError(ErrorType.UPSTREAM_ERROR.value, "Ollama sent an unreadable stream line"))
            return
        if "error" in data:
            self._ended = True
            err = classify_message(500, _error_message(line), {})
            out.append(StreamError(err.error_type.value, err.message))
            return
        if not self._started:
            self._started = True
            out.append(StreamStart(_new_id(), data.get("model", "")))
        message = data.get("message") or {}
        if message.get("thinking"):
            out.append(ThinkingDelta(message["thinking"]))
        if message.get("content"):
            out.append(TextDelta(message["content"]))
        for raw in message.get("tool_calls") or []:
            call = _tool_call(raw)
            index = self._tool_calls
            self._tool_calls += 1
            out.append(ToolCallStart(index, call.id, call.name))
            out.append(ToolCallDelta(index, call.arguments))
        if data.get("done"):
            self._ended = True
            out.append(StreamEnd(_stop(data, self._tool_calls > 0), usage=_usage(data)))
