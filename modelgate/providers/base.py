"""The contract every provider wire format implements.

One module per wire format (openai_chat, anthropic_messages, gemini, ...) holds
a `WireAdapter`; the registry maps the 21 provider kinds onto those adapters
with their default base URLs. Adapters are pure translators: they build an
`UpstreamRequest` and parse bytes. The gateway owns all I/O.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Protocol

import msgspec
import orjson

from modelgate.errors import ErrorType, UpstreamError, redact
from modelgate.protocols import typed_view
from modelgate.protocols.body import top_level
from modelgate.protocols.ir import (
    ChatRequest,
    ChatResponse,
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
)
from modelgate.providers.tool_rules import hashed, id_chars

log = logging.getLogger("modelgate.providers")


@dataclass(slots=True, frozen=True)
class Endpoint:
    """One upstream base URL with one upstream key: the unit of the circuit breaker."""

    id: str  # stable, e.g. "p3:k7"; safe to log (holds no secret)
    provider_id: int
    key_id: int
    kind: str
    base_url: str
    api_key: str = field(repr=False)  # decrypted upstream key; never logged
    options: Mapping[str, Any] = field(default_factory=dict)  # kind-specific (api_version, region...)


@dataclass(slots=True)
class UpstreamRequest:
    method: str
    url: str
    headers: dict[str, str]
    body: bytes | None = None


class StreamDecoder(Protocol):
    """Turns raw upstream stream bytes, in arbitrary chunking, into IR events."""

    def feed(self, chunk: bytes) -> list[StreamEvent]: ...

    def close(self) -> list[StreamEvent]:
        """Upstream EOF: emits StreamEnd if not yet emitted, or StreamError if cut short."""
        ...


class WireAdapter(Protocol):
    wire: str  # e.g. "openai-chat"; equals a client protocol's `native_wire` for pass-through
    # Optional `positional_system = True`: IR `system` turns may stay in place in `messages`;
    # without it the gateway hoists them into `ChatRequest.system` first.
    # Optional `tool_names`: the tool names the wire takes (providers/tool_rules.py; default
    # FUNCTION_NAME); others are sent under stand-ins.
    # Top-level fields of which a successful answer has at least one; a 200 body with none of
    # them is of the wrong shape (an unreadable answer), not an empty success.
    answer_fields: tuple[str, ...]

    def build_request(self, req: ChatRequest, upstream_model: str, endpoint: Endpoint) -> UpstreamRequest: ...

    def parse_response(self, body: bytes) -> ChatResponse: ...

    def stream_decoder(self) -> StreamDecoder: ...

    def classify_error(self, status: int, body: bytes, headers: Mapping[str, str]) -> UpstreamError: ...

    def models_request(self, endpoint: Endpoint) -> UpstreamRequest: ...

    def parse_models(self, body: bytes) -> list[str]: ...


class PassThroughAdapter(Protocol):
    """A wire that is also a client protocol: the client body is forwarded to it as is."""

    wire: str

    def build_native_request(
        self, body: dict[str, Any], upstream_model: str, endpoint: Endpoint, stream: bool,
        client_headers: Mapping[str, str] | None = None, output_cap: int | None = None,
        marked_reasoning: bool | None = None,
    ) -> UpstreamRequest:
        """`output_cap`: the most output tokens the model takes, learnt from its refusal
        (providers/output_caps.py); the body's output limit is cut to it. `marked_reasoning`: the model
        instance's `reasoning` capability (True), for a model its name does not tell; None: not marked."""
        ...

    def classify_error(self, status: int, body: bytes, headers: Mapping[str, str]) -> UpstreamError: ...


class NativeWireAdapter(WireAdapter, PassThroughAdapter, Protocol):
    """An adapter that converts to its wire and also forwards client bodies of the same wire."""


async def prepare(adapter: WireAdapter, endpoint: Endpoint) -> None:
    """Obtain or renew the endpoint's credentials before a request is built (cloud identity chains:
    `providers/credentials.py`); nothing for adapters that only use the stored key."""
    hook = getattr(adapter, "prepare", None)
    if hook is not None:
        await hook(endpoint)


def refusal(adapter: WireAdapter, status: int, body: bytes, headers: Mapping[str, str],
             endpoint: Endpoint) -> UpstreamError:
    """The classified upstream error, with the endpoint's key taken out of the provider's text."""
    try:
        error = adapter.classify_error(status, body, headers)
    except Exception as exc:  # an error body the adapter cannot read is still that HTTP error
        log.warning("unreadable upstream error body (%s)", type(exc).__name__)
        error = classify_by_status(status, body[:300].decode("utf-8", "replace"), headers)
    error.message = redact(error.message, endpoint.api_key)
    if error.details is not None and endpoint.api_key:
        error.details = orjson.loads(redact(orjson.dumps(error.details).decode(), endpoint.api_key))
    return error


# --- the one choke point for upstream answers ------------------------------------------------
#
# Whatever an adapter cannot read (HTML from a proxy, truncated or invalid JSON, JSON of the wrong
# shape, a bad stream chunk) becomes UPSTREAM_ERROR here, so it is retried, failed over and counted
# by the breaker like any HTTP error; a 200 whose body is an error is classified like that error.

# Vendor error names in 200 bodies, as the HTTP status the same error comes with, so each
# adapter's own classify_error reads them as it reads an HTTP refusal.
_STATUS_OF_ERROR_NAME = {
    # messages wire and OpenAI-style `error.type` / `error.code`
    "invalid_request_error": 400, "authentication_error": 401, "permission_error": 403,
    "not_found_error": 404, "request_too_large": 413, "rate_limit_error": 429, "api_error": 500,
    "overloaded_error": 529, "rate_limit_exceeded": 429, "insufficient_quota": 429,
    "model_not_found": 404, "invalid_api_key": 401, "server_error": 500,
    # the Responses API's `response.error.code` for a response refused for its input
    "invalid_prompt": 400, "invalid_image": 400, "invalid_image_format": 400, "invalid_base64_image": 400,
    "invalid_image_url": 400, "image_too_large": 400, "image_too_small": 400, "image_parse_error": 400,
    "image_content_policy_violation": 400, "invalid_image_mode": 400, "image_file_too_large": 400,
    "unsupported_image_media_type": 400, "empty_image_file": 400, "failed_to_download_image": 400,
    "image_file_not_found": 400, "bio_policy": 400, "data_residency_mismatch": 400,
    "misalignment_policy_violation": 400, "vector_store_timeout": 504,
    # google.rpc `error.status` (Gemini)
    "INVALID_ARGUMENT": 400, "FAILED_PRECONDITION": 400, "UNAUTHENTICATED": 401, "PERMISSION_DENIED": 403,
    "NOT_FOUND": 404, "RESOURCE_EXHAUSTED": 429, "INTERNAL": 500, "UNAVAILABLE": 503, "DEADLINE_EXCEEDED": 504,
    # AWS exception names (Bedrock `__type` / x-amzn-ErrorType)
    "ValidationException": 400, "AccessDeniedException": 403, "ResourceNotFoundException": 404,
    "ThrottlingException": 429, "ServiceQuotaExceededException": 429, "ModelTimeoutException": 408,
    "InternalServerException": 500, "ServiceUnavailableException": 503, "ModelNotReadyException": 503,
}


def unreadable(what: str, exc: BaseException | None = None) -> UpstreamError:
    if exc is not None:
        log.warning("unreadable upstream %s (%s: %s)", what, type(exc).__name__, str(exc)[:200])
    return UpstreamError(ErrorType.UPSTREAM_ERROR, f"Upstream sent an unreadable {what}")


def is_error_body(parsed: Any) -> bool:
    """Whether a 200 JSON body is one of the providers' error bodies rather than an answer."""
    if isinstance(parsed, list) and len(parsed) == 1:  # Gemini's array form
        parsed = parsed[0]
    if not isinstance(parsed, dict):
        return False
    if parsed.get("type") == "error" or parsed.get("error"):  # messages wire; OpenAI/Gemini/Ollama style
        return True
    # Cohere and Bedrock: `{"message": "<text>"}`; their answers carry `message` as an object.
    return isinstance(parsed.get("message"), str) and not any(k in parsed for k in ("choices", "output"))


def _status_hint(parsed: Any, headers: Mapping[str, str]) -> int:
    if isinstance(parsed, list) and parsed:
        parsed = parsed[0]
    error = parsed.get("error") if isinstance(parsed, dict) else None
    names: list[Any] = []
    if isinstance(error, dict):
        code = error.get("code")
        if isinstance(code, int) and 400 <= code <= 599:
            return code
        names += [error.get("status"), error.get("type"), code]
    if isinstance(parsed, dict):
        names.append(str(parsed.get("__type") or "").rsplit("#", 1)[-1])
    names.append(str(headers.get("x-amzn-errortype") or headers.get("x-amzn-ErrorType") or "").split(":", 1)[0])
    for name in names:
        if isinstance(name, str) and name in _STATUS_OF_ERROR_NAME:
            return _STATUS_OF_ERROR_NAME[name]
    return 500  # an unnamed error: a retryable upstream error


def body_refusal(adapter: WireAdapter, parsed: Any, body: bytes, headers: Mapping[str, str],
                 endpoint: Endpoint) -> UpstreamError | None:
    """The classified error a 200 body carries, or None when it is an answer."""
    if not is_error_body(parsed):
        return None
    return refusal(adapter, _status_hint(parsed, headers), body, headers, endpoint)


def _checked(adapter: WireAdapter, parsed: Any, body: bytes, headers: Mapping[str, str],
             endpoint: Endpoint) -> dict[str, Any]:
    error = body_refusal(adapter, parsed, body, headers, endpoint)
    if error is not None:
        raise error
    fields = getattr(adapter, "answer_fields", None)  # None: an adapter that has not declared them
    if not isinstance(parsed, dict) or (fields and not any(isinstance(parsed.get(f), (dict, list)) for f in fields)):
        raise UpstreamError(ErrorType.UPSTREAM_ERROR, "Upstream sent an answer of an unexpected shape")
    return parsed


def read_answer(adapter: WireAdapter, body: bytes, headers: Mapping[str, str], endpoint: Endpoint) -> ChatResponse:
    """A non-streamed 200 answer as IR; anything else raises a typed UpstreamError."""
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise UpstreamError(ErrorType.UPSTREAM_ERROR, "Upstream returned a body that is not JSON") from None
    _checked(adapter, parsed, body, headers, endpoint)
    try:
        answer = adapter.parse_response(body)
    except UpstreamError:
        raise
    except Exception as exc:
        raise unreadable("answer", exc) from None
    if not _sound_answer(answer):
        raise UpstreamError(ErrorType.UPSTREAM_ERROR, "Upstream sent an answer with a value of the wrong type")
    return answer


def _sound_answer(answer: ChatResponse) -> bool:
    """Whether every value a parser copied into the answer has its IR type: one of the wrong JSON type
    (`"id": 5`) is an unreadable answer here, not a crash of the client's encoder (the stream events'
    rule, `_check_types`)."""
    return (type(answer.id) is str and type(answer.model) is str and _optional_str(answer.stop_sequence)
            and (answer.created is None or type(answer.created) is int)
            and all(_sound_part(part) for part in answer.parts))


def _optional_str(value: object) -> bool:
    return value is None or type(value) is str


def _sound_part(part: object) -> bool:
    if isinstance(part, TextPart):
        return type(part.text) is str
    if isinstance(part, ThinkingPart):
        return type(part.text) is str and _optional_str(part.signature) and _optional_str(part.redacted)
    if isinstance(part, ToolCall):
        return type(part.id) is str and type(part.name) is str and type(part.arguments) is str
    return False


# The top-level fields of an answer that pass-through reads: the call record's and the error checks'.
_READ = ("model", "usage", "type", "error", "message")
# Bytes below which an answer is decoded whole: picking out its fields cost 1 µs more on a 300-byte one.
_READ_WHOLE_BELOW = 8192


def read_native_answer(adapter: WireAdapter, body: bytes, headers: Mapping[str, str],
                       endpoint: Endpoint) -> dict[str, Any]:
    """The fields of `_READ` a non-streamed 200 answer to forward as is (pass-through) has, once it is
    checked: JSON, an answer (not an error body), of the adapter's shape. A long answer's other fields
    are checked by msgspec without being built as objects (`_fields`). A short one, one that is not
    an object and one that may be an error body are read whole, as `read_answer` reads them."""
    fields = _fields(body) if len(body) >= _READ_WHOLE_BELOW else None
    if fields is None or is_error_body(fields[0]):
        try:
            parsed = orjson.loads(body)
        except orjson.JSONDecodeError:
            raise UpstreamError(ErrorType.UPSTREAM_ERROR, "Upstream returned a body that is not JSON") from None
        return _checked(adapter, parsed, body, headers, endpoint)
    read, top = fields
    shape = getattr(adapter, "answer_fields", None)
    if shape and not any(name in top and memoryview(top[name])[:1] in (b"{", b"[") for name in shape):
        raise UpstreamError(ErrorType.UPSTREAM_ERROR, "Upstream sent an answer of an unexpected shape")
    return read


def _fields(body: bytes) -> tuple[dict[str, Any], dict[str, msgspec.Raw]] | None:
    """The `_READ` fields of a JSON object, decoded as orjson decodes them, and its top-level pieces; None
    where it is not a JSON object that orjson reads. A Responses answer echoes the request's instructions
    and tools: 75 KB of an agent's, which orjson took 150 µs to build and free, msgspec 30 µs to check.
    msgspec leaves UTF-8 unchecked in the pieces it skips (hence the whole body's check), and reads
    numbers that orjson refuses as infinite, which are forwarded as the client's own parser reads them."""
    try:
        top = top_level(body)
        if not body.isascii():
            body.decode()
        return {name: typed_view.value(top[name]) for name in _READ if name in top}, top
    except (msgspec.DecodeError, RecursionError, UnicodeDecodeError, orjson.JSONDecodeError):
        return None


def stream_refusal(adapter: WireAdapter, body: bytes, headers: Mapping[str, str], endpoint: Endpoint) -> UpstreamError:
    """A stream request answered 200 with a whole body instead of a stream (JSON error, HTML page)."""
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return UpstreamError(ErrorType.UPSTREAM_ERROR, "Upstream answered a stream request with a body that is not a stream")
    error = body_refusal(adapter, parsed, body, headers, endpoint)
    return error or UpstreamError(ErrorType.UPSTREAM_ERROR, "Upstream answered a stream request with a body that is not a stream")


class GuardedDecoder:
    """A stream decoder whose failures, whatever they are, end the stream with a typed error event."""

    __slots__ = ("_inner", "_failed")

    def __init__(self, inner: StreamDecoder) -> None:
        self._inner = inner
        self._failed = False

    def feed(self, chunk: bytes) -> list[StreamEvent]:
        if self._failed:
            return []
        try:
            events = self._inner.feed(chunk)
            for event in events:
                _check_types(event)
            return events
        except Exception as exc:
            return self._fail(exc)

    def close(self) -> list[StreamEvent]:
        if self._failed:
            return []
        try:
            events = self._inner.close()
            for event in events:
                _check_types(event)
            return events
        except Exception as exc:
            return self._fail(exc)

    def _fail(self, exc: Exception) -> list[StreamEvent]:
        self._failed = True
        err = exc if isinstance(exc, UpstreamError) else unreadable("stream event", exc)
        return [StreamError(err.error_type.value, err.message)]


def _check_types(event: StreamEvent) -> None:
    """A value of the wrong JSON type that a decoder copied into an event (`"text": 5`) is an
    unreadable chunk here, not a crash of the client's encoder after the guard."""
    if isinstance(event, TextDelta):
        ok = type(event.text) is str
    elif isinstance(event, ThinkingDelta):
        ok = type(event.text) is str and _optional_str(event.signature)
    elif isinstance(event, ToolCallDelta):
        ok = type(event.index) is int and type(event.arguments) is str
    elif isinstance(event, ToolCallStart):
        ok = type(event.index) is int and type(event.id) is str and type(event.name) is str
    elif isinstance(event, StreamStart):
        ok = type(event.id) is str and type(event.model) is str
    elif isinstance(event, StreamEnd):
        ok = _optional_str(event.stop_sequence)
    else:
        return
    if not ok:
        raise UpstreamError(ErrorType.UPSTREAM_ERROR, "Upstream sent a stream event with a value of the wrong type")


def read_models(adapter: WireAdapter, body: bytes) -> list[str]:
    """A model list; an unreadable one is an UPSTREAM_ERROR like any unreadable answer."""
    try:
        models = adapter.parse_models(body)
    except UpstreamError:
        raise
    except Exception as exc:
        raise unreadable("model list", exc) from None
    if not isinstance(models, list) or not all(isinstance(m, str) for m in models):
        raise unreadable("model list")
    return models


# A dated model id (`claude-sonnet-4-5-20250929`, `gpt-4o-2024-08-06`) also answers to its
# undated alias and the vendors' `-latest` alias.
_DATE_SUFFIX = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2})$")


def in_model_list(adapter: WireAdapter, upstream_model: str, models: Iterable[str]) -> bool | None:
    """Whether a provider's model list shows the model; None where that list cannot answer for
    this name (the adapter's `list_name` returns None for it: Azure deployments, Bedrock
    inference profiles). Names are compared in the adapter's normal form (Ollama tags)."""
    normal = getattr(adapter, "list_name", None) or (lambda name: name)
    wanted = normal(upstream_model)
    if wanted is None:
        return None
    names: set[str] = set()
    for listed in models:
        name = normal(listed)
        if name is None:
            continue
        names.add(name)
        alias = _DATE_SUFFIX.sub("", name)
        if alias != name:
            names.update((alias, alias + "-latest"))
    return wanted in names


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """Parse a Retry-After header given in seconds (the form model providers use)."""
    value = headers.get("retry-after") or headers.get("Retry-After")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


# The user turn put first where an upstream needs one and the client sent none: a conversation that
# opens with the assistant (a chatbot's greeting) or holds only a system prompt. OpenAI takes both;
# Bedrock's Converse refuses them ("A conversation must start with a user message."), the Messages API
# and Gemini an empty conversation. The words are LiteLLM's and AutoGen's for the same purpose. Claude
# from 4.6 gets it last too, after a conversation that ends with the assistant (providers/claude.py).
OPENING_USER_TEXT = "Please continue."

JSON_OBJECT_INSTRUCTION = (
    "Respond with a single valid JSON object only: no prose, no code fences, nothing before or after it."
)


def json_instruction(response_format: dict[str, Any] | None) -> str | None:
    """A chat client's JSON mode in words, for a model that has no form for it (or not this schema's)."""
    if not response_format:
        return None
    kind = response_format.get("type")
    if kind == "json_object":
        return JSON_OBJECT_INSTRUCTION
    if kind == "json_schema":
        spec = response_format.get("json_schema") or {}
        schema = spec.get("schema", spec) if isinstance(spec, dict) else spec
        return JSON_OBJECT_INSTRUCTION + " It must conform to this JSON schema: " + orjson.dumps(schema).decode()
    return None


# Google's own mapping of OpenAI reasoning efforts to thinking budgets (its OpenAI-compatible endpoint,
# https://ai.google.dev/gemini-api/docs/openai; xhigh and max, which it lacks, get its highest): none turns
# thinking off. Claude's budgets use it too; its steps are the ones the messages codec reads a budget's effort
# by (under 4,096 low, under 16,384 medium).
EFFORT_BUDGET = {"none": 0, "minimal": 1024, "low": 1024, "medium": 8192, "high": 24576, "xhigh": 24576, "max": 24576}


def tool_id_for(call_id: str, valid: Callable[[str], object]) -> str:
    """A tool-call id as an upstream with a rule for them (`valid`) takes it. Other providers' ids
    (Kimi's `functions.Bash:0`) reach it in replayed histories and after a failover, and the whole
    request is refused (maximhq/bifrost#5097). Such an id is replaced by its letters, digits, `_` and `-`
    and a hash of it (at most 53 characters): the same id always gets the same replacement, so calls and
    results still pair up on every later turn."""
    # The usual ids (`call_…`, `toolu_…`) pass the first test, several times faster than a pattern.
    if (call_id.isascii() and call_id.isidentifier() and len(call_id) <= 64) or valid(call_id):
        return call_id
    return hashed(call_id, id_chars(call_id)[:40], 12)


def classify_by_status(status: int, message: str, headers: Mapping[str, str]) -> UpstreamError:
    """Default mapping of an HTTP status to a spec 7.5 error type.

    Adapters refine it with the provider's own error codes (quota vs rate
    limit on 429, model-not-found on 400/404) before falling back to this.
    """
    if status == 429:
        kind = ErrorType.RATE_LIMIT_ERROR
    elif status in (401, 403):
        kind = ErrorType.AUTHENTICATION_ERROR
    elif status == 402:
        kind = ErrorType.QUOTA_EXCEEDED
    elif status == 404:
        kind = ErrorType.MODEL_NOT_FOUND if "model" in message.lower() else ErrorType.UPSTREAM_ERROR
    elif status in (408, 504):
        kind = ErrorType.TIMEOUT_ERROR
    elif status in (503, 529):
        kind = ErrorType.SERVICE_UNAVAILABLE
    elif 400 <= status < 500:
        kind = ErrorType.INVALID_REQUEST
    elif status >= 500:
        kind = ErrorType.UPSTREAM_ERROR
    else:
        kind = ErrorType.UNKNOWN_ERROR
    return UpstreamError(kind, message, status, retry_after_seconds(headers))
