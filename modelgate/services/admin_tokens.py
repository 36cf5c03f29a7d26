"""Management API tokens: for scripts and CI, instead of a user's password.

A token is created by an admin, carries a role (ADMIN or USER, never more than its
creator's), is shown once, stored as its sha256, can expire, and is revoked rather
than deleted so the audit log keeps its meaning. It acts as its creator: disabling or
deleting that user ends the token too.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import select, update

from modelgate.errors import not_found, validation_error
from modelgate.services.context import ServiceContext, clean_name
from modelgate.services.views import UserView, as_utc
from modelgate.storage.models import AdminToken, User

TOKEN_PREFIX = "mgt_"
ROLES = ("ADMIN", "USER")
LAST_USED_GRANULARITY = timedelta(seconds=60)  # at most one write per token per minute


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(slots=True)
class AdminTokenView:
    id: int
    name: str
    prefix: str
    role: str
    user_id: int
    created_by: str
    created_at: datetime
    expires_at: datetime | None
    last_used_at: datetime | None
    revoked_at: datetime | None

    @classmethod
    def of(cls, t: AdminToken) -> AdminTokenView:
        return cls(t.id, t.name, t.prefix, t.role, t.user_id, t.created_by, as_utc(t.created_at),
                   as_utc(t.expires_at), as_utc(t.last_used_at), as_utc(t.revoked_at))


@dataclass(slots=True)
class CreatedAdminToken:
    token: AdminTokenView
    plaintext: str  # shown once


@dataclass(slots=True)
class TokenIdentity:
    """Who a presented token acts as: its creator, with the token's role."""

    token_id: int
    user: UserView
    expires_at: datetime | None


def _now() -> datetime:
    return datetime.now(UTC)


class AdminTokenService:
    def __init__(self, ctx: ServiceContext, clock: Callable[[], datetime] = _now) -> None:
        self.ctx = ctx
        self.clock = clock

    async def create(self, name: str, role: str, creator_id: int, expires_in_days: float | None = None
                     ) -> CreatedAdminToken:
        name = clean_name(name, "token name")
        role = role.upper() if isinstance(role, str) else ""
        if role not in ROLES:
            raise validation_error("role must be ADMIN or USER")
        if expires_in_days is not None and (isinstance(expires_in_days, bool) or not expires_in_days > 0):
            raise validation_error("expiresInDays must be a positive number")
        plaintext = TOKEN_PREFIX + secrets.token_urlsafe(32)
        now = self.clock()
        async with self.ctx.tx() as s:
            creator = await s.get(User, creator_id)
            if creator is None or creator.role != "ADMIN":
                raise validation_error("only an admin creates API tokens")
            token = AdminToken(
                name=name, token_hash=token_hash(plaintext), prefix=plaintext[:12], role=role, user_id=creator.id,
                created_by=creator.username, created_at=now,
                expires_at=now + timedelta(days=expires_in_days) if expires_in_days else None,
            )
            s.add(token)
            await s.flush()
            view = AdminTokenView.of(token)
        return CreatedAdminToken(view, plaintext)

    async def list(self, include_revoked: bool = True) -> list[AdminTokenView]:
        query = select(AdminToken).order_by(AdminToken.id)
        if not include_revoked:
            query = query.where(AdminToken.revoked_at.is_(None))
        async with self.ctx.tx() as s:
            return [AdminTokenView.of(t) for t in (await s.scalars(query)).all()]

    async def revoke(self, token_id: int) -> AdminTokenView:
        async with self.ctx.tx() as s:
            token = await s.get(AdminToken, int(token_id))
            if token is None:
                raise not_found(f"API token {token_id} not found")
            if token.revoked_at is None:
                token.revoked_at = self.clock()
            await s.flush()
            return AdminTokenView.of(token)

    async def resolve(self, plaintext: str) -> TokenIdentity | None:
        """The identity of a live token (not revoked or expired, creator enabled), else None."""
        if not plaintext.startswith(TOKEN_PREFIX):
            return None
        now = self.clock()
        async with self.ctx.tx() as s:
            row = (await s.execute(
                select(AdminToken, User).join(User, User.id == AdminToken.user_id)
                .where(AdminToken.token_hash == token_hash(plaintext))
            )).first()
            if row is None:
                return None
            token, user = row
            expires = as_utc(token.expires_at)
            if token.revoked_at is not None or (expires is not None and expires <= now) or not user.enabled:
                return None
            last = as_utc(token.last_used_at)
            if last is None or now - last >= LAST_USED_GRANULARITY:
                await s.execute(update(AdminToken).where(AdminToken.id == token.id).values(last_used_at=now))
            # Never more than the creator has now (an admin demoted since keeps only USER rights).
            role = token.role if user.role == "ADMIN" else "USER"
            identity = UserView(user.id, user.username, role, user.enabled, as_utc(user.created_at))
            return TokenIdentity(token.id, identity, expires)
