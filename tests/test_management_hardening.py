"""Management API input bounds (issue 12 item 5): ids, integers, text and timeouts never reach a 500."""

from __future__ import annotations

import pytest

from tests import test_api_base as base
from tests.test_api_base import Env, as_admin, assert_envelope_error
from tests.test_api_resources import _provider_and_channel

api = base.api  # the shared fixture


@pytest.mark.parametrize("path_id", ["1.0", "+1", "1_0", " 1", "0", "-1", str(2**63), str(2**70)])
async def test_path_ids_are_strict_decimal_integers(api: Env, path_id: str) -> None:
    c = await as_admin(api)
    _, channel = await _provider_and_channel(c)
    assert channel["id"] == 1
    r = await c.delete(f"/api/v1/channels/{path_id}")
    assert_envelope_error(r, 400, "VALIDATION_ERROR")
    assert (await c.get("/api/v1/channels/1")).status_code == 200, "channel 1 is still there"
    assert_envelope_error(await c.get(f"/api/v1/applications/{path_id}"), 400, "VALIDATION_ERROR")


async def test_big_integers_in_bodies_and_queries_are_400(api: Env) -> None:
    c = await as_admin(api)
    provider, channel = await _provider_and_channel(c)
    cases = [
        c.post("/api/v1/channels", json={"name": "big", "providerId": 2**63, "models": ["m"]}),
        c.patch(f"/api/v1/channels/{channel['id']}", json={"priority": 2**70}),
        c.post("/api/v1/applications", json={"name": "a", "channelIds": [2**64]}),
        c.put(f"/api/v1/applications/{1}/channels", json={"channelIds": [2**63 - 1]}),
        c.get("/api/v1/call-logs", params={"keyId": str(2**63)}),
        c.get("/api/v1/call-logs", params={"offset": str(2**63)}),
    ]
    for call in cases:
        assert_envelope_error(await call, 400, "VALIDATION_ERROR")


async def test_text_and_timeouts_are_bounded(api: Env) -> None:
    c = await as_admin(api)
    for body in ({"name": "nul\x00name"}, {"name": "ok", "timeout": 1e12}, {"name": "ok", "description": "d" * 70_000},
                 {"name": "ok", "timeout": 0}):
        assert_envelope_error(await c.post("/api/v1/applications", json=body), 400, "VALIDATION_ERROR")
    r = await c.post("/api/v1/providers", json={"name": "p", "kind": "openai", "options": {"deep": {"x": "\x00"}}})
    assert_envelope_error(r, 400, "VALIDATION_ERROR")
    r = await c.post("/api/v1/applications", json={"name": "fine", "timeout": 3600})
    assert r.status_code == 201, r.text
