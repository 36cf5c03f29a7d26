"""Console users (ADMIN or USER) with argon2 password hashes."""

from __future__ import annotations

import secrets

from sqlalchemy import func, select

from modelgate.auth import passwords
from modelgate.errors import GatewayError, conflict, validation_error
from modelgate.services.context import ServiceContext, clean_name, fetch
from modelgate.services.views import UserView
from modelgate.storage.models import User

ROLES = ("ADMIN", "USER")
MIN_PASSWORD_LENGTH = 8
# Verified against when the user does not exist, so a login takes as long either way.
_dummy_hash: str | None = None


def dummy_hash() -> str:
    """A hash to verify against for unknown users, so a login's timing does not reveal them.

    Made on first use: hashing at import would cost every process (CLI included) a hash.
    """
    global _dummy_hash
    if _dummy_hash is None:
        _dummy_hash = passwords.hash_password(secrets.token_urlsafe(16))
    return _dummy_hash


def _role(role: str) -> str:
    role = str(role).upper()
    if role not in ROLES:
        raise validation_error(f"role must be one of {', '.join(ROLES)}")
    return role


def _password(password: str) -> str:
    if not isinstance(password, str) or len(password) < MIN_PASSWORD_LENGTH:
        raise validation_error(f"password must be at least {MIN_PASSWORD_LENGTH} characters")
    return password


async def _keep_an_admin(s, leaving_id: int) -> None:
    """Refuse a change that would leave no enabled admin: nobody could manage the gateway."""
    others = await s.scalar(
        select(func.count()).select_from(User)
        .where(User.role == "ADMIN", User.enabled.is_(True), User.id != leaving_id)
    )
    if not others:
        raise conflict("this is the last enabled ADMIN user; create another admin first")


def generate_password() -> str:
    return secrets.token_urlsafe(15)


class UserService:
    # Users are not part of the gateway snapshot, so changes here do not call on_change.
    def __init__(self, ctx: ServiceContext) -> None:
        self.ctx = ctx

    async def create(self, username: str, password: str, role: str = "USER", enabled: bool = True) -> UserView:
        username = clean_name(username, "username", 64)
        user = User(
            username=username, password_hash=await passwords.hash_password_async(_password(password)),
            role=_role(role), enabled=enabled,
        )
        async with self.ctx.tx(f"user {username!r} already exists") as s:
            s.add(user)
            await s.flush()
            return UserView.of(user)

    async def list(self) -> list[UserView]:
        async with self.ctx.tx() as s:
            return [UserView.of(u) for u in (await s.scalars(select(User).order_by(User.id))).all()]

    async def get(self, ref: int | str) -> UserView:
        async with self.ctx.tx() as s:
            return UserView.of(await fetch(s, User, ref, "user", by="username"))

    async def update(
        self, ref: int | str, *, role: str | None = None, enabled: bool | None = None, password: str | None = None
    ) -> UserView:
        async with self.ctx.tx() as s:
            user = await fetch(s, User, ref, "user", by="username")
            was_admin = user.role == "ADMIN" and user.enabled
            if role is not None:
                user.role = _role(role)
            if enabled is not None:
                user.enabled = bool(enabled)
            if was_admin and (user.role != "ADMIN" or not user.enabled):
                await _keep_an_admin(s, user.id)
            if password is not None:
                user.password_hash = await passwords.hash_password_async(_password(password))
            await s.flush()
            return UserView.of(user)

    async def delete(self, ref: int | str) -> None:
        async with self.ctx.tx() as s:
            user = await fetch(s, User, ref, "user", by="username")
            if user.role == "ADMIN" and user.enabled:
                await _keep_an_admin(s, user.id)
            await s.delete(user)

    async def authenticate(self, username: str, password: str) -> UserView | None:
        """The user when the password matches and the account is enabled, else None."""
        async with self.ctx.tx() as s:
            user = (await s.execute(select(User).where(User.username == username))).scalar_one_or_none()
            if user is None:
                await passwords.verify_password_async(dummy_hash(), password)
                return None
            if not await passwords.verify_password_async(user.password_hash, password) or not user.enabled:
                return None
            if passwords.needs_rehash(user.password_hash):
                user.password_hash = await passwords.hash_password_async(password)
            return UserView.of(user)

    async def ensure_initial_admin(self) -> str | None:
        """Create `admin` with a random password when no user exists; return that password once."""
        password = generate_password()
        try:
            async with self.ctx.tx() as s:
                if (await s.scalar(select(func.count()).select_from(User)) or 0) > 0:
                    return None
                s.add(User(username="admin", password_hash=passwords.hash_password(password), role="ADMIN"))
        except GatewayError as err:
            if err.status == 409:  # another process created it first
                return None
            raise
        return password
