"""A fake Anthropic Messages API (https://docs.anthropic.com/en/api/messages).

Speaks the vendor's wire format: `POST /v1/messages` and `GET /v1/models`,
`x-api-key` + `anthropic-version` headers checked like the vendor, error bodies
`{type: "error", error: {type, message}}`, streams as named SSE events
(`message_start`, `ping`, `content_block_*`, `message_delta`, `message_stop`)
with JSON written the way the vendor writes it (with spaces).

Default answers are derived from the request so tests can assert conversions:
- the last user turn holds tool_result blocks -> text "Tool results: <texts>";
- tools are given, tool_choice is not `none`, and the last user text names a
  tool (or tool_choice is `any`/`tool`) -> tool_use blocks with inputs built
  from the tool's input_schema (one call per named tool, unless
  disable_parallel_tool_use);
- image blocks -> text "I see N image(s): <media types or urls>";
- otherwise -> "Echo: <last user text>".
`stop_sequences` and `max_tokens` cut the text like the vendor would.

Scripting: `reply_next(Reply(...))` queues canned answers; `fail_next(...)`
(base class) queues HTTP errors, `error_body(...)` builds the vendor shape;
`cut_stream = True` drops `message_delta` and `message_stop` from streams.

Refusals beyond the field checks, as the vendor's: empty or blank text blocks, tool ids outside
`^[a-zA-Z0-9_-]+$`, tool_use or tool_result blocks in a request without tools, tool_choice without tools,
temperature with top_p on the models that take one of them, an empty or whitespace-only stop sequence.
For the models of MODEL_RULES, also what each generation refuses (`generation_refusal`): thinking types,
sampling settings, forced tool use, effort levels, more max_tokens than the model gives; thinking it is asked for (or does by default) opens
the answer, signed, its text left out where the model's `display` omits it. The models that bind their
thinking to the conversation refuse a block issued for a request with other tools.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

from aiohttp import web

from tests.fakes.tool_rules import claude_tools_refusal
from tests.fakes.upstream_base import FakeUpstream, json_response

API_KEY = "sk-ant-fake-upstream-key"
VERSION = "2023-06-01"
MODELS = ("claude-sonnet-4-5", "claude-haiku-4-5", "claude-opus-4-1")
# The vendor answers an alias with the dated snapshot it resolved to
# (https://docs.anthropic.com/en/docs/about-claude/models/overview: aliases point to snapshots).
SNAPSHOTS = {"claude-sonnet-4-5": "claude-sonnet-4-5-20250929", "claude-haiku-4-5": "claude-haiku-4-5-20251001",
             "claude-opus-4-1": "claude-opus-4-1-20250805"}
# Body fields the vendor only accepts together with their beta in `anthropic-beta`.
BETA_FIELDS = {"context_management": "context-management-", "thread": "message-threads-"}


def error_body(error_type: str, message: str) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {"type": error_type, "message": message},
        "request_id": "req_" + uuid.uuid4().hex[:24],
    }


@dataclass
class Reply:
    """A canned answer for the next /v1/messages call."""

    text: str | None = None
    tool_uses: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (name, input)
    thinking: str | None = None
    stop_reason: str | None = None  # default: tool_use if tool_uses else end_turn
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_input_tokens: int = 0
    delay: float = 0.0  # seconds before the answer starts
    stream_error: tuple[str, str] | None = None  # (type, message): sent after the first block instead of the end


def _frame(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _chunks(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def sample_for(schema: Any) -> Any:
    """A value that satisfies a (simple) JSON schema."""
    if not isinstance(schema, dict):
        return "test"
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        required = schema.get("required") or list(props)
        return {name: sample_for(props.get(name, {})) for name in required}
    return {"integer": 1, "number": 1.5, "boolean": True, "array": [], "null": None}.get(kind, "test")


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return " ".join(b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text")


# Models that take temperature or top_p, not both (the vendor's models overview: from Sonnet 4.5, Haiku
# 4.5 and Opus 4.1 on), and the vendor's message (open-webui/open-webui#17922, BerriAI/litellm#15097).
ONE_SAMPLING_KNOB = re.compile(r"claude-(sonnet-4-[5-9]|haiku-4-[5-9]|opus-4-[1-9]|(sonnet|haiku|opus)-[5-9])")
BOTH_KNOBS = "`temperature` and `top_p` cannot both be specified for this model. Please use only one."
TOOL_BLOCKS_NEED_TOOLS = "Requests which include `tool_use` or `tool_result` blocks must define tools."


@dataclass(frozen=True)
class ModelRules:
    """What one model takes, as the vendor documents it model by model (platform.claude.com, read
    2026-11: build-with-claude/thinking and its troubleshooting table, build-with-claude/effort, and the
    models' what's-new pages). The gateway derives the same from the model's generation (providers/claude.py);
    this table is the vendor's own list."""

    thinking: frozenset[str]  # the `thinking.type` values it takes
    thinks_by_default: bool = False
    fixed_sampling: bool = False  # a temperature other than 1, any top_p or top_k: refused on every request
    forced_tools: bool = True  # tool_choice `any` / `tool`
    efforts: frozenset[str] = frozenset()  # `output_config.effort` levels
    display: str = "summarized"  # the default `thinking.display`
    prefill: bool = True  # a conversation that ends with the assistant
    max_output: int = 128000  # the most max_tokens it takes
    binds_thinking: bool = False  # its thinking blocks are bound to the conversation's prefix


_MANUAL = ModelRules(frozenset({"enabled", "disabled"}), max_output=64000)
_EFFORTS = frozenset({"low", "medium", "high", "xhigh", "max"})
_OPUS_4_7 = ModelRules(frozenset({"adaptive", "disabled"}), fixed_sampling=True, efforts=_EFFORTS, display="omitted",
                       prefill=False)
_ALWAYS_THINKS = ModelRules(frozenset({"adaptive"}), thinks_by_default=True, fixed_sampling=True, forced_tools=False,
                            efforts=_EFFORTS, display="omitted", prefill=False, binds_thinking=True)
MODEL_RULES = {
    "claude-sonnet-4-5": _MANUAL, "claude-haiku-4-5": _MANUAL,
    "claude-opus-4-1": ModelRules(frozenset({"enabled", "disabled"}), max_output=32000),
    "claude-sonnet-4-6": ModelRules(frozenset({"enabled", "adaptive", "disabled"}),
                                    efforts=frozenset({"low", "medium", "high", "max"}), prefill=False),
    "claude-opus-4-7": _OPUS_4_7, "claude-opus-4-8": _OPUS_4_7,
    "claude-opus-5": ModelRules(frozenset({"adaptive", "disabled"}), thinks_by_default=True, fixed_sampling=True,
                                efforts=_EFFORTS, display="omitted", prefill=False),
    "claude-opus-5-5": _ALWAYS_THINKS, "claude-fable-5-1": _ALWAYS_THINKS,
}
_DOCS = ("Please consult our documentation at "
         "https://docs.claude.com/en/docs/build-with-claude/extended-thinking#important-considerations-when-using-extended-thinking")
_ADAPTIVE_ONLY = ('"thinking.type.{}" is not supported for this model. Use "thinking.type.adaptive" and '
                  '"output_config.effort" to control thinking behavior.')


def thinking_on(body: dict[str, Any], rules: ModelRules) -> bool:
    kind = (body.get("thinking") or {}).get("type")
    return kind in ("enabled", "adaptive") or (kind is None and rules.thinks_by_default)


def generation_refusal(body: dict[str, Any], rules: ModelRules) -> str | None:
    """The vendor's refusal of what this model does not take, in its words (the API's error reference;
    observed messages where cited)."""
    if isinstance(body.get("max_tokens"), int) and body["max_tokens"] > rules.max_output:
        # the vendor's words (anthropics/claude-code#24451, OpenHands/OpenHands#11090)
        return (f"max_tokens: {body['max_tokens']} > {rules.max_output}, which is the maximum allowed number of output "
                f"tokens for {SNAPSHOTS.get(body['model'], body['model'])}")
    if not rules.prefill and (body["messages"][-1:] or [{}])[0].get("role") == "assistant":
        # the vendor's words (Coneja-Chibi/TunnelVision#5; Sonnet 4.6 and 5, Opus 4.6 to 4.8 in reports)
        return "This model does not support assistant message prefill. The conversation must end with a user message."
    thinking = body.get("thinking") or {}
    kind = thinking.get("type")
    if kind is not None and kind not in rules.thinking:
        return "adaptive thinking is not supported on this model" if kind == "adaptive" else _ADAPTIVE_ONLY.format(kind)
    if "display" in thinking and kind not in ("enabled", "adaptive"):
        return "thinking.display: `display` is invalid with `thinking.type: \"disabled\"`"
    forced = (body.get("tool_choice") or {}).get("type") in ("any", "tool")
    if forced and not rules.forced_tools:
        return 'tool_choice: type "tool" and "any" are not supported for this model.'
    effort = (body.get("output_config") or {}).get("effort")
    if effort is not None and effort not in rules.efforts:
        # Haiku 4.5's words (observed); a level the model lacks: the field's enum (wording assumed)
        return ("This model does not support the effort parameter" if not rules.efforts else
                f"output_config.effort: Input should be {', '.join(sorted(rules.efforts))}")
    if rules.fixed_sampling:
        # quoted by the vendor's users (pr-agent#2456, inspect_ai#3721); top_p's words assumed alike
        if body.get("temperature", 1) != 1:
            return "`temperature` is deprecated for this model."
        if "top_p" in body:
            return "`top_p` is deprecated for this model."
        if "top_k" in body:
            return "Setting top_k to a non-default value returns a 400 error for this model."
    elif thinking_on(body, rules):
        if body.get("temperature", 1) != 1:
            return f"`temperature` may only be set to 1 when thinking is enabled. {_DOCS}"
        if "top_k" in body:
            return f"`top_k` must be unset when thinking is enabled. {_DOCS}"
        if body.get("top_p", 1) < 0.95:
            return f"`top_p` must be greater than or equal to 0.95 or unset when thinking is enabled. {_DOCS}"
    if kind == "enabled":
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int) or budget < 1024:
            return "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
        if body["max_tokens"] <= budget:
            return ("`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at "
                    "https://docs.claude.com/en/docs/build-with-claude/extended-thinking#max-tokens-and-context-window-size")
        if forced:
            return "Thinking may not be enabled when tool_choice forces tool use."
        return _unsigned_tool_turn(body["messages"])
    if kind == "adaptive" and forced:
        # thinking takes tool_choice auto or none only, adaptive too (the vendor's extended-thinking page;
        # Alcova-AI/adk-anthropic-go#23, llm-exe/llm-exe#720)
        return "Thinking may not be enabled when tool_choice forces tool use."
    return None


def _unsigned_tool_turn(messages: list[Any]) -> str | None:
    """Manual thinking's rule for tool loops (adaptive thinking relaxes it): the last assistant turn, where
    it holds tool calls, opens with thinking (opencode#3077, Kilo-Org/kilocode#5219)."""
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        content = message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text"}]
        first = blocks[0].get("type") if blocks and isinstance(blocks[0], dict) else None
        if any(isinstance(b, dict) and b.get("type") == "tool_use" for b in blocks) and first not in (
                "thinking", "redacted_thinking"):
            return (f"messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{first}`. "
                    "When `thinking` is enabled, a final `assistant` message must start with a thinking block "
                    "(preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you "
                    "include thinking blocks from previous turns. To avoid this requirement, disable `thinking`.")
        return None
    return None
# The vendor's rule for tool ids, with its message (maximhq/bifrost#5097, CommandCodeAI/command-code#323).
_TOOL_ID = re.compile(r"^[a-zA-Z0-9_-]+$")


def _bad_tool_id(messages: list[Any]) -> str | None:
    for i, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        for j, block in enumerate(content if isinstance(content, list) else []):
            kind = block.get("type") if isinstance(block, dict) else None
            field = {"tool_use": "id", "tool_result": "tool_use_id"}.get(kind or "")
            if field and not (isinstance(block.get(field), str) and _TOOL_ID.match(block[field])):
                return f"messages.{i}.content.{j}.{kind}.{field}: String should match pattern '^[a-zA-Z0-9_-]+$'"
    return None


def _holds_tool_blocks(messages: list[Any]) -> bool:
    return any(isinstance(block, dict) and block.get("type") in ("tool_use", "tool_result")
               for message in messages if isinstance(message, dict) and isinstance(message.get("content"), list)
               for block in message["content"])


# What structured outputs' schemas may not hold (platform.claude.com, structured-outputs, "JSON Schema
# limitations"): bounds on numbers, lengths and counts (minItems only 0 or 1).
_UNBOUNDED = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength", "maxLength",
              "maxItems", "minProperties", "maxProperties")


def _output_schema_refusal(body: dict[str, Any]) -> str | None:
    where, fmt = "output_config.format", (body.get("output_config") or {}).get("format")
    if fmt is None and body.get("output_format") is not None:
        where, fmt = "output_format", body["output_format"]
    if not isinstance(fmt, dict) or fmt.get("type") != "json_schema":
        return None

    def refusal(node: Any) -> str | None:
        if not isinstance(node, dict):
            return None
        if node.get("type") == "object" and node.get("additionalProperties") is not False:
            # the vendor's words (ax-llm/ax#458; BerriAI/litellm#35808 for an explicit `true`)
            return f"{where}.schema: For 'object' type, 'additionalProperties' must be explicitly set to false"
        if (bound := next((k for k in _UNBOUNDED if k in node), None)) or node.get("minItems", 0) > 1:
            return f"{where}.schema: '{bound or 'minItems'}' is not supported"  # the rule is documented; words ours
        subschemas = [*(node.get("properties") or {}).values(), *(node.get("$defs") or {}).values(),
                      *(node.get("definitions") or {}).values(), node.get("items"),
                      *(node.get("anyOf") or ()), *(node.get("allOf") or ()), *(node.get("oneOf") or ())]
        return next((r for r in map(refusal, subschemas) if r), None)

    return refusal(fmt.get("schema"))


def _blank_text(messages: list[Any]) -> str | None:
    """The vendor's rule for text blocks, as measured against its API (LibreChat-AI/agents#124): an
    empty one is refused anywhere; a whitespace-only one where its content holds no other text."""
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        contents = [content] if isinstance(content, list) else []
        contents += [block["content"] for block in contents[0] if isinstance(block, dict)
                     and block.get("type") == "tool_result" and isinstance(block.get("content"), list)] if contents else []
        for blocks in contents:
            texts = [b.get("text") for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
            if any(t == "" for t in texts):
                return "messages: text content blocks must be non-empty"
            if texts and not any(isinstance(t, str) and t.strip() for t in texts):
                return "messages: text content blocks must contain non-whitespace text"
    return None


class FakeAnthropic(FakeUpstream):
    def __init__(self, api_key: str = API_KEY, models: tuple[str, ...] = MODELS) -> None:
        super().__init__()
        self.api_key = api_key
        self.models = models
        self._replies: deque[Reply] = deque()
        self.script: Callable[[dict[str, Any]], Reply] | None = None  # decides answers when no reply is queued
        # signature -> the tools of the request it was issued for: Opus 5.5 and Fable 5.1 bind their thinking to
        # the conversation's prefix, tools included ("a changed system, tools or earlier message invalidates
        # the block", platform.claude.com, what's new in Opus 5.5)
        self._bound: dict[str, str] = {}
        # Message threads (beta `message-threads-*`): each reply's id -> the conversation the vendor holds after
        # it (system, tools, messages). As the SDK's types document them (anthropic 2.13, BetaThreadCreateParams,
        # BetaThreadContinueParams, ThreadNotFoundError): a `continue` names the previous reply, sends only the
        # new messages and may not repeat `system` or `tools`; an unknown reply is a 404 `thread_not_found`.
        self.threads: dict[str, dict[str, Any]] = {}
        # model -> (output cap, the refusal of more in the vendor's words): another vendor's model behind its
        # Anthropic-compatible API (DeepSeek's, MiniMax's), refusing as its own API does
        self.vendor_caps: dict[str, tuple[int, str]] = {}

    @property
    def base_url(self) -> str:
        """What an admin enters as the provider base URL (the SDK convention: no /v1)."""
        return self.origin

    def reply_next(self, reply: Reply, times: int = 1) -> None:
        for _ in range(times):
            self._replies.append(reply)

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/messages", self._messages)
        app.router.add_post("/v1/messages/count_tokens", self._count_tokens)
        app.router.add_get("/v1/models", self._list_models)

    # --- vendor checks -------------------------------------------------------------

    def _refuse(self, request: web.Request) -> web.Response | None:
        key = request.headers.get("x-api-key")
        if key is None:
            return json_response(error_body("authentication_error", "x-api-key header is required"), 401)
        if key != self.api_key:
            return json_response(error_body("authentication_error", "invalid x-api-key"), 401)
        version = request.headers.get("anthropic-version")
        if version is None:
            return json_response(error_body("invalid_request_error", "anthropic-version: header is required"), 400)
        # The vendor's SDKs send later dated versions of the same wire protocol (2.x: 2026-10-21).
        if not (re.fullmatch(r"\d{4}-\d{2}-\d{2}", version) and version >= VERSION):
            return json_response(
                error_body("invalid_request_error", f"anthropic-version: invalid version '{version}'"), 400
            )
        return None

    async def _list_models(self, request: web.Request) -> web.Response:
        refused = self._refuse(request)
        if refused:
            return refused
        limit = int(request.query.get("limit", "20"))
        data = [
            {"type": "model", "id": m, "display_name": m.replace("-", " ").title(), "created_at": "2025-09-29T00:00:00Z"}
            for m in self.models[:limit]
        ]
        return json_response(
            {"data": data, "has_more": len(self.models) > limit,
             "first_id": data[0]["id"] if data else None, "last_id": data[-1]["id"] if data else None}
        )

    @staticmethod
    def _beta_refusal(request: web.Request, body: dict[str, Any]) -> web.Response | None:
        """The vendor refuses beta-gated body features whose beta is not in `anthropic-beta`."""
        betas = [b.strip() for b in request.headers.get("anthropic-beta", "").split(",") if b.strip()]
        for name, prefix in BETA_FIELDS.items():
            if name in body and not any(b.startswith(prefix) for b in betas):
                return json_response(error_body("invalid_request_error", f"{name}: Extra inputs are not permitted"), 400)
        for i, message in enumerate(body.get("messages") or []):
            if isinstance(message, dict) and message.get("role") == "system" and not any(
                    re.fullmatch(r"mid-conversation-system-\d{4}-\d{2}-\d{2}", b) for b in betas):
                return json_response(error_body(
                    "invalid_request_error", f"messages.{i}.role: Input should be 'user' or 'assistant'"), 400)
        return None

    async def _request_body(self, request: web.Request) -> Any:
        """The request's JSON body in the vendor API's own form (tests/fakes/vertex_upstream.py: Vertex's)."""
        try:
            return json.loads(await request.read())
        except ValueError:
            return json_response(error_body("invalid_request_error", "There was an issue with your request body"), 400)

    async def _read_body(self, request: web.Request, required: tuple[str, ...]) -> Any:
        refused = self._refuse(request)
        if refused:
            return refused
        body = await self._request_body(request)
        if isinstance(body, web.Response):
            return body
        for name in required:
            if name not in body:
                return json_response(error_body("invalid_request_error", f"{name}: Field required"), 400)
        if body["model"] not in self.models:
            return json_response(error_body("not_found_error", f"model: {body['model']}"), 404)
        if not isinstance(body["messages"], list) or not body["messages"]:
            return json_response(error_body("invalid_request_error", "messages: at least one message is required"), 400)
        if (blank := _blank_text(body["messages"])) is not None:
            return json_response(error_body("invalid_request_error", blank), 400)
        if (bad_id := _bad_tool_id(body["messages"]) or claude_tools_refusal(body)
                or _output_schema_refusal(body)) is not None:
            return json_response(error_body("invalid_request_error", bad_id), 400)
        continues = isinstance(body.get("thread"), dict) and body["thread"].get("type") == "continue"
        if not body.get("tools") and not continues and _holds_tool_blocks(body["messages"]):  # a thread keeps its tools
            # The vendor's rule (BerriAI/litellm's anthropic transformation adds a dummy tool for it).
            return json_response(error_body("invalid_request_error", TOOL_BLOCKS_NEED_TOOLS), 400)
        return self._beta_refusal(request, body) or body

    async def _count_tokens(self, request: web.Request) -> web.Response:
        """POST /v1/messages/count_tokens: `{input_tokens}` for system, messages and tools."""
        body = await self._read_body(request, ("model", "messages"))
        if isinstance(body, web.Response):
            return body
        # The vendor refuses a message request's own fields here ("max_tokens: Extra inputs are not
        # permitted", Wei-Shaw/sub2api#4913).
        for name in ("max_tokens", "temperature", "top_p", "top_k", "stop_sequences", "stream", "metadata"):
            if name in body:
                return json_response(error_body("invalid_request_error", f"{name}: Extra inputs are not permitted"), 400)
        prompt = json.dumps([body.get("system"), body["messages"], body.get("tools")])
        return json_response({"input_tokens": len(prompt) // 4 + 1})

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        body = await self._read_body(request, ("model", "messages", "max_tokens"))
        if isinstance(body, web.Response):
            return body
        if body.get("tool_choice") and not body.get("tools"):
            return json_response(
                error_body("invalid_request_error", "tool_choice may only be specified while providing tools"), 400
            )
        if "temperature" in body and "top_p" in body and ONE_SAMPLING_KNOB.search(body["model"]):
            return json_response(error_body("invalid_request_error", BOTH_KNOBS), 400)
        rules = MODEL_RULES.get(body["model"])
        if rules is not None and (refusal := generation_refusal(body, rules) or self._binding_refusal(body)) is not None:
            return json_response(error_body("invalid_request_error", refusal), 400)
        vendor = self.vendor_caps.get(body["model"])
        if vendor is not None and isinstance(body["max_tokens"], int) and body["max_tokens"] > vendor[0]:
            return json_response(error_body("invalid_request_error", vendor[1].format(cap=vendor[0], model=body["model"])),
                                 400)
        for stop in body.get("stop_sequences") or ():
            # The vendor's words for each (mcp-web-ui#5, BerriAI/litellm#3286).
            if not stop or stop.isspace():
                return json_response(error_body("invalid_request_error", "stop_sequences: each stop sequence must be "
                                                + ("non-empty" if not stop else "contain non-whitespace")), 400)
        thread = body.get("thread")
        if isinstance(thread, dict) and thread.get("type") == "continue":
            held = self.threads.get(thread.get("previous_message_id", ""))
            if held is None:
                error = error_body("not_found_error", "No usable Thread state was found for `previous_message_id`.")
                error["error"]["details"] = {"error_code": "thread_not_found"}
                return json_response(error, 404)
            if "system" in body or "tools" in body:
                return json_response(error_body("invalid_request_error", "thread: `system` and `tools` are kept "
                                                "from the thread's first request; leave them out"), 400)
            body = {**body, **{k: v for k, v in held.items() if v is not None},
                    "messages": held["messages"] + body["messages"]}
        if self._replies:
            reply = self._replies.popleft()
        else:
            reply = self.script(body) if self.script is not None else self._auto_reply(body)
        if reply.delay:
            await asyncio.sleep(reply.delay)
        message, blocks = self._message(body, reply)
        if isinstance(thread, dict):
            self.threads[message["id"]] = {"system": body.get("system"), "tools": body.get("tools"), "messages": [
                *body["messages"], {"role": "assistant", "content": blocks}]}
        if body.get("stream"):
            return await self._stream(request, message, blocks, reply)
        return json_response(message, headers={"request-id": "req_" + uuid.uuid4().hex[:24]})

    def _binding_refusal(self, body: dict[str, Any]) -> str | None:
        tools = json.dumps(body.get("tools"), sort_keys=True)
        for i, message in enumerate(body["messages"]):
            content = message.get("content") if isinstance(message, dict) else None
            for j, block in enumerate(content if isinstance(content, list) else []):
                bound = self._bound.get(block.get("signature", "")) if isinstance(block, dict) else None
                if block.get("type") == "thinking" and bound is not None and bound != tools:
                    return (f"messages.{i}.content.{j}: Invalid `signature` in `thinking` block. The block is bound to a "
                            "different conversation. Remove the block, or set "
                            "`thinking.block_binding.prefix_mismatch_behavior` to \"drop_block\".")
        return None

    # --- answers ------------------------------------------------------------------------

    def _auto_reply(self, body: dict[str, Any]) -> Reply:
        last = body["messages"][-1]
        content = last.get("content")
        blocks = content if isinstance(content, list) else []
        results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
        if last.get("role") == "user" and results:
            return Reply(text="Tool results: " + "; ".join(_text_of(r.get("content")) for r in results))
        tools = {t["name"]: t for t in body.get("tools") or [] if "input_schema" in t}
        choice = body.get("tool_choice") or {"type": "auto"}
        text = _text_of(content)
        if tools and choice.get("type") != "none":
            if choice.get("type") == "tool":
                named = [choice["name"]]
            else:
                named = [name for name in tools if name in text]
                if not named and choice.get("type") == "any":
                    named = [next(iter(tools))]
            if choice.get("disable_parallel_tool_use"):
                named = named[:1]
            if named:
                return Reply(
                    text="Let me use the tools.",
                    tool_uses=[(n, sample_for(tools[n]["input_schema"])) for n in named if n in tools],
                )
        fmt = (body.get("output_config") or {}).get("format") or body.get("output_format") or {}
        if fmt.get("type") == "json_schema":  # structured outputs: the answer is JSON of the schema
            return Reply(text=json.dumps(sample_for(fmt.get("schema") or {})))
        images = [b for b in blocks if isinstance(b, dict) and b.get("type") == "image"]
        if images:
            kinds = [b["source"].get("media_type") or b["source"].get("url") for b in images]
            return Reply(text=f"I see {len(images)} image(s): {', '.join(kinds)}")
        return Reply(text="Echo: " + (text or "(no text)"))

    def _message(self, body: dict[str, Any], reply: Reply) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        text = reply.text
        stop_reason = reply.stop_reason
        stop_sequence = None
        if text is not None and reply.stop_reason is None:
            for seq in body.get("stop_sequences") or []:
                if seq and seq in text:
                    text = text[: text.index(seq)]
                    stop_reason, stop_sequence = "stop_sequence", seq
                    break
            words = text.split(" ")
            if len(words) > body["max_tokens"]:
                text = " ".join(words[: body["max_tokens"]])
                stop_reason = "max_tokens"
        blocks: list[dict[str, Any]] = []
        thinking = reply.thinking
        rules = MODEL_RULES.get(body["model"])
        if thinking is None and rules is not None and thinking_on(body, rules):
            shown = (body.get("thinking") or {}).get("display", rules.display) != "omitted"
            thinking = f"Thinking about: {_text_of(body['messages'][-1].get('content'))}" if shown else ""
        if thinking is not None:
            blocks.append({"type": "thinking", "thinking": thinking, "signature": "sig-" + uuid.uuid4().hex})
            if rules is not None and rules.binds_thinking:
                self._bound[blocks[-1]["signature"]] = json.dumps(body.get("tools"), sort_keys=True)
        if text:
            blocks.append({"type": "text", "text": text})
        if stop_reason not in ("stop_sequence", "max_tokens"):
            for name, args in reply.tool_uses:
                blocks.append({"type": "tool_use", "id": "toolu_" + uuid.uuid4().hex[:24], "name": name, "input": args})
        if stop_reason is None:
            stop_reason = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
        prompt = json.dumps([body.get("system"), body["messages"], body.get("tools")])
        usage = {
            "input_tokens": reply.input_tokens if reply.input_tokens is not None else len(prompt) // 4 + 1,
            "output_tokens": reply.output_tokens if reply.output_tokens is not None
            else len(json.dumps(blocks)) // 4 + 1,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": reply.cache_read_input_tokens,
        }
        message = {
            "id": "msg_" + uuid.uuid4().hex[:24],
            "type": "message",
            "role": "assistant",
            "model": SNAPSHOTS.get(body["model"], body["model"]),
            "content": blocks,
            "stop_reason": stop_reason,
            "stop_sequence": stop_sequence,
            "usage": usage,
        }
        return message, blocks

    async def _stream(
        self, request: web.Request, message: dict[str, Any], blocks: list[dict[str, Any]], reply: Reply
    ) -> web.StreamResponse:
        usage = message["usage"]
        start = dict(message, content=[], stop_reason=None, stop_sequence=None,
                     usage=dict(usage, output_tokens=1))
        frames = [_frame("message_start", {"type": "message_start", "message": start}), _frame("ping", {"type": "ping"})]
        for index, block in enumerate(blocks):
            frames.extend(self._block_frames(index, block))
            if reply.stream_error:
                kind, text = reply.stream_error
                resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
                await resp.prepare(request)
                for frame in frames:
                    await resp.write(frame)
                # After the first bytes reached the client: an error before them is retried instead.
                await asyncio.sleep(0.2)
                await resp.write(_frame("error", {"type": "error", "error": {"type": kind, "message": text}}))
                await resp.write_eof()
                return resp
        delta_usage = {"output_tokens": usage["output_tokens"]}
        frames.append(_frame("message_delta", {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": message["stop_sequence"]},
            "usage": delta_usage,
        }))
        frames.append(_frame("message_stop", {"type": "message_stop"}))
        return await self.write_stream(request, frames, "text/event-stream", final_frames=2)

    @staticmethod
    def _block_frames(index: int, block: dict[str, Any]) -> list[bytes]:
        kind = block["type"]
        if kind == "text":
            empty: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": c} for c in _chunks(block["text"], 8)]
        elif kind == "thinking":
            empty = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": c} for c in _chunks(block["thinking"], 8) if c]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        else:
            empty = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": c} for c in _chunks(json.dumps(block["input"]), 10)]
        frames = [_frame("content_block_start", {"type": "content_block_start", "index": index, "content_block": empty})]
        frames += [_frame("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
                   for d in deltas]
        frames.append(_frame("content_block_stop", {"type": "content_block_stop", "index": index}))
        return frames
