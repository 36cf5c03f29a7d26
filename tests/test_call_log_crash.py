"""A gateway process killed or stopped mid-load loses no answered call's row (issue 12 items 2-3).

The gateway runs as `modelgate serve` in a subprocess; the test sends calls, counts the answers
(by their X-Trace-Id) and then checks that every answered call has its call-log row once the
next writer on the same data directory has replayed the journal.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

import httpx
import pytest
from sqlalchemy import select

from modelgate.config import Settings
from modelgate.storage.db import Database
from modelgate.storage.models import CallLog
from modelgate.storage.usage_writer import UsageWriter
from tests.fakes.tcp_proxy import TcpProxy
from tests.gateway_harness import GatewayHarness, harness_settings
from tests.test_server import clean_env, free_port

MODELGATE = [sys.executable, "-m", "modelgate.cli", "serve"]


async def _wire(settings: Settings, upstream_url: str) -> str:
    harness = await GatewayHarness(settings).start()
    try:
        return (await harness.wire(upstream_url, ["gpt-test"])).key
    finally:
        await harness.stop()


def _start(settings: Settings, tmp_path, port: int, **env: str) -> subprocess.Popen:
    environ = clean_env(tmp_path, SERVER_PORT=str(port), ENCRYPTION_KEY=settings.encryption_key,
                        LOG_LEVEL="WARNING", **env)
    if settings.database_url:
        environ["DATABASE_URL"] = settings.database_url
    log = open(tmp_path / f"gateway-{port}.log", "ab")
    return subprocess.Popen(MODELGATE, env=environ, stdout=log, stderr=subprocess.STDOUT)


async def _wait_ready(url: str, proc: subprocess.Popen) -> None:
    async with httpx.AsyncClient() as client:
        for _ in range(300):
            if proc.poll() is not None:
                pytest.fail(f"the gateway exited with {proc.returncode}")
            try:
                if (await client.get(f"{url}/healthz", timeout=1)).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.1)
    pytest.fail("the gateway did not start")


class Load:
    """Concurrent chat calls until stopped; `answered` holds the trace ids of complete answers."""

    def __init__(self, url: str, key: str, concurrency: int = 6) -> None:
        self.url, self.key, self.concurrency = url, key, concurrency
        self.answered: set[str] = set()
        self.running = True
        self._tasks: list[asyncio.Task] = []

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._worker()) for _ in range(self.concurrency)]

    async def stop(self) -> None:
        self.running = False
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _worker(self) -> None:
        body = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]}
        async with httpx.AsyncClient(timeout=10) as client:
            while self.running:
                try:
                    resp = await client.post(f"{self.url}/v1/chat/completions", json=body,
                                             headers={"authorization": f"Bearer {self.key}"})
                except httpx.HTTPError:
                    await asyncio.sleep(0.05)
                    continue
                self.answered.add(resp.headers["x-trace-id"])


async def _recorded(settings: Settings, url: str | None = None) -> set[str]:
    """Replay what the dead process left (as its successor does at start), then read the trace ids."""
    db = Database(url or settings.resolved_database_url)
    try:
        writer = UsageWriter(db, settings)
        writer.start()
        await writer.stop()
        async with db.session() as s:
            return set((await s.scalars(select(CallLog.trace_id))).all())
    finally:
        await db.dispose()


async def test_sigkill_mid_load_loses_no_answered_call(tmp_path, openai_upstream):
    settings = harness_settings(tmp_path)
    key = await _wire(settings, openai_upstream.base_url)
    port = free_port()
    # A long flush interval: without the journal, everything answered since the last flush is lost.
    proc = _start(settings, tmp_path, port, USAGE_FLUSH_INTERVAL_SECONDS="30")
    try:
        await _wait_ready(f"http://127.0.0.1:{port}", proc)
        load = Load(f"http://127.0.0.1:{port}", key)
        load.start()
        while len(load.answered) < 150:
            await asyncio.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        await load.stop()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    recorded = await _recorded(settings)
    assert len(load.answered) >= 150
    assert load.answered <= recorded, f"{len(load.answered - recorded)} answered calls have no row"


async def test_sigterm_with_a_partitioned_postgresql_stops_and_loses_nothing(tmp_path, openai_upstream, pg_url):
    proxy = await TcpProxy("127.0.0.1", 5432).start()
    try:
        proxied = pg_url.replace(":5432/", f":{proxy.port}/")
        settings = harness_settings(tmp_path, database_url=proxied)
        key = await _wire(settings, openai_upstream.base_url)
        port = free_port()
        proc = _start(settings, tmp_path, port, USAGE_DB_TIMEOUT_SECONDS="1", DATABASE_TIMEOUT_SECONDS="2",
                      USAGE_SHUTDOWN_FLUSH_SECONDS="3")
        try:
            await _wait_ready(f"http://127.0.0.1:{port}", proc)
            load = Load(f"http://127.0.0.1:{port}", key)
            load.start()
            while len(load.answered) < 50:
                await asyncio.sleep(0.05)
            proxy.blackhole()
            seen = len(load.answered)
            while len(load.answered) < seen + 100:  # calls are still answered during the partition
                await asyncio.sleep(0.05)
            await load.stop()
            started = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            try:
                code = await asyncio.to_thread(proc.wait, 90)
            except subprocess.TimeoutExpired:
                pytest.fail("SIGTERM did not stop the gateway while the database was silent")
            # uvicorn re-raises the signal it caught once it has shut down cleanly
            assert code in (0, -signal.SIGTERM), (tmp_path / f"gateway-{port}.log").read_text()[-3000:]
            # The stated bound (docs/decisions.md): flush limit 3 s + database deadline 1 s + the driver's
            # 2 s close of a cut connection, and 2 s for the process itself.
            assert time.monotonic() - started < 8
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        proxy.restore()
        recorded = await _recorded(settings, pg_url)
        assert load.answered <= recorded, f"{len(load.answered - recorded)} answered calls have no row"
    finally:
        await proxy.close()


@pytest.fixture(autouse=True)
def _no_inherited_settings(monkeypatch):
    for name in list(os.environ):
        if name.startswith(("USAGE_", "GATEWAY_")):
            monkeypatch.delenv(name)
    yield

