"""The deployment files refer to things that exist. No Docker engine runs here, so the image and the
compose stack are not built or started: these checks read them instead."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from modelgate.cli import build_parser
from modelgate.config import load_settings

ROOT = Path(__file__).resolve().parent.parent


def dockerfile_instructions() -> list[tuple[str, str]]:
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines]


def test_dockerfile_copies_what_exists_and_runs_as_a_user_with_a_cli_command():
    instructions = dockerfile_instructions()
    stages = [args.split()[-1] for op, args in instructions if op == "FROM" and " AS " in args.upper()]
    for op, args in instructions:
        if op != "COPY":
            continue
        parts = shlex.split(args)
        if parts[0].startswith("--from="):
            assert parts[0].split("=", 1)[1] in stages
            continue
        for source in parts[:-1]:
            assert (ROOT / source).exists(), f"COPY source {source} is not in the repository"
    users = [args for op, args in instructions if op == "USER"]
    assert users and users[-1] not in ("root", "0")
    # The final stage's command is a real CLI command; the console build script exists.
    entry = json.loads(next(args for op, args in instructions if op == "ENTRYPOINT"))
    cmd = json.loads(next(args for op, args in instructions if op == "CMD"))
    assert entry == ["modelgate"]
    build_parser().parse_args(cmd)
    scripts = json.loads((ROOT / "modelgate/console/web/package.json").read_text())["scripts"]
    assert "build" in scripts
    # Every setting the image sets is a known one.
    env = next(args for op, args in instructions if op == "ENV")
    pairs = dict(item.split("=", 1) for item in shlex.split(env))
    load_settings(environ=pairs)
    assert pairs["MODELGATE_ENV"] == "production"


def test_compose_runs_two_gateways_on_postgresql_and_redis_behind_a_load_balancer():
    compose = yaml.safe_load((ROOT / "deploy/compose.yaml").read_text())
    services = compose["services"]
    gateways = [name for name, svc in services.items() if svc.get("image") == "modelgate:latest"
                and "command" not in svc]
    assert len(gateways) == 2
    assert {"postgres", "redis", "haproxy", "migrate"} <= set(services)
    migrate = services["migrate"]
    build_parser().parse_args(migrate["command"])
    for name in gateways:
        svc = services[name]
        assert svc["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
        env = {k: str(v) for k, v in svc["environment"].items()}
        assert env["REDIS_URL"].startswith("redis://redis:")
        assert "@postgres:5432/" in env["DATABASE_URL"]
        resolved = {k: re.sub(r"\$\{[^}]+\}", "x", v) for k, v in env.items()}
        settings = load_settings(environ=resolved)  # every variable is a known setting
        assert settings.gateway.trust_forwarded_for and settings.server.workers == 2
        grace = int(svc["stop_grace_period"].rstrip("s"))
        assert grace > settings.server.drain_notice_seconds + settings.server.drain_seconds
        assert settings.server.drain_notice_seconds >= 4, "haproxy marks a draining gateway down in 2 × 2 s"
    haproxy = (ROOT / "deploy/haproxy.cfg").read_text()
    assert "option httpchk GET /readyz" in haproxy
    for name in gateways:
        assert f"server {name} {name}:8080 check" in haproxy


def test_systemd_unit_verifies():
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed")
    unit = (ROOT / "deploy/modelgate.service").read_text()
    exec_start = re.search(r"^ExecStart=(\S+) (.*)$", unit, re.M)
    assert exec_start is not None and exec_start.group(2) == "serve"
    modelgate = shutil.which("modelgate") or str(Path(__import__("sys").executable).parent / "modelgate")
    local = unit.replace(exec_start.group(1), modelgate)
    path = Path("/tmp") / f"modelgate-verify-{__import__('os').getpid()}.service"
    path.write_text(local)
    try:
        result = subprocess.run([analyze, "verify", str(path)], capture_output=True, text=True, timeout=60)
    finally:
        path.unlink()
    problems = [line for line in result.stderr.splitlines() if "modelgate-verify" in line]
    assert result.returncode == 0 and not problems, result.stderr
