"""The chat-completions wire format, spoken by OpenAI and most compatible providers."""

from __future__ import annotations

import hashlib
import re
from typing import Any, Callable, Mapping

import orjson

from modelgate.errors import ErrorType, UpstreamError
from modelgate.protocols import sse
from modelgate.protocols.body import OMIT, forward
from modelgate.protocols.chat import NATIVE_WIRE, STOP_REASON, chunk_usage, usage_from_openai
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
    Tool,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    ToolResult,
    Usage,
    UsageUpdate,
)
from modelgate.providers.base import Endpoint, UpstreamRequest, classify_by_status
from modelgate.providers.openai_models import does_not_reason, output_cap, reasoning_model
from modelgate.providers.output_caps import lowest
from modelgate.providers.tool_rules import function_schemas, hashed

_DAILY = re.compile(r"\b(?:per|each) day\b|\bdaily\b", re.I)
_JSON_HEADERS = {"content-type": "application/json", "accept": "application/json"}


def _text_of(parts: list[Any]) -> str:
    if len(parts) == 1:  # most turns: one block, no generator to run
        return parts[0].text if isinstance(parts[0], TextPart) else ""
    return "".join(p.text for p in parts if isinstance(p, TextPart))


def _user_content(parts: list[Any]) -> str | list[dict[str, Any]]:
    if all(isinstance(p, TextPart) for p in parts):
        return _text_of(parts)
    content: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart):
            content.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart):
            content.append({"type": "image_url", "image_url": {"url": part.as_url()}})
    return content


def _tool_result_content(result: ToolResult) -> str:
    # Chat upstreams take tool results as text; images in results have no place there.
    text = _text_of(result.content)
    return f"Error: {text}" if result.is_error and not text.startswith("Error") else text


# "Invalid 'messages[3].tool_calls[0].id': string too long. Expected a string with maximum length 40"
# (microsoft/autogen#6377): longer ids (Responses' `fc_…`, other gateways' uuids) reach it in a history.
_CALL_ID_MAX = 40


def _call_id(call_id: str) -> str:
    """A history's tool-call id as OpenAI takes it: a longer one becomes its head and a hash of it, the
    same on the call and its result and on every turn."""
    if len(call_id) <= _CALL_ID_MAX:
        return call_id
    return hashed(call_id, call_id[:27], 12)


def messages_to_openai(req: ChatRequest, replay_reasoning: bool = False) -> list[dict[str, Any]]:
    """`replay_reasoning`: send the thinking of assistant turns that called tools back as
    `reasoning_content` (DeepSeek and Moonshot reject a tool-call turn of a thinking model without it)."""
    out: list[dict[str, Any]] = [{"role": "system", "content": text} for text in req.system]
    for message in req.messages:
        if message.role == "system":
            out.append({"role": "system", "content": _text_of(message.parts)})
        elif message.role == "user":
            out.append({"role": "user", "content": _user_content(message.parts)})
        elif message.role == "assistant":
            entry: dict[str, Any] = {"role": "assistant", "content": _text_of(message.parts) or None}
            calls = [p for p in message.parts if isinstance(p, ToolCall)]
            if calls:
                entry["tool_calls"] = [
                    {"id": _call_id(c.id), "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                    for c in calls
                ]
                reasoning = "".join(p.text for p in message.parts if isinstance(p, ThinkingPart))
                if replay_reasoning and reasoning:
                    entry["reasoning_content"] = reasoning
            elif entry["content"] is None:
                entry["content"] = ""
            out.append(entry)
        else:
            for part in message.parts:
                if isinstance(part, ToolResult):
                    out.append({"role": "tool", "tool_call_id": _call_id(part.tool_call_id),
                                "content": _tool_result_content(part)})
                elif isinstance(part, (TextPart, ImagePart)):
                    # Text next to tool results (messages protocol) becomes a user turn.
                    out.append({"role": "user", "content": _user_content([part])})
    return out


def function_tools(tools: list[Tool]) -> list[dict[str, Any]]:
    """Tool definitions in the `{type: function, function: {...}}` form several wire formats share."""
    schemas = function_schemas([t.parameters for t in tools])
    return [
        {"type": "function", "function": {"name": t.name, "description": t.description or "", "parameters": schema}}
        for t, schema in zip(tools, schemas)
    ]


# Sampling parameters OpenAI's reasoning models refuse (https://platform.openai.com/docs/guides/reasoning).
_NOT_FOR_REASONING = frozenset({"temperature", "top_p", "frequency_penalty", "presence_penalty"})
_USER_MAX = 64  # "Invalid 'user': string too long. Expected a string with maximum length 64"
_ABOVE_HIGH = ("xhigh", "max")


def is_reasoning_family(upstream_model: str) -> bool:
    """OpenAI's reasoning models by name: the o-series (o1, o3-mini, o4-mini...), gpt-5 and later."""
    return reasoning_model(upstream_model) is not None


def user_id(user: str) -> str:
    """The end-user id as OpenAI takes it (at most 64 characters): a longer one (Claude Code's
    `metadata.user_id` is about 150) becomes its SHA-256, still one stable id per user."""
    return user if len(user) <= _USER_MAX else hashlib.sha256(user.encode()).hexdigest()


def request_body(req: ChatRequest, upstream_model: str, replay_reasoning: bool = False,
                 reasoning: bool = False) -> dict[str, Any]:
    """`reasoning`: the target is a reasoning model: `max_completion_tokens` instead of `max_tokens`
    (which they refuse), `reasoning_effort`, and no sampling parameters; an OpenAI model known by name
    gets what its generation takes (providers/openai_models.py)."""
    body: dict[str, Any] = {"model": upstream_model, "messages": messages_to_openai(req, replay_reasoning)}
    if req.max_tokens is not None:
        cap = None if reasoning else output_cap(upstream_model)
        body["max_completion_tokens" if reasoning else "max_tokens"] = min(req.max_tokens, cap or req.max_tokens)
    model = reasoning_model(upstream_model) if reasoning else None
    effort = req.reasoning_effort or (req.thinking_effort if reasoning else None)
    if model is None and not req.reasoning_effort and effort in _ABOVE_HIGH:
        effort = "high"  # a messages client's level beyond high, to a model of unknown levels: the one all take
    if model is not None:
        effort = "none" if req.tools and model.tools_without_effort else model.effort(effort) if effort else None
    elif not reasoning and does_not_reason(upstream_model):
        effort = None
    if effort:
        body["reasoning_effort"] = effort
    for name in ("temperature", "top_p", "seed", "frequency_penalty", "presence_penalty"):
        value = getattr(req, name)
        if value is not None and not (reasoning and name in _NOT_FOR_REASONING):
            body[name] = value
    if req.user:
        body["user"] = user_id(req.user)
    if req.stop and (model is None or model.takes_stop):
        body["stop"] = req.stop
    if req.response_format:
        body["response_format"] = req.response_format
    if req.tools:
        body["tools"] = function_tools(req.tools)
        choice = req.tool_choice
        if choice is not None:
            if choice.mode == "tool":
                body["tool_choice"] = {"type": "function", "function": {"name": choice.name}}
            else:
                body["tool_choice"] = choice.mode
            if choice.parallel is False and (model is None or model.takes_parallel_tool_calls):
                body["parallel_tool_calls"] = False
    if req.stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def fitted(body: Mapping[str, Any], upstream_model: str, reasoning: bool, learnt_cap: int | None = None,
           ) -> dict[str, Any]:
    """The changes (OMIT: left out) that make a chat client's own body what the OpenAI model
    `upstream_model` takes, for pass-through: empty where it takes the body as sent or its name is unknown.
    `reasoning`: the target is a reasoning model (`OpenAIChatAdapter.reasoning`); `learnt_cap`: the model's
    output cap learnt from its refusal, for any vendor's model.

    A client cannot tell what serves a model id (a channel's alias), and agents size their requests for
    none in particular (opencode's openai-compatible provider asks every model for `max_tokens: 32000`),
    so the service would refuse what the conversion never sends (`request_body`): more output than the
    model's cap, and to a reasoning model `max_tokens` ("Use 'max_completion_tokens' instead"), sampling
    settings, an effort level it lacks, `stop` or `parallel_tool_calls` where refused; and to a model known
    not to reason, an effort."""
    changes: dict[str, Any] = {}
    if not reasoning:
        cap = lowest(output_cap(upstream_model), learnt_cap)
        if cap is not None:
            changes.update((name, cap) for name in ("max_tokens", "max_completion_tokens")
                           if type(body.get(name)) is int and body[name] > cap)
        if "reasoning_effort" in body and does_not_reason(upstream_model):
            changes["reasoning_effort"] = OMIT
        return changes
    if "max_tokens" in body:
        changes["max_tokens"] = OMIT
        if "max_completion_tokens" not in body:
            changes["max_completion_tokens"] = body["max_tokens"]
    asked = changes.get("max_completion_tokens", body.get("max_completion_tokens"))
    if learnt_cap is not None and type(asked) is int and asked > learnt_cap:
        changes["max_completion_tokens"] = learnt_cap
    changes.update((name, OMIT) for name in _NOT_FOR_REASONING if name in body)
    model = reasoning_model(upstream_model)
    if model is None:
        return changes
    effort = body.get("reasoning_effort")
    if model.tools_without_effort and body.get("tools") is not None:
        fit: str | None = "none"  # refused beside function tools otherwise, an omitted effort too (reports)
    else:
        fit = model.effort(effort) if isinstance(effort, str) else effort
    if fit != effort:
        changes["reasoning_effort"] = fit or OMIT
    if "stop" in body and not model.takes_stop:
        changes["stop"] = OMIT
    if "parallel_tool_calls" in body and not model.takes_parallel_tool_calls:
        changes["parallel_tool_calls"] = OMIT
    return changes


def error_fields(body: bytes) -> tuple[str, str, str]:
    """(message, type, code) of an OpenAI-style error body, tolerant of other shapes."""
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body[:500].decode("utf-8", "replace") or "upstream error", "", ""
    error = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(error, dict):
        return str(error.get("message") or ""), str(error.get("type") or ""), str(error.get("code") or "")
    if isinstance(error, str):
        return error, "", ""
    if isinstance(parsed, dict) and isinstance(parsed.get("message"), str):
        return parsed["message"], "", ""
    return body[:500].decode("utf-8", "replace"), "", ""


def reasoning_text(message: Mapping[str, Any]) -> str:
    """Reasoning of a message or delta: `reasoning_content` (DeepSeek, Moonshot, Qwen, vLLM),
    `reasoning` (Groq's parsed reasoning format, OpenRouter), else the text of `reasoning_details`
    (MiniMax with reasoning_split)."""
    value = message.get("reasoning_content") or message.get("reasoning")
    if isinstance(value, str):
        return value
    details = message.get("reasoning_details")
    if isinstance(details, list):
        return "".join(d["text"] for d in details if isinstance(d, dict) and isinstance(d.get("text"), str))
    return ""


def content_parts(content: Any) -> list[TextPart | ThinkingPart]:
    """`content` as text, or as the list of chunks Mistral's reasoning models answer with:
    `{"type": "text", "text"}` and `{"type": "thinking", "thinking": [text chunks]}`."""
    if isinstance(content, str):
        return [TextPart(content)] if content else []
    parts: list[TextPart | ThinkingPart] = []
    for chunk in content if isinstance(content, list) else ():
        if not isinstance(chunk, dict):
            continue
        if chunk.get("type") == "thinking":
            inner = chunk.get("thinking")
            text = inner if isinstance(inner, str) else "".join(
                c.get("text") or "" for c in inner or () if isinstance(c, dict))
            if text:
                parts.append(ThinkingPart(text))
        elif isinstance(chunk.get("text"), str) and chunk["text"]:
            parts.append(TextPart(chunk["text"]))
    return parts


def cache_hits(usage: Usage, raw: Any) -> Usage:
    """DeepSeek reports prompt-cache hits as `prompt_cache_hit_tokens` (not OpenAI's
    `prompt_tokens_details.cached_tokens`): they are cache reads."""
    hits = raw.get("prompt_cache_hit_tokens") if isinstance(raw, dict) else None
    if usage.cache_read_tokens or not isinstance(hits, int) or isinstance(hits, bool) or hits <= 0:
        return usage
    usage.cache_read_tokens = hits
    return usage


def _raw_usage(chunk: dict[str, Any]) -> Any:
    usage = chunk.get("usage")
    if isinstance(usage, dict):
        return usage
    choices = chunk.get("choices")
    return choices[0].get("usage") if choices and isinstance(choices[0], dict) else None


def sources_text(answer: Mapping[str, Any]) -> str:
    """Perplexity's `search_results` (title, url) or bare `citations` (urls) as a numbered list the
    answer's `[n]` markers refer to; the IR has no citation type, so they travel as text."""
    results = answer.get("search_results")
    if isinstance(results, list) and results:
        lines = [f"[{i}] {r.get('title') or r.get('url')} {r.get('url') or ''}".rstrip()
                 for i, r in enumerate(results, 1) if isinstance(r, dict)]
    else:
        citations = answer.get("citations")
        lines = [f"[{i}] {url}" for i, url in enumerate(citations, 1)] if isinstance(citations, list) else []
    return "\n\nSources:\n" + "\n".join(lines) if lines else ""


# A finish reason is either a stop reason or an upstream failure: an answer the provider
# abandoned (malformed output, lost resources) is reported as an error, never as a normal stop.
Finish = StopReason | ErrorType


def abnormal_finish(error_type: ErrorType, reason: str) -> UpstreamError:
    return UpstreamError(error_type, f"Upstream abandoned the answer (finish reason {reason!r})")


class OpenAIChatAdapter:
    wire = NATIVE_WIRE
    answer_fields: tuple[str, ...] = ("choices",)
    chat_path = "/chat/completions"
    # Provider finish reasons beyond OpenAI's (set per kind in the registry); unknown ones mean stop.
    finish_reasons: Mapping[str, Finish] = {}
    replay_reasoning = False  # see messages_to_openai
    sources = False  # append the answer's search results (Perplexity) as text, see sources_text
    positional_system = True  # system messages may stand anywhere in `messages`
    reasoning_by_name = False  # OpenAI's reasoning models are known by name (OpenAI, Azure)

    def finish(self, reason: str | None) -> StopReason | None:
        """The stop reason of a finish_reason; raises the UpstreamError of an abnormal one."""
        if not reason:
            return None
        mapped = self.finish_reasons.get(reason) or STOP_REASON.get(reason, "stop")
        if isinstance(mapped, ErrorType):
            raise abnormal_finish(mapped, reason)
        return mapped

    def url(self, endpoint: Endpoint, upstream_model: str, reasoning: bool = False) -> str:
        """`reasoning`: the target is a reasoning model (Azure serves them on a later API version)."""
        return endpoint.base_url.rstrip("/") + self.chat_path

    def headers(self, endpoint: Endpoint) -> dict[str, str]:
        if not endpoint.api_key:
            return dict(_JSON_HEADERS)
        return {**_JSON_HEADERS, "authorization": f"Bearer {endpoint.api_key}"}

    def reasoning(self, marked: bool | None, upstream_model: str) -> bool:
        """Whether the target is a reasoning model: the model instance says so (`marked`, its `reasoning`
        capability: Azure deployment names are free), else its name."""
        if marked is not None:
            return marked
        return self.reasoning_by_name and is_reasoning_family(upstream_model)

    def build_request(self, req: ChatRequest, upstream_model: str, endpoint: Endpoint) -> UpstreamRequest:
        reasoning = self.reasoning(req.reasoning_model, upstream_model)
        body = request_body(req, upstream_model, self.replay_reasoning, reasoning)
        return UpstreamRequest("POST", self.url(endpoint, upstream_model, reasoning), self.headers(endpoint),
                               orjson.dumps(body))


    def build_native_request(
        self, body: dict[str, Any], upstream_model: str, endpoint: Endpoint, stream: bool,
        client_headers: Mapping[str, str] | None = None, output_cap: int | None = None,
        marked_reasoning: bool | None = None,
    ) -> UpstreamRequest:
        reasoning = self.reasoning(marked_reasoning, upstream_model)
        changes: dict[str, Any] = {"model": upstream_model, **fitted(body, upstream_model, reasoning, output_cap)}
        if stream:
            # Ask for usage on streams; the client's own choice is honoured by the stream tap.
            changes["stream_options"] = {**(body.get("stream_options") or {}), "include_usage": True}
        return UpstreamRequest("POST", self.url(endpoint, upstream_model, reasoning), self.headers(endpoint),
                               forward(body, changes))

    def parse_response(self, body: bytes) -> ChatResponse:
        try:
            data = orjson.loads(body)
            choice = data["choices"][0]
            message = choice["message"]
        except (orjson.JSONDecodeError, KeyError, IndexError, TypeError):
            raise UpstreamError(ErrorType.UPSTREAM_ERROR, "Upstream returned a malformed chat completion")
        parts: list[Any] = []
        reasoning = reasoning_text(message)
        if reasoning:
            parts.append(ThinkingPart(reasoning))
        parts.extend(content_parts(message.get("content")))
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            parts.append(ToolCall(call.get("id") or "", function.get("name") or "", function.get("arguments") or "{}"))
        trailer = sources_text(data) if self.sources else ""
        if trailer:
            parts.append(TextPart(trailer))
        return ChatResponse(
            id=str(data.get("id") or ""),
            model=str(data.get("model") or ""),
            parts=parts,
            stop_reason=self.finish(choice.get("finish_reason")) or "stop",
            usage=cache_hits(usage_from_openai(data.get("usage")), data.get("usage")),
            created=data.get("created") if isinstance(data.get("created"), int) else None,
        )

    def stream_decoder(self) -> "OpenAIStreamDecoder":
        return OpenAIStreamDecoder(self.finish, self.sources)

    def classify_error(self, status: int, body: bytes, headers: Mapping[str, str]) -> UpstreamError:
        message, error_type, code = error_fields(body)
        error = classify_by_status(status, message, headers)
        lowered = f"{error_type} {code}".lower()
        if "insufficient_quota" in lowered or "billing" in lowered:
            error.error_type = ErrorType.QUOTA_EXCEEDED
        elif "only supported in v1/responses" in message:
            # A 404 of models served by the Responses API only (gpt-5-codex, gpt-5-pro): the model exists,
            # so it is no missing model for the lifecycle probe to retire.
            error.error_type = ErrorType.INVALID_REQUEST
        elif code == "model_not_found" or (status in (400, 404) and "model" in message.lower()
                                          and ("not exist" in message.lower() or "not found" in message.lower())):
            error.error_type = ErrorType.MODEL_NOT_FOUND
        elif code == "invalid_api_key":
            error.error_type = ErrorType.AUTHENTICATION_ERROR
        elif status == 429 and _DAILY.search(message):
            # A daily limit (Groq: "tokens per day (TPD)", retry-after ~15 min) does not recover
            # by backing off: fail over instead of retrying.
            error.error_type = ErrorType.QUOTA_EXCEEDED
        return error

    def models_request(self, endpoint: Endpoint) -> UpstreamRequest:
        return UpstreamRequest("GET", endpoint.base_url.rstrip("/") + "/models", self.headers(endpoint))

    def parse_models(self, body: bytes) -> list[str]:
        data = orjson.loads(body)
        # `{"object": "list", "data": [...]}`, or a bare array (Together)
        models = data if isinstance(data, list) else data.get("data", [])
        return [m["id"] for m in models if isinstance(m, dict) and "id" in m]


class OpenAIPlatformAdapter(OpenAIChatAdapter):
    """OpenAI's own API: its reasoning models are known by name."""

    reasoning_by_name = True


class OpenAIStreamDecoder:
    """chat.completion.chunk SSE → IR events."""

    def __init__(self, finish: Callable[[str | None], StopReason | None] | None = None,
                 sources: bool = False) -> None:
        self._finish_reason = finish or (lambda reason: STOP_REASON.get(reason or "", "stop"))
        self._sources = sources
        self._last: dict[str, Any] = {}  # the latest chunk's search results (sent on every chunk)
        self._parser = sse.SSEParser()
        self._started = False
        self._ended = False
        self._stop: StopReason | None = None
        self._usage: Usage | None = None
        # upstream tool-call index → our index; upstreams number calls per choice
        self._tool_index: dict[int, int] = {}

    def feed(self, chunk: bytes) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        for raw in self._parser.feed_raw(chunk):
            if self._ended:
                break
            # Nearly every event is one `data: ` line holding a chunk: read straight from its bytes.
            bulk = sse.object_data(raw, b"data: ")
            if bulk is not None:
                self._on_chunk(*bulk, events)
                continue
            event = sse.parse_event(raw)
            if event is not None:
                self._on_data(event.data, events)
        return events

    def _on_data(self, data: str, events: list[StreamEvent]) -> None:
        if data == "[DONE]":
            self._finish(events)
            return
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError:
            events.append(StreamError(ErrorType.UPSTREAM_ERROR.value, "Upstream sent a malformed stream chunk"))
            self._ended = True
            return
        if not isinstance(chunk, dict):
            raise sse.unreadable_event()  # every chunk is an object; skipping one would lose its text
        self._on_chunk(chunk, data.encode(), events)

    def _on_chunk(self, chunk: dict[str, Any], data: bytes, events: list[StreamEvent]) -> None:
        """One chunk object; `data`: the event's data, for an error's fields."""
        if "error" in chunk:
            message, _, _ = error_fields(data)
            events.append(StreamError(ErrorType.UPSTREAM_ERROR.value, message))
            self._ended = True
            return
        # Azure opens with a prompt-filter frame (no choices, empty id and model): the stream
        # starts with the first real chunk.
        if self._sources and (chunk.get("search_results") or chunk.get("citations")):
            self._last = chunk
        if not self._started and (chunk.get("id") or chunk.get("choices")):
            self._started = True
            events.append(StreamStart(str(chunk.get("id") or ""), str(chunk.get("model") or "")))
        usage = chunk_usage(chunk)
        if usage is not None:
            usage = cache_hits(usage, _raw_usage(chunk))
            self._usage = usage
            if self._started:
                events.append(UsageUpdate(usage))
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            content = delta.get("content")
            if not isinstance(content, (str, list, type(None))):
                raise sse.unreadable_event()
            reasoning = reasoning_text(delta)
            if reasoning:
                events.append(ThinkingDelta(reasoning))
            if isinstance(content, str):  # nearly every chunk: text, straight to its event
                if content:
                    events.append(TextDelta(content))
            else:
                for part in content_parts(content):
                    events.append(ThinkingDelta(part.text) if isinstance(part, ThinkingPart) else TextDelta(part.text))
            for call in delta.get("tool_calls") or ():
                self._on_tool_call(call, events)
            if choice.get("finish_reason"):
                try:
                    self._stop = self._finish_reason(choice["finish_reason"])
                except UpstreamError as exc:
                    events.append(StreamError(exc.error_type.value, exc.message))
                    self._ended = True
                    return

    def _on_tool_call(self, call: dict[str, Any], events: list[StreamEvent]) -> None:
        upstream_index = call.get("index", len(self._tool_index))
        function = call.get("function") or {}
        index = self._tool_index.get(upstream_index)
        if index is None:
            index = self._tool_index[upstream_index] = len(self._tool_index)
            events.append(ToolCallStart(index, call.get("id") or f"call_{index}", function.get("name") or ""))
        if function.get("arguments"):
            events.append(ToolCallDelta(index, function["arguments"]))

    def _finish(self, events: list[StreamEvent]) -> None:
        if not self._started:
            events.append(StreamStart("", ""))
            self._started = True
        trailer = sources_text(self._last) if self._last else ""
        if trailer:
            events.append(TextDelta(trailer))
        events.append(StreamEnd(self._stop or "stop", None, self._usage))
        self._ended = True

    def close(self) -> list[StreamEvent]:
        if self._ended:
            return []
        events: list[StreamEvent] = []
        if self._stop is not None:
            # Some compatible servers end without [DONE] after a final finish_reason.
            self._finish(events)
            return events
        self._ended = True
        return [StreamError(ErrorType.NETWORK_ERROR.value, "Upstream stream ended before completion")]


