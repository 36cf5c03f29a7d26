"""Google Cloud Vertex AI wire adapter: Gemini and the vendor's Claude models on Vertex URLs.

  {base}/v1/projects/{project}/locations/{location}/publishers/google/models/{model}:generateContent
  (:streamGenerateContent?alt=sse) with the Gemini body (gemini.py), and
  .../publishers/anthropic/models/{model}:rawPredict (:streamRawPredict) with the messages body
  (anthropic_messages.py) less `model`, plus `anthropic_version: vertex-2023-10-16`. Counts:
  .../anthropic/models/count-tokens:rawPredict and .../google/models/{model}:countTokens.

A model whose name starts with `claude` goes to the anthropic publisher, any other to google.
Answers are told apart by their shape (a message object or SSE `event:` lines for Claude).
Auth: `Authorization: Bearer` with a google-auth token: the provider's key holds a
service-account key file's JSON, or, with no key, application-default credentials are used
(`providers/credentials.py`). `options.project` (default: the service account's project) and
`options.location` (default `global`; another location uses the `{location}-aiplatform` host).
"""

from __future__ import annotations

from typing import Any, Mapping
from urllib.parse import quote, urlsplit

import orjson

from modelgate.errors import ErrorType, UpstreamError
from modelgate.protocols.ir import ChatRequest, ChatResponse, StreamEvent
from modelgate.providers import anthropic_messages, gemini
from modelgate.providers.base import Endpoint, UpstreamRequest, classify_by_status
from modelgate.providers.credentials import GoogleCredentials, source_for
from modelgate.providers.tool_rules import PUBLISHERS_NAME

DEFAULT_BASE_URL = "https://aiplatform.googleapis.com"
VERTEX_ANTHROPIC_VERSION = "vertex-2023-10-16"


def _credentials(endpoint: Endpoint) -> GoogleCredentials:
    return source_for(endpoint, lambda: GoogleCredentials(endpoint.api_key))  # type: ignore[return-value]


# Vertex's CountTokensRequest (v1 REST reference, endpoints.countTokens) takes these of a generateContent
# body; Google's JSON APIs refuse unknown fields (toolConfig, safetySettings).
_GEMINI_COUNTED = ("contents", "systemInstruction", "tools", "generationConfig")


def _claude(model: str) -> bool:
    return model.startswith("claude")


class VertexAdapter:
    wire = "vertex"
    tool_names = PUBLISHERS_NAME  # names both its publishers (Google, Anthropic) take
    answer_fields: tuple[str, ...] = ("content", "candidates", "promptFeedback")  # a Claude message or a Gemini answer

    async def prepare(self, endpoint: Endpoint) -> None:
        await _credentials(endpoint).prepare()

    def _location(self, endpoint: Endpoint) -> str:
        return str(endpoint.options.get("location") or "global")

    def _base(self, endpoint: Endpoint) -> str:
        base = (endpoint.base_url or DEFAULT_BASE_URL).rstrip("/")
        location = self._location(endpoint)
        if urlsplit(base).hostname == "aiplatform.googleapis.com" and location != "global":
            base = f"https://{location}-aiplatform.googleapis.com"
        return base

    def _project(self, endpoint: Endpoint) -> str:
        project = endpoint.options.get("project") or _credentials(endpoint).project
        if not project:
            raise UpstreamError(ErrorType.AUTHENTICATION_ERROR,
                                "Vertex AI needs options.project (or a service-account key that names one)")
        return str(project)

    def _headers(self, endpoint: Endpoint, stream: bool) -> dict[str, str]:
        headers = {"content-type": "application/json",
                   "authorization": f"Bearer {_credentials(endpoint).value.token}"}
        if stream:
            headers["accept"] = "text/event-stream"
        return headers

    def _publishers(self, endpoint: Endpoint) -> str:
        return (f"{self._base(endpoint)}/v1/projects/{quote(self._project(endpoint), safe='')}"
                f"/locations/{quote(self._location(endpoint), safe='')}/publishers")

    def build_request(self, req: ChatRequest, upstream_model: str, endpoint: Endpoint) -> UpstreamRequest:
        model = upstream_model.removeprefix("models/")
        prefix = self._publishers(endpoint)
        if _claude(model):
            # Claude's structured outputs are off unless the organisation policy allowedPartnerModelFeatures allows
            # them (Google's "Structured outputs with Anthropic Claude models"): the admin says so per provider.
            body = anthropic_messages.messages_body(
                req, model, structured_outputs=endpoint.options.get("claude_structured_outputs") is True)
            body.pop("model", None)
            body["anthropic_version"] = VERTEX_ANTHROPIC_VERSION
            method = "streamRawPredict" if req.stream else "rawPredict"
            url = f"{prefix}/anthropic/models/{quote(model, safe='-._@')}:{method}"
        else:
            body = gemini.build_body(req, endpoint.options, model)
            method = "streamGenerateContent?alt=sse" if req.stream else "generateContent"
            url = f"{prefix}/google/models/{quote(model, safe='-._')}:{method}"
        return UpstreamRequest("POST", url, self._headers(endpoint, req.stream), orjson.dumps(body))

    def count_request(self, req: ChatRequest, upstream_model: str, endpoint: Endpoint) -> UpstreamRequest:
        """Claude: `anthropic/models/count-tokens:rawPredict` with the vendor's count body, `model` in it
        (as the vendor SDK's Vertex client sends it); Gemini: `:countTokens` with the fields of
        Vertex's CountTokensRequest."""
        model = upstream_model.removeprefix("models/")
        prefix = self._publishers(endpoint)
        body: dict[str, Any]
        if _claude(model):
            body = {**anthropic_messages.count_body(req, model), "anthropic_version": VERTEX_ANTHROPIC_VERSION}
            url = f"{prefix}/anthropic/models/count-tokens:rawPredict"
        else:
            body = {k: v for k, v in gemini.build_body(req, endpoint.options, model).items() if k in _GEMINI_COUNTED}
            url = f"{prefix}/google/models/{quote(model, safe='-._')}:countTokens"
        return UpstreamRequest("POST", url, self._headers(endpoint, False), orjson.dumps(body))

    def parse_count(self, body: bytes) -> int:
        data = orjson.loads(body)  # Claude's {input_tokens} or Gemini's {totalTokens, ...}
        return data["input_tokens"] if "input_tokens" in data else data["totalTokens"]

    def parse_response(self, body: bytes) -> ChatResponse:
        data = orjson.loads(body)
        if isinstance(data, dict) and data.get("type") == "message":
            return anthropic_messages.parse_message(data)
        return gemini.GeminiAdapter().parse_response(body)

    def stream_decoder(self) -> "VertexStreamDecoder":
        return VertexStreamDecoder()

    def classify_error(self, status: int, body: bytes, headers: Mapping[str, str]) -> UpstreamError:
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError:
            data = None
        if isinstance(data, list) and data:
            data = data[0]
        if isinstance(data, dict) and data.get("type") == "error":
            return anthropic_messages.classify(status, body, headers)
        err = data.get("error") if isinstance(data, dict) else None
        if isinstance(err, dict):
            return gemini.classify_gemini_error(status, err, headers)
        return classify_by_status(status, body.decode("utf-8", "replace")[:500] or f"HTTP {status}", headers)

    def models_request(self, endpoint: Endpoint) -> UpstreamRequest:
        # Model Garden's list of Google's publisher models; Claude model ids are entered by hand.
        return UpstreamRequest("GET", f"{self._base(endpoint)}/v1beta1/publishers/google/models?pageSize=1000",
                               self._headers(endpoint, False))

    def parse_models(self, body: bytes) -> list[str]:
        models = orjson.loads(body).get("publisherModels") or []
        return [str(m["name"]).rsplit("/", 1)[-1] for m in models if isinstance(m, dict) and m.get("name")]


class VertexStreamDecoder:
    """Picks the Claude (SSE with `event:` lines) or Gemini decoder from the stream's first bytes."""

    def __init__(self) -> None:
        self._inner: Any = None
        self._head = b""

    def feed(self, chunk: bytes) -> list[StreamEvent]:
        if self._inner is None:
            self._head += chunk
            text = self._head.lstrip()
            if len(text) < 6:
                return []
            self._inner = (anthropic_messages.AnthropicStreamDecoder() if text.startswith(b"event:")
                           else gemini.GeminiStreamDecoder())
            chunk, self._head = self._head, b""
        return self._inner.feed(chunk)

    def close(self) -> list[StreamEvent]:
        if self._inner is None:
            self._inner = gemini.GeminiStreamDecoder()
            events = self._inner.feed(self._head) if self._head else []
            return events + self._inner.close()
        return self._inner.close()
