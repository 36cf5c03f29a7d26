from datetime import UTC, datetime, timedelta

import orjson
import pytest
from sqlalchemy import insert, select

from modelgate.auth.keys import hash_api_key
from modelgate.errors import GatewayError
from modelgate.storage.models import ApiKey, CallLog, ProviderKey

UPSTREAM_SECRET = "sk-upstream-0123456789abcdef"


def _code(exc_info) -> tuple[int, str]:
    return exc_info.value.status, exc_info.value.code


async def test_users_create_authenticate_update(services):
    await services.users.create("root", "password123", role="ADMIN")  # so alice may be demoted
    user = await services.users.create("alice", "password123", role="admin")
    assert user.role == "ADMIN" and user.enabled
    assert (await services.users.authenticate("alice", "password123")).id == user.id
    assert await services.users.authenticate("alice", "wrong-password") is None
    assert await services.users.authenticate("nobody", "password123") is None
    await services.users.update("alice", enabled=False)
    assert await services.users.authenticate("alice", "password123") is None
    await services.users.update(user.id, enabled=True, password="new-password", role="USER")
    assert (await services.users.authenticate("alice", "new-password")).role == "USER"
    assert "password" not in orjson.dumps(await services.users.list()).decode()
    with pytest.raises(GatewayError) as exc:
        await services.users.create("alice", "password123")
    assert _code(exc) == (409, "CONFLICT")
    with pytest.raises(GatewayError) as exc:
        await services.users.create("bob", "short")
    assert _code(exc) == (400, "VALIDATION_ERROR")
    with pytest.raises(GatewayError) as exc:
        await services.users.create("bob", "password123", role="ROOT")
    assert _code(exc) == (400, "VALIDATION_ERROR")
    await services.users.delete("alice")
    with pytest.raises(GatewayError) as exc:
        await services.users.get("alice")
    assert _code(exc) == (404, "NOT_FOUND")


async def test_last_admin_cannot_be_removed(services):
    await services.users.create("root", "password123", role="ADMIN")
    for change in (services.users.delete("root"), services.users.update("root", role="USER"),
                   services.users.update("root", enabled=False)):
        with pytest.raises(GatewayError) as exc:
            await change
        assert _code(exc) == (409, "CONFLICT")
    await services.users.create("second", "password123", role="ADMIN")
    await services.users.delete("root")
    assert [u.username for u in await services.users.list()] == ["second"]


async def test_ensure_initial_admin_once(services):
    password = await services.users.ensure_initial_admin()
    assert password and len(password) >= 16
    assert (await services.users.authenticate("admin", password)).role == "ADMIN"
    assert await services.users.ensure_initial_admin() is None


async def test_application_defaults_and_channel_authorisation(services, settings):
    app = await services.applications.create("app1")
    assert app.timeout_seconds == settings.gateway.default_app_timeout_seconds
    assert services.changes == 1
    await services.providers.create("oa", "openai", keys=[UPSTREAM_SECRET])
    ch = await services.channels.create("ch1", "oa", ["gpt-4o"])
    app = await services.applications.authorize_channel("app1", "ch1")
    assert app.channel_ids == [ch.id]
    assert (await services.applications.authorize_channel(app.id, ch.id)).channel_ids == [ch.id]
    assert (await services.applications.revoke_channel("app1", str(ch.id))).channel_ids == []
    with pytest.raises(GatewayError) as exc:
        await services.applications.create("app1")
    assert _code(exc) == (409, "CONFLICT")
    with pytest.raises(GatewayError) as exc:
        await services.applications.authorize_channel("app1", "nope")
    assert _code(exc) == (404, "NOT_FOUND")
    with pytest.raises(GatewayError) as exc:
        await services.applications.update("app1", timeout_seconds=0)
    assert _code(exc) == (400, "VALIDATION_ERROR")


async def test_api_key_plaintext_returned_once_and_only_hash_stored(services, database):
    await services.applications.create("app1")
    created = await services.api_keys.create("app1", name="ci")
    assert created.plaintext.startswith("sk-")
    assert created.key.prefix == created.plaintext[:8] + "…"
    async with database.session() as s:
        row = (await s.execute(select(ApiKey))).scalar_one()
    assert row.key_hash == hash_api_key(created.plaintext)
    # No column holds the plaintext.
    assert created.plaintext not in repr([getattr(row, c.key) for c in ApiKey.__table__.columns])
    listed = await services.api_keys.list("app1")
    assert [k.id for k in listed] == [created.key.id]
    assert created.plaintext not in orjson.dumps(listed).decode()


async def test_api_key_status_and_rate_limits(services):
    await services.applications.create("app1")
    key = (await services.api_keys.create("app1", rate_capacity=10, rate_refill=1)).key
    assert (key.rate_capacity, key.rate_refill_per_second) == (10.0, 1.0)
    assert (await services.api_keys.disable(key.id)).status == "DISABLED"
    assert (await services.api_keys.enable(key.id)).status == "ENABLED"
    updated = await services.api_keys.update_rate_limit(key.id, None, 5)
    assert (updated.rate_capacity, updated.rate_refill_per_second) == (None, 5.0)
    with pytest.raises(GatewayError) as exc:
        await services.api_keys.update_rate_limit(key.id, -1, None)
    assert _code(exc) == (400, "VALIDATION_ERROR")
    assert (await services.api_keys.delete(key.id)).status == "DELETED"
    assert await services.api_keys.list() == []
    assert [k.status for k in await services.api_keys.list(include_deleted=True)] == ["DELETED"]
    for op in (services.api_keys.enable, services.api_keys.get, services.api_keys.delete):
        with pytest.raises(GatewayError) as exc:
            await op(key.id)
        assert _code(exc) == (404, "NOT_FOUND")
    with pytest.raises(GatewayError) as exc:
        await services.api_keys.create("missing-app")
    assert _code(exc) == (404, "NOT_FOUND")


async def test_provider_keys_encrypted_and_never_listed(services, database, secret_box):
    prov = await services.providers.create("oa", "openai", keys=[UPSTREAM_SECRET])
    assert prov.base_url == "https://api.openai.com/v1"
    assert [k.hint for k in prov.keys] == ["cdef"]
    async with database.session() as s:
        stored = (await s.execute(select(ProviderKey))).scalar_one()
    assert UPSTREAM_SECRET.encode() not in stored.secret_encrypted
    assert secret_box.decrypt(stored.secret_encrypted) == UPSTREAM_SECRET
    for listing in (await services.providers.list(), await services.providers.get("oa")):
        dumped = orjson.dumps(listing).decode()
        assert UPSTREAM_SECRET not in dumped and "secret" not in dumped
    added = await services.providers.add_key("oa", "another-upstream-key-9999", label="b")
    assert (await services.providers.disable_key("oa", added.id)).enabled is False
    await services.providers.remove_key("oa", prov.keys[0].id)
    assert [k.id for k in (await services.providers.get("oa")).keys] == [added.id]
    with pytest.raises(GatewayError) as exc:
        await services.providers.remove_key("oa", 9999)
    assert _code(exc) == (404, "NOT_FOUND")


async def test_provider_validation(services):
    with pytest.raises(GatewayError) as exc:
        await services.providers.create("x", "no-such-kind")
    assert _code(exc) == (400, "VALIDATION_ERROR")
    with pytest.raises(GatewayError) as exc:
        await services.providers.create("x", "openai-compatible")  # needs a base URL
    assert _code(exc) == (400, "VALIDATION_ERROR")
    with pytest.raises(GatewayError) as exc:
        await services.providers.create("x", "openai-compatible", base_url="ftp://nope")
    assert _code(exc) == (400, "VALIDATION_ERROR")
    local = await services.providers.create("local", "openai-compatible", base_url="http://127.0.0.1:9/v1/")
    assert local.base_url == "http://127.0.0.1:9/v1" and local.keys == []
    with pytest.raises(GatewayError) as exc:
        await services.providers.create("local", "openai")
    assert _code(exc) == (409, "CONFLICT")
    await services.channels.create("c", "local", ["m"])
    with pytest.raises(GatewayError) as exc:
        await services.providers.delete("local")
    assert _code(exc) == (409, "CONFLICT")
    await services.channels.delete("c")
    await services.providers.delete("local")
    assert await services.providers.list() == []


async def test_channels_and_models(services):
    await services.providers.create("oa", "openai", keys=[UPSTREAM_SECRET])
    ch = await services.channels.create(
        "ch1", "oa",
        ["gpt-4o", {"model_id": "fast", "upstream_model": "gpt-4o-mini", "owned_by": "acme",
                    "capabilities": ["vision", "streaming"]}],
        priority=1, weight=3,
    )
    models = {m.model_id: m for m in ch.models}
    assert models["gpt-4o"].upstream_model == "gpt-4o" and models["gpt-4o"].capabilities == ["streaming"]
    assert models["fast"].upstream_model == "gpt-4o-mini" and models["fast"].capabilities == ["streaming", "vision"]
    assert (ch.provider_name, ch.priority, ch.weight) == ("oa", 1, 3)
    with pytest.raises(GatewayError) as exc:
        await services.channels.add_models("ch1", ["gpt-4o"])
    assert _code(exc) == (409, "CONFLICT")
    with pytest.raises(GatewayError) as exc:
        await services.channels.create("ch2", "oa", [{"model_id": "m", "capabilities": ["telepathy"]}])
    assert _code(exc) == (400, "VALIDATION_ERROR")
    with pytest.raises(GatewayError) as exc:
        await services.channels.create("ch1", "oa", [])
    assert _code(exc) == (409, "CONFLICT")
    with pytest.raises(GatewayError) as exc:
        await services.channels.update("ch1", weight=0)
    assert _code(exc) == (400, "VALIDATION_ERROR")
    ch = await services.channels.add_models("ch1", ["o1"])
    assert sorted(m.model_id for m in ch.models) == ["fast", "gpt-4o", "o1"]
    kept_id = models["fast"].id
    ch = await services.channels.set_models("ch1", [{"model_id": "fast", "upstream_model": "gpt-4.1-mini"}, "new"])
    after = {m.model_id: m for m in ch.models}
    assert sorted(after) == ["fast", "new"]
    assert after["fast"].id == kept_id and after["fast"].upstream_model == "gpt-4.1-mini"
    assert after["fast"].owned_by == "acme"
    ch = await services.channels.remove_models("ch1", ["new"])
    assert [m.model_id for m in ch.models] == ["fast"]
    with pytest.raises(GatewayError) as exc:
        await services.channels.remove_models("ch1", ["new"])
    assert _code(exc) == (404, "NOT_FOUND")


async def test_model_instance_lifecycle(services):
    await services.providers.create("oa", "openai", keys=[UPSTREAM_SECRET])
    ch = await services.channels.create("ch1", "oa", ["a", "b"])
    a = next(m for m in ch.models if m.model_id == "a")
    dep = await services.models.update(a.id, state="deprecated", owned_by="me", capabilities=["functionCalling"])
    assert dep.state == "DEPRECATED" and dep.state_changed_at is not None and dep.owned_by == "me"
    assert [m.model_id for m in await services.models.list(state="DEPRECATED")] == ["a"]
    assert [m.model_id for m in await services.models.list(channel="ch1", model_id="b")] == ["b"]
    back = await services.models.reactivate(a.id)
    assert back.state == "ACTIVE"
    assert (await services.models.update(a.id, owned_by="")).owned_by is None
    with pytest.raises(GatewayError) as exc:
        await services.models.update(a.id, state="GONE")
    assert _code(exc) == (400, "VALIDATION_ERROR")
    with pytest.raises(GatewayError) as exc:
        await services.models.reactivate(12345)
    assert _code(exc) == (404, "NOT_FOUND")


async def test_blacklist(services):
    entry = await services.blacklist.add("10.0.0.7", reason="abuse")
    assert entry.cidr == "10.0.0.7"
    assert (await services.blacklist.add("192.168.1.9/24")).cidr == "192.168.1.0/24"
    with pytest.raises(GatewayError) as exc:
        await services.blacklist.add("10.0.0.7/32")
    assert _code(exc) == (409, "CONFLICT")
    with pytest.raises(GatewayError) as exc:
        await services.blacklist.add("not-an-ip")
    assert _code(exc) == (400, "VALIDATION_ERROR")
    await services.blacklist.remove("192.168.1.0/24")
    await services.blacklist.remove(entry.id)
    assert await services.blacklist.list() == []
    with pytest.raises(GatewayError) as exc:
        await services.blacklist.remove("10.0.0.7")
    assert _code(exc) == (404, "NOT_FOUND")


async def test_call_log_query(services, database):
    now = datetime.now(UTC)
    rows = [
        {"trace_id": f"t{i}", "created_at": now - timedelta(minutes=i), "api_key_id": 1 + i % 2,
         "protocol": "chat", "model": "m1" if i < 3 else "m2", "stream": False,
         "status": 200 if i != 2 else 502, "latency_ms": 1.0, "attempts": 1, "prompt_tokens": i,
         "completion_tokens": 1}
        for i in range(5)
    ]
    async with database.session() as s, s.begin():
        await s.execute(insert(CallLog), rows)
    page = await services.call_log.query(limit=2)
    assert page.total == 5 and [r.trace_id for r in page.items] == ["t0", "t1"]
    assert [r.trace_id for r in (await services.call_log.query(limit=2, offset=4)).items] == ["t4"]
    assert [r.trace_id for r in (await services.call_log.query(model="m2")).items] == ["t3", "t4"]
    assert [r.trace_id for r in (await services.call_log.query(status=502)).items] == ["t2"]
    assert [r.trace_id for r in (await services.call_log.query(api_key_id=2)).items] == ["t1", "t3"]
    assert [r.trace_id for r in (await services.call_log.query(trace_id="t4")).items] == ["t4"]
    window = await services.call_log.query(since=now - timedelta(minutes=3, seconds=30), until=now - timedelta(seconds=30))
    assert [r.trace_id for r in window.items] == ["t1", "t2", "t3"]
    assert page.items[0].created_at.tzinfo is not None
    with pytest.raises(GatewayError) as exc:
        await services.call_log.query(limit=0)
    assert _code(exc) == (400, "VALIDATION_ERROR")


async def test_on_change_called_after_config_commits_only(services):
    await services.users.create("u1", "password123")
    assert services.changes == 0
    await services.applications.create("a")
    await services.blacklist.add("1.2.3.4")
    assert services.changes == 2
    with pytest.raises(GatewayError):
        await services.applications.create("a")
    assert services.changes == 2


async def test_async_on_change_hook(services):
    seen = []

    async def hook():
        seen.append(1)

    services.on_change = hook
    await services.applications.create("a")
    assert seen == [1]

