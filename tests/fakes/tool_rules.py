"""What each vendor refuses in a request's tool names and parameter schemas, in its own words.

Sources, per rule (the words users quote from the real services):
- OpenAI: names "Invalid 'tools[0].function.name': string too long. Expected a string with maximum length
  64, but got a string with length 81 instead." (ravitemer/mcphub.nvim#243) and "string does not match
  pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'." (Vortiago/mcp-azure-devops#30),
  also on the history's calls (mcp-use/mcp-use#90), whose ids take at most 40 characters ("Invalid
  'messages[10].tool_calls[0].id': string too long. Expected a string with maximum length 40, but got a
  string with length 53 instead.", agno-agi/agno#5382); schemas, without strict mode: "array schema missing
  items" at any depth (mark3labs/mcphost#35, gumloop/guMCP#136), "schema must be a JSON Schema of 'type:
  "object"', got 'type: "None"'." (ComposioHQ/composio#1829), "schema must have type 'object' and not
  have 'oneOf'/'anyOf'/'allOf'/'enum'/'not' at the top level." (nspady/google-calendar-mcp#39).
- Claude: "tools.16.custom.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$'"
  (modelcontextprotocol/modelcontextprotocol#1345); "tools.0.custom.input_schema: input_schema does not
  support oneOf, allOf, or anyOf at the top level" (anthropics/claude-code#5319); "tools.0.custom.
  input_schema.type: Field required" (Kilo-Org/kilocode#12238).
- Bedrock's Converse: ToolName in the bedrock-runtime service model (1-64, `[a-zA-Z0-9_-]+`), which
  botocore leaves to the service: "1 validation error detected: Value '…' at 'toolConfig.tools.111.member.
  toolSpec.name' failed to satisfy constraint: Member must have length less than or equal to 64"
  (microsoft/mcp#842); "The value at toolConfig.tools.0.toolSpec.inputSchema.json.type must be one of the
  following: object." (aaif-goose/goose#5064).
- Gemini: "* GenerateContentRequest.tools[0].function_declarations[37].name: Invalid function name. Must
  start with a letter or an underscore. Must be alphameric (a-z, A-Z, 0-9), underscores (_), dots (.),
  colons (:), or dashes (-), with a maximum length of 64." (google-gemini/gemini-cli#6704, the colons from
  su-kaka/gcli2api#146); "GenerateContentRequest.tools[0].function_declarations[16].parameters.properties
  [includeTags].items: missing field." (cline/cline#7339); a node without a type and fields on the wrong
  type (the sources are quoted at `_gemini_schema_refusal`).
"""

from __future__ import annotations

import re
from typing import Any, Iterator

_OPENAI_NAME = re.compile(r"[a-zA-Z0-9_-]+")
_CLAUDE_NAME = re.compile(r"[a-zA-Z0-9_-]{1,128}")
_GEMINI_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}")
_COMBINATORS = ("oneOf", "anyOf", "allOf")


def _openai_name(name: Any, where: str) -> tuple[str, str] | None:
    if not isinstance(name, str):
        return None
    if len(name) > 64:
        return (f"Invalid '{where}': string too long. Expected a string with maximum length 64, but got a string "
                f"with length {len(name)} instead.", "string_above_max_length")
    if not _OPENAI_NAME.fullmatch(name):
        return (f"Invalid '{where}': string does not match pattern. Expected a string that matches the pattern "
                "'^[a-zA-Z0-9_-]+$'.", "invalid_value")
    return None


def _arrays_without_items(schema: Any, context: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    if not isinstance(schema, dict):
        return
    kind = schema.get("type")
    if "items" not in schema and (kind == "array" or (isinstance(kind, list) and "array" in kind)):
        yield context
    for key in ("properties", "$defs", "definitions"):
        for name, sub in (schema.get(key) or {}).items():
            yield from _arrays_without_items(sub, (*context, key, name))
    if "items" in schema:
        yield from _arrays_without_items(schema["items"], (*context, "items"))
    for key in _COMBINATORS:
        for i, sub in enumerate(schema.get(key) or ()):
            yield from _arrays_without_items(sub, (*context, key, str(i)))


def openai_tools_refusal(body: dict[str, Any]) -> tuple[str, str] | None:
    """(message, code) of OpenAI's chat completions for a refused tool, None where all pass."""
    for i, tool in enumerate(body.get("tools") or ()):
        function = tool.get("function") or {}
        name = function.get("name")
        if (refused := _openai_name(name, f"tools[{i}].function.name")) is not None:
            return refused
        parameters = function.get("parameters")
        if parameters is None:
            continue
        bad = f"Invalid schema for function '{name}': "
        if parameters.get("type") != "object":
            kind = parameters.get("type")
            return bad + f"schema must be a JSON Schema of 'type: \"object\"', got 'type: \"{kind}\"'.", \
                "invalid_function_parameters"
        if any(key in parameters for key in (*_COMBINATORS, "enum", "not")):
            return bad + ("schema must have type 'object' and not have 'oneOf'/'anyOf'/'allOf'/'enum'/'not' at the "
                          "top level."), "invalid_function_parameters"
        if "properties" not in parameters:
            return bad + "In context=(), object schema missing properties.", "invalid_function_parameters"
        for context in _arrays_without_items(parameters):
            return bad + f"In context={context!r}, array schema missing items.", "invalid_function_parameters"
    for i, message in enumerate(body.get("messages") or ()):
        for j, call in enumerate(message.get("tool_calls") or () if isinstance(message, dict) else ()):
            where = f"messages[{i}].tool_calls[{j}].function.name"
            if (refused := _openai_name((call.get("function") or {}).get("name"), where)) is not None:
                return refused
            if isinstance(call.get("id"), str) and len(call["id"]) > 40:
                return (f"Invalid 'messages[{i}].tool_calls[{j}].id': string too long. Expected a string with maximum "
                        f"length 40, but got a string with length {len(call['id'])} instead.", "string_above_max_length")
    return None


def claude_tools_refusal(body: dict[str, Any]) -> str | None:
    """The Messages API's message for a refused custom tool (server tools have no input_schema)."""
    for i, tool in enumerate(body.get("tools") or ()):
        if not isinstance(tool, dict) or "input_schema" not in tool:
            continue
        if not (isinstance(tool.get("name"), str) and _CLAUDE_NAME.fullmatch(tool["name"])):
            return f"tools.{i}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'"
        schema = tool["input_schema"]
        if "type" not in schema:
            return f"tools.{i}.custom.input_schema.type: Field required"
        if schema["type"] != "object":
            return f"tools.{i}.custom.input_schema.type: Input should be 'object'"
        if any(key in schema for key in _COMBINATORS):
            return f"tools.{i}.custom.input_schema: input_schema does not support oneOf, allOf, or anyOf at the top level"
    for i, message in enumerate(body.get("messages") or ()):
        content = message.get("content") if isinstance(message, dict) else None
        for j, block in enumerate(content if isinstance(content, list) else ()):
            if isinstance(block, dict) and block.get("type") == "tool_use" and len(block.get("name") or "") > 200:
                # "messages.403.content.0.tool_use.name: String should have at most 200 characters" (openclaw#7974)
                return f"messages.{i}.content.{j}.tool_use.name: String should have at most 200 characters"
    return None


def _converse_name(name: str, where: str) -> str | None:
    problems = []
    if len(name) > 64:
        problems.append("Member must have length less than or equal to 64")
    if not _OPENAI_NAME.fullmatch(name):
        problems.append("Member must satisfy regular expression pattern: [a-zA-Z0-9_-]+")
    if not problems:
        return None
    count = "1 validation error" if len(problems) == 1 else f"{len(problems)} validation errors"
    return f"{count} detected: Value '{name}' at '{where}' failed to satisfy constraint: " + "; ".join(problems)


def converse_tools_refusal(body: dict[str, Any]) -> str | None:
    """Converse's ValidationException message for a refused tool, tool choice or history call."""
    config = body.get("toolConfig") or {}
    for i, tool in enumerate(config.get("tools") or ()):
        spec = tool.get("toolSpec")
        if spec is None:
            continue
        if (refused := _converse_name(spec["name"], f"toolConfig.tools.{i}.member.toolSpec.name")) is not None:
            return refused
        if spec["inputSchema"]["json"].get("type") != "object":
            return (f"The value at toolConfig.tools.{i}.toolSpec.inputSchema.json.type must be one of the following: "
                    "object.")
    named = (config.get("toolChoice") or {}).get("tool")
    if named and (refused := _converse_name(named["name"], "toolConfig.toolChoice.tool.name")) is not None:
        return refused
    for i, message in enumerate(body.get("messages") or ()):
        for j, block in enumerate(message.get("content") or ()):
            if "toolUse" in block and (refused := _converse_name(
                    block["toolUse"]["name"], f"messages.{i}.member.content.{j}.member.toolUse.name")) is not None:
                return refused
    return None


def gemini_tools_refusal(body: dict[str, Any]) -> str | None:
    """Gemini's INVALID_ARGUMENT message for a refused function declaration or response schema."""
    for t, tool in enumerate(body.get("tools") or ()):
        for d, decl in enumerate(tool.get("functionDeclarations") or ()):
            where = f"GenerateContentRequest.tools[{t}].function_declarations[{d}]"
            if not (isinstance(decl.get("name"), str) and _GEMINI_NAME.fullmatch(decl["name"])):
                return (f"* {where}.name: Invalid function name. Must start with a letter or an underscore. Must be "
                        "alphameric (a-z, A-Z, 0-9), underscores (_), dots (.), colons (:), or dashes (-), with a "
                        "maximum length of 64.")
            if "parameters" in decl and (refused := _gemini_schema_refusal(decl["parameters"], f"{where}.parameters")):
                return refused
            if "parametersJsonSchema" in decl and (refused := gemini_json_schema_refusal(decl["parametersJsonSchema"])):
                return refused
    schema = (body.get("generationConfig") or {}).get("responseSchema")
    if schema is not None:
        return _gemini_schema_refusal(schema, "GenerateContentRequest.generation_config.response_schema")
    return None


_GEMINI_TYPES = {"STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT"}


def _gemini_schema_refusal(schema: Any, path: str) -> str | None:
    """Every node states its type unless it is a union ("...properties[commit_hash].type: must be specified when
    not using one_of, any_of or all_of fields", danny-avila/LibreChat#6971); fields only fit their type
    (JetBrains/mcp-jetbrains#71, anomalyco/opencode#11888, NousResearch/hermes-agent#38972); an array names its
    items (cline/cline#7339)."""
    if not isinstance(schema, dict):
        return f"* {path}: Invalid value (type.googleapis.com/google.ai.generativelanguage.v1beta.Schema)"
    if "anyOf" in schema:
        for i, branch in enumerate(schema["anyOf"]):
            if (refused := _gemini_schema_refusal(branch, f"{path}.any_of[{i}]")) is not None:
                return refused
        return None
    kind = schema.get("type")
    if kind not in _GEMINI_TYPES:
        if kind is None:
            return f"* {path}.type: must be specified when not using one_of, any_of or all_of fields"
        return f"* Invalid value at '{path}.type' (type.googleapis.com/google.ai.generativelanguage.v1beta.Type), {kind!r}"
    if "enum" in schema and kind != "STRING":
        return f"* {path}.enum: only allowed for STRING type"
    if "properties" in schema and kind != "OBJECT":
        return f"* {path}.properties: only allowed for OBJECT type"
    if "items" in schema and kind != "ARRAY":
        return f"* {path}.items: field predicate failed: $type == Type.ARRAY"
    if kind == "ARRAY" and not isinstance(schema.get("items"), dict):
        return f"* {path}.items: missing field."
    for name, sub in (schema.get("properties") or {}).items():
        if (refused := _gemini_schema_refusal(sub, f"{path}.properties[{name}]")) is not None:
            return refused
    return _gemini_schema_refusal(schema["items"], f"{path}.items") if kind == "ARRAY" else None


def gemini_json_schema_refusal(root: Any) -> str | None:
    """What Gemini refuses in `parametersJsonSchema` (a JSON schema), in its words: a root without a type
    ("schema at top-level requires unspecified property 'type'", google-gemini/gemini-cli#23382), `properties`
    that is not an object ("value for properties at top-level must be an object"), a `$ref` beside other
    fields ("schema at properties.draft can only contain properties starting with '$' when $ref is
    present", google-gemini/gemini-cli#4758) or one that points nowhere ("reference to undefined schema at
    properties.language", agent-infra/sandbox#83)."""
    if not isinstance(root, dict) or "type" not in root:
        return "schema at top-level requires unspecified property 'type'"
    return _json_node_refusal(root, root, "top-level")


def _json_node_refusal(root: dict[str, Any], node: Any, where: str) -> str | None:
    if not isinstance(node, dict):
        return None
    if "properties" in node and not isinstance(node["properties"], dict):
        return f"value for properties at {where} must be an object"
    if "$ref" in node:
        if any(not key.startswith("$") for key in node):
            return f"schema at {where} can only contain properties starting with '$' when $ref is present"
        target: Any = root
        for step in str(node["$ref"]).removeprefix("#").split("/")[1:]:
            target = target.get(step) if isinstance(target, dict) else None
        if not str(node["$ref"]).startswith("#") or target is None:
            return f"reference to undefined schema at {where}"
    prefix = "" if where == "top-level" else where + "."
    subs: list[tuple[str, Any]] = [(f"{prefix}{key}.{name}", sub) for key in ("properties", "$defs", "definitions")
                                   for name, sub in (node.get(key) or {}).items() if isinstance(node.get(key), dict)]
    subs += [(f"{prefix}{key}.{i}", sub) for key in ("anyOf", "oneOf", "allOf", "prefixItems")
             for i, sub in enumerate(node.get(key) or ()) if isinstance(node.get(key), list)]
    subs += [(f"{prefix}{key}", node[key]) for key in ("items", "additionalProperties", "not") if key in node]
    for path, sub in subs:
        if (refused := _json_node_refusal(root, sub, path)) is not None:
            return refused
    return None
