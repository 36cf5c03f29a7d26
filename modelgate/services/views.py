"""Plain records the service layer returns. They never hold a secret,
except `CreatedApiKey.plaintext`, which exists once, at creation."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, overload
from datetime import UTC, datetime

from sqlalchemy import and_, func, or_, select

from modelgate.errors import validation_error
from modelgate.storage import models as m


@overload
def as_utc(value: datetime) -> datetime: ...
@overload
def as_utc(value: datetime | None) -> datetime | None: ...
def as_utc(value: datetime | None) -> datetime | None:
    """SQLite hands back naive datetimes; every stored time is UTC."""
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


@dataclass(slots=True)
class UserView:
    id: int
    username: str
    role: str
    enabled: bool
    created_at: datetime

    @classmethod
    def of(cls, u: m.User) -> UserView:
        return cls(u.id, u.username, u.role, u.enabled, as_utc(u.created_at))


@dataclass(slots=True)
class ApplicationView:
    id: int
    name: str
    description: str
    timeout_seconds: float
    enabled: bool
    owner_id: int | None
    created_at: datetime
    channel_ids: list[int] = field(default_factory=list)

    @classmethod
    def of(cls, a: m.Application) -> ApplicationView:
        return cls(
            a.id, a.name, a.description, a.timeout_seconds, a.enabled, a.owner_id, as_utc(a.created_at),
            sorted(c.id for c in a.channels),
        )


@dataclass(slots=True)
class ApiKeyView:
    id: int
    application_id: int
    name: str
    prefix: str
    status: str
    rate_capacity: float | None
    rate_refill_per_second: float | None
    created_at: datetime
    last_used_at: datetime | None

    @classmethod
    def of(cls, k: m.ApiKey) -> ApiKeyView:
        return cls(
            k.id, k.application_id, k.name, k.prefix, k.status, k.rate_capacity, k.rate_refill_per_second,
            as_utc(k.created_at), as_utc(k.last_used_at),
        )


@dataclass(slots=True)
class CreatedApiKey:
    key: ApiKeyView
    plaintext: str  # shown to the caller once; only its sha256 is stored


@dataclass(slots=True)
class ProviderKeyView:
    id: int
    label: str
    hint: str  # last 4 characters, never the secret
    enabled: bool
    created_at: datetime

    @classmethod
    def of(cls, k: m.ProviderKey) -> ProviderKeyView:
        return cls(k.id, k.label, k.hint, k.enabled, as_utc(k.created_at))


@dataclass(slots=True)
class ProviderView:
    id: int
    name: str
    kind: str
    base_url: str
    options: dict
    enabled: bool
    created_at: datetime
    keys: list[ProviderKeyView] = field(default_factory=list)

    @classmethod
    def of(cls, p: m.Provider) -> ProviderView:
        return cls(
            p.id, p.name, p.kind, p.base_url, dict(p.options or {}), p.enabled, as_utc(p.created_at),
            [ProviderKeyView.of(k) for k in sorted(p.keys, key=lambda k: k.id)],
        )


@dataclass(slots=True)
class ModelInstanceView:
    id: int
    channel_id: int
    model_id: str
    upstream_model: str
    owned_by: str | None
    capabilities: list[str]
    state: str
    state_changed_at: datetime | None
    created_at: datetime

    @classmethod
    def of(cls, mi: m.ModelInstance) -> ModelInstanceView:
        return cls(
            mi.id, mi.channel_id, mi.model_id, mi.upstream_model, mi.owned_by, list(mi.capabilities or []),
            mi.state, as_utc(mi.state_changed_at), as_utc(mi.created_at),
        )


@dataclass(slots=True)
class ChannelView:
    id: int
    name: str
    provider_id: int
    provider_name: str
    provider_kind: str
    priority: int
    weight: int
    enabled: bool
    created_at: datetime
    models: list[ModelInstanceView] = field(default_factory=list)

    @classmethod
    def of(cls, c: m.Channel) -> ChannelView:
        return cls(
            c.id, c.name, c.provider_id, c.provider.name, c.provider.kind, c.priority, c.weight, c.enabled,
            as_utc(c.created_at), [ModelInstanceView.of(mi) for mi in sorted(c.models, key=lambda mi: mi.id)],
        )


@dataclass(slots=True)
class BlacklistEntryView:
    id: int
    cidr: str
    reason: str
    created_at: datetime

    @classmethod
    def of(cls, e: m.IpBlacklistEntry) -> BlacklistEntryView:
        return cls(e.id, e.cidr, e.reason, as_utc(e.created_at))


@dataclass(slots=True)
class CallLogView:
    id: int
    trace_id: str
    created_at: datetime
    api_key_id: int | None
    application_id: int | None
    channel_id: int | None
    provider_kind: str | None
    protocol: str
    model: str
    stream: bool
    status: int
    error_code: str | None
    latency_ms: float
    first_byte_ms: float | None
    attempts: int
    prompt_tokens: int
    completion_tokens: int
    client_ip: str | None
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @classmethod
    def of(cls, r: m.CallLog) -> CallLogView:
        return cls(
            r.id, r.trace_id, as_utc(r.created_at), r.api_key_id, r.application_id, r.channel_id,
            r.provider_kind, r.protocol, r.model, r.stream, r.status, r.error_code, r.latency_ms,
            r.first_byte_ms, r.attempts, r.prompt_tokens, r.completion_tokens, r.client_ip,
            r.cache_read_tokens or 0, r.cache_write_tokens or 0,
        )


@dataclass(slots=True)
class Page:
    items: list
    total: int  # exact up to COUNT_CAP matching rows; beyond, COUNT_CAP and total_exact is False
    limit: int
    offset: int
    has_more: bool = False  # rows follow this page
    total_exact: bool = True
    next_before_id: int | None = None  # the cursor of the next page (`before_id`), when one follows


# Counting every matching row of a large log table costs a scan of all of them on every page;
# the count stops here (pages past it are still served; `has_more` says whether one follows).
COUNT_CAP = 10_000


async def newest_first(session: Any, record: Any, conditions: list[Any], view: Callable[[Any], Any],
                       limit: int, offset: int, max_limit: int, before_id: int | None = None) -> Page:
    """One page of a log table (call log, resilience events), newest first, with a bounded total.

    `before_id` (a keyset cursor: the rows after that row in this order) reads any page through the
    created_at index at the cost of the first; `offset` skips rows one by one (kept for compatibility).
    The total counts the rows matching the filters, whatever the cursor.
    """
    if not 1 <= limit <= max_limit or offset < 0:
        raise validation_error(f"limit must be 1..{max_limit} and offset non-negative")
    matching = select(record.id).where(*conditions).limit(COUNT_CAP + 1).subquery()
    counted = int(await session.scalar(select(func.count()).select_from(matching)) or 0)
    page_conditions = list(conditions)
    if before_id is not None:
        at = await session.scalar(select(record.created_at).where(record.id == before_id))
        if at is None:
            raise validation_error(f"beforeId {before_id} names no row (deleted by retention?); start again")
        # Sargable on the created_at index; ties on the timestamp are ordered by id.
        page_conditions += [record.created_at <= at,
                            or_(record.created_at < at, and_(record.created_at == at, record.id < before_id))]
    rows = (await session.scalars(
        select(record).where(*page_conditions).order_by(record.created_at.desc(), record.id.desc())
        .limit(limit + 1).offset(offset)
    )).all()
    has_more = len(rows) > limit
    return Page([view(r) for r in rows[:limit]], min(counted, COUNT_CAP), limit, offset,
                has_more=has_more, total_exact=counted <= COUNT_CAP,
                next_before_id=rows[limit - 1].id if has_more else None)
