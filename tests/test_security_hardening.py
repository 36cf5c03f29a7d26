"""Security headers, the script-free API docs page and /metrics authentication (issue 12 item 9)."""

from __future__ import annotations

import httpx

from tests.gateway_harness import GatewayHarness, harness_settings

SECURITY_HEADERS = ("content-security-policy", "x-frame-options", "x-content-type-options", "referrer-policy")


def _assert_security_headers(resp: httpx.Response) -> None:
    for name in SECURITY_HEADERS:
        assert resp.headers.get(name), f"{resp.request.url.path} lacks {name}"
    assert "frame-ancestors 'none'" in resp.headers["content-security-policy"]
    assert resp.headers["x-frame-options"] == "DENY" and resp.headers["x-content-type-options"] == "nosniff"


async def test_management_answers_carry_security_headers(gateway):
    async with httpx.AsyncClient(base_url=gateway.url) as http:
        for path in ("/api/v1/auth/me", "/api/v1/openapi.json", "/api/v1/docs", "/api/v1/no-such-thing", "/nowhere"):
            _assert_security_headers(await http.get(path))
        _assert_security_headers(await http.post("/api/v1/auth/login", json={"username": "x", "password": "y"}))


async def test_the_docs_page_needs_no_script(gateway):
    async with httpx.AsyncClient(base_url=gateway.url) as http:
        page = await http.get("/api/v1/docs")
        doc = (await http.get("/api/v1/openapi.json")).json()
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "<script" not in page.text.lower() and "cdn" not in page.text.lower()
    assert "/api/v1/openapi.json" in page.text
    for path in ("/api/v1/channels/{channel_id}/health-check", "/api/v1/resilience/events", "/api/v1/auth/login"):
        assert path.replace("{", "{") in page.text
    assert len([p for p in doc["paths"]]) > 10


async def test_metrics_can_require_a_token(tmp_path):
    settings = harness_settings(tmp_path, metrics_token="scrape-secret-123")
    harness = await GatewayHarness(settings).start()
    try:
        async with httpx.AsyncClient(base_url=harness.url) as http:
            refused = await http.get("/metrics")
            assert refused.status_code == 401 and refused.json()["code"] == "UNAUTHORIZED"
            wrong = await http.get("/metrics", headers={"authorization": "Bearer nope"})
            assert wrong.status_code == 401
            ok = await http.get("/metrics", headers={"authorization": "Bearer scrape-secret-123"})
            assert ok.status_code == 200 and "modelgate_calls_total" in ok.text
    finally:
        await harness.stop()


async def test_metrics_are_open_without_a_token(gateway):
    async with httpx.AsyncClient(base_url=gateway.url) as http:
        assert (await http.get("/metrics")).status_code == 200
