"""Running the gateway behind a load balancer: health endpoints, graceful drain, the encryption key."""

from __future__ import annotations

import asyncio
import base64
import os

import httpx
import pytest
from sqlalchemy import select

from modelgate.auth.crypto import ConfigError
from modelgate.cli import main
from modelgate.server import prepare, shared_state_warning
from modelgate.storage.models import CallLog
from tests.gateway_harness import GatewayHarness, harness_settings


def new_key() -> str:
    return base64.b64encode(os.urandom(32)).decode()


async def test_healthz_and_readyz(gateway):
    async with httpx.AsyncClient(base_url=gateway.url) as http:
        live = await http.get("/healthz")
        assert live.status_code == 200 and live.json() == {"status": "ok"}
        ready = await http.get("/readyz")
        assert ready.status_code == 200
        assert ready.json() == {"status": "ready", "checks": {"database": "ok", "snapshot": "loaded",
                                                              "draining": "no"}}
        gateway.runtime.draining = True
        try:
            draining = await http.get("/readyz")
        finally:
            gateway.runtime.draining = False
        assert draining.status_code == 503
        assert draining.json()["status"] == "unavailable" and draining.json()["checks"]["draining"] == "yes"


async def test_readyz_reports_an_unreachable_database(gateway):
    from sqlalchemy.ext.asyncio import create_async_engine

    working = gateway.runtime.db.engine
    gateway.runtime.db.engine = create_async_engine("sqlite+aiosqlite:////nonexistent-dir/x.db")
    try:
        async with httpx.AsyncClient(base_url=gateway.url) as http:
            resp = await http.get("/readyz")
    finally:
        await gateway.runtime.db.engine.dispose()
        gateway.runtime.db.engine = working
    assert resp.status_code == 503
    assert resp.json()["checks"]["database"].startswith("unreachable")


async def test_readyz_reports_redis_away_but_stays_ready(tmp_path):
    # Nothing listens on port 1: Redis is configured but unreachable.
    settings = harness_settings(tmp_path, redis_url="redis://127.0.0.1:1/0", redis_timeout_seconds=0.1)
    harness = await GatewayHarness(settings).start()
    try:
        async with httpx.AsyncClient(base_url=harness.url) as http:
            resp = await http.get("/readyz")
        assert resp.status_code == 200
        assert resp.json()["checks"]["redis"] == "unreachable: limits and breakers are per instance"
    finally:
        await harness.stop()


async def test_shutdown_lets_an_in_flight_stream_finish_and_logs_it(tmp_path, openai_upstream):
    settings = harness_settings(tmp_path)
    settings.server.drain_seconds = 20
    harness = await GatewayHarness(settings).start()
    wired = await harness.wire(openai_upstream.base_url, ["gpt-test"])
    openai_upstream.chunk_delay = 0.2
    async with httpx.AsyncClient(base_url=harness.url, timeout=30) as http:
        async with http.stream("POST", "/v1/chat/completions", headers={"authorization": f"Bearer {wired.key}"},
                               json={"model": "gpt-test", "stream": True,
                                     "messages": [{"role": "user", "content": "one two three four"}]}) as resp:
            assert resp.status_code == 200
            lines = resp.aiter_lines()
            first = await anext(lines)
            assert first.startswith("data: ")
            stopping = asyncio.create_task(harness.stop())  # SIGTERM's path: stop accepting, then drain
            await asyncio.sleep(0.1)
            with pytest.raises(httpx.ConnectError):  # no new connections while draining
                await httpx.AsyncClient().get(f"{harness.url}/healthz")
            rest = [line async for line in lines]
    await stopping
    assert "data: [DONE]" in rest, "the stream ran to its end"
    # The call-log row was flushed before exit: read it from the database file after shutdown.
    from modelgate.storage.db import Database

    db = Database.from_settings(settings)
    try:
        async with db.session() as s:
            rows = (await s.scalars(select(CallLog))).all()
    finally:
        await db.dispose()
    assert [(r.status, r.stream) for r in rows] == [(200, True)]


async def test_start_up_refuses_keys_it_cannot_decrypt(tmp_path, openai_upstream):
    settings = harness_settings(tmp_path)
    harness = await GatewayHarness(settings).start()
    await harness.wire(openai_upstream.base_url, ["gpt-test"])
    await harness.stop()
    settings.encryption_key = new_key()  # lost or changed
    with pytest.raises(ConfigError) as err:
        await prepare(settings)
    assert str(err.value).startswith("ENCRYPTION_KEY_MISMATCH: 1 stored upstream key(s)")
    runtime = GatewayHarness(settings).app.runtime
    try:
        with pytest.raises(ConfigError, match="ENCRYPTION_KEY_MISMATCH"):  # a worker started directly refuses too
            await runtime.start()
    finally:
        await runtime.stop()


async def test_local_mode_without_its_key_file_refuses_instead_of_generating_one(tmp_path, openai_upstream):
    settings = harness_settings(tmp_path, encryption_key=None)
    harness = await GatewayHarness(settings).start()
    await harness.wire(openai_upstream.base_url, ["gpt-test"])
    await harness.stop()
    key_file = tmp_path / "data" / "encryption.key"
    key_file.unlink()
    with pytest.raises(ConfigError, match="ENCRYPTION_KEY_MISSING: the database holds encrypted upstream keys"):
        await prepare(settings)
    assert not key_file.exists()


def test_rotate_key_reseals_every_upstream_key(tmp_path, monkeypatch, capsys):
    old = new_key()
    for name in ("MODELGATE_CONFIG", "DATABASE_URL", "MODELGATE_ENV"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MODELGATE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("ENCRYPTION_KEY", old)
    assert main(["init"]) == 0
    assert main(["provider", "add", "--name", "p", "--kind", "openai", "--key", "sk-one", "--key", "sk-two"]) == 0
    new = new_key()
    monkeypatch.setenv("NEW_ENCRYPTION_KEY", new)
    capsys.readouterr()
    assert main(["rotate-key", "--new-key-env", "NEW_ENCRYPTION_KEY"]) == 0
    assert "Re-encrypted 2 upstream key(s)" in capsys.readouterr().out

    settings = harness_settings(tmp_path, encryption_key=old)
    with pytest.raises(ConfigError, match="ENCRYPTION_KEY_MISMATCH: 2 stored"):
        asyncio.run(prepare(settings))
    settings.encryption_key = new
    asyncio.run(prepare(settings))  # opens every key
    monkeypatch.setenv("ENCRYPTION_KEY", new)
    assert main(["rotate-key", "--new-key-env", "UNSET_VARIABLE"]) == 1


def test_several_workers_without_redis_warn_that_limits_are_per_worker(tmp_path):
    settings = harness_settings(tmp_path)
    assert shared_state_warning(settings) is None
    settings.server.workers = 4
    warning = shared_state_warning(settings)
    assert warning is not None and "per worker" in warning and "4 times its rate" in warning
    settings.redis_url = "redis://127.0.0.1:6379/0"
    assert shared_state_warning(settings) is None


@pytest.mark.parametrize("workers", [1, 2])
def test_sigterm_reports_draining_while_still_accepting_then_stops(tmp_path, workers):
    """A load balancer must see /readyz fail before the listener closes (SERVER_DRAIN_NOTICE_SECONDS)."""
    import signal
    import subprocess
    import sys
    import time

    from tests.test_server import clean_env, free_port

    port = free_port()
    env = clean_env(tmp_path, SERVER_PORT=str(port), SERVER_WORKERS=str(workers), SERVER_DRAIN_NOTICE_SECONDS="3",
                    LOG_LEVEL="WARNING")
    proc = subprocess.Popen([sys.executable, "-m", "modelgate.cli", "serve"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            assert time.monotonic() < deadline, "the gateway did not become ready"
            try:
                if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        time.sleep(0.3)
        for _ in range(2 * workers):  # new connections: every worker answers, and says it drains
            ready = httpx.get(f"{url}/readyz", timeout=2)
            assert ready.status_code == 503 and ready.json()["checks"]["draining"] == "yes"
            assert httpx.get(f"{url}/healthz", timeout=2).status_code == 200
        assert time.monotonic() - signalled < 3, "checked within the notice"
        assert proc.wait(timeout=30) in (0, -signal.SIGTERM)
        assert time.monotonic() - signalled >= 3, "the listener stayed open for the notice"
    finally:
        if proc.poll() is None:
            proc.kill()
