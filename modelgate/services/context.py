"""What every service needs: the database, the secret box, settings, and the change hook."""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from modelgate.auth.crypto import SecretBox
from modelgate.config import Settings
from modelgate.errors import conflict, not_found, validation_error
from modelgate.storage.db import Database

log = logging.getLogger(__name__)

OnChange = Callable[[], Awaitable[None] | None]
T = TypeVar("T")


@dataclass(slots=True)
class ServiceContext:
    db: Database
    box: SecretBox
    settings: Settings
    on_change: OnChange | None = None

    @asynccontextmanager
    async def tx(self, conflict_message: str = "already exists") -> AsyncIterator[AsyncSession]:
        """One committed transaction; a unique-constraint violation becomes 409 CONFLICT."""
        try:
            async with self.db.session() as session, session.begin():
                yield session
        except IntegrityError:
            raise conflict(conflict_message) from None

    @asynccontextmanager
    async def change(self, conflict_message: str = "already exists") -> AsyncIterator[AsyncSession]:
        """A transaction that changes gateway configuration: notify after it commits."""
        async with self.tx(conflict_message) as session:
            yield session
        await self.notify()

    async def notify(self) -> None:
        if self.on_change is None:
            return
        try:
            result = self.on_change()
            if inspect.isawaitable(result):
                await result
        except Exception:  # the change is committed; a refresh failure must not undo the answer
            log.exception("configuration change hook failed")


async def fetch(session: AsyncSession, model: type[T], ref: int | str, what: str, by: str = "name") -> T:
    """Find a record by id (an int, or a digit string that is not a name) or by its name column."""
    obj = None
    if isinstance(ref, int):
        obj = await session.get(model, ref)
    else:
        obj = (await session.execute(select(model).where(getattr(model, by) == ref))).scalar_one_or_none()
        if obj is None and ref.isdigit():
            obj = await session.get(model, int(ref))
    if obj is None:
        raise not_found(f"{what} {ref!r} not found")
    return obj


def clean_name(value: Any, what: str, max_len: int = 128) -> str:
    if not isinstance(value, str) or not value.strip():
        raise validation_error(f"{what} must be a non-empty string")
    value = value.strip()
    if len(value) > max_len:
        raise validation_error(f"{what} must be at most {max_len} characters")
    return value


def positive(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise validation_error(f"{what} must be a positive number")
    return float(value)
