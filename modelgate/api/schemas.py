"""Request and response bodies of the management API (camelCase JSON)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, cast

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from modelgate.services import views
from modelgate.services.channels import Capability

# Views hold these as str; the services store no other values, so the `of()` methods cast.
Role = Literal["ADMIN", "USER"]
ModelState = Literal["ACTIVE", "DEPRECATED", "DISABLED"]
KeyStatus = Literal["ENABLED", "DISABLED", "DELETED"]

INT32_MAX = 2**31 - 1  # INTEGER columns on PostgreSQL; SQLite overflows at 2^63
MAX_TEXT = 65_536  # any text value of a request body; fields have their own, smaller bounds
MAX_BODY_DEPTH = 32
MAX_TIMEOUT_SECONDS = 86_400.0
MAX_RATE = 1e9


def _digits(value: Any) -> Any:
    """Ids in paths and queries are written in decimal digits only: `1.0`, `+1` or ` 1` are not ids."""
    if isinstance(value, str) and not (value.isascii() and value.isdigit()):
        raise ValueError("must be a positive whole number written in digits")
    return value


# A row id in a path or a query: 1 ... 2^31-1.
Id = Annotated[int, BeforeValidator(_digits), Field(ge=1, le=INT32_MAX)]


def _check_values(node: Any, depth: int = 0) -> None:
    if depth > MAX_BODY_DEPTH:
        raise ValueError(f"the body is nested more than {MAX_BODY_DEPTH} levels deep")
    if isinstance(node, dict):
        for key, value in node.items():
            _check_values(key, depth + 1)
            _check_values(value, depth + 1)
    elif isinstance(node, list):
        for value in node:
            _check_values(value, depth + 1)
    elif isinstance(node, str):
        if "\x00" in node:
            raise ValueError("text must not contain NUL characters")
        if len(node) > MAX_TEXT:
            raise ValueError(f"text values are limited to {MAX_TEXT} characters")
    elif isinstance(node, int) and not isinstance(node, bool):
        if not -INT32_MAX <= node <= INT32_MAX:
            raise ValueError(f"integers must lie within ±{INT32_MAX}")


class In(BaseModel):
    """A request body: unknown fields refused, every value bounded before it reaches the database."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _bounded(cls, data: Any) -> Any:
        _check_values(data)
        return data


# --- auth and users -------------------------------------------------------------------------

class LoginIn(In):
    username: str = Field(min_length=1, max_length=64)
    password: str = Field(min_length=1, max_length=1024)


class PasswordChangeIn(In):
    currentPassword: str = Field(min_length=1, max_length=1024)
    newPassword: str = Field(min_length=1, max_length=1024)


class UserOut(BaseModel):
    id: int
    username: str
    role: Role
    enabled: bool
    createdAt: datetime

    @classmethod
    def of(cls, u: views.UserView) -> UserOut:
        return cls(id=u.id, username=u.username, role=cast(Role, u.role), enabled=u.enabled,
                   createdAt=u.created_at)


class SessionOut(BaseModel):
    user: UserOut
    csrfToken: str  # send back as X-CSRF-Token on POST/PUT/PATCH/DELETE
    expiresAt: datetime | None  # None: an API token without expiry


class UserCreateIn(In):
    username: str = Field(min_length=1, max_length=64)
    password: str = Field(min_length=8, max_length=1024)
    role: Role = "USER"
    enabled: bool = True


class UserUpdateIn(In):
    role: Role | None = None
    enabled: bool | None = None
    password: str | None = Field(default=None, min_length=8, max_length=1024)


# --- applications and keys -----------------------------------------------------------------

class ApplicationOut(BaseModel):
    id: int
    name: str
    description: str
    timeout: float = Field(description="seconds for a whole call including retries")
    enabled: bool
    ownerId: int | None
    channelIds: list[int]
    createdAt: datetime

    @classmethod
    def of(cls, a: views.ApplicationView) -> ApplicationOut:
        return cls(id=a.id, name=a.name, description=a.description, timeout=a.timeout_seconds, enabled=a.enabled,
                   ownerId=a.owner_id, channelIds=list(a.channel_ids), createdAt=a.created_at)


class ApplicationCreateIn(In):
    name: str = Field(min_length=1, max_length=128)
    description: str = ""
    timeout: float | None = Field(default=None, gt=0, le=MAX_TIMEOUT_SECONDS, description="seconds; default 120")
    enabled: bool = True
    channelIds: list[int] = Field(default_factory=list, description="ADMIN only")
    ownerId: int | None = Field(default=None, description="ADMIN only; default the caller")


class ApplicationUpdateIn(In):
    name: str | None = Field(default=None, min_length=1, max_length=128)
    description: str | None = None
    timeout: float | None = Field(default=None, gt=0, le=MAX_TIMEOUT_SECONDS)
    enabled: bool | None = None


class ChannelIdsIn(In):
    channelIds: list[int]


class ApiKeyOut(BaseModel):
    id: int
    applicationId: int
    name: str
    prefix: str
    status: KeyStatus
    rateCapacity: float | None
    rateRefillPerSecond: float | None
    createdAt: datetime
    lastUsedAt: datetime | None

    @classmethod
    def of(cls, k: views.ApiKeyView) -> ApiKeyOut:
        return cls(id=k.id, applicationId=k.application_id, name=k.name, prefix=k.prefix,
                   status=cast(KeyStatus, k.status),
                   rateCapacity=k.rate_capacity, rateRefillPerSecond=k.rate_refill_per_second,
                   createdAt=k.created_at, lastUsedAt=k.last_used_at)


class CreatedKeyOut(BaseModel):
    key: ApiKeyOut
    plaintext: str = Field(description="the sk- key; shown this once, never again")


class ApiKeyCreateIn(In):
    name: str = Field(default="", max_length=128)
    rateCapacity: float | None = Field(default=None, gt=0, le=MAX_RATE)
    rateRefillPerSecond: float | None = Field(default=None, gt=0, le=MAX_RATE)


class ApiKeyUpdateIn(In):
    name: str | None = Field(default=None, max_length=128)
    rateCapacity: float | None = Field(default=None, gt=0, le=MAX_RATE)
    rateRefillPerSecond: float | None = Field(default=None, gt=0, le=MAX_RATE)


# --- providers ------------------------------------------------------------------------------

class ProviderKindOut(BaseModel):
    kind: str
    label: str
    defaultBaseUrl: str | None
    baseUrlNote: str = Field("", description="what to enter as base URL where there is no default or it varies")
    docsUrl: str
    keyRequired: bool
    keylessAuth: list[str] = Field(default_factory=list,
                                   description="options.auth values that need no stored key (cloud identity chains)")
    options: list[str] = Field(default_factory=list, description="provider options the kind reads")


class ProviderKeyOut(BaseModel):
    id: int
    label: str
    hint: str = Field(description="last 4 characters; the key itself is never returned")
    enabled: bool
    createdAt: datetime

    @classmethod
    def of(cls, k: views.ProviderKeyView) -> ProviderKeyOut:
        return cls(id=k.id, label=k.label, hint=k.hint, enabled=k.enabled, createdAt=k.created_at)


class ProviderOut(BaseModel):
    id: int
    name: str
    kind: str
    baseUrl: str
    options: dict[str, Any]
    enabled: bool
    keys: list[ProviderKeyOut]
    createdAt: datetime

    @classmethod
    def of(cls, p: views.ProviderView) -> ProviderOut:
        return cls(id=p.id, name=p.name, kind=p.kind, baseUrl=p.base_url, options=p.options, enabled=p.enabled,
                   keys=[ProviderKeyOut.of(k) for k in p.keys], createdAt=p.created_at)


class ProviderCreateIn(In):
    name: str = Field(min_length=1, max_length=128)
    kind: str
    baseUrl: str | None = Field(default=None, description="default: the kind's public URL")
    options: dict[str, Any] = Field(default_factory=dict)
    keys: list[str] = Field(default_factory=list, description="upstream keys; stored encrypted")
    enabled: bool = True


class ProviderUpdateIn(In):
    name: str | None = Field(default=None, min_length=1, max_length=128)
    baseUrl: str | None = None
    options: dict[str, Any] | None = None
    enabled: bool | None = None


class ProviderKeyIn(In):
    key: str = Field(min_length=1, max_length=4096)
    label: str = Field(default="", max_length=128)


# --- channels and models --------------------------------------------------------------------

class ModelSpecIn(In):
    modelId: str = Field(min_length=1, max_length=128)
    upstreamModel: str | None = Field(default=None, max_length=128)
    ownedBy: str | None = Field(default=None, max_length=128)
    capabilities: list[Capability] | None = None

    def spec(self) -> dict[str, Any]:
        out: dict[str, Any] = {"model_id": self.modelId}
        if self.upstreamModel is not None:
            out["upstream_model"] = self.upstreamModel
        if "ownedBy" in self.model_fields_set:
            out["owned_by"] = self.ownedBy
        if self.capabilities is not None:
            out["capabilities"] = list(self.capabilities)
        return out


def model_specs(models: list[str | ModelSpecIn]) -> list[str | dict[str, Any]]:
    return [m if isinstance(m, str) else m.spec() for m in models]


class ModelInstanceOut(BaseModel):
    id: int
    channelId: int
    modelId: str
    upstreamModel: str
    ownedBy: str | None
    capabilities: list[Capability]
    state: ModelState
    stateChangedAt: datetime | None
    createdAt: datetime

    @classmethod
    def of(cls, mi: views.ModelInstanceView) -> ModelInstanceOut:
        return cls(id=mi.id, channelId=mi.channel_id, modelId=mi.model_id, upstreamModel=mi.upstream_model,
                   ownedBy=mi.owned_by, capabilities=cast(list[Capability], mi.capabilities),
                   state=cast(ModelState, mi.state),
                   stateChangedAt=mi.state_changed_at, createdAt=mi.created_at)


class BreakerOut(BaseModel):
    endpointId: str = Field(description="p<providerId>:k<upstreamKeyId>; holds no secret")
    keyHint: str | None
    state: Literal["CLOSED", "OPEN", "HALF_OPEN", "UNKNOWN"]
    failures: int
    openedAt: datetime | None
    retryAfterSeconds: float | None


class ChannelOut(BaseModel):
    id: int
    name: str
    providerId: int
    providerName: str
    providerKind: str
    priority: int = Field(description="lower is tried first")
    weight: int = Field(description="share of calls within one priority")
    enabled: bool
    models: list[ModelInstanceOut]
    breakers: list[BreakerOut]
    createdAt: datetime


class ChannelCreateIn(In):
    name: str = Field(min_length=1, max_length=128)
    providerId: int
    models: list[str | ModelSpecIn] = Field(default_factory=list)
    priority: int = 0
    weight: int = Field(default=1, ge=1)
    enabled: bool = True


class ChannelUpdateIn(In):
    name: str | None = Field(default=None, min_length=1, max_length=128)
    providerId: int | None = None
    priority: int | None = None
    weight: int | None = Field(default=None, ge=1)
    enabled: bool | None = None


class ModelsIn(In):
    models: list[str | ModelSpecIn]


class RecoverIn(In):
    endpointId: str | None = Field(default=None, description="default: every endpoint of the channel")


class RecoverOut(BaseModel):
    channelId: int
    recovered: list[dict[str, str]] = Field(description="endpointId and the state it had before")


class HealthEndpointOut(BaseModel):
    endpointId: str
    ok: bool
    latencyMs: float
    errorType: str | None
    message: str | None


class HealthCheckOut(BaseModel):
    channelId: int
    ok: bool
    latencyMs: float
    errorType: str | None
    message: str | None
    model: str | None
    endpoints: list[HealthEndpointOut]
    checkedAt: datetime


class ModelUpdateIn(In):
    state: ModelState | None = None
    ownedBy: str | None = Field(default=None, max_length=128, description='"" clears the label')
    capabilities: list[Capability] | None = None
    upstreamModel: str | None = Field(default=None, min_length=1, max_length=128)


# --- blacklist, logs, events ----------------------------------------------------------------

class BlacklistOut(BaseModel):
    id: int
    cidr: str
    reason: str
    createdAt: datetime

    @classmethod
    def of(cls, e: views.BlacklistEntryView) -> BlacklistOut:
        return cls(id=e.id, cidr=e.cidr, reason=e.reason, createdAt=e.created_at)


class BlacklistIn(In):
    cidr: str = Field(min_length=1, max_length=64, description="an address or a CIDR network")
    reason: str = Field(default="", max_length=255)


class CallLogOut(BaseModel):
    id: int
    traceId: str
    createdAt: datetime
    keyId: int | None
    applicationId: int | None
    channelId: int | None
    providerKind: str | None
    protocol: str
    model: str
    stream: bool
    status: int
    errorCode: str | None
    latencyMs: float
    firstByteMs: float | None
    attempts: int
    promptTokens: int
    completionTokens: int
    totalTokens: int
    cacheReadTokens: int
    cacheWriteTokens: int
    clientIp: str | None

    @classmethod
    def of(cls, r: views.CallLogView) -> CallLogOut:
        return cls(id=r.id, traceId=r.trace_id, createdAt=r.created_at, keyId=r.api_key_id,
                   applicationId=r.application_id, channelId=r.channel_id, providerKind=r.provider_kind,
                   protocol=r.protocol, model=r.model, stream=r.stream, status=r.status, errorCode=r.error_code,
                   latencyMs=r.latency_ms, firstByteMs=r.first_byte_ms, attempts=r.attempts,
                   promptTokens=r.prompt_tokens, completionTokens=r.completion_tokens,
                   totalTokens=r.prompt_tokens + r.completion_tokens, cacheReadTokens=r.cache_read_tokens,
                   cacheWriteTokens=r.cache_write_tokens, clientIp=r.client_ip)


class EventOut(BaseModel):
    id: int
    createdAt: datetime
    type: str
    traceId: str | None
    channelId: int | None
    endpointId: str | None
    model: str | None
    errorType: str | None
    detail: str


class PageOut(BaseModel):
    total: int
    limit: int
    offset: int


class LogPageOut(PageOut):
    hasMore: bool = Field(description="more rows follow this page")
    totalExact: bool = Field(description="false when `total` stopped counting at its cap (10,000)")
    nextBeforeId: int | None = Field(default=None, description="pass as `beforeId` for the next page "
                                     "(a cursor: any depth at the cost of the first page); null on the last")


class CallLogPage(LogPageOut):
    items: list[CallLogOut]


class EventPage(LogPageOut):
    items: list[EventOut]


# --- catalog and stats (shapes built by the services; documented here) ------------------------

class CatalogProviderOut(BaseModel):
    kind: str
    name: str
    pricingUrl: str | None
    supported: bool
    defaultBaseUrl: str | None
    keyRequired: bool
    defaultPlanCode: str | None
    planCodes: list[str]
    modelCount: int


class PlanOut(BaseModel):
    planCode: str
    providerKind: str
    providerName: str
    name: str
    type: Literal["PAY_AS_YOU_GO", "BATCH", "FREE", "ENTERPRISE", "SELF_HOSTED"]
    currency: str
    default: bool
    description: str
    modelCount: int
    pricesCheckedAt: str


class CatalogModelOut(BaseModel):
    id: str
    name: str
    aliases: list[str]
    inputPrice: float = Field(description="per 1M prompt tokens")
    outputPrice: float = Field(description="per 1M completion tokens")
    currency: str
    contextWindow: int | None
    capabilities: list[Capability]


class CatalogModelListOut(CatalogModelOut):
    providerKind: str
    providerName: str
    planCode: str
    plans: list[str]


class PlanDetailOut(PlanOut):
    derivedFrom: str | None
    priceFactor: float | None
    defaultPrice: dict[str, Any] | None
    models: list[CatalogModelOut]


class PriceOut(BaseModel):
    model: str
    inputPrice: float
    outputPrice: float


class PricingOut(BaseModel):
    planCode: str
    providerKind: str
    currency: str
    unit: str
    pricesCheckedAt: str
    prices: list[PriceOut]


class UsageTotals(BaseModel):
    requestCount: int
    successCount: int
    errorCount: int
    promptTokens: int
    completionTokens: int
    totalTokens: int
    cost: dict[str, float] = Field(description="amount per currency, from catalog list prices")


class StatsOut(UsageTotals):
    date: str
    unpricedModels: list[str]


class TrendPointOut(UsageTotals):
    date: str
    unpricedModels: list[str]


class ModelUsageOut(UsageTotals):
    model: str
    priced: bool
    tokenShare: float
