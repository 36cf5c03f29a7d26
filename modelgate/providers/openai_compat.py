"""Chat-completions providers that differ from OpenAI in small, known ways.

`CompatChatAdapter` is OpenAIChatAdapter with per-provider knobs, set in the
registry: request fields a provider names differently or rejects, whether to
ask for stream usage, the provider's own error codes and finish reasons, its
tool-call id rule, and provider-record options passed into the body.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Callable, Mapping

import orjson

from modelgate.errors import ErrorType, UpstreamError
from modelgate.protocols.ir import ChatRequest, ChatResponse
from modelgate.providers.base import Endpoint, UpstreamRequest
from modelgate.providers.openai_chat import (
    Finish,
    OpenAIChatAdapter,
    error_fields,
    request_body,
)

_MISTRAL_ID = re.compile(r"[A-Za-z0-9]{9}")
_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def mistral_tool_id(call_id: str) -> str:
    """Mistral accepts only tool-call ids of exactly 9 letters or digits. Others (`toolu_...` from a
    messages client, `call_...` after a failover) are replaced by a hash of the id: the same id
    always gets the same replacement, so calls and results still pair up on every later turn.
    Mistral's answers carry ids it made itself, already valid, so clients see their own ids."""
    if _MISTRAL_ID.fullmatch(call_id):
        return call_id
    number = int.from_bytes(hashlib.sha256(call_id.encode()).digest()[:8], "big")
    chars = []
    for _ in range(9):
        number, digit = divmod(number, 62)
        chars.append(_BASE62[digit])
    return "".join(chars)


def _map_tool_ids(messages: Any, rule: Callable[[str], str]) -> None:
    for message in messages if isinstance(messages, list) else ():
        if not isinstance(message, dict):
            continue
        if isinstance(message.get("tool_call_id"), str):
            message["tool_call_id"] = rule(message["tool_call_id"])
        calls = message.get("tool_calls")
        if isinstance(calls, list):
            message["tool_calls"] = [
                {**call, "id": rule(call["id"])} if isinstance(call, dict) and isinstance(call.get("id"), str)
                else call
                for call in calls
            ]


class CompatChatAdapter(OpenAIChatAdapter):
    def __init__(
        self,
        *,
        renames: Mapping[str, str] | None = None,
        drop: tuple[str, ...] = (),
        stream_usage_option: bool = True,
        error_codes: Mapping[str, ErrorType] | None = None,
        quota_hints: tuple[str, ...] = (),
        not_found_hints: tuple[str, ...] = (),
        auth_hints: tuple[str, ...] = (),
        invalid_hints: tuple[str, ...] = (),
        finish_reasons: Mapping[str, Finish] | None = None,
        tool_id: Callable[[str], str] | None = None,
        replay_reasoning: bool = False,
        body_options: tuple[str, ...] = (),
        sources: bool = False,
        clamp: Callable[[dict[str, Any]], None] | None = None,
        thinking: Callable[[ChatRequest], dict[str, Any]] | None = None,
        messages: Callable[[list[Any]], list[Any]] | None = None,
        forced_tools: bool = True,
    ) -> None:
        self.renames = dict(renames or {})  # IR chat field -> the provider's name for it
        self.drop = drop  # fields the provider rejects
        # False: the provider rejects `stream_options` (and reports usage on its last chunk anyway)
        self.stream_usage_option = stream_usage_option
        self.error_codes = dict(error_codes or {})  # provider error `code` or `type` -> error type
        self.quota_hints = quota_hints  # lower-case message fragments that mean an exhausted balance
        self.not_found_hints = not_found_hints  # lower-case message fragments that mean an unknown model
        self.auth_hints = auth_hints  # ... that mean a bad key, whatever the status (xAI answers 400)
        self.invalid_hints = invalid_hints  # ... that mean the request cannot be served as asked
        self.finish_reasons = dict(finish_reasons or {})
        self.tool_id = tool_id  # the provider's rule for tool-call ids, applied to every id sent
        self.replay_reasoning = replay_reasoning
        self.body_options = body_options  # provider-record options sent as body fields of the same name
        self.sources = sources
        self.clamp = clamp  # brings sampling values into the range the provider accepts
        self.thinking = thinking  # the provider's thinking switch as body fields, from the client's request
        self.messages = messages  # brings the conversation into the shape the provider accepts
        self.forced_tools = forced_tools  # False: a forced tool choice is refused (thinking on by default)

    def _adjust(self, body: dict[str, Any], endpoint: Endpoint) -> dict[str, Any]:
        for name in self.body_options:
            if name in endpoint.options and name not in body:
                body[name] = endpoint.options[name]
        if self.tool_id is not None:
            _map_tool_ids(body.get("messages"), self.tool_id)
        if self.clamp is not None:
            self.clamp(body)
        if self.messages is not None and isinstance(body.get("messages"), list):
            body["messages"] = self.messages(body["messages"])
        if not self.forced_tools and (body.get("tool_choice") == "required" or isinstance(body.get("tool_choice"), dict)):
            body["tool_choice"] = "auto"
        for old, new in self.renames.items():
            if old in body:
                body[new] = body.pop(old)
        for name in self.drop:
            body.pop(name, None)
        if not self.stream_usage_option:
            body.pop("stream_options", None)
        return body

    def build_request(self, req: ChatRequest, upstream_model: str, endpoint: Endpoint) -> UpstreamRequest:
        reasoning = self.reasoning(req.reasoning_model, upstream_model)
        body = request_body(req, upstream_model, self.replay_reasoning, reasoning)
        if self.thinking is not None:
            body.update(self.thinking(req))  # before the options: the client's request wins over their default
        body = self._adjust(body, endpoint)
        return UpstreamRequest("POST", self.url(endpoint, upstream_model), self.headers(endpoint), orjson.dumps(body))

    def build_native_request(
        self, body: dict[str, Any], upstream_model: str, endpoint: Endpoint, stream: bool,
        client_headers: Mapping[str, str] | None = None, output_cap: int | None = None,
        marked_reasoning: bool | None = None,
    ) -> UpstreamRequest:
        up = super().build_native_request(body, upstream_model, endpoint, stream, client_headers, output_cap,
                                          marked_reasoning)
        if not (self.renames or self.drop or not self.stream_usage_option or self.tool_id or self.clamp
                or self.messages or not self.forced_tools or any(name in endpoint.options for name in self.body_options)):
            return up
        up.body = orjson.dumps(self._adjust(orjson.loads(up.body or b"{}"), endpoint))
        return up

    def parse_response(self, body: bytes) -> ChatResponse:
        try:
            return super().parse_response(body)
        except UpstreamError:
            # MiniMax answers some failures with HTTP 200 and only a `base_resp` error code.
            code = _top_level_fields(body)[1]
            if code in self.error_codes:
                raise self.classify_error(200, body, {}) from None
            raise

    def classify_error(self, status: int, body: bytes, headers: Mapping[str, str]) -> UpstreamError:
        error = super().classify_error(status, body, headers)
        message, error_type, code = error_fields(body)
        if not (error_type or code):
            error_type, code = _top_level_fields(body)
        mapped = self.error_codes.get(code) or self.error_codes.get(error_type)
        lowered = message.lower()
        if mapped is not None:
            error.error_type = mapped
        elif any(hint in lowered for hint in self.auth_hints):
            error.error_type = ErrorType.AUTHENTICATION_ERROR
        elif any(hint in lowered for hint in self.invalid_hints):
            error.error_type = ErrorType.INVALID_REQUEST
        elif any(hint in message.lower() for hint in self.quota_hints):
            error.error_type = ErrorType.QUOTA_EXCEEDED
        elif any(hint in message.lower() for hint in self.not_found_hints):
            error.error_type = ErrorType.MODEL_NOT_FOUND
        return error


def thinking_type(req: ChatRequest) -> dict[str, Any]:
    """Zhipu's and Moonshot's switch, `thinking: {type: enabled|disabled}`, when the client asked
    (https://docs.z.ai/guides/capabilities/thinking-mode, https://platform.moonshot.ai/docs/guide/use-kimi-k2-thinking-model)."""
    wanted = req.thinking_wanted()
    return {} if wanted is None else {"thinking": {"type": "enabled" if wanted else "disabled"}}


def dashscope_thinking(req: ChatRequest) -> dict[str, Any]:
    """Qwen's switch on DashScope, `enable_thinking`, with a messages client's budget as
    `thinking_budget` (https://www.alibabacloud.com/help/en/model-studio/deep-thinking)."""
    wanted = req.thinking_wanted()
    if wanted is None:
        return {}
    fields: dict[str, Any] = {"enable_thinking": wanted}
    if wanted and req.thinking_budget and req.thinking_budget > 0:
        fields["thinking_budget"] = req.thinking_budget
    return fields


def dashscope_streaming_thinking(body: dict[str, Any]) -> None:
    """DashScope thinks only on streams: "parameter.enable_thinking must be set to false for non-streaming
    calls" (its error-code reference)."""
    if body.get("enable_thinking") and not body.get("stream"):
        body["enable_thinking"] = False
        body.pop("thinking_budget", None)


def _content_text(content: Any) -> str | None:
    """The text of a message's content, None where it holds more than text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text" for p in content):
        return "\n".join(str(p.get("text", "")) for p in content)
    return None


def _joined(previous: dict[str, Any], message: dict[str, Any]) -> dict[str, Any] | None:
    """`previous` with the text of `message` appended, None where either holds more than text."""
    before, text = _content_text(previous.get("content")), _content_text(message.get("content"))
    if before is None or text is None:
        return None
    return {**previous, "content": f"{before}\n\n{text}" if before else text}


def _folded(messages: list[Any], role: str, into: str) -> list[Any]:
    """`messages` with each text turn of `role` that follows one of `into` joined to it."""
    out: list[Any] = []
    for message in messages:
        previous = out[-1] if out else None
        if (isinstance(message, dict) and message.get("role") == role and isinstance(previous, dict)
                and previous.get("role") == into and (joined := _joined(previous, message)) is not None):
            out[-1] = joined
        else:
            out.append(message)
    return out


def _leading_system(messages: list[Any]) -> tuple[list[Any], list[Any]]:
    """The leading system messages, and the rest with later system messages as user turns (the vendors
    below take system messages only first)."""
    start = 0
    while start < len(messages) and isinstance(messages[start], dict) and messages[start].get("role") == "system":
        start += 1
    rest = [{**m, "role": "user"} if isinstance(m, dict) and m.get("role") == "system" else m for m in messages[start:]]
    return messages[:start], rest


def user_text_into_tool_results(messages: list[Any]) -> list[Any]:
    """Mistral refuses a user turn right after tool results ("Unexpected role 'user' after role 'tool'",
    NousResearch/hermes-agent#20154), which messages clients send (Claude Code's reminders beside its tool
    results): such a turn's text is appended to the last result."""
    return _folded(messages, "user", into="tool")


def one_system_message(messages: list[Any]) -> list[Any]:
    """MiniMax takes one system message, first ("invalid params, invalid chat setting (2013)" for two,
    openclaw/openclaw#19386; "invalid message role: system" later on): the leading ones are joined, later
    ones become user turns."""
    leading, rest = _leading_system(messages)
    texts = [text for m in leading if (text := _content_text(m.get("content"))) is not None]
    return ([{"role": "system", "content": "\n\n".join(texts)}] if texts else []) + rest


def alternating_turns(messages: list[Any]) -> list[Any]:
    """Perplexity wants user (or tool) and assistant turns to alternate after the leading system messages
    ("After the (optional) system message(s), user or tool message(s) should alternate with assistant
    message(s).", serac-labs/serac#53): a later system message becomes a user turn, and consecutive user
    turns of text are joined."""
    leading, rest = _leading_system(messages)
    return leading + _folded(rest, "user", into="user")


def zhipu_sampling(body: dict[str, Any]) -> None:
    """Zhipu takes temperature and top_p in the open interval (0, 1), as its official SDK sends them:
    temperature <= 0 becomes greedy decoding (do_sample false, temperature 0.01), >= 1 becomes 0.99;
    top_p <= 0 becomes 0.01 and >= 1 becomes 0.99."""
    temperature = body.get("temperature")
    if isinstance(temperature, (int, float)):
        if temperature <= 0:
            body["do_sample"] = False
            body["temperature"] = 0.01
        elif temperature >= 1:
            body["temperature"] = 0.99
    top_p = body.get("top_p")
    if isinstance(top_p, (int, float)):
        body["top_p"] = 0.01 if top_p <= 0 else 0.99 if top_p >= 1 else top_p


def minimax_sampling(body: dict[str, Any]) -> None:
    """MiniMax refuses a temperature outside (0, 1] and a top_p outside (0, 1]."""
    for name in ("temperature", "top_p"):
        value = body.get(name)
        if isinstance(value, (int, float)):
            body[name] = 0.01 if value <= 0 else min(value, 1.0)


# "Requests with max_tokens > 4096 must have stream=true" (nullclaw/nullclaw#231); a stream is lowered to
# the context window by Fireworks itself (its `context_length_exceeded_behavior`).
FIREWORKS_UNSTREAMED_MAX = 4096


def fireworks_unstreamed_tokens(body: dict[str, Any]) -> None:
    """Fireworks takes at most 4,096 output tokens without a stream (Claude Code asks 32,000 on its
    unstreamed retries)."""
    for name in ("max_tokens", "max_completion_tokens"):
        value = body.get(name)
        if not body.get("stream") and isinstance(value, int) and value > FIREWORKS_UNSTREAMED_MAX:
            body[name] = FIREWORKS_UNSTREAMED_MAX


def _top_level_fields(body: bytes) -> tuple[str, str]:
    """(type, code) of error bodies written without the `error` wrapper (Mistral, vLLM, SiliconFlow)."""
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return "", ""
    if not isinstance(parsed, dict):
        return "", ""
    base = parsed.get("base_resp")  # MiniMax: {"base_resp": {"status_code": 1004, "status_msg": ...}}
    if isinstance(base, dict) and base.get("status_code"):
        return "", str(base["status_code"])
    return str(parsed.get("type") or ""), str(parsed.get("code") or "")
