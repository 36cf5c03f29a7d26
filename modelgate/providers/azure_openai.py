"""Azure OpenAI wire adapter: the chat-completions body at Azure's deployment URLs.

POST {base}/openai/deployments/{deployment}/chat/completions?api-version=...
or, with `options.api_version: "v1"`, the v1 API: POST {base}/openai/v1/chat/completions
with the deployment name as `model` and no api-version. The base is the resource
endpoint (https://{resource}.openai.azure.com), so there is no default; the upstream
model name of a channel is the *deployment* name. `options.api_version` otherwise
overrides the default GA API version.

Auth: the resource key in the `api-key` header, or with `options.auth: "entra"` a
Microsoft Entra ID token (`Authorization: Bearer`) from azure-identity
(`providers/credentials.py`: client secret, workload identity, managed identity).

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
from modelgate.providers.credentials import AzureEntraToken, source_for
from modelgate.providers.openai_chat import OpenAIChatAdapter, error_fields

DEFAULT_API_VERSION = "2024-10-21"  # latest GA data-plane inference version
# Reasoning models (o-series, gpt-5) need a later version for `max_completion_tokens` and
# `reasoning_effort` (https://learn.microsoft.com/azure/ai-foundry/openai/how-to/reasoning).
REASONING_API_VERSION = "2025-04-01-preview"
_JSON = {"content-type": "application/json", "accept": "application/json"}


def _entra(endpoint: Endpoint) -> AzureEntraToken | None:
    if endpoint.options.get("auth") != "entra":
        return None
    return source_for(endpoint, lambda: AzureEntraToken(endpoint.options, endpoint.api_key))  # type: ignore[return-value]


class AzureOpenAIAdapter(OpenAIChatAdapter):
    """Same body and stream format as chat completions; URL, auth and error codes differ.

    Deployment names are free, so a reasoning model deployed under another name is marked
    with the model instance's `reasoning` capability."""

    reasoning_by_name = True

    def _version(self, endpoint: Endpoint, reasoning: bool = False) -> str:
        default = REASONING_API_VERSION if reasoning else DEFAULT_API_VERSION
        return str(endpoint.options.get("api_version") or default)

    def _v1(self, endpoint: Endpoint) -> bool:
        return self._version(endpoint) == "v1"

    async def prepare(self, endpoint: Endpoint) -> None:
        token = _entra(endpoint)
        if token is not None:
            await token.prepare()

    def url(self, endpoint: Endpoint, upstream_model: str, reasoning: bool = False) -> str:
        if self._v1(endpoint):
            return f"{endpoint.base_url.rstrip('/')}/openai/v1/chat/completions"
        version = self._version(endpoint, reasoning)
        return (f"{endpoint.base_url.rstrip('/')}/openai/deployments/{quote(upstream_model, safe='')}"
                f"/chat/completions?api-version={quote(version, safe='')}")

    def headers(self, endpoint: Endpoint) -> dict[str, str]:
        token = _entra(endpoint)
        if token is not None:
            return {**_JSON, "authorization": f"Bearer {token.value.token}"}
        return {**_JSON, "api-key": endpoint.api_key}

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
        if self._v1(endpoint):
            return UpstreamRequest("GET", f"{endpoint.base_url.rstrip('/')}/openai/v1/models", self.headers(endpoint))
        return UpstreamRequest(
            "GET", f"{endpoint.base_url.rstrip('/')}/openai/models?api-version={quote(self._version(endpoint), safe='')}",
            self.headers(endpoint),
        )

    @staticmethod
    def list_name(model: str) -> str | None:
        """The model list holds deployable base models, never deployment names: it cannot
        tell whether a deployment exists (the lifecycle probe skips Azure)."""
        return None

    def parse_models(self, body: bytes) -> list[str]:
        data = orjson.loads(body).get("data") or []
        return [m["id"] for m in data if (m.get("capabilities") or {}).get("chat_completion") and "id" in m]
