"""Cloud credentials through the clouds' own libraries (issue 13 item 7), exercised with the
libraries' own local mechanisms: environment variables, a shared-credentials file, local
credential endpoints the libraries support pointing at (the ECS container endpoint for
botocore, the App Service managed-identity endpoint for azure-identity), and a locally made
service-account key with a fake token endpoint and a fake Vertex AI endpoint for google-auth."""

from __future__ import annotations

import datetime as dt
import itertools
import time
from typing import Any

import orjson
import pytest
from aiohttp import web

from modelgate.protocols.ir import ChatRequest, Message, StreamEnd, TextDelta, TextPart
from modelgate.providers.base import Endpoint, prepare
from modelgate.providers.registry import KINDS
from tests.fakes.upstream_base import decode_stream, send

_ids = itertools.count(1)


def endpoint(kind: str, base: str, options: dict, key: str = "") -> Endpoint:
    # a fresh endpoint id per test: credential sources are kept per endpoint
    return Endpoint(f"p{next(_ids)}:k0", 1, 0, kind, base, key, options)


def hello(stream: bool = False) -> ChatRequest:
    return ChatRequest(model="m", messages=[Message("user", [TextPart("hi")])], max_tokens=16, stream=stream)


class LocalServer:
    """A loopback HTTP server for credential and API fakes."""

    def __init__(self, routes: list[web.RouteDef]) -> None:
        self.app = web.Application()
        self.app.add_routes(routes)
        self.runner = web.AppRunner(self.app)
        self.url = ""

    async def __aenter__(self) -> "LocalServer":
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.runner.cleanup()


# --- AWS: botocore's credential chain -----------------------------------------------------

@pytest.fixture
def aws_env(monkeypatch, tmp_path):
    """An environment with no AWS credentials of the machine: only what each test puts there."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                 "AWS_DEFAULT_PROFILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                 "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    return monkeypatch


def _credential_scope(headers: dict[str, str]) -> str:
    auth = headers["authorization"]
    assert auth.startswith("AWS4-HMAC-SHA256 Credential=")
    return auth.split("Credential=", 1)[1].split(",", 1)[0]


async def _signed_headers(ep: Endpoint) -> dict[str, str]:
    adapter = KINDS["aws-bedrock"].adapter
    await prepare(adapter, ep)
    return adapter.build_request(hello(), "anthropic.claude-3-haiku-20240307-v1:0", ep).headers


async def test_bedrock_credentials_from_environment(aws_env):
    aws_env.setenv("AWS_ACCESS_KEY_ID", "AKIAENVEXAMPLE")
    aws_env.setenv("AWS_SECRET_ACCESS_KEY", "env-secret")
    aws_env.setenv("AWS_SESSION_TOKEN", "env-session-token")
    ep = endpoint("aws-bedrock", "https://bedrock-runtime.eu-west-1.amazonaws.com", {"auth": "aws"})
    headers = await _signed_headers(ep)
    assert _credential_scope(headers).startswith("AKIAENVEXAMPLE/") and "/eu-west-1/bedrock/" in headers["authorization"]
    assert headers["x-amz-security-token"] == "env-session-token"


async def test_bedrock_credentials_from_a_shared_profile(aws_env, tmp_path):
    (tmp_path / "credentials").write_text(
        "[default]\naws_access_key_id = AKIADEFAULT\naws_secret_access_key = s0\n\n"
        "[work]\naws_access_key_id = AKIAWORKPROFILE\naws_secret_access_key = s1\n")
    ep = endpoint("aws-bedrock", "https://bedrock-runtime.us-west-2.amazonaws.com", {"auth": "aws", "profile": "work"})
    assert _credential_scope(await _signed_headers(ep)).startswith("AKIAWORKPROFILE/")


async def test_bedrock_container_credentials_are_refreshed_near_expiry(aws_env):
    served: list[str] = []
    lifetime = {"seconds": 60}  # inside botocore's refresh window: every use renews

    async def creds(request: web.Request) -> web.Response:
        assert request.headers.get("Authorization") == "container-auth-token"
        served.append(f"ASIACONTAINER{len(served) + 1}")
        expiry = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=lifetime["seconds"])
        return web.json_response({"AccessKeyId": served[-1], "SecretAccessKey": "secret", "Token": f"tok{len(served)}",
                                  "Expiration": expiry.strftime("%Y-%m-%dT%H:%M:%SZ")})

    async with LocalServer([web.get("/creds", creds)]) as server:
        aws_env.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", server.url + "/creds")
        aws_env.setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", "container-auth-token")
        ep = endpoint("aws-bedrock", "https://bedrock-runtime.us-east-1.amazonaws.com", {"auth": "aws"})
        first = await _signed_headers(ep)
        fetched = len(served)
        second = await _signed_headers(ep)
        assert _credential_scope(first).startswith(f"ASIACONTAINER{fetched}/")
        assert len(served) == fetched + 1  # renewed before expiry
        assert _credential_scope(second).startswith(f"ASIACONTAINER{fetched + 1}/")
        assert second["x-amz-security-token"] == f"tok{fetched + 1}"

        lifetime["seconds"] = 3600  # long-lived: kept, not fetched on every request
        long_lived = endpoint("aws-bedrock", "https://bedrock-runtime.us-east-1.amazonaws.com", {"auth": "aws"})
        await _signed_headers(long_lived)
        fetched = len(served)
        await _signed_headers(long_lived)
        assert len(served) == fetched


async def test_bedrock_without_any_aws_credentials_is_an_authentication_error(aws_env):
    from modelgate.errors import ErrorType, UpstreamError

    ep = endpoint("aws-bedrock", "https://bedrock-runtime.us-east-1.amazonaws.com", {"auth": "aws"})
    with pytest.raises(UpstreamError) as caught:
        await prepare(KINDS["aws-bedrock"].adapter, ep)
    assert caught.value.error_type is ErrorType.AUTHENTICATION_ERROR


def test_static_bedrock_keys_still_work_and_keyless_chain_needs_no_key():
    kind = KINDS["aws-bedrock"]
    ep = endpoint("aws-bedrock", "https://bedrock-runtime.us-east-1.amazonaws.com", {}, key="AKIASTATIC:secret")
    headers = kind.adapter.build_request(hello(), "m", ep).headers
    assert _credential_scope(headers).startswith("AKIASTATIC/")
    assert kind.needs_key({}) and not kind.needs_key({"auth": "aws"})


# --- Azure: Microsoft Entra ID through azure-identity --------------------------------------

@pytest.fixture
def azure_env(monkeypatch):
    for name in ("AZURE_CLIENT_ID", "AZURE_CLIENT_SECRET", "AZURE_TENANT_ID", "AZURE_FEDERATED_TOKEN_FILE",
                 "AZURE_CLIENT_CERTIFICATE_PATH", "AZURE_USERNAME", "MSI_ENDPOINT", "MSI_SECRET",
                 "IDENTITY_SERVER_THUMBPRINT", "IMDS_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


async def test_azure_entra_token_from_managed_identity_and_v1_api(azure_env):
    tokens: list[dict[str, str]] = []

    async def identity(request: web.Request) -> web.Response:
        # the App Service managed-identity protocol azure-identity speaks
        assert request.headers.get("X-IDENTITY-HEADER") == "identity-header-secret"
        tokens.append(dict(request.query))
        return web.json_response({"access_token": f"entra-token-{len(tokens)}", "token_type": "Bearer",
                                  "expires_on": str(int(time.time()) + 3600),
                                  "resource": request.query.get("resource", "")})

    seen: list[web.Request] = []

    async def chat(request: web.Request) -> web.Response:
        seen.append(request)
        body = await request.json()
        return web.json_response({"id": "chatcmpl-1", "object": "chat.completion", "model": body["model"],
                                  "choices": [{"index": 0, "finish_reason": "stop",
                                               "message": {"role": "assistant", "content": "hello"}}],
                                  "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

    async with LocalServer([web.get("/msi/token", identity), web.post("/openai/v1/chat/completions", chat)]) as server:
        azure_env.setenv("IDENTITY_ENDPOINT", server.url + "/msi/token")
        azure_env.setenv("IDENTITY_HEADER", "identity-header-secret")
        adapter = KINDS["azure-openai"].adapter
        ep = endpoint("azure-openai", server.url, {"auth": "entra", "api_version": "v1"})
        for _ in range(2):
            await prepare(adapter, ep)
            status, _, body = await send(adapter.build_request(hello(), "my-gpt-deployment", ep))
            assert status == 200
            assert adapter.parse_response(body).parts == [TextPart("hello")]
    assert len(tokens) == 1, "the token is kept until it nears expiry"
    assert tokens[0]["resource"] == "https://cognitiveservices.azure.com"
    request = seen[-1]
    assert request.headers["Authorization"] == "Bearer entra-token-1" and "api-key" not in request.headers
    assert request.path == "/openai/v1/chat/completions" and "api-version" not in request.query
    assert KINDS["azure-openai"].adapter.models_request(ep).url == server.url + "/openai/v1/models"
    assert not KINDS["azure-openai"].needs_key({"auth": "entra"})


def test_azure_key_auth_and_dated_api_unchanged():
    adapter = KINDS["azure-openai"].adapter
    ep = endpoint("azure-openai", "https://res.openai.azure.com", {}, key="azure-key")
    req = adapter.build_request(hello(), "dep", ep)
    assert req.url == "https://res.openai.azure.com/openai/deployments/dep/chat/completions?api-version=2024-10-21"
    assert req.headers["api-key"] == "azure-key" and "authorization" not in req.headers


# --- Google Cloud Vertex AI through google-auth --------------------------------------------

def _service_account(token_uri: str) -> tuple[dict[str, str], bytes]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo)
    info = {"type": "service_account", "project_id": "proj-1", "private_key_id": "kid-1", "private_key": pem,
            "client_email": "gateway@proj-1.iam.gserviceaccount.com", "client_id": "1",
            "token_uri": token_uri}
    return info, public


async def test_vertex_gemini_and_claude_with_a_service_account_key():
    from google.auth import jwt

    grants: list[dict[str, Any]] = []
    calls: list[tuple[str, dict[str, Any], str]] = []
    public: dict[str, bytes] = {}

    async def token(request: web.Request) -> web.Response:
        form = await request.post()
        assert form["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer"
        # the assertion is a JWT signed with the service account's private key
        claims = jwt.decode(str(form["assertion"]), certs=public["pem"],
                            audience="https://oauth2.googleapis.com/token")
        grants.append(claims)
        return web.json_response({"access_token": f"ya29.token-{len(grants)}", "expires_in": 3600,
                                  "token_type": "Bearer"})

    async def predict(request: web.Request) -> web.Response:
        body = await request.json()
        calls.append((request.path, body, request.headers.get("Authorization", "")))
        if "anthropic" in request.path:
            if request.path.endswith(":streamRawPredict"):
                frames = [
                    ("message_start", {"type": "message_start", "message": {
                        "id": "msg_vrtx_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4",
                        "content": [], "stop_reason": None, "usage": {"input_tokens": 3, "output_tokens": 1}}}),
                    ("content_block_start", {"type": "content_block_start", "index": 0,
                                             "content_block": {"type": "text", "text": ""}}),
                    ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                             "delta": {"type": "text_delta", "text": "hi from claude"}}),
                    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                    ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                                       "usage": {"output_tokens": 4}}),
                    ("message_stop", {"type": "message_stop"}),
                ]
                text = "".join(f"event: {name}\ndata: {orjson.dumps(data).decode()}\n\n" for name, data in frames)
                return web.Response(body=text.encode(), content_type="text/event-stream")
            return web.json_response({"id": "msg_vrtx_1", "type": "message", "role": "assistant",
                                      "model": "claude-sonnet-4", "stop_reason": "end_turn",
                                      "content": [{"type": "text", "text": "hi from claude"}],
                                      "usage": {"input_tokens": 3, "output_tokens": 4}})
        return web.json_response({"candidates": [{"content": {"role": "model", "parts": [{"text": "hi from gemini"}]},
                                                  "finishReason": "STOP"}],
                                  "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 4},
                                  "modelVersion": "gemini-2.5-flash"})

    async with LocalServer([web.post("/token", token), web.post("/{tail:.*}", predict)]) as server:
        info, public["pem"] = _service_account(server.url + "/token")
        adapter = KINDS["vertex-ai"].adapter
        ep = endpoint("vertex-ai", server.url, {"location": "us-east5"}, key=orjson.dumps(info).decode())
        await prepare(adapter, ep)
        status, _, body = await send(adapter.build_request(hello(), "gemini-2.5-flash", ep))
        assert status == 200 and adapter.parse_response(body).parts == [TextPart("hi from gemini")]
        await prepare(adapter, ep)
        status, _, body = await send(adapter.build_request(hello(), "claude-sonnet-4@20250514", ep))
        assert status == 200 and adapter.parse_response(body).parts == [TextPart("hi from claude")]
        await prepare(adapter, ep)
        status, _, body = await send(adapter.build_request(hello(stream=True), "claude-sonnet-4@20250514", ep))
        events = decode_stream(adapter.stream_decoder(), body)
        assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "hi from claude"
        assert isinstance(events[-1], StreamEnd) and events[-1].stop_reason == "stop"

    assert len(grants) == 1, "the token is kept until it expires"
    assert grants[0]["iss"] == "gateway@proj-1.iam.gserviceaccount.com"
    assert grants[0]["scope"] == "https://www.googleapis.com/auth/cloud-platform"
    gemini_path, gemini_body, auth = calls[0]
    assert gemini_path == ("/v1/projects/proj-1/locations/us-east5/publishers/google/models/"
                           "gemini-2.5-flash:generateContent")
    assert auth == "Bearer ya29.token-1" and gemini_body["contents"][0]["parts"] == [{"text": "hi"}]
    claude_path, claude_body, _ = calls[1]
    assert claude_path == ("/v1/projects/proj-1/locations/us-east5/publishers/anthropic/models/"
                           "claude-sonnet-4@20250514:rawPredict")
    assert claude_body["anthropic_version"] == "vertex-2023-10-16" and "model" not in claude_body
    assert calls[2][0].endswith(":streamRawPredict") and calls[2][1]["stream"] is True


def test_vertex_regional_host_from_location():
    adapter = KINDS["vertex-ai"].adapter
    ep = endpoint("vertex-ai", "https://aiplatform.googleapis.com", {"project": "p", "location": "europe-west4"})
    assert adapter._base(ep) == "https://europe-west4-aiplatform.googleapis.com"
    assert adapter._base(endpoint("vertex-ai", "https://aiplatform.googleapis.com", {"project": "p"})) == (
        "https://aiplatform.googleapis.com")


async def test_gateway_serves_a_keyless_bedrock_provider_through_the_aws_chain(aws_env, gateway):
    """A provider record with options.auth "aws" and no stored key: the gateway builds its endpoint,
    signs with the chain's credentials (here the environment's), and the fake Bedrock, which checks
    SigV4 signatures with its own secret, accepts the calls."""
    from openai import AsyncOpenAI

    from tests.fakes.bedrock_upstream import FakeBedrock

    fake = await FakeBedrock(access_key="AKIACHAINEXAMPLE", secret_key="chain/secret+key").start()
    try:
        aws_env.setenv("AWS_ACCESS_KEY_ID", "AKIACHAINEXAMPLE")
        aws_env.setenv("AWS_SECRET_ACCESS_KEY", "chain/secret+key")
        svc = gateway.services
        provider = await svc.providers.create("bedrock-chain", "aws-bedrock", base_url=fake.origin,
                                              options={"auth": "aws", "region": fake.region})
        channel = await svc.channels.create("bedrock-channel", provider.id,
                                            models=["anthropic.claude-3-5-haiku-20241022-v1:0"])
        app = await svc.applications.create("bedrock-app")
        await svc.applications.authorize_channel(app.id, channel.id)
        key = (await svc.api_keys.create(app.id)).plaintext
        await gateway.runtime.refresh()
        client = AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=key, max_retries=0)
        model = "anthropic.claude-3-5-haiku-20241022-v1:0"
        answer = await client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}])
        assert answer.choices[0].message.content == "Echo: hi"
        stream = await client.chat.completions.create(model=model, messages=[{"role": "user", "content": "yo"}],
                                                      stream=True)
        assert "".join([c.choices[0].delta.content or "" async for c in stream if c.choices]) == "Echo: yo"
        assert fake.last.headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIACHAINEXAMPLE/")
    finally:
        await fake.close()


async def test_vertex_with_application_default_credentials(monkeypatch, tmp_path):
    """No stored key: google-auth's application-default credentials (GOOGLE_APPLICATION_CREDENTIALS
    naming a key file), the project taken from that file."""
    grants: list[str] = []
    paths: list[str] = []

    async def token(request: web.Request) -> web.Response:
        grants.append(str((await request.post())["assertion"]))
        return web.json_response({"access_token": "ya29.adc", "expires_in": 3600, "token_type": "Bearer"})

    async def predict(request: web.Request) -> web.Response:
        assert request.headers["Authorization"] == "Bearer ya29.adc"
        paths.append(request.path)
        return web.json_response({"candidates": [{"content": {"role": "model", "parts": [{"text": "adc"}]},
                                                  "finishReason": "STOP"}]})

    async with LocalServer([web.post("/token", token), web.post("/{tail:.*}", predict)]) as server:
        info, _ = _service_account(server.url + "/token")
        key_file = tmp_path / "adc.json"
        key_file.write_bytes(orjson.dumps(info))
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key_file))
        adapter = KINDS["vertex-ai"].adapter
        ep = endpoint("vertex-ai", server.url, {})
        await prepare(adapter, ep)
        status, _, body = await send(adapter.build_request(hello(), "gemini-2.5-flash", ep))
        assert status == 200 and adapter.parse_response(body).parts == [TextPart("adc")]
    assert len(grants) == 1
    assert paths == ["/v1/projects/proj-1/locations/global/publishers/google/models/gemini-2.5-flash:generateContent"]


def test_a_request_built_without_prepare_still_gets_credentials(aws_env, caplog):
    aws_env.setenv("AWS_ACCESS_KEY_ID", "AKIANOPREPARE")
    aws_env.setenv("AWS_SECRET_ACCESS_KEY", "s")
    ep = endpoint("aws-bedrock", "https://bedrock-runtime.us-east-1.amazonaws.com", {"auth": "aws"})
    headers = KINDS["aws-bedrock"].adapter.build_request(hello(), "m", ep).headers
    assert _credential_scope(headers).startswith("AKIANOPREPARE/")
    assert "should await prepare()" in caplog.text
