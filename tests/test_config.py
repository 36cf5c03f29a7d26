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
