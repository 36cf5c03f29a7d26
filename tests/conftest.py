"""Shared fixtures. Keep additive: each fixture owns one concern."""

from __future__ import annotations

import os

import pytest

from modelgate.auth.crypto import SecretBox
from modelgate.config import Settings
from modelgate.storage.db import Database


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings(data_dir=str(tmp_path / "data"))


@pytest.fixture
def secret_box() -> SecretBox:
    return SecretBox(os.urandom(32))


@pytest.fixture
async def database(settings):
    """A migrated SQLite database in the test's temporary data dir."""
    db = Database.from_settings(settings)
    await db.migrate()
    yield db
    await db.dispose()
