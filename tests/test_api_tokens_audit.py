"""Management API tokens (Bearer, no CSRF, role-scoped, revocable) and the audit log."""

from __future__ import annotations

import hashlib

import httpx
from sqlalchemy import select

from modelgate.storage.models import AdminToken
from tests import test_api_base as base
from tests.test_api_base import ADMIN_PASSWORD, Env, as_admin, assert_envelope_error, assert_short, login

api = base.api


async def _create_token(c: httpx.AsyncClient, name: str = "ci", role: str = "ADMIN", **extra) -> dict:
    r = await c.post("/api/v1/api-tokens", json={"name": name, "role": role, **extra})
    assert r.status_code == 201, r.text
    assert r.headers["cache-control"] == "no-store"
    return r.json()["data"]


def _bearer_client(env: Env, token: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=env.client._transport, base_url="http://testserver",
                             headers={"Authorization": f"Bearer {token}"})


async def test_token_is_shown_once_stored_hashed_and_works_without_csrf(api: Env) -> None:
    api.services.admin_tokens.clock = api.clock
    c = await as_admin(api)
    created = await _create_token(c)
    plaintext = created["plaintext"]
    assert plaintext.startswith("mgt_") and len(plaintext) > 40
    assert created["token"]["prefix"] == plaintext[:12] and created["token"]["lastUsedAt"] is None
    listed = await c.get("/api/v1/api-tokens")
    assert plaintext not in listed.text and listed.json()["data"][0]["name"] == "ci"
    async with api.state.db.session() as s:
        row = (await s.scalars(select(AdminToken))).one()
    assert row.token_hash == hashlib.sha256(plaintext.encode()).hexdigest()

    async with _bearer_client(api, plaintext) as bot:
        # a change with no cookie and no X-CSRF-Token
        r = await bot.post("/api/v1/ip-blacklist", json={"cidr": "10.9.0.0/16", "reason": "ci"})
        assert r.status_code in (200, 201), r.text
        assert (await bot.get("/api/v1/auth/me")).json()["data"]["user"]["username"] == "admin"
        # a token cannot mint more tokens
        assert_short(await bot.post("/api/v1/api-tokens", json={"name": "x"}), 403, "ACCESS_DENIED")
    used = (await c.get("/api/v1/api-tokens")).json()["data"][0]
    assert used["lastUsedAt"] is not None

    # revoked: refused at once
    r = await c.delete(f"/api/v1/api-tokens/{created['token']['id']}")
    assert r.status_code == 200 and r.json()["data"]["revokedAt"] is not None
    async with _bearer_client(api, plaintext) as bot:
        assert_short(await bot.get("/api/v1/channels"), 401, "UNAUTHORIZED")
    assert_envelope_error(await c.delete("/api/v1/api-tokens/999"), 404, "NOT_FOUND")


async def test_token_roles_expiry_and_bad_tokens(api: Env) -> None:
    api.services.admin_tokens.clock = api.clock
    c = await as_admin(api)
    user_token = (await _create_token(c, "reader", "USER"))["plaintext"]
    expiring = (await _create_token(c, "short", "ADMIN", expiresInDays=1))["plaintext"]
    async with _bearer_client(api, user_token) as bot:
        assert_short(await bot.get("/api/v1/channels"), 403, "ACCESS_DENIED")  # USER role
        assert (await bot.get("/api/v1/stats")).status_code == 200
    async with _bearer_client(api, expiring) as bot:
        assert (await bot.get("/api/v1/channels")).status_code == 200
        api.clock.advance(86400 + 1)
        assert_short(await bot.get("/api/v1/channels"), 401, "UNAUTHORIZED")
    for bad in ("mgt_nope", "sk-not-a-token", ""):
        async with _bearer_client(api, bad) as bot:
            assert_short(await bot.get("/api/v1/channels"), 401, "UNAUTHORIZED")
    # a USER cannot create tokens; validation of the body
    c = await as_admin(api)  # the clock moved past the session's 12 hours
    assert_envelope_error(await c.post("/api/v1/api-tokens", json={"name": "x", "role": "ROOT"}), 400,
                          "VALIDATION_ERROR")
    await login(api.client, "alice", base.USER_PASSWORD)
    assert_short(await api.client.post("/api/v1/api-tokens", json={"name": "x"}), 403, "ACCESS_DENIED")


async def test_disabling_the_creator_ends_its_tokens(api: Env) -> None:
    c = await as_admin(api)
    second = await api.services.users.create("ops", "ops-password-1", "ADMIN")
    created = await api.services.admin_tokens.create("ops-ci", "ADMIN", second.id)
    async with _bearer_client(api, created.plaintext) as bot:
        assert (await bot.get("/api/v1/channels")).status_code == 200
        assert (await c.patch(f"/api/v1/users/{second.id}", json={"enabled": False})).status_code == 200
        assert_short(await bot.get("/api/v1/channels"), 401, "UNAUTHORIZED")


async def test_audit_log_records_actions_and_logins(api: Env) -> None:
    r = await api.client.post("/api/v1/auth/login", json={"username": "admin", "password": "wrong"},
                              headers={"x-forwarded-for": "203.0.113.9"})
    assert r.status_code == 401
    c = await as_admin(api)
    r = await c.post("/api/v1/providers", json={"name": "p1", "kind": "mock", "keys": ["sk-secret-upstream-0001"]})
    assert r.status_code in (200, 201), r.text
    pid = r.json()["data"]["id"]
    assert (await c.patch(f"/api/v1/providers/{pid}", json={"baseUrl": "http://x.invalid/v1"})).status_code == 200
    token = (await _create_token(c, "bot"))["plaintext"]
    async with _bearer_client(api, token) as bot:
        assert (await bot.delete(f"/api/v1/providers/{pid}")).status_code == 200

    page = (await c.get("/api/v1/audit-log")).json()["data"]
    rows = page["items"]
    assert "sk-secret-upstream" not in str(rows)  # bodies are never recorded
    actions = [(e["actor"], e["via"], e["action"], e["status"]) for e in reversed(rows)]
    assert actions[0] == ("admin", "login", "POST /auth/login", 401)
    assert actions[1] == ("admin", "login", "POST /auth/login", 200)
    assert actions[2][:3] == ("admin", "session", "POST /providers") and actions[2][3] in (200, 201)
    # the route template names the action, the concrete path its target
    assert actions[3] == ("admin", "session", "PATCH /providers/{provider_id}", 200)
    token_id = (await c.get("/api/v1/api-tokens")).json()["data"][0]["id"]
    deleted = next(e for e in rows if e["via"] == f"token:{token_id}")
    assert deleted["target"] == f"/providers/{pid}" and deleted["action"].startswith("DELETE /providers/")
    assert all(e["createdAt"] and e["traceId"] for e in rows if e["via"] != "login")
    assert all(e["clientIp"] for e in rows)
    # filters and paging
    only_logins = (await c.get("/api/v1/audit-log", params={"action": "login"})).json()["data"]
    assert only_logins["total"] == 2
    assert (await c.get("/api/v1/audit-log", params={"limit": 1})).json()["data"]["total"] == page["total"]
    await login(api.client, "alice", base.USER_PASSWORD)
    assert_short(await api.client.get("/api/v1/audit-log"), 403, "ACCESS_DENIED")
    assert ADMIN_PASSWORD not in str(rows)
