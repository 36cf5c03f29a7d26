"""Hostile input on the inference and management paths: a clear 4xx in the spec's shape, never a 500,
a stall, growth, a forged log line or a poisoned call-log row (issue 12 items 1, 5-7)."""

from __future__ import annotations

import httpx
import orjson
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


CHAT_BODY = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]}
MESSAGES_BODY = {"model": "gpt-test", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}


def _with_nested(body: dict, depth: int) -> bytes:
    """`body` plus an unknown field nested `depth` levels deep (written by hand: encoders stop earlier)."""
    nested = '{"x":[' * (depth // 2) + "1" + "]}" * (depth // 2)
    return orjson.dumps(body)[:-1] + b',"extra_field":' + nested.encode() + b"}"


async def test_deeply_nested_bodies_get_a_400_in_the_protocol_shape(gateway, openai_upstream):
    wired = await gateway.wire(openai_upstream.base_url, ["gpt-test"])
    async with httpx.AsyncClient(base_url=gateway.url, timeout=30) as http:
        for depth in (255, 600, 1000):
            chat = await http.post("/v1/chat/completions", content=_with_nested(CHAT_BODY, depth),
                                   headers={"authorization": f"Bearer {wired.key}"})
            assert chat.status_code == 400, chat.text
            assert chat.json()["error"]["code"] == "invalid_request"
            assert "nested" in chat.json()["error"]["message"]
            msgs = await http.post("/alt/v1/messages", content=_with_nested(MESSAGES_BODY, depth),
                                   headers={"x-api-key": wired.key, "alt-version": "2023-06-01"})
            assert msgs.status_code == 400, msgs.text
            assert msgs.json()["type"] == "error" and msgs.json()["error"]["type"] == "invalid_request_error"
        # Deep but within the limit: served.
        ok = await http.post("/v1/chat/completions", content=_with_nested(CHAT_BODY, 200),
                             headers={"authorization": f"Bearer {wired.key}"})
        assert ok.status_code == 200, ok.text


def _schema_nested(levels: int) -> dict:
    schema: dict = {"type": "object"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


async def test_a_body_within_the_depth_limit_whose_conversion_is_not_gets_a_400(gateway, openai_upstream):
    """A tool schema sits one level deeper in chat's format (tools[].function.parameters) than in messages'
    and the Responses API's: a body at the limit converts to one beyond what can be encoded. The caller gets
    the 400 of a too-deep body in its protocol's shape, not an internal error, and it is recorded."""
    wired = await gateway.wire(openai_upstream.base_url, ["gpt-test"])  # openai-compatible: both convert
    at_limit = _schema_nested(125)  # the messages body is 254 levels deep, its chat conversion 255
    assert orjson.dumps({"model": "m", "tools": [{"input_schema": at_limit}]})  # the body itself encodes
    async with httpx.AsyncClient(base_url=gateway.url, timeout=30) as http:
        msgs = await http.post("/alt/v1/messages", headers={"x-api-key": wired.key, "alt-version": "2023-06-01"},
                               content=orjson.dumps({**MESSAGES_BODY, "tools": [{"name": "t", "input_schema": at_limit}]}))
        assert msgs.status_code == 400, msgs.text
        assert msgs.json()["type"] == "error" and msgs.json()["error"]["type"] == "invalid_request_error"
        assert "nested more than 254 levels" in msgs.json()["error"]["message"]
        responses = await http.post("/v1/responses", headers={"authorization": f"Bearer {wired.key}"}, content=orjson.dumps(
            {"model": "gpt-test", "input": "hi", "tools": [{"type": "function", "name": "t", "parameters": at_limit}]}))
        assert responses.status_code == 400, responses.text
        assert responses.json()["error"]["code"] == "invalid_request"
        assert openai_upstream.requests == [], "a refused body never reaches the upstream"
        # One level less converts and is served.
        served = await http.post("/alt/v1/messages", headers={"x-api-key": wired.key, "alt-version": "2023-06-01"},
                                 content=orjson.dumps({**MESSAGES_BODY, "tools": [{"name": "t", "input_schema": _schema_nested(124)}]}))
        assert served.status_code == 200, served.text
    assert [r.status for r in await _rows(gateway)] == [400, 400, 200]


async def test_temperature_is_validated_on_the_messages_path_as_on_chat(gateway, openai_upstream):
    wired = await gateway.wire(openai_upstream.base_url, ["gpt-test"])
    async with httpx.AsyncClient(base_url=gateway.url) as http:
        for temperature in (-5, 1.5, 1e300):
            resp = await http.post("/alt/v1/messages", json={**MESSAGES_BODY, "temperature": temperature},
                                   headers={"x-api-key": wired.key, "alt-version": "2023-06-01"})
            assert resp.status_code == 400, resp.text
            assert resp.json()["error"]["type"] == "invalid_request_error"
        chat = await http.post("/v1/chat/completions", json={**CHAT_BODY, "temperature": -5},
                               headers={"authorization": f"Bearer {wired.key}"})
        assert chat.status_code == 400
    assert openai_upstream.requests == [], "a refused body never reaches the upstream"


async def test_invalid_keys_are_not_memoised_and_huge_keys_not_hashed(gateway, openai_upstream, monkeypatch):
    wired = await gateway.wire(openai_upstream.base_url, ["gpt-test"])
    async with httpx.AsyncClient(base_url=gateway.url) as http:
        for i in range(300):
            resp = await http.post("/v1/chat/completions", json=CHAT_BODY,
                                   headers={"authorization": f"Bearer sk-guess-{i:04d}" + "x" * 40})
            assert resp.status_code == 401
        hashed: list[int] = []
        real = gateway.runtime.hash_key
        monkeypatch.setattr(gateway.runtime, "hash_key", lambda raw: hashed.append(len(raw)) or real(raw))
        huge = await http.post("/v1/chat/completions", json=CHAT_BODY,
                               headers={"authorization": "Bearer sk-" + "a" * 60_000})
        assert huge.status_code == 401 and huge.json() == {"code": "UNAUTHORIZED", "message": "Invalid API key"}
        assert hashed == []
        good = await http.post("/v1/chat/completions", json=CHAT_BODY,
                               headers={"authorization": f"Bearer {wired.key}"})
        assert good.status_code == 200
    assert list(gateway.runtime._key_hashes) == [wired.key.encode()]


async def test_a_huge_model_name_is_not_reflected_logged_or_recorded_whole(gateway, openai_upstream, caplog):
    wired = await gateway.wire(openai_upstream.base_url, ["gpt-test"])
    model = "evil\nmodelgate.gateway INFO forged line " + "m" * 1_000_000
    async with httpx.AsyncClient(base_url=gateway.url, timeout=30) as http:
        resp = await http.post("/v1/chat/completions", json={**CHAT_BODY, "model": model},
                               headers={"authorization": f"Bearer {wired.key}"})
    assert resp.status_code == 404
    assert len(resp.content) < 1000 and "\\n" in resp.json()["error"]["message"]
    row = (await _rows(gateway))[-1]
    assert len(row.model) <= 128 and row.model.startswith("evil\\nmodelgate")
    assert all(len(r.getMessage()) < 2000 for r in caplog.records)


def test_log_lines_escape_control_characters_and_json_lines_carry_the_trace_id():
    import logging

    import orjson

    from modelgate.logs import EscapingFormatter, FORMAT, JsonFormatter
    from modelgate.tracing import current_trace_id

    record = logging.LogRecord("modelgate.gateway", logging.INFO, __file__, 1,
                               "call refused model=%s", ("x\n2026-01-01 INFO modelgate.gateway forged\r\x00",), None)
    text = EscapingFormatter(FORMAT).format(record)
    assert "\n" not in text and "\r" not in text and "\x00" not in text
    assert "x\\n2026-01-01 INFO modelgate.gateway forged\\r\\x00" in text
    token = current_trace_id.set("0190c0de-0000-7000-8000-000000000001")
    try:
        line = JsonFormatter().format(record)
    finally:
        current_trace_id.reset(token)
    assert "\n" not in line
    parsed = orjson.loads(line)
    assert parsed["trace_id"] == "0190c0de-0000-7000-8000-000000000001"
    assert parsed["message"] == "call refused model=x\n2026-01-01 INFO modelgate.gateway forged\r\x00"
    assert parsed["level"] == "INFO" and parsed["logger"] == "modelgate.gateway"
