"""A fake Azure OpenAI resource endpoint.

- POST /openai/deployments/{deployment}/chat/completions?api-version=...
- GET /openai/models?api-version=...
- auth: `api-key` header; errors in Azure's shapes (401 with code "401",
  404 DeploymentNotFound, 404 "Resource not found" for an unknown api-version).
- Answers are the chat-completions bodies of FakeOpenAI (the deployment's
  model in `model`), plus Azure's `prompt_filter_results`: streams start with
  a chunk that has no choices, as Azure's do.
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.upstream_base import json_response

API_VERSIONS = {"2024-06-01", "2024-10-21", "2025-04-01-preview"}
_FILTER = {"hate": {"filtered": False, "severity": "safe"}, "self_harm": {"filtered": False, "severity": "safe"},
           "sexual": {"filtered": False, "severity": "safe"}, "violence": {"filtered": False, "severity": "safe"}}


def azure_error(status: int, code: str, message: str) -> web.Response:
    return json_response({"error": {"code": code, "message": message}}, status)


class FakeAzure(FakeOpenAI):
    def __init__(self, api_key: str = "az-key-1", deployments: dict[str, str] | None = None) -> None:
        self.deployments = deployments or {"prod-gpt4o": "gpt-4o-2024-08-06"}
        super().__init__(api_key=api_key, models=tuple(self.deployments.values()), base_path="", auth_header="api-key")

    @property
    def base_url(self) -> str:
        return self.origin

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/openai/deployments/{deployment}/chat/completions", self._deployment_chat)
        app.router.add_get("/openai/models", self._models)

    def _check(self, request: web.Request) -> web.Response | None:
        if request.query.get("api-version") not in API_VERSIONS:
            return azure_error(404, "404", "Resource not found")
        if not self._authorised(request):
            return azure_error(401, "401", "Access denied due to invalid subscription key or wrong API endpoint. "
                               "Make sure to provide a valid key for an active subscription and use a correct "
                               "regional API endpoint for your resource.")
        return None

    async def _models(self, request: web.Request) -> web.Response:
        if (denied := self._check(request)) is not None:
            return denied
        data = [{"id": m, "object": "model", "status": "succeeded", "lifecycle_status": "generally-available",
                 "capabilities": {"chat_completion": True, "completion": False, "embeddings": False,
                                  "fine_tune": False, "inference": True}, "created_at": 1723161600}
                for m in sorted(self.models)]
        data.append({"id": "text-embedding-3-small", "object": "model", "status": "succeeded",
                     "capabilities": {"chat_completion": False, "embeddings": True, "inference": True}})
        return json_response({"data": data, "object": "list"})

    async def _deployment_chat(self, request: web.Request) -> web.StreamResponse:
        if (denied := self._check(request)) is not None:
            return denied
        deployment = request.match_info["deployment"]
        if deployment not in self.deployments:
            return azure_error(404, "DeploymentNotFound",
                               "The API deployment for this resource does not exist. If you created the deployment "
                               "within the last 5 minutes, please wait a moment and try again.")
        body = orjson.loads(await request.read())
        body["model"] = self.deployments[deployment]  # Azure ignores the body's model
        if not isinstance(body.get("messages"), list) or not body["messages"]:
            return azure_error(400, "BadRequest", "'messages' is a required property")
        if body["model"] in self.reasoning_models and request.query["api-version"] < "2024-12-01-preview":
            # What Azure answers for an o-series deployment on an older API version.
            return azure_error(400, "BadRequest", f"Model {body['model']} is enabled only for api versions "
                                                  "2024-12-01-preview and later")
        if body["model"] in self.reasoning_models and "max_tokens" in body:
            return azure_error(400, "unsupported_parameter", "Unsupported parameter: 'max_tokens' is not supported "
                                                             "with this model. Use 'max_completion_tokens' instead.")
        if body.get("stream"):
            return await self._stream(request, body)
        answer = self._completion(body)
        answer["prompt_filter_results"] = [{"prompt_index": 0, "content_filter_results": _FILTER}]
        answer["choices"][0]["content_filter_results"] = _FILTER
        return json_response(answer)

    async def write_stream(self, request: web.Request, frames: list[bytes], content_type: str,
                           final_frames: int = 1) -> web.StreamResponse:
        first: dict[str, Any] = {"choices": [], "created": 0, "id": "", "model": "", "object": "",
                                 "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": _FILTER}]}
        frames = [b"data: " + orjson.dumps(first) + b"\n\n", *frames]
        return await super().write_stream(request, frames, content_type, final_frames)
