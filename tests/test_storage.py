import uuid

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect, text

from modelgate.storage.db import Database, normalize_url
from modelgate.storage.models import Base

PG_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"


def _schema_diff(connection):
    ctx = MigrationContext.configure(connection, opts={"compare_type": True})
    return compare_metadata(ctx, Base.metadata)


def test_normalize_url():
    assert normalize_url("postgresql://u@h/db") == "postgresql+asyncpg://u@h/db"
    assert normalize_url("postgres://u@h/db") == "postgresql+asyncpg://u@h/db"
    assert normalize_url("sqlite:///x.db") == "sqlite+aiosqlite:///x.db"
    assert normalize_url("sqlite+aiosqlite:///x.db") == "sqlite+aiosqlite:///x.db"
    assert normalize_url("postgresql+asyncpg://u@h/db") == "postgresql+asyncpg://u@h/db"


async def test_sqlite_migration_matches_models(database):
    async with database.engine.connect() as conn:
        diff = await conn.run_sync(_schema_diff)
        tables = set(await conn.run_sync(lambda c: inspect(c).get_table_names()))
        version = (await conn.execute(text("select version_num from alembic_version"))).scalar_one()
    assert diff == []
    assert tables == set(Base.metadata.tables) | {"alembic_version"}
    assert version == "0001"


async def test_sqlite_pragmas_and_data_dir(tmp_path):
    db = Database(f"sqlite:///{tmp_path}/nested/dir/m.db")
    try:
        await db.migrate()
        await db.migrate()  # idempotent
        async with db.engine.connect() as conn:
            assert (await conn.execute(text("PRAGMA foreign_keys"))).scalar_one() == 1
            assert (await conn.execute(text("PRAGMA journal_mode"))).scalar_one() == "wal"
            assert (await conn.execute(text("PRAGMA busy_timeout"))).scalar_one() == 5000
        assert (tmp_path / "nested" / "dir" / "m.db").is_file()
    finally:
        await db.dispose()


async def test_postgres_migration_matches_models():
    asyncpg = pytest.importorskip("asyncpg")
    schema = f"mgtest_{uuid.uuid4().hex[:10]}"
    try:
        conn = await asyncpg.connect("postgresql://postgres@127.0.0.1:5432/test", timeout=3)
    except (OSError, asyncpg.PostgresError) as exc:
        pytest.skip(f"PostgreSQL at 127.0.0.1:5432/test unreachable: {exc}")
    await conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        # search_path keeps the tables (and alembic_version) inside the fresh schema
        db = Database(PG_URL, connect_args={"server_settings": {"search_path": schema}})
        try:
            await db.migrate()
            async with db.engine.connect() as c:
                diff = await c.run_sync(_schema_diff)
                tables = set(await c.run_sync(lambda sc: inspect(sc).get_table_names(schema=schema)))
            assert diff == []
            assert tables == set(Base.metadata.tables) | {"alembic_version"}
        finally:
            await db.dispose()
    finally:
        await conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
        await conn.close()
