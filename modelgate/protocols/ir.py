"""The internal representation every protocol and provider converts through.

A client protocol (chat completions, messages) decodes into these types and
encodes out of them; a provider wire format does the same toward its upstream.
N protocols + M wire formats therefore cost N + M converters, not N x M.

Everything here is plain data: no I/O, no framework types.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any, Literal, Union

# Why a stream or a response ended, in one vocabulary for all protocols.
StopReason = Literal["stop", "length", "tool_calls", "stop_sequence", "content_filter", "error"]


# Prompt caching: a part, tool or system entry with `cache` set is a cache breakpoint (messages
# `cache_control`, Bedrock `cachePoint`): the prompt up to and including it may be cached. The value
# is the lifetime the client asked for ("5m" when it named none, or "1h").
CacheMark = Union[str, None]


@dataclass(slots=True)
class TextPart:
    text: str
    cache: CacheMark = None


_DATA_URL = re.compile(r"data:([^;,]+);base64,(.*)", re.S)


@dataclass(slots=True)
class ImagePart:
    """An image given either by URL or inline as base64 data."""

    url: str | None = None
    data: str | None = None
    media_type: str | None = None
    cache: CacheMark = None

    def inline(self) -> tuple[str, str] | None:
        """(media type, base64 data) of an inline image, given as data or as a `data:` URL."""
        if self.data is not None:
            return self.media_type or "image/png", self.data
        match = _DATA_URL.match(self.url or "")
        return (match.group(1), match.group(2)) if match else None

    def as_url(self) -> str:
        """The image as one URL (inline images as a `data:` URL), for wire formats that take URLs."""
        return self.url or f"data:{self.media_type or 'image/png'};base64,{self.data}"


@dataclass(slots=True)
class ThinkingPart:
    """Model reasoning (messages `thinking` blocks, chat `reasoning_content`).

    `signature` proves the text came from the model that made it; only that model's wire takes it
    back (`vendor_signature`). `redacted`: reasoning the vendor encrypted (messages
    `redacted_thinking.data`, Bedrock `reasoningContent.redactedContent`), opaque, with no text."""

    text: str
    signature: str | None = None
    redacted: str | None = None


# Signatures of other models' reasoning carry a prefix naming their producer (Gemini's
# `gemini:`); an unprefixed signature is the messages vendor's (its own API, Bedrock and Vertex
# Claude accept each other's: one model family signs them).
FOREIGN_SIGNATURE = re.compile(r"[a-z]+:")


def vendor_signature(part: ThinkingPart) -> str | None:
    """The signature of thinking the messages vendor's models produced, else None."""
    sig = part.signature
    return sig if sig and not FOREIGN_SIGNATURE.match(sig) else None


@dataclass(slots=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text, exactly as produced by the model
    cache: CacheMark = None


@dataclass(slots=True)
class ToolResult:
    tool_call_id: str
    content: list[TextPart | ImagePart]
    is_error: bool = False
    cache: CacheMark = None


Part = Union[TextPart, ImagePart, ThinkingPart, ToolCall, ToolResult]


@dataclass(slots=True)
class Message:
    """One conversation turn.

    role `tool` holds only ToolResult parts; protocols that carry tool results
    inside a user turn split/merge on their own side of the conversion.
    role `system` (TextParts) is an instruction at its place in the conversation (the
    messages protocol's mid-conversation system entries); wire formats without one
    get it through `ChatRequest.with_system_hoisted`.
    """

    role: Literal["user", "assistant", "tool", "system"]
    parts: list[Part]


@dataclass(slots=True)
class Tool:
    name: str
    description: str | None
    parameters: dict[str, Any]
    cache: CacheMark = None


ToolChoiceMode = Literal["auto", "none", "required", "tool"]


@dataclass(slots=True)
class ToolChoice:
    # auto: model decides; none: no tools; required: some tool; tool: the named one
    mode: ToolChoiceMode
    name: str | None = None
    parallel: bool | None = None  # None = protocol default (parallel allowed)


MAX_TOKEN_COUNT = 2**31 - 1  # the call log's column; beyond any real count, and encodable by every codec


def token_count(value: Any) -> int:
    """An upstream's token count as the IR keeps it: a whole number of tokens (some servers send 12.0),
    at most MAX_TOKEN_COUNT; a missing, negative or non-numeric value counts 0. Usage is read on every
    path, pass-through included, where no decoder's guard catches a failure: it never raises."""
    if type(value) is int:
        return min(value, MAX_TOKEN_COUNT) if value > 0 else 0
    if type(value) is float and value > 0:
        return int(min(value, MAX_TOKEN_COUNT))
    return 0


@dataclass(slots=True)
class Usage:
    """Token counts, the prompt's counting cached tokens too. Read from an upstream with `token_count`."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def merged(self, update: "Usage | None") -> "Usage":
        """This usage with a later report's counts laid over it (a zero keeps the earlier count):
        upstreams report input tokens up front and output tokens at the end of a stream."""
        if update is None:
            return self
        return Usage(
            input_tokens=update.input_tokens or self.input_tokens,
            output_tokens=update.output_tokens or self.output_tokens,
            cache_read_tokens=update.cache_read_tokens or self.cache_read_tokens,
            cache_write_tokens=update.cache_write_tokens or self.cache_write_tokens,
        )


@dataclass(slots=True)
class ChatRequest:
    model: str
    messages: list[Message]
    system: list[str] = field(default_factory=list)
    system_cache: dict[int, str] = field(default_factory=dict)  # index in `system` -> its CacheMark
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    stop: list[str] = field(default_factory=list)
    tools: list[Tool] = field(default_factory=list)
    tool_choice: ToolChoice | None = None
    # {"type": "json_object"} or {"type": "json_schema", "json_schema": {...}}
    response_format: dict[str, Any] | None = None
    seed: int | None = None
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    user: str | None = None
    stream: bool = False
    # none | minimal | low | medium | high | xhigh | max (Responses `reasoning.effort`, chat's `reasoning_effort`)
    reasoning_effort: str | None = None
    # Effort derived from a messages client's thinking budget or effort: sent only to reasoning models.
    thinking_effort: Literal["low", "medium", "high", "xhigh", "max"] | None = None
    # A messages client's thinking budget in tokens (`thinking.budget_tokens`); 0: it turned thinking off.
    thinking_budget: int | None = None
    # The target is a reasoning model (set per model instance); None: the wire format decides by name.
    reasoning_model: bool | None = None

    def with_system_hoisted(self) -> "ChatRequest":
        """This request with positional system turns appended to `system`, in order: the closest
        equivalent for wire formats that only take system instructions up front."""
        if not any(m.role == "system" for m in self.messages):
            return self
        system = list(self.system)
        system_cache = dict(self.system_cache)
        messages: list[Message] = []
        for message in self.messages:
            if message.role == "system":
                for part in message.parts:
                    if isinstance(part, TextPart):
                        if part.cache:
                            system_cache[len(system)] = part.cache
                        system.append(part.text)
            else:
                messages.append(message)
        return dataclasses.replace(self, system=system, system_cache=system_cache, messages=messages)

    def with_tool_turns_as_text(self) -> "ChatRequest":
        """This request with the tool calls and results of its history written as text: for wire
        formats that refuse tool blocks in a request that offers the model no tools (a chat client's
        last, tool-less call of an agent loop; `tool_choice: none` where the format has no such
        choice). Results become user turns; their images stay. Signed thinking goes: the vendor binds it
        to the conversation it was made in (Claude from Opus 5.5 refuses it once the tools changed), and
        older models drop earlier turns' thinking anyway."""
        if not any(isinstance(part, (ToolCall, ToolResult)) for message in self.messages for part in message.parts):
            return self
        messages: list[Message] = []
        for message in self.messages:
            parts: list[Part] = []
            for part in message.parts:
                if isinstance(part, ToolCall):
                    parts.append(TextPart(f"[tool call {part.id}: {part.name}, arguments {part.arguments}]"))
                elif isinstance(part, ToolResult):
                    texts = [p.text for p in part.content if isinstance(p, TextPart) and p.text.strip()]
                    head = f"[result of tool call {part.tool_call_id}{' (an error)' if part.is_error else ''}]"
                    parts.append(TextPart("\n".join([head, *texts]) if texts else f"{head} (no output)"))
                    parts.extend(p for p in part.content if isinstance(p, ImagePart))
                elif not isinstance(part, ThinkingPart):
                    parts.append(part)
            messages.append(Message("user" if message.role == "tool" else message.role, parts))
        return dataclasses.replace(self, messages=messages)

    def thinking_wanted(self) -> bool | None:
        """Whether the client asked for model reasoning: True (a budget, an effort), False (it
        turned it off: budget 0, effort `none`), None (it said nothing: the model's default)."""
        if self.thinking_budget == 0 or self.reasoning_effort == "none":
            return False
        if self.thinking_budget or self.thinking_effort or self.reasoning_effort:
            return True
        return None


@dataclass(slots=True)
class ChatResponse:
    id: str
    model: str
    parts: list[TextPart | ThinkingPart | ToolCall]
    stop_reason: StopReason | None
    stop_sequence: str | None = None
    usage: Usage = field(default_factory=Usage)
    created: int | None = None


# --- stream events -------------------------------------------------------
# Decoders turn upstream bytes into these; encoders turn them into client SSE.
# Order: StreamStart, then any deltas, then exactly one StreamEnd or StreamError.


@dataclass(slots=True)
class StreamStart:
    id: str
    model: str
    usage: Usage | None = None  # input tokens, where the upstream knows them up front


@dataclass(slots=True)
class TextDelta:
    text: str


@dataclass(slots=True)
class ThinkingDelta:
    text: str
    signature: str | None = None
    redacted: str | None = None  # a whole redacted block (ThinkingPart.redacted), never split


@dataclass(slots=True)
class ToolCallStart:
    index: int  # position among this response's tool calls, from 0
    id: str
    name: str


@dataclass(slots=True)
class ToolCallDelta:
    index: int
    arguments: str  # a fragment of the JSON arguments text


@dataclass(slots=True)
class UsageUpdate:
    usage: Usage


@dataclass(slots=True)
class StreamEnd:
    stop_reason: StopReason | None
    stop_sequence: str | None = None
    usage: Usage | None = None


@dataclass(slots=True)
class StreamError:
    error_type: str  # an ErrorType name
    message: str


StreamEvent = Union[
    StreamStart, TextDelta, ThinkingDelta, ToolCallStart, ToolCallDelta, UsageUpdate, StreamEnd, StreamError
]
