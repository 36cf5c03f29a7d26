"""Anthropic Messages API wire adapter (`POST {base}/v1/messages`).

The base URL is the API origin without `/v1` (as in the vendor's SDKs), e.g.
https://api.anthropic.com or a compatible provider's `.../anthropic`; a base
that already ends in `/v1` is accepted too. Auth is `x-api-key` plus
`anthropic-version: 2023-06-01`.

Mapping notes (the full table is docs/conversion.md):
- `max_tokens` is required by the vendor: DEFAULT_MAX_TOKENS when the client gave none.
- IR `tool` turns and neighbouring user turns merge into one user message
  (tool_result blocks in their original order); consecutive turns of one role merge.
- JSON mode (`response_format`) has no vendor field: it becomes an instruction
  appended to the system prompt (with the schema for `json_schema`).
- sampling settings, thinking and tool choice go as the model's generation takes
  them (providers/claude.py); seed, frequency and presence penalties are dropped.
- Thinking parts without a signature (reasoning from another provider) and empty
  text parts are dropped: the vendor rejects both.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit
from collections.abc import Mapping
from typing import Any

import orjson

from modelgate.errors import ErrorType, UpstreamError
from modelgate.protocols import sse
from modelgate.protocols.body import forward
from modelgate.protocols.ir import (
    ChatRequest,
    ChatResponse,
    ImagePart,
    Message,
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
    vendor_signature,
)
from modelgate.protocols.messages import (
    NATIVE_WIRE,
    STOP_FROM_VENDOR,
    cache_control,
    tool_input,
    usage_from_vendor,
)
from modelgate.protocols.messages.wire import thread_refusal
from modelgate.providers import claude
from modelgate.providers.base import (
    OPENING_USER_TEXT,
    Endpoint,
    UpstreamRequest,
    classify_by_status,
    json_instruction,
    retry_after_seconds,
    tool_id_for,
)
from modelgate.providers.tool_rules import CLAUDE_NAME, object_root

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096
# The vendor's rule for tool_use ids: "String should match pattern '^[a-zA-Z0-9_-]+$'" (maximhq/bifrost#5097).
_TOOL_ID = re.compile(r"[A-Za-z0-9_-]+").fullmatch

# vendor error type -> spec 7.5 error type (refined by message below)
_ERROR_TYPES: dict[str, ErrorType] = {
    "rate_limit_error": ErrorType.RATE_LIMIT_ERROR,
    "overloaded_error": ErrorType.SERVICE_UNAVAILABLE,
    "authentication_error": ErrorType.AUTHENTICATION_ERROR,
    "permission_error": ErrorType.AUTHENTICATION_ERROR,
    "billing_error": ErrorType.QUOTA_EXCEEDED,
    "timeout_error": ErrorType.TIMEOUT_ERROR,
    "api_error": ErrorType.UPSTREAM_ERROR,
    "invalid_request_error": ErrorType.INVALID_REQUEST,
    "request_too_large": ErrorType.INVALID_REQUEST,
}
_QUOTA_HINTS = ("credit balance", "billing", "spend limit", "quota")


def _base(endpoint: Endpoint) -> str:
    base = (endpoint.base_url or DEFAULT_BASE_URL).rstrip("/")
    return base.removesuffix("/v1")


def _holds_threads(endpoint: Endpoint) -> bool:
    """Message threads are state the vendor's own API keeps. An Anthropic-compatible API (DeepSeek's, Kimi's,
    Zhipu's) documents none and may ignore the field, answering a continuation's new messages alone; the
    provider option `message_threads` says otherwise (a proxy in front of the vendor)."""
    option = endpoint.options.get("message_threads")
    if isinstance(option, bool):
        return option
    return urlsplit(_base(endpoint)).hostname == urlsplit(DEFAULT_BASE_URL).hostname
def _headers(endpoint: Endpoint, client_headers: Mapping[str, str] | None = None) -> dict[str, str]:
    """Auth and version; on pass-through the client's `anthropic-version` and `anthropic-beta`
    go upstream unchanged: beta-gated body fields are only valid together with their beta."""
    headers = {
        "x-api-key": endpoint.api_key,
        "anthropic-version": API_VERSION,
        "content-type": "application/json",
    }
    if client_headers:
        headers.update(client_headers)
    return headers


# --- IR -> vendor request -------------------------------------------------------


def _cached(block: dict[str, Any], mark: str | None) -> dict[str, Any]:
    if mark:
        block["cache_control"] = cache_control(mark)
    return block


def _image_block(part: ImagePart) -> dict[str, Any]:
    if part.data is not None:
        source = {"type": "base64", "media_type": part.media_type or "image/png", "data": part.data}
    elif (part.url or "").startswith("data:") and ";base64," in (part.url or ""):
        # A data URL from a chat client: the vendor takes it as base64 source.
        header, _, data = (part.url or "").partition(";base64,")
        source = {"type": "base64", "media_type": header[5:] or "image/png", "data": data}
    else:
        source = {"type": "url", "url": part.url or ""}
    return _cached({"type": "image", "source": source}, part.cache)


def _result_block(part: ToolResult) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_id_for(part.tool_call_id, _TOOL_ID)}
    content = [
        _cached({"type": "text", "text": p.text}, p.cache) if isinstance(p, TextPart) else _image_block(p)
        for p in part.content
        if not isinstance(p, TextPart) or (p.text and not p.text.isspace())
    ]
    if content:
        block["content"] = content
    if part.is_error:
        block["is_error"] = True
    return _cached(block, part.cache)


def _blocks(message: Message) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            # The vendor refuses an empty text block, and a whitespace-only one unless other text is
            # beside it; such a block carries nothing, and a refused turn stays in every later request.
            if part.text and not part.text.isspace():
                blocks.append(_cached({"type": "text", "text": part.text}, part.cache))
        elif isinstance(part, ImagePart):
            blocks.append(_image_block(part))
        elif isinstance(part, ThinkingPart):
            # Only the vendor's own signed (or encrypted) thinking can be sent back to it.
            if message.role != "assistant":
                continue
            if part.redacted is not None:
                blocks.append({"type": "redacted_thinking", "data": part.redacted})
            elif (signature := vendor_signature(part)) is not None:
                blocks.append({"type": "thinking", "thinking": part.text, "signature": signature})
        elif isinstance(part, ToolCall):
            blocks.append(_cached({"type": "tool_use", "id": tool_id_for(part.id, _TOOL_ID), "name": part.name,
                                   "input": tool_input(part.arguments)}, part.cache))
        elif isinstance(part, ToolResult):
            blocks.append(_result_block(part))
    return blocks


def messages_body(req: ChatRequest, upstream_model: str, structured_outputs: bool = True) -> dict[str, Any]:
    """The vendor request body for an IR request. `structured_outputs`: whether the cloud serving it takes
    `output_config.format` (Vertex AI leaves it off unless the organisation's policy allows it)."""
    if not req.tools:
        # "Requests which include `tool_use` or `tool_result` blocks must define tools."
        req = req.with_tool_turns_as_text()
    req, thinking_fields = claude.shaped(req, upstream_model, DEFAULT_MAX_TOKENS)
    messages: list[dict[str, Any]] = []
    for message in req.messages:
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _blocks(message)
        if not blocks:
            continue
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})
    if not messages or messages[0]["role"] != "user":
        messages.insert(0, {"role": "user", "content": [{"type": "text", "text": OPENING_USER_TEXT}]})

    body: dict[str, Any] = {
        "model": upstream_model,
        "max_tokens": req.max_tokens or DEFAULT_MAX_TOKENS,
        "messages": messages,
    }
    system = [_cached({"type": "text", "text": s}, req.system_cache.get(i)) for i, s in enumerate(req.system)
              if s and not s.isspace()]
    schema = claude.output_schema(req, upstream_model) if structured_outputs else None
    instruction = json_instruction(req.response_format) if schema is None else None
    if instruction:
        system.append({"type": "text", "text": instruction})
    if len(system) == 1 and "cache_control" not in system[0]:
        body["system"] = system[0]["text"]
    elif system:
        body["system"] = system
    for name in ("temperature", "top_p", "top_k"):  # as the model takes them (claude.shaped)
        if (value := getattr(req, name)) is not None:
            body[name] = value
    if stops := claude.stop_sequences(req.stop):
        body["stop_sequences"] = stops
    if req.tools:
        body["tools"] = [
            _cached({
                "name": t.name,
                **({"description": t.description} if t.description else {}),
                "input_schema": object_root(t.parameters),
            }, t.cache)
            for t in req.tools
        ]
        if req.tool_choice is not None:
            body["tool_choice"] = _tool_choice(req)
    body.update(thinking_fields)
    if schema is not None:
        body["output_config"] = {**body.get("output_config", {}), "format": {"type": "json_schema", "schema": schema}}
    if req.user:
        body["metadata"] = {"user_id": req.user}
    if req.stream:
        body["stream"] = True
    return body


# The body fields of `POST /v1/messages/count_tokens` (the vendor's API reference) that messages_body
# writes. It refuses the others: "max_tokens: Extra inputs are not permitted" (Wei-Shaw/sub2api#4913).
_COUNTED_FIELDS = ("model", "messages", "system", "tools", "tool_choice", "thinking")


def count_body(req: ChatRequest, upstream_model: str) -> dict[str, Any]:
    """The vendor's count body for an IR request: the fields its count endpoint takes."""
    body = messages_body(req, upstream_model)
    return {name: body[name] for name in _COUNTED_FIELDS if name in body}


def _tool_choice(req: ChatRequest) -> dict[str, Any]:
    choice = req.tool_choice
    assert choice is not None
    if choice.mode == "required":
        out: dict[str, Any] = {"type": "any"}
    elif choice.mode == "tool":
        out = {"type": "tool", "name": choice.name}
    else:
        out = {"type": choice.mode}
    if choice.parallel is False and choice.mode != "none":
        out["disable_parallel_tool_use"] = True
    return out


# --- vendor response -> IR --------------------------------------------------------


def _stop(reason: Any) -> StopReason | None:
    if reason is None:
        return None
    return STOP_FROM_VENDOR.get(reason, "stop")  # type: ignore[return-value]


def parse_message(data: dict[str, Any]) -> ChatResponse:
    parts: list[TextPart | ThinkingPart | ToolCall] = []
    for block in data.get("content") or []:
        kind = block.get("type")
        if kind == "text":
            parts.append(TextPart(block.get("text") or ""))
        elif kind == "thinking":
            parts.append(ThinkingPart(block.get("thinking") or "", block.get("signature")))
        elif kind == "redacted_thinking" and isinstance(block.get("data"), str):
            parts.append(ThinkingPart("", redacted=block["data"]))
        elif kind == "tool_use":
            parts.append(ToolCall(block["id"], block["name"], orjson.dumps(block.get("input") or {}).decode()))
    return ChatResponse(
        id=data.get("id") or "",
        model=data.get("model") or "",
        parts=parts,
        stop_reason=_stop(data.get("stop_reason")),
        stop_sequence=data.get("stop_sequence"),
        usage=usage_from_vendor(data.get("usage")),
    )


# --- errors ------------------------------------------------------------------------


def classify(status: int, body: bytes, headers: Mapping[str, str]) -> UpstreamError:
    vendor_type, message, details = _error_fields(body)
    return classify_fields(status, vendor_type, message or f"Anthropic returned HTTP {status}", headers, details)


def classify_fields(status: int, vendor_type: str | None, message: str, headers: Mapping[str, str],
                    details: dict[str, Any] | None = None) -> UpstreamError:
    kind = _ERROR_TYPES.get(vendor_type or "")
    lowered = message.lower()
    if vendor_type == "not_found_error":
        if details is not None:
            # Something the request names is not there (a message thread's `thread_not_found`, a file): the
            # caller's to act on, as the SDK does (it sends the conversation again), never a missing model.
            kind = ErrorType.INVALID_REQUEST
        else:
            kind = ErrorType.MODEL_NOT_FOUND if "model" in lowered else ErrorType.UPSTREAM_ERROR
    elif kind is ErrorType.INVALID_REQUEST and any(h in lowered for h in _QUOTA_HINTS):
        # The vendor reports an exhausted prepaid balance as a 400 invalid request.
        kind = ErrorType.QUOTA_EXCEEDED
    if kind is None:
        return classify_by_status(status, message, headers)
    return UpstreamError(kind, message, status, retry_after_seconds(headers), details)


def _error_fields(body: bytes) -> tuple[str | None, str, dict[str, Any] | None]:
    """The error's type, message and `details` (the vendor's machine-readable cause: an object that names
    its `error_code`)."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None, body[:300].decode("utf-8", "replace").strip(), None
    error = data.get("error") if isinstance(data, dict) else None
    if not isinstance(error, dict):
        return None, "", None
    vendor_type = error.get("type")
    message = error.get("message")
    details = error.get("details")
    return (vendor_type if isinstance(vendor_type, str) else None,
            message if isinstance(message, str) else "",
            details if isinstance(details, dict) and isinstance(details.get("error_code"), str) else None)


# --- stream ------------------------------------------------------------------------


_DELTA_HEAD = b"event: content_block_delta\ndata: "


class AnthropicStreamDecoder:
    """Vendor SSE -> IR events. Content block indexes map to IR tool-call indexes."""

    def __init__(self) -> None:
        self._sse = sse.SSEParser()
        self._started = False
        self._ended = False
        self._tools: dict[int, int] = {}  # content block index -> tool call index
        self._usage = Usage()
        self._raw_usage: dict[str, Any] = {}
        self._stop: StopReason | None = None
        self._stop_sequence: str | None = None
        self._saw_delta = False

    def feed(self, chunk: bytes) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        for raw in self._sse.feed_raw(chunk):
            if self._ended:
                break
            # Nearly every event of a stream is a content_block_delta: read straight from its bytes.
            bulk = sse.object_data(raw, _DELTA_HEAD) if self._started else None
            if bulk is not None and bulk[0].get("type") == "content_block_delta":
                self._block_delta(bulk[0], out)
                continue
            frame = sse.parse_event(raw)
            if frame is not None:
                self._event(frame.event, frame.data, out)
        return out

    def close(self) -> list[StreamEvent]:
        if self._ended:
            return []
        self._ended = True
        if self._saw_delta:
            # message_delta carried the stop reason; only the final marker is missing.
            return [StreamEnd(self._stop, self._stop_sequence, self._usage)]
        return [StreamError(ErrorType.NETWORK_ERROR.value, "Anthropic stream ended before message_stop")]

    def _event(self, name: str | None, data: str, out: list[StreamEvent]) -> None:
        if name == "ping" or not data:
            return
        try:
            payload = orjson.loads(data)
        except orjson.JSONDecodeError:
            self._ended = True
            out.append(StreamError(ErrorType.UPSTREAM_ERROR.value, "Anthropic sent an unreadable stream event"))
            return
        kind = payload.get("type", name)
        if kind == "message_start":
            message = payload.get("message") or {}
            self._merge_usage(message.get("usage"))
            self._started = True
            out.append(StreamStart(message.get("id") or "", message.get("model") or "", self._usage))
            return
        if kind == "error":
            error = payload.get("error") if isinstance(payload.get("error"), dict) else {}
            raw_message = error.get("message")
            message = raw_message if isinstance(raw_message, str) else "Anthropic stream error"
            # Mid-stream errors carry no HTTP status; 500 only matters for unknown types.
            err = classify_fields(500, error.get("type"), message, {})
            self._ended = True
            out.append(StreamError(err.error_type.value, err.message))
            return
        if not self._started:
            return  # nothing before message_start has a meaning
        if kind == "content_block_start":
            self._block_start(payload, out)
        elif kind == "content_block_delta":
            self._block_delta(payload, out)
        elif kind == "message_delta":
            delta = payload.get("delta") or {}
            self._stop = _stop(delta.get("stop_reason"))
            self._stop_sequence = delta.get("stop_sequence")
            self._merge_usage(payload.get("usage"))
            self._saw_delta = True
        elif kind == "message_stop":
            self._ended = True
            out.append(StreamEnd(self._stop, self._stop_sequence, self._usage))

    def _merge_usage(self, usage: Any) -> None:
        if isinstance(usage, dict):
            # message_delta counts are cumulative and may omit what message_start gave.
            self._raw_usage.update({k: v for k, v in usage.items() if v is not None})
            self._usage = usage_from_vendor(self._raw_usage)

    def _block_start(self, payload: dict[str, Any], out: list[StreamEvent]) -> None:
        block = payload.get("content_block") or {}
        kind = block.get("type")
        if kind == "text" and block.get("text"):
            out.append(TextDelta(block["text"]))
        elif kind == "thinking" and (block.get("thinking") or block.get("signature")):
            out.append(ThinkingDelta(block.get("thinking") or "", block.get("signature") or None))
        elif kind == "redacted_thinking" and isinstance(block.get("data"), str):
            out.append(ThinkingDelta("", redacted=block["data"]))
        elif kind == "tool_use":
            index = len(self._tools)
            self._tools[payload.get("index", -1)] = index
            out.append(ToolCallStart(index, block.get("id") or "", block.get("name") or ""))
            if block.get("input"):
                out.append(ToolCallDelta(index, orjson.dumps(block["input"]).decode()))

    def _block_delta(self, payload: dict[str, Any], out: list[StreamEvent]) -> None:
        delta = payload.get("delta") or {}
        kind = delta.get("type")
        if kind == "text_delta":
            if delta.get("text"):
                out.append(TextDelta(delta["text"]))
        elif kind == "input_json_delta":
            index = self._tools.get(payload.get("index", -1))
            if index is not None and delta.get("partial_json"):
                out.append(ToolCallDelta(index, delta["partial_json"]))
        elif kind == "thinking_delta":
            if delta.get("thinking"):
                out.append(ThinkingDelta(delta["thinking"]))
        elif kind == "signature_delta" and delta.get("signature"):
            out.append(ThinkingDelta("", delta["signature"]))


# --- the adapter ---------------------------------------------------------------------


class AnthropicMessagesAdapter:
    wire = NATIVE_WIRE
    tool_names = CLAUDE_NAME
    answer_fields: tuple[str, ...] = ("content",)

    def build_request(self, req: ChatRequest, upstream_model: str, endpoint: Endpoint) -> UpstreamRequest:
        body = messages_body(req, upstream_model)
        return UpstreamRequest("POST", _base(endpoint) + "/v1/messages", _headers(endpoint), orjson.dumps(body))

    def build_native_request(
        self, body: dict[str, Any], upstream_model: str, endpoint: Endpoint, stream: bool,
        client_headers: Mapping[str, str] | None = None, output_cap: int | None = None,
        marked_reasoning: bool | None = None,
    ) -> UpstreamRequest:
        if body.get("thread") is not None and not _holds_threads(endpoint):
            raise thread_refusal("this channel's Anthropic-compatible API holds no message threads")
        changes = claude.fitted(body, upstream_model, output_cap)
        return UpstreamRequest("POST", _base(endpoint) + "/v1/messages", _headers(endpoint, client_headers),
                               forward(body, {"model": upstream_model, **changes}))

    def count_request(self, req: ChatRequest, upstream_model: str, endpoint: Endpoint) -> UpstreamRequest:
        """The vendor's own count for another protocol's request."""
        return UpstreamRequest("POST", _base(endpoint) + "/v1/messages/count_tokens", _headers(endpoint),
                               orjson.dumps(count_body(req, upstream_model)))

    def native_count_request(self, body: dict[str, Any], upstream_model: str, endpoint: Endpoint,
                             client_headers: Mapping[str, str] | None = None) -> UpstreamRequest:
        """The vendor's own count (`POST /v1/messages/count_tokens`), the client body as is."""
        return UpstreamRequest("POST", _base(endpoint) + "/v1/messages/count_tokens",
                               _headers(endpoint, client_headers),
                               forward(body, {"model": upstream_model, **claude.fitted(body, upstream_model)}))

    def parse_count(self, body: bytes) -> int:
        return orjson.loads(body)["input_tokens"]

    def parse_response(self, body: bytes) -> ChatResponse:
        return parse_message(orjson.loads(body))

    def stream_decoder(self) -> AnthropicStreamDecoder:
        return AnthropicStreamDecoder()

    def classify_error(self, status: int, body: bytes, headers: Mapping[str, str]) -> UpstreamError:
        return classify(status, body, headers)

    def models_request(self, endpoint: Endpoint) -> UpstreamRequest:
        headers = _headers(endpoint)
        del headers["content-type"]
        # The list is paginated (20 by default); 1000 is the vendor's maximum page.
        return UpstreamRequest("GET", _base(endpoint) + "/v1/models?limit=1000", headers)

    def parse_models(self, body: bytes) -> list[str]:
        data = orjson.loads(body)
        return [m["id"] for m in data.get("data") or [] if isinstance(m, dict) and isinstance(m.get("id"), str)]
