"""Codex's namespace tools on other vendors' models (protocols/responses/decode.flat_name).

Codex sends its MCP tools and its sub-agent tools as `namespace` tools (`{"type": "namespace", "name":
"mcp__github__", "tools": [function tools]}`) and dispatches a call by its `name` and `namespace`: a call
named `mcp__github__create_issue` without a namespace is an "unsupported call" to it (openai/codex#17404
removed the flat fallback). Other vendors have no namespaces: the functions go to them under one flat name,
and their calls come back to the client under their own name and namespace, in the history too.
"""

from __future__ import annotations

from openai import AsyncOpenAI
from openai.types.responses import ResponseFunctionToolCall

from tests.fakes.anthropic_upstream import API_KEY

ISSUE_SCHEMA = {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}
# The shape of codex-rs's MCP and sub-agent namespaces (tool_registry_plan.rs, CODEX_BODY in test_typed_view.py)
TOOLS = [
    {"type": "namespace", "name": "mcp__github__", "description": "Tools in the mcp__github__ namespace.",
     "tools": [{"type": "function", "name": "create_issue", "description": "Open an issue", "strict": False,
                "parameters": ISSUE_SCHEMA}]},
    {"type": "namespace", "name": "multi_agent_v1", "description": "Sub-agents.",
     "tools": [{"type": "function", "name": "close_agent", "description": "Close", "strict": False,
                "parameters": {"type": "object", "properties": {"id": {"type": "string"}}}},
               {"type": "custom", "name": "exec", "description": "Run code"}]},
    {"type": "function", "name": "exec_command", "description": "Run", "strict": False,
     "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}},
]


async def _wired(gateway, anthropic_upstream) -> AsyncOpenAI:
    wired = await gateway.wire(anthropic_upstream.base_url, ["claude-haiku-4-5"], kind="anthropic",
                               upstream_keys=(API_KEY,), name="claude")
    return AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=wired.key, max_retries=0)


async def test_a_namespaced_function_reaches_claude_and_its_call_comes_back_under_its_namespace(gateway,
                                                                                                anthropic_upstream):
    api = await _wired(gateway, anthropic_upstream)
    resp = await api.responses.create(model="claude-haiku-4-5", input="file a bug", tools=TOOLS,  # type: ignore[arg-type]
                                      tool_choice="required", store=False)
    sent = anthropic_upstream.last.json()
    assert [t["name"] for t in sent["tools"]] == ["mcp__github__create_issue", "multi_agent_v1__close_agent",
                                                  "multi_agent_v1__exec", "exec_command"]
    assert sent["tools"][0]["input_schema"] == ISSUE_SCHEMA
    call = next(item for item in resp.output if item.type == "function_call")
    assert (call.name, call.namespace) == ("create_issue", "mcp__github__")

    events = [event async for event in await api.responses.create(
        model="claude-haiku-4-5", input="file a bug", tools=TOOLS, tool_choice="required", store=False,  # type: ignore[arg-type]
        stream=True)]
    items = [event.item for event in events if event.type in ("response.output_item.added", "response.output_item.done")]
    calls = [item for item in items if isinstance(item, ResponseFunctionToolCall)]
    assert len(calls) == 2 and all((c.name, c.namespace) == ("create_issue", "mcp__github__") for c in calls)
    final = next(event for event in events if event.type == "response.completed").response
    assert [(o.name, o.namespace) for o in final.output if isinstance(o, ResponseFunctionToolCall)] == \
        [("create_issue", "mcp__github__")]

    # Codex sends the call back in its history under its namespace: the upstream sees the same flat name.
    history = [{"role": "user", "content": "file a bug"},
               {"type": "function_call", "call_id": call.call_id, "name": "create_issue", "namespace": "mcp__github__",
                "arguments": call.arguments},
               {"type": "function_call_output", "call_id": call.call_id, "output": "issue #7"}]
    answer = await api.responses.create(model="claude-haiku-4-5", input=history, tools=TOOLS, store=False)  # type: ignore[arg-type]
    assert answer.output_text
    turns = anthropic_upstream.last.json()["messages"]
    used = next(block for block in turns[1]["content"] if block["type"] == "tool_use")
    assert used["name"] == "mcp__github__create_issue"


async def test_a_top_level_function_s_call_has_no_namespace(gateway, anthropic_upstream):
    api = await _wired(gateway, anthropic_upstream)
    resp = await api.responses.create(model="claude-haiku-4-5", input="run it", tools=[TOOLS[2]],  # type: ignore[list-item]
                                      tool_choice="required", store=False)
    call = next(item for item in resp.output if item.type == "function_call")
    assert (call.name, call.namespace) == ("exec_command", None)


async def test_a_malformed_namespace_tool_is_a_clear_400(gateway, anthropic_upstream):
    import openai
    import pytest

    api = await _wired(gateway, anthropic_upstream)
    with pytest.raises(openai.BadRequestError) as caught:
        await api.responses.create(model="claude-haiku-4-5", input="hi", store=False,
                                   tools=[{"type": "namespace", "name": "mcp__x__", "description": "d",  # type: ignore[list-item]
                                           "tools": [{"type": "function", "name": ""}]}])
    assert "'tools[0].tools[0].name' must be a non-empty string" in caught.value.message


async def test_a_namespace_s_nameless_custom_tool_is_a_clear_400_not_a_crash(gateway, anthropic_upstream):
    import openai
    import pytest

    api = await _wired(gateway, anthropic_upstream)
    tools = [{"type": "namespace", "name": "mcp__x__", "description": "d", "tools": [{"type": "custom"}]}, TOOLS[2]]
    with pytest.raises(openai.BadRequestError) as caught:
        await api.responses.create(model="claude-haiku-4-5", input="hi", store=False, tools=tools)  # type: ignore[arg-type]
    assert "'tools[0].tools[0].name' must be a non-empty string" in caught.value.message


# Codex's freeform `apply_patch` (its request for gpt-5.5 slugs, captured from codex_exec 0.169.0): raw text
# in a custom tool's `input`, checked against a Lark grammar. Other vendors take functions: it goes as one
# with a string argument `input`, and its call comes back as a `custom_tool_call` with the raw text.
APPLY_PATCH = {"type": "custom", "name": "apply_patch",
               "description": "The `apply_patch` tool can be used to edit files. This is a FREEFORM tool, so do not "
                              "wrap the patch in JSON.",
               "format": {"type": "grammar", "syntax": "lark",
                          "definition": 'start: begin_patch hunk+ end_patch\nbegin_patch: "*** Begin Patch" LF'}}
PATCH = '*** Begin Patch\n*** Add File: a.txt\n+say "hi"\n*** End Patch\n'


async def test_codex_s_freeform_tool_reaches_claude_as_a_function_and_comes_back_as_a_custom_call(gateway,
                                                                                                 anthropic_upstream):
    from tests.fakes.anthropic_upstream import Reply

    api = await _wired(gateway, anthropic_upstream)
    anthropic_upstream.reply_next(Reply(tool_uses=[("apply_patch", {"input": PATCH})]), times=2)
    resp = await api.responses.create(model="claude-haiku-4-5", input="add a.txt", tools=[APPLY_PATCH, TOOLS[2]],  # type: ignore[list-item]
                                      store=False)
    sent = anthropic_upstream.last.json()["tools"][0]
    assert sent["name"] == "apply_patch" and sent["input_schema"]["properties"] == {"input": {"type": "string"}}
    assert "begin_patch" in sent["description"]  # the grammar the input follows
    call = next(item for item in resp.output if item.type == "custom_tool_call")
    assert (call.name, call.input) == ("apply_patch", PATCH)

    events = [event async for event in await api.responses.create(
        model="claude-haiku-4-5", input="add a.txt", tools=[APPLY_PATCH], store=False, stream=True)]  # type: ignore[list-item]
    kinds = [event.type for event in events]
    assert "response.function_call_arguments.delta" not in kinds
    done = next(event for event in events if event.type == "response.custom_tool_call_input.done")
    assert done.input == PATCH
    item = next(event.item for event in events if event.type == "response.output_item.done")
    assert (item.type, item.input) == ("custom_tool_call", PATCH)  # type: ignore[union-attr]

    # A client may force the custom tool: it is forced as the function it goes as.
    forced = await api.responses.create(model="claude-haiku-4-5", input="add a.txt", tools=[APPLY_PATCH, TOOLS[2]],  # type: ignore[list-item]
                                        tool_choice={"type": "custom", "name": "apply_patch"}, store=False)
    assert anthropic_upstream.last.json()["tool_choice"] == {"type": "tool", "name": "apply_patch"}
    assert forced.output[-1].type == "custom_tool_call"

    # The call and its output in Codex's next request reach Claude as a tool call and its result.
    history = [{"role": "user", "content": "add a.txt"},
               {"type": "custom_tool_call", "call_id": call.call_id, "name": "apply_patch", "input": PATCH},
               {"type": "custom_tool_call_output", "call_id": call.call_id, "output": "Success. Updated: A a.txt"}]
    answer = await api.responses.create(model="claude-haiku-4-5", input=history, tools=[APPLY_PATCH], store=False)  # type: ignore[arg-type, list-item]
    assert answer.output_text
    turns = anthropic_upstream.last.json()["messages"]
    assert turns[1]["content"][-1] == {"type": "tool_use", "id": call.call_id, "name": "apply_patch",
                                       "input": {"input": PATCH}}
    assert turns[2]["content"][0]["tool_use_id"] == call.call_id
