"""`POST /alt/v1/messages/count_tokens` and `GET /alt/v1/models` (issue 10 items 3 and 4), through the
official anthropic SDK (`messages.count_tokens`, `models.list`) and raw HTTP; the Responses protocol's
count, `POST /v1/responses/input_tokens`, through the openai SDK (`responses.input_tokens.count`)."""

from __future__ import annotations

import asyncio

import anthropic
import httpx
import pytest
from aiohttp import web
from anthropic import AsyncAnthropic
from openai import AsyncOpenAI
from sqlalchemy import select

from modelgate.gateway import token_estimate
from modelgate.gateway.counting import UNCOUNTABLE_SECONDS
from modelgate.protocols.ir import ChatRequest, Message, TextPart, Tool
from modelgate.providers.bedrock import BedrockAdapter
from modelgate.storage.models import CallLog, ModelInstance
from tests.fakes.anthropic_upstream import API_KEY, error_body
from tests.fakes.bedrock_upstream import FakeBedrock
from tests.fakes.gemini_upstream import FakeGemini
from tests.fakes.local_server import LocalServer
from tests.fakes.upstream_base import send
from tests.test_resilience_e2e import gw  # noqa: F401  (fixture: a gateway on a clock the test moves)

TOOLS = [{"name": "Bash", "description": "Run a shell command",
          "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}]
SYSTEM = "You are a coding agent. " * 20
MESSAGES = [{"role": "user", "content": "hello world"}]


def sdk(gateway, key: str) -> AsyncAnthropic:
    return AsyncAnthropic(base_url=f"{gateway.url}/alt", api_key=key, max_retries=0)


async def count_raw(gateway, key: str, body: dict, **headers: str) -> httpx.Response:
    async with httpx.AsyncClient(base_url=gateway.url) as http:
        return await http.post("/alt/v1/messages/count_tokens", json=body,
                               headers={"x-api-key": key, "anthropic-version": "2023-06-01", **headers})


async def call_log_rows(gateway) -> list[CallLog]:
    await gateway.runtime.writer.flush()
    async with gateway.runtime.db.session() as s:
        return list((await s.scalars(select(CallLog))).all())


# --- the provider's own count ---------------------------------------------------------------------


async def test_anthropic_channel_uses_the_vendor_count_endpoint(gateway, anthropic_upstream):
    wired = await gateway.wire(anthropic_upstream.base_url, [{"model_id": "team-claude",
                                                             "upstream_model": "claude-haiku-4-5"}],
                               kind="anthropic", upstream_keys=(API_KEY,), name="claude")
    client = sdk(gateway, wired.key)
    result = await client.messages.count_tokens(
        model="team-claude", system=SYSTEM, messages=MESSAGES, tools=TOOLS,
        extra_headers={"anthropic-beta": "claude-code-20250219"})
    sent = anthropic_upstream.last
    assert sent.path == "/v1/messages/count_tokens"
    assert sent.json() == {"model": "claude-haiku-4-5", "system": SYSTEM, "messages": MESSAGES, "tools": TOOLS}
    assert sent.headers["anthropic-beta"] == "claude-code-20250219"
    assert sent.headers["x-api-key"] == API_KEY
    raw = await count_raw(gateway, wired.key, {"model": "team-claude", "system": SYSTEM, "messages": MESSAGES,
                                               "tools": TOOLS})
    assert raw.json() == {"input_tokens": result.input_tokens} and result.input_tokens > 0
    assert raw.headers["x-modelgate-token-count"] == "provider"
    assert await call_log_rows(gateway) == []  # not inference usage


async def test_a_count_404_falls_back_to_an_estimate_and_never_deprecates_the_model(gw, anthropic_upstream):
    wired = await gw.wire(anthropic_upstream.base_url, ["claude-haiku-4-5"], kind="anthropic",
                          upstream_keys=(API_KEY,), name="claude")
    # A messages-compatible provider without the count route answers 404 (no model in the text), asked
    # again once the gateway's memory of it has passed: five 404s within the lifecycle's 24 h window.
    anthropic_upstream.fail_next(404, error_body("not_found_error", "Not Found"), times=5)
    for _ in range(5):
        raw = await count_raw(gw, wired.key, {"model": "claude-haiku-4-5", "messages": MESSAGES})
        assert raw.status_code == 200 and raw.headers["x-modelgate-token-count"] == "estimate"
        assert raw.json()["input_tokens"] > 0
        gw.clock.advance(UNCOUNTABLE_SECONDS)
    assert len(anthropic_upstream.requests) == 5
    async with gw.runtime.db.session() as s:
        states = {m.state for m in (await s.scalars(select(ModelInstance))).all()}
    assert states == {"ACTIVE"}
    msg = await sdk(gw, wired.key).messages.create(model="claude-haiku-4-5", max_tokens=5, messages=MESSAGES)
    assert msg.content[0].text.startswith("Echo")


async def test_a_missing_count_route_is_not_asked_again_for_an_hour(gw, anthropic_upstream):
    # Claude Code counts before every request: once a provider's count route answered 404, the counts
    # are estimated without that round trip until the memory passes.
    wired = await gw.wire(anthropic_upstream.base_url, ["claude-haiku-4-5"], kind="anthropic",
                          upstream_keys=(API_KEY,), name="claude")
    anthropic_upstream.fail_next(404, error_body("not_found_error", "Not Found"))
    for _ in range(3):
        raw = await count_raw(gw, wired.key, {"model": "claude-haiku-4-5", "messages": MESSAGES})
        assert raw.headers["x-modelgate-token-count"] == "estimate"
    assert len(anthropic_upstream.requests) == 1
    gw.clock.advance(UNCOUNTABLE_SECONDS)
    raw = await count_raw(gw, wired.key, {"model": "claude-haiku-4-5", "messages": MESSAGES})
    assert raw.headers["x-modelgate-token-count"] == "provider" and len(anthropic_upstream.requests) == 2


async def test_count_refused_by_the_upstream_is_the_callers_400(gateway, anthropic_upstream):
    wired = await gateway.wire(anthropic_upstream.base_url, ["claude-haiku-4-5"], kind="anthropic",
                               upstream_keys=(API_KEY,), name="claude")
    anthropic_upstream.fail_next(400, error_body("invalid_request_error", "tools.0.name: String should match"))
    with pytest.raises(anthropic.BadRequestError) as caught:
        await sdk(gateway, wired.key).messages.count_tokens(model="claude-haiku-4-5", messages=MESSAGES)
    assert caught.value.response.json()["error"] == {"type": "invalid_request_error",
                                                     "message": "tools.0.name: String should match"}


async def test_a_count_waits_for_the_provider_at_most_the_count_limit_then_estimates(gateway):
    # The agent waits for its count: a provider's count that hangs is given up after
    # gateway.count_timeout_seconds (here 0.2 s; the application's timeout is 120 s) for the estimate.
    async def hang(request: web.Request) -> web.Response:
        await asyncio.sleep(60)
        return web.json_response({"input_tokens": 1})

    async with LocalServer([web.post("/v1/messages/count_tokens", hang)]) as hung:
        wired = await gateway.wire(hung.url, ["claude-haiku-4-5"], kind="anthropic",
                                   upstream_keys=(API_KEY,), name="claude")
        gateway.runtime.settings.gateway.count_timeout_seconds = 0.2
        async with httpx.AsyncClient(base_url=gateway.url, timeout=10) as http:  # far below the 60 s hang
            raw = await http.post("/alt/v1/messages/count_tokens",
                                  json={"model": "claude-haiku-4-5", "messages": MESSAGES},
                                  headers={"x-api-key": wired.key, "anthropic-version": "2023-06-01"})
        assert raw.status_code == 200 and raw.headers["x-modelgate-token-count"] == "estimate"
        assert raw.json()["input_tokens"] > 0


async def test_failing_counts_never_open_the_breaker_of_the_calls(gateway, anthropic_upstream):
    # A provider whose count route fails while its messages work: each count falls back to the
    # estimate, and the endpoint's breaker (5 consecutive failures open it) stays closed for the calls.
    wired = await gateway.wire(anthropic_upstream.base_url, ["claude-haiku-4-5"], kind="anthropic",
                               upstream_keys=(API_KEY,), name="claude")
    gateway.runtime.settings.gateway.count_timeout_seconds = 0.5  # below the first retry wait: one try each
    anthropic_upstream.fail_next(500, error_body("api_error", "Internal server error"), times=6)
    for _ in range(6):
        raw = await count_raw(gateway, wired.key, {"model": "claude-haiku-4-5", "messages": MESSAGES})
        assert raw.status_code == 200 and raw.headers["x-modelgate-token-count"] == "estimate"
    assert len(anthropic_upstream.requests) == 6
    assert all(state.state.value == "CLOSED" and not state.failures
               for state in gateway.runtime.executor.breakers.states().values())
    msg = await sdk(gateway, wired.key).messages.create(model="claude-haiku-4-5", max_tokens=5, messages=MESSAGES)
    assert msg.content[0].text.startswith("Echo")


async def test_gemini_channel_uses_count_tokens(gateway):
    fake = await FakeGemini().start()
    try:
        wired = await gateway.wire(fake.base_url, ["gemini-2.5-flash"], kind="gemini", upstream_keys=(fake.api_key,),
                                   name="gemini")
        raw = await count_raw(gateway, wired.key, {"model": "gemini-2.5-flash", "system": SYSTEM,
                                                   "messages": MESSAGES, "tools": TOOLS})
        assert raw.status_code == 200 and raw.headers["x-modelgate-token-count"] == "provider"
        counted = fake.counted
        assert counted["model"] == "models/gemini-2.5-flash"
        assert counted["systemInstruction"] and counted["tools"] and counted["contents"]
        assert raw.json()["input_tokens"] > 0
    finally:
        await fake.close()


PROFILE = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"  # the inference profile on-demand Claude calls need


async def test_bedrock_counts_an_inference_profile_by_its_foundation_model(gateway):
    # CountTokens refuses a profile's id ("The provided model identifier is invalid."): the count
    # goes to the model behind it, while calls keep the profile.
    fake = await FakeBedrock(models=(PROFILE, PROFILE.removeprefix("us."))).start()
    try:
        wired = await gateway.wire(fake.base_url, [{"model_id": "claude", "upstream_model": PROFILE}],
                                   kind="aws-bedrock", upstream_keys=(fake.api_key,), name="bedrock")
        raw = await count_raw(gateway, wired.key, {"model": "claude", "system": SYSTEM, "messages": MESSAGES})
        assert raw.status_code == 200 and raw.headers["x-modelgate-token-count"] == "provider"
        assert fake.last.path == "/model/anthropic.claude-sonnet-4-5-20250929-v1:0/count-tokens"
        msg = await sdk(gateway, wired.key).messages.create(model="claude", max_tokens=5, messages=MESSAGES)
        assert msg.content[0].text.startswith("Echo") and fake.last.path == f"/model/{PROFILE}/converse"
    finally:
        await fake.close()


async def test_a_bedrock_model_it_cannot_count_is_estimated_not_refused(gateway):
    # "The provided model doesn't support counting tokens." is a 400 about the model, not about the
    # caller's body: answered by the estimate (a 400 is fatal to Claude Code and the Agent SDK).
    model = "meta.llama3-3-70b-instruct-v1:0"
    fake = await FakeBedrock(models=(model,)).start()
    fake.count_unsupported.add(model)
    try:
        wired = await gateway.wire(fake.base_url, [model], kind="aws-bedrock", upstream_keys=(fake.api_key,),
                                   name="bedrock")
        raw = await count_raw(gateway, wired.key, {"model": model, "messages": MESSAGES})
        assert raw.status_code == 200 and raw.headers["x-modelgate-token-count"] == "estimate"
        assert raw.json()["input_tokens"] > 0
        assert fake.last.path.endswith("/count-tokens")  # asked, and refused
    finally:
        await fake.close()


async def test_bedrock_count_tokens_request_is_signed_and_counts_system_and_tools():
    fake = await FakeBedrock().start()
    try:
        adapter = BedrockAdapter()
        from modelgate.providers.base import Endpoint

        endpoint = Endpoint("p1:k1", 1, 1, "aws-bedrock", fake.base_url, fake.key, {"region": fake.region})
        req = ChatRequest("m", [Message("user", [TextPart("hello")])], system=["sys"], max_tokens=10,
                          tools=[Tool("Bash", "Run", {"type": "object", "properties": {}})])
        status, _, body = await send(adapter.count_request(req, fake.models[0], endpoint))
        assert status == 200, body
        assert adapter.parse_count(body) > 0
        assert set(fake.counted) == {"messages", "system", "toolConfig"}
    finally:
        await fake.close()


# --- the local estimate ---------------------------------------------------------------------------


async def test_chat_channel_counts_with_a_local_tokenizer(gateway, openai_upstream):
    wired = await gateway.wire(openai_upstream.base_url, [{"model_id": "coder", "upstream_model": "gpt-test"}])
    client = sdk(gateway, wired.key)
    bare = (await client.messages.count_tokens(model="coder", messages=MESSAGES)).input_tokens
    with_system = (await client.messages.count_tokens(model="coder", system=SYSTEM, messages=MESSAGES)).input_tokens
    with_all = (await client.messages.count_tokens(model="coder", system=SYSTEM, messages=MESSAGES,
                                                   tools=TOOLS)).input_tokens
    # "hello world" is 2 tokens in o200k_base; 3 framing tokens per message and 3 for the reply.
    assert bare == 2 + 3 + 3
    o200k = token_estimate._encoding("o200k_base")
    assert o200k.encode_ordinary("hello world") == [24912, 2375]  # as bpe-openai's own Rust tokenizer gives them
    assert with_system - bare == len(o200k.encode_ordinary(SYSTEM)) + 3
    assert with_all > with_system + 20
    raw = await count_raw(gateway, wired.key, {"model": "coder", "messages": MESSAGES})
    assert raw.headers["x-modelgate-token-count"] == "estimate"
    assert openai_upstream.requests == []  # counting costs no upstream call


def test_encoding_per_model_family():
    assert token_estimate.encoding_name("gpt-4-turbo") == "cl100k_base"
    assert token_estimate.encoding_name("gpt-3.5-turbo") == "cl100k_base"
    for model in ("gpt-4o-mini", "gpt-4.1", "o3", "gpt-5", "openai/gpt-5-mini", "llama-3.3-70b"):
        assert token_estimate.encoding_name(model) == "o200k_base"


# --- same key, application and channel rules as inference ---------------------------------------------


async def test_count_tokens_auth_and_routing_rules(gateway, openai_upstream):
    wired = await gateway.wire(openai_upstream.base_url, ["gpt-test"])
    hidden = await gateway.wire(openai_upstream.base_url, ["gpt-other"], name="other", authorise=False)
    body = {"model": "gpt-test", "messages": MESSAGES}
    assert (await count_raw(gateway, "nope", body)).json() == {"code": "UNAUTHORIZED", "message": "Invalid API key"}
    denied = await count_raw(gateway, wired.key, {"model": "gpt-other", "messages": MESSAGES})
    assert denied.status_code == 403 and denied.json()["code"] == "ACCESS_DENIED"
    missing = await count_raw(gateway, wired.key, {"model": "nope", "messages": MESSAGES})
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "NOT_FOUND"
    bad = await count_raw(gateway, wired.key, {"model": "gpt-test"})
    assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_request_error"
    assert hidden.key != wired.key


# --- POST /v1/responses/input_tokens ------------------------------------------------------------------

INSTRUCTIONS = "You are a coding agent."
INPUT = [{"role": "user", "content": "hello world"}]
FUNCTION_TOOLS = [{"type": "function", "name": "Bash", "description": "Run a shell command", "strict": False,
                   "parameters": TOOLS[0]["input_schema"]}]


def openai_sdk(gateway, key: str) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=key, max_retries=0)


async def count_responses_raw(gateway, key: str, body: dict) -> httpx.Response:
    async with httpx.AsyncClient(base_url=gateway.url) as http:
        return await http.post("/v1/responses/input_tokens", json=body, headers={"authorization": f"Bearer {key}"})


async def test_responses_count_on_an_openai_channel_is_the_vendors_own(gateway, openai_upstream):
    wired = await gateway.wire(openai_upstream.base_url, [{"model_id": "team-gpt", "upstream_model": "gpt-test"}],
                               kind="openai", name="native")
    result = await openai_sdk(gateway, wired.key).responses.input_tokens.count(
        model="team-gpt", instructions=INSTRUCTIONS, input=INPUT, tools=FUNCTION_TOOLS)
    sent = openai_upstream.last
    assert sent.path == "/v1/responses/input_tokens"
    assert sent.json() == {"model": "gpt-test", "instructions": INSTRUCTIONS, "input": INPUT, "tools": FUNCTION_TOOLS}
    assert result.object == "response.input_tokens" and result.input_tokens > 0
    raw = await count_responses_raw(gateway, wired.key, {"model": "team-gpt", "instructions": INSTRUCTIONS,
                                                         "input": INPUT, "tools": FUNCTION_TOOLS})
    assert raw.json() == {"object": "response.input_tokens", "input_tokens": result.input_tokens}
    assert raw.headers["x-modelgate-token-count"] == "provider"
    assert await call_log_rows(gateway) == []


async def test_responses_count_on_a_messages_channel_uses_the_vendor_count(gateway, anthropic_upstream):
    # Converted to the vendor's count form: only the fields its count endpoint takes (it refuses max_tokens).
    wired = await gateway.wire(anthropic_upstream.base_url, ["claude-haiku-4-5"], kind="anthropic",
                               upstream_keys=(API_KEY,), name="claude")
    result = await openai_sdk(gateway, wired.key).responses.input_tokens.count(
        model="claude-haiku-4-5", instructions=INSTRUCTIONS, input=INPUT, tools=FUNCTION_TOOLS)
    sent = anthropic_upstream.last
    assert sent.path == "/v1/messages/count_tokens" and sent.headers["x-api-key"] == API_KEY
    assert sent.json() == {"model": "claude-haiku-4-5", "system": INSTRUCTIONS,
                           "messages": [{"role": "user", "content": [{"type": "text", "text": "hello world"}]}],
                           "tools": TOOLS}
    assert result.input_tokens > 0


async def test_responses_count_elsewhere_is_the_local_estimate(gateway, openai_upstream):
    wired = await gateway.wire(openai_upstream.base_url, ["gpt-test"])  # a chat-completions provider: no count
    client = openai_sdk(gateway, wired.key)
    bare = (await client.responses.input_tokens.count(model="gpt-test", input="hello world")).input_tokens
    with_instructions = (await client.responses.input_tokens.count(
        model="gpt-test", input="hello world", instructions=SYSTEM)).input_tokens
    assert bare == 2 + 3 + 3  # as the messages count of the same text (above)
    assert with_instructions - bare == len(token_estimate._encoding("o200k_base").encode_ordinary(SYSTEM)) + 3
    raw = await count_responses_raw(gateway, wired.key, {"model": "gpt-test", "input": "hello world"})
    assert raw.headers["x-modelgate-token-count"] == "estimate"
    assert openai_upstream.requests == []


async def test_responses_count_auth_and_routing_rules(gateway, openai_upstream):
    wired = await gateway.wire(openai_upstream.base_url, ["gpt-test"])
    await gateway.wire(openai_upstream.base_url, ["gpt-other"], name="other", authorise=False)
    body = {"model": "gpt-test", "input": "hi"}
    assert (await count_responses_raw(gateway, "nope", body)).json() == {"code": "UNAUTHORIZED",
                                                                         "message": "Invalid API key"}
    denied = await count_responses_raw(gateway, wired.key, {"model": "gpt-other", "input": "hi"})
    assert denied.status_code == 403 and denied.json()["code"] == "ACCESS_DENIED"
    missing = await count_responses_raw(gateway, wired.key, {"model": "nope", "input": "hi"})
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "NOT_FOUND"
    bad = await count_responses_raw(gateway, wired.key, {"model": "gpt-test", "input": 5})
    assert bad.status_code == 400 and bad.json() == {"error": {
        "message": "'input' must be a string or an array of input items", "type": "invalid_request_error",
        "code": "invalid_request"}}


# --- GET /alt/v1/models ------------------------------------------------------------------------------


async def test_models_list_in_the_messages_shape(gateway, openai_upstream, anthropic_upstream):
    wired = await gateway.wire(openai_upstream.base_url, ["gpt-test", "coder-b", "coder-a"])
    await gateway.wire(anthropic_upstream.base_url, ["claude-haiku-4-5"], kind="anthropic",
                       upstream_keys=(API_KEY,), name="claude", authorise=False)
    client = sdk(gateway, wired.key)
    models = [m async for m in client.models.list(limit=2)]  # the SDK follows has_more / last_id
    assert [m.id for m in models] == ["coder-a", "coder-b", "gpt-test"]
    assert all(m.type == "model" and m.display_name == m.id and m.created_at.year >= 2024 for m in models)
    async with httpx.AsyncClient(base_url=gateway.url) as http:
        page = (await http.get("/alt/v1/models", params={"limit": 2}, headers={"x-api-key": wired.key})).json()
        assert page["has_more"] is True and (page["first_id"], page["last_id"]) == ("coder-a", "coder-b")
        assert set(page["data"][0]) == {"type", "id", "display_name", "created_at", "lifecycle"}
        for entry in page["data"]:  # strictly, as the SDK's type declares the vendor's answer
            anthropic.types.ModelInfo.model_validate(entry, strict=False)
            assert entry["lifecycle"] == "active"
        last = (await http.get("/alt/v1/models", params={"after_id": "coder-b"},
                               headers={"x-api-key": wired.key})).json()
        assert [m["id"] for m in last["data"]] == ["gpt-test"] and last["has_more"] is False
        assert (await http.get("/alt/v1/models")).status_code == 401
        same = (await http.get("/v1/models", headers={"authorization": f"Bearer {wired.key}"})).json()
    assert sorted(m["id"] for m in same["data"]) == [m.id for m in models]  # the same visibility rule


async def test_a_model_is_retrieved_in_the_messages_shape(gateway, openai_upstream, anthropic_upstream):
    # The SDK's `models.retrieve` (GET /v1/models/{model_id} under the /alt base URL).
    wired = await gateway.wire(openai_upstream.base_url, ["gpt-test", "coder-a"])
    await gateway.wire(anthropic_upstream.base_url, ["claude-haiku-4-5"], kind="anthropic",
                       upstream_keys=(API_KEY,), name="claude", authorise=False)
    client = sdk(gateway, wired.key)
    listed = {m.id: m for m in [m async for m in client.models.list()]}
    model = await client.models.retrieve("coder-a")
    assert model == listed["coder-a"] and model.type == "model" and model.display_name == "coder-a"
    with pytest.raises(anthropic.PermissionDeniedError):
        await client.models.retrieve("claude-haiku-4-5")
    with pytest.raises(anthropic.NotFoundError):
        await client.models.retrieve("nobody-serves-this")
    async with httpx.AsyncClient(base_url=gateway.url) as http:
        missing = await http.get("/alt/v1/models/nobody-serves-this", headers={"x-api-key": wired.key})
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "NOT_FOUND"
        assert (await http.get("/alt/v1/models/coder-a")).status_code == 401
