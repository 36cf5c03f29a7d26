"""Configuration files: a key that names no setting stops the start, naming the key (issue 12 item 9)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from modelgate.config import ConfigError, load_settings


@pytest.mark.parametrize("text, named", [
    ("gateway:\n  retyr:\n    jitter: false\n", "gateway.retyr"),
    ("gateway:\n  retry:\n    jittter: false\n", "gateway.retry.jittter"),
    ("usage:\n  batch_size: 10\n  flush_intervall_seconds: 1\n", "usage.flush_intervall_seconds"),
    ("databse_url: sqlite:///x.db\n", "databse_url"),
])
def test_unknown_keys_are_refused_and_named(tmp_path, text, named):
    path = tmp_path / "modelgate.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match="^CONFIG_UNKNOWN_KEY") as err:
        load_settings(str(path), environ={})
    assert named in str(err.value)


def test_known_keys_load(tmp_path):
    path = tmp_path / "modelgate.yaml"
    path.write_text("gateway:\n  retry:\n    jitter: false\nusage:\n  db_timeout_seconds: 2\nlog_format: json\n")
    settings = load_settings(str(path), environ={})
    assert (settings.gateway.retry.jitter, settings.usage.db_timeout_seconds, settings.log_format) == (False, 2, "json")


def test_serve_with_a_typo_in_the_config_file_exits_naming_it(tmp_path):
    path = tmp_path / "modelgate.yaml"
    path.write_text("gateway:\n  retyr:\n    jitter: false\n")
    proc = subprocess.run([sys.executable, "-m", "modelgate.cli", "--config", str(path), "serve"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode != 0
    assert "CONFIG_UNKNOWN_KEY" in proc.stderr + proc.stdout and "gateway.retyr" in proc.stderr + proc.stdout


@pytest.mark.parametrize("environ, named", [
    ({"SERVER_PORT": "eighty"}, "server.port"),
    ({"SERVER_DRAIN_NOTICE_SECONDS": "601"}, "server.drain_notice_seconds"),
    ({"LOG_FORMAT": "xml"}, "log_format"),
    ({"GATEWAY_TRUST_FORWARDED_FOR": "perhaps"}, "gateway.trust_forwarded_for"),
])
def test_a_value_of_the_wrong_kind_stops_the_start_naming_the_setting(environ, named):
    with pytest.raises(ConfigError, match="^CONFIG_INVALID") as err:
        load_settings(environ=environ)
    assert named in str(err.value)


@pytest.mark.parametrize("word, meaning", [
    ("true", True), ("TRUE", True), ("1", True), ("yes", True), ("on", True),
    ("false", False), ("0", False), ("no", False), ("Off", False),
])
def test_yes_and_no_in_environment_variables(word, meaning):
    settings = load_settings(environ={"GATEWAY_TRUST_FORWARDED_FOR": word, "GATEWAY_RETRY_JITTER": word})
    assert settings.gateway.trust_forwarded_for is meaning and settings.gateway.retry.jitter is meaning


def test_environment_values_become_numbers():
    settings = load_settings(environ={"SERVER_PORT": "9000", "USAGE_DB_TIMEOUT_SECONDS": "2.5",
                                      "GATEWAY_RETRY_UPSTREAM_ERROR_MAX_RETRIES": "4"})
    assert (settings.server.port, settings.usage.db_timeout_seconds,
            settings.gateway.retry.upstream_error.max_retries) == (9000, 2.5, 4)
