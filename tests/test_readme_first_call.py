"""The README's "First call", run as written: `make run`, then its shell and Python blocks.

The gateway is started the README's way on a free port (SERVER_PORT) with a throw-away data
directory; the commands are taken from README.md itself, so the README cannot drift from what works.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def _section(title: str) -> str:
    text = README.read_text()
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else None]


def _blocks(section: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", section, re.S)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_port(port: int, proc: subprocess.Popen, deadline: float) -> None:
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"`make run` exited with {proc.returncode}:\n{proc.stdout.read()}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise AssertionError("the gateway did not listen in time")


@pytest.mark.skipif(not shutil.which("make") or not shutil.which("curl"), reason="needs make and curl")
@pytest.mark.skipif(not (ROOT / ".venv" / "bin" / "modelgate").exists(), reason="needs `make install` first")
def test_readme_first_call_works_as_written(tmp_path):
    section = _section("First call")
    setup, call, real_provider = _blocks(section, "sh")
    (python_block,) = _blocks(section, "python")
    assert "--kind mock" in setup and "demo-model" in call

    port = _free_port()
    env = {k: v for k, v in os.environ.items()
           if k not in ("MODELGATE_CONFIG", "DATABASE_URL", "ENCRYPTION_KEY", "MODELGATE_ENV", "REDIS_URL")}
    env.update(SERVER_PORT=str(port), SERVER_HOST="127.0.0.1", MODELGATE_DATA_DIR=str(tmp_path / "data"))
    server = subprocess.Popen(["make", "--no-print-directory", "run"], cwd=ROOT, env=env, start_new_session=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        _wait_for_port(port, server, time.monotonic() + 120)
        # The README's blocks as written; the call is repeated while the running gateway picks the
        # new configuration up (documented: within 5 seconds).
        script = (f"set -e\n{setup}\n"
                  f"for i in $(seq 40); do\n  out=$({call.strip()})\n"
                  "  case \"$out\" in *'Mock answer from demo-model: hi'*) break;; esac\n  sleep 0.5\ndone\n"
                  "echo \"$out\"\necho MODELGATE_KEY=$MODELGATE_KEY\necho GATEWAY_URL=$GATEWAY_URL\n")
        done = subprocess.run(["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert '"content":"Mock answer from demo-model: hi"' in done.stdout, done.stdout + done.stderr
        exported = dict(line.split("=", 1) for line in done.stdout.splitlines()
                        if line.startswith(("MODELGATE_KEY=", "GATEWAY_URL=")))
        assert exported["MODELGATE_KEY"].startswith("sk-") and exported["GATEWAY_URL"] == f"http://localhost:{port}"

        sdk = subprocess.run([sys.executable, "-c", python_block], cwd=ROOT, env={**env, **exported},
                             capture_output=True, text=True, timeout=60)
        assert sdk.returncode == 0, sdk.stderr
        assert sdk.stdout.splitlines() == ["Mock answer from demo-model: hi"] * 2
        assert "--key-env OPENAI_API_KEY" in real_provider
    finally:
        with contextlib.suppress(ProcessLookupError):  # already gone when `make run` failed
            os.killpg(server.pid, signal.SIGINT)
        try:
            output, _ = server.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            output, _ = server.communicate()
    assert "Created the first console user: admin / " in output
    assert f":{port}" in output  # the listening line names the port it was given


def test_make_clean_keeps_data_and_console_build_is_a_file_target():
    if not shutil.which("make"):
        pytest.skip("needs make")
    clean = subprocess.run(["make", "-n", "clean"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert "rm -rf" in clean and not re.search(r"(^|\s)(\./)?data(/|\s|$)", clean)
    dist = ROOT / "modelgate" / "console" / "dist" / "index.html"
    if not dist.is_file() or not shutil.which("npm"):
        pytest.skip("the console is not built here")
    # Once built, `make console` (run by every `make run`) has nothing to do.
    question = subprocess.run(["make", "-q", "console"], cwd=ROOT, capture_output=True, text=True)
    assert question.returncode == 0, "make console would rebuild an up-to-date console"
