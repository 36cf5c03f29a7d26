"""The `modelgate serve` process: production key check, port setting, first-start admin, storage backends."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid

import httpx
import orjson
import pytest
from openai import AsyncOpenAI
from sqlalchemy import select

from modelgate.storage.models import CallLog
from tests.gateway_harness import GatewayHarness, harness_settings

MODELGATE = [sys.executable, "-m", "modelgate.cli"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env(tmp_path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ENCRYPTION_KEY", "MODELGATE_ENV", "DATABASE_URL")}
    env.update({"MODELGATE_DATA_DIR": str(tmp_path / "data"), "SERVER_HOST": "127.0.0.1"}, **extra)
    return env


def test_production_without_encryption_key_refuses_to_start(tmp_path):
    proc = subprocess.run([*MODELGATE, "serve"], env=clean_env(tmp_path, MODELGATE_ENV="production"),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "ENCRYPTION_KEY_MISSING" in proc.stderr + proc.stdout


def start_serving(env: dict[str, str], port: int) -> subprocess.Popen:
    """`modelgate serve` once it answers on `port`; its output (stdout and stderr) in a pipe."""
    proc = subprocess.Popen([*MODELGATE, "serve"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    deadline = time.monotonic() + 90  # a first start migrates and hashes a password: slow on a loaded machine
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.terminate()
    proc.communicate(timeout=30)
    pytest.fail("the gateway did not answer on SERVER_PORT")


def test_serve_listens_on_server_port_and_prints_admin_password_once(tmp_path):
    port = free_port()
    env = clean_env(tmp_path, SERVER_PORT=str(port))
    outputs = []
    for _ in range(2):
        proc = start_serving(env, port)
        proc.terminate()
        outputs.append(proc.communicate(timeout=30)[0])
    assert "admin / " in outputs[0]
    assert "admin / " not in outputs[1], "the first admin's password is shown on the first start only"
    assert (tmp_path / "data" / "modelgate.db").is_file()


async def test_gateway_on_postgresql_records_calls(tmp_path, openai_upstream):
    """The whole path on PostgreSQL: migrations, configuration, a call and its call-log row."""
    import asyncpg

    database = f"modelgate_{uuid.uuid4().hex[:12]}"
    try:
        conn = await asyncpg.connect("postgresql://postgres@127.0.0.1:5432/test", timeout=3)
    except (OSError, asyncpg.PostgresError) as exc:
        pytest.skip(f"PostgreSQL at 127.0.0.1:5432 is not reachable: {exc}")
    await conn.execute(f"CREATE DATABASE {database}")
    try:
        url = f"postgresql+asyncpg://postgres@127.0.0.1:5432/{database}"
        settings = harness_settings(tmp_path, database_url=url)
        harness = await GatewayHarness(settings).start()
        try:
            wired = await harness.wire(openai_upstream.base_url, ["gpt-test"])
            api = AsyncOpenAI(base_url=f"{harness.url}/v1", api_key=wired.key, max_retries=0)
            resp = await api.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "pg"}])
            assert resp.choices[0].message.content == "Echo: pg"
            await harness.runtime.writer.flush()
            async with harness.runtime.db.session() as s:
                rows = (await s.scalars(select(CallLog))).all()
            assert [(r.model, r.status, r.prompt_tokens) for r in rows] == [("gpt-test", 200, 1)]
        finally:
            await harness.stop()
    finally:
        await conn.execute(f"DROP DATABASE {database} WITH (FORCE)")
        await conn.close()


def _listening_inodes(port: int) -> set[str]:
    """Inodes of the TCP sockets listening on `port` (state 0A in /proc/net/tcp)."""
    inodes = set()
    for line in open("/proc/net/tcp").read().splitlines()[1:]:
        fields = line.split()
        if int(fields[1].split(":")[1], 16) == port and fields[3] == "0A":
            inodes.add(fields[9])
    return inodes


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = open(f"/proc/{entry}/stat").read()
            except OSError:
                continue
            if int(stat[stat.rindex(")") + 2:].split()[1]) == pid:
                found.append(int(entry))
    return found


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


@pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="needs Linux /proc to see the listening sockets")
def test_each_worker_listens_on_its_own_socket_and_stops_on_sigterm(tmp_path):
    """SERVER_WORKERS=3: three worker processes, each with its own listening socket (SO_REUSEPORT)
    on the one port, so the kernel spreads connections over them instead of one shared accept queue."""
    port = free_port()
    env = clean_env(tmp_path, SERVER_PORT=str(port), SERVER_WORKERS="3")
    proc = subprocess.Popen([*MODELGATE, "serve"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(_listening_inodes(port)) < 3:
            time.sleep(0.2)
        workers = [pid for pid in _children(proc.pid) if _socket_inodes(pid) & _listening_inodes(port)]
        assert len(workers) == 3
        owned = [_socket_inodes(pid) & _listening_inodes(port) for pid in workers]
        assert all(len(s) == 1 for s in owned) and len(set().union(*owned)) == 3
        for _ in range(30):  # fresh connections, whichever worker the kernel picks
            assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200
    finally:
        proc.terminate()
        output = proc.communicate(timeout=60)[0]
    assert proc.returncode == 0, output[-2000:]
    assert not _listening_inodes(port)


# Packages a worker loads only when a feature needs them: the management API and the console
# (first request under /api or /console), tracing (an OTLP endpoint), cloud credential chains (a
# Bedrock, Vertex or Azure Entra channel), migrations (the start-up child process) and the local
# tokenizer (the first count_tokens), the PostgreSQL dialect (a PostgreSQL database), pydantic
# (configuration as code, the plan catalog) and the YAML reader (a config file). Loading them all up
# front cost a worker 16 MB (bench.agent); pydantic alone, with the settings as its models, 9 MB more.
LOADED_ON_USE = ("modelgate.api", "fastapi", "starlette", "opentelemetry", "botocore", "google.auth",
                 "azure.identity", "alembic", "tiktoken", "unittest",
                 "sqlalchemy.dialects.postgresql", "pydantic", "yaml")

SERVE_AND_REPORT_MODULES = """
import asyncio, sys
import modelgate.workers
from modelgate.config import load_settings
import modelgate.server

def serve_one(settings, sockets=None):  # what uvicorn does with the app factory, without listening
    from modelgate.gateway.app import create_app

    app = create_app()

    async def lifespan():
        events = iter([{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}])
        sent = []

        async def receive():
            return next(events)

        async def send(message):
            sent.append(message["type"])

        await app(dict(type="lifespan"), receive, send)
        assert sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"], sent

    asyncio.run(lifespan())
    print("LOADED", sorted({m for m in sys.modules for p in LOADED_ON_USE if m == p or m.startswith(p + ".")}))

LOADED_ON_USE = %r
modelgate.workers.serve_one = serve_one
modelgate.server.run(load_settings())
"""


def test_one_worker_serving_process_loads_no_optional_feature(tmp_path):
    """With one worker, `modelgate serve` serves in its own process: what it imports is the worker's memory."""
    proc = subprocess.run([sys.executable, "-c", SERVE_AND_REPORT_MODULES % (LOADED_ON_USE,)],
                          env=clean_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "LOADED []" in proc.stdout, proc.stdout[-2000:]


def test_serve_writes_one_log_line_per_call_with_its_trace_id(tmp_path):
    """In the serving process, where only the gateway's own handler is configured, the per-call line
    (logs.info) is written as logging would write it: one JSON object with the call's trace id."""
    port = free_port()
    env = clean_env(tmp_path, SERVER_PORT=str(port), LOG_FORMAT="json", LOG_LEVEL="INFO")
    proc = start_serving(env, port)
    try:
        resp = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json={"model": "m", "messages": []},
                          headers={"Authorization": "Bearer sk-not-a-key"}, timeout=10)
        assert resp.status_code == 401
        trace_id = resp.headers["x-trace-id"]
    finally:
        proc.terminate()
        output = proc.communicate(timeout=30)[0]
    lines = [orjson.loads(line) for line in output.splitlines() if trace_id in line]
    assert len(lines) == 1, output[-2000:]
    line = lines[0]
    assert (line["level"], line["logger"], line["trace_id"]) == ("INFO", "modelgate.gateway", trace_id)
    assert line["message"] == f"call refused trace_id={trace_id} status=401 code=UNAUTHORIZED: Invalid API key"
