"""The processes under test: fake upstream, bare proxy, LiteLLM proxy, modelgate.

Each `start_*` returns a `Target`: where to send each kind of call, and the
process whose tree the harness measures. Every process is started by us,
listens on 127.0.0.1 only, and is stopped by its own pid.
"""

from __future__ import annotations

import asyncio
import http.client
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import orjson

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
PYTHON = sys.executable
MODEL = "bench-model"
# On modelgate: served by a messages-protocol upstream under the same id, so that its pass-through
# forwards the client's bytes as they are (RENAMED_MODEL measures a model served under another id).
ALT_MODEL = "bench-model-alt"
# The fake upstream answers streams for these with its long, paced stream (`--long-chunks`, `--chunk-gap-ms`).
LONG_MODEL = "bench-model-long"
ALT_LONG_MODEL = "bench-model-alt-long"
# On modelgate: the chat upstream's model under another id, so pass-through renames it both ways
# (the request's model field, and the answer's back to the client's id).
RENAMED_MODEL = "bench-model-renamed"
# On modelgate: served by an `openai` channel, whose Responses API takes a Responses client's bytes as
# they are (pass-through); on the `openai-compatible` one a Responses client is converted to chat.
RESPONSES_MODEL = "bench-model-responses"
RESPONSES_LONG_MODEL = "bench-model-responses-long"
UPSTREAM_KEY = "sk-upstream-bench-0000"
LITELLM_VENV = BENCH_DIR / ".venv-litellm"
# Pinned: the registry later carried a compromised release (1.107.0).
LITELLM_SPEC = "litellm[proxy]==1.106.2"
LITELLM_MASTER_KEY = "sk-litellm-bench-master"

CHAT_BODY = {"model": MODEL, "messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 32}
MESSAGES_BODY = {"model": MODEL, "max_tokens": 32,
                 "messages": [{"role": "user", "content": [{"type": "text", "text": "Say hello."}]}]}


@dataclass
class Call:
    """One kind of request to a target."""

    path: str
    headers: list[str]
    body: bytes
    stream: bool

    def streamed(self) -> "Call":
        data = orjson.loads(self.body)
        data["stream"] = True
        return Call(self.path, self.headers, orjson.dumps(data), True)


def chat_call(path: str, headers: list[str], model: str = MODEL) -> Call:
    return Call(path, headers, orjson.dumps({**CHAT_BODY, "model": model}), False)


def messages_call(path: str, headers: list[str], model: str = MODEL) -> Call:
    return Call(path, headers, orjson.dumps({**MESSAGES_BODY, "model": model}), False)


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen
    log_path: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM (graceful: lets modelgate flush its call log), then SIGKILL after `timeout`."""
        if self.alive():
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(5)
        return self.popen.returncode

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""


# Settings a developer's shell may carry that would point a target at another database or config.
UNSET = ("DATABASE_URL", "REDIS_URL", "MODELGATE_CONFIG", "SERVER_WORKERS", "LOG_LEVEL")


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    env.update(extra or {})
    return env


def spawn(name: str, argv: list[str], cpus: str | None, log_dir: Path,
          env: dict[str, str] | None = None, cwd: Path | None = None) -> Proc:
    log_path = log_dir / f"{name}.log"
    if cpus:
        argv = ["taskset", "-c", cpus, *argv]
    with open(log_path, "wb") as log:
        popen = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 env=child_env(env), cwd=cwd or REPO)
    return Proc(name, popen, log_path)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(port: int, method: str, path: str, body: bytes | None = None,
            headers: list[str] | None = None, timeout: float = 10.0) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        hdrs = {"Content-Type": "application/json"}
        for line in headers or []:
            name, _, value = line.partition(":")
            hdrs[name.strip()] = value.strip()
        conn.request(method, path, body=body, headers=hdrs)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def wait_ready(proc: Proc, port: int, call: Call, timeout: float) -> None:
    """Poll with a real call until it answers 200; fail with the process log otherwise."""
    deadline = time.monotonic() + timeout
    last = "no answer"
    while time.monotonic() < deadline:
        if not proc.alive():
            raise RuntimeError(f"{proc.name} exited with {proc.popen.returncode}:\n{proc.log_tail()}")
        try:
            status, body = request(port, "POST", call.path, call.body, call.headers, timeout=5.0)
            if status == 200:
                return
            last = f"{status} {body[:300]!r}"
        except OSError as exc:
            last = str(exc)
        time.sleep(0.2)
    raise RuntimeError(f"{proc.name} not ready after {timeout:.0f} s ({last}):\n{proc.log_tail()}")


@dataclass
class Target:
    name: str
    port: int
    proc: Proc | None  # None: nothing of ours to measure (e.g. shared upstream)
    calls: dict[str, Call]  # "chat" and optionally "messages", "chat_to_messages"
    info: dict[str, Any] = field(default_factory=dict)
    on_stop: Callable[[], dict[str, Any]] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.proc is not None:
            out["exit_code"] = self.proc.stop()
        if self.on_stop is not None:
            out.update(self.on_stop())
        return out


# --- fake upstream --------------------------------------------------------------------------

def start_upstream(log_dir: Path, cpus: str | None, chunks: int, delay_ms: float,
                   long_chunks: int = 300, gap_ms: float = 2.0) -> Target:
    port = free_port()
    proc = spawn("upstream", [PYTHON, str(BENCH_DIR / "fake_upstream.py"), "--port", str(port),
                              "--chunks", str(chunks), "--delay-ms", str(delay_ms),
                              "--long-chunks", str(long_chunks), "--chunk-gap-ms", str(gap_ms)], cpus, log_dir)
    auth = [f"Authorization: Bearer {UPSTREAM_KEY}"]
    calls = {
        "chat": chat_call("/v1/chat/completions", auth),
        "messages": messages_call("/v1/messages", [f"x-api-key: {UPSTREAM_KEY}", "anthropic-version: 2023-06-01"]),
        "responses": Call("/v1/responses", auth, b"", False),  # the headers of a Responses call
    }
    wait_ready(proc, port, calls["chat"], 15)
    return Target("direct", port, proc, calls, {"chunks": chunks, "delay_ms": delay_ms})


def upstream_calls(upstream: Target) -> int:
    status, body = request(upstream.port, "GET", "/_bench/stats")
    return int(orjson.loads(body)["calls"]) if status == 200 else -1


# --- bare proxy -----------------------------------------------------------------------------

def start_bare(upstream: Target, log_dir: Path, cpus: str | None) -> Target:
    port = free_port()
    proc = spawn("bare", [PYTHON, str(BENCH_DIR / "bare_proxy.py"), "--port", str(port),
                          "--upstream", upstream.url], cpus, log_dir)
    calls = {"chat": upstream.calls["chat"]}
    wait_ready(proc, port, calls["chat"], 15)
    return Target("bare", port, proc, calls)


# --- LiteLLM --------------------------------------------------------------------------------

def ensure_litellm(log_dir: Path) -> dict[str, Any]:
    """Create bench/.venv-litellm with the LiteLLM proxy from PyPI, once."""
    exe = LITELLM_VENV / "bin" / "litellm"
    log_path = log_dir / "litellm-install.log"
    if not exe.exists():
        with open(log_path, "wb") as log:
            steps = [[PYTHON, "-m", "venv", "--clear", str(LITELLM_VENV)],
                     [str(LITELLM_VENV / "bin" / "pip"), "install", "-q", LITELLM_SPEC]]
            for argv in steps:
                # Bounded: a hung install must not hang the whole run.
                done = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, timeout=900)
                if done.returncode != 0:
                    tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-5:])
                    return {"installed": False, "error": f"{' '.join(argv[-2:])} failed: {tail}"}
    version = subprocess.run([str(LITELLM_VENV / "bin" / "python"), "-c",
                              "import importlib.metadata as m; print(m.version('litellm'))"],
                             capture_output=True, text=True, timeout=60)
    if version.returncode != 0:
        return {"installed": False, "error": version.stderr.strip()[-500:]}
    return {"installed": True, "version": version.stdout.strip()}


def start_litellm(upstream: Target, log_dir: Path, cpus: str | None) -> Target:
    port = free_port()
    config = log_dir / "litellm-config.yaml"
    config.write_text(
        "model_list:\n"
        + "".join(
            f"  - model_name: {name}\n"
            "    litellm_params:\n"
            f"      model: openai/{name}\n"
            f"      api_base: {upstream.url}/v1\n"
            f"      api_key: {UPSTREAM_KEY}\n"
            for name in (MODEL, LONG_MODEL))
        + "general_settings:\n"
        f"  master_key: {LITELLM_MASTER_KEY}\n"
    )
    env = {
        # No network at start-up (cost map from the package), no telemetry, no database.
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_TELEMETRY": "False",
        "LITELLM_LOG": "ERROR",
    }
    proc = spawn("litellm", [str(LITELLM_VENV / "bin" / "litellm"), "--config", str(config),
                             "--host", "127.0.0.1", "--port", str(port), "--num_workers", "1"],
                 cpus, log_dir, env)
    calls = {"chat": chat_call("/v1/chat/completions", [f"Authorization: Bearer {LITELLM_MASTER_KEY}"])}
    wait_ready(proc, port, calls["chat"], 180)
    return Target("litellm", port, proc, calls)


# --- modelgate ------------------------------------------------------------------------------

async def _configure_modelgate(env: dict[str, str], upstream: Target) -> tuple[str, str | None]:
    """Application, providers, channels and a key through the service layer the CLI uses.

    Returns the gateway key, and why the messages-protocol upstream could not be set up (or None).
    """
    from modelgate.auth.crypto import SecretBox, load_encryption_key
    from modelgate.config import load_settings
    from modelgate.errors import GatewayError
    from modelgate.server import prepare
    from modelgate.services import Services
    from modelgate.storage.db import Database

    settings = load_settings(environ=child_env(env))
    await prepare(settings)  # schema + first admin, as `modelgate serve` would
    db = Database.from_settings(settings)
    try:
        svc = Services(db, SecretBox(load_encryption_key(settings)), settings)
        app = await svc.applications.create("bench")
        await svc.providers.create("fake-chat", "openai-compatible", f"{upstream.url}/v1", keys=[UPSTREAM_KEY])
        await svc.channels.create("fake-chat", "fake-chat",
                                  [MODEL, LONG_MODEL, {"model_id": RENAMED_MODEL, "upstream_model": MODEL}])
        await svc.applications.authorize_channel(app.id, "fake-chat")
        alt_problem = None
        try:
            await svc.providers.create("fake-messages", "anthropic", upstream.url, keys=[UPSTREAM_KEY])
        except GatewayError as exc:  # e.g. the kind is not registered in this build
            alt_problem = f"messages-protocol provider not available: {exc}"
        else:
            await svc.channels.create("fake-messages", "fake-messages",
                                      [ALT_MODEL, ALT_LONG_MODEL])
            await svc.applications.authorize_channel(app.id, "fake-messages")
        await svc.providers.create("fake-openai", "openai", f"{upstream.url}/v1", keys=[UPSTREAM_KEY])
        await svc.channels.create("fake-openai", "fake-openai", [RESPONSES_MODEL, RESPONSES_LONG_MODEL])
        await svc.applications.authorize_channel(app.id, "fake-openai")
        created = await svc.api_keys.create(app.id, "bench")
        return created.plaintext, alt_problem
    finally:
        await db.dispose()


def count_call_log(data_dir: Path) -> int:
    with sqlite3.connect(data_dir / "modelgate.db") as conn:
        return int(conn.execute("SELECT COUNT(*) FROM call_log").fetchone()[0])


def start_modelgate(upstream: Target, log_dir: Path, cpus: str | None, workers: int,
                    extra_env: dict[str, str] | None = None, tag: str = "") -> Target:
    """`tag` tells apart runs of one worker count (e.g. "-redis": shared state through Redis)."""
    port = free_port()
    name = f"modelgate-w{workers}{tag}"
    data_dir = log_dir / f"modelgate-data-w{workers}{tag}"
    data_dir.mkdir(parents=True, exist_ok=True)
    config = data_dir / "bench.yaml"
    config.write_text("# empty: settings come from the environment of the benchmark\n")
    env = {
        "MODELGATE_CONFIG": str(config),
        "MODELGATE_DATA_DIR": str(data_dir),
        "SERVER_HOST": "127.0.0.1",
        "SERVER_PORT": str(port),
        "SERVER_WORKERS": str(workers),
        # Big enough never to throttle the benchmark, still checked on every call.
        "GATEWAY_RATE_LIMIT_CAPACITY": "1000000000",
        "GATEWAY_RATE_LIMIT_REFILL_PER_SECOND": "1000000000",
        **(extra_env or {}),
    }
    key, alt_problem = asyncio.run(_configure_modelgate(env, upstream))
    exe = Path(PYTHON).parent / "modelgate"
    proc = spawn(name, [str(exe), "serve"], cpus, log_dir, env, cwd=data_dir)
    bearer = [f"Authorization: Bearer {key}"]
    calls = {
        "chat": chat_call("/v1/chat/completions", bearer),
        "messages": messages_call("/alt/v1/messages", [f"x-api-key: {key}", "alt-version: 2023-06-01"]),
    }
    if alt_problem is None:
        calls["chat_to_messages"] = chat_call("/v1/chat/completions", bearer, ALT_MODEL)
    before = upstream_calls(upstream)
    wait_ready(proc, port, calls["chat"], 60)

    def on_stop() -> dict[str, Any]:
        sent = upstream_calls(upstream) - before
        rows = count_call_log(data_dir)
        return {"upstream_calls": sent, "call_log_rows": rows, "lost_call_log_rows": max(0, sent - rows)}

    info = {"workers": workers, "data_dir": str(data_dir), "conversion_problem": alt_problem,
            "api_key": key, "redis": "REDIS_URL" in env}
    return Target(name, port, proc, calls, info, on_stop)
