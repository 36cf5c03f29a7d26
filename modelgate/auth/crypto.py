"""Encryption of upstream provider keys at rest (spec 5 rule 7).

Values are sealed with AES-256-GCM; each value gets a fresh random 12-byte
nonce and is stored as nonce || ciphertext+tag.
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
import secrets
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from modelgate.config import ConfigError, Settings

__all__ = ["ConfigError", "DecryptionError", "SecretBox", "derive_key", "load_encryption_key"]

log = logging.getLogger(__name__)

NONCE_SIZE = 12
KEY_SIZE = 32
KEY_FILE_NAME = "encryption.key"


class DecryptionError(Exception):
    """A sealed value cannot be opened: wrong ENCRYPTION_KEY or corrupted data."""


class SecretBox:
    def __init__(self, key: bytes) -> None:
        if len(key) != KEY_SIZE:
            raise ValueError("encryption key must be 32 bytes")
        self._aead = AESGCM(key)

    def encrypt(self, plaintext: str) -> bytes:
        nonce = os.urandom(NONCE_SIZE)
        return nonce + self._aead.encrypt(nonce, plaintext.encode(), None)

    def decrypt(self, sealed: bytes) -> str:
        if len(sealed) < NONCE_SIZE + 16:
            raise DecryptionError("sealed value too short")
        try:
            return self._aead.decrypt(sealed[:NONCE_SIZE], sealed[NONCE_SIZE:], None).decode()
        except InvalidTag:
            raise DecryptionError("cannot decrypt value: wrong ENCRYPTION_KEY or corrupted data") from None


def _decode_base64_key(value: str) -> bytes | None:
    padded = value + "=" * (-len(value) % 4)
    for decode in (base64.urlsafe_b64decode, base64.standard_b64decode):
        try:
            raw = decode(padded)
        except (binascii.Error, ValueError):
            continue
        if len(raw) == KEY_SIZE:
            return raw
    return None


def derive_key(value: str) -> bytes:
    """Turn ENCRYPTION_KEY into 32 key bytes.

    A base64 value of exactly 32 bytes is used as is. Anything else is treated
    as a passphrase and stretched with HKDF-SHA256: operators often set a
    memorable string, and refusing it would only push them to weaker
    workarounds. HKDF (not a slow password hash) because the key is derived at
    every start-up and a passphrase operators choose for a server secret is
    expected to be long; a fixed salt keeps the derivation deterministic.
    """
    raw = _decode_base64_key(value.strip())
    if raw is not None:
        return raw
    return HKDF(
        algorithm=hashes.SHA256(), length=KEY_SIZE, salt=b"modelgate-encryption-key", info=b"secretbox-v1"
    ).derive(value.encode())


MIN_PASSPHRASE_LENGTH = 32
MIN_PASSPHRASE_DISTINCT = 10


def weak_passphrase(value: str) -> bool:
    """A passphrase (anything but a base64 32-byte key) too short or too repetitive to be a key.

    The rule: at least 32 characters with at least 10 different ones. HKDF does not stretch, so the
    passphrase itself must carry the strength; `openssl rand -base64 32` gives a proper key.
    """
    value = value.strip()
    if _decode_base64_key(value) is not None:
        return False
    return len(value) < MIN_PASSPHRASE_LENGTH or len(set(value)) < MIN_PASSPHRASE_DISTINCT


def load_encryption_key(settings: Settings, *, may_generate: bool = True) -> bytes:
    """`may_generate=False` when the database already holds sealed values: a fresh key could not open them."""
    if settings.encryption_key:
        if weak_passphrase(settings.encryption_key):
            if settings.production:
                raise ConfigError(
                    f"ENCRYPTION_KEY_WEAK: use a base64 32-byte key (openssl rand -base64 32) or a passphrase of "
                    f"at least {MIN_PASSPHRASE_LENGTH} characters with {MIN_PASSPHRASE_DISTINCT} different ones")
            log.warning("ENCRYPTION_KEY is a weak passphrase; production mode refuses it")
        return derive_key(settings.encryption_key)
    if settings.production:
        raise ConfigError("ENCRYPTION_KEY_MISSING")
    # Local mode: keep a generated key next to the database so restarts can
    # still decrypt the stored upstream keys.
    data_dir = Path(settings.data_dir)
    path = key_file(settings)
    if not path.is_file() and not may_generate:
        raise ConfigError(
            f"ENCRYPTION_KEY_MISSING: the database holds encrypted upstream keys but neither ENCRYPTION_KEY nor "
            f"the key file {path} is there; restore the key they were stored under")
    if path.is_file():
        raw = _decode_base64_key(path.read_text().strip())
        if raw is None:
            raise ConfigError(f"ENCRYPTION_KEY_INVALID: {path} does not hold a base64 32-byte key")
        log.info("ENCRYPTION_KEY not set; using the local key file %s (set ENCRYPTION_KEY in production)", path)
        return raw
    data_dir.mkdir(parents=True, exist_ok=True)
    raw = secrets.token_bytes(KEY_SIZE)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(base64.urlsafe_b64encode(raw).decode() + "\n")
    log.warning(
        "ENCRYPTION_KEY not set; generated a local key in %s. Back it up: stored upstream keys cannot be "
        "decrypted without it. Production deployments must set ENCRYPTION_KEY.",
        path,
    )
    return raw


def key_file(settings: Settings) -> Path:
    return Path(settings.data_dir) / KEY_FILE_NAME


def generate_key() -> str:
    """A new random ENCRYPTION_KEY (32 bytes, URL-safe base64)."""
    return base64.urlsafe_b64encode(secrets.token_bytes(KEY_SIZE)).decode()


def load_secret_box(settings: Settings) -> SecretBox:
    return SecretBox(load_encryption_key(settings))
