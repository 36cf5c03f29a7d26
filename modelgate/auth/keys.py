"""Gateway API keys: generation, lookup hash and display prefix."""

from __future__ import annotations

import hashlib
import secrets

KEY_PREFIX = "sk-"


def generate_api_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_api_key(plaintext: str) -> str:
    # A key carries 256 random bits, so brute force is hopeless and a fast,
    # unsalted sha256 is enough; it also lets the hot path look a key up in a
    # dict per request. Slow salted hashes (argon2) are for low-entropy passwords.
    return hashlib.sha256(plaintext.encode()).hexdigest()


def key_prefix(plaintext: str) -> str:
    return plaintext[:8] + "…"
