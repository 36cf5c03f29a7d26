import base64
import hashlib
import os
import stat

import pytest

from modelgate.auth import keys, passwords
from modelgate.auth.crypto import (
    ConfigError,
    DecryptionError,
    SecretBox,
    derive_key,
    load_encryption_key,
)
from modelgate.config import Settings


def test_secretbox_roundtrip_uses_fresh_nonce():
    box = SecretBox(os.urandom(32))
    a = box.encrypt("upstream-secret")
    b = box.encrypt("upstream-secret")
    assert a != b and a[:12] != b[:12]
    assert b"upstream-secret" not in a
    assert box.decrypt(a) == "upstream-secret" == box.decrypt(b)


def test_secretbox_wrong_key_or_tamper_fails():
    sealed = SecretBox(os.urandom(32)).encrypt("x")
    with pytest.raises(DecryptionError):
        SecretBox(os.urandom(32)).decrypt(sealed)
    box = SecretBox(b"k" * 32)
    sealed = bytearray(box.encrypt("hello"))
    sealed[-1] ^= 1
    with pytest.raises(DecryptionError):
        box.decrypt(bytes(sealed))


def test_derive_key_accepts_base64_forms_and_passphrases():
    raw = bytes(range(32))
    assert derive_key(base64.urlsafe_b64encode(raw).decode()) == raw
    assert derive_key(base64.b64encode(raw).decode().rstrip("=")) == raw
    pw = derive_key("correct horse battery staple")
    assert len(pw) == 32 and pw == derive_key("correct horse battery staple")
    assert pw != derive_key("another passphrase")


def test_production_without_key_is_config_error(tmp_path):
    settings = Settings(env="production", data_dir=str(tmp_path))
    with pytest.raises(ConfigError) as exc:
        load_encryption_key(settings)
    assert str(exc.value) == "ENCRYPTION_KEY_MISSING"
    assert not (tmp_path / "encryption.key").exists()


def test_production_with_key(tmp_path):
    raw = os.urandom(32)
    settings = Settings(env="production", data_dir=str(tmp_path), encryption_key=base64.b64encode(raw).decode())
    assert load_encryption_key(settings) == raw


def test_local_mode_generates_and_reuses_key_file(tmp_path, caplog):
    settings = Settings(data_dir=str(tmp_path / "data"))
    first = load_encryption_key(settings)
    path = tmp_path / "data" / "encryption.key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert "ENCRYPTION_KEY not set" in caplog.text
    assert load_encryption_key(settings) == first
    sealed = SecretBox(first).encrypt("v")
    assert SecretBox(load_encryption_key(settings)).decrypt(sealed) == "v"


def test_api_key_helpers():
    key = keys.generate_api_key()
    assert key.startswith("sk-") and len(key) > 40
    assert keys.generate_api_key() != key
    assert keys.hash_api_key(key) == hashlib.sha256(key.encode()).hexdigest()
    assert keys.key_prefix(key) == key[:8] + "…"


def test_passwords():
    h = passwords.hash_password("s3cret!")
    assert h.startswith("$argon2") and "s3cret!" not in h
    assert passwords.verify_password(h, "s3cret!")
    assert not passwords.verify_password(h, "wrong")
    assert not passwords.verify_password("not-a-hash", "x")
    assert passwords.needs_rehash(h) is False


@pytest.mark.parametrize("weak", ["changeme", "correct horse battery staple", "a" * 64, "ab" * 20])
def test_production_refuses_a_weak_passphrase(tmp_path, weak):
    settings = Settings(env="production", data_dir=str(tmp_path), encryption_key=weak)
    with pytest.raises(ConfigError, match="^ENCRYPTION_KEY_WEAK"):
        load_encryption_key(settings)
    # Local mode warns but starts.
    assert len(load_encryption_key(Settings(data_dir=str(tmp_path), encryption_key=weak))) == 32


def test_production_accepts_a_long_varied_passphrase(tmp_path):
    settings = Settings(env="production", data_dir=str(tmp_path),
                        encryption_key="plover-Quartz-7-estuary-Nimbus-harbour-2x")
    assert len(load_encryption_key(settings)) == 32
