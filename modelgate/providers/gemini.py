"""Google Gemini API wire adapter (generativelanguage.googleapis.com/v1beta).

Requests: POST {base}/models/{model}:generateContent, and
:streamGenerateContent?alt=sse for streams; auth header `x-goog-api-key`.

Mapping notes (also in docs/providers.md):
- Gemini function calls usually carry no id. When the upstream gives one we
  keep it, otherwise a `call_...` id is synthesised. Tool results go back as
  `functionResponse` parts matched by function *name* (looked up from the
  assistant tool call with the same id earlier in the conversation).
- Thought signatures: Gemini signs the first function call (or text) of a turn.
  The signature travels to the client as a signed thinking part with no text
  (messages clients keep and replay such blocks byte for byte) and is put back on
  the same part when the turn is replayed. Calls without one (chat clients
  cannot carry signatures; history from other providers) get the sentinel
  Google documents for history produced elsewhere; Gemini 3 rejects unsigned calls.
- Tool parameters go as the client's JSON schema (`parametersJsonSchema`, mended where
  Gemini refuses it); a json_schema response format is reduced to the typed OpenAPI
  subset of `responseSchema` (`gemini_schema`).
- Thinking parts sent back by a client and the `user` field are dropped. The client's
  thinking request sets thinkingConfig over the provider options (`request_thinking`).
"""

from __future__ import annotations

import functools
import mimetypes
import re
import uuid
from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import quote

import orjson

from modelgate.errors import ErrorType, UpstreamError
from modelgate.protocols import sse
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
    token_count,
)
from modelgate.providers.base import (
    EFFORT_BUDGET,
    OPENING_USER_TEXT,
    Endpoint,
    UpstreamRequest,
    classify_by_status,
    retry_after_seconds,
)
from modelgate.providers.tool_rules import GEMINI_NAME, by_tool_set, object_root, referenced, rewritten, with_items

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com/v1beta"

# https://ai.google.dev/gemini-api/docs/thought-signatures: accepted in place of
# a signature for function calls that Gemini did not produce in this session.
SKIP_SIGNATURE = "skip_thought_signature_validator"
# Marks a thinking part's signature as Gemini's, so that no other provider is sent it.
SIGNATURE_PREFIX = "gemini:"


def signed(signature: str) -> ThinkingPart:
    return ThinkingPart("", SIGNATURE_PREFIX + signature)


def gemini_signature(part: ThinkingPart) -> str | None:
    sig = part.signature or ""
    return sig[len(SIGNATURE_PREFIX):] if sig.startswith(SIGNATURE_PREFIX) else None

# google-genai's FinishReason enum, each mapped deliberately (table in docs/providers.md):
# refusals are content_filter stops, abandoned answers are upstream errors.
_FINISH: dict[str, StopReason | ErrorType] = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
    "IMAGE_PROHIBITED_CONTENT": "content_filter",
    "IMAGE_RECITATION": "content_filter",
    "IMAGE_OTHER": "content_filter",
    "MODEL_ARMOR": "content_filter",
    "LANGUAGE": "content_filter",
    "MALFORMED_FUNCTION_CALL": ErrorType.UPSTREAM_ERROR,
    "UNEXPECTED_TOOL_CALL": ErrorType.UPSTREAM_ERROR,
    "TOO_MANY_TOOL_CALLS": ErrorType.UPSTREAM_ERROR,
    "MISSING_THOUGHT_SIGNATURE": ErrorType.UPSTREAM_ERROR,
    "MALFORMED_RESPONSE": ErrorType.UPSTREAM_ERROR,
    "NO_IMAGE": ErrorType.UPSTREAM_ERROR,
    "OTHER": ErrorType.UPSTREAM_ERROR,
    "FINISH_REASON_UNSPECIFIED": ErrorType.UPSTREAM_ERROR,
    "ESCALATION": "content_filter",  # filtered by an escalation rule
    # The account is limited or disabled for Prohibited Use Policy violations: this key cannot
    # serve (fail over), as with an account condition in an error status.
    "PUP_LIMITED_DISABLED": ErrorType.AUTHENTICATION_ERROR,
    # The per-request token limit stopped an unfinished answer (Gemini could continue it with a
    # continuation token no client protocol carries): a length stop.
    "CONTINUATION": "length",
}


# --- JSON schema -> Gemini Schema ----------------------------------------

# The Schema fields Gemini takes, with the types each is allowed on (None: every type). Gemini refuses one on
# another type ("...properties[data].properties: only allowed for OBJECT type", anomalyco/opencode#11888;
# "...items: field predicate failed: $type == Type.ARRAY", NousResearch/hermes-agent#38972). The order
# matters: a node that states no type gets the one its first typed field implies.
_OBJECT, _ARRAY, _STRING, _NUMBERS = ("OBJECT",), ("ARRAY",), ("STRING",), ("NUMBER", "INTEGER")
_SCHEMA_KEEP: dict[str, tuple[str, ...] | None] = {
    "properties": _OBJECT, "required": _OBJECT, "minProperties": _OBJECT, "maxProperties": _OBJECT,
    "propertyOrdering": _OBJECT, "items": _ARRAY, "minItems": _ARRAY, "maxItems": _ARRAY,
    "minLength": _STRING, "maxLength": _STRING, "pattern": _STRING, "minimum": _NUMBERS, "maximum": _NUMBERS,
    "description": None, "nullable": None, "title": None, "default": None, "example": None,
}
_TYPES = {"string": "STRING", "number": "NUMBER", "integer": "INTEGER", "boolean": "BOOLEAN", "array": "ARRAY",
          "object": "OBJECT"}
_FORMATS = {"STRING": {"enum", "date-time"}, "INTEGER": {"int32", "int64"}, "NUMBER": {"float", "double"}}
# What a union keeps beside its branches is written into each branch: on Gemini 3 "When using any_of, it
# must be the only field set" (reported on Vertex, patlux/pi-commandcode-provider#103).
_UNION_NOTES = ("description", "title", "default", "example")


def _value_type(values: list[Any]) -> str:
    """The type of an enum's values: Gemini takes enums of strings only, the others say their type."""
    kinds = {"BOOLEAN" if isinstance(v, bool) else "INTEGER" if isinstance(v, int) else "NUMBER"
             if isinstance(v, float) else "STRING" if isinstance(v, str) else "" for v in values}
    if kinds == {"INTEGER", "NUMBER"}:
        return "NUMBER"
    return kinds.pop() if len(kinds) == 1 and "" not in kinds else "STRING"


def _gemini_union(schema: dict[str, Any], union: list[Any], nullable: bool, root: Any,
                  depth: int) -> dict[str, Any]:
    # An optional type written as anyOf [T, null] is nullable T.
    branches = [s for s in union if not (isinstance(s, dict) and s.get("type") == "null")]
    nullable = nullable or len(branches) < len(union)
    rest = {k: v for k, v in schema.items() if k not in ("anyOf", "oneOf")}
    if len(branches) > 1 or (branches and not isinstance(branches[0], dict)):
        notes = {k: schema[k] for k in _UNION_NOTES if k in schema}
        nulls = {"nullable": True} if nullable else {}
        return {"anyOf": [{**notes, **gemini_schema(branch, root, depth), **nulls} for branch in branches]}
    out = gemini_schema({**rest, **branches[0]} if branches else rest, root, depth)
    if nullable:
        out["nullable"] = True
    return out


def gemini_schema(schema: Any, root: Any = None, depth: int = 0) -> dict[str, Any]:
    """Reduce a JSON schema to Gemini's OpenAPI-3.0 subset.

    Local `$ref`s (into `$defs`, or any JSON pointer from `root`, the whole schema) are
    inlined (bounded depth, since this subset has no references); `const` becomes a one-value enum; a type list
    with "null" becomes `nullable`; keys Gemini rejects (additionalProperties,
    $schema, $id, allOf, not, unsupported formats, non-string enums, fields of
    another type) are dropped; `oneOf` is read as `anyOf`.

    Every node gets a type, as Gemini demands ("...properties[commit_hash].type: must be specified
    when not using one_of, any_of or all_of fields", danny-avila/LibreChat#6971; Vertex: "...schema
    didn't specify the schema type field", google-gemini/gemini-cli#2282): the one its fields or enum
    values imply, else STRING, which carries any value as text (zod's `z.any()` sends `{}`).
    """
    if not isinstance(schema, dict):
        return {"type": "STRING"}
    if root is None:
        root = schema
    ref = schema.get("$ref")
    if isinstance(ref, str) and depth < 8:
        target = referenced(root, ref)
        merged = {**(target if isinstance(target, dict) else {}), **{k: v for k, v in schema.items() if k != "$ref"}}
        return gemini_schema(merged, root, depth + 1)
    stated = schema.get("type")
    if type(stated) is str:  # nearly every node: one type
        typ, nullable = _TYPES.get(stated), stated == "null"
    else:
        kinds = stated if isinstance(stated, list) else ()
        typ = next((_TYPES[k] for k in kinds if isinstance(k, str) and k in _TYPES), None)
        nullable = "null" in kinds
    nullable = nullable or schema.get("nullable") is True
    union = schema.get("anyOf", schema.get("oneOf")) if typ is None else None
    if isinstance(union, list):
        return _gemini_union(schema, union, nullable, root, depth)
    values = (schema.get("enum", [schema["const"]] if "const" in schema else None)
              if "enum" in schema or "const" in schema else None)
    if isinstance(values, list) and None in values:  # an optional enum (pydantic's Optional[Literal[...]])
        values, nullable = [v for v in values if v is not None], True
    if not isinstance(values, list) or not values:
        values = None
    if typ is None:
        implied = (_value_type(values) if values else
                   next((types[0] for key, types in _SCHEMA_KEEP.items() if types and key in schema), None))
        typ = implied or "STRING"
    out: dict[str, Any] = {"type": typ}
    if nullable:
        out["nullable"] = True
    for key, value in schema.items():
        types = _SCHEMA_KEEP.get(key, ())
        if types is not None and typ not in types:
            continue
        if key == "properties":
            if isinstance(value, dict):
                out[key] = {name: gemini_schema(sub, root, depth) for name, sub in value.items()}
        elif key == "items":
            out[key] = gemini_schema(value, root, depth)
        elif key != "nullable":
            out[key] = value
    if typ == "ARRAY" and "items" not in out:
        # Gemini wants an array's item type: "…parameters.properties[includeTags].items: missing field."
        # (cline/cline#7339). A client's untyped array gets strings, which can carry any value as text.
        out["items"] = {"type": "STRING"}
    if values and all(isinstance(v, str) for v in values) and typ == "STRING":
        if "" in values:  # "enum[0]: cannot be empty" (Gemini 3; Kxiandaoyan/Memoh-v2#22)
            values = [v for v in values if v] or None
        if values:
            out["enum"] = values
            out["format"] = "enum"
    elif isinstance(schema.get("format"), str) and schema["format"] in _FORMATS.get(typ, ()):
        out["format"] = schema["format"]
    if "required" in out:
        props = out.get("properties", {})
        out["required"] = [name for name in out["required"] if name in props] if isinstance(out["required"], list) else []
        if not out["required"]:
            del out["required"]
    return out


@by_tool_set
def _declared_parameters(schemas: list[Any]) -> list[dict[str, Any]]:
    """Each tool's parameters as `parametersJsonSchema`: the client's JSON schema itself, which Gemini
    and Vertex take (both since June 2025; Google's gemini-cli sends every tool so), with nothing lost
    on the way (a value of any type, numeric enums, maps). Only what its checks refuse is mended."""
    return [_json_parameters(object_root(schema)) for schema in schemas]


def _json_parameters(root: dict[str, Any]) -> dict[str, Any]:
    def mend(node: dict[str, Any]) -> dict[str, Any]:
        properties = node.get("properties")
        if "properties" in node and not isinstance(properties, dict):
            # "value for properties at top-level must be an object"
            node = {k: v for k, v in node.items() if k != "properties"}
        elif properties and not all(isinstance(sub, (dict, bool)) for sub in properties.values()):
            # A property's value must be a schema (JSON Schema 2020-12, 10.3.2.1), not e.g. "object".
            node = {**node, "properties": {k: v if isinstance(v, (dict, bool)) else {} for k, v in properties.items()}}
        if isinstance(node.get("enum"), list) and "" in node["enum"]:
            # Gemini 3 refuses it in `parameters` ("enum[0]: cannot be empty"); the JSON schema's check is
            # not documented, so it is not risked there either.
            node = {**node, "enum": [v for v in node["enum"] if v != ""]}
            if not node["enum"]:
                del node["enum"]
        if "$ref" not in node:
            # An array with no `items` takes any value, as `items: {}` says: Gemini's `parameters` refuses the
            # first ("…items: missing field.", cline/cline#7339), so the JSON schema gets the second.
            return with_items(node)
        if not isinstance(referenced(root, node["$ref"]), (dict, bool)):
            # "reference to undefined schema at properties.language" (agent-infra/sandbox#83)
            return {k: v for k, v in node.items() if k != "$ref"}
        # "schema at properties.draft can only contain properties starting with '$' when $ref is present"
        # (google-gemini/gemini-cli#4758): the reference goes into a union of one, its neighbours stay.
        own = {k: v for k, v in node.items() if not k.startswith("$")}
        if not own:
            return node
        reference = {k: v for k, v in node.items() if k.startswith("$")}
        return {**own, "anyOf": [reference]} if "anyOf" not in own else reference

    return rewritten(root, mend)


# --- request -------------------------------------------------------------

# `gemini-2.5-pro`, `gemini-3.1-pro-preview`, `gemini-3.5-flash-lite`, `models/gemini-2.5-flash-001`
_GENERATION = re.compile(r"gemini-(\d+)(?:\.(\d+))?-([a-z]+(?:-lite)?)")
# Thinking budgets each 2.5 model takes (Google's thinking guide; "The thinking budget 128 is invalid. Please
# choose a value between 512 and 24576.", earendil-works/pi#2838): (least when on, most, whether 0 turns it off).
_BUDGETS = {"pro": (128, 32768, False), "flash": (1, 24576, True), "flash-lite": (512, 24576, True)}
# Levels by effort: Gemini 3 takes low, medium and high on every model (minimal only on some Flash models).
_LEVEL = {"none": "low", "minimal": "low", "low": "low", "medium": "medium", "high": "high", "xhigh": "high", "max": "high"}
# "…maxOutputTokens value of 65536 but the supported range is from 1 (inclusive) to 65536 (exclusive)"
# (BerriAI/litellm#10548); Claude clients ask for up to 128,000.
MAX_OUTPUT_TOKENS = 65535
MAX_STOP_SEQUENCES = 5  # "the supported range is from 1 (inclusive) to 6 (exclusive)" (continuedev/continue#7849)


@dataclass(frozen=True, slots=True)
class GeminiModel:
    """A Gemini model's generation, read from its id: what the request rules hang on."""

    version: tuple[int, int]
    tier: str  # pro, flash, flash-lite

    @property
    def levels(self) -> bool:
        """Thinking set by `thinkingLevel` (Gemini 3), not by a budget (2.5)."""
        return self.version >= (3, 0)


@functools.lru_cache(maxsize=1024)
def gemini_model(model: str) -> GeminiModel | None:
    m = _GENERATION.search(model)
    return GeminiModel((int(m[1]), int(m[2] or 0)), m[3]) if m else None


def _image_part(img: ImagePart) -> dict[str, Any]:
    inline = img.inline()
    if inline is not None:
        return {"inlineData": {"mimeType": inline[0], "data": inline[1]}}
    url = img.url or ""
    mime = img.media_type or mimetypes.guess_type(url.split("?", 1)[0])[0] or "image/jpeg"
    return {"fileData": {"mimeType": mime, "fileUri": url}}


def _parse_args(text: str) -> dict[str, Any]:
    try:
        value = orjson.loads(text or "{}")
    except orjson.JSONDecodeError:
        # Gemini's args is a Struct; unparseable model output cannot be replayed as one.
        return {}
    return value if isinstance(value, dict) else {}


def _contents(messages: list[Message], close_answer: bool = False) -> list[dict[str, Any]]:
    """`close_answer`: a conversation that ends with an answer of the model gets a user turn after it
    (Gemini from 3 refuses one: "Requests ending with a model turn are not supported.")."""
    names: dict[str, str] = {}  # tool call id -> function name, for functionResponse
    contents: list[dict[str, Any]] = []
    for msg in messages:
        parts: list[dict[str, Any]] = []
        signature: str | None = None  # Gemini's signature waiting for the part it was given on
        for part in msg.parts:
            if isinstance(part, ThinkingPart):
                signature = gemini_signature(part) if msg.role == "assistant" else None
            elif isinstance(part, TextPart):
                if part.text:
                    parts.append({"text": part.text})
                    if signature:
                        parts[-1]["thoughtSignature"] = signature
                        signature = None
            elif isinstance(part, ImagePart):
                parts.append(_image_part(part))
            elif isinstance(part, ToolCall):
                names[part.id] = part.name
                parts.append(
                    {"functionCall": {"name": part.name, "args": _parse_args(part.arguments)},
                     "thoughtSignature": signature or SKIP_SIGNATURE}
                )
                signature = None
            elif isinstance(part, ToolResult):
                text = "".join(p.text for p in part.content if isinstance(p, TextPart))
                key = "error" if part.is_error else "output"
                parts.append(
                    {"functionResponse": {"name": names.get(part.tool_call_id, part.tool_call_id),
                                          "response": {key: text}}}
                )
                # Images returned by a tool ride along as inline parts of the same turn.
                parts.extend(_image_part(p) for p in part.content if isinstance(p, ImagePart))
            # The text of thinking parts: Gemini takes no reasoning text back; dropped.
        if not parts:
            continue
        role = "model" if msg.role == "assistant" else "user"
        if contents and contents[-1]["role"] == role:
            contents[-1]["parts"].extend(parts)  # Gemini wants turns to alternate
        else:
            contents.append({"role": role, "parts": parts})
    if not contents or contents[0]["role"] != "user":
        # Gemini refuses empty contents ("contents is not specified"); Google's SDKs want a user turn first.
        contents.insert(0, {"role": "user", "parts": [{"text": OPENING_USER_TEXT}]})
    if close_answer and contents[-1]["role"] == "model" and not any("functionCall" in p for p in contents[-1]["parts"]):
        contents.append({"role": "user", "parts": [{"text": OPENING_USER_TEXT}]})
    return contents


def thinking_config(options: Mapping[str, Any]) -> dict[str, Any]:
    """generationConfig.thinkingConfig from the provider record's options: `thinking_budget`
    (tokens; 0 turns thinking off on models that allow it, -1 lets the model decide),
    `thinking_level` (Gemini 3: low, medium, high; minimal on some Flash models), `include_thoughts` (thought summaries come back as thinking)."""
    config: dict[str, Any] = {}
    if isinstance(options.get("thinking_budget"), int) and not isinstance(options["thinking_budget"], bool):
        config["thinkingBudget"] = options["thinking_budget"]
    if isinstance(options.get("thinking_level"), str):
        config["thinkingLevel"] = options["thinking_level"]
    if isinstance(options.get("include_thoughts"), bool):
        config["includeThoughts"] = options["include_thoughts"]
    return config


def request_thinking(req: ChatRequest, config: dict[str, Any], model: GeminiModel | None = None) -> dict[str, Any]:
    """`config` (from the provider options) with what the client's request asks for laid over it, in the
    form the model's generation takes (`model`; None: unknown, a budget):
    - 2.5: a messages budget (-1 dynamic, 0 off), else an effort by Google's table, within the model's
      range ("Budget 0 is invalid. This model only works in thinking mode." on Pro: its least instead);
    - Gemini 3: a level (low, medium, high); thinking cannot be turned off on every model, so off is
      `low`; a dynamic budget leaves the model's default.
    Gemini refuses a budget beside a level ("You can only set only one of thinking budget and thinking
    level."), and 2.5 any level. Thought summaries are asked for when the client wants reasoning, unless
    the options say otherwise."""
    if model is not None and model.version < (2, 5):
        return config  # no thinking before 2.5
    budget = req.thinking_budget
    effort = req.reasoning_effort or req.thinking_effort
    wants = req.thinking_wanted()
    if model is not None and model.levels:
        if budget != -1 and (budget is not None or effort is not None):
            level = "low" if budget == 0 else _LEVEL.get(effort or "medium")
            if level is not None:
                config = {**config, "thinkingLevel": level}
        if "thinkingLevel" in config:
            config = {k: v for k, v in config.items() if k != "thinkingBudget"}
    else:
        if budget is None and effort:
            budget = EFFORT_BUDGET.get(effort)
        if budget is not None or model is not None:
            config = {k: v for k, v in config.items() if k != "thinkingLevel"}
        if budget is not None:
            config = {**config, "thinkingBudget": budget}
        if model is not None and model.tier in _BUDGETS and config.get("thinkingBudget", -1) != -1:
            least, most, can_turn_off = _BUDGETS[model.tier]
            given = config["thinkingBudget"]
            config["thinkingBudget"] = 0 if given == 0 and can_turn_off else min(max(given, least), most)
    if wants:
        config.setdefault("includeThoughts", True)
    return config


def build_body(req: ChatRequest, options: Mapping[str, Any] | None = None, model: str = "") -> dict[str, Any]:
    """`model`: the upstream model id, whose generation decides what the request may hold (`gemini_model`)."""
    generation = gemini_model(model)
    recent = generation is not None and generation.version >= (2, 5)
    body: dict[str, Any] = {"contents": _contents(req.messages, generation is not None and generation.levels)}
    # Gemini refuses an empty text part ("Unable to submit request because it has an empty text parameter").
    if system := [{"text": s} for s in req.system if s]:
        body["systemInstruction"] = {"parts": system}
    gen: dict[str, Any] = {}
    for key, value in (
        ("maxOutputTokens", min(req.max_tokens, MAX_OUTPUT_TOKENS) if req.max_tokens else req.max_tokens),
        ("temperature", req.temperature),
        ("topP", req.top_p),
        ("topK", req.top_k),
        ("seed", req.seed),
        # "Penalty is not enabled for models/gemini-2.5-flash" (BerriAI/litellm#32273); an error from 3.6 on
        ("presencePenalty", None if recent else req.presence_penalty),
        ("frequencyPenalty", None if recent else req.frequency_penalty),
    ):
        if value is not None:
            gen[key] = value
    if req.stop:
        gen["stopSequences"] = req.stop[:MAX_STOP_SEQUENCES]
    fmt = req.response_format or {}
    if fmt.get("type") == "json_object":
        gen["responseMimeType"] = "application/json"
    elif fmt.get("type") == "json_schema":
        gen["responseMimeType"] = "application/json"
        schema = (fmt.get("json_schema") or {}).get("schema")
        if schema:
            gen["responseSchema"] = gemini_schema(schema)
    thinking = request_thinking(req, thinking_config(options or {}), generation)
    if thinking:
        gen["thinkingConfig"] = thinking
    if gen:
        body["generationConfig"] = gen
    if req.tools:
        decls = []
        for tool, params in zip(req.tools, _declared_parameters([tool.parameters for tool in req.tools])):
            decl: dict[str, Any] = {"name": tool.name}
            if tool.description:
                decl["description"] = tool.description
            # A no-argument function has no parameters (older models refuse an object without properties).
            if params.get("properties"):
                decl["parametersJsonSchema"] = params
            decls.append(decl)
        body["tools"] = [{"functionDeclarations": decls}]
    if req.tool_choice and req.tools:
        mode = {"auto": "AUTO", "none": "NONE", "required": "ANY", "tool": "ANY"}[req.tool_choice.mode]
        config: dict[str, Any] = {"mode": mode}
        if req.tool_choice.mode == "tool" and req.tool_choice.name:
            config["allowedFunctionNames"] = [req.tool_choice.name]
        body["toolConfig"] = {"functionCallingConfig": config}
    return body


# --- response ------------------------------------------------------------


def _usage(meta: Mapping[str, Any] | None) -> Usage:
    meta = meta or {}
    # Thinking tokens are billed as output; promptTokenCount already includes cached tokens.
    return Usage(
        input_tokens=token_count(meta.get("promptTokenCount")) + token_count(meta.get("toolUsePromptTokenCount")),
        output_tokens=token_count(meta.get("candidatesTokenCount")) + token_count(meta.get("thoughtsTokenCount")),
        cache_read_tokens=token_count(meta.get("cachedContentTokenCount")),
    )


def _new_call_id() -> str:
    return "call_" + uuid.uuid4().hex[:24]


def _stop_reason(finish: str | None, has_tool_calls: bool, blocked: bool) -> StopReason | None:
    """The stop reason of a finishReason; raises the UpstreamError of an abandoned answer."""
    if blocked:
        return "content_filter"
    if finish is None:
        return None
    if finish == "STOP" and has_tool_calls:
        return "tool_calls"
    mapped = _FINISH.get(finish, "stop")
    if isinstance(mapped, ErrorType):
        raise UpstreamError(mapped, f"Gemini abandoned the answer (finishReason {finish})")
    return mapped


class GeminiAdapter:
    wire = "gemini"
    tool_names = GEMINI_NAME
    answer_fields: tuple[str, ...] = ("candidates", "promptFeedback")

    def _url(self, endpoint: Endpoint, upstream_model: str, method: str) -> str:
        base = (endpoint.base_url or DEFAULT_BASE_URL).rstrip("/")
        model = upstream_model.removeprefix("models/")
        return f"{base}/models/{quote(model, safe='-._')}:{method}"

    def _headers(self, endpoint: Endpoint) -> dict[str, str]:
        return {"content-type": "application/json", "x-goog-api-key": endpoint.api_key}

    def build_request(self, req: ChatRequest, upstream_model: str, endpoint: Endpoint) -> UpstreamRequest:
        method = "streamGenerateContent?alt=sse" if req.stream else "generateContent"
        headers = self._headers(endpoint)
        if req.stream:
            headers["accept"] = "text/event-stream"
        return UpstreamRequest("POST", self._url(endpoint, upstream_model, method), headers,
                               orjson.dumps(build_body(req, endpoint.options, upstream_model)))

    def count_request(self, req: ChatRequest, upstream_model: str, endpoint: Endpoint) -> UpstreamRequest:
        """`models/{model}:countTokens` over the whole request (system and tools included)."""
        model = "models/" + upstream_model.removeprefix("models/")
        body = {"generateContentRequest": {"model": model, **build_body(req, model=upstream_model)}}
        return UpstreamRequest("POST", self._url(endpoint, upstream_model, "countTokens"), self._headers(endpoint),
                               orjson.dumps(body))

    def parse_count(self, body: bytes) -> int:
        return orjson.loads(body)["totalTokens"]

    def parse_response(self, body: bytes) -> ChatResponse:
        data = orjson.loads(body)
        candidate = (data.get("candidates") or [{}])[0]
        parts: list[TextPart | ThinkingPart | ToolCall] = []
        for part in (candidate.get("content") or {}).get("parts") or []:
            if part.get("thoughtSignature") and not part.get("thought"):
                parts.append(signed(part["thoughtSignature"]))
            if "functionCall" in part:
                call = part["functionCall"]
                parts.append(ToolCall(call.get("id") or _new_call_id(), call.get("name", ""),
                                      orjson.dumps(call.get("args") or {}).decode()))
            elif "text" in part:
                parts.append(ThinkingPart(part["text"]) if part.get("thought") else TextPart(part["text"]))
        blocked = not data.get("candidates") and bool((data.get("promptFeedback") or {}).get("blockReason"))
        stop = _stop_reason(candidate.get("finishReason"), any(isinstance(p, ToolCall) for p in parts), blocked)
        return ChatResponse(
            id=data.get("responseId") or "gen-" + uuid.uuid4().hex,
            model=data.get("modelVersion", ""),
            parts=parts,
            stop_reason=stop,
            usage=_usage(data.get("usageMetadata")),
        )

    def stream_decoder(self) -> "GeminiStreamDecoder":
        return GeminiStreamDecoder()

    def classify_error(self, status: int, body: bytes, headers: Mapping[str, str]) -> UpstreamError:
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError:
            data = None
        if isinstance(data, list) and data:  # streamGenerateContent without alt=sse wraps in a list
            data = data[0]
        err = data.get("error") if isinstance(data, dict) else None
        if not isinstance(err, dict):
            text = body.decode("utf-8", "replace")[:500] or f"HTTP {status}"
            return classify_by_status(status, text, headers)
        return classify_gemini_error(status, err, headers)

    def models_request(self, endpoint: Endpoint) -> UpstreamRequest:
        base = (endpoint.base_url or DEFAULT_BASE_URL).rstrip("/")
        return UpstreamRequest("GET", f"{base}/models?pageSize=1000", self._headers(endpoint))

    def parse_models(self, body: bytes) -> list[str]:
        models = orjson.loads(body).get("models") or []
        return [
            m["name"].removeprefix("models/")
            for m in models
            if "generateContent" in (m.get("supportedGenerationMethods") or ["generateContent"])
        ]


def classify_gemini_error(status: int, err: Mapping[str, Any], headers: Mapping[str, str]) -> UpstreamError:
    """Map a google.rpc error ({code, message, status, details}) to a spec 7.5 type.

    RESOURCE_EXHAUSTED is both the per-minute limit and the daily/billing
    quota, always with "You exceeded your current quota" in the message; the
    QuotaFailure detail tells them apart: a per-day quota id (or a limit of 0,
    i.e. no quota on this plan at all) will not recover by retrying, so it is
    QUOTA_EXCEEDED (fail over); anything else is a RATE_LIMIT_ERROR.
    """
    message = str(err.get("message") or f"HTTP {status}")
    code = err.get("status", "")
    details = err.get("details") or []
    reasons = {d.get("reason") for d in details if isinstance(d, dict)}
    retry_after = retry_after_seconds(headers)
    for d in details:
        delay = d.get("retryDelay") if isinstance(d, dict) else None
        if isinstance(delay, str) and delay.endswith("s"):
            try:
                retry_after = float(delay[:-1])
            except ValueError:
                pass
    if code == "RESOURCE_EXHAUSTED" or status == 429:
        violations = [v for d in details if isinstance(d, dict) for v in d.get("violations") or []]
        daily = any("PerDay" in str(v.get("quotaId", "")) or str(v.get("quotaValue")) == "0" for v in violations)
        kind = ErrorType.QUOTA_EXCEEDED if daily else ErrorType.RATE_LIMIT_ERROR
    elif "API_KEY_INVALID" in reasons or code in ("UNAUTHENTICATED", "PERMISSION_DENIED"):
        kind = ErrorType.AUTHENTICATION_ERROR
    elif code == "NOT_FOUND":
        kind = ErrorType.MODEL_NOT_FOUND if "model" in message.lower() else ErrorType.UPSTREAM_ERROR
    elif code == "FAILED_PRECONDITION":
        # e.g. "User location is not supported", free tier unavailable: this key cannot serve, fail over.
        kind = ErrorType.AUTHENTICATION_ERROR
    elif code == "INVALID_ARGUMENT" or code == "OUT_OF_RANGE":
        kind = ErrorType.INVALID_REQUEST
    elif code == "UNAVAILABLE":
        kind = ErrorType.SERVICE_UNAVAILABLE
    elif code == "DEADLINE_EXCEEDED":
        kind = ErrorType.TIMEOUT_ERROR
    elif code in ("INTERNAL", "UNKNOWN", "ABORTED"):
        kind = ErrorType.UPSTREAM_ERROR
    else:
        return classify_by_status(status, message, headers)
    return UpstreamError(kind, message, status, retry_after)


class GeminiStreamDecoder:
    """Decodes `streamGenerateContent?alt=sse`: each event is a whole GenerateContentResponse.

    Gemini sends no terminal event: the chunk with `finishReason` (and the
    final usageMetadata) is followed by EOF, so StreamEnd is emitted at close()
    when a finishReason was seen and StreamError otherwise.
    """

    def __init__(self) -> None:
        self._sse = sse.SSEParser()
        self._started = False
        self._done = False  # StreamEnd/StreamError emitted
        self._finish: str | None = None
        self._blocked = False
        self._usage: Usage | None = None
        self._tool_calls = 0

    def feed(self, chunk: bytes) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        for event in self._sse.feed(chunk):
            self._on_data(event.data, out)
        return out

    def close(self) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        # A last event without its blank line still counts if it is whole JSON.
        last = sse.parse_event(self._sse.pending) if self._sse.pending.strip() else None
        if last is not None:
            self._on_data(last.data, out)
        if self._done:
            return out
        self._done = True
        if self._finish is None and not self._blocked:
            out.append(StreamError(ErrorType.NETWORK_ERROR.value, "Gemini stream ended before a finishReason"))
            return out
        if not self._started:
            out.append(StreamStart("gen-" + uuid.uuid4().hex, ""))
        try:
            stop = _stop_reason(self._finish, self._tool_calls > 0, self._blocked)
        except UpstreamError as exc:
            out.append(StreamError(exc.error_type.value, exc.message))
            return out
        out.append(StreamEnd(stop, usage=self._usage))
        return out

    def _on_data(self, data: str, out: list[StreamEvent]) -> None:
        if self._done or not data.strip():
            return
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            self._done = True
            out.append(StreamError(ErrorType.UPSTREAM_ERROR.value, "Gemini sent an unreadable stream event"))
            return
        if isinstance(obj.get("error"), dict):
            err = classify_gemini_error(int(obj["error"].get("code") or 500), obj["error"], {})
            self._done = True
            out.append(StreamError(err.error_type.value, err.message))
            return
        if obj.get("usageMetadata"):
            self._usage = _usage(obj["usageMetadata"])
        if not self._started:
            self._started = True
            start_usage = Usage(input_tokens=self._usage.input_tokens) if self._usage else None
            out.append(StreamStart(obj.get("responseId") or "gen-" + uuid.uuid4().hex,
                                   obj.get("modelVersion", ""), start_usage))
        candidates = obj.get("candidates") or []
        if not candidates and (obj.get("promptFeedback") or {}).get("blockReason"):
            self._blocked = True
        if not candidates:
            return
        candidate = candidates[0]
        for part in (candidate.get("content") or {}).get("parts") or []:
            if part.get("thoughtSignature") and not part.get("thought"):
                out.append(ThinkingDelta("", SIGNATURE_PREFIX + part["thoughtSignature"]))
            if "functionCall" in part:
                call = part["functionCall"]
                index = self._tool_calls
                self._tool_calls += 1
                out.append(ToolCallStart(index, call.get("id") or _new_call_id(), call.get("name", "")))
                out.append(ToolCallDelta(index, orjson.dumps(call.get("args") or {}).decode()))
            elif part.get("text"):
                out.append(ThinkingDelta(part["text"]) if part.get("thought") else TextDelta(part["text"]))
        if candidate.get("finishReason"):
            self._finish = candidate["finishReason"]
