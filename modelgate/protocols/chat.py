"""The chat-completions protocol (spec 2.1, 4.1): validation, IR decoding and encoding."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any, cast

import orjson

from modelgate.errors import ClientProtocol, invalid_request
from modelgate.protocols import chat_view, sse
from modelgate.protocols.base import Headers, bearer_token
from modelgate.protocols.messages import cache_mark
from modelgate.protocols.model_name import model_field, set_model
from modelgate.protocols.ir import (
    ChatRequest,
    ChatResponse,
    ImagePart,
    Message,
    Part,
    StopReason,
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
    token_count,
)

ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
_NUMBER = (int, float)

FINISH_REASON: dict[str | None, str] = {
    "stop": "stop",
    "stop_sequence": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "content_filter": "content_filter",
    "error": "stop",
    None: "stop",
}
STOP_REASON: dict[str, StopReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
}

DONE = b"data: [DONE]\n\n"
KEEPALIVE = b": keep-alive\n\n"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, _NUMBER) and not isinstance(value, bool)


def _check_number(body: dict[str, Any], name: str, low: float, high: float) -> None:
    value = body.get(name)
    if value is None:
        return
    if not _is_number(value) or not low <= value <= high:
        raise invalid_request(f"'{name}' must be a number between {low:g} and {high:g}")


def _validate_message(index: int, message: Any) -> None:
    where = f"messages[{index}]"
    if not isinstance(message, dict):
        raise invalid_request(f"'{where}' must be an object")
    role = message.get("role")
    if not isinstance(role, str) or role not in ROLES:
        raise invalid_request(f"'{where}.role' must be one of system, user, assistant, tool")
    content = message.get("content")
    if isinstance(content, list):
        _validate_text_parts(where, content)
    if role == "assistant":
        tool_calls = message.get("tool_calls")
        if content is None and not tool_calls:
            raise invalid_request(f"'{where}.content' is required unless 'tool_calls' is given")
        if tool_calls is not None:
            _validate_tool_calls(where, tool_calls)
    elif not isinstance(content, (str, list)):
        raise invalid_request(f"'{where}.content' must be a string or an array of text parts")
    if content is not None and not isinstance(content, (str, list)):
        raise invalid_request(f"'{where}.content' must be a string or an array of text parts")
    if role == "tool" and not isinstance(message.get("tool_call_id"), str):
        raise invalid_request(f"'{where}.tool_call_id' is required for role 'tool'")
    name = message.get("name")
    if name is not None and not isinstance(name, str):
        raise invalid_request(f"'{where}.name' must be a string")


def _validate_text_parts(where: str, parts: list[Any]) -> None:
    # Spec 8: no multimodal input on this protocol; arrays of text parts (opencode, the SDKs'
    # typed helpers) carry nothing a string could not.
    for i, part in enumerate(parts):
        if not isinstance(part, dict) or part.get("type") != "text":
            raise invalid_request(
                f"'{where}.content[{i}]' must be a text part: content arrays may hold only "
                "{type: 'text', text} parts on the chat-completions protocol (no images, spec 8); "
                "use the messages protocol for images"
            )
        if not isinstance(part.get("text"), str):
            raise invalid_request(f"'{where}.content[{i}].text' must be a string")


def text_parts(content: str | list[dict[str, Any]] | None) -> list[TextPart]:
    """A validated chat content as IR text parts: one per array part, one for a string. Some
    clients mark parts with the messages protocol's `cache_control` (OpenRouter's convention):
    kept as cache marks for upstreams that take them."""
    if isinstance(content, list):
        return [TextPart(part["text"]) if "cache_control" not in part else TextPart(part["text"], cache_mark(part))
                for part in content]
    return [TextPart(content)] if isinstance(content, str) else []


def _validate_tool_calls(where: str, tool_calls: Any) -> None:
    if not isinstance(tool_calls, list):
        raise invalid_request(f"'{where}.tool_calls' must be an array")
    for i, call in enumerate(tool_calls):
        function = call.get("function") if isinstance(call, dict) else None
        if (
            not isinstance(function, dict)
            or not isinstance(call.get("id"), str)
            or not isinstance(function.get("name"), str)
            or not isinstance(function.get("arguments", ""), str)
        ):
            raise invalid_request(
                f"'{where}.tool_calls[{i}]' must be {{id, type: 'function', function: {{name, arguments}}}}"
            )


def _validate_tools(tools: Any) -> set[str]:
    if not isinstance(tools, list):
        raise invalid_request("'tools' must be an array")
    names = set()
    for i, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(function, dict):
            raise invalid_request(f"'tools[{i}]' must be {{type: 'function', function: {{name, parameters}}}}")
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise invalid_request(f"'tools[{i}].function.name' must be a non-empty string")
        parameters = function.get("parameters")
        if parameters is not None and not isinstance(parameters, dict):
            raise invalid_request(f"'tools[{i}].function.parameters' must be a JSON-schema object")
        description = function.get("description")
        if description is not None and not isinstance(description, str):
            raise invalid_request(f"'tools[{i}].function.description' must be a string")
        names.add(name)
    return names


def _validate_tool_choice(choice: Any, tool_names: set[str]) -> None:
    if isinstance(choice, str):
        if choice in ("auto", "none", "required") or choice in tool_names:
            return
        raise invalid_request("'tool_choice' must be 'auto', 'none', 'required' or the name of a given tool")
    if isinstance(choice, dict):
        function = choice.get("function")
        name = function.get("name") if isinstance(function, dict) else None
        if choice.get("type") == "function" and isinstance(name, str) and name in tool_names:
            return
    raise invalid_request("'tool_choice' names a tool that is not in 'tools'")


def _tool_choice_to_ir(choice: Any, parallel: Any) -> ToolChoice | None:
    parallel_flag = parallel if isinstance(parallel, bool) else None
    if choice is None:
        return ToolChoice("auto", parallel=parallel_flag) if parallel_flag is not None else None
    if isinstance(choice, dict):
        return ToolChoice("tool", choice["function"]["name"], parallel_flag)
    return ToolChoice(choice, parallel=parallel_flag)  # validate() rewrote a bare tool name


def usage_from_openai(usage: Any) -> Usage:
    if not isinstance(usage, dict):
        return Usage()
    details = usage.get("prompt_tokens_details")
    return Usage(
        input_tokens=token_count(usage.get("prompt_tokens")),
        output_tokens=token_count(usage.get("completion_tokens")),
        cache_read_tokens=token_count(details.get("cached_tokens")) if isinstance(details, dict) else 0,
    )


def chunk_usage(chunk: dict[str, Any]) -> Usage | None:
    """Usage reported in a stream chunk: top level (OpenAI), or inside the choice (Moonshot)."""
    usage = chunk.get("usage")
    if not isinstance(usage, dict):
        choices = chunk.get("choices")
        usage = choices[0].get("usage") if choices and isinstance(choices[0], dict) else None
    return usage_from_openai(usage) if isinstance(usage, dict) else None


def usage_to_openai(usage: Usage) -> dict[str, Any]:
    body: dict[str, Any] = {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
    }
    if usage.cache_read_tokens:
        body["prompt_tokens_details"] = {"cached_tokens": usage.cache_read_tokens}
    return body


def error_event(error_type: str, message: str) -> bytes:
    """The in-stream error frame OpenAI sends when a stream fails after it started."""
    return sse.encode(orjson.dumps({"error": {"message": message, "type": error_type.lower(), "code": error_type}}))


def validation_body(message: str) -> bytes:
    """The 7.2 body of the chat protocol (also the Responses protocol's)."""
    return orjson.dumps({"error": {"message": message, "type": "invalid_request_error", "code": "invalid_request"}})


def completion_id(upstream_id: str) -> str:
    return upstream_id if upstream_id.startswith("chatcmpl-") else f"chatcmpl-{upstream_id or uuid.uuid4().hex}"


class ChatCodec:
    protocol = ClientProtocol.CHAT
    native_wire = "openai-chat"

    def api_key(self, headers: Headers) -> bytes | None:
        return bearer_token(headers)

    def check_headers(self, headers: Headers) -> None:
        return None

    def validation_body(self, message: str) -> bytes:
        return validation_body(message)

    def validate(self, body: Any, headers: Mapping[bytes, bytes] | None = None) -> tuple[str, bool]:
        if not isinstance(body, dict):
            raise invalid_request("The request body must be a JSON object")
        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise invalid_request("'model' is required and must be a non-empty string")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise invalid_request("'messages' is required and must be a non-empty array")
        for index, message in enumerate(messages):
            _validate_message(index, message)
        for name in ("max_tokens", "max_completion_tokens"):
            value = body.get(name)
            if value is not None and (not _is_int(value) or value < 1):
                raise invalid_request(f"'{name}' must be a positive integer")
        _check_number(body, "temperature", 0, 2)
        _check_number(body, "top_p", 0, 1)
        _check_number(body, "frequency_penalty", -2, 2)
        _check_number(body, "presence_penalty", -2, 2)
        stop = body.get("stop")
        if stop is not None and not isinstance(stop, str):
            if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
                raise invalid_request("'stop' must be an array of strings")
        response_format = body.get("response_format")
        if response_format is not None:
            if not isinstance(response_format, dict) or response_format.get("type") not in (
                "text",
                "json_object",
                "json_schema",
            ):
                raise invalid_request("'response_format' must be {type: 'json_object'} (or 'text', 'json_schema')")
        seed = body.get("seed")
        if seed is not None and not _is_int(seed):
            raise invalid_request("'seed' must be an integer")
        tool_names: set[str] = set()
        if body.get("tools") is not None:
            tool_names = _validate_tools(body["tools"])
        choice = body.get("tool_choice")
        if choice is not None:
            _validate_tool_choice(choice, tool_names)
            if isinstance(choice, str) and choice not in ("auto", "none", "required"):
                # Spec 4.1 allows a bare tool name; no chat-completions service accepts one, so the
                # pass-through route gets the object form too.
                body["tool_choice"] = {"type": "function", "function": {"name": choice}}
        stream = body.get("stream", False)
        if stream is None:
            stream = False
        if not isinstance(stream, bool):
            raise invalid_request("'stream' must be a boolean")
        options = body.get("stream_options")
        if options is not None and not isinstance(options, dict):
            raise invalid_request("'stream_options' must be an object")
        n = body.get("n")
        if n is not None and (not _is_int(n) or n < 1):
            raise invalid_request("'n' must be a positive integer")
        return model, stream

    def read_typed(self, raw: bytes, headers: Mapping[bytes, bytes]) -> tuple[Any, str, bool] | None:
        return chat_view.read(raw)

    def to_ir(self, body: dict[str, Any]) -> ChatRequest:
        system: list[str] = []
        system_cache: dict[int, str] = {}
        messages: list[Message] = []
        for message in body["messages"]:
            role = message["role"]
            content = message.get("content")
            if role in ("system", "developer"):
                for part in text_parts(content):
                    if part.cache:
                        system_cache[len(system)] = part.cache
                    system.append(part.text)
            elif role == "user":
                messages.append(Message("user", cast(list[Part], text_parts(content))))
            elif role == "assistant":
                parts: list[Any] = []
                reasoning = message.get("reasoning_content")
                if isinstance(reasoning, str) and reasoning:
                    parts.append(ThinkingPart(reasoning))
                parts.extend(part for part in text_parts(content) if part.text)
                for call in message.get("tool_calls") or ():
                    function = call["function"]
                    parts.append(ToolCall(call["id"], function["name"], function.get("arguments") or "{}"))
                messages.append(Message("assistant", parts))
            else:
                content_parts = cast(list[TextPart | ImagePart], text_parts(content))
                result = ToolResult(message["tool_call_id"], content_parts)
                if messages and messages[-1].role == "tool":
                    messages[-1].parts.append(result)  # parallel tool results form one turn
                else:
                    messages.append(Message("tool", [result]))
        stop = body.get("stop")
        tools = [
            Tool(t["function"]["name"], t["function"].get("description"), t["function"].get("parameters") or {})
            for t in body.get("tools") or ()
        ]
        response_format = body.get("response_format")
        if response_format and response_format.get("type") == "text":
            response_format = None
        return ChatRequest(
            model=body["model"],
            messages=messages,
            system=system,
            system_cache=system_cache,
            max_tokens=body.get("max_completion_tokens") or body.get("max_tokens"),
            temperature=body.get("temperature"),
            top_p=body.get("top_p"),
            stop=[stop] if isinstance(stop, str) else list(stop or ()),
            tools=tools,
            tool_choice=_tool_choice_to_ir(body.get("tool_choice"), body.get("parallel_tool_calls")),
            response_format=response_format,
            seed=body.get("seed"),
            frequency_penalty=body.get("frequency_penalty"),
            presence_penalty=body.get("presence_penalty"),
            user=body.get("user"),
            stream=bool(body.get("stream")),
            reasoning_effort=effort if isinstance(effort := body.get("reasoning_effort"), str) else None,
        )

    def encode_response(self, resp: ChatResponse, model: str, body: dict[str, Any] | None = None) -> bytes:
        text = "".join(p.text for p in resp.parts if isinstance(p, TextPart))
        reasoning = "".join(p.text for p in resp.parts if isinstance(p, ThinkingPart))
        calls = [p for p in resp.parts if isinstance(p, ToolCall)]
        message: dict[str, Any] = {"role": "assistant", "content": text if (text or not calls) else None}
        if reasoning:
            message["reasoning_content"] = reasoning
        if calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in calls
            ]
        return orjson.dumps(
            {
                "id": completion_id(resp.id),
                "object": "chat.completion",
                "created": resp.created or int(time.time()),
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "finish_reason": FINISH_REASON.get(resp.stop_reason, "stop"),
                        "logprobs": None,
                    }
                ],
                "usage": usage_to_openai(resp.usage),
            }
        )

    def answer_context(self, body: Mapping[str, Any]) -> dict[str, Any]:
        return {"stream_options": body.get("stream_options")}

    def stream_encoder(self, model: str, body: dict[str, Any]) -> "ChatStreamEncoder":
        options = body.get("stream_options") or {}
        return ChatStreamEncoder(model, bool(options.get("include_usage")))

    def upstream_headers(self, headers: Mapping[bytes, bytes]) -> dict[str, str]:
        return {}  # nothing of a chat client's headers is the upstream's business

    def keepalive(self) -> bytes:
        return KEEPALIVE

    def native_usage(self, body: dict[str, Any]) -> Usage:
        return usage_from_openai(body.get("usage"))

    def native_stream_tap(self, body: Mapping[str, Any]) -> "ChatStreamTap":
        options = body.get("stream_options") or {}
        return ChatStreamTap(client_wants_usage=bool(options.get("include_usage")), model=body.get("model"))


class ChatStreamEncoder:
    """IR stream events → chat.completion.chunk SSE frames."""

    __slots__ = ("model", "include_usage", "id", "created", "usage", "_head", "_text_head")

    def __init__(self, model: str, include_usage: bool) -> None:
        self.model = model
        self.include_usage = include_usage
        self.created = int(time.time())
        self.usage = Usage()
        self._set_id(f"chatcmpl-{uuid.uuid4().hex}")

    def _set_id(self, completion: str) -> None:
        self.id = completion
        # Every chunk starts with the same bytes: encoded once per stream, not once per chunk.
        head = orjson.dumps({"id": self.id, "object": "chat.completion.chunk", "created": self.created,
                             "model": self.model})
        self._head = b"data: " + head[:-1] + b',"choices":[{"index":0,"delta":'
        self._text_head = self._head + b'{"content":'

    def _chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        # The bytes of orjson.dumps({..., "choices": [{"index": 0, "delta": delta, "finish_reason": ...,
        # "logprobs": None}]}) framed as one SSE event.
        return (self._head + orjson.dumps(delta) + b',"finish_reason":' + orjson.dumps(finish_reason)
                + b',"logprobs":null}]}\n\n')

    def encode(self, event: StreamEvent) -> bytes:
        if isinstance(event, TextDelta):  # the bulk of a stream: self._chunk({"content": event.text}), in fewer steps
            return self._text_head + orjson.dumps(event.text) + b'},"finish_reason":null,"logprobs":null}]}\n\n'
        if isinstance(event, ToolCallDelta):
            return self._chunk({"tool_calls": [{"index": event.index, "function": {"arguments": event.arguments}}]})
        if isinstance(event, ToolCallStart):
            call = {"index": event.index, "id": event.id, "type": "function",
                    "function": {"name": event.name, "arguments": ""}}
            return self._chunk({"tool_calls": [call]})
        if isinstance(event, ThinkingDelta):
            # a signature or redacted block alone has nothing a chat client can show
            return self._chunk({"reasoning_content": event.text}) if event.text else b""
        if isinstance(event, StreamStart):
            self._set_id(completion_id(event.id))
            self.usage = self.usage.merged(event.usage)
            return self._chunk({"role": "assistant", "content": ""})
        if isinstance(event, UsageUpdate):
            self.usage = self.usage.merged(event.usage)
            return b""
        if isinstance(event, StreamEnd):
            self.usage = self.usage.merged(event.usage)
            out = self._chunk({}, FINISH_REASON.get(event.stop_reason, "stop"))
            if self.include_usage:
                usage_chunk = {
                    "id": self.id,
                    "object": "chat.completion.chunk",
                    "created": self.created,
                    "model": self.model,
                    "choices": [],
                    "usage": usage_to_openai(self.usage),
                }
                out += sse.encode(orjson.dumps(usage_chunk))
            return out + DONE
        if isinstance(event, StreamError):
            return error_event(event.error_type, event.message) + DONE
        return b""

    def keepalive(self) -> bytes:
        return KEEPALIVE

    def error_event(self, error_type: str, message: str) -> bytes:
        # The error frame, then the stream's own end, so clients waiting for [DONE] finish cleanly.
        return error_event(error_type, message) + DONE


class ChatStreamTap:
    """Reads usage from a pass-through chat stream and hides the usage chunk the gateway asked for.

    Bytes are forwarded as soon as the events they hold are complete; only an
    event split across socket reads waits for its remaining bytes (the SSE
    framer: linear, bounded). Only the events holding a usage or an error
    object are decoded; an event whose data is not a JSON object (or [DONE])
    is an unreadable answer. The content of the JSON is forwarded unchecked, but
    for the model, spliced to the client's id (`model`, if given).
    """

    __slots__ = ("client_wants_usage", "usage", "finished", "stopped", "error", "events", "_framer", "_model_field")

    end_marker = DONE  # added when the upstream closes after its finish_reason but without [DONE]
    after_error = DONE  # follows an upstream error event, so the stream still ends cleanly

    def __init__(self, client_wants_usage: bool, model: str | None = None) -> None:
        self.client_wants_usage = client_wants_usage
        self.usage: Usage | None = None
        self.finished = False
        self.stopped = False  # saw a finish_reason
        self.error: bytes | None = None  # the data of an upstream error event, once one came
        self.events = 0  # data events seen (keep-alive comments are no progress)
        self._framer = sse.Framer(b"\n\n")
        self._model_field = model_field(model) if model is not None else None

    def filter(self, chunk: bytes) -> bytes:
        events = self._framer.feed(chunk)
        if not events:
            return b""
        for raw in events:
            if raw.startswith(b":"):
                continue  # a comment (keep-alive): no progress
            if b"data: {" not in raw and b"data:{" not in raw and b"[DONE]" not in raw:
                raise sse.unreadable_event()
            self.events += 1
        out = events[0] if len(events) == 1 else b"".join(events)
        if not self.stopped and (b'"finish_reason":"' in out or b'"finish_reason": "' in out):
            self.stopped = True
        marked = _first_mark(out)
        if marked < 0:
            return self._named(out)  # the bulk of a stream: content deltas
        kept = []
        end = 0
        for raw in events:
            end += len(raw)
            if end > marked:  # the events before the first mark are content
                if b"data: [DONE]" in raw or b"data:[DONE]" in raw:
                    self.finished = True
                elif b'"error"' in raw and self._read_error(raw):
                    pass  # forwarded: the client sees the upstream's error
                elif _holds_usage(raw) and self._read_usage(raw):
                    continue  # the usage-only chunk the client did not ask for
            kept.append(raw)
        return self._named(b"".join(kept))

    def _named(self, out: bytes) -> bytes:
        return set_model(out, self._model_field) if self._model_field is not None else out

    def _read_error(self, raw: bytes) -> bool:
        event = sse.parse_event(raw)
        try:
            parsed = orjson.loads(event.data) if event is not None else None
        except orjson.JSONDecodeError:
            return False
        if isinstance(parsed, dict) and parsed.get("error"):
            self.error = event.data.encode()  # type: ignore[union-attr]
            return True
        return False

    def error_event(self, error_type: str, message: str) -> bytes:
        # The error frame, then the stream's own end, so clients waiting for [DONE] finish cleanly.
        return error_event(error_type, message) + DONE

    def _read_usage(self, raw: bytes) -> bool:
        """Records the event's usage; True when the event must be hidden from the client."""
        event = sse.parse_event(raw)
        try:
            parsed = orjson.loads(event.data) if event is not None else None
        except orjson.JSONDecodeError:
            return False
        if not isinstance(parsed, dict):
            return False
        usage = chunk_usage(parsed)
        if usage is None:
            return False
        self.usage = usage
        return not self.client_wants_usage and not parsed.get("choices")


_USAGE_OBJECT = (b'"usage":{', b'"usage": {')


def _holds_usage(data: bytes) -> bool:
    """Whether `data` may hold a usage object (`_read_usage` decides)."""
    return any(mark in data for mark in _USAGE_OBJECT)


# What makes a chat stream's event more than content: its end, an error, a usage object. With usage
# asked for, OpenAI sends `"usage":null` in every chunk (API reference, ChatCompletionStreamOptions):
# no mark, so such chunks keep the fast path.
_MARKS = (b"[DONE]", b'"error"', *_USAGE_OBJECT)


def _first_mark(data: bytes) -> int:
    """The offset of the first mark in `data`, or -1."""
    found = [i for i in map(data.find, _MARKS) if i >= 0]
    return min(found) if found else -1
