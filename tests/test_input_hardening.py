"""Hostile input on the inference and management paths: a clear 4xx in the spec's shape, never a 500,
a stall, growth, a forged log line or a poisoned call-log row (issue 12 items 1, 5-7)."""

from __future__ import annotations

import httpx
from sqlalchemy import select

from modelgate.storage.models import CallLog


async def _rows(gateway) -> list[CallLog]:
    await gateway.runtime.writer.flush()
    async with gateway.runtime.db.session() as s:
        return list((await s.scalars(select(CallLog).order_by(CallLog.id))).all())


async def test_forwarded_for_is_recorded_only_when_it_is_an_address(gateway, openai_upstream):
    gateway.settings.gateway.trust_forwarded_for = True
    wired = await gateway.wire(openai_upstream.base_url, ["gpt-test"])
    body = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]}
    async with httpx.AsyncClient(base_url=gateway.url, headers={"authorization": f"Bearer {wired.key}"}) as http:
        for forwarded in ("203.0.113.7, 10.0.0.1", "not-an-address " + "9" * 5000, "2001:db8::1"):
            resp = await http.post("/v1/chat/completions", json=body, headers={"x-forwarded-for": forwarded})
            assert resp.status_code == 200
    assert [r.client_ip for r in await _rows(gateway)] == ["203.0.113.7", "127.0.0.1", "2001:db8::1"]
