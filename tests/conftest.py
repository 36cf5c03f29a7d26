"""Shared fixtures. Keep additive: each fixture owns one concern."""

from __future__ import annotations

import os
import uuid

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


@pytest.fixture
async def services(database, secret_box, settings):
    """The service layer over `database`; `services.changes` counts on_change calls."""
    from modelgate.services import Services

    svc = Services(database, secret_box, settings)
    svc.changes = 0

    def on_change() -> None:
        svc.changes += 1

    svc.on_change = on_change
    return svc


@pytest.fixture
async def openai_upstream():
    """A fake OpenAI-format upstream (tests/fakes/openai_upstream.py) on a random local port."""
    from tests.fakes.openai_upstream import FakeOpenAI

    fake = await FakeOpenAI().start()
    yield fake
    await fake.close()


@pytest.fixture
async def anthropic_upstream():
    """A fake messages-protocol upstream (tests/fakes/anthropic_upstream.py) on a random local port."""
    from tests.fakes.anthropic_upstream import FakeAnthropic

    fake = await FakeAnthropic().start()
    yield fake
    await fake.close()


@pytest.fixture
async def gateway(tmp_path):
    """The real gateway served by uvicorn on a random local port (tests/gateway_harness.py)."""
    from tests.gateway_harness import GatewayHarness, harness_settings

    harness = await GatewayHarness(harness_settings(tmp_path)).start()
    yield harness
    await harness.stop()


@pytest.fixture
def typed_view_misses(monkeypatch):
    """The requests, as (protocol, top-level keys), that a codec's typed view left to its own path and that
    path then accepted. The real clients' requests should all take the view: one that does not costs the
    client's every call two to three times the reading (protocols/typed_view.py), with nothing failing to
    tell. A request the codec refuses is no miss (Claude Code's first turn draws a 400 by design)."""
    from modelgate.errors import GatewayError
    from modelgate.gateway.inference import read_request
    from modelgate.protocols.chat import ChatCodec
    from modelgate.protocols.messages import MessagesCodec
    from modelgate.protocols.responses import ResponsesCodec

    misses: list[tuple[str, list[str]]] = []
    for codec in (ChatCodec, MessagesCodec, ResponsesCodec):
        def read_typed(self, raw, headers, _original=codec.read_typed):
            read = _original(self, raw, headers)
            if read is None:
                try:
                    body, _, _ = read_request(self, raw, headers, typed=False)  # the codec's own path
                except GatewayError:
                    return read
                misses.append((self.protocol.value, sorted(body)))
            return read

        monkeypatch.setattr(codec, "read_typed", read_typed)
    return misses


@pytest.fixture
async def pg_url():
    """The URL of a fresh, migrated PostgreSQL database, dropped afterwards."""
    from modelgate.storage.db import Database

    asyncpg = pytest.importorskip("asyncpg")
    try:
        admin = await asyncpg.connect("postgresql://postgres@127.0.0.1:5432/test", timeout=3)
    except (OSError, asyncpg.PostgresError) as exc:
        pytest.skip(f"PostgreSQL at 127.0.0.1:5432 is not reachable: {exc}")
    name = f"mg_durability_{uuid.uuid4().hex[:12]}"
    await admin.execute(f"CREATE DATABASE {name}")
    try:
        db = Database(f"postgresql+asyncpg://postgres@127.0.0.1:5432/{name}")
        await db.migrate()
        await db.dispose()
        yield f"postgresql+asyncpg://postgres@127.0.0.1:5432/{name}"
    finally:
        await admin.execute(f"DROP DATABASE {name} WITH (FORCE)")
        await admin.close()
