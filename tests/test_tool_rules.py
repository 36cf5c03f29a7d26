"""Client tools that another vendor refuses (providers/tool_rules.py).

Claude Code names MCP tools `mcp__<server>__<tool>` in full (Claude takes 128 characters) and sends their
schemas as the servers wrote them (arrays without `items`, which Claude takes); MCP servers built on zod
unions send a root `anyOf`. OpenAI, Bedrock's Converse and Gemini refuse such names, OpenAI and Gemini
such arrays, Claude, OpenAI, Converse and Vertex such roots: the whole request fails. The fakes refuse
them in each service's words (tests/fakes/tool_rules.py); the client must see its own tool names back.
"""

from __future__ import annotations

import re

import orjson
import pytest
from anthropic import AsyncAnthropic
from openai import AsyncOpenAI

from modelgate.providers.tool_rules import (
    CLAUDE_NAME,
    FUNCTION_NAME,
    GEMINI_NAME,
    PUBLISHERS_NAME,
    object_root,
    function_schemas,
)
from tests.fakes.bedrock_upstream import FakeBedrock
from tests.fakes.gemini_upstream import FakeGemini
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.tool_rules import claude_tools_refusal, converse_tools_refusal, gemini_json_schema_refusal, \
    gemini_tools_refusal, openai_tools_refusal

# 81 characters, as in ravitemer/mcphub.nvim#243's refusal
LONG_NAME = "mcp__claude_ai_Atlassian_Rovo__getConfluencePageDescendantsInSpaceWithTheirLabels"
MCP_TOOL = {"name": LONG_NAME, "description": "List a page's descendants",
            "input_schema": {"type": "object", "properties": {"pageId": {"type": "string"}, "labels": {"type": "array"},
                                                              "filter": {"type": "object", "properties": {
                                                                  "tags": {"type": ["array", "null"]}}}},
                             "required": ["pageId"]}}


@pytest.fixture
async def upstreams():
    fakes = {"openai": await FakeOpenAI(models=("gpt-4.1",)).start(), "aws-bedrock": await FakeBedrock().start(),
             "gemini": await FakeGemini().start()}
    yield fakes
    for fake in fakes.values():
        await fake.close()


def _model(kind: str, fake) -> str:
    return {"openai": "gpt-4.1", "gemini": "gemini-2.5-flash"}.get(kind) or fake.models[0]


def _key(fake) -> str:
    return getattr(fake, "api_key", None) or next(iter(fake.api_keys))


@pytest.mark.parametrize("kind", ["openai", "aws-bedrock", "gemini"])
async def test_claude_code_s_mcp_tools_reach_other_vendors_and_come_back_under_their_own_names(gateway, upstreams,
                                                                                            kind):
    fake = upstreams[kind]
    model = _model(kind, fake)
    wired = await gateway.wire(fake.base_url, [model], kind=kind, upstream_keys=(_key(fake),), name=kind)
    api = AsyncAnthropic(base_url=f"{gateway.url}/alt", api_key=wired.key, max_retries=0)
    ask = [{"role": "user", "content": "call tool: list the descendants of page 7"}]
    answer = await api.messages.create(model=model, max_tokens=1024, tools=[MCP_TOOL], messages=ask)  # type: ignore[list-item]
    call = next(block for block in answer.content if block.type == "tool_use")
    assert call.name == LONG_NAME
    async with api.messages.stream(model=model, max_tokens=1024, tools=[MCP_TOOL], messages=ask) as stream:  # type: ignore[list-item]
        streamed = await stream.get_final_message()
    assert [b.name for b in streamed.content if b.type == "tool_use"] == [LONG_NAME]
    # The next turn sends the call back in the history, under its own name: the vendor checks those too.
    loop = [*ask, {"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in answer.content]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "page 8, page 9"}]}]
    final = await api.messages.create(model=model, max_tokens=1024, tools=[MCP_TOOL], messages=loop,  # type: ignore[list-item]
                                      tool_choice={"type": "tool", "name": LONG_NAME})
    assert final.content


async def test_a_history_s_long_tool_call_ids_reach_openai(gateway, upstreams):
    # A Responses item id (53 characters, agno-agi/agno#5382's) where a call id belongs, as some agents send.
    fake = upstreams["openai"]
    wired = await gateway.wire(fake.base_url, ["gpt-4.1"], kind="openai", upstream_keys=(_key(fake),), name="openai")
    api = AsyncAnthropic(base_url=f"{gateway.url}/alt", api_key=wired.key, max_retries=0)
    call_id = "fc_0f0e50a1476a6c35006912c58dc9f8819192c25864eb16f07f"
    loop = [{"role": "user", "content": "list the files"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": call_id, "name": "Bash", "input": {"c": "ls"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": "a.py"}]}]
    tool = {"name": "Bash", "input_schema": {"type": "object", "properties": {"c": {"type": "string"}}}}
    answer = await api.messages.create(model="gpt-4.1", max_tokens=256, tools=[tool], messages=loop)  # type: ignore[list-item]
    assert answer.content
    sent = fake.last.json()["messages"]
    assert sent[1]["tool_calls"][0]["id"] == sent[2]["tool_call_id"] != call_id  # still a pair


# A zod union's schema (PostHog/posthog#61040's shape): the root is anyOf, each branch an object.
UNION_TOOL = {"type": "function", "function": {
    "name": "search", "description": "Search by id or by query",
    "parameters": {"anyOf": [
        {"type": "object", "properties": {"id": {"type": "string"}, "limit": {"type": "integer"}}, "required": ["id"]},
        {"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
         "required": ["query", "limit"]}]}}}


@pytest.mark.parametrize("kind", ["anthropic", "aws-bedrock", "gemini"])
async def test_a_chat_client_s_union_schema_reaches_claude_converse_and_gemini(gateway, upstreams, anthropic_upstream,
                                                                              kind):
    fake = anthropic_upstream if kind == "anthropic" else upstreams[kind]
    model = "claude-haiku-4-5" if kind == "anthropic" else _model(kind, fake)
    wired = await gateway.wire(fake.base_url, [model], kind=kind, upstream_keys=(_key(fake),), name=kind)
    api = AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=wired.key, max_retries=0)
    resp = await api.chat.completions.create(model=model, max_tokens=256, tools=[UNION_TOOL],  # type: ignore[list-item]
                                             messages=[{"role": "user", "content": "search for gateways"}])
    assert resp.choices[0].message.tool_calls and resp.choices[0].message.tool_calls[0].function.name == "search"
    if kind == "gemini":  # Gemini takes the union but must not lose its arguments on the way
        declared = fake.last.json()["tools"][0]["functionDeclarations"][0]
        assert set(declared["parametersJsonSchema"]["properties"]) == {"id", "limit", "query"}


# --- the rules themselves, against each vendor's documented name rule and schema refusals -------------

# Each vendor's rule in its own words (module docstring of providers/tool_rules.py cites them).
DOCUMENTED = {"openai": r"[a-zA-Z0-9_-]{1,64}", "claude": r"[a-zA-Z0-9_-]{1,128}",
              "gemini": r"[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}"}


@pytest.mark.parametrize("name", [LONG_NAME, "web.search", "1password_lookup", "a" * 200, "-dash", "tool with spaces",
                                  "ünïcode_tool"])
def test_a_stand_in_fits_every_vendor_s_rule_and_stays_the_same(name):
    for rule in (FUNCTION_NAME, CLAUDE_NAME, GEMINI_NAME, PUBLISHERS_NAME):
        stand = rule.stand_in(name)
        if stand is None:
            continue  # the name fits this vendor as it is
        assert all(re.fullmatch(pattern, stand) for pattern in DOCUMENTED.values()), stand
        assert rule.stand_in(name) == stand  # the same on every turn


def test_names_that_differ_get_different_stand_ins():
    names = ["web.search", "web_search_", "web:search", LONG_NAME, LONG_NAME + "2"]
    assert len({FUNCTION_NAME.stand_in(name) for name in names}) == len(names)


def test_names_each_vendor_takes_are_kept():
    assert FUNCTION_NAME.stand_in("mcp__github__create_pull_request") is None
    assert CLAUDE_NAME.stand_in(LONG_NAME) is None  # Claude takes 128
    assert GEMINI_NAME.stand_in("web.search") is None and GEMINI_NAME.stand_in("1tool") is not None


def _openai_body(parameters):
    return {"tools": [{"type": "function", "function": {"name": "f", "parameters": parameters}}], "messages": []}


@pytest.mark.parametrize("schema", [
    {"properties": {"a": {"type": "string"}}},  # no root type
    {"type": ["object", "null"], "properties": {"a": {"type": "string"}}},
    {"type": "object"},  # an argument-less MCP tool
    UNION_TOOL["function"]["parameters"],
    {"allOf": [{"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
               {"properties": {"b": {"type": "array"}}, "required": ["b"]}]},
    {"$ref": "#/$defs/Args", "$defs": {"Args": {"type": "object", "properties": {"paths": {"type": "array"}}}}},
    {"type": "object", "properties": {"rows": {"type": "array", "items": {"type": "array"}},
                                      "pick": {"anyOf": [{"type": "array"}, {"type": "string"}]}}},
])
def test_schemas_every_vendor_refuses_are_made_ones_they_take(schema):
    fitted = object_root(schema)
    assert claude_tools_refusal({"tools": [{"name": "f", "input_schema": fitted}], "messages": []}) is None
    assert converse_tools_refusal({"toolConfig": {"tools": [{"toolSpec": {"name": "f", "inputSchema": {"json": fitted}}}]},
                                   "messages": []}) is None
    assert openai_tools_refusal(_openai_body(function_schemas([schema])[0])) is None
    assert openai_tools_refusal(_openai_body(schema)) is not None  # as the client sent it


def test_a_union_root_keeps_every_branch_s_properties_and_what_all_require():
    root = object_root(UNION_TOOL["function"]["parameters"])
    assert root == {"type": "object", "properties": {"id": {"type": "string"}, "limit": {"type": "integer"},
                                                     "query": {"type": "string"}}}
    both = object_root({"allOf": [{"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                                  {"properties": {"b": {"type": "string"}}, "required": ["b"]}]})
    assert both["required"] == ["a", "b"]


def test_a_schema_that_needs_nothing_is_sent_as_it_is():
    schema = MCP_TOOL["input_schema"]
    assert object_root(schema) is schema
    fine = {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string"}}}}
    assert function_schemas([fine])[0] is fine
    filled = function_schemas([schema, fine])[0]
    assert filled["properties"]["labels"] == {"type": "array", "items": {}}
    assert filled["properties"]["filter"]["properties"]["tags"]["items"] == {}
    assert schema["properties"]["labels"] == {"type": "array"}  # the client's tree is not changed
    assert function_schemas([orjson.loads(orjson.dumps(schema)), fine])[0] == filled  # the same from the cache


def test_gemini_refusals_hold_for_the_fitted_declarations():
    from modelgate.protocols.ir import ChatRequest, Message, TextPart, Tool
    from modelgate.providers.gemini import build_body

    req = ChatRequest("m", [Message("user", [TextPart("hi")])],
                      tools=[Tool("f", None, MCP_TOOL["input_schema"]),
                             Tool("g", None, UNION_TOOL["function"]["parameters"])])
    body = build_body(req, {}, "gemini-2.5-flash")
    assert gemini_tools_refusal(body) is None
    declared = body["tools"][0]["functionDeclarations"]
    assert declared[0]["parametersJsonSchema"]["properties"]["labels"]["items"] == {}
    assert set(declared[1]["parametersJsonSchema"]["properties"]) == {"id", "limit", "query"}


@pytest.mark.parametrize("schema", [
    {"anyOf": 5, "required": 7, "definitions": [], "$ref": "#/definitions/x"},
    {"properties": [1, 2], "required": [["a"], {"b": 1}], "allOf": [{"required": "a"}, 3]},
    {"$ref": "#/$defs/A", "$defs": {"A": {"$ref": "#/$defs/A"}}},  # a reference to itself
    {"anyOf": [{"anyOf": [{"anyOf": [{"anyOf": [{"anyOf": [{"properties": {"deep": {}}}]}]}]}]}]},
    {"type": "object", "properties": {"a": {"type": "array", "items": [{"type": "string"}]}, "b": {"type": ["array"]}}},
])
def test_a_malformed_schema_is_made_an_object_without_a_crash(schema):
    from modelgate.protocols.ir import ChatRequest, Message, TextPart, Tool
    from modelgate.providers.gemini import build_body

    root = object_root(schema)
    assert root["type"] == "object" and isinstance(root["properties"], dict)
    assert openai_tools_refusal(_openai_body(function_schemas([schema])[0])) is None
    req = ChatRequest("m", [Message("user", [TextPart("hi")])], tools=[Tool("f", None, schema)])
    assert gemini_tools_refusal(build_body(req, {}, "gemini-2.5-flash")) is None


# Schema nodes without a type, as MCP servers and agents send them: zod's z.any() (`{}`), a node with only a
# description, only `items` or only `properties` (opencode's edit tool, QuantumNous/new-api#3022), a numeric
# enum (google-gemini/gemini-cli#4120), `type: "null"` (agentscope CoPaw#5543), a bare type name where a
# schema belongs (decolua/9router#1081), a described union of scalars (zod's z.union().describe()).
TYPELESS_TOOL = {"name": "update_record", "description": "Update a record's fields",
                 "input_schema": {"type": "object", "required": ["id", "value"], "properties": {
                     "id": {"description": "The record's id"},
                     "value": {},
                     "lines": {"items": {"properties": {"from": {"type": "integer"}, "to": {"type": "integer"}}}},
                     "severity": {"enum": [1, 2, 3]},
                     "meta": {"properties": {"width": {"enum": ["narrow", "wide"]}, "height": {"minimum": 0}}},
                     "cleared": {"type": "null"},
                     "kind": "object",
                     "limit": {"anyOf": [{"type": "integer"}, {"type": "string"}], "description": "A count or 'all'"},
                     "state": {"type": ["string", "null"], "enum": ["open", "closed", None]},  # Optional[Literal]
                 }}}


def test_a_schema_node_without_a_type_reaches_gemini_as_written():
    from modelgate.protocols.ir import ChatRequest, Message, TextPart, Tool
    from modelgate.providers.gemini import build_body

    req = ChatRequest("m", [Message("user", [TextPart("hi")])],
                      tools=[Tool("update_record", None, TYPELESS_TOOL["input_schema"])])
    body = build_body(req, {}, "gemini-3-flash-preview")
    assert gemini_tools_refusal(body) is None
    declared = body["tools"][0]["functionDeclarations"][0]
    # A JSON schema says what the typed `parameters` cannot: a value of any type, numeric enums. Claude Code's own
    # Workflow tool takes `args` of any type and warns that a JSON-encoded string breaks it.
    # A property's value must be a schema (JSON Schema 2020-12, 10.3.2.1): the bare "object" is read as any value.
    assert declared["parametersJsonSchema"]["properties"] == {**TYPELESS_TOOL["input_schema"]["properties"], "kind": {}}


def test_a_structured_output_schema_without_types_gets_the_ones_gemini_demands():
    from modelgate.protocols.ir import ChatRequest, Message, TextPart
    from modelgate.providers.gemini import build_body

    schema = {**TYPELESS_TOOL["input_schema"]}
    req = ChatRequest("m", [Message("user", [TextPart("hi")])],
                      response_format={"type": "json_schema", "json_schema": {"name": "r", "schema": schema}})
    body = build_body(req, {}, "gemini-3-flash-preview")
    assert gemini_tools_refusal(body) is None  # responseSchema is Gemini's typed Schema
    properties = body["generationConfig"]["responseSchema"]["properties"]
    assert properties["id"] == {"type": "STRING", "description": "The record's id"}
    assert properties["value"]["type"] == "STRING"  # any value, as text: the typed Schema has no "any"
    assert properties["lines"]["type"] == "ARRAY" and properties["lines"]["items"]["type"] == "OBJECT"
    assert properties["severity"] == {"type": "INTEGER"}  # Gemini's enums hold strings only
    assert properties["meta"]["properties"]["height"]["type"] == "NUMBER"
    assert properties["state"] == {"type": "STRING", "nullable": True, "enum": ["open", "closed"], "format": "enum"}
    assert properties["cleared"]["type"] != "NULL"  # Vertex: "...schema didn't specify the schema type field"
    # Gemini 3 takes a union only as the node's one field (patlux/pi-commandcode-provider#103): the description
    # goes into each branch.
    assert properties["limit"] == {"anyOf": [{"type": "INTEGER", "description": "A count or 'all'"},
                                             {"type": "STRING", "description": "A count or 'all'"}]}


def test_references_gemini_refuses_are_mended():
    from modelgate.protocols.ir import ChatRequest, Message, TextPart, Tool
    from modelgate.providers.gemini import build_body

    # pydantic writes a described reference (`$ref` beside `description`); MCP servers send references to
    # definitions they left out.
    schema = {"type": "object", "$defs": {"Mode": {"type": "string", "enum": ["fast", "slow"]}},
              "properties": {"mode": {"$ref": "#/$defs/Mode", "description": "How to run"},
                             "target": {"$ref": "#/$defs/Missing", "description": "What to run"},
                             "again": {"$ref": "#"}}}
    req = ChatRequest("m", [Message("user", [TextPart("hi")])], tools=[Tool("run", None, schema)])
    sent = build_body(req, {}, "gemini-2.5-flash")["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"]
    assert gemini_json_schema_refusal(schema) is not None  # as the client wrote it
    assert gemini_json_schema_refusal(sent) is None
    assert sent["properties"]["mode"] == {"description": "How to run", "anyOf": [{"$ref": "#/$defs/Mode"}]}
    assert sent["properties"]["target"] == {"description": "What to run"}
    assert sent["properties"]["again"] == {"$ref": "#"}


@pytest.mark.parametrize("fields,refused", [
    ({"id": {}}, ".properties[id].type: must be specified"),
    ({"n": {"type": "INTEGER", "enum": ["1"]}}, ".properties[n].enum: only allowed for STRING type"),
    ({"s": {"type": "STRING", "items": {"type": "STRING"}}}, ".properties[s].items: field predicate failed"),
])
def test_the_gemini_fake_refuses_what_gemini_refuses(fields, refused):
    body = {"tools": [{"functionDeclarations": [{"name": "f", "parameters": {"type": "OBJECT", "properties": fields}}]}]}
    assert refused in (gemini_tools_refusal(body) or "")


async def test_claude_code_s_typeless_mcp_schemas_reach_gemini(gateway, upstreams):
    fake = upstreams["gemini"]
    wired = await gateway.wire(fake.base_url, ["gemini-2.5-flash"], kind="gemini", upstream_keys=(_key(fake),),
                               name="gemini")
    api = AsyncAnthropic(base_url=f"{gateway.url}/alt", api_key=wired.key, max_retries=0)
    answer = await api.messages.create(model="gemini-2.5-flash", max_tokens=1024, tools=[TYPELESS_TOOL],  # type: ignore[list-item]
                                       messages=[{"role": "user", "content": "call tool: set record 7 to 3"}])
    assert [block.name for block in answer.content if block.type == "tool_use"] == ["update_record"]
    declared = fake.last.json()["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"]
    assert declared["properties"]["value"] == {} and declared["required"] == ["id", "value"]


# zod-to-json-schema (the MCP TypeScript SDK's converter) writes a subschema used twice as a JSON pointer to
# its first place (its default `$refStrategy: "root"`); pointers escape "/" and "~" (RFC 6901) and may be
# percent-encoded in the URI fragment.
ADDRESS = {"type": "object", "properties": {"street": {"type": "string"}}, "required": ["street"]}
ZOD_REFS = {"type": "object", "properties": {"billing": ADDRESS, "shipping": {"$ref": "#/properties/billing"}}}


@pytest.mark.parametrize(("ref", "target"), [
    ("#/properties/billing", ADDRESS),
    ("#/properties/billing/properties/street", {"type": "string"}),
    ("#", ZOD_REFS),
    ("#/properties/shipping", {"$ref": "#/properties/billing"}),
])
def test_a_local_reference_is_read_as_a_json_pointer_from_the_root(ref, target):
    from modelgate.providers.tool_rules import referenced

    assert referenced(ZOD_REFS, ref) == target


def test_escaped_and_nested_pointers_and_references_to_nothing():
    from modelgate.providers.tool_rules import referenced

    schema = {"$defs": {"a/b": {"type": "string"}, "m~n": {"type": "integer"}, "x y": {"type": "boolean"},
                        "Outer": {"$defs": {"Inner": {"type": "number"}}}}, "prefixItems": [{"type": "null"}]}
    assert referenced(schema, "#/$defs/a~1b") == {"type": "string"}
    assert referenced(schema, "#/$defs/m~0n") == {"type": "integer"}
    assert referenced(schema, "#/$defs/x%20y") == {"type": "boolean"}
    assert referenced(schema, "#/$defs/Outer/$defs/Inner") == {"type": "number"}
    assert referenced(schema, "#/prefixItems/0") == {"type": "null"}
    for nowhere in ("#/$defs/Inner", "#/prefixItems/1", "#/$defs/a/b", "https://example.com/s.json", "#anchor", 5):
        assert referenced(schema, nowhere) is None


def test_a_root_reference_by_pointer_is_read_in_place():
    schema = {"$ref": "#/definitions/Outer/definitions/Args",
              "definitions": {"Outer": {"definitions": {"Args": {"type": "object", "properties": {"q": {"type": "string"}},
                                                                   "required": ["q"]}}}}}
    root = object_root(schema)
    assert root["type"] == "object" and root["properties"] == {"q": {"type": "string"}} and root["required"] == ["q"]


def test_a_repeated_zod_subschema_reaches_gemini_whole():
    from modelgate.protocols.ir import ChatRequest, Message, TextPart, Tool
    from modelgate.providers.gemini import build_body, gemini_schema

    # As a JSON schema (tool parameters) the reference is kept: it resolves.
    req = ChatRequest("m", [Message("user", [TextPart("hi")])], tools=[Tool("ship", None, ZOD_REFS)])
    body = build_body(req, {}, "gemini-2.5-flash")
    assert gemini_tools_refusal(body) is None
    assert body["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"] == ZOD_REFS
    # In the OpenAPI subset (structured output), which has no references, it is inlined.
    address = {"type": "OBJECT", "properties": {"street": {"type": "STRING"}}, "required": ["street"]}
    assert gemini_schema(ZOD_REFS) == {"type": "OBJECT", "properties": {"billing": address, "shipping": address}}


def test_a_union_root_of_references_keeps_every_branch_s_properties():
    # pydantic's schema of a union of models (an MCP server's tool taking one of several shapes): the branches are
    # references into the schema's own $defs.
    schema = {"$defs": {"ByName": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
                        "ById": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}},
              "anyOf": [{"$ref": "#/$defs/ByName"}, {"$ref": "#/$defs/ById"}]}
    root = object_root(schema)
    assert root["type"] == "object" and root["properties"] == {"name": {"type": "string"}, "id": {"type": "integer"}}
    assert "required" not in root  # neither field is required by both branches
