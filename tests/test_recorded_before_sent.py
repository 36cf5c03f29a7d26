"""Every whole answer, an error or not, is recorded (journaled) before its first byte is sent: a process
killed while sending it keeps the call's row (issue 12 item 3; a SIGKILL among 429 answers once lost one)."""

from __future__ import annotations

import asyncio

import orjson

from tests.gateway_harness import GatewayHarness, harness_settings


async def _call(gateway: GatewayHarness, key: str, model: str) -> tuple[int, bool]:
    """POST a chat call straight to the ASGI app; the status, and whether the row was queued (and so
    journaled) when the answer's headers were sent."""
    body = orjson.dumps({"model": model, "messages": [{"role": "user", "content": "hi"}]})
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
             "scheme": "http", "path": "/v1/chat/completions", "raw_path": b"/v1/chat/completions",
             "query_string": b"", "root_path": "", "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 80),
             "headers": [(b"authorization", f"Bearer {key}".encode()), (b"content-type", b"application/json"),
                         (b"content-length", str(len(body)).encode())]}
    messages = [{"type": "http.request", "body": body, "more_body": False}]
    seen: dict[str, object] = {}

    async def receive():
        if messages:
            return messages.pop(0)
        await asyncio.Event().wait()  # the client stays connected

    async def send(message):
        if message["type"] == "http.response.start":
            trace_id = dict(message["headers"])[b"x-trace-id"].decode()
            queued = {row.trace_id for row in gateway.runtime.writer._calls.rows}
            seen.update(status=message["status"], recorded=trace_id in queued)

    await gateway.app(scope, receive, send)
    return seen["status"], seen["recorded"]  # type: ignore[return-value]


async def test_answers_and_errors_are_recorded_before_they_are_sent(tmp_path, openai_upstream):
    gateway = await GatewayHarness(harness_settings(tmp_path, usage__flush_interval_seconds=3600)).start()
    try:
        wired = await gateway.wire(openai_upstream.base_url, ["gpt-test"], rate_capacity=2, rate_refill=0.001)
        assert await _call(gateway, wired.key, "gpt-test") == (200, True)
        assert await _call(gateway, wired.key, "no-such-model") == (404, True)
        assert await _call(gateway, wired.key, "gpt-test") == (429, True)  # the bucket's two tokens are spent
        assert await _call(gateway, "sk-not-a-key", "gpt-test") == (401, True)
    finally:
        await gateway.stop()
