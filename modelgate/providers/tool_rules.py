"""Tools as the vendors take them: their names and parameter schemas.

A client's tools are written for its own vendor, often by an MCP server. Another vendor refuses some of
them outright, and one refused tool fails the whole request.

Names: Claude takes 128 characters (`^[a-zA-Z0-9_-]{1,128}$`, modelcontextprotocol/modelcontextprotocol#1345)
and Claude Code names MCP tools `mcp__<server>__<tool>` in full; OpenAI, Bedrock's Converse (its service
model's ToolName), Mistral, DeepSeek and Qwen take 64 ("Invalid 'tools[0].function.name': string too long.
Expected a string with maximum length 64", ravitemer/mcphub.nvim#243), Gemini 64 that start with a letter
or `_` (google-gemini/gemini-cli#6704). A name beyond a vendor's rule is sent under a stand-in, the same
for the same name on every turn, and the answer's calls get their own name back (`fit_tool_names`).

Schemas:
- every function-calling API wants an object at the root: OpenAI "schema must be a JSON Schema of 'type:
  "object"', got 'type: "None"'." (ComposioHQ/composio#1829), Claude "tools.0.custom.input_schema.type: Field
  required" (Kilo-Org/kilocode#12238), Bedrock "The value at toolConfig.tools.0.toolSpec.inputSchema.json.type
  must be one of the following: object." (aaif-goose/goose#5064), Vertex "functionDeclaration parameters
  schema should be of type OBJECT" (dyad-sh/dyad#2300);
- and none takes a combinator there: Claude "input_schema does not support oneOf, allOf, or anyOf at the
  top level" (anthropics/claude-code#5319), OpenAI "schema must have type 'object' and not have
  'oneOf'/'anyOf'/'allOf'/'enum'/'not' at the top level." (nspady/google-calendar-mcp#39). MCP servers
  built on zod unions send them (PostHog/posthog#61040);
- OpenAI refuses an array without `items`, at any depth and without strict mode: "Invalid schema for
  function 'X': In context=('properties', 'paths'), array schema missing items." (mark3labs/mcphost#35).
  Claude takes such schemas, so Claude Code's MCP tools carry them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from typing import Any, Callable, TypeVar
from urllib.parse import unquote

import orjson

from modelgate.protocols.ir import ChatRequest, ChatResponse, Message, Part, ToolCall
from modelgate.protocols.memo import ByBytes

T = TypeVar("T")
_NOT_ID_CHARS = re.compile(r"[^A-Za-z0-9_-]")


def id_chars(text: str) -> str:
    """`text` with each character other than letters, digits, `_` and `-` made `_`."""
    return _NOT_ID_CHARS.sub("_", text)


def hashed(text: str, head: str, digits: int) -> str:
    """A stand-in for `text` where a vendor refuses it: `head`, `_` and `digits` hex digits of the text's
    SHA-256. The same text always gets the same one (calls and results still pair up on later turns);
    different texts get different ones."""
    return f"{head}_{hashlib.sha256(text.encode()).hexdigest()[:digits]}"


class NameRule:
    """The tool names a vendor takes, and the stand-in for each name it does not."""

    __slots__ = ("pattern", "_lines", "_known")

    def __init__(self, pattern: str) -> None:
        self.pattern = re.compile(pattern)
        self._lines = re.compile(f"(?:{pattern}\n)*{pattern}")  # names one per line, each fitting
        self._known: dict[str, str | None] = {}  # names seen -> stand-in (None: fits); bounded

    def all_fit(self, names: list[str]) -> bool:
        """Whether every name fits: one match over the names' lines, where a request's 40 tools and its
        history's calls would take a lookup each."""
        lines = "\n".join(names)
        return not names or (lines.count("\n") == len(names) - 1 and self._lines.fullmatch(lines) is not None)

    def stand_in(self, name: str) -> str | None:
        """None where `name` fits; else its letters, digits, `_` and `-`, at most 55 of them, and a hash of
        the whole name: distinct names stay distinct, and a name gets the same stand-in on every turn."""
        known = self._known.get(name, _UNKNOWN)
        if known is not _UNKNOWN:
            return known  # type: ignore[return-value]
        stand: str | None = None
        if not self.pattern.fullmatch(name):
            clean = id_chars(name)
            if not (clean[:1].isalpha() or clean[:1] == "_"):
                clean = "_" + clean
            stand = hashed(name, clean[:55], 8)
        if len(self._known) >= 4096:
            self._known.clear()
        self._known[name] = stand
        return stand


_UNKNOWN = object()

# The names each vendor takes (see above). A stand-in fits them all.
FUNCTION_NAME = NameRule(r"[A-Za-z0-9_-]{1,64}")  # OpenAI, Bedrock, the chat-completions vendors
CLAUDE_NAME = NameRule(r"[A-Za-z0-9_-]{1,128}")
GEMINI_NAME = NameRule(r"[A-Za-z_][A-Za-z0-9_.:-]{0,63}")
PUBLISHERS_NAME = NameRule(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")  # Gemini's and OpenAI's at once


def fit_tool_names(req: ChatRequest, adapter: object) -> tuple[ChatRequest, dict[str, str]]:
    """`req` with every tool name outside the adapter's rule (its `tool_names`, else FUNCTION_NAME) replaced
    by its stand-in (the tools, the named tool choice, the history's calls: vendors check all three), and
    the stand-ins' own names."""
    rule: NameRule = getattr(adapter, "tool_names", FUNCTION_NAME)
    names = [t.name for t in req.tools] + [p.name for m in req.messages if m.role == "assistant"
                                           for p in m.parts if type(p) is ToolCall]
    choice = req.tool_choice
    if choice is not None and choice.name:
        names.append(choice.name)
    if rule.all_fit(names):
        return req, {}
    fitted = {name: stand for name in names if (stand := rule.stand_in(name)) is not None}

    def part(p: Part) -> Part:
        return dataclasses.replace(p, name=fitted[p.name]) if isinstance(p, ToolCall) and p.name in fitted else p

    tools = [dataclasses.replace(t, name=fitted.get(t.name, t.name)) for t in req.tools]
    if choice is not None and choice.name in fitted:
        choice = dataclasses.replace(choice, name=fitted[choice.name])
    messages = [Message(m.role, [part(p) for p in m.parts]) if any(isinstance(p, ToolCall) for p in m.parts) else m
                for m in req.messages]
    return (dataclasses.replace(req, tools=tools, tool_choice=choice, messages=messages),
            {stand: name for name, stand in fitted.items()})


def own_names(resp: ChatResponse, own: dict[str, str]) -> ChatResponse:
    """`resp` with its tool calls renamed in place to the client's names (`own`: from `fit_tool_names`)."""
    for p in resp.parts:
        if isinstance(p, ToolCall):
            p.name = own.get(p.name, p.name)
    return resp


_COMBINATORS = ("anyOf", "oneOf", "allOf")


def object_root(schema: Any) -> dict[str, Any]:
    """`schema` with the root every vendor takes: type object, with properties, no combinator. Branches of
    a root `anyOf`/`oneOf`/`allOf` are merged into one object: its properties are all the branches', and it
    requires what every branch requires (what any requires, for `allOf`). A root `$ref` into the schema's
    own definitions is read in place. The usual schema is returned as it is."""
    if not isinstance(schema, dict):
        return {"type": "object", "properties": {}}
    if (schema.get("type") == "object" and "properties" in schema and "anyOf" not in schema
            and "oneOf" not in schema and "allOf" not in schema and "$ref" not in schema):
        return schema
    return _merged_root(schema, schema, depth=0)


def _merged_root(schema: dict[str, Any], document: dict[str, Any], depth: int) -> dict[str, Any]:
    # `document`: the whole schema, which references inside it point into.
    # A client's schema may hold anything where a subschema belongs: what is not one is left out.
    root = {key: value for key, value in schema.items() if key not in _COMBINATORS}
    ref = root.pop("$ref", None)
    target = referenced(document, ref) if ref != "#" and depth < 4 else None
    if isinstance(target, dict):
        root = {**_merged_root(target, document, depth + 1), **root}
    if root.get("type") is None or (isinstance(root["type"], list) and "object" in root["type"]):
        root["type"] = "object"
    properties = dict(_dict(root.get("properties")))
    required = [name for name in _list(root.get("required")) if isinstance(name, str)]
    for key in _COMBINATORS if depth < 4 else ():
        branches = [_merged_root(b, document, depth + 1) for b in _list(schema.get(key)) if isinstance(b, dict)]
        if not branches:
            continue
        for branch in branches:
            for name, sub in branch["properties"].items():
                properties.setdefault(name, sub)
        wanted = [branch.get("required") or [] for branch in branches]
        if key == "allOf":
            required += [name for names in wanted for name in names]
        else:
            required += [name for name in wanted[0] if all(name in names for names in wanted[1:])]
    root["properties"] = properties
    required = [name for name in dict.fromkeys(required) if name in properties]
    if required:
        root["required"] = required
    else:
        root.pop("required", None)
    return root


def referenced(root: Any, ref: Any) -> Any:
    """What a local `$ref` points to in the schema `root` (`#`, `#/$defs/Name`, or any JSON pointer from the
    root, RFC 6901: zod-to-json-schema writes a repeated subschema as `#/properties/<its first place>`);
    None for a reference outside the schema or to nothing."""
    if not isinstance(ref, str) or not ref.startswith("#") or (ref != "#" and not ref.startswith("#/")):
        return None
    target = root
    for step in ref[2:].split("/") if ref != "#" else ():
        step = unquote(step).replace("~1", "/").replace("~0", "~")
        if isinstance(target, dict) and step in target:
            target = target[step]
        elif isinstance(target, list) and step.isdigit() and int(step) < len(target):
            target = target[int(step)]
        else:
            return None
    return target


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


# Keys whose value is one subschema, a list of them, or a map of names to them (JSON Schema 2020-12).
_ONE = ("items", "additionalProperties", "not", "contains", "if", "then", "else", "propertyNames",
        "unevaluatedItems", "unevaluatedProperties")
_LIST = ("anyOf", "oneOf", "allOf", "prefixItems")
_MAP = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")


def by_tool_set(fit: Callable[[list[Any]], T]) -> Callable[[list[Any]], T]:
    """`fit` of a request's tool schemas, remembered by their bytes and shared by every request that sends
    them: an agent sends the same tools every turn, and a walk of 40 schemas costs ten times the lookup.
    Callers only read what it gives. At most 64 tool sets of up to 256 KB each are kept."""
    fitted_of: ByBytes[T] = ByBytes(64, 256 * 1024)

    def fitted(schemas: list[Any]) -> T:
        try:
            encoded = orjson.dumps(schemas)
        except orjson.JSONEncodeError:  # not from JSON (an integer beyond 64 bits): no cache
            return fit(schemas)
        return fitted_of.get(encoded, lambda data: fit(orjson.loads(data)))

    return fitted


def function_schemas(schemas: list[Any]) -> list[dict[str, Any]]:
    """A request's tool `schemas` as OpenAI takes them: each with an object root (`object_root`) and
    `items: {}` (any value) on every array that has none."""
    fitted = _function_schemas(schemas)
    return schemas if fitted is None else fitted


@by_tool_set
def _function_schemas(schemas: list[Any]) -> list[dict[str, Any]] | None:
    """None: the schemas fit as they are (the request's own are sent)."""
    fitted = [_items_filled(object_root(schema)) for schema in schemas]
    return None if all(a is b for a, b in zip(fitted, schemas)) else fitted


def rewritten(schema: Any, fix: Callable[[dict[str, Any]], dict[str, Any]]) -> Any:
    """`schema` with `fix` applied to each of its subschemas, innermost first (`fix` gives back the node
    itself where it changes nothing): the same object where nothing changes, else copied along the
    changed paths only, so the client's tree is never edited."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] | None = None
    for key, value in schema.items():
        if key in _MAP and isinstance(value, dict):
            new: Any = None
            for name, sub in value.items():
                fixed = rewritten(sub, fix)
                if fixed is not sub:
                    new = new or dict(value)
                    new[name] = fixed
        elif key in _LIST and isinstance(value, list):
            fixed_list = [rewritten(sub, fix) for sub in value]
            new = fixed_list if any(a is not b for a, b in zip(fixed_list, value)) else None
        elif key in _ONE:
            fixed = rewritten(value, fix)
            new = fixed if fixed is not value else None
        else:
            continue
        if new is not None:
            out = out or dict(schema)
            out[key] = new
    return fix(schema if out is None else out)


def _items_filled(schema: Any) -> Any:
    """`schema` with `items: {}` (any value) on every array that has none."""
    return rewritten(schema, with_items)


def with_items(node: dict[str, Any]) -> dict[str, Any]:
    """The node, with `items: {}` where it is an array without `items`."""
    kind = node.get("type")
    if "items" not in node and (kind == "array" or (isinstance(kind, list) and "array" in kind)):
        return {**node, "items": {}}
    return node
