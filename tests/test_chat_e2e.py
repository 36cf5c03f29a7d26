"""Chat-completions protocol end to end: the official openai SDK → gateway → fake OpenAI upstream."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import openai
import pytest
from openai import AsyncOpenAI
from sqlalchemy import select

from modelgate.storage.models import CallLog

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def client(gateway, key: str) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=key, max_retries=0)


async def call_rows(gateway, expected: int = 1) -> list[CallLog]:
    """The call-log rows, once `expected` are written (a stream's row follows its last byte)."""
    for _ in range(100):
        await gateway.runtime.writer.flush()
        async with gateway.runtime.db.session() as s:
            rows = list((await s.scalars(select(CallLog).order_by(CallLog.id))).all())
        if len(rows) >= expected:
            return rows
        await asyncio.sleep(0.02)
    return rows


async def test_plain_completion_has_spec_shape_and_is_logged(gateway, openai_upstream):
    wired = await gateway.wire(openai_upstream.base_url, ["gpt-test"])
    resp = await client(gateway, wired.key).chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": "hello there"}], temperature=0.2, seed=7,
        stop=["END"], frequency_penalty=0.1, presence_penalty=0.2, max_tokens=50,
        response_format={"type": "json_object"},
    )
    assert resp.choices[0].index == 0
    assert resp.choices[0].message.role == "assistant"
    assert resp.choices[0].message.content == "Echo: hello there"
    assert resp.choices[0].finish_reason == "stop"
    assert (resp.usage.prompt_tokens, resp.usage.completion_tokens, resp.usage.total_tokens) == (2, 3, 5)
    sent = openai_upstream.last
    assert sent.headers["authorization"] == "Bearer up-key-1"  # the upstream key, never the gateway key
    body = sent.json()
    for field, value in {"temperature": 0.2, "seed": 7, "stop": ["END"], "frequency_penalty": 0.1,
                         "presence_penalty": 0.2, "max_tokens": 50,
                         "response_format": {"type": "json_object"}}.items():
        assert body[field] == value
    rows = await call_rows(gateway)
    assert len(rows) == 1
    row = rows[0]
    uuid.UUID(row.trace_id)
    assert (row.status, row.model, row.prompt_tokens, row.completion_tokens) == (200, "gpt-test", 2, 3)
    assert row.channel_id == wired.channel_ids[0] and row.application_id == wired.app_id


async def test_stream_passes_chunks_and_records_usage(gateway, openai_upstream):
    wired = await gateway.wire(openai_upstream.base_url, ["gpt-test"])
    stream = await client(gateway, wired.key).chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": "one two three"}], stream=True,
    )
    chunks = [chunk async for chunk in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Echo: one two three"
    assert all(c.choices for c in chunks), "the usage chunk the client did not ask for must be hidden"
    assert openai_upstream.last.json()["stream_options"] == {"include_usage": True}
    rows = await call_rows(gateway)
    assert (rows[0].stream, rows[0].prompt_tokens, rows[0].completion_tokens) == (True, 3, 4)
    assert rows[0].first_byte_ms is not None


async def test_stream_usage_chunk_kept_when_client_asks(gateway, openai_upstream):
    wired = await gateway.wire(openai_upstream.base_url, ["gpt-test"])
    stream = await client(gateway, wired.key).chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": "hi"}], stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in stream]
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens == 3


async def test_raw_stream_framing_ends_with_done(gateway, openai_upstream):
    wired = await gateway.wire(openai_upstream.base_url, ["gpt-test"])
    async with httpx.AsyncClient() as http:
        resp = await http.post(f"{gateway.url}/v1/chat/completions", headers={"authorization": f"Bearer {wired.key}"},
                               json={"model": "gpt-test", "stream": True,
                                     "messages": [{"role": "user", "content": "a b"}]})
    assert resp.headers["content-type"].startswith("text/event-stream")
    frames = resp.text.split("\n\n")
    assert frames[-2] == "data: [DONE]" and frames[-1] == ""
    assert all(f.startswith("data: ") for f in frames[:-1])


async def test_tool_calls_round_trip(gateway, openai_upstream):
    wired = await gateway.wire(openai_upstream.base_url, ["gpt-test"])
    api = client(gateway, wired.key)
    first = await api.chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": "call tool please"}],
        tools=[WEATHER_TOOL], tool_choice="auto",
    )
    call = first.choices[0].message.tool_calls[0]
    assert first.choices[0].finish_reason == "tool_calls"
    assert (call.function.name, call.function.arguments) == ("get_weather", '{"city":"city-value"}')
    second = await api.chat.completions.create(
        model="gpt-test", tools=[WEATHER_TOOL],
        messages=[{"role": "user", "content": "call tool please"}, first.choices[0].message.model_dump(),
                  {"role": "tool", "tool_call_id": call.id, "content": "sunny"},
                  {"role": "user", "content": "thanks"}],
    )
    assert second.choices[0].message.content == "Echo: thanks"
    forwarded = openai_upstream.last.json()["messages"]
    assert forwarded[2] == {"role": "tool", "tool_call_id": call.id, "content": "sunny"}


async def test_streamed_tool_calls(gateway, openai_upstream):
    wired = await gateway.wire(openai_upstream.base_url, ["gpt-test"])
    stream = await client(gateway, wired.key).chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": "call tool now"}], tools=[WEATHER_TOOL], stream=True,
    )
    arguments = ""
    async for chunk in stream:
        for delta in chunk.choices[0].delta.tool_calls or ():
            arguments += delta.function.arguments or ""
    assert arguments == '{"city":"city-value"}'


async def test_models_lists_only_authorised_channels(gateway, openai_upstream):
    wired = await gateway.wire(openai_upstream.base_url, ["gpt-test"])
    await gateway.wire(openai_upstream.base_url, ["gpt-other"], name="other", authorise=False)
    async with httpx.AsyncClient() as http:
        resp = await http.get(f"{gateway.url}/v1/models", headers={"authorization": f"Bearer {wired.key}"})
    assert resp.status_code == 200
    body = resp.json()
    assert body["object"] == "list"
    assert [m["id"] for m in body["data"]] == ["gpt-test"]
    entry = body["data"][0]
    assert set(entry) == {"id", "object", "created", "ownedBy"}
    assert entry["object"] == "model" and entry["ownedBy"] == "openai-compatible"
    assert isinstance(entry["created"], int) and entry["created"] > 1_600_000_000


async def test_a_model_is_retrieved_by_id_as_listed(gateway, openai_upstream):
    # The SDK's `models.retrieve` (GET /v1/models/{model}): the list's entry, by the same visibility rule.
    wired = await gateway.wire(openai_upstream.base_url, ["gpt-test", "acme/coder-1"])
    await gateway.wire(openai_upstream.base_url, ["gpt-other"], name="other", authorise=False)
    sdk = client(gateway, wired.key)
    listed = {m.id: m.model_dump() for m in (await sdk.models.list()).data}
    for model_id in ("gpt-test", "acme/coder-1"):
        assert (await sdk.models.retrieve(model_id)).model_dump() == listed[model_id]
    with pytest.raises(openai.PermissionDeniedError):  # served, but not by a channel the app may use
        await sdk.models.retrieve("gpt-other")
    with pytest.raises(openai.NotFoundError):
        await sdk.models.retrieve("nobody-serves-this")
    async with httpx.AsyncClient(base_url=gateway.url) as http:
        auth = {"authorization": f"Bearer {wired.key}"}
        raw = {m["id"]: m for m in (await http.get("/v1/models", headers=auth)).json()["data"]}
        assert (await http.get("/v1/models/acme%2Fcoder-1", headers=auth)).json() == raw["acme/coder-1"]
        denied = await http.get("/v1/models/gpt-other", headers=auth)
        assert denied.status_code == 403 and set(denied.json()) == {"code", "message"}
        assert denied.json()["code"] == "ACCESS_DENIED"
        assert_envelope(await http.get("/v1/models/nobody-serves-this", headers=auth), 404, "NOT_FOUND")
        assert (await http.get("/v1/models/gpt-test")).json()["code"] == "UNAUTHORIZED"


# --- errors, asserted exactly ------------------------------------------------


async def raw_post(gateway, headers: dict[str, str], body: object) -> httpx.Response:
    async with httpx.AsyncClient() as http:
        if isinstance(body, (bytes, str)):
            return await http.post(f"{gateway.url}/v1/chat/completions", headers=headers, content=body)
        return await http.post(f"{gateway.url}/v1/chat/completions", headers=headers, json=body)


GOOD = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize("headers", [{}, {"authorization": "Bearer sk-nope"}, {"authorization": "Basic abc"}])
async def test_401_for_missing_or_invalid_key(gateway, openai_upstream, headers):
    await gateway.wire(openai_upstream.base_url, ["gpt-test"])
    resp = await raw_post(gateway, headers, GOOD)
    assert resp.status_code == 401
    assert set(resp.json()) == {"code", "message"} and resp.json()["code"] == "UNAUTHORIZED"


@pytest.mark.parametrize("action", ["disable", "delete"])
async def test_401_for_disabled_or_deleted_key(gateway, openai_upstream, action):
    wired = await gateway.wire(openai_upstream.base_url, ["gpt-test"])
    keys = await gateway.services.api_keys.list()
    await getattr(gateway.services.api_keys, action)(keys[0].id)
    await gateway.runtime.refresh()
    resp = await raw_post(gateway, {"authorization": f"Bearer {wired.key}"}, GOOD)
    assert resp.status_code == 401 and resp.json()["code"] == "UNAUTHORIZED"


async def test_403_for_unauthorised_channel_and_blacklisted_ip(gateway, openai_upstream):
    wired = await gateway.wire(openai_upstream.base_url, ["gpt-test"])
    await gateway.wire(openai_upstream.base_url, ["gpt-other"], name="other")
    resp = await raw_post(gateway, {"authorization": f"Bearer {wired.key}"}, {**GOOD, "model": "gpt-other"})
    assert resp.status_code == 403
    assert resp.json()["code"] == "ACCESS_DENIED" and set(resp.json()) == {"code", "message"}
    await gateway.services.blacklist.add("127.0.0.0/8")
    await gateway.runtime.refresh()
    resp = await raw_post(gateway, {"authorization": f"Bearer {wired.key}"}, GOOD)
    assert resp.status_code == 403 and resp.json()["code"] == "ACCESS_DENIED"


async def test_429_token_bucket_per_key(gateway, openai_upstream):
    wired = await gateway.wire(openai_upstream.base_url, ["gpt-test"], rate_capacity=2, rate_refill=0.001)
    statuses = [(await raw_post(gateway, {"authorization": f"Bearer {wired.key}"}, GOOD)) for _ in range(3)]
    assert [r.status_code for r in statuses] == [200, 200, 429]
    assert statuses[2].json() == {"error": {"code": "RATE_LIMIT_EXCEEDED", "message": statuses[2].json()["error"]["message"]}}
    assert int(statuses[2].headers["retry-after"]) >= 1


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        {"messages": [{"role": "user", "content": "hi"}]},
        {"model": "gpt-test", "messages": []},
        {"model": "gpt-test", "messages": [{"role": "wizard", "content": "hi"}]},
        {"model": "gpt-test", "messages": [{"role": "user", "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}]}]},
        {"model": "gpt-test", "messages": [{"role": "user", "content": [{"type": "text", "text": 1}]}]},
        {**GOOD, "temperature": "hot"},
        {**GOOD, "max_tokens": 0},
        {**GOOD, "stop": [1, 2]},
        {**GOOD, "response_format": {"type": "xml"}},
        {**GOOD, "seed": 1.5},
        {**GOOD, "tools": [{"type": "function"}]},
        {**GOOD, "tool_choice": "nonexistent_tool"},
        {**GOOD, "stream": "yes"},
    ],
)
async def test_400_validation_shape(gateway, openai_upstream, body):
    wired = await gateway.wire(openai_upstream.base_url, ["gpt-test"])
    resp = await raw_post(gateway, {"authorization": f"Bearer {wired.key}", "content-type": "application/json"}, body)
    assert resp.status_code == 400
    error = resp.json()["error"]
    assert set(resp.json()) == {"error"}
    assert error["type"] == "invalid_request_error" and error["code"] == "invalid_request"
    assert isinstance(error["message"], str) and error["message"]
    assert not openai_upstream.requests, "an invalid request must not reach the upstream"


def assert_envelope(resp: httpx.Response, status: int, code: str) -> dict:
    assert resp.status_code == status
    body = resp.json()
    assert set(body) == {"success", "error", "traceId", "timestamp"}
    assert body["success"] is False and body["error"]["code"] == code
    assert isinstance(body["error"]["message"], str)
    assert body["traceId"] == resp.headers["x-trace-id"]
    uuid.UUID(body["traceId"])
    assert body["timestamp"].endswith("Z") and "T" in body["timestamp"]
    return body


async def test_502_model_not_found_upstream(gateway, openai_upstream):
    wired = await gateway.wire(openai_upstream.base_url, ["gpt-gone"])
    resp = await raw_post(gateway, {"authorization": f"Bearer {wired.key}"}, {**GOOD, "model": "gpt-gone"})
    body = assert_envelope(resp, 502, "MODEL_NOT_FOUND")
    assert "gpt-gone" in body["error"]["message"]
    assert len(openai_upstream.requests) == 1, "MODEL_NOT_FOUND is neither retried nor failed over"


async def test_502_upstream_auth_error_never_leaks_keys(gateway, openai_upstream):
    wired = await gateway.wire(openai_upstream.base_url, ["gpt-test"], upstream_keys=("wrong-upstream-key",))
    resp = await raw_post(gateway, {"authorization": f"Bearer {wired.key}"}, GOOD)
    assert_envelope(resp, 502, "AUTHENTICATION_ERROR")
    assert "wrong-upstream-key" not in resp.text and wired.key not in resp.text


async def test_404_for_unknown_model_and_path(gateway, openai_upstream):
    wired = await gateway.wire(openai_upstream.base_url, ["gpt-test"])
    resp = await raw_post(gateway, {"authorization": f"Bearer {wired.key}"}, {**GOOD, "model": "nobody-serves-this"})
    assert_envelope(resp, 404, "NOT_FOUND")
    async with httpx.AsyncClient() as http:
        assert_envelope(await http.get(f"{gateway.url}/v1/nothing-here"), 404, "NOT_FOUND")


async def test_sdk_raises_typed_errors(gateway, openai_upstream):
    wired = await gateway.wire(openai_upstream.base_url, ["gpt-test"])
    with pytest.raises(openai.AuthenticationError):
        await client(gateway, "sk-wrong").chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "x"}])
    with pytest.raises(openai.BadRequestError):
        await client(gateway, wired.key).chat.completions.create(model="gpt-test", messages=[])


async def test_client_disconnect_cancels_upstream_stream(gateway, openai_upstream):
    wired = await gateway.wire(openai_upstream.base_url, ["gpt-test"])
    openai_upstream.chunk_delay = 0.2
    async with httpx.AsyncClient() as http:
        async with http.stream("POST", f"{gateway.url}/v1/chat/completions",
                               headers={"authorization": f"Bearer {wired.key}"},
                               json={**GOOD, "messages": [{"role": "user", "content": " ".join(["w"] * 40)}],
                                     "stream": True}) as resp:
            async for _ in resp.aiter_bytes():
                break  # read the first bytes, then hang up
    rows = await call_rows(gateway)
    assert rows[0].status == 499 and rows[0].error_code == "CLIENT_DISCONNECTED"


async def test_metrics_count_calls_and_tokens(gateway, openai_upstream):
    wired = await gateway.wire(openai_upstream.base_url, ["gpt-test"])
    async with httpx.AsyncClient() as http:
        before = (await http.get(f"{gateway.url}/metrics")).text
        await raw_post(gateway, {"authorization": f"Bearer {wired.key}"}, GOOD)
        after = (await http.get(f"{gateway.url}/metrics")).text

    def sample(text: str, name: str, **labels: str) -> float:
        # summed over the series whose labels include these (calls also carry model, channel...)
        from prometheus_client.parser import text_string_to_metric_families

        return sum(s.value for family in text_string_to_metric_families(text) for s in family.samples
                   if s.name == name and labels.items() <= s.labels.items())

    assert sample(after, "modelgate_calls_total", protocol="chat", status="200") == \
        sample(before, "modelgate_calls_total", protocol="chat", status="200") + 1
    assert sample(after, "modelgate_tokens_total", direction="input") == \
        sample(before, "modelgate_tokens_total", direction="input") + 1


async def test_log_lines_carry_the_trace_id_and_never_a_key(gateway, openai_upstream, caplog):
    wired = await gateway.wire(openai_upstream.base_url, ["gpt-test", "gpt-gone"], upstream_keys=("up-key-1",))
    caplog.set_level("INFO", logger="modelgate")
    ok = await raw_post(gateway, {"authorization": f"Bearer {wired.key}"}, GOOD)
    failed = await raw_post(gateway, {"authorization": f"Bearer {wired.key}"}, {**GOOD, "model": "gpt-gone"})
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert ok.headers["x-trace-id"] in text and failed.headers["x-trace-id"] in text
    assert wired.key not in text and "up-key-1" not in text


async def test_clean_shutdown_loses_no_call_log_row(tmp_path, openai_upstream):
    from tests.gateway_harness import GatewayHarness, harness_settings

    settings = harness_settings(tmp_path)
    settings.usage.flush_interval_seconds = 3600.0  # nothing is flushed before shutdown
    harness = await GatewayHarness(settings).start()
    wired = await harness.wire(openai_upstream.base_url, ["gpt-test"])
    calls = 25
    await asyncio.gather(*(raw_post(harness, {"authorization": f"Bearer {wired.key}"}, GOOD) for _ in range(calls)))
    await harness.stop()
    from modelgate.storage.db import Database

    db = Database.from_settings(settings)
    async with db.session() as s:
        rows = (await s.scalars(select(CallLog))).all()
    await db.dispose()
    assert len(rows) == calls and {r.status for r in rows} == {200}


async def test_idle_stream_gets_keepalives_and_a_stalled_one_an_error_event(tmp_path, openai_upstream):
    from tests.gateway_harness import GatewayHarness, harness_settings

    settings = harness_settings(tmp_path)
    settings.gateway.stream_keepalive_seconds = 0.2
    harness = await GatewayHarness(settings).start()
    try:
        wired = await harness.wire(openai_upstream.base_url, ["gpt-test"], timeout_seconds=1.5)
        openai_upstream.chunk_delay = 0.5  # quieter than the keep-alive period, within the stall limit
        async with httpx.AsyncClient(timeout=30) as http:
            resp = await http.post(f"{harness.url}/v1/chat/completions",
                                   headers={"authorization": f"Bearer {wired.key}"},
                                   json={**GOOD, "stream": True, "messages": [{"role": "user", "content": "a b"}]})
        assert ": keep-alive\n\n" in resp.text and resp.text.endswith("data: [DONE]\n\n")
        openai_upstream.chunk_delay = 3.0  # silent for longer than the application's timeout
        async with httpx.AsyncClient(timeout=30) as http:
            resp = await http.post(f"{harness.url}/v1/chat/completions",
                                   headers={"authorization": f"Bearer {wired.key}"},
                                   json={**GOOD, "stream": True})
        *_, error, end = resp.text.strip().split("\n\n")
        assert error.startswith("data: ") and '"code":"TIMEOUT_ERROR"' in error
        assert end == "data: [DONE]"  # the error frame, then the stream's clean end
    finally:
        await harness.stop()


async def test_stream_whose_upstream_never_answers_times_out_within_the_app_timeout(gateway, openai_upstream):
    wired = await gateway.wire(openai_upstream.base_url, ["gpt-test"], timeout_seconds=1.0)
    openai_upstream.delay = 5.0  # no response headers within the application's timeout
    started = asyncio.get_running_loop().time()
    resp = await raw_post(gateway, {"authorization": f"Bearer {wired.key}"}, {**GOOD, "stream": True})
    assert asyncio.get_running_loop().time() - started < 4.0
    assert_envelope(resp, 502, "TIMEOUT_ERROR")


async def test_a_provider_quoting_the_upstream_key_never_shows_it_to_the_caller(gateway, openai_upstream):
    secret = "sk-upstream-secret-0123456789abcdef"
    wired = await gateway.wire(openai_upstream.base_url, ["gpt-test"], upstream_keys=(secret,))
    for quoted in (secret, f"{secret[:16]}...{secret[-4:]}"):
        openai_upstream.fail_next(401, {"error": {"message": f"Incorrect API key provided: {quoted}",
                                                  "type": "invalid_request_error", "code": "invalid_api_key"}})
        resp = await raw_post(gateway, {"authorization": f"Bearer {wired.key}"}, GOOD)
        body = assert_envelope(resp, 502, "AUTHENTICATION_ERROR")
        assert "Incorrect API key provided" in body["error"]["message"]
        assert secret not in resp.text and secret[:12] not in resp.text


TEXT_PARTS = [{"type": "text", "text": "hello"}, {"type": "text", "text": "there", "cache_control": {"type": "ephemeral"}}]


async def test_content_arrays_of_text_parts_are_forwarded_as_is_on_pass_through(gateway, openai_upstream):
    wired = await gateway.wire(openai_upstream.base_url, ["gpt-test"])
    messages = [{"role": role, "content": TEXT_PARTS} for role in ("system", "developer", "user", "assistant")]
    messages.append({"role": "user", "content": [{"type": "text", "text": "again"}]})
    resp = await client(gateway, wired.key).chat.completions.create(model="gpt-test", messages=messages)
    assert resp.choices[0].message.content == "Echo: again"
    assert openai_upstream.last.json()["messages"] == messages


async def test_content_arrays_of_text_parts_become_text_blocks_on_conversion(gateway, anthropic_upstream):
    from tests.fakes.anthropic_upstream import API_KEY

    wired = await gateway.wire(anthropic_upstream.base_url, ["claude-haiku-4-5"], kind="anthropic",
                               upstream_keys=(API_KEY,), name="claude")
    resp = await client(gateway, wired.key).chat.completions.create(model="claude-haiku-4-5", messages=[
        {"role": "system", "content": [{"type": "text", "text": "be brief"}, {"type": "text", "text": "be kind"}]},
        {"role": "user", "content": TEXT_PARTS},
    ])
    assert resp.choices[0].message.content == "Echo: hello there"
    sent = anthropic_upstream.last.json()
    assert sent["system"] == [{"type": "text", "text": "be brief"}, {"type": "text", "text": "be kind"}]
    # A part's cache_control (OpenRouter's convention) is a cache breakpoint the vendor takes as sent.
    assert sent["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": "hello"}, {"type": "text", "text": "there", "cache_control": {"type": "ephemeral"}}]}]


@pytest.mark.parametrize("stream", [False, True])
async def test_bare_tool_name_choice_reaches_a_chat_upstream_in_object_form(gateway, openai_upstream, stream):
    wired = await gateway.wire(openai_upstream.base_url, ["gpt-test"])
    body = {**GOOD, "messages": [{"role": "user", "content": "call tool please"}], "tools": [WEATHER_TOOL],
            "tool_choice": "get_weather", "stream": stream}
    resp = await raw_post(gateway, {"authorization": f"Bearer {wired.key}"}, body)
    assert resp.status_code == 200, resp.text
    assert openai_upstream.last.json()["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}


@pytest.mark.parametrize("resets", [0, 1])
async def test_a_streamed_body_off_the_typed_view_keeps_its_stream_options(gateway, openai_upstream, resets):
    # A field the typed view does not know (a vendor's extension) sends the body down the codec's own
    # path; on pass-through its tree is then shed. The stream tap (usage asked for or not) and a retried
    # attempt (the upstream reset the first connection) still read the client's stream_options.
    wired = await gateway.wire(openai_upstream.base_url, ["gpt-test"])
    openai_upstream.reset_next = resets
    stream = await client(gateway, wired.key).chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": "one two"}], stream=True,
        stream_options={"include_usage": True, "vendor": {"level": {"x": 1}}},
        extra_body={"vendor_extension": {"mode": "fast"}})
    chunks = [chunk async for chunk in stream]
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Echo: one two"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0
    sent = openai_upstream.last.json()
    assert sent["stream_options"] == {"include_usage": True, "vendor": {"level": {"x": 1}}}
    assert sent["vendor_extension"] == {"mode": "fast"}
