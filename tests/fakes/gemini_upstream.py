"""A fake Gemini API (v1beta) speaking the real wire format.

- POST /v1beta/models/{model}:generateContent and :streamGenerateContent?alt=sse
- GET /v1beta/models
- auth: `x-goog-api-key` header (or `key` query); a wrong key is a 400
  INVALID_ARGUMENT with ErrorInfo reason API_KEY_INVALID, a missing key a 403,
  exactly as Google answers.
- The "model" echoes the last user text; when tools are declared and the last
  user turn is not a function response it calls the first tool with `tool_args`.
- The models of MODEL_RULES refuse what Google documents they do not take, in the service's words
  (`generation_refusal`): thinking budgets out of range, levels, both at once, penalties, a conversation
  that ends with the model, more than 5 stop sequences, 65,536 output tokens or more, an empty enum value.
- Gemini 3 models sign the first function call of each answer (`thoughtSignature`) and refuse a current
  turn whose steps do not carry theirs back (or one of Google's sentinels), as the service does.
- With `includeThoughts`, an answer opens with a thought summary part (`thought: true`).
"""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

from tests.fakes.anthropic_upstream import sample_for
from tests.fakes.tool_rules import gemini_tools_refusal
from tests.fakes.upstream_base import FakeUpstream, json_response


def google_error(code: int, status: str, message: str, details: list[Any] | None = None) -> dict[str, Any]:
    err: dict[str, Any] = {"code": code, "message": message, "status": status}
    if details:
        err["details"] = details
    return {"error": err}


# Google's documented stand-ins for a signature where the history was made elsewhere (thought-signatures guide, FAQ).
SENTINEL_SIGNATURES = ("skip_thought_signature_validator", "context_engineering_is_the_way_to_go")


@dataclass(frozen=True)
class GeminiRules:
    """One model as Google documents it (ai.google.dev thinking guide; the Agent Platform model pages, read
    2026-11); the gateway reads the same from the model's generation (providers/gemini.gemini_model)."""

    budget: tuple[int, int]  # the thinkingBudget range it takes (-1: dynamic, always taken)
    budget_off: bool = True  # 0 turns thinking off
    levels: frozenset[str] = frozenset()  # thinkingLevel values
    prefill: bool = True  # a conversation that ends with the model


_LEVELS = frozenset({"low", "medium", "high"})
MODEL_RULES = {
    "gemini-2.5-flash": GeminiRules((1, 24576)),
    "gemini-2.5-flash-lite": GeminiRules((512, 24576)),
    "gemini-2.5-pro": GeminiRules((128, 32768), budget_off=False),
    "gemini-3.1-pro-preview": GeminiRules((128, 32768), budget_off=False, levels=_LEVELS),
    "gemini-3.8-flash": GeminiRules((1, 24576), levels=_LEVELS, prefill=False),
}


def _empty_enum(schema: Any, path: str) -> str | None:
    if isinstance(schema, dict):
        for i, value in enumerate(schema.get("enum") or ()):
            if value == "":
                return f"{path}.enum[{i}]: cannot be empty"
        for name, sub in (schema.get("properties") or {}).items():
            if (found := _empty_enum(sub, f"{path}.properties[{name}]")) is not None:
                return found
        return _empty_enum(schema.get("items"), f"{path}.items")
    return None


def generation_refusal(model: str, body: dict[str, Any], rules: GeminiRules) -> str | None:
    """The service's refusal of what `model` does not take (the words users quote: cited per rule)."""
    config = body.get("generationConfig") or {}
    thinking = config.get("thinkingConfig") or {}
    budget, level = thinking.get("thinkingBudget"), thinking.get("thinkingLevel")
    if budget is not None and level is not None:
        return "You can only set only one of thinking budget and thinking level."  # sterlp/eclipse-peon-ai#115
    if level is not None and not rules.levels:
        return "thinking_level is not supported by this model"  # QwenLM/qwen-code#9094
    if level is not None and level not in rules.levels:
        return f"'{level}' is not a supported thinking level for this model. Allowed values are: medium, low, high."
    if budget == 0 and not rules.budget_off:
        return "Budget 0 is invalid. This model only works in thinking mode."  # vercel/ai#8027
    if budget not in (None, -1, 0) and not rules.budget[0] <= budget <= rules.budget[1]:
        return (f"The thinking budget {budget} is invalid. Please choose a value between {rules.budget[0]} and "
                f"{rules.budget[1]}.")  # earendil-works/pi#2838
    if "presencePenalty" in config or "frequencyPenalty" in config:
        return f"Penalty is not enabled for models/{model}"  # BerriAI/litellm#32273
    if config.get("maxOutputTokens", 1) >= 65536:
        return (f"Unable to submit request because it has a maxOutputTokens value of {config['maxOutputTokens']} but "
                "the supported range is from 1 (inclusive) to 65536 (exclusive). Update the value and try again.")
    if len(config.get("stopSequences") or ()) > 5:
        return (f"Unable to submit request because it has a stopSequences value of {len(config['stopSequences'])} "
                "but the supported range is from 1 (inclusive) to 6 (exclusive). Update the value and try again.")
    if not rules.prefill and body["contents"][-1]["role"] == "model":
        return "Requests ending with a model turn are not supported."  # Zoo-Code-Org/Zoo-Code#1052
    for t, tool in enumerate(body.get("tools") or ()):
        for d, decl in enumerate(tool.get("functionDeclarations") or ()):
            where = f"* GenerateContentRequest.tools[{t}].function_declarations[{d}].parameters"
            if (found := _empty_enum(decl.get("parameters"), where)) is not None:
                return found  # Kxiandaoyan/Memoh-v2#22
    return None


def _lowercase_types(schema: Any) -> Any:
    """A `responseSchema` (OpenAPI types, upper case: OBJECT, STRING) in JSON Schema's spelling."""
    if isinstance(schema, dict):
        return {k: (v.lower() if k == "type" and isinstance(v, str) else _lowercase_types(v)) for k, v in schema.items()}
    if isinstance(schema, list):
        return [_lowercase_types(v) for v in schema]
    return schema


class FakeGemini(FakeUpstream):
    prefix = "/v1beta"

    def __init__(self, api_key: str = "gm-test-key", models: tuple[str, ...] = ("gemini-2.5-flash",)) -> None:
        super().__init__()
        self.api_key = api_key
        self.models = list(models)
        self.tool_args: dict[str, Any] = {"city": "Paris"}
        self.signatures: set[str] = set()  # the thought signatures this fake gave (Gemini 3 models)

    @property
    def base_url(self) -> str:
        return self.origin + self.prefix

    def routes(self, app: web.Application) -> None:
        app.router.add_post(self.prefix + "/models/{target}", self._generate)
        app.router.add_get(self.prefix + "/models", self._list)

    def _auth(self, request: web.Request) -> web.Response | None:
        key = request.headers.get("x-goog-api-key") or request.query.get("key")
        if not key:
            return json_response(google_error(
                403, "PERMISSION_DENIED",
                "Method doesn't allow unregistered callers (callers without established identity). "
                "Please use API Key or other form of API consumer identity to call this API."), 403)
        if key != self.api_key:
            return json_response(google_error(
                400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.",
                [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
                  "domain": "googleapis.com",
                  "metadata": {"service": "generativelanguage.googleapis.com"}}]), 400)
        return None

    async def _list(self, request: web.Request) -> web.Response:
        if (denied := self._auth(request)) is not None:
            return denied
        models = [
            {"name": f"models/{m}", "displayName": m, "supportedGenerationMethods": ["generateContent", "countTokens"]}
            for m in self.models
        ]
        models.append({"name": "models/text-embedding-004", "supportedGenerationMethods": ["embedContent"]})
        return json_response({"models": models})

    def _sign(self, parts: list[dict[str, Any]]) -> None:
        """Gemini 3 signs the first function call of each step (https://ai.google.dev/gemini-api/docs/thought-signatures)."""
        for part in parts:
            if "functionCall" in part:
                part["thoughtSignature"] = base64.b64encode(os.urandom(24)).decode()
                self.signatures.add(part["thoughtSignature"])
                return

    def _signature_refusal(self, body: dict[str, Any]) -> str | None:
        """Gemini 3 checks the steps of the current turn (after the last user text): each step's first function
        call must carry the signature it came with, or a sentinel Google documents for history made elsewhere.
        Words: "Function call is missing a thought_signature…" (google-gemini users, e.g. chatboxai/chatbox#3308,
        manthanabc/paws#103), "Corrupted thought signature." (heyhuynhgiabuu/proxypal#119)."""
        contents = body["contents"]
        start = max((i for i, c in enumerate(contents) if c["role"] == "user"
                     and any("text" in p for p in c.get("parts") or [])), default=0)
        for position, content in enumerate(contents[start:], start + 1):
            calls = [p for p in content.get("parts") or [] if "functionCall" in p]
            if content["role"] != "model" or not calls:
                continue
            signature = calls[0].get("thoughtSignature")
            if not signature:
                return ("Function call is missing a thought_signature in functionCall parts. This is required for tools "
                        "to work correctly, and missing thought_signature may lead to degraded model performance. "
                        f"Additional data, function call `default_api:{calls[0]['functionCall'].get('name')}` , position "
                        f"{position}. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more "
                        "details.")
            if signature not in self.signatures and signature not in SENTINEL_SIGNATURES:
                return "Corrupted thought signature."
        return None

    def _answer(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        contents = body["contents"]
        last = contents[-1]["parts"]
        responses = [p["functionResponse"] for p in last if "functionResponse" in p]
        decls = [d for t in body.get("tools", []) for d in t.get("functionDeclarations", [])]
        mode = body.get("toolConfig", {}).get("functionCallingConfig", {}).get("mode", "AUTO")
        if decls and not responses and mode != "NONE":
            allowed = body["toolConfig"]["functionCallingConfig"].get("allowedFunctionNames") if mode == "ANY" else None
            name = allowed[0] if allowed else decls[0]["name"]
            return [{"functionCall": {"name": name, "args": self.tool_args}}]
        if responses:
            return [{"text": f"{responses[0]['name']} returned {orjson.dumps(responses[0]['response']).decode()}"}]
        config = body.get("generationConfig") or {}
        schema = config.get("responseJsonSchema") or config.get("responseSchema")
        if config.get("responseMimeType") == "application/json" and schema:  # JSON of the schema, as asked
            return [{"text": orjson.dumps(sample_for(_lowercase_types(schema))).decode()}]
        text = " ".join(p.get("text", "") for p in last if "text" in p)
        return [{"text": f"Echo: {text}"}]

    async def _generate(self, request: web.Request) -> web.StreamResponse:
        if (denied := self._auth(request)) is not None:
            return denied
        model, _, method = request.match_info["target"].partition(":")
        if method == "countTokens" and model in self.models:
            # https://ai.google.dev/api/tokens#method:-models.counttokens: `contents` or a whole
            # `generateContentRequest` (system instruction and tools counted too) -> {totalTokens}
            body = orjson.loads(await request.read())
            whole = body.get("generateContentRequest")
            if not (whole or body.get("contents")) or (whole and whole.get("model") != f"models/{model}"):
                return json_response(google_error(400, "INVALID_ARGUMENT", "Invalid countTokens request."), 400)
            self.counted = whole or body
            return json_response({"totalTokens": len(orjson.dumps(whole or body)) // 4})
        if method not in ("generateContent", "streamGenerateContent"):
            return json_response(google_error(404, "NOT_FOUND", "Method not found."), 404)
        if model not in self.models:
            return json_response(google_error(
                404, "NOT_FOUND",
                f"models/{model} is not found for API version v1beta, or is not supported for "
                f"generateContent. Call ListModels to see the list of available models and their "
                f"supported methods."), 404)
        try:
            body = orjson.loads(await request.read())
            roles = {c["role"] for c in body["contents"]}
            assert body["contents"] and roles <= {"user", "model"}
        except (orjson.JSONDecodeError, KeyError, AssertionError, TypeError):
            return json_response(google_error(400, "INVALID_ARGUMENT", "* GenerateContentRequest.contents: contents is not specified"), 400)
        # An empty text part anywhere, the system instruction's included, is refused (zuisong/gemini-openai-proxy#83).
        given = [p for c in [*body["contents"], body.get("systemInstruction") or {}] for p in c.get("parts") or []]
        if any(p.get("text") == "" for p in given):
            return json_response(google_error(
                400, "INVALID_ARGUMENT", "Unable to submit request because it has an empty text parameter. Add a value "
                "to the parameter and try again."), 400)
        if (refusal := gemini_tools_refusal(body)) is not None:
            return json_response(google_error(400, "INVALID_ARGUMENT", refusal), 400)
        rules = MODEL_RULES.get(model)
        if rules is not None and (refusal := generation_refusal(model, body, rules)) is not None:
            return json_response(google_error(400, "INVALID_ARGUMENT", refusal), 400)
        if model.startswith("gemini-3") and (refusal := self._signature_refusal(body)) is not None:
            return json_response(google_error(400, "INVALID_ARGUMENT", refusal), 400)
        parts = self._answer(body)
        if model.startswith("gemini-3"):
            self._sign(parts)
        if ((body.get("generationConfig") or {}).get("thinkingConfig") or {}).get("includeThoughts"):
            parts.insert(0, {"text": "Thinking it over.", "thought": True})  # a summary of its thoughts
        prompt_tokens = len(orjson.dumps(body["contents"])) // 4
        out_tokens = sum(len(orjson.dumps(p)) // 4 for p in parts)
        usage = {"promptTokenCount": prompt_tokens, "candidatesTokenCount": out_tokens,
                 "totalTokenCount": prompt_tokens + out_tokens}
        if method == "generateContent":
            return json_response({
                "candidates": [{"content": {"parts": parts, "role": "model"}, "finishReason": "STOP", "index": 0}],
                "usageMetadata": usage, "modelVersion": model, "responseId": "resp-fake-1",
            })
        if request.query.get("alt") != "sse":
            return json_response(google_error(400, "INVALID_ARGUMENT", "test fake serves only alt=sse"), 400)
        # Text is streamed word by word; the final chunk carries finishReason and full usage.
        pieces: list[dict[str, Any]] = []
        for part in parts:
            if "text" in part:
                words = part["text"].split(" ")
                pieces.extend({**part, "text": w + (" " if i < len(words) - 1 else "")} for i, w in enumerate(words))
            else:
                pieces.append(part)
        frames = []
        for i, piece in enumerate(pieces):
            chunk: dict[str, Any] = {
                "candidates": [{"content": {"parts": [piece], "role": "model"}, "index": 0}],
                "usageMetadata": {"promptTokenCount": prompt_tokens, "totalTokenCount": prompt_tokens},
                "modelVersion": model, "responseId": "resp-fake-1",
            }
            if i == len(pieces) - 1:
                chunk["candidates"][0]["finishReason"] = "STOP"
                chunk["usageMetadata"] = usage
            frames.append(b"data: " + orjson.dumps(chunk) + b"\r\n\r\n")
        return await self.write_stream(request, frames, "text/event-stream")
