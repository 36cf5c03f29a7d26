"""Console login sessions and the failed-login throttle.

The session cookie holds a random token; only its sha256 is stored
(login_sessions.id), so a database leak does not hand out live sessions.
Sessions expire a fixed time after login (no sliding renewal: a stolen
cookie stops working on schedule).
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol
from datetime import UTC, datetime, timedelta

from sqlalchemy import delete, select

from modelgate.services.views import UserView, as_utc
from modelgate.storage.db import Database
from modelgate.storage.models import LoginSession, User


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(slots=True)
class NewSession:
    token: str  # the cookie value; never stored
    csrf_token: str
    expires_at: datetime


@dataclass(slots=True)
class ActiveSession:
    user: UserView
    csrf_token: str
    expires_at: datetime | None
    token_id: int | None = None  # set when authenticated by a management API token, not a cookie

    @property
    def via(self) -> str:
        return "session" if self.token_id is None else f"token:{self.token_id}"


class SessionService:
    def __init__(self, db: Database, clock: Callable[[], datetime], ttl_seconds: float) -> None:
        self.db = db
        self.clock = clock
        self.ttl = timedelta(seconds=ttl_seconds)

    def _now(self) -> datetime:
        return self.clock().astimezone(UTC)

    async def create(self, user_id: int) -> NewSession:
        token = secrets.token_urlsafe(32)
        csrf = secrets.token_urlsafe(32)
        now = self._now()
        expires = now + self.ttl
        async with self.db.session() as s, s.begin():
            # Logging in is a good moment to drop this user's dead sessions.
            await s.execute(
                delete(LoginSession).where(LoginSession.user_id == user_id, LoginSession.expires_at <= now)
            )
            s.add(LoginSession(id=token_hash(token), user_id=user_id, csrf_token=csrf, created_at=now,
                               expires_at=expires))
        return NewSession(token, csrf, expires)

    async def resolve(self, token: str) -> ActiveSession | None:
        """The live session of this cookie value with its (enabled) user, else None."""
        if not token:
            return None
        async with self.db.session() as s:
            row = (
                await s.execute(
                    select(LoginSession, User).join(User, User.id == LoginSession.user_id)
                    .where(LoginSession.id == token_hash(token))
                )
            ).first()
        if row is None:
            return None
        session, user = row
        expires = as_utc(session.expires_at)
        if expires <= self._now() or not user.enabled:
            return None
        return ActiveSession(UserView.of(user), session.csrf_token, expires)

    async def revoke(self, token: str) -> None:
        async with self.db.session() as s, s.begin():
            await s.execute(delete(LoginSession).where(LoginSession.id == token_hash(token)))

    async def revoke_user(self, user_id: int, keep_token: str | None = None) -> None:
        """End every session of a user (password change, disable), optionally keeping the caller's."""
        conditions = [LoginSession.user_id == user_id]
        if keep_token:
            conditions.append(LoginSession.id != token_hash(keep_token))
        async with self.db.session() as s, s.begin():
            await s.execute(delete(LoginSession).where(*conditions))


class FailureStore(Protocol):
    """Where the throttle keeps its counters: one process's memory, or Redis for the deployment.

    A key's failures are forgiven `lock` after its last failure; a key at or over its limit
    waits until then.
    """

    async def wait(self, checks: list[tuple[str, int]], lock: timedelta) -> float:
        """Seconds until every (key, limit) of `checks` is below its limit again; 0 when it is now."""
        ...

    async def fail(self, keys: list[str], lock: timedelta) -> None: ...

    async def clear(self, key: str) -> None: ...


class MemoryFailureStore:
    """Per process, bounded: a spray of usernames cannot grow it past `limit` entries."""

    def __init__(self, clock: Callable[[], datetime], limit: int = 100_000) -> None:
        self.clock = clock
        self.limit = limit
        self._entries: dict[str, tuple[int, datetime]] = {}

    async def wait(self, checks: list[tuple[str, int]], lock: timedelta) -> float:
        now = self.clock()
        longest = 0.0
        for key, limit in checks:
            entry = self._entries.get(key)
            if entry is None:
                continue
            left = (entry[1] + lock - now).total_seconds()
            if left <= 0:
                del self._entries[key]
            elif entry[0] >= limit:
                longest = max(longest, left)
        return longest

    async def fail(self, keys: list[str], lock: timedelta) -> None:
        now = self.clock()
        for key in keys:
            count, last = self._entries.get(key) or (0, now)
            if now - last > lock:  # old failures are forgiven
                count = 0
            self._entries[key] = (count + 1, now)
        if len(self._entries) > self.limit:
            oldest = sorted(self._entries.items(), key=lambda kv: kv[1][1])[: len(self._entries) // 2]
            for k, _ in oldest:
                del self._entries[k]

    async def clear(self, key: str) -> None:
        self._entries.pop(key, None)


class LoginThrottle:
    """Locks a username+address pair after `max_failures` failed logins, and an address after
    `ip_max_failures` failures whatever the usernames (a spray of random names is throttled too).

    Counted per process in memory, or for the whole deployment in a shared `store`
    (modelgate.shared.login_failures, with Redis).
    """

    def __init__(self, clock: Callable[[], datetime], max_failures: int, lock_seconds: float,
                 ip_max_failures: int = 20, store: FailureStore | None = None) -> None:
        self.max_failures = max_failures
        self.ip_max_failures = ip_max_failures
        self.lock = timedelta(seconds=lock_seconds)
        self.store: FailureStore = store if store is not None else MemoryFailureStore(clock)

    @staticmethod
    def _pair(username: str, ip: str | None) -> str:
        return f"user:{ip or ''}:{username.strip().lower()}"

    @staticmethod
    def _address(ip: str | None) -> str:
        return f"ip:{ip or ''}"

    async def retry_after(self, username: str, ip: str | None) -> float:
        """Seconds until this user and address may try again; 0 when they may now."""
        return await self.store.wait([(self._pair(username, ip), self.max_failures),
                                      (self._address(ip), self.ip_max_failures)], self.lock)

    async def failed(self, username: str, ip: str | None) -> None:
        await self.store.fail([self._pair(username, ip), self._address(ip)], self.lock)

    async def succeeded(self, username: str, ip: str | None) -> None:
        # The address's count stays: a caller's own valid login must not reset a spray's counter.
        await self.store.clear(self._pair(username, ip))
