"""Other gateways measured beside modelgate: TensorZero and Portkey (LiteLLM lives in targets.py).

Each is installed from its package registry on first use, into an ignored folder of bench/
(TensorZero's PyPI wheel embeds its Rust gateway; Portkey's npm package is its Node gateway),
pointed at the same fake upstream as an OpenAI-compatible model, and started on 127.0.0.1.
When one cannot be installed or started, the run goes on without it and says why.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.targets import BENCH_DIR, LONG_MODEL, MODEL, PYTHON, UPSTREAM_KEY, Call, Target, free_port, spawn, wait_ready

TENSORZERO_VENV = BENCH_DIR / ".venv-tensorzero"
TENSORZERO_SPEC = "tensorzero==2026.6.0"
PORTKEY_DIR = BENCH_DIR / ".portkey"
PORTKEY_SPEC = "@portkey-ai/gateway@1.15.2"

TENSORZERO_SERVER = """
import signal, sys, threading
import tensorzero
gateway = tensorzero._start_http_gateway(config_file=sys.argv[1], clickhouse_url=None, postgres_url=None,
                                         valkey_url=None, async_setup=False)
print("BASE_URL", gateway.base_url, flush=True)
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
stop.wait()
gateway.close()
"""


def _installed(check: list[str]) -> str | None:
    done = subprocess.run(check, capture_output=True, text=True, timeout=60)
    return done.stdout.strip() if done.returncode == 0 else None


def ensure_tensorzero(log_dir: Path) -> dict[str, Any]:
    python = TENSORZERO_VENV / "bin" / "python"
    check = [str(python), "-c", "import importlib.metadata as m; print(m.version('tensorzero'))"]
    if not python.exists() or _installed(check) is None:
        with open(log_dir / "tensorzero-install.log", "wb") as log:
            for argv in ([PYTHON, "-m", "venv", "--clear", str(TENSORZERO_VENV)],
                         [str(python), "-m", "pip", "install", "-q", TENSORZERO_SPEC]):
                if subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, timeout=900).returncode != 0:
                    return {"installed": False, "error": f"{' '.join(argv[-2:])} failed"}
    version = _installed(check)
    return {"installed": True, "version": version} if version else {"installed": False, "error": "import failed"}


def start_tensorzero(upstream: Target, log_dir: Path, cpus: str | None) -> Target:
    config = log_dir / "tensorzero.toml"
    config.write_text(
        "[gateway]\nobservability.enabled = false\n\n"
        + "".join(
            f"[models.{name}]\nrouting = [\"fake\"]\n\n"
            f"[models.{name}.providers.fake]\ntype = \"openai\"\nmodel_name = \"{name}\"\n"
            f"api_base = \"{upstream.url}/v1/\"\napi_key_location = \"env::BENCH_UPSTREAM_KEY\"\n\n"
            for name in (MODEL, LONG_MODEL))
    )
    script = log_dir / "tensorzero_server.py"
    script.write_text(TENSORZERO_SERVER)
    proc = spawn("tensorzero", [str(TENSORZERO_VENV / "bin" / "python"), str(script), str(config)], cpus,
                 log_dir, {"BENCH_UPSTREAM_KEY": UPSTREAM_KEY, "RUST_LOG": "warn"})
    base = None
    for _ in range(300):
        text = proc.log_path.read_text(errors="replace") if proc.log_path.exists() else ""
        for line in text.splitlines():
            if line.startswith("BASE_URL "):
                base = line.split(" ", 1)[1].strip().rstrip("/")
        if base or not proc.alive():
            break
        time.sleep(0.1)
    if not base:
        proc.stop()
        raise RuntimeError(f"tensorzero did not start:\n{proc.log_tail()}")
    port = int(base.split(":")[2].split("/")[0])
    path = base.split(f":{port}", 1)[1] + "/chat/completions"
    calls = {"chat": Call(path, [], b"", False)}  # bodies are set per workload (model name below)
    target = Target("tensorzero", port, proc, calls)
    wait_ready(proc, port, chat_with_model(target, None), 60)
    return target


def ensure_portkey(log_dir: Path) -> dict[str, Any]:
    entry = PORTKEY_DIR / "node_modules" / "@portkey-ai" / "gateway" / "build" / "start-server.js"
    node = shutil.which("node")
    if node is None:
        return {"installed": False, "error": "node is not installed"}
    if not entry.exists():
        npm = shutil.which("npm")
        if npm is None:
            return {"installed": False, "error": "npm is not installed"}
        PORTKEY_DIR.mkdir(parents=True, exist_ok=True)
        with open(log_dir / "portkey-install.log", "wb") as log:
            done = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--loglevel=error", PORTKEY_SPEC],
                                  cwd=PORTKEY_DIR, stdout=log, stderr=subprocess.STDOUT, timeout=900)
        if done.returncode != 0 or not entry.exists():
            return {"installed": False, "error": "npm install failed"}
    version = _installed([node, "-p", f"require('{PORTKEY_DIR}/node_modules/@portkey-ai/gateway/package.json').version"])
    return {"installed": True, "version": version, "node": _installed([node, "--version"])}


def start_portkey(upstream: Target, log_dir: Path, cpus: str | None) -> Target:
    port = free_port()
    entry = PORTKEY_DIR / "node_modules" / "@portkey-ai" / "gateway" / "build" / "start-server.js"
    proc = spawn("portkey", [shutil.which("node") or "node", str(entry), f"--port={port}", "--headless"], cpus,
                 log_dir, {"NODE_ENV": "production"})
    headers = [f"Authorization: Bearer {UPSTREAM_KEY}", "x-portkey-provider: openai",
               f"x-portkey-custom-host: {upstream.url}/v1"]
    target = Target("portkey", port, proc, {"chat": Call("/v1/chat/completions", headers, b"", False)})
    wait_ready(proc, port, chat_with_model(target, None), 60)
    return target


def chat_with_model(target: Target, body: bytes | None) -> Call:
    """The target's chat call carrying `body` (a chat body), with the model named as the target wants it."""
    import orjson

    base = target.calls["chat"]
    data = orjson.loads(body) if body else {"model": MODEL, "messages": [{"role": "user", "content": "Hi."}],
                                            "max_tokens": 16}
    if target.name == "tensorzero":
        data["model"] = f"tensorzero::model_name::{data['model']}"
    return Call(base.path, base.headers, orjson.dumps(data), bool(data.get("stream")))


def available() -> dict[str, Any]:
    return {"node": shutil.which("node"), "tensorzero_venv": os.path.exists(TENSORZERO_VENV)}
