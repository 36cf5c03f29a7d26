"""A key works for the very next call, whether created through the API or by the CLI against a
running server (issue 12 item 9)."""

from __future__ import annotations

import asyncio

import httpx
import orjson
from argon2 import PasswordHasher

from modelgate.auth import passwords
from modelgate.cli import main
from tests.gateway_harness import GatewayHarness, harness_settings

CHAT = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]}
PASSWORD = "admin-password-123"


async def _gateway(tmp_path) -> GatewayHarness:
    # No periodic refresh during the test: only the change itself can make the key known.
    return await GatewayHarness(harness_settings(tmp_path, gateway__cache_refresh_seconds=3600)).start()


async def test_a_key_created_through_the_api_works_for_the_next_call(tmp_path, openai_upstream, monkeypatch):
    # Still argon2id, with parameters light enough for a test suite on 2 cores.
    monkeypatch.setattr(passwords, "_hasher", PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1))
    gateway = await _gateway(tmp_path)
    try:
        wired = await gateway.wire(openai_upstream.base_url, ["gpt-test"])
        await gateway.services.users.create("root", PASSWORD, "ADMIN")
        async with httpx.AsyncClient(base_url=gateway.url, timeout=30) as http:
            login = await http.post("/api/v1/auth/login", json={"username": "root", "password": PASSWORD})
            csrf = {"X-CSRF-Token": login.json()["data"]["csrfToken"]}
            for _ in range(5):
                created = await http.post(f"/api/v1/applications/{wired.app_id}/keys", json={"name": "new"},
                                          headers=csrf)
                assert created.status_code == 201, created.text
                key = created.json()["data"]["plaintext"]
                call = await http.post("/v1/chat/completions", json=CHAT, headers={"authorization": f"Bearer {key}"})
                assert call.status_code == 200, call.text
    finally:
        await gateway.stop()


async def test_a_key_created_by_the_cli_against_a_running_server_works_promptly(tmp_path, openai_upstream,
                                                                                monkeypatch):
    gateway = await _gateway(tmp_path)
    try:
        wired = await gateway.wire(openai_upstream.base_url, ["gpt-test"], app_name="cli-app")
        monkeypatch.setenv("MODELGATE_DATA_DIR", gateway.settings.data_dir)
        monkeypatch.setenv("ENCRYPTION_KEY", gateway.settings.encryption_key)
        for name in ("MODELGATE_CONFIG", "DATABASE_URL", "MODELGATE_ENV", "REDIS_URL"):
            monkeypatch.delenv(name, raising=False)
        out: list[str] = []

        def create() -> int:
            import contextlib
            import io

            buffer = io.StringIO()
            with contextlib.redirect_stdout(buffer):
                rc = main(["--json", "key", "create", "--app", "cli-app", "--name", "from-cli"])
            out.append(buffer.getvalue())
            return rc

        assert await asyncio.to_thread(create) == 0
        key = orjson.loads(out[0])["plaintext"]
        assert wired.key != key
        async with httpx.AsyncClient(base_url=gateway.url) as http:
            for _ in range(100):  # the marker is watched every 0.25 s; the periodic refresh is an hour away
                call = await http.post("/v1/chat/completions", json=CHAT, headers={"authorization": f"Bearer {key}"})
                if call.status_code == 200:
                    break
                await asyncio.sleep(0.1)
            assert call.status_code == 200, call.text
    finally:
        await gateway.stop()
