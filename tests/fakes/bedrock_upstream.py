"""A fake AWS Bedrock runtime speaking the Converse API.

- POST /model/{modelId}/converse (JSON) and /converse-stream (binary
  application/vnd.amazon.eventstream frames, encoded here per AWS's framing:
  prelude with lengths and CRC32, string headers, JSON payload, message CRC32).
- GET /foundation-models (the control-plane listing, served on the same origin).
- auth: the SigV4 signature is recomputed with botocore from the request's
  own SignedHeaders and X-Amz-Date and compared, as AWS does; a Bedrock API
  key is accepted as `Authorization: Bearer`. Errors carry `x-amzn-ErrorType`
  and `{"message": ...}`.
- The "model" echoes the last user text, or calls the first tool with
  `tool_args` when tools are given and the last turn holds no toolResult.
- Converse bodies are checked with botocore's ParamValidator on the bedrock-runtime service
  model (a ValidationException otherwise) and kept in `bodies`.
- Claude's extended thinking (`additionalModelRequestFields.thinking` enabled or adaptive): the answer starts
  with signed reasoning and a redacted block, streamed as reasoningContent text deltas, then a
  `signature` delta, and a `redactedContent` delta, as Bedrock sends them. Reasoning replayed in an
  assistant turn must be byte for byte what this fake issued (ValidationException otherwise).
- Claude models of the messages fake's MODEL_RULES refuse what their generation does not take (thinking types,
  sampling settings, forced tool use, effort levels), read from the Converse body's Claude fields, in the
  words Converse relays ("The model returned the following errors: …", cline/cline#10572).
- A blank text block (empty or whitespace, anywhere: message, tool result, system) is refused
  with a ValidationException, as Converse does; so are toolUse or toolResult blocks without a toolConfig,
  and tool ids outside the service model's ToolUseId shape.
- Prompt caching: a body with a cachePoint reports `cacheWriteInputTokens` the first time its
  prompt (tools, system, messages) up to the last cache point is seen, `cacheReadInputTokens` after.
- CountTokens (`/model/{modelId}/count-tokens`) takes a foundation model's id, not an inference
  profile's (`us.anthropic.…`: "The provided model identifier is invalid.", as Portkey-AI/gateway#1437
  reports), and refuses models it cannot count (`count_unsupported`) with a 400 ValidationException
  "The provided model doesn't support counting tokens." (maximhq/bifrost#2169).
"""

from __future__ import annotations

import binascii
import re
import struct
from typing import Any
from urllib.parse import unquote

import orjson
from aiohttp import web
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.session import get_session
from botocore.validate import ParamValidator

from tests.fakes.anthropic_upstream import BOTH_KNOBS, MODEL_RULES, ONE_SAMPLING_KNOB, generation_refusal, sample_for
from tests.fakes.tool_rules import converse_tools_refusal
from tests.fakes.upstream_base import FakeUpstream, json_response


def aws_error(status: int, error_type: str, message: str) -> web.Response:
    return json_response({"message": message}, status,
                         headers={"x-amzn-ErrorType": f"{error_type}:http://internal.amazon.com/coral/com.amazon.bedrock/"})


def _header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    return struct.pack("!B", len(raw_name)) + raw_name + struct.pack("!BH", 7, len(raw_value)) + raw_value


def event_frame(headers: dict[str, str], payload: bytes) -> bytes:
    """One AWS event-stream message."""
    raw_headers = b"".join(_header(k, v) for k, v in headers.items())
    total = 12 + len(raw_headers) + len(payload) + 4
    prelude = struct.pack("!II", total, len(raw_headers))
    prelude += struct.pack("!I", binascii.crc32(prelude) & 0xFFFFFFFF)
    message = prelude + raw_headers + payload
    return message + struct.pack("!I", binascii.crc32(message) & 0xFFFFFFFF)


def event(event_type: str, data: dict[str, Any]) -> bytes:
    return event_frame({":event-type": event_type, ":content-type": "application/json", ":message-type": "event"},
                       orjson.dumps({**data, "p": "abcdefghijklmnopqrstuvwxyzABCDEFGH"}))


def exception(exception_type: str, message: str) -> bytes:
    return event_frame({":exception-type": exception_type, ":content-type": "application/json",
                        ":message-type": "exception"}, orjson.dumps({"message": message}))


_SERVICE = get_session().get_service_model("bedrock-runtime")
_PROFILE = re.compile(r"^(us|us-gov|eu|apac|jp|au|ca|global)\.")  # a cross-region inference profile's prefix


# ToolUseId's pattern and length in the service model, which botocore's ParamValidator leaves unchecked.
_TOOL_USE_ID_SHAPE = _SERVICE.shape_for("ToolUseId").metadata  # {min: 1, max: 64, pattern: [a-zA-Z0-9_.:-]+}
_TOOL_USE_ID = re.compile(_TOOL_USE_ID_SHAPE["pattern"])


def _tool_blocks_problem(body: dict[str, Any]) -> str | None:
    """Converse refuses a tool id outside its ToolUseId shape, and toolUse and toolResult blocks in a
    request without a toolConfig (the message as vxcontrol/pentagi#196 and patriceckhart/zot#18 report it)."""
    blocks = [block.get("toolUse") or block.get("toolResult") for message in body["messages"]
              for block in message["content"] if "toolUse" in block or "toolResult" in block]
    for block in blocks:
        if not _TOOL_USE_ID.fullmatch(block["toolUseId"]) or len(block["toolUseId"]) > _TOOL_USE_ID_SHAPE["max"]:
            return (f"1 validation error detected: Value '{block['toolUseId']}' at 'toolUseId' failed to satisfy "
                    f"constraint: Member must satisfy regular expression pattern: {_TOOL_USE_ID.pattern} and have "
                    f"length less than or equal to {_TOOL_USE_ID_SHAPE['max']}")
    if blocks and not body.get("toolConfig"):
        return "The toolConfig field must be defined when using toolUse and toolResult content blocks."
    return None


def _claude_refusal(model_id: str, body: dict[str, Any]) -> str | None:
    """What the Claude model behind `model_id` refuses in a Converse body, as the messages fake's rules
    read the same request in Claude's own fields."""
    name = re.sub(r"(-\d{8})?(-v\d+(:\d+)?)?$", "", model_id.partition("anthropic.")[2])
    rules = MODEL_RULES.get(name)
    if rules is None:
        return None
    additional = body.get("additionalModelRequestFields") or {}
    inference = body.get("inferenceConfig") or {}
    choice = next(iter((body.get("toolConfig") or {}).get("toolChoice") or {"auto": {}}))
    kinds = {"reasoningContent": "thinking", "toolUse": "tool_use", "toolResult": "tool_result"}
    view: dict[str, Any] = {
        **{k: additional[k] for k in ("thinking", "output_config", "top_k") if k in additional},
        **{k: inference[c] for k, c in (("temperature", "temperature"), ("top_p", "topP")) if c in inference},
        "max_tokens": inference.get("maxTokens", 4096),  # Converse's default for Claude: assumed
        "tool_choice": {"type": choice},
        "messages": [{"role": m["role"], "content": [{"type": next((kinds[k] for k in b if k in kinds), "text")}
                                                     for b in m["content"]]} for m in body["messages"]]}
    return generation_refusal(view, rules)


def _blank_text(body: dict[str, Any]) -> str | None:
    """Converse refuses a text block that is empty or only whitespace, in a message, a tool result or
    the system prompt ("The text field in the ContentBlock object at messages.1.content.0 is blank",
    stdapi-ai/stdapi.ai#24; "text content blocks must be non-empty" for an empty tool result,
    NousResearch/hermes-agent#55092)."""
    places = [(f"system.{i}", block) for i, block in enumerate(body.get("system") or [])]
    for i, message in enumerate(body["messages"]):
        for j, block in enumerate(message["content"]):
            places.append((f"messages.{i}.content.{j}", block))
            for k, inner in enumerate((block.get("toolResult") or {}).get("content") or []):
                places.append((f"messages.{i}.content.{j}.toolResult.content.{k}", inner))
    for where, block in places:
        if "text" in block and not str(block["text"]).strip():
            return f"The text field in the ContentBlock object at {where} is blank. Add text to the text field, and try again."
    return None


class FakeBedrock(FakeUpstream):
    def __init__(self, access_key: str = "AKIAFAKEEXAMPLE", secret_key: str = "fake/secret+key",
                 region: str = "eu-west-1", api_key: str = "ABSKfakeBedrockApiKey",
                 models: tuple[str, ...] = ("anthropic.claude-3-5-haiku-20241022-v1:0",)) -> None:
        super().__init__()
        self.access_key, self.secret_key, self.region, self.api_key = access_key, secret_key, region, api_key
        self.models = list(models)
        self.tool_args: dict[str, Any] = {"city": "Paris"}
        self.stream_exception: tuple[str, str] | None = None  # (type, message) sent mid-stream instead of the end
        self.bodies: list[dict[str, Any]] = []  # Converse bodies received, in order
        self.issued: list[dict[str, Any]] = []  # reasoningContent blocks this fake produced
        self._cached: set[bytes] = set()
        self.count_unsupported: set[str] = set()  # foundation models whose CountTokens is refused

    @property
    def base_url(self) -> str:
        return self.origin

    @property
    def key(self) -> str:
        return f"{self.access_key}:{self.secret_key}"

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/model/{model_id}/{action}", self._invoke)
        app.router.add_get("/foundation-models", self._list)

    def _auth(self, request: web.Request, body: bytes) -> web.Response | None:
        auth = request.headers.get("authorization", "")
        if auth.startswith("Bearer "):
            return None if auth[7:] == self.api_key else aws_error(403, "UnrecognizedClientException",
                                                                 "The security token included in the request is invalid.")
        match = re.match(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request, "
                         r"SignedHeaders=([^,]+), Signature=([0-9a-f]{64})$", auth)
        if not match:
            return aws_error(403, "MissingAuthenticationTokenException", "Missing Authentication Token")
        access, _day, region, service, signed, signature = match.groups()
        if access != self.access_key:
            return aws_error(403, "UnrecognizedClientException", "The security token included in the request is invalid.")
        if region != self.region or service != "bedrock":
            return aws_error(403, "InvalidSignatureException", "Credential should be scoped to a valid region.")
        headers = {name: request.headers.get(name, "") for name in signed.split(";")}
        # The raw (still percent-encoded) path: SigV4 encodes it once more, as AWS does.
        url = f"{request.scheme}://{request.host}{request.raw_path}"
        aws = AWSRequest(method=request.method, url=url, data=body, headers=headers)
        aws.context["timestamp"] = headers.get("x-amz-date", "")
        signer = SigV4Auth(Credentials(self.access_key, self.secret_key), "bedrock", self.region)
        expected = signer.signature(signer.string_to_sign(aws, signer.canonical_request(aws)), aws)
        if expected != signature:
            return aws_error(403, "InvalidSignatureException",
                             "The request signature we calculated does not match the signature you provided.")
        return None

    async def _list(self, request: web.Request) -> web.Response:
        if (denied := self._auth(request, b"")) is not None:
            return denied
        return json_response({"modelSummaries": [
            {"modelArn": f"arn:aws:bedrock:{self.region}::foundation-model/{m}", "modelId": m, "providerName": "Anthropic",
             "inputModalities": ["TEXT", "IMAGE"], "outputModalities": ["TEXT"], "responseStreamingSupported": True,
             "inferenceTypesSupported": ["ON_DEMAND"], "modelLifecycle": {"status": "ACTIVE"}}
            for m in self.models]})

    def _thinking(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        thinking = (body.get("additionalModelRequestFields") or {}).get("thinking") or {}
        if thinking.get("type") not in ("enabled", "adaptive"):
            return []
        n = len(self.issued)
        blocks = [{"reasoningContent": {"reasoningText": {"text": f"Thought {n}: check the tools.",
                                                          "signature": f"EqQBCkYIARgCIkD{n}sig+/=="}}},
                  {"reasoningContent": {"redactedContent": f"UmVkYWN0ZWQ{n}=="}}]
        self.issued.extend(blocks)
        return blocks

    def _reasoning_problem(self, body: dict[str, Any]) -> str | None:
        for i, message in enumerate(body["messages"]):
            for j, block in enumerate(message["content"]):
                if "reasoningContent" in block and block not in self.issued:
                    return f"messages.{i}.content.{j}: Invalid `signature` in `thinking` block"
        return None

    def _cache_usage(self, body: dict[str, Any]) -> dict[str, int]:
        # The prompt in the order it is cached: tools, system, messages.
        raw = orjson.dumps([(body.get("toolConfig") or {}).get("tools"), body.get("system"), body["messages"]])
        mark = raw.rfind(b'{"cachePoint"')
        if mark < 0:
            return {}
        prefix = raw[:mark]
        if prefix in self._cached:
            return {"cacheReadInputTokens": len(prefix) // 4}
        self._cached.add(prefix)
        return {"cacheWriteInputTokens": len(prefix) // 4}

    def _answer(self, body: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
        last = body["messages"][-1]["content"]
        results = [b["toolResult"] for b in last if "toolResult" in b]
        tools = (body.get("toolConfig") or {}).get("tools") or []
        if tools and not results:
            name = tools[0]["toolSpec"]["name"]
            choice = body["toolConfig"].get("toolChoice") or {}
            if "tool" in choice:
                name = choice["tool"]["name"]
            return [{"toolUse": {"toolUseId": "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q", "name": name, "input": self.tool_args}}], "tool_use"
        if results:
            return [{"text": "Result: " + " ".join(c.get("text", "") for c in results[0]["content"])}], "end_turn"
        text_format = (body.get("outputConfig") or {}).get("textFormat")
        if text_format:  # structured output: JSON of the schema, which Converse takes as a JSON string
            schema = orjson.loads(text_format["structure"]["jsonSchema"]["schema"])
            return [{"text": orjson.dumps(sample_for(schema)).decode()}], "end_turn"
        text = " ".join(b["text"] for b in last if "text" in b)
        images = sum(1 for b in last if "image" in b)
        suffix = f" [{images} image(s)]" if images else ""
        return [{"text": f"Echo: {text}{suffix}"}], "end_turn"

    async def _invoke(self, request: web.Request) -> web.StreamResponse:
        body_raw = await request.read()
        if (denied := self._auth(request, body_raw)) is not None:
            return denied
        model_id = unquote(request.match_info["model_id"])
        action = request.match_info["action"]
        if action not in ("converse", "converse-stream", "count-tokens"):
            return aws_error(404, "UnknownOperationException", "")
        if action == "count-tokens":
            # A foundation model: a served one, or the one behind a served inference profile.
            if model_id not in {_PROFILE.sub("", m) for m in self.models}:
                return aws_error(400, "ValidationException", "The provided model identifier is invalid.")
            if model_id in self.count_unsupported:
                return aws_error(400, "ValidationException", "The provided model doesn't support counting tokens.")
        elif model_id not in self.models:
            return aws_error(400, "ValidationException", "The provided model identifier is invalid.")
        body = orjson.loads(body_raw)
        if action == "count-tokens":
            # CountTokens (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_CountTokens.html):
            # {input: {converse: {messages, system, toolConfig}}} -> {inputTokens}
            converse = (body.get("input") or {}).get("converse")
            if not isinstance(converse, dict) or not converse.get("messages") or set(converse) - {
                    "messages", "system", "toolConfig", "additionalModelRequestFields"}:
                return aws_error(400, "ValidationException", "Malformed input request.")
            self.counted = converse
            return json_response({"inputTokens": len(orjson.dumps(converse)) // 4})
        if not body.get("messages") or body["messages"][0]["role"] != "user":
            return aws_error(400, "ValidationException", "A conversation must start with a user message.")
        roles = [m["role"] for m in body["messages"]]
        if any(a == b for a, b in zip(roles, roles[1:])):
            return aws_error(400, "ValidationException", "A conversation must alternate between user and assistant roles.")
        operation = _SERVICE.operation_model("ConverseStream" if action == "converse-stream" else "Converse")
        report = ParamValidator().validate({"modelId": model_id, **body}, operation.input_shape)
        if report.has_errors():
            return aws_error(400, "ValidationException", report.generate_report())
        if (problem := self._reasoning_problem(body) or _blank_text(body) or _tool_blocks_problem(body)
                or converse_tools_refusal(body)) is not None:
            return aws_error(400, "ValidationException", problem)
        inference = body.get("inferenceConfig") or {}
        if "temperature" in inference and "topP" in inference and ONE_SAMPLING_KNOB.search(model_id):
            # How Converse relays Claude's refusal (skydiscover-ai/skydiscover#15).
            return aws_error(400, "ValidationException", f"The model returned the following errors: {BOTH_KNOBS}")
        if (refusal := _claude_refusal(model_id, body)) is not None:
            return aws_error(400, "ValidationException", f"The model returned the following errors: {refusal}")
        self.bodies.append(body)
        content, stop = self._answer(body)
        content = self._thinking(body) + content
        usage = {"inputTokens": len(body_raw) // 4, "outputTokens": max(1, len(orjson.dumps(content)) // 4),
                 **self._cache_usage(body)}
        usage["totalTokens"] = usage["inputTokens"] + usage["outputTokens"]
        if action == "converse":
            return json_response({"output": {"message": {"role": "assistant", "content": content}},
                                  "stopReason": stop, "usage": usage, "metrics": {"latencyMs": 321}})
        frames = [event("messageStart", {"role": "assistant"})]
        for index, block in enumerate(content):
            if "reasoningContent" in block:
                reasoning = block["reasoningContent"]
                if "redactedContent" in reasoning:
                    deltas = [{"redactedContent": reasoning["redactedContent"]}]
                else:
                    text = reasoning["reasoningText"]["text"]
                    deltas = [{"text": text[i : i + 7]} for i in range(0, len(text), 7)]
                    deltas.append({"signature": reasoning["reasoningText"]["signature"]})
                for delta in deltas:
                    frames.append(event("contentBlockDelta", {"contentBlockIndex": index,
                                                              "delta": {"reasoningContent": delta}}))
            elif "toolUse" in block:
                use = block["toolUse"]
                frames.append(event("contentBlockStart", {"contentBlockIndex": index, "start": {
                    "toolUse": {"toolUseId": use["toolUseId"], "name": use["name"]}}}))
                args = orjson.dumps(use["input"]).decode()
                for i in range(0, len(args), 5):
                    frames.append(event("contentBlockDelta", {"contentBlockIndex": index,
                                                              "delta": {"toolUse": {"input": args[i : i + 5]}}}))
            else:
                words = block["text"].split(" ")
                for i, word in enumerate(words):
                    piece = word + (" " if i < len(words) - 1 else "")
                    frames.append(event("contentBlockDelta", {"contentBlockIndex": index, "delta": {"text": piece}}))
            frames.append(event("contentBlockStop", {"contentBlockIndex": index}))
        if self.stream_exception:
            frames.append(exception(*self.stream_exception))
        else:
            frames.append(event("messageStop", {"stopReason": stop}))
            frames.append(event("metadata", {"usage": usage, "metrics": {"latencyMs": 321}}))
        return await self.write_stream(request, frames, "application/vnd.amazon.eventstream", final_frames=2)
