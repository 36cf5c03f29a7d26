"""Claude on Vertex AI: the vendor's Messages API behind Google's URLs and OAuth tokens.

As Google documents it (cloud.google.com/vertex-ai/generative-ai/docs/partner-models/claude, "Use Claude" and
"Count tokens"; the vendor SDK's Vertex client, anthropic 2.13 `lib/vertex`):
- `POST /v1/projects/{project}/locations/{location}/publishers/anthropic/models/{model}:rawPredict`
  (`:streamRawPredict` for a stream), the model in the URL (`claude-sonnet-4-5@20250929`) and not in the body,
  `anthropic_version: "vertex-2023-10-16"` in the body instead of a header;
- `.../anthropic/models/count-tokens:rawPredict` with the model in the body;
- `Authorization: Bearer` with an access token that a service account's signed JWT obtains from its
  `token_uri` (the JWT-bearer grant; google-auth, `service_account.Credentials`).

Everything else (the request rules of each Claude generation, tool ids, thinking signatures, the answers and
streams) is the vendor fake's: tests/fakes/anthropic_upstream.py.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from aiohttp import web

from tests.fakes.anthropic_upstream import FakeAnthropic, error_body
from tests.fakes.upstream_base import json_response

VERTEX_VERSION = "vertex-2023-10-16"
PROJECT, LOCATION = "proj-1", "us-east5"


def google_error(code: int, status: str, message: str) -> web.Response:
    return json_response({"error": {"code": code, "message": message, "status": status}}, code)


class FakeVertexClaude(FakeAnthropic):
    def __init__(self, models: tuple[str, ...] = ("claude-sonnet-4-5",)) -> None:
        super().__init__(models=models)
        self.tokens: set[str] = set()
        self.service_account: dict[str, str] = {}
        self._public_pem = b""

    async def start(self) -> "FakeVertexClaude":
        await super().start()
        self.service_account, self._public_pem = service_account(self.origin + "/token")
        return self

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/token", self._token)
        app.router.add_post(f"/v1/projects/{PROJECT}/locations/{LOCATION}/publishers/anthropic/models/{{target}}",
                            self._predict)

    async def _token(self, request: web.Request) -> web.Response:
        from google.auth import jwt

        form = await request.post()
        if form.get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer":
            return json_response({"error": "unsupported_grant_type"}, 400)
        try:
            # google-auth's assertion names Google's token endpoint whatever the key file's token_uri
            jwt.decode(str(form.get("assertion")), certs=self._public_pem, audience="https://oauth2.googleapis.com/token")
        except ValueError:
            return json_response({"error": "invalid_grant", "error_description": "Invalid JWT Signature."}, 400)
        token = "ya29." + uuid.uuid4().hex
        self.tokens.add(token)
        return json_response({"access_token": token, "expires_in": 3600, "token_type": "Bearer"})

    def _refuse(self, request: web.Request) -> web.Response | None:
        if request.headers.get("authorization", "").removeprefix("Bearer ") not in self.tokens:
            return google_error(401, "UNAUTHENTICATED", "Request had invalid authentication credentials. Expected "
                                "OAuth 2 access token, login cookie or other valid authentication credential.")
        return None

    async def _request_body(self, request: web.Request) -> Any:
        try:
            body = json.loads(await request.read())
        except ValueError:
            return google_error(400, "INVALID_ARGUMENT", "Invalid JSON payload received.")
        if body.pop("anthropic_version", None) != VERTEX_VERSION:
            return json_response(error_body("invalid_request_error", "anthropic_version: Field required"), 400)
        model, _, method = request.match_info["target"].partition(":")
        if model != "count-tokens":
            if "model" in body:  # the model is the URL's
                return json_response(error_body("invalid_request_error", "model: Extra inputs are not permitted"), 400)
            body["model"] = model
            if (method == "streamRawPredict") != bool(body.get("stream")):
                return json_response(error_body("invalid_request_error", f"stream must match :{method}"), 400)
        body["model"] = str(body.get("model", "")).split("@", 1)[0]  # the rules are the model's, whatever snapshot
        return body

    async def _predict(self, request: web.Request) -> web.StreamResponse:
        model, _, method = request.match_info["target"].partition(":")
        if method not in ("rawPredict", "streamRawPredict"):
            return google_error(404, "NOT_FOUND", f"Method {method} not found.")
        if model == "count-tokens":
            return await self._count_tokens(request)
        return await self._messages(request)


def service_account(token_uri: str) -> tuple[dict[str, str], bytes]:
    """A service-account key file's JSON (a fresh RSA key) whose tokens come from `token_uri`, and its public key."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    info = {"type": "service_account", "project_id": PROJECT, "private_key_id": "kid-1", "private_key": pem,
            "client_email": f"gateway@{PROJECT}.iam.gserviceaccount.com", "client_id": "1", "token_uri": token_uri}
    return info, public
