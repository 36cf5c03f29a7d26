"""Management API: shared fixtures, the envelope, trace ids, auth and generic errors.

Other tests/test_api_*.py files import the fixtures from here.
"""

from __future__ import annotations

import logging
import os
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from argon2 import PasswordHasher
from fastapi import FastAPI

from modelgate.api import ManagementState, create_management_app
from modelgate.auth import passwords
from modelgate.catalog import load_catalog
from modelgate.routing.breaker import BreakerRegistry
from modelgate.services import Services

ADMIN_PASSWORD = "admin-password-1"
USER_PASSWORD = "user-password-1"


class WallClock:
    """A settable UTC wall clock for sessions, throttling and "today"."""

    def __init__(self) -> None:
        self.now = datetime(2026, 5, 20, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


class MonoClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def monotonic(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.t += seconds


@dataclass
class Env:
    client: httpx.AsyncClient
    state: ManagementState
    services: Services
    clock: WallClock
    mono: MonoClock
    admin_id: int
    user_id: int
    health_calls: list[int] = field(default_factory=list)


_CATALOG = load_catalog(None) if "MODELGATE_CATALOG_FILE" not in os.environ else None


@pytest.fixture
async def api(database, secret_box, settings, monkeypatch) -> Env:
    # Still argon2id, with parameters light enough for a test suite on 2 cores.
    monkeypatch.setattr(passwords, "_hasher", PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1))
    services = Services(database, secret_box, settings)
    admin = await services.users.create("admin", ADMIN_PASSWORD, "ADMIN")
    user = await services.users.create("alice", USER_PASSWORD, "USER")
    clock = WallClock()
    mono = MonoClock()
    state = ManagementState(
        db=database, services=services, settings=settings, catalog=_CATALOG or load_catalog(None),
        breakers=BreakerRegistry(settings.gateway.breaker, mono), clock=clock,
    )
    outer = FastAPI()
    outer.mount("/api/v1", create_management_app(state))
    transport = httpx.ASGITransport(app=outer)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        yield Env(client, state, services, clock, mono, admin.id, user.id)


async def login(client: httpx.AsyncClient, username: str, password: str) -> dict:
    r = await client.post("/api/v1/auth/login", json={"username": username, "password": password})
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    client.headers["X-CSRF-Token"] = data["csrfToken"]
    return data


async def as_admin(env: Env) -> httpx.AsyncClient:
    await login(env.client, "admin", ADMIN_PASSWORD)
    return env.client


async def as_user(env: Env) -> httpx.AsyncClient:
    await login(env.client, "alice", USER_PASSWORD)
    return env.client


def assert_envelope_error(r: httpx.Response, status: int, code: str) -> None:
    assert r.status_code == status, r.text
    body = r.json()
    assert body["success"] is False
    assert body["error"]["code"] == code
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert body["traceId"] == r.headers["x-trace-id"]
    uuid.UUID(body["traceId"])
    assert body["timestamp"].endswith("Z")
    datetime.fromisoformat(body["timestamp"])


def assert_short(r: httpx.Response, status: int, code: str) -> None:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"code", "message"}
    assert body["code"] == code


# --- envelope and trace ids -------------------------------------------------------------------

async def test_success_envelope_has_trace_and_timestamp(api: Env) -> None:
    c = await as_admin(api)
    r = await c.get("/api/v1/auth/me")
    body = r.json()
    assert r.status_code == 200
    assert body["success"] is True
    assert body["data"]["user"]["username"] == "admin"
    assert body["data"]["user"]["role"] == "ADMIN"
    assert body["traceId"] == r.headers["x-trace-id"]
    uuid.UUID(body["traceId"])
    other = await c.get("/api/v1/auth/me")
    assert other.json()["traceId"] != body["traceId"]


async def test_unknown_path_is_404_envelope(api: Env) -> None:
    r = await api.client.get("/api/v1/no/such/thing")
    assert_envelope_error(r, 404, "NOT_FOUND")


async def test_wrong_method_is_405_envelope(api: Env) -> None:
    c = await as_admin(api)
    r = await c.delete("/api/v1/stats")
    assert_envelope_error(r, 405, "METHOD_NOT_ALLOWED")


async def test_unexpected_exception_is_500_with_logged_trace(api: Env, monkeypatch, caplog) -> None:
    c = await as_admin(api)

    async def boom(*args, **kwargs):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(api.services.users, "list", boom)
    with caplog.at_level(logging.ERROR, logger="modelgate.api"):
        r = await c.get("/api/v1/users")
    assert_envelope_error(r, 500, "INTERNAL_ERROR")
    assert "kaboom" not in r.text
    assert any(r.headers["x-trace-id"] in rec.getMessage() for rec in caplog.records)


async def test_body_validation_is_400_validation_error(api: Env) -> None:
    c = await as_admin(api)
    r = await c.post("/api/v1/users", json={"username": "bob"})
    assert_envelope_error(r, 400, "VALIDATION_ERROR")
    r = await c.post("/api/v1/users", content=b"{not json", headers={"content-type": "application/json"})
    assert_envelope_error(r, 400, "VALIDATION_ERROR")


async def test_openapi_document_and_docs(api: Env) -> None:
    r = await api.client.get("/api/v1/openapi.json")
    assert r.status_code == 200
    doc = r.json()
    paths = doc["paths"]
    for path in ("/plan-catalogs/models", "/channels/{channel_id}/health-check", "/resilience/events",
                 "/stats/trend", "/stats/model-usage", "/auth/login", "/applications/{app_id}/keys"):
        assert path in paths
    assert doc["servers"] == [{"url": "/api/v1"}]
    assert {t["name"] for t in doc["tags"]} >= {"auth", "stats", "channels", "plan-catalog"}
    docs = await api.client.get("/api/v1/docs")
    assert docs.status_code == 200 and "/api/v1/openapi.json" in docs.text


# --- sessions ---------------------------------------------------------------------------------

async def test_no_session_is_401_short_body(api: Env) -> None:
    for path in ("/api/v1/stats", "/api/v1/plan-catalogs", "/api/v1/channels", "/api/v1/auth/me"):
        assert_short(await api.client.get(path), 401, "UNAUTHORIZED")
    api.client.cookies.set("mg_session", "forged-token")
    assert_short(await api.client.get("/api/v1/stats"), 401, "UNAUTHORIZED")


async def test_login_sets_secure_cookie_and_stores_only_hash(api: Env) -> None:
    r = await api.client.post("/api/v1/auth/login", json={"username": "admin", "password": ADMIN_PASSWORD})
    assert r.status_code == 200
    cookie = r.headers["set-cookie"]
    assert cookie.startswith("mg_session=")
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")
    assert "Path=/" in cookie
    token = r.cookies["mg_session"]
    from sqlalchemy import select

    from modelgate.services.sessions import token_hash
    from modelgate.storage.models import LoginSession

    async with api.state.db.session() as s:
        ids = (await s.scalars(select(LoginSession.id))).all()
    assert ids == [token_hash(token)]


async def test_secure_flag_in_production(api: Env) -> None:
    api.state.settings.env = "production"
    r = await api.client.post("/api/v1/auth/login", json={"username": "admin", "password": ADMIN_PASSWORD})
    assert "Secure" in r.headers["set-cookie"]


async def test_wrong_password_is_401(api: Env) -> None:
    r = await api.client.post("/api/v1/auth/login", json={"username": "admin", "password": "nope-nope"})
    assert_short(r, 401, "UNAUTHORIZED")
    r = await api.client.post("/api/v1/auth/login", json={"username": "ghost", "password": "nope-nope"})
    assert_short(r, 401, "UNAUTHORIZED")


async def test_session_expires_after_ttl(api: Env) -> None:
    c = await as_admin(api)
    api.clock.advance(api.state.session_ttl_seconds - 60)
    assert (await c.get("/api/v1/auth/me")).status_code == 200
    api.clock.advance(120)
    assert_short(await c.get("/api/v1/auth/me"), 401, "UNAUTHORIZED")


async def test_logout_ends_session(api: Env) -> None:
    c = await as_admin(api)
    token = c.cookies["mg_session"]
    r = await c.post("/api/v1/auth/logout")
    assert r.status_code == 200 and r.json()["success"] is True
    c.cookies.set("mg_session", token)  # replaying the old cookie does not work
    assert_short(await c.get("/api/v1/auth/me"), 401, "UNAUTHORIZED")


async def test_csrf_required_on_state_changes(api: Env) -> None:
    c = await as_admin(api)
    token = c.headers.pop("X-CSRF-Token")
    r = await c.post("/api/v1/ip-blacklist", json={"cidr": "10.0.0.1"})
    assert_short(r, 403, "ACCESS_DENIED")
    r = await c.post("/api/v1/ip-blacklist", json={"cidr": "10.0.0.1"}, headers={"X-CSRF-Token": "wrong"})
    assert_short(r, 403, "ACCESS_DENIED")
    assert (await c.get("/api/v1/ip-blacklist")).json()["data"] == []  # nothing was changed
    r = await c.post("/api/v1/ip-blacklist", json={"cidr": "10.0.0.1"}, headers={"X-CSRF-Token": token})
    assert r.status_code == 201


async def test_login_throttle_locks_then_releases(api: Env) -> None:
    bad = {"username": "admin", "password": "wrong-password"}
    for _ in range(api.state.login_max_failures):
        assert (await api.client.post("/api/v1/auth/login", json=bad)).status_code == 401
    good = {"username": "admin", "password": ADMIN_PASSWORD}
    r = await api.client.post("/api/v1/auth/login", json=good)
    assert r.status_code == 429
    assert r.json() == {"error": {"code": "RATE_LIMIT_EXCEEDED", "message": r.json()["error"]["message"]}}
    assert int(r.headers["retry-after"]) > 0
    # Another username from the same address is not locked.
    assert (await api.client.post("/api/v1/auth/login",
                                  json={"username": "alice", "password": USER_PASSWORD})).status_code == 200
    api.clock.advance(api.state.login_lock_seconds + 1)
    assert (await api.client.post("/api/v1/auth/login", json=good)).status_code == 200


async def test_password_change_ends_other_sessions(api: Env) -> None:
    other = httpx.AsyncClient(transport=api.client._transport, base_url="http://testserver")
    async with other:
        await login(other, "alice", USER_PASSWORD)
        c = await as_user(api)
        r = await c.post("/api/v1/auth/password",
                         json={"currentPassword": "wrong", "newPassword": "another-password"})
        assert_envelope_error(r, 400, "VALIDATION_ERROR")
        r = await c.post("/api/v1/auth/password",
                         json={"currentPassword": USER_PASSWORD, "newPassword": "another-password"})
        assert r.status_code == 200
        assert (await c.get("/api/v1/auth/me")).status_code == 200
        assert_short(await other.get("/api/v1/auth/me"), 401, "UNAUTHORIZED")


# --- roles ------------------------------------------------------------------------------------

ADMIN_ONLY = [
    ("GET", "/api/v1/users"), ("POST", "/api/v1/users"), ("GET", "/api/v1/providers"),
    ("GET", "/api/v1/providers/kinds"), ("POST", "/api/v1/providers"), ("GET", "/api/v1/channels"),
    ("POST", "/api/v1/channels"), ("POST", "/api/v1/channels/1/health-check"),
    ("POST", "/api/v1/channels/1/breaker/recover"), ("GET", "/api/v1/models"), ("PATCH", "/api/v1/models/1"),
    ("GET", "/api/v1/ip-blacklist"), ("POST", "/api/v1/ip-blacklist"), ("GET", "/api/v1/resilience/events"),
    ("PUT", "/api/v1/applications/1/channels"),
]


@pytest.mark.parametrize(("method", "path"), ADMIN_ONLY)
async def test_user_role_gets_403_on_admin_endpoints(api: Env, method: str, path: str) -> None:
    c = await as_user(api)
    r = await c.request(method, path, json={})
    assert_short(r, 403, "ACCESS_DENIED")


async def test_user_role_may_read_catalog_and_stats(api: Env) -> None:
    c = await as_user(api)
    for path in ("/api/v1/plan-catalogs", "/api/v1/plan-catalogs/providers", "/api/v1/stats",
                 "/api/v1/stats/trend?days=3", "/api/v1/stats/model-usage?limit=3", "/api/v1/call-logs"):
        assert (await c.get(path)).status_code == 200, path


async def test_login_throttle_counts_failures_per_address_whatever_the_usernames(api: Env) -> None:
    """A spray of random usernames from one address is throttled too (issue 12 item 8)."""
    for i in range(api.state.login_ip_max_failures):
        r = await api.client.post("/api/v1/auth/login", json={"username": f"guess-{i}", "password": "wrong-pass"})
        assert r.status_code == 401
    r = await api.client.post("/api/v1/auth/login", json={"username": "another-guess", "password": "wrong-pass"})
    assert r.status_code == 429 and int(r.headers["retry-after"]) > 0
    r = await api.client.post("/api/v1/auth/login", json={"username": "admin", "password": ADMIN_PASSWORD})
    assert r.status_code == 429, "the address is locked for every username"
    api.clock.advance(api.state.login_lock_seconds + 1)
    assert (await api.client.post("/api/v1/auth/login",
                                  json={"username": "admin", "password": ADMIN_PASSWORD})).status_code == 200


async def test_password_verification_runs_off_the_event_loop(api: Env, monkeypatch) -> None:
    """argon2 takes tens of milliseconds of CPU: on the event loop it would stall every inference call."""
    import threading

    threads: list[threading.Thread] = []
    real = passwords.verify_password

    def recording(password_hash: str, password: str) -> bool:
        threads.append(threading.current_thread())
        return real(password_hash, password)

    monkeypatch.setattr(passwords, "verify_password", recording)
    assert (await api.client.post("/api/v1/auth/login",
                                  json={"username": "admin", "password": ADMIN_PASSWORD})).status_code == 200
    assert (await api.client.post("/api/v1/auth/login",
                                  json={"username": "nobody", "password": "wrong-pass"})).status_code == 401
    assert len(threads) == 2 and all(t is not threading.main_thread() for t in threads)
