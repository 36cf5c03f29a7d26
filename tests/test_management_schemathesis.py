"""Property-based run of the management API from its own OpenAPI document (schemathesis): whatever
the generated request, no answer is a server error (issue 12, done means). Bounded: a few examples
per operation, about a minute on a 2-core machine."""

from __future__ import annotations

import asyncio
import re
import threading
from typing import Any

import pytest

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402

from tests.gateway_harness import GatewayHarness, harness_settings  # noqa: E402

PASSWORD = "schemathesis-admin-pw"


class ServerThread:
    """The gateway served from its own thread and event loop (schemathesis calls it synchronously)."""

    def __init__(self, tmp_path: Any) -> None:
        self.settings = harness_settings(tmp_path)
        self.url = ""
        self.ready = threading.Event()
        self.error: BaseException | None = None
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    async def _main(self) -> None:
        try:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            harness = await GatewayHarness(self.settings).start()
            await harness.services.users.create("fuzz-admin", PASSWORD, "ADMIN")
            await harness.wire("http://127.0.0.1:9/v1", ["gpt-test"])  # some rows to address by id
            self.url = harness.url
        except BaseException as exc:
            self.error = exc
            self.ready.set()
            raise
        self.ready.set()
        await self._stop.wait()
        await harness.stop()

    def __enter__(self) -> "ServerThread":
        self._thread.start()
        self.ready.wait(60)
        if self.error is not None:
            raise self.error
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with ServerThread(tmp_path_factory.mktemp("schemathesis")) as running:
        yield running


@pytest.fixture(scope="module")
def auth(server) -> dict[str, str]:
    import httpx

    login = httpx.post(f"{server.url}/api/v1/auth/login", json={"username": "fuzz-admin", "password": PASSWORD},
                       timeout=30)
    assert login.status_code == 200, login.text
    return {"Cookie": f"mg_session={login.cookies['mg_session']}",
            "X-CSRF-Token": login.json()["data"]["csrfToken"]}


def test_management_api_has_no_server_errors(server, auth):
    import httpx

    document = httpx.get(f"{server.url}/api/v1/openapi.json", timeout=120).json()
    schema = schemathesis.openapi.from_dict(document)
    errors: list[str] = []
    operations = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        # Logging out or changing the password would end the session the rest of the run uses.
        if re.search(r"/auth/(logout|password)$", operation.path):
            continue
        operations += 1

        @given(case=operation.as_strategy())
        @settings(max_examples=6, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck), phases=[Phase.explicit, Phase.generate])
        def run(case: Any) -> None:
            response = case.call(base_url=f"{server.url}/api/v1", headers=auth, timeout=30)
            if response.status_code >= 500:
                errors.append(f"{case.method} {case.formatted_path} {case.query or ''} {case.body!r:.200} -> "
                              f"{response.status_code}: {response.text[:200]}")

        run()
    assert operations > 40
    assert errors == []
