"""Validation of a chat-completions request (spec 4.1, spec-notes): the 7.2 errors, word for word."""

from __future__ import annotations

from typing import Any

from modelgate.errors import invalid_request
from modelgate.protocols.base import is_int, is_number, requested_model
from modelgate.protocols.paths import Path, indexed

ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})

_NUMBER = (int, float)


def validate(body: Any) -> tuple[str, bool]:
    """(model, stream) of a valid request; a bare tool name in `tool_choice` is rewritten to the object form."""
    model = requested_model(body)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise invalid_request("'messages' is required and must be a non-empty array")
    for index, message in enumerate(messages):
        _validate_message(index, message)
    for name in ("max_tokens", "max_completion_tokens"):
        value = body.get(name)
        if value is not None and (not is_int(value) or value < 1):
            raise invalid_request(f"'{name}' must be a positive integer")
    _check_number(body, "temperature", 0, 2)
    _check_number(body, "top_p", 0, 1)
    _check_number(body, "frequency_penalty", -2, 2)
    _check_number(body, "presence_penalty", -2, 2)
    stop = body.get("stop")
    if stop is not None and not isinstance(stop, str):
        if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
            raise invalid_request("'stop' must be an array of strings")
    response_format = body.get("response_format")
    if response_format is not None:
        if not isinstance(response_format, dict) or response_format.get("type") not in (
            "text",
            "json_object",
            "json_schema",
        ):
            raise invalid_request("'response_format' must be {type: 'json_object'} (or 'text', 'json_schema')")
    seed = body.get("seed")
    if seed is not None and not is_int(seed):
        raise invalid_request("'seed' must be an integer")
    tool_names: set[str] = set()
    if body.get("tools") is not None:
        tool_names = _validate_tools(body["tools"])
    choice = body.get("tool_choice")
    if choice is not None:
        _validate_tool_choice(choice, tool_names)
        if isinstance(choice, str) and choice not in ("auto", "none", "required"):
            # Spec 4.1 allows a bare tool name; no chat-completions service accepts one, so the
            # pass-through route gets the object form too.
            body["tool_choice"] = {"type": "function", "function": {"name": choice}}
    stream = body.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise invalid_request("'stream' must be a boolean")
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise invalid_request("'stream_options' must be an object")
    n = body.get("n")
    if n is not None and (not is_int(n) or n < 1):
        raise invalid_request("'n' must be a positive integer")
    return model, stream




def _check_number(body: dict[str, Any], name: str, low: float, high: float) -> None:
    value = body.get(name)
    if value is None:
        return
    if not is_number(value) or not low <= value <= high:
        raise invalid_request(f"'{name}' must be a number between {low:g} and {high:g}")


def _validate_message(index: int, message: Any) -> None:
    where = ("messages", index)
    if not isinstance(message, dict):
        raise invalid_request(f"'{indexed(where)}' must be an object")
    role = message.get("role")
    if not isinstance(role, str) or role not in ROLES:
        raise invalid_request(f"'{indexed(where)}.role' must be one of system, user, assistant, tool")
    content = message.get("content")
    if isinstance(content, list):
        _validate_text_parts(where, content)
    if role == "assistant":
        tool_calls = message.get("tool_calls")
        if content is None and not tool_calls:
            raise invalid_request(f"'{indexed(where)}.content' is required unless 'tool_calls' is given")
        if tool_calls is not None:
            _validate_tool_calls(where, tool_calls)
    elif not isinstance(content, (str, list)):
        raise invalid_request(f"'{indexed(where)}.content' must be a string or an array of text parts")
    if content is not None and not isinstance(content, (str, list)):
        raise invalid_request(f"'{indexed(where)}.content' must be a string or an array of text parts")
    if role == "tool" and not isinstance(message.get("tool_call_id"), str):
        raise invalid_request(f"'{indexed(where)}.tool_call_id' is required for role 'tool'")
    name = message.get("name")
    if name is not None and not isinstance(name, str):
        raise invalid_request(f"'{indexed(where)}.name' must be a string")


def _validate_text_parts(where: Path, parts: list[Any]) -> None:
    # Spec 8: no multimodal input on this protocol; arrays of text parts (opencode, the SDKs'
    # typed helpers) carry nothing a string could not.
    for i, part in enumerate(parts):
        if not isinstance(part, dict) or part.get("type") != "text":
            raise invalid_request(
                f"'{indexed(where)}.content[{i}]' must be a text part: content arrays may hold only "
                "{type: 'text', text} parts on the chat-completions protocol (no images, spec 8); "
                "use the messages protocol for images"
            )
        if not isinstance(part.get("text"), str):
            raise invalid_request(f"'{indexed(where)}.content[{i}].text' must be a string")


def _validate_tool_calls(where: Path, tool_calls: Any) -> None:
    if not isinstance(tool_calls, list):
        raise invalid_request(f"'{indexed(where)}.tool_calls' must be an array")
    for i, call in enumerate(tool_calls):
        function = call.get("function") if isinstance(call, dict) else None
        if (
            not isinstance(function, dict)
            or not isinstance(call.get("id"), str)
            or not isinstance(function.get("name"), str)
            or not isinstance(function.get("arguments", ""), str)
        ):
            raise invalid_request(
                f"'{indexed(where)}.tool_calls[{i}]' must be {{id, type: 'function', function: {{name, arguments}}}}"
            )


def _validate_tools(tools: Any) -> set[str]:
    if not isinstance(tools, list):
        raise invalid_request("'tools' must be an array")
    names = set()
    for i, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(function, dict):
            raise invalid_request(f"'tools[{i}]' must be {{type: 'function', function: {{name, parameters}}}}")
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise invalid_request(f"'tools[{i}].function.name' must be a non-empty string")
        parameters = function.get("parameters")
        if parameters is not None and not isinstance(parameters, dict):
            raise invalid_request(f"'tools[{i}].function.parameters' must be a JSON-schema object")
        description = function.get("description")
        if description is not None and not isinstance(description, str):
            raise invalid_request(f"'tools[{i}].function.description' must be a string")
        names.add(name)
    return names


def _validate_tool_choice(choice: Any, tool_names: set[str]) -> None:
    if isinstance(choice, str):
        if choice in ("auto", "none", "required") or choice in tool_names:
            return
        raise invalid_request("'tool_choice' must be 'auto', 'none', 'required' or the name of a given tool")
    if isinstance(choice, dict):
        function = choice.get("function")
        name = function.get("name") if isinstance(function, dict) else None
        if choice.get("type") == "function" and isinstance(name, str) and name in tool_names:
            return
    raise invalid_request("'tool_choice' names a tool that is not in 'tools'")
