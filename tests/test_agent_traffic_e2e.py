"""What coding agents send, end to end (issue 10): the official anthropic SDK or raw HTTP shaped like
Claude Code's requests (docs: /work/shared/field-notes.md) → gateway → fake upstreams.

Covers mid-conversation system entries, vendor header forwarding, beta-only fields on conversion,
an upstream's refusal of the body (400, not 502), `HEAD /alt`, and the response `model`.
"""

from __future__ import annotations

import re

import anthropic
import httpx
import orjson
import pydantic
import pytest
from anthropic import AsyncAnthropic
from openai import AsyncOpenAI

from tests.fakes.anthropic_upstream import API_KEY, error_body
from tests.fakes.openai_upstream import arguments_for

MID_BETA = "mid-conversation-system-2026-04-07"
CLAUDE_CODE_BETAS = f"claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27,{MID_BETA}"


def sdk(gateway, key: str, **headers: str) -> AsyncAnthropic:
    """The vendor SDK with only its base URL changed (it sends a dated anthropic-version of its own)."""
    return AsyncAnthropic(base_url=f"{gateway.url}/alt", api_key=key, max_retries=0, default_headers=headers)


async def native(gateway, upstream, model="claude-haiku-4-5", upstream_model=None):
    spec = {"model_id": model, "upstream_model": upstream_model or model}
    return await gateway.wire(upstream.base_url, [spec], kind="anthropic", upstream_keys=(API_KEY,), name="claude")


async def chat_channel(gateway, upstream, model="claude-sonnet-4-6", upstream_model="gpt-test"):
    return await gateway.wire(upstream.base_url, [{"model_id": model, "upstream_model": upstream_model}])


AGENT_MESSAGES = [
    {"role": "user", "content": "first question"},
    {"role": "system", "content": [{"type": "text", "text": "The user switched to plan mode."}]},
    {"role": "user", "content": "second question"},
]


# --- mid-conversation system entries ------------------------------------------------------------


async def test_mid_conversation_system_passes_through_with_its_beta(gateway, anthropic_upstream):
    wired = await native(gateway, anthropic_upstream)
    msg = await sdk(gateway, wired.key).messages.create(
        model="claude-haiku-4-5", max_tokens=50, messages=AGENT_MESSAGES,
        extra_headers={"anthropic-beta": CLAUDE_CODE_BETAS},
    )
    assert msg.content[0].text == "Echo: second question"
    sent = anthropic_upstream.last
    assert sent.json()["messages"] == AGENT_MESSAGES  # forwarded as is
    assert sent.headers["anthropic-beta"] == CLAUDE_CODE_BETAS


async def test_mid_conversation_system_without_the_beta_names_beta_and_header(gateway, anthropic_upstream):
    wired = await native(gateway, anthropic_upstream)
    with pytest.raises(anthropic.BadRequestError) as caught:
        await sdk(gateway, wired.key).messages.create(model="claude-haiku-4-5", max_tokens=50,
                                                       messages=AGENT_MESSAGES)
    assert caught.value.status_code == 400
    body = caught.value.response.json()
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    message = body["error"]["message"]
    # Claude Code drops the beta and retries when the message names both (its own test, from its bundle).
    assert MID_BETA in message and re.search(r"anthropic[-_]beta", message)
    assert message.startswith("messages.1.role")
    assert anthropic_upstream.requests == []


async def test_mid_conversation_system_becomes_a_system_message_in_place_on_chat_upstreams(
        gateway, openai_upstream):
    wired = await chat_channel(gateway, openai_upstream)
    msg = await sdk(gateway, wired.key).messages.create(
        model="claude-sonnet-4-6", max_tokens=50, system="you are an agent", messages=AGENT_MESSAGES,
        extra_headers={"anthropic-beta": CLAUDE_CODE_BETAS},
    )
    assert msg.content[0].text == "Echo: second question"
    assert openai_upstream.last.json()["messages"] == [
        {"role": "system", "content": "you are an agent"},
        {"role": "user", "content": "first question"},
        {"role": "system", "content": "The user switched to plan mode."},
        {"role": "user", "content": "second question"},
    ]


# --- vendor headers and beta-gated fields --------------------------------------------------------


async def test_sdk_version_and_betas_reach_the_upstream_unchanged(gateway, anthropic_upstream):
    wired = await native(gateway, anthropic_upstream)
    # context_management is beta-gated: the (fake) vendor refuses it without its beta.
    edits = {"edits": [{"type": "clear_tool_uses_20250919"}]}
    msg = await sdk(gateway, wired.key).messages.create(
        model="claude-haiku-4-5", max_tokens=50, messages=[{"role": "user", "content": "hi"}],
        extra_headers={"anthropic-beta": "context-management-2025-06-27"},
        extra_body={"context_management": edits},
    )
    assert msg.content[0].text == "Echo: hi"
    sent = anthropic_upstream.last
    assert sent.headers["anthropic-version"] == anthropic._constants.ANTHROPIC_API_VERSION != "2023-06-01"
    assert sent.headers["anthropic-beta"] == "context-management-2025-06-27"
    assert sent.json()["context_management"] == edits


async def test_alt_version_is_sent_as_anthropic_version(gateway, anthropic_upstream):
    wired = await native(gateway, anthropic_upstream)
    async with httpx.AsyncClient(base_url=gateway.url) as http:
        resp = await http.post("/alt/v1/messages", headers={"x-api-key": wired.key, "alt-version": "2023-06-01"},
                               json={"model": "claude-haiku-4-5", "max_tokens": 5,
                                     "messages": [{"role": "user", "content": "hi"}]})
    assert resp.status_code == 200
    headers = anthropic_upstream.last.headers
    assert headers["anthropic-version"] == "2023-06-01" and "alt-version" not in headers
    assert "anthropic-beta" not in headers


async def test_beta_only_fields_are_dropped_on_conversion(gateway, openai_upstream):
    wired = await chat_channel(gateway, openai_upstream)
    await sdk(gateway, wired.key).messages.create(
        model="claude-sonnet-4-6", max_tokens=50, messages=[{"role": "user", "content": "hi"}],
        extra_headers={"anthropic-beta": CLAUDE_CODE_BETAS},
        extra_body={"context_management": {"edits": []}, "output_config": {"effort": "high"}},
    )  # `thread` is refused instead: tests/test_message_threads.py
    sent = openai_upstream.last
    assert not {"context_management", "output_config"} & set(sent.json())
    assert "anthropic-beta" not in sent.headers and "anthropic-version" not in sent.headers


# --- an upstream's refusal of the body -----------------------------------------------------------


async def test_upstream_invalid_request_is_the_callers_400_in_messages_shape(gateway, anthropic_upstream):
    wired = await native(gateway, anthropic_upstream)
    anthropic_upstream.fail_next(400, error_body("invalid_request_error", "max_tokens: 99999 > 64000"), times=3)
    for stream in (False, True):
        async with httpx.AsyncClient(base_url=gateway.url) as http:
            resp = await http.post("/alt/v1/messages", headers={"x-api-key": wired.key, "anthropic-version": "2023-06-01"},
                                   json={"model": "claude-haiku-4-5", "max_tokens": 99999, "stream": stream,
                                         "messages": [{"role": "user", "content": "hi"}]})
        assert resp.status_code == 400
        assert resp.json() == {"type": "error", "error": {"type": "invalid_request_error",
                                                          "message": "max_tokens: 99999 > 64000"}}
    assert len(anthropic_upstream.requests) == 2  # one attempt per call: no retry


async def test_upstream_invalid_request_is_not_failed_over_and_uses_chat_shape(gateway, openai_upstream):
    first = await gateway.wire(openai_upstream.base_url, ["gpt-test"], name="first")
    second = await gateway.services.channels.create("second", first.provider_id, models=["gpt-test"], priority=1)
    await gateway.services.applications.authorize_channel(first.app_id, second.id)
    await gateway.runtime.refresh()
    openai_upstream.fail_next(400, {"error": {"message": "Invalid 'messages[0].content': string too long.",
                                              "type": "invalid_request_error", "param": None,
                                              "code": "string_above_max_length"}})
    client = AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=first.key, max_retries=0)
    with pytest.raises(Exception) as caught:
        await client.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "x"}])
    assert caught.value.status_code == 400
    assert caught.value.response.json() == {"error": {
        "message": "Invalid 'messages[0].content': string too long.", "type": "invalid_request_error",
        "code": "invalid_request"}}
    assert len(openai_upstream.requests) == 1


async def test_refusal_quoting_the_upstream_key_never_shows_it(gateway, anthropic_upstream):
    wired = await native(gateway, anthropic_upstream)
    anthropic_upstream.fail_next(400, error_body("invalid_request_error", f"bad request for key {API_KEY}"))
    with pytest.raises(anthropic.BadRequestError) as caught:
        await sdk(gateway, wired.key).messages.create(model="claude-haiku-4-5", max_tokens=5,
                                                       messages=[{"role": "user", "content": "hi"}])
    assert API_KEY not in caught.value.response.text and "[redacted]" in caught.value.response.text


# --- HEAD /alt ---------------------------------------------------------------------------------------


async def test_head_alt_answers_200(gateway):
    async with httpx.AsyncClient(base_url=gateway.url) as http:
        for path in ("/alt", "/alt/"):
            assert (await http.head(path)).status_code == 200


# --- response model: always the client's id ---------------------------------------------------------


async def test_pass_through_answers_with_the_clients_model_id(gateway, anthropic_upstream):
    # The upstream answers with its dated snapshot name; the gateway id is an alias of it.
    wired = await native(gateway, anthropic_upstream, model="team-claude", upstream_model="claude-haiku-4-5")
    client = sdk(gateway, wired.key)
    msg = await client.messages.create(model="team-claude", max_tokens=20,
                                       messages=[{"role": "user", "content": "hi"}])
    assert msg.model == "team-claude"
    async with client.messages.stream(model="team-claude", max_tokens=20,
                                      messages=[{"role": "user", "content": "hi"}]) as stream:
        final = await stream.get_final_message()
    assert final.model == "team-claude" and final.content[0].text == "Echo: hi"


async def test_chat_pass_through_answers_with_the_clients_model_id(gateway, openai_upstream):
    wired = await gateway.wire(openai_upstream.base_url, ["gpt-test"])
    client = AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=wired.key, max_retries=0)
    resp = await client.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "hi"}])
    assert resp.model == "gpt-test"
    async with httpx.AsyncClient(base_url=gateway.url) as http:
        raw = await http.post("/v1/chat/completions", headers={"authorization": f"Bearer {wired.key}"},
                              json={"model": "gpt-test", "stream": True,
                                    "messages": [{"role": "user", "content": "one two three"}]})
    chunks = [orjson.loads(line[6:]) for line in raw.text.splitlines()
              if line.startswith("data: {")]
    assert len(chunks) > 3 and {c["model"] for c in chunks} == {"gpt-test"}
    assert "2025-08-07" not in raw.text


# --- reasoning models behind chat-completions providers -------------------------------------------


async def test_openai_reasoning_model_gets_max_completion_tokens_and_effort(gateway):
    from tests.fakes.openai_upstream import FakeOpenAI

    upstream = await FakeOpenAI(models=("o4-mini", "gpt-5-mini", "gpt-test")).start()
    try:
        wired = await gateway.wire(upstream.base_url, ["o4-mini", "gpt-5-mini", "gpt-test"], kind="openai")
        client = sdk(gateway, wired.key)
        msg = await client.messages.create(
            model="o4-mini", max_tokens=100, messages=[{"role": "user", "content": "hi"}],
            thinking={"type": "enabled", "budget_tokens": 31999}, extra_body={"temperature": 0.5})
        assert msg.content[-1].text == "Echo: hi"  # the fake refuses max_tokens for reasoning models
        sent = upstream.last.json()
        assert sent["max_completion_tokens"] == 100 and sent["reasoning_effort"] == "high"
        assert "max_tokens" not in sent and "temperature" not in sent
        await client.messages.create(  # Claude Code's form: adaptive thinking and output_config.effort
            model="gpt-5-mini", max_tokens=100, messages=[{"role": "user", "content": "hi"}],
            thinking={"type": "adaptive"}, extra_body={"output_config": {"effort": "low"}})
        sent = upstream.last.json()
        assert (sent["max_completion_tokens"], sent["reasoning_effort"]) == (100, "low")
        await client.messages.create(model="gpt-test", max_tokens=100, extra_body={"temperature": 0.5},
                                     messages=[{"role": "user", "content": "hi"}],
                                     thinking={"type": "enabled", "budget_tokens": 2000})
        sent = upstream.last.json()  # not a reasoning model: unchanged
        assert (sent["max_tokens"], sent["temperature"]) == (100, 0.5)
        assert "max_completion_tokens" not in sent and "reasoning_effort" not in sent
    finally:
        await upstream.close()


async def test_reasoning_capability_marks_a_model_instance_by_name_unknown(gateway):
    from tests.fakes.openai_upstream import FakeOpenAI

    upstream = await FakeOpenAI(models=("corp-reasoner",)).start()
    upstream.reasoning_models = {"corp-reasoner"}
    try:
        wired = await gateway.wire(upstream.base_url, [{"model_id": "thinker", "upstream_model": "corp-reasoner",
                                                        "capabilities": ["streaming", "reasoning"]}])
        await sdk(gateway, wired.key).messages.create(model="thinker", max_tokens=64,
                                                       messages=[{"role": "user", "content": "hi"}])
        assert upstream.last.json()["max_completion_tokens"] == 64
        # a chat client's own body (pass-through) too
        client = AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=wired.key, max_retries=0)
        await client.chat.completions.create(model="thinker", max_tokens=64, temperature=0.2,
                                             messages=[{"role": "user", "content": "hi"}])
        sent = upstream.last.json()
        assert sent["max_completion_tokens"] == 64 and "max_tokens" not in sent and "temperature" not in sent
    finally:
        await upstream.close()


@pytest.fixture
async def azure_reasoning(gateway):
    """(fake Azure, wired key): a deployment named after its reasoning model, one an admin marked `reasoning`
    under a name of their own, and gpt-4o."""
    from tests.fakes.azure_upstream import FakeAzure

    upstream = await FakeAzure(deployments={"prod-gpt4o": "gpt-4o-2024-08-06", "o4-mini": "o4-mini",
                                            "team-reasoner": "o3-mini"}).start()
    try:
        wired = await gateway.wire(upstream.base_url, [
            "prod-gpt4o", "o4-mini",
            {"model_id": "reasoner", "upstream_model": "team-reasoner", "capabilities": ["reasoning"]}],
            kind="azure-openai", upstream_keys=("az-key-1",))
        yield upstream, wired.key
    finally:
        await upstream.close()


AZURE_MODELS = ("o4-mini", "reasoner", "prod-gpt4o")
AZURE_VERSIONS = ["2025-04-01-preview", "2025-04-01-preview", "2024-10-21"]  # reasoning deployments need the later


async def test_azure_reasoning_deployment_uses_an_api_version_that_serves_it(gateway, azure_reasoning):
    upstream, key = azure_reasoning
    client = sdk(gateway, key)
    for model in AZURE_MODELS:
        msg = await client.messages.create(model=model, max_tokens=50, messages=[{"role": "user", "content": "hi"}])
        assert msg.model == model and msg.content[0].text == "Echo: hi"
    assert [r.query["api-version"] for r in upstream.requests] == AZURE_VERSIONS


async def test_chat_clients_reach_azure_reasoning_deployments_on_pass_through(gateway, azure_reasoning):
    # The OpenAI SDK (or opencode, which asks every model for max_tokens) on an azure-openai channel: its own body
    # goes to the deployment, on the API version that serves a reasoning model and with the field it takes.
    upstream, key = azure_reasoning
    client = AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=key, max_retries=0)
    for model in AZURE_MODELS:
        answer = await client.chat.completions.create(model=model, max_tokens=50,
                                                      messages=[{"role": "user", "content": "hi"}])
        assert answer.model == model and answer.choices[0].message.content == "Echo: hi"
    assert [r.query["api-version"] for r in upstream.requests] == AZURE_VERSIONS
    assert [("max_tokens" in r.json(), r.json().get("max_completion_tokens")) for r in upstream.requests] == [
        (False, 50), (False, 50), (True, None)]


# --- vendor-defined client tools on conversion ------------------------------------------------------


async def test_vendor_client_tools_become_function_tools_on_chat_upstreams(gateway, openai_upstream):
    wired = await chat_channel(gateway, openai_upstream)
    tools = [{"type": "bash_20250124", "name": "bash"},
             {"type": "text_editor_20250728", "name": "str_replace_based_edit_tool", "max_characters": 10000}]
    msg = await sdk(gateway, wired.key).messages.create(
        model="claude-sonnet-4-6", max_tokens=100, tools=tools,
        messages=[{"role": "user", "content": "call tool please"}])
    sent = {t["function"]["name"]: t["function"] for t in openai_upstream.last.json()["tools"]}
    assert set(sent) == {"bash", "str_replace_based_edit_tool"}
    assert set(sent["bash"]["parameters"]["properties"]) == {"command", "restart"}
    editor = sent["str_replace_based_edit_tool"]["parameters"]
    assert editor["required"] == ["command", "path"]
    assert editor["properties"]["command"]["enum"] == ["view", "create", "str_replace", "insert"]
    assert {b.name for b in msg.content if b.type == "tool_use"} == {"bash", "str_replace_based_edit_tool"}


class Weather(pydantic.BaseModel):
    city: str
    celsius: int


def _structured_answer(body: dict) -> tuple[str | None, list, str]:
    """As OpenAI answers a `response_format` json_schema request: JSON of that schema."""
    fmt = body.get("response_format") or {}
    if fmt.get("type") != "json_schema":
        return "not JSON", [], "stop"
    return orjson.dumps(arguments_for(fmt["json_schema"]["schema"])).decode(), [], "stop"


async def test_structured_output_of_the_sdk_reaches_a_chat_upstream_as_its_response_format(gateway, openai_upstream):
    # The SDK's messages.parse sends output_config.format; a chat upstream takes the same schema as
    # response_format json_schema, and the SDK parses the answer into the caller's type.
    wired = await chat_channel(gateway, openai_upstream)
    openai_upstream.script = _structured_answer
    parsed = await sdk(gateway, wired.key).messages.parse(
        model="claude-sonnet-4-6", max_tokens=100, messages=[{"role": "user", "content": "weather in Paris?"}],
        output_format=Weather)
    sent = openai_upstream.last.json()["response_format"]
    assert sent["type"] == "json_schema" and sent["json_schema"]["name"]
    assert set(sent["json_schema"]["schema"]["properties"]) == {"city", "celsius"}
    assert parsed.parsed_output == Weather(**arguments_for(sent["json_schema"]["schema"]))
    # The beta's earlier place for it (earlier SDKs), a top-level output_format, is read the same way.
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    await sdk(gateway, wired.key).beta.messages.create(
        model="claude-sonnet-4-6", max_tokens=100, messages=[{"role": "user", "content": "weather?"}],
        betas=["structured-outputs-2025-11-13"], extra_body={"output_format": {"type": "json_schema", "schema": schema}})
    assert openai_upstream.last.json()["response_format"]["json_schema"]["schema"] == schema


async def test_a_malformed_output_format_is_refused_on_conversion(gateway, openai_upstream):
    wired = await chat_channel(gateway, openai_upstream)
    with pytest.raises(anthropic.BadRequestError) as caught:
        await sdk(gateway, wired.key).messages.create(
            model="claude-sonnet-4-6", max_tokens=100, messages=[{"role": "user", "content": "hi"}],
            extra_body={"output_config": {"format": {"type": "xml"}}})
    assert caught.value.response.json()["error"]["message"].startswith("output_config.format")
    assert openai_upstream.requests == []


async def test_computer_use_tool_is_refused_on_conversion(gateway, openai_upstream):
    wired = await chat_channel(gateway, openai_upstream)
    with pytest.raises(anthropic.BadRequestError) as caught:
        await sdk(gateway, wired.key).messages.create(
            model="claude-sonnet-4-6", max_tokens=100, messages=[{"role": "user", "content": "hi"}],
            tools=[{"type": "computer_20250124", "name": "computer", "display_width_px": 1024,
                    "display_height_px": 768}])
    assert "computer_20250124" in caught.value.response.json()["error"]["message"]
    assert openai_upstream.requests == []


# --- prompt-cache usage both ways -----------------------------------------------------------------


async def test_cached_prompt_tokens_reach_a_messages_client_and_the_call_log(gateway, openai_upstream):
    from sqlalchemy import select

    from modelgate.storage.models import CallLog

    wired = await chat_channel(gateway, openai_upstream)
    openai_upstream.cached_tokens = 1024
    client = sdk(gateway, wired.key)
    msg = await client.messages.create(model="claude-sonnet-4-6", max_tokens=20,
                                       messages=[{"role": "user", "content": "hi"}])
    assert msg.usage.cache_read_input_tokens == 1024
    async with client.messages.stream(model="claude-sonnet-4-6", max_tokens=20,
                                      messages=[{"role": "user", "content": "hi"}]) as stream:
        final = await stream.get_final_message()
    assert final.usage.cache_read_input_tokens == 1024
    await gateway.runtime.writer.flush()
    async with gateway.runtime.db.session() as s:
        rows = (await s.scalars(select(CallLog).order_by(CallLog.id))).all()
    assert [(r.cache_read_tokens, r.prompt_tokens - r.cache_read_tokens == msg.usage.input_tokens)
            for r in rows] == [(1024, True), (1024, True)]


async def test_cache_usage_of_a_messages_upstream_reaches_a_chat_client(gateway, anthropic_upstream):
    from tests.fakes.anthropic_upstream import Reply

    wired = await native(gateway, anthropic_upstream)
    anthropic_upstream.reply_next(Reply(text="hi", input_tokens=10, output_tokens=2, cache_read_input_tokens=500))
    client = AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=wired.key, max_retries=0)
    resp = await client.chat.completions.create(model="claude-haiku-4-5", messages=[{"role": "user", "content": "x"}])
    assert resp.usage.prompt_tokens == 510 and resp.usage.prompt_tokens_details.cached_tokens == 500
