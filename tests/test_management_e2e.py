"""The management API as mounted in the real gateway, driven over HTTP with a login session."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import AsyncIterator

import httpx
import pytest

from tests.gateway_harness import GatewayHarness, harness_settings


@asynccontextmanager
async def admin_session(gateway) -> AsyncIterator[httpx.AsyncClient]:
    await gateway.services.users.create("ops", "ops-password-123", role="ADMIN")
    async with httpx.AsyncClient(base_url=gateway.url) as http:
        resp = await http.post("/api/v1/auth/login", json={"username": "ops", "password": "ops-password-123"})
        assert resp.status_code == 200 and "mg_session" in resp.cookies
        http.headers["x-csrf-token"] = resp.json()["data"]["csrfToken"]
        yield http


async def test_health_check_reports_latency_and_upstream_errors(gateway, openai_upstream):
    good = await gateway.wire(openai_upstream.base_url, ["gpt-test"])
    bad = await gateway.wire(openai_upstream.base_url, ["gpt-other"], name="bad", upstream_keys=("wrong-key",))
    async with admin_session(gateway) as http:
        resp = await http.post(f"/api/v1/channels/{good.channel_ids[0]}/health-check")
        body = resp.json()
        assert resp.status_code == 200 and body["success"] is True
        assert body["data"]["ok"] is True and body["data"]["latencyMs"] > 0
        assert openai_upstream.last.path == "/v1/models"
        assert openai_upstream.last.headers["authorization"] == "Bearer up-key-1"
        resp = await http.post(f"/api/v1/channels/{bad.channel_ids[0]}/health-check")
        data = resp.json()["data"]
        assert data["ok"] is False and data["errorType"] == "AUTHENTICATION_ERROR"
        assert "wrong-key" not in resp.text
        resp = await http.post("/api/v1/channels/9999/health-check")
        assert resp.status_code == 404 and resp.json()["error"]["code"] == "NOT_FOUND"


async def test_failover_is_visible_in_resilience_events_and_stats(tmp_path, openai_upstream):
    settings = harness_settings(tmp_path)
    settings.gateway.retry.upstream_error.max_retries = 0
    gateway = await GatewayHarness(settings).start()
    try:
        primary = await gateway.wire(openai_upstream.base_url, ["gpt-test"], name="primary", priority=0,
                                     upstream_keys=("wrong-key",))
        backup = await gateway.services.channels.create("backup", (await gateway.services.providers.create(
            "backup-provider", "openai-compatible", base_url=openai_upstream.base_url, keys=["up-key-1"])).id,
            models=["gpt-test"], priority=1)
        await gateway.services.applications.authorize_channel(primary.app_id, backup.id)
        await gateway.runtime.refresh()
        async with httpx.AsyncClient() as client:
            resp = await client.post(f"{gateway.url}/v1/chat/completions",
                                     headers={"authorization": f"Bearer {primary.key}"},
                                     json={"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]})
        assert resp.status_code == 200
        trace_id = resp.headers["x-trace-id"]
        await gateway.runtime.writer.flush()
        async with admin_session(gateway) as http:
            events = (await http.get("/api/v1/resilience/events", params={"type": "FAILOVER"})).json()["data"]
            assert [(e["type"], e["traceId"], e["channelId"], e["errorType"]) for e in events["items"]] == [
                ("FAILOVER", trace_id, primary.channel_ids[0], "AUTHENTICATION_ERROR")]
            stats = (await http.get("/api/v1/stats")).json()["data"]
            assert (stats["requestCount"], stats["successCount"], stats["totalTokens"]) == (1, 1, 3)
            calls = (await http.get("/api/v1/call-logs", params={"traceId": trace_id})).json()["data"]
            (row,) = calls["items"]
            assert (row["channelId"], row["attempts"], row["status"]) == (backup.id, 2, 200)
    finally:
        await gateway.stop()


@pytest.mark.parametrize("path", ["/api/v1/stats", "/api/v1/channels", "/api/v1/plan-catalogs"])
async def test_management_needs_a_session(gateway, path):
    async with httpx.AsyncClient(base_url=gateway.url) as http:
        resp = await http.get(path)
    assert resp.status_code == 401 and resp.json()["code"] == "UNAUTHORIZED"
