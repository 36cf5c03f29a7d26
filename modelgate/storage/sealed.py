"""The upstream keys sealed at rest with ENCRYPTION_KEY: checking them at start-up, re-sealing them.

A gateway whose key cannot open the stored upstream keys would call every
upstream without a key; it refuses to start instead, naming the cause.
"""

from __future__ import annotations

from sqlalchemy import func, select, update

from modelgate.auth.crypto import ConfigError, DecryptionError, SecretBox
from modelgate.storage.db import Database
from modelgate.storage.models import ProviderKey


async def sealed_count(db: Database) -> int:
    async with db.session() as s:
        return int((await s.execute(select(func.count()).select_from(ProviderKey))).scalar_one())


async def undecryptable(db: Database, box: SecretBox) -> list[int]:
    """Ids of stored upstream keys this box cannot open."""
    async with db.session() as s:
        rows = (await s.execute(select(ProviderKey.id, ProviderKey.secret_encrypted))).all()
    bad = []
    for key_id, sealed in rows:
        try:
            box.decrypt(sealed)
        except DecryptionError:
            bad.append(key_id)
    return bad


async def require_decryptable(db: Database, box: SecretBox) -> None:
    bad = await undecryptable(db, box)
    if bad:
        raise mismatch(bad)


def mismatch(bad: list[int]) -> ConfigError:
    return ConfigError(
            f"ENCRYPTION_KEY_MISMATCH: {len(bad)} stored upstream key(s) (ids {', '.join(map(str, bad[:10]))}"
            f"{', …' if len(bad) > 10 else ''}) cannot be decrypted with the configured ENCRYPTION_KEY. It was "
            "lost or changed: start with the key they were stored under (rotate with `modelgate rotate-key`), "
            "or remove and re-add those upstream keys.")


async def reseal(db: Database, old: SecretBox, new: SecretBox) -> int:
    """Re-encrypt every stored upstream key under `new`, in one transaction; all or nothing."""
    async with db.session() as s, s.begin():
        rows = (await s.execute(select(ProviderKey.id, ProviderKey.secret_encrypted).with_for_update())).all()
        resealed = []
        for key_id, sealed in rows:
            try:
                resealed.append((key_id, new.encrypt(old.decrypt(sealed))))
            except DecryptionError:
                raise ConfigError(
                    f"ENCRYPTION_KEY_MISMATCH: stored upstream key {key_id} cannot be decrypted with the current "
                    "ENCRYPTION_KEY; nothing was changed") from None
        for key_id, sealed in resealed:
            await s.execute(update(ProviderKey).where(ProviderKey.id == key_id).values(secret_encrypted=sealed))
    return len(resealed)
