"""AWS Bedrock Converse API wire adapter.

POST {base}/model/{modelId}/converse and /converse-stream, where base is
https://bedrock-runtime.{region}.amazonaws.com. Streams use AWS's binary
event-stream framing (application/vnd.amazon.eventstream), decoded with
botocore's EventStreamBuffer; requests are signed with botocore's SigV4Auth.

Credentials (docs/providers.md):
- `options.auth: "aws"`: botocore's standard credential chain (environment, shared
  profile `options.profile`, SSO, web identity, container and instance roles), refreshed
  by botocore; no key needed;
- else the upstream key: "ACCESS_KEY_ID:SECRET_ACCESS_KEY[:SESSION_TOKEN]" -> SigV4
  signature (service "bedrock"), or a Bedrock API key (no colon) -> `Authorization: Bearer`.
The signing region is `options.region`, else the region in the base URL's
host, else us-east-1.

Mapping notes: images must be inline (Converse takes bytes or S3, not
URLs); seed, penalties and JSON mode have no Converse field and are dropped;
Claude models get sampling, thinking and tool choice as their generation takes them
(providers/claude.py), top_k, `thinking` and `output_config` in additionalModelRequestFields
(other families drop them), over `options.additional_model_request_fields`; Claude's reasoning is replayed byte for byte
(`reasoningContent`) and cache marks become `cachePoint` blocks for Claude models; tool_choice `none` sends
no tools (Converse has no such choice). A request that offers no tools gets its history's tool calls and
results as text, since Converse refuses tool blocks without a toolConfig.
"""

from __future__ import annotations

import re
import uuid
from typing import Any, Mapping
from urllib.parse import quote, urlsplit

import orjson
from yarl import URL

from modelgate.errors import ErrorType, UpstreamError
from modelgate.protocols.ir import (
    ChatRequest,
    ChatResponse,
    ImagePart,
    Message,
    StopReason,
    StreamEnd,
    StreamError,
    StreamEvent,
    StreamStart,
    TextDelta,
    TextPart,
    ThinkingDelta,
    ThinkingPart,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    ToolResult,
    Usage,
    token_count,
    vendor_signature,
)
from modelgate.protocols.sse import unreadable_event
from modelgate.providers import claude
from modelgate.providers.anthropic_messages import DEFAULT_MAX_TOKENS
from modelgate.providers.base import (
    OPENING_USER_TEXT,
    Endpoint,
    UpstreamRequest,
    classify_by_status,
    json_instruction,
    retry_after_seconds,
    tool_id_for,
)
from modelgate.providers.credentials import AwsChain, source_for
from modelgate.providers.tool_rules import object_root

DEFAULT_REGION = "us-east-1"
DEFAULT_BASE_URL = f"https://bedrock-runtime.{DEFAULT_REGION}.amazonaws.com"

_STOP: dict[str, StopReason | ErrorType] = {
    "end_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "stop_sequence": "stop_sequence",
    "guardrail_intervened": "content_filter",
    "content_filtered": "content_filter",
    "model_context_window_exceeded": "length",
    # The model's output could not be parsed: the answer is lost, not finished.
    "malformed_model_output": ErrorType.UPSTREAM_ERROR,
    "malformed_tool_use": ErrorType.UPSTREAM_ERROR,
}


def stop_reason(raw: str | None) -> StopReason:
    """The stop reason of a Converse stopReason; raises the UpstreamError of an abnormal one."""
    mapped = _STOP.get(raw or "", "stop")
    if isinstance(mapped, ErrorType):
        raise UpstreamError(mapped, f"Bedrock abandoned the answer (stopReason {raw!r})")
    return mapped

_ERRORS: dict[str, ErrorType] = {
    "ThrottlingException": ErrorType.RATE_LIMIT_ERROR,
    "ServiceQuotaExceededException": ErrorType.QUOTA_EXCEEDED,
    "ServiceUnavailableException": ErrorType.SERVICE_UNAVAILABLE,
    "ModelNotReadyException": ErrorType.SERVICE_UNAVAILABLE,  # the model is being loaded: retry later
    "ResourceNotFoundException": ErrorType.MODEL_NOT_FOUND,
    "AccessDeniedException": ErrorType.AUTHENTICATION_ERROR,
    "UnrecognizedClientException": ErrorType.AUTHENTICATION_ERROR,
    "InvalidSignatureException": ErrorType.AUTHENTICATION_ERROR,
    "ExpiredTokenException": ErrorType.AUTHENTICATION_ERROR,
    "IncompleteSignatureException": ErrorType.AUTHENTICATION_ERROR,
    "ValidationException": ErrorType.INVALID_REQUEST,
    "ModelTimeoutException": ErrorType.TIMEOUT_ERROR,
    "ModelErrorException": ErrorType.UPSTREAM_ERROR,
    "ModelStreamErrorException": ErrorType.UPSTREAM_ERROR,
    "InternalServerException": ErrorType.UPSTREAM_ERROR,
}

_IMAGE_FORMATS = {"image/png": "png", "image/jpeg": "jpeg", "image/jpg": "jpeg", "image/gif": "gif",
                  "image/webp": "webp"}


# bedrock-runtime.{region}.amazonaws.com, its -fips form, China's .com.cn, and interface VPC
# endpoints: vpce-{id}.bedrock-runtime.{region}.vpce.amazonaws.com
_REGION_HOST = re.compile(
    r"(?:^|\.)bedrock(?:-runtime)?(?:-fips)?\.([a-z0-9-]+)\.(?:vpce\.)?amazonaws\.com(?:\.cn)?$")


def region_of(endpoint: Endpoint) -> str:
    if endpoint.options.get("region"):
        return str(endpoint.options["region"])
    match = _REGION_HOST.search(urlsplit(endpoint.base_url).hostname or "")
    return match.group(1) if match else DEFAULT_REGION


NO_OUTPUT = "(no output)"  # an empty tool result, as Converse takes it
# ToolUseId in the bedrock-runtime service model (botocore): pattern `[a-zA-Z0-9_.:-]+`, 1 to 64 characters.
_TOOL_USE_ID = re.compile(r"[a-zA-Z0-9_.:-]{1,64}").fullmatch


def _image(img: ImagePart) -> dict[str, Any]:
    inline = img.inline()
    if inline is None:
        raise UpstreamError(ErrorType.INVALID_REQUEST, "Bedrock accepts only inline (base64) images, not image URLs")
    media, data = inline
    fmt = _IMAGE_FORMATS.get(media.lower())
    if fmt is None:
        raise UpstreamError(ErrorType.INVALID_REQUEST, f"Bedrock does not accept images of type {media}")
    return {"image": {"format": fmt, "source": {"bytes": data}}}


def _input(arguments: str) -> Any:
    try:
        value = orjson.loads(arguments or "{}")
    except orjson.JSONDecodeError:
        return {}  # toolUse.input must be a JSON object
    return value if isinstance(value, dict) else {}


def _cache_point(mark: str) -> dict[str, Any]:
    # Converse's own default lifetime is 5 minutes, as the messages vendor's.
    return {"cachePoint": {"type": "default"} if mark == "5m" else {"type": "default", "ttl": mark}}


def _blocks(msg: Message, caching: bool) -> list[dict[str, Any]]:
    """`caching`: the model takes cache points (Claude); a cached part is followed by one."""
    blocks: list[dict[str, Any]] = []
    for part in msg.parts:
        if isinstance(part, TextPart):
            if part.text and not part.text.isspace():  # Converse refuses a blank text block
                blocks.append({"text": part.text})
        elif isinstance(part, ImagePart):
            blocks.append(_image(part))
        elif isinstance(part, ToolCall):
            blocks.append({"toolUse": {"toolUseId": tool_id_for(part.id, _TOOL_USE_ID), "name": part.name,
                                       "input": _input(part.arguments)}})
        elif isinstance(part, ToolResult):
            content = [{"text": p.text} if isinstance(p, TextPart) else _image(p)
                       for p in part.content if not isinstance(p, TextPart) or (p.text and not p.text.isspace())]
            # A tool that printed nothing: Converse wants a non-blank block, and refusing the turn
            # would refuse every later turn of the conversation too.
            blocks.append({"toolResult": {"toolUseId": tool_id_for(part.tool_call_id, _TOOL_USE_ID),
                                          "content": content or [{"text": NO_OUTPUT}],
                                          "status": "error" if part.is_error else "success"}})
        elif isinstance(part, ThinkingPart) and msg.role == "assistant":
            # Only reasoning Claude signed (or encrypted) can go back, byte for byte; other
            # providers' reasoning is dropped, never sent as if signed.
            if part.redacted is not None:
                blocks.append({"reasoningContent": {"redactedContent": part.redacted}})
            elif (signature := vendor_signature(part)) is not None:
                blocks.append({"reasoningContent": {"reasoningText": {"text": part.text, "signature": signature}}})
            continue
        else:
            continue
        if caching and part.cache:
            blocks.append(_cache_point(part.cache))
    return blocks




def build_body(req: ChatRequest, model: str = "", extra_fields: Mapping[str, Any] | None = None
               ) -> dict[str, Any]:
    """`extra_fields`: the provider record's `additional_model_request_fields` (e.g. Claude's
    `thinking`), sent as Converse's additionalModelRequestFields."""
    offers_tools = bool(req.tools) and (req.tool_choice is None or req.tool_choice.mode != "none")  # no `none`
    if not offers_tools:
        # "The toolConfig field must be defined when using toolUse and toolResult content blocks."
        req = req.with_tool_turns_as_text()
    claude_model = "anthropic." in model
    thinking_fields: dict[str, Any] = {}
    if claude_model:
        req, thinking_fields = claude.shaped(req, model, DEFAULT_MAX_TOKENS)
    choice = req.tool_choice
    messages: list[dict[str, Any]] = []
    for msg in req.messages:
        blocks = _blocks(msg, claude_model)
        if not blocks:
            continue
        role = "assistant" if msg.role == "assistant" else "user"  # tool results ride in user turns
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)  # Converse wants roles to alternate
        else:
            messages.append({"role": role, "content": blocks})
    if not messages or messages[0]["role"] != "user":
        messages.insert(0, {"role": "user", "content": [{"text": OPENING_USER_TEXT}]})
    body: dict[str, Any] = {"messages": messages}
    if req.system:
        system: list[dict[str, Any]] = []
        for i, text in enumerate(req.system):
            if not text or text.isspace():
                continue
            system.append({"text": text})
            if claude_model and i in req.system_cache:
                system.append(_cache_point(req.system_cache[i]))
        if system:
            body["system"] = system
    # Claude from 4.5 takes the schema as Converse's structured output (the Bedrock user guide, structured-output);
    # other models, and a schema its subset cannot say, are asked for JSON in words.
    schema = claude.output_schema(req, model) if claude_model else None
    if schema is not None:
        spec = (req.response_format or {}).get("json_schema") or {}
        named = {"name": spec["name"]} if isinstance(spec.get("name"), str) and spec["name"] else {}
        body["outputConfig"] = {"textFormat": {"type": "json_schema", "structure": {
            "jsonSchema": {"schema": orjson.dumps(schema).decode(), **named}}}}
    elif instruction := json_instruction(req.response_format):
        body.setdefault("system", []).append({"text": instruction})
    inference: dict[str, Any] = {}
    for key, value in (("maxTokens", req.max_tokens), ("temperature", req.temperature), ("topP", req.top_p)):
        if value is not None:
            inference[key] = value
    if stops := (claude.stop_sequences(req.stop) if claude_model else req.stop):
        inference["stopSequences"] = stops
    if inference:
        body["inferenceConfig"] = inference
    additional: dict[str, Any] = dict(extra_fields or {})
    if claude_model:
        if req.top_k is not None:
            additional.setdefault("top_k", req.top_k)  # Claude's own request field; Converse has none
        additional.update(thinking_fields)  # the client's request wins over the provider's default
    if additional:
        body["additionalModelRequestFields"] = additional
    if offers_tools:
        tools: list[dict[str, Any]] = []
        for t in req.tools:
            tools.append({"toolSpec": {"name": t.name, "description": t.description or t.name,
                                       "inputSchema": {"json": object_root(t.parameters)}}})
            if claude_model and t.cache:
                tools.append(_cache_point(t.cache))
        config: dict[str, Any] = {"tools": tools}
        if choice and choice.mode == "required":
            config["toolChoice"] = {"any": {}}
        elif choice and choice.mode == "tool" and choice.name:
            config["toolChoice"] = {"tool": {"name": choice.name}}
        elif choice and choice.mode == "auto":
            config["toolChoice"] = {"auto": {}}
        body["toolConfig"] = config
    return body


def _usage(usage: Mapping[str, Any] | None) -> Usage:
    usage = usage or {}
    cache_read = token_count(usage.get("cacheReadInputTokens"))
    cache_write = token_count(usage.get("cacheWriteInputTokens"))
    # inputTokens excludes cached tokens; the IR counts the whole prompt as input (chat-completions style).
    return Usage(input_tokens=token_count(usage.get("inputTokens")) + cache_read + cache_write,
                 output_tokens=token_count(usage.get("outputTokens")),
                 cache_read_tokens=cache_read, cache_write_tokens=cache_write)


def classify_bedrock(status: int, error_type: str, message: str, headers: Mapping[str, str]) -> UpstreamError:
    kind = _ERRORS.get(error_type)
    lowered = message.lower()
    if "use case details" in lowered or "use-case form" in lowered:
        # The account has not submitted the model vendor's use-case form: an account condition of
        # this key (fail over), not a missing model (which would feed model deprecation).
        kind = ErrorType.AUTHENTICATION_ERROR
    elif kind is ErrorType.INVALID_REQUEST and "model identifier is invalid" in lowered:
        kind = ErrorType.MODEL_NOT_FOUND
    elif kind is ErrorType.RATE_LIMIT_ERROR and "per day" in lowered:
        kind = ErrorType.QUOTA_EXCEEDED  # a daily token quota will not recover by backing off
    if kind is None:
        return classify_by_status(status, message, headers)
    return UpstreamError(kind, message, status, retry_after_seconds(headers))


def _sigv4(method: str, url: str, body: bytes | None, headers: dict[str, str], access_key: str, secret_key: str,
           token: str | None, service: str, region: str) -> dict[str, str]:
    # botocore is imported here, not at module level: it costs ~16 MB of memory that only
    # gateways with a Bedrock provider should pay.
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    aws = AWSRequest(method=method, url=url, data=body or b"", headers=headers)
    SigV4Auth(Credentials(access_key, secret_key, token), service, region).add_auth(aws)
    return {k.lower(): v for k, v in aws.headers.items()}


def botocore_parser_error() -> type[Exception]:
    from botocore.eventstream import ParserError

    return ParserError


def _chain(endpoint: Endpoint) -> AwsChain | None:
    if endpoint.options.get("auth") != "aws":
        return None
    profile = endpoint.options.get("profile")
    return source_for(endpoint, lambda: AwsChain(str(profile) if profile else None))  # type: ignore[return-value]


_PROFILE_PREFIX = re.compile(r"^(us|us-gov|eu|apac|jp|au|ca|global)\.")


class BedrockAdapter:
    wire = "bedrock-converse"
    answer_fields: tuple[str, ...] = ("output",)

    async def prepare(self, endpoint: Endpoint) -> None:
        chain = _chain(endpoint)
        if chain is not None:
            await chain.prepare()

    def _sign(self, method: str, url: str, body: bytes | None, endpoint: Endpoint, service: str,
              headers: dict[str, str]) -> dict[str, str]:
        chain = _chain(endpoint)
        if chain is not None:
            frozen = chain.value
            return _sigv4(method, url, body, headers, frozen.access_key, frozen.secret_key, frozen.token,
                          service, region_of(endpoint))
        parts = endpoint.api_key.split(":")
        if len(parts) == 1:
            return {**headers, "authorization": f"Bearer {endpoint.api_key}"}
        if len(parts) not in (2, 3) or not all(parts):
            raise UpstreamError(ErrorType.AUTHENTICATION_ERROR,
                                "Bedrock key must be ACCESS_KEY_ID:SECRET_ACCESS_KEY[:SESSION_TOKEN] or an API key")
        return _sigv4(method, url, body, headers, parts[0], parts[1], parts[2] if len(parts) == 3 else None,
                      service, region_of(endpoint))

    def build_request(self, req: ChatRequest, upstream_model: str, endpoint: Endpoint) -> UpstreamRequest:
        base = (endpoint.base_url or DEFAULT_BASE_URL).rstrip("/")
        action = "converse-stream" if req.stream else "converse"
        # Sign the URL exactly as aiohttp will put it on the wire (yarl turns %3A back into ":"):
        # AWS canonicalises the path it receives, so both sides must start from the same bytes.
        url = str(URL(f"{base}/model/{quote(upstream_model, safe='')}/{action}"))
        extra = endpoint.options.get("additional_model_request_fields")
        body = orjson.dumps(build_body(req, upstream_model, extra if isinstance(extra, dict) else None))
        headers = {"content-type": "application/json",
                   "accept": "application/vnd.amazon.eventstream" if req.stream else "application/json"}
        return UpstreamRequest("POST", url, self._sign("POST", url, body, endpoint, "bedrock", headers), body)

    def count_request(self, req: ChatRequest, upstream_model: str, endpoint: Endpoint) -> UpstreamRequest:
        """CountTokens (`POST /model/{id}/count-tokens`) over the Converse form of the request. It
        takes the foundation model's id: an inference profile's (`us.anthropic.…`, which on-demand
        Claude calls need) is refused as invalid, so its region prefix goes."""
        base = (endpoint.base_url or DEFAULT_BASE_URL).rstrip("/")
        model = _PROFILE_PREFIX.sub("", upstream_model)
        url = str(URL(f"{base}/model/{quote(model, safe='')}/count-tokens"))
        converse = {k: v for k, v in build_body(req).items()
                    if k in ("messages", "system", "toolConfig", "additionalModelRequestFields")}
        body = orjson.dumps({"input": {"converse": converse}})
        headers = {"content-type": "application/json", "accept": "application/json"}
        return UpstreamRequest("POST", url, self._sign("POST", url, body, endpoint, "bedrock", headers), body)

    def parse_count(self, body: bytes) -> int:
        return orjson.loads(body)["inputTokens"]

    @staticmethod
    def count_unsupported(error: UpstreamError) -> bool:
        """CountTokens refuses the models it cannot count with a 400 ValidationException: no fault
        of the caller's body, so the count is estimated instead."""
        return "support counting tokens" in error.message

    def parse_response(self, body: bytes) -> ChatResponse:
        data = orjson.loads(body)
        parts: list[TextPart | ThinkingPart | ToolCall] = []
        for block in ((data.get("output") or {}).get("message") or {}).get("content") or []:
            if "text" in block:
                parts.append(TextPart(block["text"]))
            elif "toolUse" in block:
                use = block["toolUse"]
                parts.append(ToolCall(use.get("toolUseId", ""), use.get("name", ""),
                                      orjson.dumps(use.get("input") or {}).decode()))
            elif "reasoningContent" in block:
                reasoning = block["reasoningContent"]
                if "redactedContent" in reasoning:
                    parts.append(ThinkingPart("", redacted=reasoning["redactedContent"]))
                else:
                    text = reasoning.get("reasoningText") or {}
                    parts.append(ThinkingPart(text.get("text", ""), text.get("signature")))
        return ChatResponse(id="msg_bdrk_" + uuid.uuid4().hex[:24], model="", parts=parts,
                            stop_reason=stop_reason(data.get("stopReason")), usage=_usage(data.get("usage")))

    def stream_decoder(self) -> "BedrockStreamDecoder":
        return BedrockStreamDecoder()

    def classify_error(self, status: int, body: bytes, headers: Mapping[str, str]) -> UpstreamError:
        lowered = {k.lower(): v for k, v in headers.items()}
        error_type = lowered.get("x-amzn-errortype", "").split(":", 1)[0]
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError:
            data = {}
        if not isinstance(data, dict):
            data = {}
        message = str(data.get("message") or data.get("Message") or body.decode("utf-8", "replace")[:500] or f"HTTP {status}")
        error_type = error_type or str(data.get("__type", "")).rsplit("#", 1)[-1]
        return classify_bedrock(status, error_type, message, lowered)

    def models_request(self, endpoint: Endpoint) -> UpstreamRequest:
        # The model catalogue is on the control-plane host (bedrock.{region}), not bedrock-runtime;
        # behind a runtime VPC endpoint it is the public control-plane host of the same region.
        base = (endpoint.base_url or DEFAULT_BASE_URL).rstrip("/")
        if "://bedrock-runtime." in base:
            base = base.replace("://bedrock-runtime.", "://bedrock.", 1)
        elif ".vpce.amazonaws.com" in base:
            base = f"https://bedrock.{region_of(endpoint)}.amazonaws.com"
        url = f"{base}/foundation-models?byOutputModality=TEXT"
        return UpstreamRequest("GET", url, self._sign("GET", url, None, endpoint, "bedrock", {"accept": "application/json"}))

    @staticmethod
    def list_name(model: str) -> str | None:
        """Inference-profile ids (`us.anthropic.…`, required for on-demand Claude) and ARNs
        (profiles, provisioned throughput) are not in the foundation-model list."""
        if model.startswith("arn:") or _PROFILE_PREFIX.match(model):
            return None
        return model

    def parse_models(self, body: bytes) -> list[str]:
        return [m["modelId"] for m in orjson.loads(body).get("modelSummaries") or [] if "modelId" in m]


class BedrockStreamDecoder:
    """converse-stream event-stream frames → IR events.

    Order upstream: messageStart, content blocks, messageStop (stop reason),
    metadata (usage). StreamEnd is emitted on metadata; at EOF after
    messageStop without metadata it is emitted without usage.
    """

    def __init__(self) -> None:
        from botocore.eventstream import (
            EventStreamBuffer,  # lazily, as in BedrockAdapter._sign
        )

        self._buffer = EventStreamBuffer()
        self._started = False
        self._ended = False
        self._stop: StopReason | None = None
        self._tools: dict[int, int] = {}  # contentBlockIndex → tool call index

    def feed(self, chunk: bytes) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        if self._ended:
            return out
        self._buffer.add_data(chunk)
        try:
            for message in self._buffer:
                self._on(message.headers, message.payload, out)
                if self._ended:
                    break
        except botocore_parser_error() as exc:
            self._ended = True
            out.append(StreamError(ErrorType.UPSTREAM_ERROR.value, f"Bedrock sent a malformed event stream: {exc}"))
        return out

    def close(self) -> list[StreamEvent]:
        if self._ended:
            return []
        self._ended = True
        if self._stop is not None:
            return [StreamEnd(self._stop)]
        return [StreamError(ErrorType.NETWORK_ERROR.value, "Bedrock stream ended before messageStop")]

    def _on(self, headers: Mapping[str, Any], payload: bytes, out: list[StreamEvent]) -> None:
        kind = headers.get(":message-type")
        data = orjson.loads(payload) if payload else {}
        if not isinstance(data, dict):
            raise unreadable_event()
        if kind == "exception" or kind == "error":
            name = str(headers.get(":exception-type") or headers.get(":error-code") or "")
            name = name[:1].upper() + name[1:]  # stream exceptions are camelCase: throttlingException
            message = str(data.get("message") or data.get("Message") or headers.get(":error-message") or name)
            err = classify_bedrock(500, name, message, {})
            self._ended = True
            out.append(StreamError(err.error_type.value, err.message))
            return
        event = headers.get(":event-type")
        if not self._started:
            self._started = True
            out.append(StreamStart("msg_bdrk_" + uuid.uuid4().hex[:24], ""))
        if event == "contentBlockStart":
            use = (data.get("start") or {}).get("toolUse")
            if use:
                index = self._tools[data.get("contentBlockIndex", 0)] = len(self._tools)
                out.append(ToolCallStart(index, use.get("toolUseId", ""), use.get("name", "")))
        elif event == "contentBlockDelta":
            # `delta` (a union: one member) and `contentBlockIndex` are required; a member this
            # decoder does not convert (citation, image...) is skipped, a delta of no known shape is not.
            delta = data.get("delta")
            if not isinstance(delta, dict) or type(data.get("contentBlockIndex")) is not int:
                raise unreadable_event()
            if "text" in delta:
                if delta["text"]:
                    out.append(TextDelta(delta["text"]))
            elif "toolUse" in delta:
                call_index = self._tools.get(data.get("contentBlockIndex", 0))
                if call_index is not None and delta["toolUse"].get("input"):
                    out.append(ToolCallDelta(call_index, delta["toolUse"]["input"]))
            elif "reasoningContent" in delta:
                reasoning = delta["reasoningContent"]
                if reasoning.get("redactedContent"):
                    out.append(ThinkingDelta("", redacted=reasoning["redactedContent"]))
                elif reasoning.get("text") or reasoning.get("signature"):
                    out.append(ThinkingDelta(reasoning.get("text", ""), reasoning.get("signature")))
        elif event == "messageStop":
            if not isinstance(data.get("stopReason"), str):  # required
                raise unreadable_event()
            try:
                self._stop = stop_reason(data.get("stopReason"))
            except UpstreamError as exc:
                self._ended = True
                out.append(StreamError(exc.error_type.value, exc.message))
        elif event == "metadata":
            self._ended = True
            out.append(StreamEnd(self._stop or "stop", usage=_usage(data.get("usage"))))
