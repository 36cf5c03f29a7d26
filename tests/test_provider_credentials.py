"""Cloud credentials through the clouds' own libraries (issue 13 item 7), exercised with the
libraries' own local mechanisms: environment variables, shared config/credentials files and the
SSO token cache, local endpoints the libraries support pointing at (botocore: STS for web
identity, the ECS/EKS Pod Identity container endpoint, EC2 IMDSv2, the SSO portal;
azure-identity: the App Service managed-identity endpoint, a TLS Entra ID authority for client
secrets and workload identity; google-auth: the GCE metadata server), and a locally made
service-account key with a fake token endpoint and a fake Vertex AI endpoint. Each test checks
that the upstream request carries what the mechanism produced (SigV4 with those keys, the
Bearer token)."""

from __future__ import annotations

import datetime as dt
import itertools
import ssl
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from aiohttp import web

from modelgate.protocols.ir import ChatRequest, Message, StreamEnd, TextDelta, TextPart
from modelgate.providers import credentials
from modelgate.providers.base import Endpoint, prepare
from modelgate.providers.registry import KINDS
from tests.fakes.local_server import LocalServer
from tests.fakes.upstream_base import decode_stream, send
from tests.fakes.vertex_upstream import service_account

_ids = itertools.count(1)


def endpoint(kind: str, base: str, options: dict, key: str = "") -> Endpoint:
    # a fresh endpoint id per test: credential sources are kept per endpoint
    return Endpoint(f"p{next(_ids)}:k0", 1, 0, kind, base, key, options)


def hello(stream: bool = False) -> ChatRequest:
    return ChatRequest(model="m", messages=[Message("user", [TextPart("hi")])], max_tokens=16, stream=stream)


# --- AWS: botocore's credential chain -----------------------------------------------------

@pytest.fixture
def aws_env(monkeypatch, tmp_path):
    """An environment with no AWS credentials of the machine: only what each test puts there."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                 "AWS_DEFAULT_PROFILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                 "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_AUTHORIZATION_TOKEN",
                 "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN",
                 "AWS_ROLE_SESSION_NAME", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_STS", "AWS_ENDPOINT_URL_SSO",
                 "AWS_EC2_METADATA_SERVICE_ENDPOINT", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # ~/.aws/sso/cache and friends
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    # Nor credentials an earlier test's chain obtained: gateways of different tests number their
    # providers alike, and a chain is kept per provider.
    monkeypatch.setattr(credentials, "_sources", {})
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


def _utc(seconds: float) -> str:
    return (dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


# AssumeRoleWithWebIdentity's answer in STS's query protocol (docs.aws.amazon.com/STS/latest/APIReference)
STS_WEB_IDENTITY_ANSWER = """<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleWithWebIdentityResult>
    <SubjectFromWebIdentityToken>system:serviceaccount:ai:gateway</SubjectFromWebIdentityToken>
    <AssumedRoleUser>
      <Arn>arn:aws:sts::111122223333:assumed-role/bedrock-caller/gateway</Arn>
      <AssumedRoleId>AROAEXAMPLE:gateway</AssumedRoleId>
    </AssumedRoleUser>
    <Credentials>
      <AccessKeyId>{key}</AccessKeyId>
      <SecretAccessKey>web-identity-secret</SecretAccessKey>
      <SessionToken>{token}</SessionToken>
      <Expiration>{expiry}</Expiration>
    </Credentials>
  </AssumeRoleWithWebIdentityResult>
  <ResponseMetadata><RequestId>c6104cbe-af31-11e0-8154-cbc7ccf896c7</RequestId></ResponseMetadata>
</AssumeRoleWithWebIdentityResponse>"""


async def test_bedrock_web_identity_through_a_local_sts_is_renewed_before_expiry(aws_env, tmp_path):
    """EKS IRSA: botocore exchanges the projected service-account token at STS (here a local STS
    named by AWS_ENDPOINT_URL_STS) and renews the role credentials before they expire."""
    calls: list[dict[str, str]] = []

    async def sts(request: web.Request) -> web.Response:
        calls.append({k: str(v) for k, v in (await request.post()).items()})
        n = len(calls)
        # 5 minutes: inside botocore's refresh window, so the next use renews them
        return web.Response(text=STS_WEB_IDENTITY_ANSWER.format(key=f"ASIAWEBID{n}", token=f"web-tok{n}",
                                                                 expiry=_utc(300)), content_type="text/xml")

    async with LocalServer([web.post("/", sts)]) as server:
        (tmp_path / "oidc-token").write_text("eyJhbGciOiJSUzI1NiJ9.projected.sa-token")
        aws_env.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(tmp_path / "oidc-token"))
        aws_env.setenv("AWS_ROLE_ARN", "arn:aws:iam::111122223333:role/bedrock-caller")
        aws_env.setenv("AWS_ROLE_SESSION_NAME", "gateway")
        aws_env.setenv("AWS_ENDPOINT_URL_STS", server.url)
        aws_env.setenv("AWS_REGION", "us-east-1")
        ep = endpoint("aws-bedrock", "https://bedrock-runtime.us-east-1.amazonaws.com", {"auth": "aws"})
        first = await _signed_headers(ep)
        second = await _signed_headers(ep)
    assert calls[0]["Action"] == "AssumeRoleWithWebIdentity"
    assert calls[0]["RoleArn"] == "arn:aws:iam::111122223333:role/bedrock-caller"
    assert calls[0]["WebIdentityToken"] == "eyJhbGciOiJSUzI1NiJ9.projected.sa-token"
    assert calls[0]["RoleSessionName"] == "gateway"
    assert _credential_scope(first).startswith("ASIAWEBID1/") and first["x-amz-security-token"] == "web-tok1"
    assert len(calls) == 2, "credentials that near expiry are renewed before the next request"
    assert _credential_scope(second).startswith("ASIAWEBID2/") and second["x-amz-security-token"] == "web-tok2"


async def test_bedrock_eks_pod_identity_reads_the_rotated_token_file(aws_env, tmp_path):
    """EKS Pod Identity: container credentials with the authorization token in a file the kubelet
    rotates (AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE); botocore reads it on every fetch."""
    seen: list[str] = []

    async def creds(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization", ""))
        return web.json_response({"AccessKeyId": f"ASIAPODID{len(seen)}", "SecretAccessKey": "pod-secret",
                                  "Token": "pod-tok", "AccountId": "111122223333", "Expiration": _utc(120)})

    async with LocalServer([web.get("/v1/credentials", creds)]) as server:
        token_file = tmp_path / "eks-pod-identity-token"
        token_file.write_text("pod-identity-token-1")
        aws_env.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", server.url + "/v1/credentials")
        aws_env.setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", str(token_file))
        ep = endpoint("aws-bedrock", "https://bedrock-runtime.us-west-2.amazonaws.com", {"auth": "aws"})
        first = await _signed_headers(ep)
        fetched = len(seen)
        token_file.write_text("pod-identity-token-2")  # rotated
        second = await _signed_headers(ep)  # 2 minutes left: renewed first
    assert set(seen[:fetched]) == {"pod-identity-token-1"} and seen[fetched:] == ["pod-identity-token-2"]
    assert _credential_scope(first).startswith(f"ASIAPODID{fetched}/") and "/us-west-2/" in first["authorization"]
    assert _credential_scope(second).startswith(f"ASIAPODID{fetched + 1}/")


async def test_bedrock_ec2_instance_role_through_a_local_imds_v2(aws_env):
    """EC2 instance role: botocore speaks IMDSv2 (a session token first, then the role name and
    its credentials) to the endpoint AWS_EC2_METADATA_SERVICE_ENDPOINT names."""
    requests: list[tuple[str, str, str]] = []

    def record(request: web.Request) -> None:
        requests.append((request.method, request.path, request.headers.get("X-aws-ec2-metadata-token", "")))

    async def token(request: web.Request) -> web.Response:
        record(request)
        assert int(request.headers["X-aws-ec2-metadata-token-ttl-seconds"]) > 0
        return web.Response(text="imds-session-token")

    async def role(request: web.Request) -> web.Response:
        record(request)
        return web.Response(text="bedrock-instance-role")

    async def role_creds(request: web.Request) -> web.Response:
        record(request)
        return web.json_response({"Code": "Success", "LastUpdated": _utc(0), "Type": "AWS-HMAC",
                                  "AccessKeyId": "ASIAIMDSROLE", "SecretAccessKey": "imds-secret",
                                  "Token": "imds-tok", "Expiration": _utc(6 * 3600)})

    async with LocalServer([web.put("/latest/api/token", token),
                            web.get("/latest/meta-data/iam/security-credentials/", role),
                            web.get("/latest/meta-data/iam/security-credentials/bedrock-instance-role",
                                    role_creds)]) as server:
        aws_env.setenv("AWS_EC2_METADATA_DISABLED", "false")
        aws_env.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", server.url + "/")
        ep = endpoint("aws-bedrock", "https://bedrock-runtime.eu-central-1.amazonaws.com", {"auth": "aws"})
        headers = await _signed_headers(ep)
    assert requests[0][:2] == ("PUT", "/latest/api/token")
    assert [r[1] for r in requests[1:]] == ["/latest/meta-data/iam/security-credentials/",
                                            "/latest/meta-data/iam/security-credentials/bedrock-instance-role"]
    assert all(r[2] == "imds-session-token" for r in requests[1:]), "IMDSv2: every read carries the token"
    assert _credential_scope(headers).startswith("ASIAIMDSROLE/") and headers["x-amz-security-token"] == "imds-tok"


async def test_bedrock_sso_profile_with_a_cached_sign_in(aws_env, tmp_path):
    """IAM Identity Center: an `sso-session` profile whose sign-in (`aws sso login`) left a token
    in ~/.aws/sso/cache; botocore trades it for role credentials at the SSO portal API (here a
    local one named by AWS_ENDPOINT_URL_SSO). botocore fixes the cache folder from HOME when it
    is imported, so the gateway's side runs in a process started with that HOME."""
    import asyncio
    import hashlib
    import os
    import sys

    asked: list[tuple[dict[str, str], str]] = []

    async def role_credentials(request: web.Request) -> web.Response:
        asked.append((dict(request.query), request.headers.get("x-amz-sso_bearer_token", "")))
        return web.json_response({"roleCredentials": {
            "accessKeyId": "ASIASSOROLE", "secretAccessKey": "sso-secret", "sessionToken": "sso-tok",
            "expiration": int((time.time() + 3600) * 1000)}})

    (tmp_path / "config").write_text(
        "[profile bedrock-sso]\nsso_session = corp\nsso_account_id = 111122223333\n"
        "sso_role_name = BedrockInvoke\nregion = us-east-1\n\n"
        "[sso-session corp]\nsso_start_url = https://corp.awsapps.com/start\nsso_region = us-east-1\n"
        "sso_registration_scopes = sso:account:access\n")
    cache = tmp_path / ".aws" / "sso" / "cache"
    cache.mkdir(parents=True)
    (cache / (hashlib.sha1(b"corp").hexdigest() + ".json")).write_bytes(orjson.dumps({
        "startUrl": "https://corp.awsapps.com/start", "region": "us-east-1", "accessToken": "sso-access-token",
        "expiresAt": _utc(8 * 3600), "clientId": "client-1", "clientSecret": "client-secret",
        "registrationExpiresAt": _utc(90 * 86400), "refreshToken": "refresh-1"}))
    script = (
        "import asyncio, json\n"
        "from tests.test_provider_credentials import endpoint, _signed_headers\n"
        "ep = endpoint('aws-bedrock', 'https://bedrock-runtime.us-east-1.amazonaws.com',"
        " {'auth': 'aws', 'profile': 'bedrock-sso'})\n"
        "print(json.dumps(asyncio.run(_signed_headers(ep))))\n")
    async with LocalServer([web.get("/federation/credentials", role_credentials)]) as server:
        aws_env.setenv("AWS_ENDPOINT_URL_SSO", server.url)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", script, env=dict(os.environ), cwd=str(Path(__file__).parent.parent),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    headers = orjson.loads(out.splitlines()[-1])
    assert asked == [({"role_name": "BedrockInvoke", "account_id": "111122223333"}, "sso-access-token")]
    assert _credential_scope(headers).startswith("ASIASSOROLE/") and headers["x-amz-security-token"] == "sso-tok"


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
    async with LocalServer([web.get("/msi/token", identity), _azure_chat(seen)]) as server:
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


def _azure_chat(seen: list[web.Request]) -> web.RouteDef:
    async def chat(request: web.Request) -> web.Response:
        seen.append(request)
        body = await request.json()
        return web.json_response({"id": "chatcmpl-1", "object": "chat.completion", "model": body["model"],
                                  "choices": [{"index": 0, "finish_reason": "stop",
                                               "message": {"role": "assistant", "content": "hello"}}],
                                  "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
    return web.post("/openai/v1/chat/completions", chat)


@pytest.fixture
def entra_tls(azure_env, tmp_path):
    """A TLS context for a local Microsoft Entra ID fake (azure-identity refuses authorities that
    are not https), its CA trusted the way requests, under azure-core, is told to: REQUESTS_CA_BUNDLE."""
    import trustme

    ca = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    ca.cert_pem.write_to_path(str(tmp_path / "entra-ca.pem"))
    azure_env.setenv("REQUESTS_CA_BUNDLE", str(tmp_path / "entra-ca.pem"))
    return context


def _entra_routes(grants: list[dict[str, str]], lifetime: int = 3599) -> list[web.RouteDef]:
    """The two Entra ID endpoints MSAL uses for a confidential client: the tenant's OpenID
    configuration and its v2.0 token endpoint (client credentials grant)."""
    async def openid_configuration(request: web.Request) -> web.Response:
        tenant, root = request.match_info["tenant"], f"{request.scheme}://{request.host}"
        return web.json_response({
            "token_endpoint": f"{root}/{tenant}/oauth2/v2.0/token",
            "authorization_endpoint": f"{root}/{tenant}/oauth2/v2.0/authorize",
            "issuer": f"{root}/{tenant}/v2.0"})

    async def token(request: web.Request) -> web.Response:
        grants.append({"tenant": request.match_info["tenant"],
                       **{k: str(v) for k, v in (await request.post()).items()}})
        return web.json_response({"token_type": "Bearer", "expires_in": lifetime, "ext_expires_in": lifetime,
                                  "access_token": f"entra-access-token-{len(grants)}"})

    return [web.get("/{tenant}/v2.0/.well-known/openid-configuration", openid_configuration),
            web.post("/{tenant}/oauth2/v2.0/token", token)]


async def _entra_call(ep: Endpoint) -> None:
    adapter = KINDS["azure-openai"].adapter
    await prepare(adapter, ep)
    status, _, body = await send(adapter.build_request(hello(), "my-gpt-deployment", ep))
    assert status == 200 and adapter.parse_response(body).parts == [TextPart("hello")]


async def test_azure_entra_token_from_a_client_secret(entra_tls):
    """ClientSecretCredential (tenant and client ids in the options, the secret as the provider's
    key) against a local Entra ID over TLS, the authority given by the `authority_host` option."""
    grants: list[dict[str, str]] = []
    seen: list[web.Request] = []
    async with LocalServer(_entra_routes(grants), entra_tls) as entra, LocalServer([_azure_chat(seen)]) as azure:
        ep = endpoint("azure-openai", azure.url,
                      {"auth": "entra", "api_version": "v1", "tenant_id": "72f988bf-86f1-41af-91ab-2d7cd011db47",
                       "client_id": "0a4f7b1e-gateway", "authority_host": entra.url,
                       "disable_instance_discovery": True},
                      key="client-secret-value")
        await _entra_call(ep)
        await _entra_call(ep)
    assert len(grants) == 1, "the token is kept until it nears expiry"
    grant = grants[0]
    assert grant["tenant"] == "72f988bf-86f1-41af-91ab-2d7cd011db47"
    assert grant["grant_type"] == "client_credentials"
    assert (grant["client_id"], grant["client_secret"]) == ("0a4f7b1e-gateway", "client-secret-value")
    assert grant["scope"] == "https://cognitiveservices.azure.com/.default"
    assert seen[-1].headers["Authorization"] == "Bearer entra-access-token-1" and "api-key" not in seen[-1].headers


async def test_azure_entra_token_near_expiry_is_renewed_before_the_next_call(entra_tls):
    """A token with less than 5 minutes left is renewed (by us and by azure-identity) before it
    signs another request."""
    grants: list[dict[str, str]] = []
    seen: list[web.Request] = []
    async with LocalServer(_entra_routes(grants, lifetime=200), entra_tls) as entra, \
            LocalServer([_azure_chat(seen)]) as azure:
        ep = endpoint("azure-openai", azure.url,
                      {"auth": "entra", "api_version": "v1", "tenant_id": "contoso", "client_id": "app",
                       "authority_host": entra.url, "disable_instance_discovery": True}, key="secret")
        await _entra_call(ep)
        await _entra_call(ep)
    assert len(grants) == 2
    assert [r.headers["Authorization"] for r in seen] == ["Bearer entra-access-token-1",
                                                          "Bearer entra-access-token-2"]


async def test_azure_entra_token_from_workload_identity(entra_tls, azure_env, tmp_path):
    """AKS workload identity: the variables the webhook injects (AZURE_TENANT_ID, AZURE_CLIENT_ID,
    AZURE_FEDERATED_TOKEN_FILE, AZURE_AUTHORITY_HOST) and the projected token file; azure-identity
    sends the token as the client assertion."""
    grants: list[dict[str, str]] = []
    seen: list[web.Request] = []
    (tmp_path / "azure-identity-token").write_text("eyJhbGciOiJSUzI1NiJ9.federated.sa-token")
    async with LocalServer(_entra_routes(grants), entra_tls) as entra, LocalServer([_azure_chat(seen)]) as azure:
        for name, value in {"AZURE_TENANT_ID": "contoso-tenant", "AZURE_CLIENT_ID": "workload-client-id",
                            "AZURE_FEDERATED_TOKEN_FILE": str(tmp_path / "azure-identity-token"),
                            "AZURE_AUTHORITY_HOST": entra.url}.items():
            azure_env.setenv(name, value)
        await _entra_call(endpoint("azure-openai", azure.url,
                                   {"auth": "entra", "api_version": "v1", "disable_instance_discovery": True}))
    assert len(grants) == 1
    grant = grants[0]
    assert grant["tenant"] == "contoso-tenant" and grant["client_id"] == "workload-client-id"
    assert grant["grant_type"] == "client_credentials"
    assert grant["client_assertion_type"] == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    assert grant["client_assertion"] == "eyJhbGciOiJSUzI1NiJ9.federated.sa-token"
    assert seen[-1].headers["Authorization"] == "Bearer entra-access-token-1"


def test_azure_key_auth_and_dated_api_unchanged():
    adapter = KINDS["azure-openai"].adapter
    ep = endpoint("azure-openai", "https://res.openai.azure.com", {}, key="azure-key")
    req = adapter.build_request(hello(), "dep", ep)
    assert req.url == "https://res.openai.azure.com/openai/deployments/dep/chat/completions?api-version=2024-10-21"
    assert req.headers["api-key"] == "azure-key" and "authorization" not in req.headers


# --- Google Cloud Vertex AI through google-auth --------------------------------------------

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
        info, public["pem"] = service_account(server.url + "/token")
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


async def test_vertex_counts_with_the_count_endpoints_of_claude_and_gemini():
    # Claude: POST .../publishers/anthropic/models/count-tokens:rawPredict with `model` in the body
    # (cloud.google.com/vertex-ai/generative-ai/docs/partner-models/claude/count-tokens, and the vendor
    # SDK's Vertex client) -> {input_tokens}. Gemini: POST .../models/{model}:countTokens with
    # CountTokensRequest's fields -> {totalTokens, totalBillableCharacters}.
    seen: list[tuple[str, dict[str, Any]]] = []

    async def token(request: web.Request) -> web.Response:
        return web.json_response({"access_token": "ya29.count", "expires_in": 3600, "token_type": "Bearer"})

    async def count(request: web.Request) -> web.Response:
        assert request.headers["Authorization"] == "Bearer ya29.count"
        body = await request.json()
        seen.append((request.path, body))
        if request.path.endswith("/anthropic/models/count-tokens:rawPredict"):
            allowed = {"anthropic_version", "model", "messages", "system", "tools", "tool_choice", "thinking"}
            if set(body) - allowed:
                return web.json_response({"type": "error", "error": {
                    "type": "invalid_request_error", "message": "Extra inputs are not permitted"}}, status=400)
            return web.json_response({"input_tokens": 21})
        if request.path.endswith(":countTokens"):
            if set(body) - {"contents", "systemInstruction", "tools", "generationConfig"}:
                return web.json_response({"error": {"code": 400, "status": "INVALID_ARGUMENT",
                                                    "message": "Invalid JSON payload received. Unknown name"}}, status=400)
            return web.json_response({"totalTokens": 34, "totalBillableCharacters": 90})
        return web.json_response({"error": {"code": 404, "status": "NOT_FOUND", "message": "no route"}}, status=404)

    req = ChatRequest("m", [Message("user", [TextPart("hello")])], system=["be brief"], max_tokens=64,
                      temperature=0.5)
    async with LocalServer([web.post("/token", token), web.post("/{tail:.*}", count)]) as server:
        info, _ = service_account(server.url + "/token")
        adapter = KINDS["vertex-ai"].adapter
        ep = endpoint("vertex-ai", server.url, {"location": "us-east5"}, key=orjson.dumps(info).decode())
        await prepare(adapter, ep)
        status, _, body = await send(adapter.count_request(req, "claude-sonnet-4@20250514", ep))
        assert status == 200 and adapter.parse_count(body) == 21
        status, _, body = await send(adapter.count_request(req, "gemini-2.5-flash", ep))
        assert status == 200 and adapter.parse_count(body) == 34
    (claude_path, claude_body), (gemini_path, gemini_body) = seen
    assert claude_path == "/v1/projects/proj-1/locations/us-east5/publishers/anthropic/models/count-tokens:rawPredict"
    assert claude_body == {"anthropic_version": "vertex-2023-10-16", "model": "claude-sonnet-4@20250514",
                           "system": "be brief",
                           "messages": [{"role": "user", "content": [{"type": "text", "text": "hello"}]}]}
    assert gemini_path == "/v1/projects/proj-1/locations/us-east5/publishers/google/models/gemini-2.5-flash:countTokens"
    assert gemini_body["contents"] == [{"role": "user", "parts": [{"text": "hello"}]}]
    assert gemini_body["systemInstruction"] == {"parts": [{"text": "be brief"}]}


def test_vertex_regional_host_from_location():
    adapter = KINDS["vertex-ai"].adapter
    ep = endpoint("vertex-ai", "https://aiplatform.googleapis.com", {"project": "p", "location": "europe-west4"})
    assert adapter._base(ep) == "https://europe-west4-aiplatform.googleapis.com"
    assert adapter._base(endpoint("vertex-ai", "https://aiplatform.googleapis.com", {"project": "p"})) == (
        "https://aiplatform.googleapis.com")


async def _keyless_bedrock(gateway, aws_env, fake, model: str) -> str:
    """A gateway key for `model` on a Bedrock provider with no stored key (options.auth "aws"), the
    environment holding the fake's credentials for the chain to find."""
    aws_env.setenv("AWS_ACCESS_KEY_ID", fake.access_key)
    aws_env.setenv("AWS_SECRET_ACCESS_KEY", fake.secret_key)
    svc = gateway.services
    provider = await svc.providers.create("bedrock-chain", "aws-bedrock", base_url=fake.origin,
                                          options={"auth": "aws", "region": fake.region})
    channel = await svc.channels.create("bedrock-channel", provider.id, models=[model])
    app = await svc.applications.create("bedrock-app")
    await svc.applications.authorize_channel(app.id, channel.id)
    key = (await svc.api_keys.create(app.id)).plaintext
    await gateway.runtime.refresh()
    return key


async def test_gateway_serves_a_keyless_bedrock_provider_through_the_aws_chain(aws_env, gateway):
    """A provider record with options.auth "aws" and no stored key: the gateway builds its endpoint,
    signs with the chain's credentials (here the environment's), and the fake Bedrock, which checks
    SigV4 signatures with its own secret, accepts the calls."""
    from openai import AsyncOpenAI

    from tests.fakes.bedrock_upstream import FakeBedrock

    model = "anthropic.claude-3-5-haiku-20241022-v1:0"
    fake = await FakeBedrock(access_key="AKIACHAINEXAMPLE", secret_key="chain/secret+key").start()
    try:
        key = await _keyless_bedrock(gateway, aws_env, fake, model)
        client = AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=key, max_retries=0)
        answer = await client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}])
        assert answer.choices[0].message.content == "Echo: hi"
        stream = await client.chat.completions.create(model=model, messages=[{"role": "user", "content": "yo"}],
                                                      stream=True)
        assert "".join([c.choices[0].delta.content or "" async for c in stream if c.choices]) == "Echo: yo"
        assert fake.last.headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIACHAINEXAMPLE/")
    finally:
        await fake.close()


async def test_a_first_count_through_the_aws_chain_gets_its_credentials_off_the_event_loop(aws_env, gateway, caplog):
    # Claude Code counts before its first request: the count, like a call, obtains the chain's
    # credentials in a worker thread (`prepare`), never by a blocking fetch on the event loop.
    from tests.fakes.bedrock_upstream import FakeBedrock

    model = "anthropic.claude-3-5-haiku-20241022-v1:0"
    fake = await FakeBedrock(access_key="AKIACOUNTEXAMPLE", secret_key="count/secret+key").start()
    try:
        key = await _keyless_bedrock(gateway, aws_env, fake, model)
        async with httpx.AsyncClient(base_url=gateway.url) as http:
            counted = await http.post("/alt/v1/messages/count_tokens", headers={
                "x-api-key": key, "anthropic-version": "2023-06-01"},
                json={"model": model, "messages": [{"role": "user", "content": "hello"}]})
        assert counted.status_code == 200 and counted.headers["x-modelgate-token-count"] == "provider"
        assert fake.last.headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIACOUNTEXAMPLE/")
        assert "should await prepare()" not in caplog.text
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
        info, _ = service_account(server.url + "/token")
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


async def test_vertex_on_gke_or_cloud_run_through_a_local_metadata_server(tmp_path):
    """No key, no key file: google-auth's application-default credentials find the metadata server
    of GCE/GKE/Cloud Run (here a local one named by GCE_METADATA_HOST and GCE_METADATA_IP) and take
    the token and the project from it. google-auth reads those variables when it is imported, so
    the gateway's side runs in a process started with them."""
    import asyncio
    import os
    import sys

    asked: list[str] = []

    @web.middleware
    async def metadata_flavor(request: web.Request, handler: Any) -> web.StreamResponse:
        asked.append(request.path_qs)
        if request.headers.get("Metadata-Flavor") != "Google":
            return web.Response(status=403)
        response = await handler(request)
        response.headers["Metadata-Flavor"] = "Google"
        return response

    async def ping(request: web.Request) -> web.Response:
        return web.Response(text="computeMetadata/")

    async def project(request: web.Request) -> web.Response:
        return web.Response(text="gke-proj")

    async def account(request: web.Request) -> web.Response:
        return web.json_response({"email": "gateway@gke-proj.iam.gserviceaccount.com", "aliases": ["default"],
                                  "scopes": ["https://www.googleapis.com/auth/cloud-platform"]})

    async def token(request: web.Request) -> web.Response:
        return web.json_response({"access_token": "ya29.from-metadata", "expires_in": 3599, "token_type": "Bearer"})

    server = LocalServer([web.get("/", ping), web.get("/computeMetadata/v1/project/project-id", project),
                          web.get("/computeMetadata/v1/instance/service-accounts/{account}/", account),
                          web.get("/computeMetadata/v1/instance/service-accounts/{account}/token", token)])
    server.app.middlewares.append(metadata_flavor)
    script = (
        "import asyncio, json\n"
        "from modelgate.providers.base import prepare\n"
        "from modelgate.providers.registry import KINDS\n"
        "from tests.test_provider_credentials import endpoint, hello\n"
        "adapter = KINDS['vertex-ai'].adapter\n"
        "ep = endpoint('vertex-ai', 'https://aiplatform.googleapis.com', {'location': 'europe-west4'})\n"
        "asyncio.run(prepare(adapter, ep))\n"
        "req = adapter.build_request(hello(), 'gemini-2.5-flash', ep)\n"
        "print(json.dumps({'url': req.url, 'auth': req.headers['authorization']}))\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "GCE_", "CLOUDSDK_"))}
    async with server:
        host = server.url.removeprefix("http://")
        env.update(GCE_METADATA_HOST=host, GCE_METADATA_IP=host, HOME=str(tmp_path),
                   CLOUDSDK_CONFIG=str(tmp_path / "gcloud"))  # no gcloud sign-in on this "machine"
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", script, env=env, cwd=str(Path(__file__).parent.parent),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    sent = orjson.loads(out.splitlines()[-1])
    assert sent["auth"] == "Bearer ya29.from-metadata"
    assert sent["url"] == ("https://europe-west4-aiplatform.googleapis.com/v1/projects/gke-proj/locations/"
                           "europe-west4/publishers/google/models/gemini-2.5-flash:generateContent")
    assert any(p.startswith("/computeMetadata/v1/instance/service-accounts/") and "/token" in p for p in asked)
