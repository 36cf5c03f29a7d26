import os
import subprocess
import sys

import orjson
import pytest

from modelgate.cli import main


@pytest.fixture
def cli(tmp_path, monkeypatch, capsys):
    """Run `modelgate ARGS` in-process against a fresh data dir; returns (rc, stdout, stderr)."""
    monkeypatch.chdir(tmp_path)
    for name in ("MODELGATE_CONFIG", "DATABASE_URL", "ENCRYPTION_KEY", "MODELGATE_ENV"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MODELGATE_DATA_DIR", str(tmp_path / "data"))

    def run(*argv: str):
        capsys.readouterr()
        rc = main(list(argv))
        out = capsys.readouterr()
        return rc, out.out, out.err

    return run


def _json(out: str):
    return orjson.loads(out)


def test_cli_end_to_end(cli, tmp_path, monkeypatch):
    rc, _, err = cli("app", "list")
    assert rc == 1 and "modelgate init" in err

    rc, out, _ = cli("init")
    assert rc == 0 and "admin / " in out
    password = out.split("admin / ")[1].split()[0]
    rc, out, _ = cli("init")
    assert rc == 0 and password not in out and "no admin created" in out

    monkeypatch.setenv("OPENAI_KEY", "sk-upstream-secret-abcdef123456")
    rc, out, _ = cli("provider", "add", "--name", "oa", "--kind", "openai", "--key-env", "OPENAI_KEY",
                     "--key", "sk-upstream-second-xyz-9876", "--option", "organization=org-1")
    assert rc == 0 and "2 key(s)" in out
    rc, out, _ = cli("provider", "list")
    assert "sk-upstream" not in out and "…3456" in out and "…9876" in out
    rc, out, _ = cli("--json", "provider", "list")
    (prov,) = _json(out)
    assert prov["options"] == {"organization": "org-1"} and "sk-upstream" not in out

    rc, out, _ = cli("channel", "add", "--name", "main", "--provider", "oa", "--model", "gpt-4o",
                     "--model", "fast=gpt-4o-mini", "--priority", "2", "--json")
    ch = _json(out)
    assert rc == 0 and ch["priority"] == 2
    assert {(m["model_id"], m["upstream_model"]) for m in ch["models"]} == {("gpt-4o", "gpt-4o"),
                                                                            ("fast", "gpt-4o-mini")}

    assert cli("app", "create", "--name", "web", "--timeout", "30")[0] == 0
    rc, out, _ = cli("app", "authorize", "--app", "web", "--channel", "main")
    assert rc == 0
    rc, out, _ = cli("--json", "app", "list")
    assert _json(out)[0]["channel_ids"] == [ch["id"]] and _json(out)[0]["timeout_seconds"] == 30

    rc, out, _ = cli("key", "create", "--app", "web", "--name", "ci")
    assert rc == 0 and "cannot be shown again" in out
    plaintext = next(w for w in out.split() if w.startswith("sk-"))
    rc, out, _ = cli("key", "list")
    assert plaintext not in out and plaintext[:8] + "…" in out and "ENABLED" in out
    assert "DISABLED" in cli("key", "disable", "1")[1]
    assert "DELETED" in cli("key", "delete", "1")[1]
    assert cli("key", "list")[1].strip() == "(none)"

    rc, _, err = cli("app", "create", "--name", "web")
    assert rc == 1 and "CONFLICT" in err
    rc, out, _ = cli("--json", "channel", "delete", "nope")
    assert rc == 1 and _json(out)["error"]["code"] == "NOT_FOUND"

    assert cli("blacklist", "add", "10.0.0.0/8", "--reason", "lab")[0] == 0
    assert "10.0.0.0/8" in cli("blacklist", "list")[1]
    assert cli("blacklist", "remove", "10.0.0.0/8")[0] == 0
    assert cli("blacklist", "list")[1].strip() == "(none)"

    rc, out, _ = cli("model", "list", "--channel", "main", "--json")
    fast = next(m for m in _json(out) if m["model_id"] == "fast")
    assert "DEPRECATED" in cli("model", "set-state", str(fast["id"]), "deprecated")[1]
    assert [m["model_id"] for m in _json(cli("--json", "model", "list", "--state", "DEPRECATED")[1])] == ["fast"]

    rc, out, _ = cli("user", "create", "--username", "ops", "--role", "user", "--password", "long-enough-pw")
    assert rc == 0 and "long-enough-pw" not in out
    assert "ops" in cli("user", "list")[1]
    assert "(0 of 0)" in cli("calls", "list")[1]
    # the encryption key file written on first use is reused, so stored keys stay readable
    assert (tmp_path / "data" / "encryption.key").is_file()


def test_cli_provider_needs_base_url_and_key_env(cli):
    cli("migrate")
    rc, _, err = cli("provider", "add", "--name", "x", "--kind", "openai-compatible")
    assert rc == 1 and "VALIDATION_ERROR" in err
    rc, _, err = cli("provider", "add", "--name", "x", "--kind", "openai", "--key-env", "MG_UNSET_VAR_123")
    assert rc == 1 and "MG_UNSET_VAR_123" in err


def test_cli_config_file(cli, tmp_path, monkeypatch):
    monkeypatch.delenv("MODELGATE_DATA_DIR")  # the environment would win over the file
    cfg = tmp_path / "mg.yaml"
    cfg.write_text(f"data_dir: {tmp_path / 'other'}\ngateway:\n  default_app_timeout_seconds: 42\n")
    assert cli("--config", str(cfg), "init")[0] == 0
    rc, out, _ = cli("app", "create", "--name", "a", "--json", "--config", str(cfg))
    assert rc == 0 and _json(out)["timeout_seconds"] == 42
    assert (tmp_path / "other" / "modelgate.db").is_file()


def test_cli_production_without_key_exits_with_code(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("ENCRYPTION_KEY", "DATABASE_URL", "MODELGATE_CONFIG")}
    env.update(MODELGATE_ENV="production", MODELGATE_DATA_DIR=str(tmp_path / "data"))
    proc = subprocess.run([sys.executable, "-m", "modelgate.cli", "init"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode != 0
    assert "ENCRYPTION_KEY_MISSING" in proc.stderr
    assert not (tmp_path / "data" / "encryption.key").exists()


def test_cli_breaker_recover_records_one_request_per_endpoint(cli):
    assert cli("init")[0] == 0
    assert cli("provider", "add", "--name", "oa", "--kind", "openai", "--key", "k-one-123456789",
               "--key", "k-two-123456789")[0] == 0
    assert cli("channel", "add", "--name", "main", "--provider", "oa", "--model", "gpt-4o")[0] == 0
    rc, out, _ = cli("--json", "breaker", "recover", "--channel", "main")
    assert rc == 0 and len(_json(out)["recovered"]) == 2
    rc, _, err = cli("breaker", "recover", "--channel", "main", "--endpoint", "p9:k9")
    assert rc != 0 and "p9:k9" in err


def test_cli_tokens_and_audit(cli):
    assert cli("init")[0] == 0
    rc, out, _ = cli("token", "create", "--name", "ci", "--quiet")
    token = out.strip()
    assert rc == 0 and token.startswith("mgt_") and len(out.splitlines()) == 1
    rc, out, _ = cli("token", "list")
    assert token not in out and token[:12] in out and "ADMIN" in out
    rc, out, _ = cli("--json", "token", "revoke", "1")
    assert rc == 0 and _json(out)["revoked_at"]
    assert cli("token", "create", "--name", "x", "--user", "nobody")[0] == 1
    rc, out, _ = cli("--json", "audit", "list")
    rows = _json(out)["items"]
    assert [(r["action"], r["status"]) for r in rows] == [
        ("cli token create", 404), ("cli token revoke", 200), ("cli token create", 200)]
    assert rows[0]["via"] == "cli" and rows[0]["actor"].startswith("cli (") and "name=x" in rows[0]["target"]
    assert token not in out
