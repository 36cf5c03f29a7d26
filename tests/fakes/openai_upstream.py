"""A fake chat-completions and Responses API upstream in OpenAI's wire format.

Written from OpenAI's public API reference: Bearer auth, `/chat/completions`,
`/responses` and `/models` under a base path, `chat.completion` and
`chat.completion.chunk` bodies, `stream_options.include_usage`, Responses objects
and their typed stream events (checked against the official SDK's types in
tests/test_responses_codec.py), and error bodies
`{"error": {"message", "type", "param", "code"}}`.

Refusals beyond the field checks, in the service's words: more max tokens than the model's OUTPUT_CAPS, a
`user` over 64 characters, tool names and schemas the service refuses (tests/fakes/tool_rules.py), and for the reasoning models of REASONING_RULES what their generation does not take
(effort levels, `stop`, `parallel_tool_calls`, function tools beside an effort, sampling settings); an effort
to the models of OUTPUT_CAPS, which do not reason; on the Responses API the same by model (`responses_refusal`).

Answers are derived from the request so tests can check what went through:
the reply text is "Echo: <last user text>", usage counts words, and a call
whose last user text starts with "call tool" answers with tool calls to every
tool given (parallel calls), arguments built from each tool's schema.
"""

from __future__ import annotations

import asyncio
import base64
import time
from dataclasses import dataclass
from typing import Any, Callable

import orjson
from aiohttp import web

from tests.fakes.tool_rules import openai_tools_refusal
from tests.fakes.upstream_base import FakeUpstream, json_response


@dataclass(frozen=True)
class ReasoningRules:
    """One reasoning model as OpenAI documents it (the API reference of `reasoning_effort`: "gpt-5.1 ...
    supported reasoning values ... are none, low, medium, and high", "All models before gpt-5.1 ... do not
    support none", "xhigh is supported for all models after gpt-5.1-codex-max"; Azure's reasoning how-to:
    "minimal isn't supported with gpt-5.1 or greater"; the service's refusals quoted in
    providers/openai_models.py for gpt-5.2 and the codex models; `max` on gpt-5.6 and gpt-6: the Codex CLI's model
    list and apiyi's SVG reasoning FAQ, 2026-11). This table is the documents' list; the gateway reads the same
    from the name's generation (providers/openai_models.py)."""

    efforts: frozenset[str]
    stop: bool = True
    parallel_tool_calls: bool = True
    tools_with_effort: bool = True


REASONING_RULES = {
    "o3": ReasoningRules(frozenset({"low", "medium", "high"}), stop=False, parallel_tool_calls=False),
    "o4-mini": ReasoningRules(frozenset({"low", "medium", "high"}), stop=False, parallel_tool_calls=False),
    "gpt-5": ReasoningRules(frozenset({"minimal", "low", "medium", "high"}), stop=False),
    "gpt-5-mini": ReasoningRules(frozenset({"minimal", "low", "medium", "high"}), stop=False),
    "gpt-5.1": ReasoningRules(frozenset({"none", "low", "medium", "high"})),
    "gpt-5.2": ReasoningRules(frozenset({"none", "low", "medium", "high", "xhigh"})),
    "gpt-5.4": ReasoningRules(frozenset({"none", "low", "medium", "high", "xhigh"}), tools_with_effort=False),
    "gpt-5.6-terra": ReasoningRules(frozenset({"none", "low", "medium", "high", "xhigh", "max"}), tools_with_effort=False),
    "gpt-6-sol": ReasoningRules(frozenset({"none", "low", "medium", "high", "xhigh", "max"}), tools_with_effort=False),
    "gpt-5.2-chat-latest": ReasoningRules(frozenset({"medium"})),
    "gpt-5.1-codex": ReasoningRules(frozenset({"low", "medium", "high"})),
    "gpt-5.1-codex-mini": ReasoningRules(frozenset({"medium", "high"})),
    "gpt-5.2-codex": ReasoningRules(frozenset({"low", "medium", "high", "xhigh"})),
}
# Served by the Responses API only ("This model is only supported in v1/responses and not in v1/chat/completions.").
RESPONSES_ONLY = frozenset({"gpt-5.1-codex", "gpt-5.1-codex-mini", "gpt-5.2-codex"})
# OpenAI's model pages: the most completion tokens each takes.
OUTPUT_CAPS = {"gpt-4o": 16384, "gpt-4o-mini": 16384, "gpt-4.1": 32768, "gpt-4.1-mini": 32768, "gpt-3.5-turbo": 4096}
_UNSUPPORTED = "Unsupported parameter: '{}' is not supported with this model."  # o3, o4-mini, gpt-5-mini reports


def reasoning_refusal(body: dict[str, Any], rules: ReasoningRules) -> str | None:
    effort = body.get("reasoning_effort")
    if effort is not None and effort not in rules.efforts:
        # openai/openai-agents-python#2089, egoist/chatwise-releases#1257
        levels = sorted(rules.efforts, key=["none", "minimal", "low", "medium", "high", "xhigh", "max"].index)
        listed = ", ".join(f"'{level}'" for level in levels[:-1]) + (" and " if len(levels) > 1 else "") + f"'{levels[-1]}'"
        return f"Unsupported value: '{effort}' is not supported with the '{body['model']}' model. Supported values are: {listed}."
    for name in ("temperature", "top_p"):
        if body.get(name, 1) != 1:
            return (f"Unsupported value: '{name}' does not support {body[name]} with this model. Only the default (1) "
                    "value is supported.")
    if "stop" in body and not rules.stop:
        return _UNSUPPORTED.format("stop")
    if "parallel_tool_calls" in body and not rules.parallel_tool_calls:
        return _UNSUPPORTED.format("parallel_tool_calls")
    if body.get("tools") and not rules.tools_with_effort and effort != "none":
        # pipecat-ai/pipecat#4043, openai/openai-openapi#541; omitting the effort is refused too in reports
        return (f"Function tools with reasoning_effort are not supported for {body['model']} in /v1/chat/completions. "
                "Please use /v1/responses instead.")
    return None


def responses_refusal(body: dict[str, Any]) -> str | None:
    """What an OpenAI model refuses on the Responses API, in the service's words: an effort or its reasoning
    encrypted where it does not reason (BoundaryML/baml#2708, OpenAI-DotNet#500: gpt-4.1, gpt-4o), an effort
    level of another generation, sampling settings where it reasons (OpenHands/software-agent-sdk#1837, sourcebot-dev/sourcebot#454)."""
    model, reasoning = body["model"], body.get("reasoning") or {}
    effort = reasoning.get("effort")
    rules = REASONING_RULES.get(model)
    if rules is None:
        if model in OUTPUT_CAPS and "reasoning.encrypted_content" in (body.get("include") or ()):
            # the service's words (pydantic/pydantic-ai#2865: gpt-4o, gpt-4o-mini; miquido/draive#399: gpt-4.1-mini)
            return "Encrypted content is not supported with this model."
        return _UNSUPPORTED.format("reasoning.effort") if model in OUTPUT_CAPS and effort is not None else None
    if effort is not None and effort not in rules.efforts:
        return reasoning_refusal({"model": model, "reasoning_effort": effort}, rules)
    return next((_UNSUPPORTED.format(name) for name in ("temperature", "top_p") if name in body), None)


def _unanswered_tool_message(messages: list[Any]) -> int | None:
    """The index of the first `tool` message that answers no call of the assistant message before it."""
    called: set[str] = set()
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role == "assistant":
            called = {c.get("id") for c in message.get("tool_calls") or [] if isinstance(c, dict)}
        elif role == "tool":
            if message.get("tool_call_id") not in called:
                return i
        else:
            called = set()
    return None


def words(text: str) -> int:
    return max(1, len(text.split()))


def openai_error(status: int, message: str, error_type: str, code: str | None) -> web.Response:
    body = {"error": {"message": message, "type": error_type, "param": None, "code": code}}
    return json_response(body, status)


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            return " ".join(p.get("text", "") for p in content if p.get("type") == "text")
    return ""


def arguments_for(schema: dict[str, Any]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name, prop in (schema.get("properties") or {}).items():
        kind = prop.get("type")
        values[name] = 1 if kind in ("integer", "number") else True if kind == "boolean" else f"{name}-value"
    return values


class FakeOpenAI(FakeUpstream):
    def __init__(self, api_key: str = "up-key-1", models: tuple[str, ...] = ("gpt-test", "gpt-other"),
                 base_path: str = "/v1", auth_header: str = "authorization") -> None:
        super().__init__()
        self.api_keys = {api_key}
        self.models = set(models)
        self.base_path = base_path
        self.auth_header = auth_header
        self.vendor_caps: dict[str, tuple[int, str]] = {}  # model -> (output cap, the vendor's refusal of more)
        self.delay = 0.0  # seconds before answering (headers of streams included)
        self.chunk_delay = 0.0  # seconds between stream chunks
        self.reset_next = 0  # close the connection without an answer this many times
        self.responses_path = f"{self.base_path}/responses"
        self.stored_responses: set[str] = set()  # ids of responses created with store (the default)
        # Decides chat answers instead of the echo rules: body -> (content, tool calls, finish reason).
        self.script: Callable[[dict[str, Any]], tuple[str | None, list[dict[str, Any]], str]] | None = None
        # Reasoning put before each answer as `reasoning_content`, as DeepSeek, Qwen, vLLM and SGLang send it
        # (tests/captures/deepseek_stream_reasoning_tool_call.jsonl); None: none.
        self.reasoning: str | None = None
        # OpenAI answers an alias with the dated snapshot it resolved to ("gpt-4o" -> "gpt-4o-2024-08-06").
        self.snapshots: dict[str, str] = {"gpt-test": "gpt-test-2025-08-07"}
        # Reasoning models refuse `max_tokens` (https://platform.openai.com/docs/guides/reasoning).
        self.reasoning_models: set[str] = {m for m in self.models if m.startswith(("o1", "o3", "o4", "gpt-5"))}
        self.cached_tokens = 0  # reported as usage.prompt_tokens_details.cached_tokens

    @property
    def base_url(self) -> str:
        return self.origin + self.base_path

    def routes(self, app: web.Application) -> None:
        app.router.add_post(f"{self.base_path}/chat/completions", self.chat)
        app.router.add_post(self.responses_path, self.responses)
        app.router.add_post(self.responses_path + "/input_tokens", self.input_tokens)
        app.router.add_post(self.responses_path + "/compact", self.compact)
        app.router.add_get(f"{self.base_path}/models", self.list_models)

    def _authorised(self, request: web.Request) -> bool:
        value = request.headers.get(self.auth_header, "")
        if self.auth_header == "authorization":
            value = value[7:] if value.startswith("Bearer ") else ""
        return value in self.api_keys

    async def list_models(self, request: web.Request) -> web.Response:
        if not self._authorised(request):
            return openai_error(401, "Incorrect API key provided.", "invalid_request_error", "invalid_api_key")
        data = [{"id": m, "object": "model", "created": 1700000000, "owned_by": "fake"} for m in sorted(self.models)]
        return json_response({"object": "list", "data": data})

    async def chat(self, request: web.Request) -> web.StreamResponse:
        if self.reset_next:
            self.reset_next -= 1
            assert request.transport is not None
            request.transport.abort()  # a connection reset, as a crashed upstream does
            return web.Response()
        if not self._authorised(request):
            return openai_error(401, "Incorrect API key provided.", "invalid_request_error", "invalid_api_key")
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            return openai_error(400, "We could not parse the JSON body of your request.",
                                "invalid_request_error", None)
        model = body.get("model")
        if model not in self.models:
            return openai_error(404, f"The model `{model}` does not exist or you do not have access to it.",
                                "invalid_request_error", "model_not_found")
        if model in RESPONSES_ONLY:
            return openai_error(404, "This model is only supported in v1/responses and not in v1/chat/completions.",
                                "invalid_request_error", None)
        if not isinstance(body.get("messages"), list) or not body["messages"]:
            return openai_error(400, "Invalid 'messages': empty array.", "invalid_request_error", "empty_array")
        choice = body.get("tool_choice")
        if isinstance(choice, str) and choice not in ("auto", "none", "required"):
            # What the real service answers to a bare tool name.
            return openai_error(400, f"Invalid value: '{choice}'. Supported values are: 'none', 'auto', and "
                                "'required'.", "invalid_request_error", "invalid_value")
        if model in self.reasoning_models and "max_tokens" in body:
            return openai_error(400, "Unsupported parameter: 'max_tokens' is not supported with this model. "
                                     "Use 'max_completion_tokens' instead.", "invalid_request_error",
                                "unsupported_parameter")
        most, asked = OUTPUT_CAPS.get(model), body.get("max_tokens") or body.get("max_completion_tokens")
        if most is not None and "reasoning_effort" in body:
            # the service's words for a model that does not reason (Open-Less/openless#555, scaleapi/vero#54)
            return openai_error(400, "Unrecognized request argument supplied: reasoning_effort",
                                "invalid_request_error", None)
        if most is not None and isinstance(asked, int) and asked > most:
            return openai_error(400, f"max_tokens is too large: {asked}. This model supports at most {most} completion "
                                f"tokens, whereas you provided {asked}.", "invalid_request_error", "invalid_value")
        vendor = self.vendor_caps.get(model)
        if vendor is not None and isinstance(asked, int) and asked > vendor[0]:
            return openai_error(400, vendor[1].format(cap=vendor[0], model=model), "invalid_request_error",
                                "invalid_request_error")
        if isinstance(body.get("user"), str) and len(body["user"]) > 64:
            # the service's words (BerriAI/litellm's tests; proxies of Claude Code's metadata.user_id)
            return openai_error(400, "Invalid 'user': string too long. Expected a string with maximum length 64, "
                                f"but got a string with length {len(body['user'])} instead.", "invalid_request_error",
                                "string_above_max_length")
        if (tools_refused := openai_tools_refusal(body)) is not None:
            return openai_error(400, tools_refused[0], "invalid_request_error", tools_refused[1])
        if (orphan := _unanswered_tool_message(body["messages"])) is not None:
            # The service's words (miurla/morphic#136, smarter-sh/smarter#264; its `param` is "messages.[N].role").
            return openai_error(400, "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
                                "message with 'tool_calls'.", "invalid_request_error", None)
        rules = REASONING_RULES.get(model)
        if rules is not None and (refusal := reasoning_refusal(body, rules)) is not None:
            return openai_error(400, refusal, "invalid_request_error", "unsupported_value")
        if self.delay:
            await asyncio.sleep(self.delay)
        if body.get("stream"):
            return await self._stream(request, body)
        return json_response(self._completion(body))

    def _answer(self, body: dict[str, Any]) -> tuple[str | None, list[dict[str, Any]], str]:
        if self.script is not None:
            return self.script(body)
        text = _last_user_text(body["messages"])
        tools = body.get("tools") or []
        choice = body.get("tool_choice")
        if isinstance(choice, dict):  # the model must call the named one; with "required" any (here: all)
            tools = [t for t in tools if t["function"]["name"] == (choice.get("function") or {}).get("name")][:1]
        if tools and (text.startswith("call tool") or choice == "required" or isinstance(choice, dict)) \
                and choice != "none":
            calls = [
                {"id": f"call_{i}", "type": "function",
                 "function": {"name": t["function"]["name"],
                              "arguments": orjson.dumps(arguments_for(t["function"].get("parameters") or {})).decode()}}
                for i, t in enumerate(tools)
            ]
            return None, calls, "tool_calls"
        fmt = body.get("response_format") or {}
        if fmt.get("type") == "json_schema":  # structured outputs: the answer is JSON of the schema
            return orjson.dumps(arguments_for(fmt["json_schema"].get("schema") or {})).decode(), [], "stop"
        reply = f"Echo: {text}"
        max_tokens = body.get("max_tokens") or body.get("max_completion_tokens")
        if max_tokens and words(reply) > max_tokens:
            return " ".join(reply.split()[:max_tokens]), [], "length"
        return reply, [], "stop"

    def _usage(self, body: dict[str, Any], content: str | None, calls: list[dict[str, Any]]) -> dict[str, int]:
        prompt = sum(words(m["content"]) if isinstance(m.get("content"), str) else 1 for m in body["messages"])
        completion = words(content) if content else 5 * len(calls)
        usage: dict[str, Any] = {"prompt_tokens": prompt + self.cached_tokens, "completion_tokens": completion,
                                 "total_tokens": prompt + self.cached_tokens + completion}
        if self.cached_tokens:
            usage["prompt_tokens_details"] = {"cached_tokens": self.cached_tokens, "audio_tokens": 0}
        return usage

    def _completion(self, body: dict[str, Any]) -> dict[str, Any]:
        content, calls, finish = self._answer(body)
        message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
        if self.reasoning:
            message["reasoning_content"] = self.reasoning
        if calls:
            message["tool_calls"] = calls
        return {
            "id": "chatcmpl-fake123",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.snapshots.get(body["model"], body["model"]),
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
            "usage": self._usage(body, content, calls),
            "system_fingerprint": "fp_fake",
        }

    async def _stream(self, request: web.Request, body: dict[str, Any]) -> web.StreamResponse:
        content, calls, finish = self._answer(body)
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        base = {"id": "chatcmpl-fake123", "object": "chat.completion.chunk", "created": int(time.time()),
                "model": self.snapshots.get(body["model"], body["model"]), "system_fingerprint": "fp_fake"}

        def frame(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
            chunk = {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                          "finish_reason": finish_reason}]}
            if include_usage:
                chunk["usage"] = None
            return b"data: " + orjson.dumps(chunk) + b"\n\n"

        frames = [frame({"role": "assistant", "content": "", "refusal": None})]
        if self.reasoning:
            frames += [frame({"reasoning_content": (" " if i else "") + p})
                       for i, p in enumerate(self.reasoning.split(" "))]
        if content:
            pieces = content.split(" ")
            frames += [frame({"content": (" " if i else "") + p}) for i, p in enumerate(pieces)]
        for i, call in enumerate(calls):
            arguments = call["function"]["arguments"]
            frames.append(frame({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                                 "function": {"name": call["function"]["name"], "arguments": ""}}]}))
            half = len(arguments) // 2
            for piece in (arguments[:half], arguments[half:]):
                frames.append(frame({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}))
        frames.append(frame({}, finish))
        if include_usage:
            usage_chunk = {**base, "choices": [], "usage": self._usage(body, content, calls)}
            frames.append(b"data: " + orjson.dumps(usage_chunk) + b"\n\n")
        frames.append(b"data: [DONE]\n\n")
        if not self.chunk_delay:
            return await self.write_stream(request, frames, "text/event-stream", final_frames=3)
        resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await resp.prepare(request)
        for item in frames[:-3] if self.cut_stream else frames:
            await resp.write(item)
            await asyncio.sleep(self.chunk_delay)
        await resp.write_eof()
        return resp

    # --- the Responses API ------------------------------------------------------

    async def input_tokens(self, request: web.Request) -> web.Response:
        """POST /responses/input_tokens: the count of a Responses request's input, as the API reference's
        `response.input_tokens` object."""
        body = await self._responses_body(request)
        if isinstance(body, web.Response):
            return body
        counted = orjson.dumps([body.get("instructions"), body.get("input"), body.get("tools")]).decode()
        return json_response({"object": "response.input_tokens", "input_tokens": words(counted)})

    async def compact(self, request: web.Request) -> web.Response:
        """POST /responses/compact: a `response.compaction` object (the API reference's CompactedResponse):
        the input's user messages, then one compaction item of opaque encrypted state."""
        body = await self._responses_body(request)
        if isinstance(body, web.Response):
            return body
        items = body.get("input")
        if isinstance(items, str):
            items = [{"type": "message", "role": "user", "content": items}]
        kept = [item for item in items or [] if item.get("type", "message") == "message" and item.get("role") == "user"]
        output = [{"id": f"msg_{i}", "type": "message", "role": "user", "status": "completed",
                   "content": [{"type": "input_text", "text": item["content"]}] if isinstance(item["content"], str)
                   else item["content"]} for i, item in enumerate(kept)]
        output.append({"id": "cmp_1", "type": "compaction",
                       "encrypted_content": base64.b64encode(orjson.dumps(items)).decode()})
        input_tokens = words(orjson.dumps([body.get("instructions"), items]).decode())
        usage = {"input_tokens": input_tokens, "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens": 7, "output_tokens_details": {"reasoning_tokens": 0},
                 "total_tokens": input_tokens + 7}
        return json_response({"id": f"resp_cmp{len(self.requests)}", "object": "response.compaction",
                              "created_at": int(time.time()), "output": output, "usage": usage})

    async def _responses_body(self, request: web.Request) -> dict[str, Any] | web.Response:
        """The body of a Responses API call, or the vendor's refusal of its key or model."""
        if not self._authorised(request):
            return openai_error(401, "Incorrect API key provided.", "invalid_request_error", "invalid_api_key")
        body = orjson.loads(await request.read())
        if body.get("model") not in self.models:
            return openai_error(404, f"The model `{body.get('model')}` does not exist or you do not have access "
                                "to it.", "invalid_request_error", "model_not_found")
        return body

    async def responses(self, request: web.Request) -> web.StreamResponse:
        body = await self._responses_body(request)
        if isinstance(body, web.Response):
            return body
        if (refusal := responses_refusal(body)) is not None:
            return openai_error(400, refusal, "invalid_request_error", "unsupported_parameter")
        previous = body.get("previous_response_id")
        if previous is not None and previous not in self.stored_responses:
            return openai_error(400, f"Previous response with id '{previous}' not found.",
                                "invalid_request_error", "previous_response_not_found")
        output = self._responses_output(body)
        text = "".join(c["text"] for item in output if item["type"] == "message" for c in item["content"])
        usage = {"input_tokens": words(orjson.dumps(body.get("input")).decode()),
                 "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                 "output_tokens": words(text) if text else 5 * len(output),
                 "output_tokens_details": {"reasoning_tokens": 0}}
        usage["total_tokens"] = usage["input_tokens"] + usage["output_tokens"]
        response = {
            "id": f"resp_fake{len(self.requests)}", "object": "response", "created_at": int(time.time()),
            "status": "completed", "error": None, "incomplete_details": None,
            "instructions": body.get("instructions"), "max_output_tokens": body.get("max_output_tokens"),
            "model": body["model"], "output": output, "parallel_tool_calls": True,
            "previous_response_id": previous, "reasoning": {"effort": None, "summary": None},
            "store": body.get("store", True), "temperature": 1.0, "text": {"format": {"type": "text"}},
            "tool_choice": body.get("tool_choice", "auto"), "tools": body.get("tools", []), "top_p": 1.0,
            "truncation": "disabled", "usage": usage, "user": None, "metadata": body.get("metadata") or {},
        }
        if body.get("store", True):
            self.stored_responses.add(response["id"])
        if body.get("stream"):
            return await self._responses_stream(request, response)
        return json_response(response)

    def _responses_output(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        items = body.get("input")
        items = [{"role": "user", "content": items}] if isinstance(items, str) else items or []
        text = ""
        outputs = [i.get("output") for i in items if i.get("type") == "function_call_output"]
        for item in items:
            if item.get("role") == "user":
                content = item.get("content")
                text = content if isinstance(content, str) else " ".join(
                    p.get("text", "") for p in content if p.get("type") == "input_text")
        tools = [t for t in body.get("tools") or [] if t.get("type") == "function"]
        if items and items[-1].get("type") == "function_call_output":
            reply = "Tool results: " + " ".join(str(o) for o in outputs)
        elif tools and text.startswith("call tool") and body.get("tool_choice") != "none":
            return [{"id": f"fc_{i}", "type": "function_call", "status": "completed", "call_id": f"call_{i}",
                     "name": t["name"],
                     "arguments": orjson.dumps(arguments_for(t.get("parameters") or {})).decode()}
                    for i, t in enumerate(tools)]
        else:
            reply = f"Echo: {text}"
        return [{"id": "msg_fake", "type": "message", "status": "completed", "role": "assistant",
                 "content": [{"type": "output_text", "text": reply, "annotations": [], "logprobs": []}]}]

    async def _responses_stream(self, request: web.Request, response: dict[str, Any]) -> web.StreamResponse:
        events: list[dict[str, Any]] = []
        start = {**response, "status": "in_progress", "output": [], "usage": None}
        events += [{"type": "response.created", "response": start}, {"type": "response.in_progress", "response": start}]
        for index, item in enumerate(response["output"]):
            ref = {"item_id": item["id"], "output_index": index}
            if item["type"] == "message":
                text = item["content"][0]["text"]
                events.append({"type": "response.output_item.added", "output_index": index,
                               "item": {**item, "status": "in_progress", "content": []}})
                part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
                events.append({"type": "response.content_part.added", **ref, "content_index": 0, "part": part})
                for i, piece in enumerate(text.split(" ")):
                    events.append({"type": "response.output_text.delta", **ref, "content_index": 0,
                                   "delta": (" " if i else "") + piece, "logprobs": []})
                events.append({"type": "response.output_text.done", **ref, "content_index": 0, "text": text,
                               "logprobs": []})
                events.append({"type": "response.content_part.done", **ref, "content_index": 0,
                               "part": item["content"][0]})
            else:
                events.append({"type": "response.output_item.added", "output_index": index,
                               "item": {**item, "status": "in_progress", "arguments": ""}})
                events.append({"type": "response.function_call_arguments.delta", **ref, "delta": item["arguments"]})
                events.append({"type": "response.function_call_arguments.done", **ref,
                               "arguments": item["arguments"]})
            events.append({"type": "response.output_item.done", "output_index": index, "item": item})
        events.append({"type": "response.completed", "response": response})
        frames = [b"event: " + e["type"].encode() + b"\ndata: " + orjson.dumps({**e, "sequence_number": n}) + b"\n\n"
                  for n, e in enumerate(events)]
        return await self.write_stream(request, frames, "text/event-stream", final_frames=1)
