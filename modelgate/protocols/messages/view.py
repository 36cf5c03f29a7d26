"""The messages request as a typed view (protocols/typed_view.py): `messages.validate` in
msgspec types, for the requests clients usually send. None: let validate decide."""

from __future__ import annotations

from typing import Literal, Union, get_args

import msgspec
from msgspec import UNSET, Raw, UnsetType

from modelgate.protocols.body import ClientBody
from modelgate.protocols.messages.validate import check_tools
from modelgate.protocols.typed_view import (
    Int, Opt, PositiveInt, View, checked_definitions, decoder, is_object, partial_body, present, raw_fields,
    sound, value,
)


class CacheControl(View):
    type: str
    ttl: Union[str, UnsetType] = UNSET


class Block(View, tag_field="type"):
    """A content block; its `type` picks the class (a union of them requires it)."""


class Citation(View):
    """The vendor's five kinds of citation (anthropic 2.14, citation_*.py), flattened: all scalars."""

    type: str
    cited_text: Union[str, UnsetType] = UNSET
    document_index: Union[Int, UnsetType] = UNSET
    document_title: Union[str, None, UnsetType] = UNSET
    file_id: Union[str, None, UnsetType] = UNSET
    start_char_index: Union[Int, UnsetType] = UNSET
    end_char_index: Union[Int, UnsetType] = UNSET
    start_page_number: Union[Int, UnsetType] = UNSET
    end_page_number: Union[Int, UnsetType] = UNSET
    start_block_index: Union[Int, UnsetType] = UNSET
    end_block_index: Union[Int, UnsetType] = UNSET
    search_result_index: Union[Int, UnsetType] = UNSET
    source: Union[str, UnsetType] = UNSET
    url: Union[str, UnsetType] = UNSET
    title: Union[str, None, UnsetType] = UNSET
    encrypted_index: Union[str, UnsetType] = UNSET


class TextBlock(Block, tag="text"):
    text: str
    cache_control: Union[CacheControl, UnsetType] = UNSET
    citations: Union[list[Citation], None, UnsetType] = UNSET


class Caller(View):
    """Who called a tool (anthropic 2.14, tool_use_caller.py): the service writes it in every tool_use
    block it answers (tests/captures/anthropic_messages_stream_tool_use.sse), so the SDK's loops send it back."""

    type: str
    tool_id: Union[str, UnsetType] = UNSET


class Base64Source(View, tag_field="type", tag="base64"):
    media_type: str
    data: str


class UrlSource(View, tag_field="type", tag="url"):
    url: str


class ImageBlock(Block, tag="image"):
    source: Union[Base64Source, UrlSource]
    cache_control: Union[CacheControl, UnsetType] = UNSET


class DocumentBlock(Block, tag="document"):
    source: Raw
    title: Union[str, None] = None
    context: Union[str, None] = None
    cache_control: Union[CacheControl, UnsetType] = UNSET


class ToolUseBlock(Block, tag="tool_use"):
    id: str
    name: str
    input: Raw
    cache_control: Union[CacheControl, UnsetType] = UNSET
    caller: Union[Caller, None, UnsetType] = UNSET
    toolset_name: Union[str, None, UnsetType] = UNSET


# A server tool's call, with a tool call's fields, and its result (web search): validate leaves their
# fields to the vendor.
class ServerToolUseBlock(ToolUseBlock, tag="server_tool_use"):
    pass


class WebSearchToolResultBlock(Block, tag="web_search_tool_result"):
    tool_use_id: str
    content: Raw
    cache_control: Union[CacheControl, UnsetType] = UNSET
    caller: Union[Caller, None, UnsetType] = UNSET


# The other server tools' results (anthropic 2.14: web fetch, code execution, bash and text-editor code
# execution, tool search): a web search result's fields under their own tags.
class WebFetchToolResultBlock(WebSearchToolResultBlock, tag="web_fetch_tool_result"):
    pass


class CodeExecutionToolResultBlock(WebSearchToolResultBlock, tag="code_execution_tool_result"):
    pass


class BashCodeExecutionToolResultBlock(WebSearchToolResultBlock, tag="bash_code_execution_tool_result"):
    pass


class TextEditorCodeExecutionToolResultBlock(WebSearchToolResultBlock, tag="text_editor_code_execution_tool_result"):
    pass


class ToolSearchToolResultBlock(WebSearchToolResultBlock, tag="tool_search_tool_result"):
    pass


class ToolReferenceBlock(Block, tag="tool_reference"):
    """A deferred tool that the tool search tool's result loads (anthropic 2.14 ToolReferenceBlockParam)."""

    tool_name: str
    cache_control: Union[CacheControl, UnsetType] = UNSET


class ToolResultBlock(Block, tag="tool_result"):
    tool_use_id: str
    content: Union[str, list[Union[TextBlock, ImageBlock, DocumentBlock, ToolReferenceBlock]], None] = None
    is_error: Union[bool, UnsetType] = UNSET
    cache_control: Union[CacheControl, UnsetType] = UNSET
    toolset_name: Union[str, None, UnsetType] = UNSET  # the toolset of the paired tool_use, as on it


class ThinkingBlock(Block, tag="thinking"):
    thinking: str
    signature: Union[str, None] = None


class RedactedThinkingBlock(Block, tag="redacted_thinking"):
    data: str


AnyBlock = Union[TextBlock, ImageBlock, DocumentBlock, ToolUseBlock, ToolResultBlock, ThinkingBlock,
                 RedactedThinkingBlock, ServerToolUseBlock, WebSearchToolResultBlock, WebFetchToolResultBlock,
                 CodeExecutionToolResultBlock, BashCodeExecutionToolResultBlock, TextEditorCodeExecutionToolResultBlock,
                 ToolSearchToolResultBlock]
# The server tools' results, whose content is a Raw piece (_blocks_sound).
_SERVER_TOOL_RESULTS = frozenset(kind for kind in get_args(AnyBlock) if issubclass(kind, WebSearchToolResultBlock))


class Message(View):
    role: Literal["user", "assistant", "system"]
    content: Union[str, list[AnyBlock]]
    # Claude Code 2.1.330 sends its effort on a system entry inside `messages` too; validate leaves it be.
    output_config: Union[Raw, UnsetType] = UNSET


class ToolChoice(View):
    type: Literal["auto", "any", "tool", "none"]
    name: Union[str, UnsetType] = UNSET
    disable_parallel_tool_use: Union[bool, None, UnsetType] = UNSET


class Metadata(View):
    user_id: Union[str, None] = None


class MessagesRequest(View):
    model: str
    messages: list[Message]
    max_tokens: PositiveInt
    system: Opt[Union[str, list[Union[TextBlock, ImageBlock]]]] = UNSET  # only text blocks pass
    temperature: Opt[float] = UNSET
    top_p: Opt[float] = UNSET
    top_k: Opt[Int] = UNSET
    stop_sequences: Opt[list[str]] = UNSET
    # Checked as a whole by validate's own rules (typed_view.checked_definitions): custom tools and the
    # vendor's, each with fields of its own.
    tools: Union[Raw, UnsetType] = UNSET
    tool_choice: Opt[ToolChoice] = UNSET
    stream: Opt[bool] = UNSET
    metadata: Opt[Metadata] = UNSET
    # Read by the conversion only, not checked by validate: kept as JSON.
    thinking: Union[Raw, UnsetType] = UNSET
    service_tier: Union[Raw, UnsetType] = UNSET
    context_management: Union[Raw, UnsetType] = UNSET
    output_config: Union[Raw, UnsetType] = UNSET  # Claude Code sends its effort here
    # The vendor SDK's other request fields (anthropic 2.12, MessageCreateParams and its beta one), which
    # validate does not read: forwarded as sent.
    cache_control: Union[Raw, UnsetType] = UNSET
    container: Union[Raw, UnsetType] = UNSET
    inference_geo: Union[Raw, UnsetType] = UNSET
    speed: Union[Raw, UnsetType] = UNSET
    mcp_servers: Union[Raw, UnsetType] = UNSET
    compaction: Union[Raw, UnsetType] = UNSET
    thread: Union[Raw, UnsetType] = UNSET
    diagnostics: Union[Raw, UnsetType] = UNSET
    user_profile_id: Union[Raw, UnsetType] = UNSET
    workspace_id: Union[Raw, UnsetType] = UNSET


_decode = decoder(MessagesRequest)
_RAW_FIELDS = raw_fields(MessagesRequest, but=("tools",))  # tools: checked_definitions


def _blocks_sound(blocks: list, role: str, pieces: list[Raw]) -> bool:
    """The rules of messages._check_block a type cannot say; collects the Raw pieces."""
    for block in blocks:
        kind = type(block)
        if kind is ToolUseBlock:
            if role != "assistant" or not is_object(block.input):
                return False
            pieces.append(block.input)
        elif kind is ToolResultBlock:
            if role != "user" or (isinstance(block.content, list) and not _blocks_sound(block.content, role, pieces)):
                return False
        elif kind is DocumentBlock:
            if not is_object(block.source):
                return False
            pieces.append(block.source)
        elif kind is ServerToolUseBlock:
            pieces.append(block.input)
        elif kind in _SERVER_TOOL_RESULTS:
            pieces.append(block.content)
    return True


def read(raw: bytes, mid_conversation_system: bool) -> tuple[ClientBody, str, bool] | None:
    """(body, model, stream) of a request `messages.validate` accepts, or None to let it decide.
    `mid_conversation_system`: the request's betas allow system entries inside `messages`."""
    request = _decode(raw)
    if request is None or not request.model or not request.messages:
        return None
    pieces: list[Raw] = []  # the free-form JSON msgspec only skipped
    last = len(request.messages) - 1
    for i, message in enumerate(request.messages):
        content = message.content
        if message.output_config is not UNSET:
            pieces.append(message.output_config)
        if message.role == "system":
            if not mid_conversation_system or not content or (
                    isinstance(content, list) and any(type(block) is not TextBlock for block in content)):
                return None
        elif not content and not (i == last and message.role == "assistant"):
            return None  # only a final assistant turn (a prefill) may be empty
        elif isinstance(content, list) and not _blocks_sound(content, message.role, pieces):
            return None
    if isinstance(request.system, list) and any(type(block) is not TextBlock for block in request.system):
        return None
    for number in (request.temperature, request.top_p):
        if isinstance(number, float) and not 0 <= number <= 1:
            return None
    if request.tools is not UNSET and not checked_definitions(request.tools, check_tools):
        return None
    if request.tool_choice and request.tool_choice.type == "tool" and request.tool_choice.name is UNSET:
        return None
    pieces += present(request, _RAW_FIELDS)
    if not sound(pieces):
        return None
    # What the model's generation rules read on pass-through (claude.fitted), small objects decoded at once
    read = {name: value(getattr(request, name)) for name in ("thinking", "output_config")
            if getattr(request, name) is not UNSET}
    if request.tool_choice:
        read["tool_choice"] = msgspec.to_builtins(request.tool_choice)  # its unsent fields are UNSET: left out
    return partial_body(request, raw, read), request.model, bool(request.stream)
