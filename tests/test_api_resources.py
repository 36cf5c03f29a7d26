"""Management API resources: users, applications, keys, providers, channels, models, blacklist, call log."""

from __future__ import annotations

from modelgate.api import EndpointCheck, HealthCheckResult
from modelgate.auth.keys import hash_api_key
from modelgate.errors import ErrorType, UpstreamError, not_found
from modelgate.providers.registry import KINDS
from modelgate.routing.breaker import BreakerState
from modelgate.storage.usage_writer import CallRecord, UsageWriter
from tests import test_api_base as base
from tests.test_api_base import (
    USER_PASSWORD,
    Env,
    as_admin,
    as_user,
    assert_envelope_error,
    assert_short,
    login,
)

api = base.api  # the shared fixture

UPSTREAM_SECRET = "sk-upstream-very-secret-9876"


async def _provider_and_channel(c, name: str = "oa") -> tuple[dict, dict]:
    r = await c.post("/api/v1/providers", json={"name": name, "kind": "openai", "keys": [UPSTREAM_SECRET]})
    assert r.status_code == 201, r.text
    provider = r.json()["data"]
    r = await c.post("/api/v1/channels", json={
        "name": f"{name}-main", "providerId": provider["id"], "priority": 1, "weight": 3,
        "models": ["gpt-4o", {"modelId": "fast", "upstreamModel": "gpt-4o-mini", "capabilities": ["streaming"]}],
    })
    assert r.status_code == 201, r.text
    return provider, r.json()["data"]


# --- users ------------------------------------------------------------------------------------

async def test_users_crud_and_conflict(api: Env) -> None:
    c = await as_admin(api)
    r = await c.post("/api/v1/users", json={"username": "bob", "password": "bob-password", "role": "USER"})
    assert r.status_code == 201
    bob = r.json()["data"]
    assert "password" not in str(bob).lower()
    assert_envelope_error(await c.post("/api/v1/users", json={"username": "bob", "password": "x" * 10}), 409,
                          "CONFLICT")
    r = await c.patch(f"/api/v1/users/{bob['id']}", json={"role": "ADMIN"})
    assert r.json()["data"]["role"] == "ADMIN"
    assert [u["username"] for u in (await c.get("/api/v1/users")).json()["data"]] == ["admin", "alice", "bob"]
    assert_envelope_error(await c.patch(f"/api/v1/users/{api.admin_id}", json={"enabled": False}), 409, "CONFLICT")
    assert (await c.delete(f"/api/v1/users/{bob['id']}")).status_code == 200
    assert_envelope_error(await c.get(f"/api/v1/users/{bob['id']}"), 404, "NOT_FOUND")
    assert_envelope_error(await c.post("/api/v1/users", json={"username": "x", "password": "p" * 8,
                                                              "role": "ROOT"}), 400, "VALIDATION_ERROR")


async def test_disabling_a_user_ends_their_sessions(api: Env) -> None:
    import httpx

    async with httpx.AsyncClient(transport=api.client._transport, base_url="http://testserver") as alice:
        await login(alice, "alice", USER_PASSWORD)
        assert (await alice.get("/api/v1/auth/me")).status_code == 200
        c = await as_admin(api)
        assert (await c.patch(f"/api/v1/users/{api.user_id}", json={"enabled": False})).status_code == 200
        assert_short(await alice.get("/api/v1/auth/me"), 401, "UNAUTHORIZED")


# --- applications and keys --------------------------------------------------------------------

async def test_application_with_timeout_and_channels(api: Env) -> None:
    c = await as_admin(api)
    _, channel = await _provider_and_channel(c)
    r = await c.post("/api/v1/applications", json={"name": "web", "timeout": 30, "channelIds": [channel["id"]]})
    assert r.status_code == 201
    app = r.json()["data"]
    assert app["timeout"] == 30 and app["channelIds"] == [channel["id"]] and app["ownerId"] == api.admin_id
    default = (await c.post("/api/v1/applications", json={"name": "batch"})).json()["data"]
    assert default["timeout"] == 120
    assert_envelope_error(await c.post("/api/v1/applications", json={"name": "web"}), 409, "CONFLICT")
    assert_envelope_error(await c.post("/api/v1/applications", json={"name": "x", "timeout": 0}), 400,
                          "VALIDATION_ERROR")
    assert_envelope_error(await c.post("/api/v1/applications", json={"name": "y", "channelIds": [999]}), 404,
                          "NOT_FOUND")
    assert (await c.put(f"/api/v1/applications/{app['id']}/channels", json={"channelIds": []})).json()[
        "data"]["channelIds"] == []
    r = await c.post(f"/api/v1/applications/{app['id']}/channels/{channel['id']}")
    assert r.json()["data"]["channelIds"] == [channel["id"]]
    r = await c.delete(f"/api/v1/applications/{app['id']}/channels/{channel['id']}")
    assert r.json()["data"]["channelIds"] == []
    r = await c.patch(f"/api/v1/applications/{app['id']}", json={"timeout": 45.5, "description": "d"})
    assert r.json()["data"]["timeout"] == 45.5
    assert_envelope_error(await c.get("/api/v1/applications/4242"), 404, "NOT_FOUND")
    assert (await c.delete(f"/api/v1/applications/{app['id']}")).status_code == 200
    assert_envelope_error(await c.get(f"/api/v1/applications/{app['id']}"), 404, "NOT_FOUND")


async def test_key_plaintext_once_prefix_after(api: Env) -> None:
    c = await as_admin(api)
    app = (await c.post("/api/v1/applications", json={"name": "web"})).json()["data"]
    r = await c.post(f"/api/v1/applications/{app['id']}/keys", json={"name": "ci"})
    assert r.status_code == 201 and r.headers["cache-control"] == "no-store"
    created = r.json()["data"]
    plaintext = created["plaintext"]
    assert plaintext.startswith("sk-") and len(plaintext) > 20
    key = created["key"]
    assert key["status"] == "ENABLED" and plaintext.startswith(key["prefix"].rstrip("…"))
    listed = (await c.get(f"/api/v1/applications/{app['id']}/keys")).text
    assert plaintext not in listed and key["prefix"] in listed
    assert plaintext not in (await c.get(f"/api/v1/keys/{key['id']}")).text
    assert plaintext not in (await c.get("/api/v1/keys")).text
    # Only the hash is stored.
    from sqlalchemy import select

    from modelgate.storage.models import ApiKey

    async with api.state.db.session() as s:
        stored = (await s.scalars(select(ApiKey.key_hash))).all()
    assert stored == [hash_api_key(plaintext)]
    r = await c.post(f"/api/v1/keys/{key['id']}/disable")
    assert r.json()["data"]["status"] == "DISABLED"
    r = await c.post(f"/api/v1/keys/{key['id']}/enable")
    assert r.json()["data"]["status"] == "ENABLED"
    r = await c.patch(f"/api/v1/keys/{key['id']}", json={"rateCapacity": 10, "rateRefillPerSecond": 1})
    assert (r.json()["data"]["rateCapacity"], r.json()["data"]["rateRefillPerSecond"]) == (10, 1)
    r = await c.delete(f"/api/v1/keys/{key['id']}")
    assert r.json()["data"]["status"] == "DELETED"
    assert_envelope_error(await c.get(f"/api/v1/keys/{key['id']}"), 404, "NOT_FOUND")
    assert_envelope_error(await c.post(f"/api/v1/keys/{key['id']}/enable"), 404, "NOT_FOUND")
    assert (await c.get("/api/v1/keys")).json()["data"] == []
    assert_envelope_error(await c.post("/api/v1/applications/999/keys", json={}), 404, "NOT_FOUND")


async def test_user_manages_only_own_applications_and_keys(api: Env) -> None:
    theirs = await api.services.applications.create("admins-app", owner_id=api.admin_id)
    their_key = await api.services.api_keys.create(theirs.id)
    c = await as_user(api)
    r = await c.post("/api/v1/applications", json={"name": "alices-app", "timeout": 60})
    assert r.status_code == 201
    mine = r.json()["data"]
    assert mine["ownerId"] == api.user_id
    assert [a["name"] for a in (await c.get("/api/v1/applications")).json()["data"]] == ["alices-app"]
    assert_envelope_error(await c.get(f"/api/v1/applications/{theirs.id}"), 404, "NOT_FOUND")
    assert_envelope_error(await c.patch(f"/api/v1/applications/{theirs.id}", json={"timeout": 1}), 404,
                          "NOT_FOUND")
    assert_envelope_error(await c.post(f"/api/v1/applications/{theirs.id}/keys", json={}), 404, "NOT_FOUND")
    assert_envelope_error(await c.post(f"/api/v1/keys/{their_key.key.id}/disable"), 404, "NOT_FOUND")
    assert_short(await c.post("/api/v1/applications", json={"name": "sneaky", "channelIds": [1]}), 403,
                 "ACCESS_DENIED")
    created = (await c.post(f"/api/v1/applications/{mine['id']}/keys", json={})).json()["data"]
    assert created["plaintext"].startswith("sk-")
    keys = (await c.get("/api/v1/keys")).json()["data"]
    assert [k["id"] for k in keys] == [created["key"]["id"]]
    assert (await c.delete(f"/api/v1/keys/{created['key']['id']}")).status_code == 200


# --- providers --------------------------------------------------------------------------------

async def test_provider_kinds_and_crud_never_leak_upstream_key(api: Env) -> None:
    c = await as_admin(api)
    listed = (await c.get("/api/v1/providers/kinds")).json()["data"]
    kinds = {k["kind"] for k in listed}
    assert {"openai", "openai-compatible", "mock"} <= kinds and kinds == set(KINDS)
    # kinds without a default base URL tell the admin what to enter
    assert all(k["baseUrlNote"] for k in listed if k["defaultBaseUrl"] is None)
    # the options each kind reads, and the auth values that need no stored key (console form)
    by_kind = {k["kind"]: k for k in listed}
    assert {"num_ctx", "keep_alive", "think"} <= set(by_kind["ollama"]["options"])
    assert by_kind["aws-bedrock"]["keylessAuth"] == ["aws"] and by_kind["openai"]["options"] == []
    provider, _ = await _provider_and_channel(c)
    assert provider["keys"][0]["hint"] == UPSTREAM_SECRET[-4:]
    for path in ("/api/v1/providers", f"/api/v1/providers/{provider['id']}", "/api/v1/channels"):
        assert UPSTREAM_SECRET not in (await c.get(path)).text
    r = await c.post(f"/api/v1/providers/{provider['id']}/keys", json={"key": "sk-second-upstream-key-5555",
                                                                      "label": "backup"})
    assert r.status_code == 201
    assert (r.json()["data"]["hint"], r.json()["data"]["label"]) == ("5555", "backup")
    assert "sk-second" not in r.text
    second = r.json()["data"]["id"]
    assert (await c.post(f"/api/v1/providers/{provider['id']}/keys/{second}/disable")).json()["data"][
        "enabled"] is False
    assert (await c.delete(f"/api/v1/providers/{provider['id']}/keys/{second}")).status_code == 200
    assert_envelope_error(await c.delete(f"/api/v1/providers/{provider['id']}/keys/{second}"), 404, "NOT_FOUND")
    assert_envelope_error(await c.post("/api/v1/providers", json={"name": "oa", "kind": "openai"}), 409,
                          "CONFLICT")
    assert_envelope_error(await c.post("/api/v1/providers", json={"name": "zz", "kind": "nope"}), 400,
                          "VALIDATION_ERROR")
    r = await c.patch(f"/api/v1/providers/{provider['id']}", json={"baseUrl": "https://proxy.example/v1"})
    assert r.json()["data"]["baseUrl"] == "https://proxy.example/v1"
    # In use by a channel: 409 until the channel is gone.
    assert_envelope_error(await c.delete(f"/api/v1/providers/{provider['id']}"), 409, "CONFLICT")
    assert_envelope_error(await c.get("/api/v1/providers/999"), 404, "NOT_FOUND")


# --- channels, breakers, health checks --------------------------------------------------------

async def test_channel_crud_models_and_enable(api: Env) -> None:
    c = await as_admin(api)
    provider, channel = await _provider_and_channel(c)
    assert (channel["priority"], channel["weight"], channel["providerKind"]) == (1, 3, "openai")
    assert [m["modelId"] for m in channel["models"]] == ["gpt-4o", "fast"]
    assert channel["models"][1]["upstreamModel"] == "gpt-4o-mini"
    cid = channel["id"]
    assert (await c.post(f"/api/v1/channels/{cid}/disable")).json()["data"]["enabled"] is False
    assert (await c.post(f"/api/v1/channels/{cid}/enable")).json()["data"]["enabled"] is True
    r = await c.post(f"/api/v1/channels/{cid}/models", json={"models": ["o3"]})
    assert [m["modelId"] for m in r.json()["data"]["models"]][-1] == "o3"
    assert_envelope_error(await c.post(f"/api/v1/channels/{cid}/models", json={"models": ["o3"]}), 409,
                          "CONFLICT")
    r = await c.delete(f"/api/v1/channels/{cid}/models/o3")
    assert "o3" not in [m["modelId"] for m in r.json()["data"]["models"]]
    r = await c.put(f"/api/v1/channels/{cid}/models", json={"models": ["gpt-4o"]})
    assert [m["modelId"] for m in r.json()["data"]["models"]] == ["gpt-4o"]
    r = await c.patch(f"/api/v1/channels/{cid}", json={"priority": 5, "weight": 2})
    assert (r.json()["data"]["priority"], r.json()["data"]["weight"]) == (5, 2)
    assert_envelope_error(await c.patch(f"/api/v1/channels/{cid}", json={"weight": 0}), 400, "VALIDATION_ERROR")
    assert_envelope_error(await c.post("/api/v1/channels", json={"name": "oa-main", "providerId": provider["id"]}),
                          409, "CONFLICT")
    assert_envelope_error(await c.post("/api/v1/channels", json={"name": "n", "providerId": 999}), 404,
                          "NOT_FOUND")
    assert (await c.delete(f"/api/v1/channels/{cid}")).status_code == 200
    assert_envelope_error(await c.get(f"/api/v1/channels/{cid}"), 404, "NOT_FOUND")


async def test_breaker_state_and_forced_recovery(api: Env) -> None:
    c = await as_admin(api)
    provider, channel = await _provider_and_channel(c)
    endpoint = f"p{provider['id']}:k{provider['keys'][0]['id']}"
    assert channel["breakers"] == [{"endpointId": endpoint, "keyHint": UPSTREAM_SECRET[-4:], "state": "CLOSED",
                                    "failures": 0, "openedAt": None, "retryAfterSeconds": None}]
    breakers = api.state.breakers
    for _ in range(api.state.settings.gateway.breaker.consecutive_failures):
        breakers.record(endpoint, UpstreamError(ErrorType.UPSTREAM_ERROR, "boom", 500))
    assert breakers.state(endpoint) is BreakerState.OPEN
    state = (await c.get(f"/api/v1/channels/{channel['id']}/breakers")).json()["data"][0]
    assert state["state"] == "OPEN" and state["retryAfterSeconds"] > 0 and state["openedAt"]
    r = await c.post(f"/api/v1/channels/{channel['id']}/breaker/recover", json={"endpointId": endpoint})
    assert r.json()["data"]["recovered"] == [{"endpointId": endpoint, "previousState": "OPEN"}]
    assert breakers.state(endpoint) is BreakerState.CLOSED
    # Without a body every endpoint of the channel is recovered.
    r = await c.post(f"/api/v1/channels/{channel['id']}/breaker/recover")
    assert r.json()["data"]["recovered"] == [{"endpointId": endpoint, "previousState": "CLOSED"}]
    assert_envelope_error(await c.post(f"/api/v1/channels/{channel['id']}/breaker/recover",
                                       json={"endpointId": "p9:k9"}), 404, "NOT_FOUND")
    assert_envelope_error(await c.post("/api/v1/channels/999/breaker/recover"), 404, "NOT_FOUND")


async def test_health_check_calls_injected_function(api: Env) -> None:
    c = await as_admin(api)
    _, channel = await _provider_and_channel(c)
    assert_envelope_error(await c.post(f"/api/v1/channels/{channel['id']}/health-check"), 503, "UPSTREAM_ERROR")
    calls: list[int] = []

    async def check(channel_id: int) -> HealthCheckResult:
        calls.append(channel_id)
        return HealthCheckResult(channel_id, False, 12.345, "AUTHENTICATION_ERROR", "invalid key", "gpt-4o",
                                 [EndpointCheck("p1:k1", False, 12.345, "AUTHENTICATION_ERROR", "invalid key")])

    api.state.health_check = check
    r = await c.post(f"/api/v1/channels/{channel['id']}/health-check")
    data = r.json()["data"]
    assert calls == [channel["id"]]
    assert (data["ok"], data["latencyMs"], data["errorType"]) == (False, 12.35, "AUTHENTICATION_ERROR")
    assert data["endpoints"][0]["endpointId"] == "p1:k1"
    assert_envelope_error(await c.post("/api/v1/channels/999/health-check"), 404, "NOT_FOUND")
    assert calls == [channel["id"]]

    async def vanished(channel_id: int) -> HealthCheckResult:
        raise not_found(f"channel {channel_id} not found")

    api.state.health_check = vanished
    assert_envelope_error(await c.post(f"/api/v1/channels/{channel['id']}/health-check"), 404, "NOT_FOUND")


# --- model instances and blacklist ------------------------------------------------------------

async def test_model_instances_filter_update_reactivate(api: Env) -> None:
    c = await as_admin(api)
    _, channel = await _provider_and_channel(c)
    models = (await c.get(f"/api/v1/models?channelId={channel['id']}")).json()["data"]
    assert {m["modelId"] for m in models} == {"gpt-4o", "fast"}
    mid = next(m["id"] for m in models if m["modelId"] == "gpt-4o")
    r = await c.patch(f"/api/v1/models/{mid}", json={"state": "DEPRECATED", "ownedBy": "team-ml",
                                                     "capabilities": ["vision", "streaming"]})
    data = r.json()["data"]
    assert (data["state"], data["ownedBy"], data["capabilities"]) == ("DEPRECATED", "team-ml",
                                                                      ["streaming", "vision"])
    assert [m["id"] for m in (await c.get("/api/v1/models?state=DEPRECATED")).json()["data"]] == [mid]
    assert (await c.post(f"/api/v1/models/{mid}/reactivate")).json()["data"]["state"] == "ACTIVE"
    assert (await c.patch(f"/api/v1/models/{mid}", json={"ownedBy": None})).json()["data"]["ownedBy"] is None
    assert_envelope_error(await c.patch(f"/api/v1/models/{mid}", json={"capabilities": ["telepathy"]}), 400,
                          "VALIDATION_ERROR")
    assert_envelope_error(await c.get("/api/v1/models?state=GONE"), 400, "VALIDATION_ERROR")
    assert_envelope_error(await c.get("/api/v1/models/999"), 404, "NOT_FOUND")


async def test_ip_blacklist(api: Env) -> None:
    c = await as_admin(api)
    r = await c.post("/api/v1/ip-blacklist", json={"cidr": "10.1.0.0/16", "reason": "abuse"})
    assert r.status_code == 201
    entry = r.json()["data"]
    assert_envelope_error(await c.post("/api/v1/ip-blacklist", json={"cidr": "10.1.0.0/16"}), 409, "CONFLICT")
    assert_envelope_error(await c.post("/api/v1/ip-blacklist", json={"cidr": "not-an-ip"}), 400,
                          "VALIDATION_ERROR")
    assert [e["cidr"] for e in (await c.get("/api/v1/ip-blacklist")).json()["data"]] == ["10.1.0.0/16"]
    assert (await c.delete(f"/api/v1/ip-blacklist/{entry['id']}")).status_code == 200
    assert_envelope_error(await c.delete(f"/api/v1/ip-blacklist/{entry['id']}"), 404, "NOT_FOUND")


# --- call log ---------------------------------------------------------------------------------

async def test_call_log_filters_and_paging(api: Env) -> None:
    writer = UsageWriter(api.state.db, api.state.settings)
    for i in range(5):
        writer.record(CallRecord(trace_id=f"trace-{i}", protocol="chat", model="gpt-4o" if i % 2 else "fast",
                                 status=200 if i < 4 else 502, api_key_id=7 if i < 2 else 8, prompt_tokens=i,
                                 completion_tokens=1, created_at=api.clock()))
    await writer.flush()
    c = await as_admin(api)
    page = (await c.get("/api/v1/call-logs?limit=2")).json()["data"]
    assert page["total"] == 5 and len(page["items"]) == 2 and page["limit"] == 2
    assert page["hasMore"] is True and page["totalExact"] is True
    row = page["items"][0]
    assert set(row) >= {"traceId", "model", "status", "promptTokens", "completionTokens", "totalTokens", "keyId"}
    assert (await c.get("/api/v1/call-logs?keyId=7")).json()["data"]["total"] == 2
    assert (await c.get("/api/v1/call-logs?model=gpt-4o")).json()["data"]["total"] == 2
    failed = (await c.get("/api/v1/call-logs?status=502")).json()["data"]
    assert [r["traceId"] for r in failed["items"]] == ["trace-4"]
    one = (await c.get("/api/v1/call-logs?traceId=trace-3")).json()["data"]["items"]
    assert [(r["traceId"], r["totalTokens"]) for r in one] == [("trace-3", 4)]
    assert_envelope_error(await c.get("/api/v1/call-logs?limit=0"), 400, "VALIDATION_ERROR")


async def test_call_log_cursor_pages_match_offset_pages_without_skipping_rows(api: Env) -> None:
    """`beforeId` pages read any depth through the created_at index (no OFFSET scan), ties included."""
    from datetime import timedelta

    from sqlalchemy import event

    writer = UsageWriter(api.state.db, api.state.settings)
    for i in range(23):  # groups of three rows share a timestamp: the cursor must order ties by id
        writer.record(CallRecord(trace_id=f"t-{i}", protocol="chat", model="m", status=200,
                                 created_at=api.clock() + timedelta(seconds=i // 3)))
    await writer.flush()
    c = await as_admin(api)
    by_offset = [r["traceId"] for off in range(0, 23, 5)
                 for r in (await c.get(f"/api/v1/call-logs?limit=5&offset={off}")).json()["data"]["items"]]
    statements: list[tuple[str, object]] = []
    engine = api.state.db.engine.sync_engine
    record = lambda conn, cursor, statement, params, *rest: statements.append((statement, params))  # noqa: E731
    event.listen(engine, "before_cursor_execute", record)
    try:
        by_cursor, cursor, pages = [], None, 0
        while True:
            query = "/api/v1/call-logs?limit=5" + (f"&beforeId={cursor}" if cursor else "")
            page = (await c.get(query)).json()["data"]
            by_cursor += [r["traceId"] for r in page["items"]]
            pages += 1
            assert page["total"] == 23
            cursor = page["nextBeforeId"]
            assert (cursor is not None) == page["hasMore"]
            if cursor is None:
                break
    finally:
        event.remove(engine, "before_cursor_execute", record)
    assert by_cursor == by_offset and len(set(by_cursor)) == 23 and pages == 5
    # A cursor page is a range search on the created_at index, not a scan that skips `offset` rows.
    sql, params = next((s, p) for s, p in reversed(statements) if "ORDER BY" in s and "created_at <=" in s)
    async with api.state.db.engine.connect() as conn:
        plan = " ".join(str(row[-1]) for row in await conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql, params))
    assert "USING INDEX ix_call_log_created_at (created_at<?)" in plan, plan
    assert_envelope_error(await c.get("/api/v1/call-logs?beforeId=999999"), 400, "VALIDATION_ERROR")
