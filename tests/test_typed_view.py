"""The codecs' typed views (protocols/typed_view.py) against their own path (parse_json + validate).

The typed view is a fast path only: on every body it must give what the codec's own path gives,
the same (model, stream) and forwarded bytes, or the same error. The corpus: the benchmark's agent
bodies, requests shaped like those of the usual clients, and those mutated field by field (other
types, out-of-range numbers, deep nesting, unknown fields, invalid UTF-8, numbers orjson refuses).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import orjson
import pytest

from bench.workloads import AGENT_80, AGENT_150, agent_chat_body, agent_messages_body, agent_responses_body
from modelgate.errors import GatewayError
from modelgate.gateway.inference import parse_json, read_request
from modelgate.protocols.body import NOT_DECODED, forward, whole
from modelgate.protocols.chat import ChatCodec
from modelgate.protocols.messages import MID_CONVERSATION_SYSTEM_BETA, MessagesCodec
from modelgate.protocols.responses import ResponsesCodec

CHAT, MESSAGES, RESPONSES = ChatCodec(), MessagesCodec(), ResponsesCodec()
CAPTURES = Path(__file__).parent / "captures"
VERSION = {b"anthropic-version": b"2023-06-01"}
WITH_BETA = {**VERSION, b"anthropic-beta": MID_CONVERSATION_SYSTEM_BETA.encode()}

SCHEMA = {"type": "object", "properties": {"path": {"type": "string", "description": "Where"},
                                           "limit": {"type": "integer", "minimum": 1, "maximum": 2000}},
          "required": ["path"], "additionalProperties": False}

CHAT_BODIES = [
    {"model": "gpt-x", "messages": [{"role": "user", "content": "hi"}]},
    {"model": "gpt-x", "stream": True, "stream_options": {"include_usage": False}, "temperature": 0.2, "top_p": 1,
     "max_completion_tokens": 100, "stop": ["\n"], "seed": 7, "n": 1, "user": "u", "parallel_tool_calls": False,
     "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": SCHEMA, "strict": True}},
     "messages": [
         {"role": "system", "content": [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}]},
         {"role": "developer", "content": "dev"},
         {"role": "user", "content": [{"type": "text", "text": "q"}], "name": "me"},
         {"role": "assistant", "content": None, "reasoning_content": "think",
          "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
         {"role": "tool", "tool_call_id": "c1", "content": "result é ☃"},
     ],
     "tools": [{"type": "function", "function": {"name": "read", "description": "Read", "parameters": SCHEMA}}],
     "tool_choice": {"type": "function", "function": {"name": "read"}}},
    {"model": "gpt-x", "messages": [{"role": "user", "content": "hi"}], "tool_choice": "read",
     "tools": [{"type": "function", "function": {"name": "read"}}], "metadata": {"k": "v"}, "stream": None},
]

MESSAGES_BODIES = [
    {"model": "claude-x", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]},
    {"model": "claude-x", "max_tokens": 1024, "stream": True, "temperature": 1, "top_k": 5, "top_p": 0.5,
     "stop_sequences": ["END"], "metadata": {"user_id": "u1"}, "thinking": {"type": "enabled", "budget_tokens": 2000},
     "system": [{"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
     "tools": [{"name": "Read", "description": "Read a file", "input_schema": SCHEMA,
                "cache_control": {"type": "ephemeral"}},
               {"type": "bash_20250124", "name": "bash"}],
     "tool_choice": {"type": "auto", "disable_parallel_tool_use": True},
     "messages": [
         {"role": "user", "content": [
             {"type": "text", "text": "look"},
             {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
             {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
             {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "doc"}}]},
         {"role": "assistant", "content": [
             {"type": "thinking", "thinking": "hmm", "signature": "sig"},
             {"type": "redacted_thinking", "data": "xx"},
             {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"path": "a.py"}}]},
         {"role": "user", "content": [
             {"type": "tool_result", "tool_use_id": "toolu_1", "is_error": False,
              "content": [{"type": "text", "text": "line 1 ✓"}], "cache_control": {"type": "ephemeral"}},
             {"type": "text", "text": "go on"}]},
         {"role": "assistant", "content": ""},
     ]},
    {"model": "claude-x", "max_tokens": 5, "messages": [
        {"role": "user", "content": "a"},
        # Claude Code 2.1.330 sends its effort on such an entry too (tests/test_claude_code_e2e.py's run).
        {"role": "system", "content": [{"type": "text", "text": "mid-conversation"}], "output_config": {"effort": "medium"}},
        {"role": "user", "content": "b"}]},
]

RESPONSES_BODIES = [
    {"model": "gpt-x", "input": "hi"},
    {"model": "gpt-x", "instructions": "be brief", "store": False, "stream": True, "include": ["reasoning.encrypted_content"],
     "prompt_cache_key": "k", "parallel_tool_calls": True, "max_output_tokens": 50, "temperature": 1.5, "top_p": 0.9,
     "reasoning": {"effort": "high", "summary": "auto"}, "metadata": {"a": "b"},
     "text": {"format": {"type": "json_schema", "name": "out", "schema": SCHEMA, "strict": True}, "verbosity": "low"},
     "tools": [{"type": "function", "name": "read", "description": "Read", "parameters": SCHEMA, "strict": False},
               {"type": "web_search"}],
     "tool_choice": {"type": "function", "name": "read"},
     "input": [
         {"role": "user", "content": [{"type": "input_text", "text": "q"},
                                      {"type": "input_image", "image_url": "https://x/a.png", "detail": "auto"}]},
         {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "s"}],
          "content": [], "encrypted_content": "enc"},
         {"type": "message", "role": "assistant", "id": "m1", "status": "completed",
          "content": [{"type": "output_text", "text": "a", "annotations": [
              {"type": "url_citation", "url": "https://x/", "title": "t", "start_index": 0, "end_index": 1},
              {"type": "file_citation", "file_id": "f1", "filename": "a.pdf", "index": 2}]}]},
         {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "read", "arguments": "{}"},
         {"type": "function_call_output", "call_id": "c1", "output": "done"},
         {"type": "message", "role": "developer", "content": "dev"},
     ]},
]

# Fields real clients send that the bodies above lack, as the e2e tests' runs of the CLIs sent them
# (claude-cli 2.1.330 in test_claude_code_e2e.py, codex_exec 0.169.0 in test_responses_clients.py) and
# as ../shared/field-notes.md lists them. Each once fell back to the codec's own path.
HEX_ID = "241c38d9-f6a8-482b-a88d-72e61340dbc0"  # "2e613..." reads like an exponent to a byte scan
CLAUDE_CODE_BODY = {
    "model": "claude-opus-5-5", "max_tokens": 128000, "stream": True,
    "metadata": {"user_id": json.dumps({"device_id": "09c7", "account_uuid": "", "session_id": HEX_ID})},
    "thinking": {"type": "adaptive", "display": "updates"},
    "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
    "output_config": {"effort": "medium"},
    "system": [{"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.330.e87; cc_entrypoint=sdk-cli;"},
               {"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}},
               {"type": "text", "text": "Long instructions.", "cache_control": {"type": "ephemeral"}}],
    "tools": [{"name": "Read", "description": "Read a file", "input_schema": SCHEMA},
              {"name": "DeferredToolPlaceholder", "description": "Keeps deferred tool loading active.",
               "input_schema": {"type": "object", "properties": {}}, "defer_loading": True}],
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "fix it", "cache_control": {"type": "ephemeral"}}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "look first", "signature": "sig"},
            {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"path": "a.py", "commit": HEX_ID}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok", "cache_control": {"type": "ephemeral"}}]},
    ],
}
VENDOR_TOOLS_BODY = {
    "model": "claude-x", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}],
    "tools": [{"type": "computer_20250124", "name": "computer", "display_width_px": 1024, "display_height_px": 768},
              {"type": "text_editor_20250728", "name": "str_replace_based_edit_tool", "max_characters": 10000}],
}
CODEX_BODY = {
    "model": "gpt-x", "stream": True, "store": False, "tool_choice": "auto", "parallel_tool_calls": True,
    "reasoning": {"summary": "auto"}, "include": ["reasoning.encrypted_content"], "prompt_cache_key": HEX_ID,
    "client_metadata": {"turn_id": HEX_ID, "x-codex-installation-id": HEX_ID},
    "instructions": "You are Codex.",
    "tools": [{"type": "function", "name": "exec_command", "description": "Run", "strict": False, "parameters": SCHEMA},
              {"type": "namespace", "name": "multi_agent_v1", "description": "Sub-agents.",
               "tools": [{"type": "function", "name": "close_agent", "description": "Close", "strict": False,
                          "parameters": SCHEMA}]},
              {"type": "web_search", "external_web_access": True}],
    "input": [
        {"type": "message", "id": "msg_1", "role": "user", "content": [{"type": "input_text", "text": "write it"}]},
        {"type": "function_call", "status": "completed", "id": "fc_1", "name": "exec_command",
         "arguments": "{\"cmd\":\"ls\"}", "call_id": "call_1"},
        {"type": "function_call_output", "id": "fco_1", "call_id": "call_1", "output": "a.py"},
    ],
}
OPENCODE_BODY = {
    "model": "gpt-x", "max_tokens": 32000, "stream": True, "stream_options": {"include_usage": True},
    "messages": [{"role": "system", "content": "You are opencode.", "cache_control": {"type": "ephemeral"}},
                 {"role": "user", "content": [{"type": "text", "text": "see file"}],
                  "cache_control": {"type": "ephemeral"}}],
}
# An agent loop on the OpenAI SDK appends each answer's message as the next assistant turn, with the
# fields the SDK's message model holds (AsyncOpenAI/Python 3.54 in test_sdk_replay.py).
SDK_LOOP_BODY = {
    "model": "gpt-x", "tools": CHAT_BODIES[1]["tools"],
    "messages": [{"role": "user", "content": "call tool please"},
                 {"content": None, "refusal": None, "role": "assistant", "annotations": None, "audio": None,
                  "function_call": None, "tool_calls": [{"id": "call_0", "type": "function",
                                                         "function": {"name": "read", "arguments": "{}"}}]},
                 {"role": "tool", "tool_call_id": "call_0", "content": "sunny"},
                 {"role": "assistant", "content": "Sunny.", "refusal": None, "audio": {"id": "audio_1"},
                  "annotations": [{"type": "url_citation", "url_citation": {
                      "url": "https://example.com", "title": "t", "start_index": 0, "end_index": 5}}]},
                 {"role": "user", "content": "thanks"}],
}
# The OpenAI Node SDK's tool runner (openai 6.30, runTools) sends its answer's message back with its parsing
# helper's fields (tests/test_node_sdks.py's run).
NODE_RUNNER_BODY = {
    "model": "gpt-x", "tool_choice": "auto", "tools": CHAT_BODIES[1]["tools"],
    "messages": [{"role": "user", "content": "weather?"},
                 {"role": "assistant", "content": "Let me check.", "refusal": None, "reasoning_content": "A tool.",
                  "tool_calls": [{"id": "call_1", "type": "function", "function": {
                      "name": "read", "arguments": "{}", "parsed_arguments": None}}], "parsed": None},
                 {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}],
}
CHAT_BODIES += [OPENCODE_BODY, SDK_LOOP_BODY, NODE_RUNNER_BODY]
MESSAGES_BODIES += [CLAUDE_CODE_BODY, VENDOR_TOOLS_BODY]


def _answered_tool_use() -> dict:
    """The tool_use block of a real messages stream, its input put together from the deltas as the SDK
    does (tests/captures/README.md): the service writes `caller` in it."""
    events = [orjson.loads(line[6:]) for line in (CAPTURES / "anthropic_messages_stream_tool_use.sse").read_bytes().splitlines()
              if line.startswith(b"data: ")]
    block = next(e["content_block"] for e in events if e["type"] == "content_block_start"
                 and e["content_block"]["type"] == "tool_use")
    partial = "".join(e["delta"]["partial_json"] for e in events if e["type"] == "content_block_delta"
                      and e["delta"]["type"] == "input_json_delta")
    return {**block, "input": orjson.loads(partial)}


# The Anthropic SDK's agent loop (anthropic 2.14): each answer's blocks sent back as the assistant turn,
# with a server tool's call and result (web search) and text citing it.
SDK_MESSAGES_LOOP_BODY = {
    "model": "claude-x", "max_tokens": 1024, "tools": [{"name": "get_weather", "input_schema": SCHEMA},
                                                        {"type": "web_search_20250305", "name": "web_search"}],
    "messages": [
        {"role": "user", "content": "weather in SF, and news?"},
        {"role": "assistant", "content": [
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "SF news"},
             "caller": {"type": "direct"}},
            {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": [
                {"type": "web_search_result", "url": "https://x/", "title": "News", "encrypted_content": "abc",
                 "page_age": "1 day"}]},
            {"type": "text", "text": "Fog.", "citations": [
                {"type": "web_search_result_location", "url": "https://x/", "title": "News",
                 "encrypted_index": "Eo8B", "cited_text": "Fog in SF"},
                {"type": "char_location", "cited_text": "f", "document_index": 0, "document_title": None,
                 "start_char_index": 0, "end_char_index": 1, "file_id": None}]},
            _answered_tool_use()]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": _answered_tool_use()["id"], "content": "sunny"}]},
    ],
}
# The same loop with the other server tools, their results in the SDK's shapes (anthropic 2.14:
# WebFetchToolResultBlockParam, CodeExecutionToolResultBlockParam, BashCodeExecutionToolResultBlockParam).
SDK_SERVER_TOOLS_LOOP_BODY = {
    "model": "claude-x", "max_tokens": 1024,
    "tools": [{"type": "web_fetch_20250910", "name": "web_fetch"}, {"type": "code_execution_20250825", "name": "code_execution"}],
    "messages": [
        {"role": "user", "content": "fetch the page and count its words"},
        {"role": "assistant", "content": [
            {"type": "server_tool_use", "id": "srvtoolu_2", "name": "web_fetch", "input": {"url": "https://x/a"}},
            {"type": "web_fetch_tool_result", "tool_use_id": "srvtoolu_2", "content": {
                "type": "web_fetch_result", "url": "https://x/a", "retrieved_at": "2026-11-25T10:00:00Z",
                "content": {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "a b c"}}}},
            {"type": "server_tool_use", "id": "srvtoolu_3", "name": "bash_code_execution", "input": {"command": "wc -w"}},
            {"type": "bash_code_execution_tool_result", "tool_use_id": "srvtoolu_3", "content": {
                "type": "bash_code_execution_result", "stdout": "3\n", "stderr": "", "return_code": 0, "content": []}},
            {"type": "code_execution_tool_result", "tool_use_id": "srvtoolu_4", "content": {
                "type": "code_execution_result", "stdout": "3", "stderr": "", "return_code": 0, "content": []}},
            {"type": "text", "text": "Three words."}]},
        {"role": "user", "content": "thanks"},
    ],
}
# A client's own tool search (the tool search tool, deferred tools): its result loads tools by reference
# (anthropic 2.14 ToolReferenceBlockParam); a toolset member's result names its toolset.
TOOL_SEARCH_BODY = {
    "model": "claude-x", "max_tokens": 1024,
    "tools": [{"name": "tool_search", "input_schema": SCHEMA},
              {"name": "mcp__github__create_issue", "input_schema": SCHEMA, "defer_loading": True}],
    "messages": [
        {"role": "user", "content": "open an issue"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "tool_search", "input": {"path": "issue"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [
            {"type": "text", "text": "1 tool found"}, {"type": "tool_reference", "tool_name": "mcp__github__create_issue"}]}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_2", "name": "mcp__github__create_issue",
                                           "input": {"path": "x"}, "toolset_name": "github"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_2", "content": "#12",
                                      "toolset_name": "github"}]},
    ],
}
MESSAGES_BODIES += [SDK_MESSAGES_LOOP_BODY, SDK_SERVER_TOOLS_LOOP_BODY, TOOL_SEARCH_BODY]
RESPONSES_BODIES.append(CODEX_BODY)
# Codex on a gpt-5 slug (codex_exec 0.169.0): its freeform apply_patch, and calls of it and of a namespace's tool.
CODEX_FREEFORM_BODY = {
    **CODEX_BODY,
    "tools": [*CODEX_BODY["tools"], {"type": "custom", "name": "apply_patch", "description": "Edit files.",
                                     "format": {"type": "grammar", "syntax": "lark", "definition": "start: LF"}}],
    "input": [*CODEX_BODY["input"],
              {"type": "custom_tool_call", "status": "completed", "id": "ctc_1", "call_id": "call_2",
               "name": "apply_patch", "input": "*** Begin Patch\n*** End Patch\n"},
              {"type": "custom_tool_call_output", "call_id": "call_2", "output": "Success."},
              {"type": "function_call", "id": "fc_3", "call_id": "call_3", "name": "close_agent",
               "namespace": "multi_agent_v1", "arguments": "{}"},
              {"type": "function_call_output", "call_id": "call_3", "output": "closed"}],
}
RESPONSES_BODIES.append(CODEX_FREEFORM_BODY)
# The AI SDK's Responses input (@ai-sdk/openai 3.0, convertToOpenAIResponsesInput): messages without
# `type`, beside typed function calls and their outputs.
AI_SDK_RESPONSES_BODY = {
    "model": "gpt-x", "stream": True, "max_output_tokens": 32000, "tool_choice": "auto",
    "tools": [{"type": "function", "name": "read", "description": "Read", "parameters": SCHEMA, "strict": False}],
    "input": [
        {"role": "system", "content": "You are opencode."},
        {"role": "user", "content": [{"type": "input_text", "text": "see file"}]},
        {"role": "assistant", "content": [{"type": "output_text", "text": "Reading."}], "id": "msg_1"},
        {"type": "function_call", "call_id": "call_1", "name": "read", "arguments": "{\"path\":\"a.py\"}", "id": "fc_1"},
        {"type": "function_call_output", "call_id": "call_1", "output": "print(1)"},
    ],
}
RESPONSES_BODIES.append(AI_SDK_RESPONSES_BODY)


def _answered_items() -> list[dict]:
    """The output items of a real Responses stream (gpt-5.3-codex: messages with `phase`, output text with
    `annotations` and `logprobs`), as an agent loop sends them back (tests/captures/README.md)."""
    events = [orjson.loads(line) for line in (CAPTURES / "openai_responses_stream_phase.jsonl").read_bytes().splitlines()]
    return [event["item"] for event in events if event["type"] == "response.output_item.done"]


ANSWERED_ITEMS = _answered_items()
# The OpenAI SDK's agent loop on the Responses API: the answer's items sent back as the next turn's input.
# One output text carries logprobs in the SDK's shape (openai 3.57, response_output_text.Logprob).
SDK_RESPONSES_LOOP_BODY = {
    "model": "gpt-x", "input": [
        {"role": "user", "content": "news?"}, *ANSWERED_ITEMS,
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hi", "annotations": [],
                                                              "logprobs": [{"token": "Hi", "bytes": [72, 105], "logprob": -0.01,
                                                                            "top_logprobs": [{"token": "Hi", "bytes": [72, 105], "logprob": -0.01}]}]}]},
        {"role": "user", "content": "more"}],
}
# Codex sends its assistant messages back with their phase (codex-rs ResponseItem::Message), its output text bare.
CODEX_PHASE_BODY = {**CODEX_BODY, "input": [
    *CODEX_BODY["input"],
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Listing."}], "phase": "commentary"},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done."}], "phase": "final_answer"},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "thanks"}]}]}
# Once its model searched the web or its conversation was compacted, Codex sends those items back on every later
# turn: web search calls with their actions and the vendor's compaction item, as the service wrote them
# (tests/captures/README.md), and as the SDK types them (openai 3.57 ResponseFunctionWebSearchParam,
# ResponseCompactionItemParamParam); the open_page one as Codex writes one it has no id for (codex-rs
# ResponseItem::WebSearchCall skips an unset id).
SEARCHED_AND_COMPACTED = orjson.loads((CAPTURES / "openai_responses_web_search_compaction.json").read_bytes())
# Codex's `max` and `ultra` presets on gpt-5.6 send effort max (openai/codex#30585); the OpenAI SDK (3.57) has the
# reasoning `mode` ("pro" on gpt-5.6-sol, the vendor's reasoning guide) and `generate_summary`, summary's old name.
CODEX_MAX_PRO_BODY = {**CODEX_BODY, "reasoning": {"effort": "max", "summary": "auto", "mode": "pro"}}
SDK_OLD_SUMMARY_BODY = {**CODEX_BODY, "reasoning": {"effort": "high", "generate_summary": "concise"}}

CODEX_SEARCH_COMPACTED_BODY = {**CODEX_BODY, "input": [
    SEARCHED_AND_COMPACTED[2],
    *CODEX_BODY["input"],
    *SEARCHED_AND_COMPACTED[:2],
    {"type": "web_search_call", "id": "ws_1", "status": "completed",
     "action": {"type": "search", "query": "python 3.14 release", "queries": ["python 3.14 release"],
                "sources": [{"type": "url", "url": "https://www.python.org/downloads/"}]}},
    {"type": "web_search_call", "status": "completed", "action": {"type": "open_page", "url": "https://peps.python.org/"}},
    {"type": "web_search_call", "id": "ws_3", "status": "completed",
     "action": {"type": "find_in_page", "url": "https://peps.python.org/", "pattern": "3.14"}},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Found it."}], "phase": "final_answer"},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "thanks"}]}]}
RESPONSES_BODIES += [SDK_RESPONSES_LOOP_BODY, CODEX_PHASE_BODY, CODEX_SEARCH_COMPACTED_BODY]

# Values each field is replaced with in turn; markers stand for JSON text orjson cannot write.
REPLACEMENTS: list[Any] = [
    None, True, False, 0, -1, 1, 2.5, 3, 2**63, 2**64, 10**30, "", "x", "@INF", "@BADUTF8", "@SURROGATE", "@DEEP",
    "@DEEPISH", "@DEEPEST", [], [1], ["x"], {}, {"type": "text"}, {"type": "function", "name": "read"},
    # names the codecs give a meaning to: roles, types, choices
    "user", "assistant", "system", "developer", "tool", "text", "image", "tool_use", "tool_result", "custom",
    "function", "message", "reasoning", "function_call", "input_image", "refusal", "json_schema", "auto", "read",
]
MARKERS = {b'"@INF"': b"1e400", b'"@BADUTF8"': b'"\xff"', b'"@SURROGATE"': b'"\\ud800"',
           b'"@DEEP"': b"[" * 300 + b"]" * 300, b'"@DEEPISH"': b"[" * 250 + b"]" * 250,
           b'"@DEEPEST"': b"[" * 2000 + b"]" * 2000}


def encode(value: Any) -> bytes:
    raw = json.dumps(value, ensure_ascii=False).encode()
    for marker, text in MARKERS.items():
        raw = raw.replace(marker, text)
    return raw


def paths(value: Any, prefix: tuple = ()) -> Iterator[tuple]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield (*prefix, key)
            yield from paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield (*prefix, index)
            yield from paths(item, (*prefix, index))


def replaced(value: Any, path: tuple, new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    out = dict(value) if isinstance(value, dict) else list(value)
    if not rest and new is DELETE:
        del out[head]
    else:
        out[head] = replaced(value[head], rest, new)
    return out


DELETE = object()
UNKNOWN = object()


def mutations(body: dict[str, Any]) -> Iterator[bytes]:
    yield encode(body)
    yield orjson.dumps(body, option=orjson.OPT_INDENT_2)
    raw = orjson.dumps(body)
    yield raw[:-1] + b',"model":"other"}'  # a duplicate key: the last one counts
    yield raw[:-1] + b',"model":5}'
    yield b'{"model":5,' + raw[1:]
    yield raw + b"x"
    yield b"\xef\xbb\xbf" + raw
    yield raw.replace(b'"', b"'", 1)
    for path in paths(body):
        for new in (*REPLACEMENTS, DELETE):
            yield encode(replaced(body, path, new))
        parent = path[:-1]
        target = body
        for step in parent:
            target = target[step]
        if isinstance(target, dict):
            yield encode(replaced(body, parent, {**target, "zz_unknown": 1}))


def outcome(codec: Any, raw: bytes, headers: dict[bytes, bytes], typed: bool) -> tuple:
    """What the gateway makes of a body: the error, or (model, stream), what it forwards on
    each route and the whole body a conversion reads."""
    try:
        if typed:
            body, model, stream = read_request(codec, raw, headers)
        else:
            body = parse_json(raw)
            model, stream = codec.validate(body, headers)
    except GatewayError as err:
        return ("error", err.status, err.message, codec.validation_body(err.message))
    changes = [{"model": model}, {"model": "renamed"},
               {"model": model, "stream_options": {**(body.get("stream_options") or {}), "include_usage": True}}]
    decoded = whole(body)
    head = {name: value for name, value in body.items() if value is not NOT_DECODED}
    assert all(type(decoded[name]) is type(value) and decoded[name] == value for name, value in head.items())
    return ("ok", model, stream, [forward(body, change) for change in changes], list(decoded.items()))


CORPUS = [
    *[(CHAT, agent_chat_body(shape, "m", stream), {}) for shape in (AGENT_150, AGENT_80) for stream in (False, True)],
    *[(MESSAGES, agent_messages_body(shape, "m", stream), VERSION) for shape in (AGENT_150, AGENT_80)
      for stream in (False, True)],
    *[(RESPONSES, agent_responses_body(shape, "m", stream), {}) for shape in (AGENT_150, AGENT_80)
      for stream in (False, True)],
]


@pytest.mark.parametrize("codec,raw,headers", CORPUS, ids=lambda v: getattr(v, "protocol", None) and v.protocol.value)
def test_agent_bodies_take_the_typed_view_with_the_same_result(codec: Any, raw: bytes, headers: dict) -> None:
    assert codec.read_typed(raw, headers) is not None  # the usual request never falls back
    assert outcome(codec, raw, headers, typed=True) == outcome(codec, raw, headers, typed=False)


@pytest.mark.parametrize("codec,bodies,headers", [
    (CHAT, CHAT_BODIES, {}), (MESSAGES, MESSAGES_BODIES, WITH_BETA), (MESSAGES, MESSAGES_BODIES, VERSION),
    (RESPONSES, RESPONSES_BODIES, {}),
], ids=["chat", "messages-beta", "messages", "responses"])
def test_mutated_bodies_give_the_same_result_or_error(codec: Any, bodies: list, headers: dict) -> None:
    taken = 0
    for body in bodies:
        for raw in mutations(body):
            typed = outcome(codec, raw, headers, typed=True)
            assert typed == outcome(codec, raw, headers, typed=False), raw[:300]
            taken += codec.read_typed(raw, headers) is not None
    assert taken > 100  # the view knows the mutations validate accepts, not only the bodies as given


def test_the_usual_requests_take_the_typed_view() -> None:
    for codec, bodies, headers in ((CHAT, CHAT_BODIES[:2], {}), (MESSAGES, MESSAGES_BODIES, WITH_BETA),
                                   (RESPONSES, RESPONSES_BODIES, {})):
        for body in bodies:
            assert codec.read_typed(orjson.dumps(body), headers) is not None, body


@pytest.mark.parametrize("codec,body,headers", [
    (MESSAGES, CLAUDE_CODE_BODY, {**VERSION, b"anthropic-beta": b"claude-code-20250219,effort-2025-11-24"}),
    (MESSAGES, VENDOR_TOOLS_BODY, VERSION), (MESSAGES, SDK_MESSAGES_LOOP_BODY, VERSION),
    (MESSAGES, SDK_SERVER_TOOLS_LOOP_BODY, VERSION), (MESSAGES, TOOL_SEARCH_BODY, VERSION), (RESPONSES, CODEX_BODY, {}), (RESPONSES, CODEX_FREEFORM_BODY, {}),
    (RESPONSES, AI_SDK_RESPONSES_BODY, {}), (RESPONSES, SDK_RESPONSES_LOOP_BODY, {}), (RESPONSES, CODEX_PHASE_BODY, {}),
    (RESPONSES, CODEX_SEARCH_COMPACTED_BODY, {}), (RESPONSES, CODEX_MAX_PRO_BODY, {}), (RESPONSES, SDK_OLD_SUMMARY_BODY, {}),
    (CHAT, OPENCODE_BODY, {}), (CHAT, SDK_LOOP_BODY, {}), (CHAT, NODE_RUNNER_BODY, {}),
], ids=["claude-code", "vendor-tools", "anthropic-sdk-loop", "anthropic-server-tools-loop", "tool-search", "codex", "codex-freeform", "ai-sdk-responses", "openai-sdk-responses-loop",
        "codex-phase", "codex-search-compacted", "codex-max-pro", "sdk-generate-summary", "opencode", "openai-sdk-loop", "openai-node-runner"])
def test_real_clients_requests_take_the_typed_view_with_the_same_result(codec: Any, body: dict, headers: dict) -> None:
    raw = orjson.dumps(body)
    assert codec.read_typed(raw, headers) is not None
    assert outcome(codec, raw, headers, typed=True) == outcome(codec, raw, headers, typed=False)


def test_the_tool_definitions_found_sound_are_remembered_within_bounds() -> None:
    from modelgate.protocols import typed_view

    for i in range(3 * typed_view._DEFINITIONS_KEPT):
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}],
                "tools": [{"type": "function", "function": {"name": "f", "parameters": {"description": str(i)}}}]}
        assert CHAT.read_typed(orjson.dumps(body), {}) is not None
    assert len(typed_view._CHECKED_DEFINITIONS[typed_view.sound]) == typed_view._DEFINITIONS_KEPT
