"""The `mock` provider kind: a deterministic chat-completions upstream inside the gateway.

For a first call without any provider key, and for users' own CI. It speaks the
chat-completions wire format from a small aiohttp server that the gateway starts
on 127.0.0.1 (random port) the first time a mock provider is routable, so calls
take the real upstream path: pooled client, timeouts, retries, breakers, streams.

Behaviour (docs/providers.md, "mock"):
- the answer echoes the last user message: `Mock answer from <model>: <text>`;
- with `tools` (and `tool_choice` not "none") and no tool result yet, it calls the
  chosen or first tool, with arguments filled from the tool's JSON schema;
- after a tool result it answers `Mock answer from <model>: the tool returned <result>`;
- usage counts whitespace-separated words (at least 1 each way);
- streams send one chunk per word, then usage when asked for.
Latency and errors come from provider options (`latency_ms`, `chunk_delay_ms`,
`error_status`, `error_every`, `error_message`) or the upstream model name
(`…-error-429…`, `…-slow-250…` = 250 ms before the answer).
"""

from __future__ import annotations

import asyncio
import logging
import re
import socket
import time
from collections import defaultdict
from typing import Any

import orjson

from modelgate.providers.base import Endpoint, UpstreamRequest
from modelgate.providers.openai_chat import OpenAIChatAdapter

log = logging.getLogger("modelgate.mock")

# What the provider record shows as base URL; never contacted (.invalid is a reserved name).
DISPLAY_BASE_URL = "http://mock.modelgate.invalid/v1"
OPTIONS_HEADER = "x-mock-options"
OPTION_NAMES = frozenset({"latency_ms", "chunk_delay_ms", "error_status", "error_every", "error_message"})

_ERROR_IN_NAME = re.compile(r"(?:^|[-_.])error-(\d{3})(?:$|[-_.])")
_SLOW_IN_NAME = re.compile(r"(?:^|[-_.])slow-(\d{1,6})(?:$|[-_.])")
_ERROR_KINDS = {
    400: ("invalid_request_error", None), 401: ("invalid_request_error", "invalid_api_key"),
    402: ("insufficient_quota", "insufficient_quota"), 404: ("invalid_request_error", "model_not_found"),
    429: ("rate_limit_error", "rate_limit_exceeded"), 500: ("server_error", None),
    503: ("server_error", "service_unavailable"),
}


class MockAdapter(OpenAIChatAdapter):
    """The chat-completions adapter, pointed at the in-process mock upstream."""

    def url(self, endpoint: Endpoint, upstream_model: str, reasoning: bool = False) -> str:
        return MOCK_UPSTREAM.base_url + self.chat_path

    def headers(self, endpoint: Endpoint) -> dict[str, str]:
        headers = super().headers(endpoint)
        options = {k: v for k, v in (endpoint.options or {}).items() if k in OPTION_NAMES}
        if options:
            headers[OPTIONS_HEADER] = orjson.dumps(options).decode()
        return headers

    def models_request(self, endpoint: Endpoint) -> UpstreamRequest:
        return UpstreamRequest("GET", MOCK_UPSTREAM.base_url + "/models", self.headers(endpoint))


# --- answers --------------------------------------------------------------------


def _words(text: str) -> int:
    return max(1, len(text.split()))


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


_EXAMPLES = {"integer": 1, "number": 1, "boolean": True, "array": [], "null": None}


def _example(schema: Any) -> Any:
    """A value that satisfies a simple JSON schema: required properties filled in."""
    if not isinstance(schema, dict):
        return "mock"
    if "enum" in schema and isinstance(schema["enum"], list) and schema["enum"]:
        return schema["enum"][0]
    kind: Any = schema.get("type")  # any JSON value
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties")
        props = properties if isinstance(properties, dict) else {}
        required = schema.get("required")
        names = [r for r in required if isinstance(r, str)] if isinstance(required, list) else []
        return {name: _example(props.get(name)) for name in names}
    return _EXAMPLES.get(kind, "mock") if isinstance(kind, str) else "mock"


def _chosen_tool(body: dict[str, Any]) -> dict[str, Any] | None:
    tools = [function for t in body.get("tools") or [] if isinstance(t, dict)
             and isinstance(function := t.get("function"), dict)]
    choice = body.get("tool_choice", "auto")
    if not tools or choice == "none":
        return None
    messages = body.get("messages") or []
    if messages and isinstance(messages[-1], dict) and messages[-1].get("role") == "tool":
        return None  # the tool has answered: now the model answers in text
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name")
        return next((t for t in tools if t.get("name") == name), tools[0])
    return tools[0]


def answer(body: dict[str, Any]) -> tuple[str | None, dict[str, Any] | None, int]:
    """(text, tool call, prompt words) for a chat-completions request body."""
    model = str(body.get("model") or "mock")
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    prompt_words = sum(_words(_content_text(m.get("content"))) for m in messages) or 1
    tool = _chosen_tool(body)
    if tool is not None:
        args = _example(tool.get("parameters") or {"type": "object"})
        call = {"id": f"call_mock_{len(messages)}", "type": "function",
                "function": {"name": str(tool.get("name") or "tool"), "arguments": orjson.dumps(args).decode()}}
        return None, call, prompt_words
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        return f"Mock answer from {model}: the tool returned {_content_text(last.get('content'))}", None, prompt_words
    said = next((_content_text(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")
    return f"Mock answer from {model}: {said}", None, prompt_words


def _completion(body: dict[str, Any], created: int) -> bytes:
    text, call, prompt = answer(body)
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if call is not None:
        message["tool_calls"] = [call]
    completion = _words(text) if text else _words(call["function"]["arguments"])  # type: ignore[index]
    return orjson.dumps({
        "id": f"chatcmpl-mock-{created}", "object": "chat.completion", "created": created,
        "model": body.get("model"),
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if call else "stop"}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
    })


def stream_chunks(body: dict[str, Any], created: int) -> list[bytes]:
    """The SSE events of a streamed answer, [DONE] included."""
    text, call, prompt = answer(body)
    base = {"id": f"chatcmpl-mock-{created}", "object": "chat.completion.chunk", "created": created,
            "model": body.get("model")}

    def event(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
        chunk = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}
        return b"data: " + orjson.dumps(chunk) + b"\n\n"

    events = [event({"role": "assistant", "content": ""})]
    if call is not None:
        events.append(event({"tool_calls": [{"index": 0, **call}]}))
        completion = _words(call["function"]["arguments"])
    else:
        words = (text or "").split(" ")
        events.extend(event({"content": w if i == 0 else " " + w}) for i, w in enumerate(words))
        completion = _words(text or "")
    events.append(event({}, "tool_calls" if call else "stop"))
    if (body.get("stream_options") or {}).get("include_usage"):
        usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
        events.append(b"data: " + orjson.dumps({**base, "choices": [], "usage": usage}) + b"\n\n")
    events.append(b"data: [DONE]\n\n")
    return events


# --- the in-process upstream ----------------------------------------------------


class MockUpstream:
    """The aiohttp server behind every mock provider of this process."""

    def __init__(self) -> None:
        self.base_url = "http://127.0.0.1:9/v1"  # discard port until started: calls fail fast
        self._runner: Any = None
        self._counts: dict[str, int] = defaultdict(int)  # requests per options set, for error_every

    @property
    def started(self) -> bool:
        return self._runner is not None

    async def start(self) -> None:
        if self._runner is not None:
            return
        from aiohttp import web  # only processes with a mock provider load the server side

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        await web.SockSite(runner, sock).start()
        self._runner = runner
        self.base_url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
        log.info("mock provider upstream listening on %s", self.base_url)

    async def stop(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    def _failure(self, options: dict[str, Any], model: str, header: str) -> int | None:
        match = _ERROR_IN_NAME.search(model)
        if match:
            return int(match.group(1))
        status = options.get("error_status")
        if not isinstance(status, int) or not 400 <= status <= 599:
            return None
        every = options.get("error_every", 1)
        every = every if isinstance(every, int) and every >= 1 else 1
        self._counts[header] += 1
        return status if self._counts[header] % every == 0 else None

    async def _handle(self, request: Any) -> Any:
        from aiohttp import web

        header = request.headers.get(OPTIONS_HEADER, "")
        try:
            options = orjson.loads(header) if header else {}
        except orjson.JSONDecodeError:
            options = {}
        is_chat = request.method == "POST" and request.path.endswith("/chat/completions")
        body: dict[str, Any] = {}
        if is_chat:
            try:
                body = orjson.loads(await request.read())
            except orjson.JSONDecodeError:
                return _error(400, "The request body is not valid JSON")
            if not isinstance(body, dict):
                return _error(400, "The request body must be an object")
        elif not (request.method == "GET" and request.path.endswith("/models")):
            return _error(404, f"No mock route for {request.method} {request.path}")
        model = str(body.get("model") or "")
        slow = _SLOW_IN_NAME.search(model)
        latency = int(slow.group(1)) if slow else options.get("latency_ms", 0)
        if isinstance(latency, (int, float)) and latency > 0:
            await asyncio.sleep(latency / 1000.0)
        status = self._failure(options, model, header)
        if status is not None:
            return _error(status, str(options.get("error_message") or f"Mock failure {status} (as configured)"))
        if not is_chat:
            # An empty list is "no listing" to the model probe: the mock serves every model name.
            return web.json_response({"object": "list", "data": []})
        created = int(time.time())
        if not body.get("stream"):
            return web.Response(body=_completion(body, created), content_type="application/json")
        response = web.StreamResponse(headers={"content-type": "text/event-stream", "cache-control": "no-cache"})
        await response.prepare(request)
        delay = options.get("chunk_delay_ms", 0)
        for chunk in stream_chunks(body, created):
            await response.write(chunk)
            if isinstance(delay, (int, float)) and delay > 0:
                await asyncio.sleep(delay / 1000.0)
        await response.write_eof()
        return response


def _error(status: int, message: str) -> Any:
    from aiohttp import web

    kind, code = _ERROR_KINDS.get(status, ("server_error" if status >= 500 else "invalid_request_error", None))
    headers = {"retry-after": "1"} if status == 429 else None
    return web.json_response({"error": {"message": message, "type": kind, "code": code}}, status=status,
                             headers=headers)


MOCK_UPSTREAM = MockUpstream()
