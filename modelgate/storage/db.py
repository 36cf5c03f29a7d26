"""Database access: one async engine (aiosqlite by default, asyncpg for PostgreSQL), migrations, and
whole transactions run in one database thread on a SQLite file (`run_transaction`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

from modelgate.config import Settings

MIGRATIONS_DIR = Path(__file__).with_name("migrations")

T = TypeVar("T")


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
    # Each connection caches up to this many KiB of pages (SQLite's default: 2,000), in every worker and
    # for each pooled connection; the operating system caches the file as well. The call-log writer
    # appends in trace-id order (UUIDv7), so it touches few pages (bench.agent: 1.6 MB less per worker).
    cursor.execute("PRAGMA cache_size=-512")
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
        self._file_path = parsed.database if self.is_sqlite and parsed.database not in (None, "", ":memory:") else None
        self._thread_engine: Engine | None = None
        self._thread: ThreadPoolExecutor | None = None

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

    @property
    def transaction_engine(self) -> Engine:
        """The engine `run_transaction` uses (for event hooks)."""
        if self._file_path is None:
            return self.engine.sync_engine
        if self._thread_engine is None:
            self._thread_engine = create_engine(f"sqlite:///{self._file_path}")
            event.listen(self._thread_engine, "connect", _set_sqlite_pragmas)
            self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="modelgate-sqlite")
        return self._thread_engine

    async def run_transaction(self, work: Callable[[Connection], T]) -> T:
        """Run `work` in one transaction, committed when it returns.

        On a SQLite file the whole transaction runs in one database thread with the stdlib driver:
        through aiosqlite each statement, commit and connection check-out is a hop to its thread and
        back, and under a saturated event loop every hop waits a full loop iteration (a call-log batch
        took 8 hops, 140 ms instead of 25 ms, so the writer fell behind the calls it records).
        Elsewhere (asyncpg runs in the event loop) it is one async transaction.
        """
        engine = self.transaction_engine
        if self._thread is None:
            async with self.engine.begin() as conn:
                return await conn.run_sync(work)
        return await asyncio.get_running_loop().run_in_executor(self._thread, _run_in_transaction, engine, work)

    async def dispose(self) -> None:
        await self.engine.dispose()
        if self._thread is not None:
            self._thread.submit(self.transaction_engine.dispose)
            self._thread.shutdown(wait=False)  # a statement stuck on a busy file must not hold the caller
            self._thread, self._thread_engine = None, None


def _run_in_transaction(engine: Engine, work: Callable[[Connection], T]) -> T:
    with engine.begin() as conn:
        return work(conn)


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
