"""Azure OpenAI wire adapter: the chat-completions body at Azure's deployment URLs.

POST {base}/openai/deployments/{deployment}/chat/completions?api-version=...
with the key in the `api-key` header. The base is the resource endpoint
(https://{resource}.openai.azure.com), so there is no default; the upstream
model name of a channel is the *deployment* name. `options.api_version`
overrides the default GA API version.

Models: the data plane cannot list deployments any more (that moved to the
Azure management API, which needs an Entra ID token, not the resource key).
`models_request` therefore calls GET {base}/openai/models, which proves the
endpoint and key work and lists the model ids the resource can deploy;
deployment names must be entered by the admin.
"""

from __future__ import annotations

from typing import Mapping
from urllib.parse import quote

import orjson

from modelgate.errors import ErrorType, UpstreamError
from modelgate.providers.base import Endpoint, UpstreamRequest
from modelgate.providers.openai_chat import OpenAIChatAdapter, error_fields

DEFAULT_API_VERSION = "2024-10-21"  # latest GA data-plane inference version


class AzureOpenAIAdapter(OpenAIChatAdapter):
    """Same body and stream format as chat completions; URL, auth and error codes differ."""

    def _version(self, endpoint: Endpoint) -> str:
        return str(endpoint.options.get("api_version") or DEFAULT_API_VERSION)

    def url(self, endpoint: Endpoint, upstream_model: str) -> str:
        return (f"{endpoint.base_url.rstrip('/')}/openai/deployments/{quote(upstream_model, safe='')}"
                f"/chat/completions?api-version={quote(self._version(endpoint), safe='')}")

    def headers(self, endpoint: Endpoint) -> dict[str, str]:
        return {"content-type": "application/json", "accept": "application/json", "api-key": endpoint.api_key}

    def classify_error(self, status: int, body: bytes, headers: Mapping[str, str]) -> UpstreamError:
        message, _, code = error_fields(body)
        if code == "DeploymentNotFound":
            return UpstreamError(ErrorType.MODEL_NOT_FOUND, message, status)
        if code == "content_filter":
            # The prompt was refused by the content filter: the same prompt fails everywhere.
            return UpstreamError(ErrorType.INVALID_REQUEST, message, status)
        if status == 429 and "quota" in message.lower() and "rate limit" not in message.lower():
            return UpstreamError(ErrorType.QUOTA_EXCEEDED, message, status)
        return super().classify_error(status, body, headers)

    def models_request(self, endpoint: Endpoint) -> UpstreamRequest:
        return UpstreamRequest(
            "GET", f"{endpoint.base_url.rstrip('/')}/openai/models?api-version={quote(self._version(endpoint), safe='')}",
            self.headers(endpoint),
        )

    def parse_models(self, body: bytes) -> list[str]:
        data = orjson.loads(body).get("data") or []
        return [m["id"] for m in data if (m.get("capabilities") or {}).get("chat_completion") and "id" in m]
