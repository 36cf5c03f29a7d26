"""`modelgate apply` / `export`: declarative configuration, idempotent, diff first, no secrets in files."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import orjson
import pytest
import yaml

from modelgate.errors import GatewayError
from modelgate.services import Services
from tests import test_api_base as base
from tests.test_api_base import Env, as_admin, assert_envelope_error

api = base.api

EXAMPLE = Path(__file__).resolve().parent.parent / "docs" / "examples" / "gateway.yaml"

CONFIG = textwrap.dedent("""
    version: 1
    providers:
      - name: mock
        kind: mock
        options: {latency_ms: 5}
      - name: openai
        kind: openai
        keys:
          - env: TEST_OPENAI_KEY
    channels:
      - name: mock-main
        provider: mock
        models: [demo-model, fast=mock-fast]
      - name: openai-main
        provider: openai
        priority: 1
        models:
          - {id: gpt-4o-mini, capabilities: [streaming, functionCalling]}
    applications:
      - name: my-team
        description: the first team
        timeout: 30
        channels: [mock-main, openai-main]
        keys:
          - {name: ci, rateCapacity: 10, rateRefillPerSecond: 1}
    ipBlacklist:
      - {cidr: 10.66.0.0/16, reason: lab}
""")
SECRET = "sk-test-upstream-secret-0042"


async def test_apply_creates_then_is_idempotent_and_updates_what_changed(api: Env) -> None:
    svc: Services = api.services
    data = yaml.safe_load(CONFIG)
    plan = await svc.declarative.apply(data, {"TEST_OPENAI_KEY": SECRET}, dry_run=True)
    assert not plan.applied and "+ provider mock (kind mock, http://mock.modelgate.invalid/v1)" in plan.changes
    assert "+ channel mock-main on mock: demo-model, fast=mock-fast" in plan.changes
    assert await svc.providers.list() == []  # a dry run writes nothing

    done = await svc.declarative.apply(data, {"TEST_OPENAI_KEY": SECRET})
    assert done.applied and done.changes == plan.changes
    assert [(k.application, k.name) for k in done.created_keys] == [("my-team", "ci")]
    assert done.created_keys[0].plaintext.startswith("sk-")
    channel = await svc.channels.get("mock-main")
    assert {(m.model_id, m.upstream_model) for m in channel.models} == {("demo-model", "demo-model"),
                                                                        ("fast", "mock-fast")}
    app = await svc.applications.get("my-team")
    assert app.timeout_seconds == 30 and len(app.channel_ids) == 2
    (key,) = await svc.api_keys.list("my-team")
    assert (key.name, key.rate_capacity, key.rate_refill_per_second) == ("ci", 10, 1)
    openai = await svc.providers.get("openai")
    assert openai.keys[0].label == "TEST_OPENAI_KEY" and openai.keys[0].hint == SECRET[-4:]

    again = await svc.declarative.apply(data, {"TEST_OPENAI_KEY": SECRET})
    assert again.changes == [] and again.created_keys == []

    data["channels"][0]["models"] = ["demo-model", "fresh"]
    data["applications"][0]["timeout"] = 45
    data["applications"][0]["channels"] = ["mock-main"]
    data["applications"][0]["keys"][0]["rateCapacity"] = 20
    data["providers"][0]["options"] = {}
    changed = await svc.declarative.apply(data, {"TEST_OPENAI_KEY": SECRET + "-rotated"})
    assert changed.changes == [
        "~ provider mock: options {'latency_ms': 5} -> {}",
        "~ upstream key TEST_OPENAI_KEY of provider openai: replaced (new value)",
        "+ models of channel mock-main: fresh",
        "- models of channel mock-main: fast",
        "~ application my-team: timeout_seconds 30.0 -> 45.0",
        "- application my-team may no longer use channel openai-main",
        "~ key ci of application my-team: rate limit 10.0/1.0 -> 20.0/1.0",
    ]
    assert (await svc.providers.get("openai")).keys[0].hint == "ated"
    assert (await svc.declarative.apply(data, {"TEST_OPENAI_KEY": SECRET + "-rotated"})).changes == []


async def test_apply_refuses_bad_files_before_changing_anything(api: Env) -> None:
    svc: Services = api.services
    data = yaml.safe_load(CONFIG)
    with pytest.raises(GatewayError, match="TEST_OPENAI_KEY is not set"):
        await svc.declarative.apply(data, {})
    assert await svc.providers.list() == []
    for broken, message in (
        ({"providers": [{"name": "x", "kind": "nope"}]}, "unknown provider kind"),
        ({"providers": [{"name": "x", "kind": "mock", "keys": [{"env": "sk-abc"}]}]}, "not an environment variable"),
        ({"providers": [{"name": "x", "kind": "mock", "apiKey": "sk-secret"}]}, "apiKey"),
        ({"channels": [{"name": "c", "provider": "ghost"}]}, "unknown provider 'ghost'"),
        ({"applications": [{"name": "a", "channels": ["ghost"]}]}, "unknown channel 'ghost'"),
        ({"version": 2}, "version"),
    ):
        with pytest.raises(GatewayError, match=message) as caught:
            await svc.declarative.apply(broken, {})
        assert caught.value.status == 400


async def test_export_round_trips_without_secrets(api: Env) -> None:
    svc: Services = api.services
    await svc.declarative.apply(yaml.safe_load(CONFIG), {"TEST_OPENAI_KEY": SECRET})
    exported = await svc.declarative.export()
    assert SECRET not in str(exported)
    assert exported["providers"][1]["keys"] == [{"env": "TEST_OPENAI_KEY"}]
    assert exported["channels"][0]["models"] == ["demo-model", "fast=mock-fast"]
    assert exported["applications"][0]["keys"] == [{"name": "ci", "rateCapacity": 10.0, "rateRefillPerSecond": 1.0}]
    # applying the export changes nothing
    assert (await svc.declarative.apply(exported, {"TEST_OPENAI_KEY": SECRET})).changes == []


async def test_documented_example_applies(api: Env) -> None:
    data = yaml.safe_load(EXAMPLE.read_text())
    envs = {k["env"]: "sk-example-value-1234567" for p in data["providers"] for k in p.get("keys", [])}
    result = await api.services.declarative.apply(data, envs)
    assert result.changes and (await api.services.declarative.apply(data, envs)).changes == []


async def test_apply_and_export_through_the_api(api: Env) -> None:
    c = await as_admin(api)
    body = {"config": yaml.safe_load(CONFIG), "secrets": {"TEST_OPENAI_KEY": SECRET}}
    r = await c.post("/api/v1/config/apply", params={"dryRun": "true"}, json=body)
    assert r.status_code == 200, r.text
    assert r.json()["data"]["applied"] is False and r.json()["data"]["changes"]
    r = await c.post("/api/v1/config/apply", json=body)
    data = r.json()["data"]
    assert data["applied"] is True and data["createdKeys"][0]["name"] == "ci"
    assert r.headers["cache-control"] == "no-store"
    r = await c.get("/api/v1/config/export")
    assert r.status_code == 200 and SECRET not in r.text
    assert r.json()["data"]["applications"][0]["name"] == "my-team"
    r = await c.post("/api/v1/config/apply", json={"config": {"providers": [{"name": 1}]}})
    assert_envelope_error(r, 400, "VALIDATION_ERROR")
    await base.login(api.client, "alice", base.USER_PASSWORD)
    assert (await api.client.get("/api/v1/config/export")).status_code == 403


def _cli(tmp_path: Path, *argv: str, extra_env: dict | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if k not in ("MODELGATE_CONFIG", "DATABASE_URL", "ENCRYPTION_KEY", "MODELGATE_ENV")}
    env.update(MODELGATE_DATA_DIR=str(tmp_path / "data"), **(extra_env or {}))
    return subprocess.run([sys.executable, "-m", "modelgate.cli", *argv], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)


def test_cli_apply_dry_run_apply_and_export(tmp_path):
    (tmp_path / "gateway.yaml").write_text(CONFIG)
    assert _cli(tmp_path, "init").returncode == 0
    dry = _cli(tmp_path, "apply", "-f", "gateway.yaml", "--dry-run", extra_env={"TEST_OPENAI_KEY": SECRET})
    assert dry.returncode == 0, dry.stderr
    assert "+ provider mock" in dry.stdout and "dry run: nothing changed" in dry.stdout
    missing = _cli(tmp_path, "apply", "-f", "gateway.yaml")
    assert missing.returncode == 1 and "TEST_OPENAI_KEY is not set" in missing.stderr
    done = _cli(tmp_path, "apply", "-f", "gateway.yaml", extra_env={"TEST_OPENAI_KEY": SECRET})
    assert done.returncode == 0 and "key ci of application my-team: sk-" in done.stdout
    again = _cli(tmp_path, "apply", "-f", "gateway.yaml", extra_env={"TEST_OPENAI_KEY": SECRET})
    assert "No changes" in again.stdout
    exported = _cli(tmp_path, "export")
    assert exported.returncode == 0 and SECRET not in exported.stdout
    assert yaml.safe_load(exported.stdout)["providers"][0]["name"] == "mock"
    out = _cli(tmp_path, "export", "-o", "out.yaml")
    assert out.returncode == 0 and yaml.safe_load((tmp_path / "out.yaml").read_text())["version"] == 1
    audit = orjson.loads(_cli(tmp_path, "--json", "audit", "list").stdout)
    assert "cli apply" in [row["action"] for row in audit["items"]]


async def test_cli_acts_on_a_running_server_with_a_token(tmp_path):
    import asyncio

    import openai

    from modelgate.providers.mock import MOCK_UPSTREAM
    from tests.gateway_harness import GatewayHarness, harness_settings

    harness = await GatewayHarness(harness_settings(tmp_path)).start()
    try:
        admin = (await harness.services.users.list())[0]
        token = (await harness.services.admin_tokens.create("ci", "ADMIN", admin.id)).plaintext
        (tmp_path / "gateway.yaml").write_text(CONFIG)
        env = {k: v for k, v in os.environ.items() if k not in ("MODELGATE_CONFIG", "DATABASE_URL")}
        # the CLI's own data dir is empty: everything goes through the server's API
        env.update(MODELGATE_DATA_DIR=str(tmp_path / "elsewhere"), TEST_OPENAI_KEY=SECRET)

        async def cli(*argv: str, token_value: str | None = token) -> tuple[int, str, str]:
            run_env = dict(env, **({"MODELGATE_TOKEN": token_value} if token_value else {}))
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "modelgate.cli", "--url", harness.url, *argv, cwd=tmp_path, env=run_env,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            out, err = await asyncio.wait_for(proc.communicate(), 120)
            return proc.returncode, out.decode(), err.decode()

        rc, out, err = await cli("apply", "-f", "gateway.yaml", "--dry-run")
        assert rc == 0 and "+ provider mock" in out and "dry run" in out, err
        rc, out, err = await cli("apply", "-f", "gateway.yaml")
        assert rc == 0, err
        key = out.split("key ci of application my-team: ")[1].split()[0]
        # applied through the API: the running gateway serves it at once
        chat = openai.AsyncOpenAI(base_url=harness.url + "/v1", api_key=key, max_retries=0)
        reply = await chat.chat.completions.create(model="demo-model", messages=[{"role": "user", "content": "hi"}])
        assert reply.choices[0].message.content == "Mock answer from demo-model: hi"
        rc, out, _ = await cli("export")
        assert rc == 0 and yaml.safe_load(out)["channels"][0]["name"] == "mock-main" and SECRET not in out
        rc, _, err = await cli("export", token_value="mgt_wrong")
        assert rc == 1 and "UNAUTHORIZED" in err
        rc, _, err = await cli("export", token_value=None)
        assert rc == 1 and "MODELGATE_TOKEN" in err
        rc, _, err = await cli("app", "list")
        assert rc == 1 and "--url works with" in err
        audit = await harness.services.audit.query(action="/config/apply")
        assert [(e.via, e.status) for e in audit.items] == [("token:1", 200), ("token:1", 200)]
    finally:
        await harness.stop()
        await MOCK_UPSTREAM.stop()


async def test_a_model_written_alias_equals_upstream_is_a_mapping_everywhere(api: Env) -> None:
    # the API and the console send "fast=gpt-4o-mini" too: it must not become a model id "fast=gpt-4o-mini"
    c = await as_admin(api)
    provider = (await c.post("/api/v1/providers", json={"name": "m", "kind": "mock"})).json()["data"]
    r = await c.post("/api/v1/channels", json={"name": "c", "providerId": provider["id"], "models": ["fast=gpt-4o-mini"]})
    assert r.status_code == 201, r.text
    (model,) = r.json()["data"]["models"]
    assert (model["modelId"], model["upstreamModel"]) == ("fast", "gpt-4o-mini")


async def test_every_capability_the_api_takes_applies_and_round_trips(api: Env) -> None:
    # A reasoning model behind a chat-completions provider is marked `reasoning` (the API and the console
    # take it); a file that says so, or the export of such a model, must apply as well.
    svc: Services = api.services
    data = yaml.safe_load(CONFIG)
    data["channels"][1]["models"] = [{"id": "o-model", "capabilities": ["streaming", "functionCalling", "vision",
                                                                       "reasoning"]}]
    assert (await svc.declarative.apply(data, {"TEST_OPENAI_KEY": SECRET})).applied
    exported = await svc.declarative.export()
    assert exported["channels"][1]["models"][0]["capabilities"] == ["streaming", "functionCalling", "vision",
                                                                     "reasoning"]
    assert (await svc.declarative.apply(exported, {"TEST_OPENAI_KEY": SECRET})).changes == []
