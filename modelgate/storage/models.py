"""Database records (SQLAlchemy 2 declarative). Schema changes go through Alembic."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class Base(DeclarativeBase):
    type_annotation_map = {datetime: DateTime(timezone=True), dict[str, Any]: JSON, list[str]: JSON}


class User(Base):
    __tablename__ = "users"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    username: Mapped[str] = mapped_column(String(64), unique=True)
    password_hash: Mapped[str] = mapped_column(String(255))  # argon2
    role: Mapped[str] = mapped_column(String(16), default="USER")  # ADMIN | USER
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class LoginSession(Base):
    __tablename__ = "login_sessions"
    id: Mapped[str] = mapped_column(String(64), primary_key=True)  # sha256 of the cookie value
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    csrf_token: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime] = mapped_column()


class Application(Base):
    __tablename__ = "applications"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    description: Mapped[str] = mapped_column(Text, default="")
    timeout_seconds: Mapped[float] = mapped_column(Float, default=120.0)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    owner_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"), nullable=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    channels: Mapped[list["Channel"]] = relationship(secondary="application_channels", lazy="selectin")


class ApplicationChannel(Base):
    __tablename__ = "application_channels"
    application_id: Mapped[int] = mapped_column(
        ForeignKey("applications.id", ondelete="CASCADE"), primary_key=True
    )
    channel_id: Mapped[int] = mapped_column(ForeignKey("channels.id", ondelete="CASCADE"), primary_key=True)


class ApiKey(Base):
    __tablename__ = "api_keys"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    application_id: Mapped[int] = mapped_column(ForeignKey("applications.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(128), default="")
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)  # sha256 hex of the plaintext
    prefix: Mapped[str] = mapped_column(String(16))  # first characters, for display
    status: Mapped[str] = mapped_column(String(16), default="ENABLED")  # ENABLED | DISABLED | DELETED
    rate_capacity: Mapped[float | None] = mapped_column(Float, nullable=True)  # None = global default
    rate_refill_per_second: Mapped[float | None] = mapped_column(Float, nullable=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    last_used_at: Mapped[datetime | None] = mapped_column(nullable=True)


class Provider(Base):
    __tablename__ = "providers"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    kind: Mapped[str] = mapped_column(String(32))  # a registry kind, e.g. "openai"
    base_url: Mapped[str] = mapped_column(String(512))
    options: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)  # kind-specific settings
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    keys: Mapped[list["ProviderKey"]] = relationship(
        back_populates="provider", cascade="all, delete-orphan", lazy="selectin"
    )


class ProviderKey(Base):
    """An upstream credential, AES-GCM encrypted with ENCRYPTION_KEY."""

    __tablename__ = "provider_keys"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    provider_id: Mapped[int] = mapped_column(ForeignKey("providers.id", ondelete="CASCADE"), index=True)
    label: Mapped[str] = mapped_column(String(128), default="")
    secret_encrypted: Mapped[bytes] = mapped_column(LargeBinary)
    hint: Mapped[str] = mapped_column(String(16), default="")  # last 4 characters, for display
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    provider: Mapped[Provider] = relationship(back_populates="keys")


class Channel(Base):
    """A route to a provider with the models it serves, its priority and weight."""

    __tablename__ = "channels"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    provider_id: Mapped[int] = mapped_column(ForeignKey("providers.id", ondelete="CASCADE"), index=True)
    priority: Mapped[int] = mapped_column(Integer, default=0)  # lower number is tried first
    weight: Mapped[int] = mapped_column(Integer, default=1)  # share within one priority
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    provider: Mapped[Provider] = relationship(lazy="selectin")
    models: Mapped[list["ModelInstance"]] = relationship(
        back_populates="channel", cascade="all, delete-orphan", lazy="selectin"
    )


class ModelInstance(Base):
    """One model served by one channel, with its lifecycle state."""

    __tablename__ = "model_instances"
    __table_args__ = (UniqueConstraint("channel_id", "model_id"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    channel_id: Mapped[int] = mapped_column(ForeignKey("channels.id", ondelete="CASCADE"), index=True)
    model_id: Mapped[str] = mapped_column(String(128), index=True)  # what callers ask for
    upstream_model: Mapped[str] = mapped_column(String(128))  # what the provider is sent
    owned_by: Mapped[str | None] = mapped_column(String(128), nullable=True)  # None = provider kind
    capabilities: Mapped[list[str]] = mapped_column(JSON, default=list)  # streaming|functionCalling|vision
    state: Mapped[str] = mapped_column(String(16), default="ACTIVE")  # ACTIVE | DEPRECATED | DISABLED
    state_changed_at: Mapped[datetime | None] = mapped_column(nullable=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    channel: Mapped[Channel] = relationship(back_populates="models")


class IpBlacklistEntry(Base):
    __tablename__ = "ip_blacklist"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    cidr: Mapped[str] = mapped_column(String(64), unique=True)  # a single address or a network
    reason: Mapped[str] = mapped_column(String(255), default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class CallLog(Base):
    """One row per inference call, written in batches off the request path."""

    __tablename__ = "call_log"
    __table_args__ = (Index("ix_call_log_created_at", "created_at"), Index("ix_call_log_model", "model"))
    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    trace_id: Mapped[str] = mapped_column(String(36), unique=True, index=True)  # replays are idempotent
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    api_key_id: Mapped[int | None] = mapped_column(Integer, nullable=True, index=True)
    application_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    channel_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    provider_kind: Mapped[str | None] = mapped_column(String(32), nullable=True)
    protocol: Mapped[str] = mapped_column(String(16))  # chat | messages | responses
    model: Mapped[str] = mapped_column(String(128))
    stream: Mapped[bool] = mapped_column(Boolean, default=False)
    status: Mapped[int] = mapped_column(Integer)  # HTTP status answered to the caller
    error_code: Mapped[str | None] = mapped_column(String(32), nullable=True)
    latency_ms: Mapped[float] = mapped_column(Float, default=0.0)
    first_byte_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    attempts: Mapped[int] = mapped_column(Integer, default=1)
    prompt_tokens: Mapped[int] = mapped_column(Integer, default=0)
    completion_tokens: Mapped[int] = mapped_column(Integer, default=0)
    # Parts of prompt_tokens read from / written to the upstream's prompt cache.
    cache_read_tokens: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    cache_write_tokens: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    client_ip: Mapped[str | None] = mapped_column(String(64), nullable=True)


class ResilienceEvent(Base):
    __tablename__ = "resilience_events"
    __table_args__ = (Index("ix_resilience_events_created_at", "created_at"),)
    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    # RETRY_EXHAUSTED | FAILOVER | BREAKER_OPENED | BREAKER_HALF_OPEN | BREAKER_CLOSED | BREAKER_FORCED
    # | MODEL_DEPRECATED
    event_type: Mapped[str] = mapped_column(String(32), index=True)
    trace_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    channel_id: Mapped[int | None] = mapped_column(Integer, nullable=True, index=True)
    endpoint: Mapped[str | None] = mapped_column(String(64), nullable=True)
    model: Mapped[str | None] = mapped_column(String(128), nullable=True)
    error_type: Mapped[str | None] = mapped_column(String(32), nullable=True)
    detail: Mapped[str] = mapped_column(Text, default="")


class AdminToken(Base):
    """A management API token (`Authorization: Bearer mgt_…`); only its sha256 is stored."""

    __tablename__ = "admin_tokens"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(128))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))  # first characters, for display
    role: Mapped[str] = mapped_column(String(16))  # ADMIN | USER: what the token may do
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)  # acts as
    created_by: Mapped[str] = mapped_column(String(64), default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime | None] = mapped_column(nullable=True)
    last_used_at: Mapped[datetime | None] = mapped_column(nullable=True)
    revoked_at: Mapped[datetime | None] = mapped_column(nullable=True)


class AuditEntry(Base):
    """One admin action or login: who, what, when, from where."""

    __tablename__ = "audit_log"
    __table_args__ = (Index("ix_audit_log_created_at", "created_at"),)
    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    actor: Mapped[str] = mapped_column(String(128))  # username, or "cli (osuser)"
    user_id: Mapped[int | None] = mapped_column(Integer, nullable=True, index=True)
    via: Mapped[str] = mapped_column(String(32))  # session | token:<id> | cli | login
    action: Mapped[str] = mapped_column(String(160), index=True)  # e.g. "POST /providers/{provider_id}"
    target: Mapped[str] = mapped_column(String(255), default="")  # the concrete path or object
    status: Mapped[int] = mapped_column(Integer)  # HTTP status of the answer (0 for the CLI's failures)
    client_ip: Mapped[str | None] = mapped_column(String(64), nullable=True)
    trace_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
