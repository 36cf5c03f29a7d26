"""Real `modelgate serve` processes (one of them with 2 workers) on one throw-away PostgreSQL
database and one Redis key prefix: one key's bucket for all of them, one model probe per period.

Skips when PostgreSQL (127.0.0.1:5432, trust auth, db `test`) or Redis (127.0.0.1:6379) is absent.
"""

from __future__ import annotations

import asyncio
import base64
import os
import socket
import subprocess
import sys
import time
import uuid

import httpx
import pytest

from modelgate.auth.crypto import SecretBox, derive_key
from modelgate.config import Settings
from modelgate.services import Services
from modelgate.storage.db import Database
from tests.redis_support import REDIS_URL, drop_prefix, require_redis, unique_prefix

PG = "postgresql://postgres@127.0.0.1:5432"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
async def deployment(tmp_path):
    """Environment of one deployment: fresh database, fresh Redis prefix, one ENCRYPTION_KEY."""
    import asyncpg

    await require_redis()
    try:
        conn = await asyncpg.connect(f"{PG}/test", timeout=3)
    except (OSError, asyncpg.PostgresError) as exc:
        pytest.skip(f"PostgreSQL at 127.0.0.1:5432 is not reachable: {exc}")
    database = f"modelgate_{uuid.uuid4().hex[:12]}"
    await conn.execute(f"CREATE DATABASE {database}")
    prefix = unique_prefix()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GATEWAY_", "SERVER_", "REDIS_", "MODELGATE_")) and k != "DATABASE_URL"}
    env.update({
        "DATABASE_URL": f"postgresql+asyncpg://postgres@127.0.0.1:5432/{database}",
        "REDIS_URL": REDIS_URL, "REDIS_PREFIX": prefix,
        "ENCRYPTION_KEY": base64.b64encode(os.urandom(32)).decode(),
        "MODELGATE_DATA_DIR": str(tmp_path / "data"), "SERVER_HOST": "127.0.0.1", "LOG_LEVEL": "WARNING",
        "GATEWAY_LIFECYCLE_PROBE_INTERVAL_SECONDS": "1",
    })
    procs: list[subprocess.Popen] = []
    try:
        init = subprocess.run([sys.executable, "-m", "modelgate.cli", "init"], env=env, capture_output=True,
                              text=True, timeout=120)
        assert init.returncode == 0, init.stderr
        yield env, procs
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                proc.kill()
        await drop_prefix(prefix)
        await conn.execute(f"DROP DATABASE {database} WITH (FORCE)")
        await conn.close()


async def configure(env: dict[str, str], upstream_url: str, capacity: float) -> str:
    settings = Settings(database_url=env["DATABASE_URL"])
    db = Database.from_settings(settings)
    try:
        svc = Services(db, SecretBox(derive_key(env["ENCRYPTION_KEY"])), settings)
        provider = await svc.providers.create("p", "openai-compatible", base_url=upstream_url, keys=["up-key-1"])
        channel = await svc.channels.create("c", provider.id, models=["gpt-test"])
        app = await svc.applications.create("a")
        await svc.applications.authorize_channel(app.id, channel.id)
        created = await svc.api_keys.create(app.id, rate_capacity=capacity, rate_refill=0.001)
        return created.plaintext
    finally:
        await db.dispose()


async def serve(env: dict[str, str], procs: list[subprocess.Popen], workers: int) -> str:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "modelgate.cli", "serve"],
                            env={**env, "SERVER_PORT": str(port), "SERVER_WORKERS": str(workers)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs.append(proc)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    async with httpx.AsyncClient() as http:
        while time.monotonic() < deadline:
            assert proc.poll() is None, "the gateway process exited"
            try:
                if (await http.get(f"{url}/readyz", timeout=1)).status_code == 200:
                    return url
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.2)
    pytest.fail("the gateway process did not become ready")


async def call(url: str, key: str) -> int:
    # A new connection per call, so the 2-worker process spreads calls over its workers.
    async with httpx.AsyncClient(timeout=30) as http:
        resp = await http.post(f"{url}/v1/chat/completions", headers={"authorization": f"Bearer {key}"},
                               json={"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]})
        return resp.status_code


async def test_processes_and_workers_share_one_bucket_and_one_probe(deployment, openai_upstream):
    env, procs = deployment
    key = await configure(env, openai_upstream.base_url, capacity=6)
    urls = [await serve(env, procs, workers=2), await serve(env, procs, workers=1)]
    probes_started = time.time()
    statuses = [await call(urls[i % 2], key) for i in range(16)]
    assert sorted(statuses) == [200] * 6 + [429] * 10, statuses

    # Three worker processes probe every second; the lease lets one of them run each 1 s slot.
    before = sum(1 for r in openai_upstream.requests if r.path.endswith("/models"))
    await asyncio.sleep(4.0)
    probes = sum(1 for r in openai_upstream.requests if r.path.endswith("/models")) - before
    assert 1 <= probes <= 5, f"{probes} model-list probes in 4 s from 3 worker processes"
    assert time.time() - probes_started < 120


async def test_without_redis_postgresql_lets_one_process_run_the_probe(tmp_path, pg_url, openai_upstream):
    """No REDIS_URL: a PostgreSQL advisory lock picks one leader; when it stops, another takes over."""
    from tests.gateway_harness import GatewayHarness, harness_settings

    settings = harness_settings(tmp_path, database_url=pg_url)
    settings.gateway.lifecycle.probe_interval_seconds = 0.5
    first = await GatewayHarness(settings).start()
    second = await GatewayHarness(settings).start()
    try:
        await first.wire(openai_upstream.base_url, ["gpt-test"])
        await second.runtime.refresh()

        def probes() -> int:
            return sum(1 for r in openai_upstream.requests if r.path.endswith("/models"))

        before = probes()
        await asyncio.sleep(2.0)  # 4 passes in each of the two processes
        assert 1 <= probes() - before <= 5, f"{probes() - before} probes in 2 s at 0.5 s from 2 processes"
        leaders = [h for h in (first, second) if h.runtime.schedule.leading]
        assert len(leaders) == 1
        follower = second if leaders[0] is first else first
        await leaders[0].stop()  # closing its connection releases the lock
        for _ in range(40):
            if follower.runtime.schedule.leading:
                break
            await asyncio.sleep(0.1)
        assert follower.runtime.schedule.leading, "the remaining process took the scheduled work over"
        before = probes()
        await asyncio.sleep(1.2)
        assert probes() > before
    finally:
        for harness in (first, second):
            if harness.server is not None and not harness.server.should_exit:
                await harness.stop()
