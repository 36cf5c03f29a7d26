import uuid
from datetime import UTC

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect, text

from modelgate.auth.keys import hash_api_key
from modelgate.errors import GatewayError
from modelgate.storage.db import Database, normalize_url
from modelgate.storage.models import Base
from modelgate.storage.snapshot_loader import load_snapshot

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
    from alembic.script import ScriptDirectory

    from modelgate.storage.db import alembic_config

    assert version == ScriptDirectory.from_config(alembic_config()).get_current_head()


async def test_sqlite_pragmas_and_data_dir(tmp_path):
    db = Database(f"sqlite:///{tmp_path}/nested/dir/m.db")
    try:
        await db.migrate()
        await db.migrate()  # idempotent
        async with db.engine.connect() as conn:
            assert (await conn.execute(text("PRAGMA foreign_keys"))).scalar_one() == 1
            assert (await conn.execute(text("PRAGMA journal_mode"))).scalar_one() == "wal"
            assert (await conn.execute(text("PRAGMA busy_timeout"))).scalar_one() == 5000
            # Memory per connection is bounded: every pooled connection of every worker has its cache.
            assert -512 <= (await conn.execute(text("PRAGMA cache_size"))).scalar_one() < 0
        # The call-log writer's own connection too.
        cache_kib = await db.run_transaction(lambda conn: conn.execute(text("PRAGMA cache_size")).scalar_one())
        assert -512 <= cache_kib < 0
        assert (tmp_path / "nested" / "dir" / "m.db").is_file()
    finally:
        await db.dispose()


@pytest.fixture
async def pg_database():
    """A migrated PostgreSQL database in a fresh schema, dropped afterwards."""
    asyncpg = pytest.importorskip("asyncpg")
    schema = f"mgtest_{uuid.uuid4().hex[:10]}"
    try:
        conn = await asyncpg.connect("postgresql://postgres@127.0.0.1:5432/test", timeout=3)
    except (OSError, asyncpg.PostgresError) as exc:
        pytest.skip(f"PostgreSQL at 127.0.0.1:5432/test unreachable: {exc}")
    await conn.execute(f'CREATE SCHEMA "{schema}"')
    # search_path keeps the tables (and alembic_version) inside the fresh schema
    db = Database(PG_URL, connect_args={"server_settings": {"search_path": schema}})
    db.schema = schema
    try:
        await db.migrate()
        yield db
    finally:
        await db.dispose()
        await conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
        await conn.close()


async def test_postgres_migration_matches_models(pg_database):
    async with pg_database.engine.connect() as c:
        diff = await c.run_sync(_schema_diff)
        tables = set(await c.run_sync(lambda sc: inspect(sc).get_table_names(schema=pg_database.schema)))
    assert diff == []
    assert tables == set(Base.metadata.tables) | {"alembic_version"}


async def test_postgres_services_snapshot_and_usage(pg_database, secret_box, settings):
    from datetime import datetime, timedelta

    from modelgate.routing.events import ResilienceEventData
    from modelgate.services import Services
    from modelgate.storage.usage_writer import CallRecord, UsageWriter

    svc = Services(pg_database, secret_box, settings)
    await svc.providers.create("oa", "openai", keys=["upstream-key-pg-4242"])
    await svc.channels.create("main", "oa", [{"model_id": "gpt", "capabilities": ["vision"]}])
    await svc.applications.create("app")
    await svc.applications.authorize_channel("app", "main")
    created = await svc.api_keys.create("app")
    snap = await load_snapshot(pg_database, secret_box, settings)
    assert hash_api_key(created.plaintext) in snap.keys_by_hash
    (route,) = snap.routes_by_model["gpt"]
    assert route.endpoints[0].api_key == "upstream-key-pg-4242" and route.capabilities == ("vision",)
    assert route.created > 0

    writer = UsageWriter(pg_database, settings)
    writer.record(CallRecord("t-pg", "chat", "gpt", 200, api_key_id=created.key.id, prompt_tokens=3))
    writer.record_event(ResilienceEventData("FAILOVER", channel_id=route.channel_id))
    assert await writer.flush() == 2
    page = await svc.call_log.query(since=datetime.now(UTC) - timedelta(minutes=1))
    assert [r.trace_id for r in page.items] == ["t-pg"]
    assert (await svc.api_keys.get(created.key.id)).last_used_at is not None
    with pytest.raises(GatewayError) as exc:
        await svc.channels.create("main", "oa", [])
    assert exc.value.code == "CONFLICT"


# --- snapshot loader -------------------------------------------------------


async def test_snapshot_keys_only_enabled(services, database, secret_box, settings):
    await services.applications.create("app")
    live = await services.api_keys.create("app", name="live", rate_capacity=7)
    disabled = await services.api_keys.create("app")
    deleted = await services.api_keys.create("app")
    await services.api_keys.disable(disabled.key.id)
    await services.api_keys.delete(deleted.key.id)
    snap = await load_snapshot(database, secret_box, settings)
    assert set(snap.keys_by_hash) == {hash_api_key(live.plaintext)}
    entry = snap.keys_by_hash[hash_api_key(live.plaintext)]
    assert (entry.id, entry.name, entry.rate_capacity, entry.rate_refill_per_second) == (live.key.id, "live", 7.0, None)
    assert snap.apps[entry.application_id].name == "app"


async def test_snapshot_routes_and_endpoints(services, database, secret_box, settings):
    prov = await services.providers.create("oa", "openai", keys=["upstream-key-one-1111", "upstream-key-two-2222"],
                                           options={"organization": "org-1"})
    await services.providers.disable_key("oa", prov.keys[1].id)
    third = await services.providers.add_key("oa", "upstream-key-three-3333")
    main = await services.channels.create("main", "oa", [{"model_id": "gpt", "owned_by": "acme"}, "old"], priority=0)
    backup = await services.channels.create("backup", "oa", ["gpt"], priority=5, weight=2)
    await services.models.update(next(m.id for m in main.models if m.model_id == "old"), state="DEPRECATED")
    # routes to a provider with no usable key, a disabled channel and a disabled provider are dropped
    keyless = await services.providers.create("nokeys", "openai")
    await services.channels.create("dead1", keyless.id, ["gpt", "only-dead"])
    await services.channels.create("dead2", "oa", ["gpt"], enabled=False)
    off = await services.providers.create("off", "openai", keys=["upstream-key-off-0000"])
    await services.providers.update(off.id, enabled=False)
    await services.channels.create("dead3", "off", ["gpt"])
    local = await services.providers.create("local", "openai-compatible", base_url="http://127.0.0.1:9/v1")
    await services.channels.create("local", "local", ["llama"])
    app = await services.applications.create("app")
    await services.applications.authorize_channel("app", "backup")
    await services.blacklist.add("10.1.0.0/16")
    await services.blacklist.add("192.0.2.1")

    snap = await load_snapshot(database, secret_box, settings)
    assert set(snap.routes_by_model) == {"gpt", "llama"}
    gpt = snap.routes_by_model["gpt"]
    assert [r.channel_name for r in gpt] == ["main", "backup"]
    first = gpt[0]
    assert first.owned_by == "acme" and gpt[1].owned_by == "openai" and first.provider_kind == "openai"
    assert first.upstream_model == "gpt" and first.capabilities == ("streaming",)
    assert (gpt[1].priority, gpt[1].weight) == (5, 2)
    assert abs(first.created - int(main.models[0].created_at.timestamp())) <= 1
    assert [(e.id, e.api_key) for e in first.endpoints] == [
        (f"p{prov.id}:k{prov.keys[0].id}", "upstream-key-one-1111"),
        (f"p{prov.id}:k{third.id}", "upstream-key-three-3333"),
    ]
    assert first.endpoints[0].base_url == "https://api.openai.com/v1"
    assert first.endpoints[0].options["organization"] == "org-1"
    (llama,) = snap.routes_by_model["llama"]
    assert [(e.id, e.key_id, e.api_key) for e in llama.endpoints] == [(f"p{local.id}:k0", 0, "")]
    entry = snap.apps[app.id]
    assert entry.channel_ids == frozenset({backup.id})
    routes, exists = snap.routes_for(entry, "gpt")
    assert exists and [r.channel_name for r in routes] == ["backup"]
    assert snap.blacklist.blocks("10.1.200.3") and snap.blacklist.blocks("192.0.2.1")
    assert not snap.blacklist.blocks("192.0.2.2")


async def test_snapshot_refuses_undecryptable_keys(services, database, settings):
    """A lost or changed ENCRYPTION_KEY must not route calls upstream without their keys (issue 15)."""
    import os

    from modelgate.auth.crypto import ConfigError, SecretBox

    await services.providers.create("oa", "openai", keys=["upstream-key-one-1111"])
    await services.channels.create("main", "oa", ["gpt"])
    with pytest.raises(ConfigError) as err:
        await load_snapshot(database, SecretBox(os.urandom(32)), settings)
    assert str(err.value).startswith("ENCRYPTION_KEY_MISMATCH: 1 stored upstream key(s)")
    assert "upstream-key-one" not in str(err.value)
