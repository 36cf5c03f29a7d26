"""Upstream credentials that are not a stored key: the clouds' own identity chains.

AWS through botocore's credential chain, Microsoft Entra ID through azure-identity,
Google Cloud through google-auth. Each source is made from a provider record's
options (and key, where the key holds a secret such as a service-account file),
kept per endpoint and made anew when those change. The libraries do the token
work; their blocking I/O (metadata endpoints, token endpoints, STS) runs in a
worker thread, only when the cached credential is missing or near its expiry,
so building a request never blocks the event loop. The libraries are imported
on first use: a gateway without such providers never loads them.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from typing import Any, Callable, Generic, Mapping, TypeVar

import orjson

from modelgate.errors import ErrorType, UpstreamError
from modelgate.providers.base import Endpoint

T = TypeVar("T")
log = logging.getLogger(__name__)

AZURE_SCOPE = "https://cognitiveservices.azure.com/.default"
GOOGLE_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
_AZURE_EARLY_REFRESH_SECONDS = 300  # renew an Entra token this long before it expires


class CredentialSource(Generic[T]):
    """One cached credential with an async refresh that runs the library off the loop."""

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._value: T | None = None

    def stale(self) -> bool:
        return self._value is None

    def fetch(self) -> T:
        """Blocking: obtain or renew the credential (runs in a worker thread)."""
        raise NotImplementedError

    async def prepare(self) -> None:
        if not self.stale():
            return
        async with self._lock:
            if not self.stale():
                return
            self._value = await asyncio.to_thread(self._fetch)

    def _fetch(self) -> T:
        try:
            return self.fetch()
        except UpstreamError:
            raise
        except Exception as exc:  # the libraries' own errors: the credential cannot be had
            raise UpstreamError(ErrorType.AUTHENTICATION_ERROR,
                                f"Could not obtain upstream credentials ({type(exc).__name__}: {exc})") from exc

    @property
    def value(self) -> T:
        if self._value is None:
            # A request built without `await prepare()` first: correct, but it blocks the loop.
            log.warning("upstream credentials fetched on the event loop; the caller should await prepare()")
            self._value = self._fetch()
        return self._value


class AwsChain(CredentialSource[Any]):
    """botocore's standard chain: environment, shared config/credentials profile, SSO, web identity
    (EKS IRSA), container credentials (ECS, EKS Pod Identity), EC2 instance metadata. Refreshable
    credentials are renewed by botocore when they near expiry."""

    def __init__(self, profile: str | None) -> None:
        super().__init__()
        self.profile = profile
        self._chain: Any = None

    def stale(self) -> bool:
        if self._value is None or self._chain is None:
            return True
        refresh_needed = getattr(self._chain, "refresh_needed", None)
        return bool(refresh_needed and refresh_needed())

    def fetch(self) -> Any:
        if self._chain is None:
            import botocore.session

            chain = botocore.session.Session(profile=self.profile).get_credentials()
            if chain is None:
                raise UpstreamError(ErrorType.AUTHENTICATION_ERROR,
                                    "No AWS credentials found by the default credential chain")
            self._chain = chain
        return self._chain.get_frozen_credentials()


class AzureEntraToken(CredentialSource[Any]):
    """A Microsoft Entra ID token for Azure OpenAI: a client secret (tenant_id and client_id in the
    options, the secret as the provider's key), else DefaultAzureCredential (environment, workload
    identity, managed identity, developer sign-ins). `authority_host` selects a sovereign cloud's
    Entra endpoint (else AZURE_AUTHORITY_HOST, else the public cloud); `disable_instance_discovery`
    is for authorities Microsoft cannot validate (Azure Stack Hub, private clouds)."""

    def __init__(self, options: Mapping[str, Any], secret: str, clock: Callable[[], float] = time.time) -> None:
        super().__init__()
        self.options = options
        self._secret = secret
        self._credential: Any = None
        self._clock = clock

    def stale(self) -> bool:
        return self._value is None or self._value.expires_on - self._clock() < _AZURE_EARLY_REFRESH_SECONDS

    def fetch(self) -> Any:
        if self._credential is None:
            from azure.identity import ClientSecretCredential, DefaultAzureCredential

            tenant, client = self.options.get("tenant_id"), self.options.get("client_id")
            authority: dict[str, Any] = {}
            if self.options.get("authority_host"):
                authority["authority"] = str(self.options["authority_host"])
            if self.options.get("disable_instance_discovery"):
                authority["disable_instance_discovery"] = True
            if tenant and client and self._secret:
                self._credential = ClientSecretCredential(str(tenant), str(client), self._secret, **authority)
            else:
                self._credential = DefaultAzureCredential(
                    managed_identity_client_id=str(client) if client else None, **authority)
        return self._credential.get_token(str(self.options.get("scope") or AZURE_SCOPE))


class GoogleCredentials(CredentialSource[Any]):
    """google-auth credentials: a service-account key file's JSON (the provider's key), else
    application-default credentials (GOOGLE_APPLICATION_CREDENTIALS, gcloud, the metadata server
    of GCE/GKE/Cloud Run). Tokens are kept until google-auth deems them expired."""

    def __init__(self, secret: str) -> None:
        super().__init__()
        self._secret = secret
        self.project: str | None = None

    def stale(self) -> bool:
        return self._value is None or not self._value.valid

    def fetch(self) -> Any:
        import google.auth
        import urllib3
        from google.auth.transport.urllib3 import Request

        creds = self._value
        if creds is None:
            if self._secret:
                from google.oauth2 import service_account

                info = orjson.loads(self._secret)
                creds = service_account.Credentials.from_service_account_info(info, scopes=[GOOGLE_SCOPE])
                self.project = info.get("project_id")
            else:
                creds, self.project = google.auth.default(scopes=[GOOGLE_SCOPE])
        creds.refresh(Request(urllib3.PoolManager()))
        return creds


_sources: dict[tuple[str, str], tuple[str, CredentialSource[Any]]] = {}


def source_for(endpoint: Endpoint, make: Callable[[], CredentialSource[T]]) -> CredentialSource[T]:
    """The endpoint's credential source; made anew when the endpoint's options or key change."""
    fingerprint = hashlib.sha256(orjson.dumps(dict(endpoint.options), option=orjson.OPT_SORT_KEYS, default=str)
                                 + b"\0" + endpoint.api_key.encode()).hexdigest()
    slot = (endpoint.kind, endpoint.id)
    held = _sources.get(slot)
    if held is None or held[0] != fingerprint:
        held = _sources[slot] = (fingerprint, make())
    return held[1]
