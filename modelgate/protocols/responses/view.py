"""The Responses request as a typed view (protocols/typed_view.py): `validate.validate` in
msgspec types, for the requests clients usually send. None: let validate decide."""

from __future__ import annotations

from typing import Annotated, Any, Generic, Literal, TypeVar, Union

import msgspec
from msgspec import UNSET, Raw, UnsetType

from modelgate.protocols.body import ClientBody
from modelgate.protocols.responses.validate import check_tools
from modelgate.protocols.typed_view import (
    Int, Opt, PositiveInt, View, checked_definitions, decoder, partial_body, present, raw_fields, sound,
)


class Part(View, tag_field="type"):
    """A content part of a kind validate checks (files are left to it)."""


class InputText(Part, tag="input_text"):
    text: str


class Annotation(View):
    """The vendor's four kinds of citation (openai 3.57, response_output_text.py), flattened: all scalars."""

    type: str
    url: Union[str, UnsetType] = UNSET
    title: Union[str, UnsetType] = UNSET
    file_id: Union[str, UnsetType] = UNSET
    filename: Union[str, UnsetType] = UNSET
    container_id: Union[str, UnsetType] = UNSET
    index: Union[Int, UnsetType] = UNSET
    start_index: Union[Int, UnsetType] = UNSET
    end_index: Union[Int, UnsetType] = UNSET


class TopLogprob(View):
    token: Union[str, UnsetType] = UNSET
    bytes: Union[list[Int], UnsetType] = UNSET
    logprob: Union[float, UnsetType] = UNSET


class Logprob(TopLogprob):
    top_logprobs: Union[list[TopLogprob], UnsetType] = UNSET


class OutputText(Part, tag="output_text"):
    """As the service answers it: the OpenAI SDK's agent loops send answers' items back as they are."""

    text: str
    annotations: Union[list[Annotation], UnsetType] = UNSET
    logprobs: Union[list[Logprob], None, UnsetType] = UNSET


class Refusal(Part, tag="refusal"):
    refusal: str


class InputImage(Part, tag="input_image"):
    image_url: str
    detail: Union[str, UnsetType] = UNSET


Parts = Union[str, list[Union[InputText, OutputText, Refusal, InputImage]]]


class SummaryPart(View):
    type: str
    text: str


# Input items by `type`, each with the fields validate requires of it, so that msgspec checks them
# while it decodes. Other kinds are the vendor's: left to validate.
class Item(View, tag_field="type", kw_only=True):
    # Unread by validate, so null takes the view too: an SDK model dumped whole writes an unset one so.
    id: Union[str, None, UnsetType] = UNSET
    status: Union[str, None, UnsetType] = UNSET


Phase = Union[Literal["commentary", "final_answer"], None, UnsetType]  # of an assistant's message: Codex sends it back


class Message(Item, tag="message"):
    role: Literal["user", "assistant", "system", "developer"]
    content: Parts
    phase: Phase = UNSET


class FunctionCall(Item, tag="function_call"):
    call_id: str
    name: str
    arguments: str
    namespace: Union[str, UnsetType] = UNSET  # a call of a namespace tool's function (Codex's MCP tools)


class CustomToolCall(Item, tag="custom_tool_call"):
    call_id: str
    name: str
    input: str  # the raw input of a custom tool (Codex's apply_patch)


class FunctionCallOutput(Item, tag="function_call_output"):
    call_id: str
    output: Parts


class CustomToolCallOutput(FunctionCallOutput, tag="custom_tool_call_output"):
    pass


class ReasoningItem(Item, tag="reasoning"):
    summary: list[SummaryPart]
    content: Union[Annotated[list[Raw], msgspec.Meta(max_length=0)], None] = None  # text parts: left to validate
    encrypted_content: Union[str, None] = None


# Items of the vendor's own kinds that validate leaves to the vendor, typed as the vendor's SDK has them
# (openai 3.57: ResponseFunctionWebSearchParam, ResponseCompactionItemParamParam), all scalars: Codex sends
# them back on every later turn once its model searched the web or its conversation was compacted.
class WebSearchAction(View, tag_field="type"):
    pass


class SearchSource(View):
    type: str
    url: str


class SearchAction(WebSearchAction, tag="search"):
    query: Union[str, None, UnsetType] = UNSET
    queries: Union[list[str], None, UnsetType] = UNSET
    sources: Union[list[SearchSource], None, UnsetType] = UNSET


class OpenPageAction(WebSearchAction, tag="open_page"):
    url: Union[str, None, UnsetType] = UNSET


class FindInPageAction(WebSearchAction, tag="find_in_page"):
    url: Union[str, None, UnsetType] = UNSET
    pattern: Union[str, None, UnsetType] = UNSET


class WebSearchCall(Item, tag="web_search_call"):
    action: Union[SearchAction, OpenPageAction, FindInPageAction]


class Compaction(Item, tag="compaction"):
    encrypted_content: str


TypedItem = Union[Message, FunctionCall, CustomToolCall, FunctionCallOutput, CustomToolCallOutput, ReasoningItem,
                  WebSearchCall, Compaction]


class AnyItem(View):
    """An input item that may lack `type` (a message: the AI SDK sends them so), checked by `_any_item_sound`."""

    type: str = "message"
    id: Union[str, UnsetType] = UNSET
    status: Union[str, UnsetType] = UNSET
    role: Union[Literal["user", "assistant", "system", "developer"], UnsetType] = UNSET
    content: Union[Parts, None] = None
    phase: Phase = UNSET
    call_id: Union[str, UnsetType] = UNSET
    name: Union[str, UnsetType] = UNSET
    namespace: Union[str, UnsetType] = UNSET
    arguments: Union[str, UnsetType] = UNSET
    input: Union[str, UnsetType] = UNSET
    output: Union[Parts, UnsetType] = UNSET
    summary: Union[list[SummaryPart], UnsetType] = UNSET
    encrypted_content: Union[str, None] = None


class ToolChoice(View):
    type: str
    name: Union[str, UnsetType] = UNSET


class Format(View):
    type: Literal["text", "json_object", "json_schema"]
    name: Union[str, UnsetType] = UNSET
    schema: Union[Raw, UnsetType] = UNSET
    description: Union[str, None] = None
    strict: Union[bool, None] = None


class Text(View):
    format: Union[Format, None] = None
    verbosity: Union[str, None] = None


class Reasoning(View):  # unsent fields UNSET, so that it reads back as sent (the model's rules read it)
    effort: Opt[Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"]] = UNSET
    summary: Opt[Literal["auto", "concise", "detailed"]] = UNSET
    mode: Opt[str] = UNSET  # "standard" or "pro" (gpt-5.6-sol; openai 3.57's Reasoning), which validate leaves be
    generate_summary: Opt[str] = UNSET  # summary's deprecated name, likewise


ItemT = TypeVar("ItemT", TypedItem, AnyItem)


class ResponsesRequest(View, Generic[ItemT]):
    model: str
    input: Union[str, list[ItemT]]  # without it a stored conversation is meant: left to validate
    instructions: Opt[str] = UNSET
    previous_response_id: Opt[str] = UNSET
    prompt_cache_key: Opt[str] = UNSET
    user: Opt[str] = UNSET
    safety_identifier: Opt[str] = UNSET
    # Checked as a whole by validate's own rules (typed_view.checked_definitions): function tools and
    # the vendor's (Codex sends web_search and namespace tools), each with fields of its own.
    tools: Union[Raw, UnsetType] = UNSET
    tool_choice: Opt[Union[Literal["auto", "none", "required"], ToolChoice]] = UNSET
    max_output_tokens: Opt[PositiveInt] = UNSET
    temperature: Opt[float] = UNSET
    top_p: Opt[float] = UNSET
    text: Opt[Text] = UNSET
    reasoning: Opt[Reasoning] = UNSET
    stream: Opt[bool] = UNSET
    store: Opt[bool] = UNSET
    parallel_tool_calls: Opt[bool] = UNSET
    background: Opt[bool] = UNSET
    metadata: Opt[dict[str, str]] = UNSET
    include: Opt[list[str]] = UNSET
    service_tier: Opt[str] = UNSET
    truncation: Opt[str] = UNSET
    client_metadata: Union[Raw, UnsetType] = UNSET  # Codex's; not in the vendor's SDK
    # The vendor SDK's other request fields (openai 3.54, ResponseCreateParams) that validate does not
    # read, but for the stored-conversation ones, which are left to validate: forwarded as sent.
    access_programs: Union[Raw, UnsetType] = UNSET
    background_options: Union[Raw, UnsetType] = UNSET
    context_management: Union[Raw, UnsetType] = UNSET
    image: Union[Raw, UnsetType] = UNSET
    max_tool_calls: Union[Raw, UnsetType] = UNSET
    moderation: Union[Raw, UnsetType] = UNSET
    prompt_cache_options: Union[Raw, UnsetType] = UNSET
    prompt_cache_retention: Union[Raw, UnsetType] = UNSET
    stream_options: Union[Raw, UnsetType] = UNSET
    top_logprobs: Union[Raw, UnsetType] = UNSET


_decode = decoder(ResponsesRequest[TypedItem])
_decode_any_items = decoder(ResponsesRequest[AnyItem])  # the typed items' decoder stops at an item without `type`
_RAW_FIELDS = raw_fields(ResponsesRequest, but=("tools",))  # tools: checked_definitions


def _any_item_sound(item: AnyItem) -> bool:
    """The rules of validate._check_item that the types of the untagged item cannot say."""
    kind = item.type
    if kind == "message":
        if item.role is UNSET or item.content is None:
            return False
    elif kind == "function_call":
        if item.call_id is UNSET or item.name is UNSET or item.arguments is UNSET:
            return False
    elif kind == "custom_tool_call":
        if item.call_id is UNSET or item.name is UNSET or item.input is UNSET:
            return False
    elif kind in ("function_call_output", "custom_tool_call_output"):
        if item.call_id is UNSET or item.output is UNSET:
            return False
    elif kind == "reasoning":
        if item.summary is UNSET or (item.content is not None and item.content != []):  # text parts: validate's
            return False
    else:
        return False  # other kinds are the vendor's: left to validate
    return True


def read(raw: bytes) -> tuple[ClientBody, str, bool] | None:
    """(body, model, stream) of a request `validate.validate` accepts, or None to let it decide."""
    request = _decode(raw)
    if request is None:
        request = _decode_any_items(raw)
        if request is None or isinstance(request.input, list) and not all(map(_any_item_sound, request.input)):
            return None
    if not request.model:
        return None
    pieces: list[Raw] = []  # the free-form JSON msgspec only skipped
    if request.tools is not UNSET and not checked_definitions(request.tools, check_tools):
        return None
    choice = request.tool_choice
    if isinstance(choice, ToolChoice) and (choice.type == "allowed_tools"
                                           or (choice.type == "function" and choice.name is UNSET)):
        return None
    for number, high in ((request.temperature, 2), (request.top_p, 1)):
        if isinstance(number, float) and not 0 <= number <= high:
            return None
    if request.text and request.text.format is not None:
        fmt = request.text.format
        if fmt.type == "json_schema" and (fmt.name is UNSET or fmt.schema is UNSET
                                          or memoryview(fmt.schema)[:1] != b"{"):
            return None
        if fmt.schema is not UNSET:
            pieces.append(fmt.schema)
    pieces += present(request, _RAW_FIELDS)
    if not sound(pieces):
        return None
    # What the model's rules read on pass-through (openai_responses.fitted): small values, decoded at once
    read: dict[str, Any] = {}
    if request.reasoning:
        read["reasoning"] = msgspec.to_builtins(request.reasoning)
    if isinstance(request.include, list):
        read["include"] = request.include  # strings: read as orjson reads them
    return partial_body(request, raw, read), request.model, bool(request.stream)
