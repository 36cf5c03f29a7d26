"""Database access: one async engine (aiosqlite by default, asyncpg for PostgreSQL) and migrations."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

from modelgate.config import Settings

MIGRATIONS_DIR = Path(__file__).with_name("migrations")


def normalize_url(url: str) -> str:
    """Map the URL forms operators commonly write onto the async drivers."""
    for plain in ("postgresql://", "postgres://", "postgresql+psycopg2://", "postgresql+psycopg://"):
        if url.startswith(plain):
            return "postgresql+asyncpg://" + url[len(plain):]
    if url.startswith("sqlite://") and not url.startswith("sqlite+"):
        return "sqlite+aiosqlite://" + url[len("sqlite://"):]
    return url


def _set_sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    # WAL lets the gateway read while the usage writer writes; busy_timeout
    # waits for a lock instead of failing at once when two writers meet.
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=5000")
    cursor.close()


class Database:
    def __init__(self, url: str, *, echo: bool = False, **engine_kwargs: Any) -> None:
        self.url = normalize_url(url)
        parsed = make_url(self.url)
        self.is_sqlite = parsed.get_backend_name() == "sqlite"
        if self.is_sqlite and parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        if not self.is_sqlite:
            engine_kwargs.setdefault("pool_pre_ping", True)
        self.engine: AsyncEngine = create_async_engine(self.url, echo=echo, **engine_kwargs)
        if self.is_sqlite:
            event.listen(self.engine.sync_engine, "connect", _set_sqlite_pragmas)
        self.sessionmaker: async_sessionmaker[AsyncSession] = async_sessionmaker(
            self.engine, expire_on_commit=False
        )

    @classmethod
    def from_settings(cls, settings: Settings, timeout: float | None = None, statement_deadline: bool = True,
                      **engine_kwargs: Any) -> Database:
        """An engine with a deadline on connecting, on each statement and on the pool wait.

        Without them a silent database (a partition, a failover) holds a connection for good.
        """
        url = settings.resolved_database_url
        timeout = timeout if timeout is not None else settings.database_timeout_seconds
        if make_url(normalize_url(url)).get_backend_name() != "sqlite":
            engine_kwargs.setdefault("pool_timeout", timeout)
            connect_args = engine_kwargs.setdefault("connect_args", {})
            connect_args.setdefault("timeout", timeout)  # asyncpg: connecting
            if statement_deadline:
                connect_args.setdefault("command_timeout", timeout)  # asyncpg: each statement
        return cls(url, **engine_kwargs)

    def session(self) -> AsyncSession:
        return self.sessionmaker()

    async def migrate(self, revision: str = "head") -> None:
        """Run Alembic `upgrade` on this engine's connection (no alembic.ini needed)."""
        async with self.engine.begin() as conn:
            await conn.run_sync(_upgrade, revision)

    async def dispose(self) -> None:
        await self.engine.dispose()


def alembic_config(connection: Connection | None = None) -> Any:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def _upgrade(connection: Connection, revision: str) -> None:
    from alembic import command

    command.upgrade(alembic_config(connection), revision)
