"""The chat-completions request as a typed view (protocols/typed_view.py): `ChatCodec.validate`
in msgspec types, for the requests clients usually send. None: let validate decide."""

from __future__ import annotations

from typing import Literal, Union

from msgspec import UNSET, Raw, UnsetType

from modelgate.protocols.body import ClientBody
from modelgate.protocols.typed_view import (
    Int, Opt, PositiveInt, View, decoder, object_or_null, partial_body, present, raw_fields, sound,
    sound_definitions, value,
)


class CacheControl(View):
    type: str
    ttl: Union[str, UnsetType] = UNSET


class TextPart(View):
    type: Literal["text"]
    text: str
    cache_control: Union[CacheControl, UnsetType] = UNSET  # OpenRouter's convention


class Function(View):
    name: str
    arguments: Union[str, UnsetType] = UNSET
    # The OpenAI Node SDK's tool runner (runTools) sends its parsing helper's fields back: null unless it
    # parsed something (a parsed value is left to validate).
    parsed_arguments: Union[None, UnsetType] = UNSET


class ToolCall(View):
    id: str
    function: Function
    type: Union[str, UnsetType] = UNSET


class UrlCitation(View):
    url: str
    title: Union[str, UnsetType] = UNSET
    start_index: Union[Int, UnsetType] = UNSET
    end_index: Union[Int, UnsetType] = UNSET


class Annotation(View):
    type: str
    url_citation: Union[UrlCitation, UnsetType] = UNSET


class Audio(View):
    id: str
    data: Union[str, UnsetType] = UNSET
    transcript: Union[str, UnsetType] = UNSET
    expires_at: Union[Int, UnsetType] = UNSET


class Message(View):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: Union[str, list[TextPart], None] = None
    tool_calls: Union[list[ToolCall], None] = None
    tool_call_id: Union[str, UnsetType] = UNSET
    name: Union[str, None] = None
    reasoning_content: Union[str, None] = None
    cache_control: Union[CacheControl, UnsetType] = UNSET  # opencode's, unread by validate: forwarded as sent
    # An answer's message sent back as the next turn's assistant message (the SDK's
    # `messages.append(completion.choices[0].message)`): fields validate does not read.
    refusal: Union[str, None] = None
    annotations: Union[list[Annotation], None] = None
    audio: Union[Audio, None] = None
    function_call: Union[Function, None] = None
    parsed: Union[None, UnsetType] = UNSET  # the tool runner's, as `parsed_arguments`


class ToolFunction(View):
    name: str
    description: Union[str, None] = None
    parameters: Union[Raw, UnsetType] = UNSET
    strict: Union[bool, None] = None


class Tool(View):
    type: Literal["function"]
    function: ToolFunction


class ChosenFunction(View):
    name: str


class ToolChoice(View):
    type: Literal["function"]
    function: ChosenFunction


class ResponseFormat(View):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: Union[Raw, UnsetType] = UNSET


class ChatRequest(View):
    model: str
    messages: list[Message]
    max_tokens: Opt[PositiveInt] = UNSET
    max_completion_tokens: Opt[PositiveInt] = UNSET
    temperature: Opt[float] = UNSET
    top_p: Opt[float] = UNSET
    frequency_penalty: Opt[float] = UNSET
    presence_penalty: Opt[float] = UNSET
    stop: Opt[Union[str, list[str]]] = UNSET
    response_format: Opt[ResponseFormat] = UNSET
    seed: Opt[Int] = UNSET
    tools: Opt[list[Tool]] = UNSET
    # A bare tool name (validate rewrites it into the object form) is left to validate.
    tool_choice: Opt[Union[Literal["auto", "none", "required"], ToolChoice]] = UNSET
    parallel_tool_calls: Opt[bool] = UNSET
    stream: Opt[bool] = UNSET
    stream_options: Union[Raw, UnsetType] = UNSET
    n: Opt[PositiveInt] = UNSET
    user: Opt[str] = UNSET
    reasoning_effort: Opt[str] = UNSET
    metadata: Union[Raw, UnsetType] = UNSET
    store: Opt[bool] = UNSET
    prompt_cache_key: Opt[str] = UNSET
    safety_identifier: Opt[str] = UNSET
    service_tier: Opt[str] = UNSET
    logprobs: Opt[bool] = UNSET
    top_logprobs: Opt[Int] = UNSET
    # The vendor SDK's other request fields (openai 3.54, CompletionCreateParams) that validate does not
    # read: forwarded as sent.
    audio: Union[Raw, UnsetType] = UNSET
    function_call: Union[Raw, UnsetType] = UNSET
    functions: Union[Raw, UnsetType] = UNSET
    logit_bias: Union[Raw, UnsetType] = UNSET
    modalities: Union[Raw, UnsetType] = UNSET
    moderation: Union[Raw, UnsetType] = UNSET
    prediction: Union[Raw, UnsetType] = UNSET
    prompt_cache_options: Union[Raw, UnsetType] = UNSET
    prompt_cache_retention: Union[Raw, UnsetType] = UNSET
    verbosity: Union[Raw, UnsetType] = UNSET
    web_search_options: Union[Raw, UnsetType] = UNSET


_decode = decoder(ChatRequest)
_RAW_FIELDS = raw_fields(ChatRequest)  # stream_options and metadata among them
_RANGES = (("temperature", 0, 2), ("top_p", 0, 1), ("frequency_penalty", -2, 2), ("presence_penalty", -2, 2))


def read(raw: bytes) -> tuple[ClientBody, str, bool] | None:
    """(body, model, stream) of a request `ChatCodec.validate` accepts, or None to let it decide."""
    request = _decode(raw)
    if request is None or not request.model or not request.messages:
        return None
    for message in request.messages:
        if message.content is None:
            if message.role != "assistant" or not message.tool_calls:
                return None
        elif message.role == "tool" and message.tool_call_id is UNSET:
            return None
    for name, low, high in _RANGES:
        number = getattr(request, name)
        if isinstance(number, float) and not low <= number <= high:
            return None
    pieces = []  # the free-form JSON msgspec only skipped
    if isinstance(request.response_format, ResponseFormat) and request.response_format.json_schema is not UNSET:
        pieces.append(request.response_format.json_schema)
    schemas = []
    tool_names = set()
    for tool in request.tools or ():
        function = tool.function
        if not function.name:
            return None
        if function.parameters is not UNSET:
            if not object_or_null(function.parameters):
                return None
            schemas.append(function.parameters)
        tool_names.add(function.name)
    if isinstance(request.tool_choice, ToolChoice) and request.tool_choice.function.name not in tool_names:
        return None
    if request.stream_options is not UNSET and not object_or_null(request.stream_options):
        return None
    pieces += present(request, _RAW_FIELDS)
    if not sound(pieces) or not sound_definitions(schemas):
        return None
    # Pass-through reads the stream options: their value exactly as the codec's own path has it.
    read_exactly = {} if request.stream_options is UNSET else {"stream_options": value(request.stream_options)}
    return partial_body(request, raw, read_exactly), request.model, bool(request.stream)
