"""A refused element is named by its path in the body, in each protocol's own form, however deep it
sits (protocols/paths.py builds the path only for the error)."""

from __future__ import annotations

from typing import Any

import pytest

from modelgate.errors import GatewayError
from modelgate.protocols.chat import ChatCodec
from modelgate.protocols.messages import MessagesCodec
from modelgate.protocols.paths import dotted, indexed
from modelgate.protocols.responses import ResponsesCodec

HEADERS = {b"anthropic-version": b"2023-06-01"}
USER = {"role": "user", "content": "hi"}
TEXT = {"type": "input_text", "text": "t"}


def _refusal(codec: Any, body: dict[str, Any], convert: bool = False) -> str:
    with pytest.raises(GatewayError) as caught:
        codec.validate(body, HEADERS)
        if convert:
            codec.to_ir(body)
    assert caught.value.status == 400
    return caught.value.message


def test_paths_are_written_in_each_protocols_form():
    path = (((("messages", 3), "content"), 0), "source")
    assert dotted(path) == "messages.3.content.0.source"
    assert indexed(path) == "messages[3].content[0].source"
    assert dotted("system") == indexed("system") == "system"


@pytest.mark.parametrize(("body", "message"), [
    ({"input": [USER, {"type": "message", "role": "user", "content": [TEXT, {"type": "input_text"}]}]},
     "'input[1].content[1].text' must be a string"),
    ({"input": [USER, USER, {"type": "function_call_output", "call_id": "c", "output": [{"type": "x"}]}]},
     "'input[2].output[0].type' must be one of input_text, output_text, input_image, input_file, refusal"),
    ({"input": [USER, {"type": "function_call", "call_id": "c", "name": "f", "arguments": 1}]},
     "'input[1].arguments' must be a string"),
    ({"input": [USER, {"type": "reasoning", "summary": [{"type": "summary_text"}]}]},
     "'input[1].summary' must be an array of {type, text} parts"),
    ({"input": [USER], "tools": [{"type": "function", "name": "f"}, {"type": "function", "name": ""}]},
     "'tools[1].name' must be a non-empty string"),
    ({"input": [USER], "tools": [{"type": "namespace", "name": "n",
                                  "tools": [{"type": "function", "name": "f"}, {"type": "custom", "name": 2}]}]},
     "'tools[0].tools[1].name' must be a non-empty string"),
])
def test_responses_refusals_name_the_element(body, message):
    assert _refusal(ResponsesCodec(), {"model": "m", **body}) == message


def test_a_converted_responses_request_names_the_part_it_cannot_carry():
    body = {"model": "m", "input": [USER, {"role": "user", "content": [TEXT, {"type": "input_image", "file_id": "f"}]}]}
    assert _refusal(ResponsesCodec(), body, convert=True).startswith(
        "'input[1].content[1]' refers to an uploaded file ('file_id')")


@pytest.mark.parametrize(("body", "message"), [
    ({"messages": [USER, {"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "tool_use"}]}]},
     "messages.1.content.1.id: Field required (a string)"),
    ({"messages": [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text", "text": "r"},
                                                                {"type": "image", "source": {"type": "base64"}}]}]}]},
     "messages.0.content.0.content.1.source.media_type: Field required (a string)"),
    ({"messages": [USER, {"role": "assistant", "content": [{"type": "thinking", "thinking": "x", "signature": 1}]}]},
     "messages.1.content.0.signature: must be a string"),
    ({"messages": [USER], "system": [{"type": "text", "text": "s"}, {"type": "image"}]},
     "system.1: must be a text block {type: 'text', text: <string>}"),
    ({"messages": [USER], "tools": [{"name": "f", "input_schema": {}}, {"name": "g"}]},
     "tools.1.input_schema: Field required (a JSON schema object)"),
])
def test_messages_refusals_name_the_element(body, message):
    assert _refusal(MessagesCodec(), {"model": "m", "max_tokens": 8, **body}) == message


def test_a_converted_messages_request_names_the_tool_it_cannot_carry():
    body = {"model": "m", "max_tokens": 8, "messages": [USER],
            "tools": [{"name": "f", "input_schema": {}}, {"type": "computer_20250124", "name": "computer"}]}
    assert _refusal(MessagesCodec(), body, convert=True).startswith(
        "tools.1: the vendor's computer-use tool (computer_20250124)")


@pytest.mark.parametrize(("messages", "message"), [
    ([USER, {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text"}]}],
     "'messages[1].content[1].text' must be a string"),
    ([USER, {"role": "assistant", "content": None, "tool_calls": [{"id": "c"}]}],
     "'messages[1].tool_calls[0]' must be {id, type: 'function', function: {name, arguments}}"),
    ([USER, {"role": "tool", "content": "r"}], "'messages[1].tool_call_id' is required for role 'tool'"),
])
def test_chat_refusals_name_the_element(messages, message):
    assert _refusal(ChatCodec(), {"model": "m", "messages": messages}) == message


def test_a_converted_messages_request_names_the_document_it_cannot_carry():
    pdf = {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}}
    body = {"model": "m", "max_tokens": 8, "messages": [
        USER, {"role": "assistant", "content": "ok"},
        {"role": "user", "content": [{"type": "text", "text": "read"}, pdf]}]}
    assert _refusal(MessagesCodec(), body, convert=True).startswith("messages.2.content.1: document blocks")
    body["messages"][2]["content"] = [{"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text", "text": "r"}, pdf]}]
    body["messages"][1]["content"] = [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]
    assert _refusal(MessagesCodec(), body, convert=True).startswith("messages.2.content.0.content.1: document blocks")
