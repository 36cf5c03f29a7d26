"""Structured outputs through the gateway with the SDKs' own helpers (openai `chat.completions.parse`,
`chat.completions.stream`, `responses.parse`; anthropic `messages.parse`, `messages.stream`), each parsing the
answer into the caller's type, on every route.

Claude takes a chat or Responses client's JSON schema as its own structured output from the 4.5 models on
(`output_config.format` on the vendor's API, `outputConfig.textFormat` on Bedrock's Converse), in the subset
its schemas allow (providers/claude.output_schema); the fakes answer JSON of the schema they are given, as the
services do, and the vendor's fake refuses a schema outside that subset with the vendor's words.
"""

from __future__ import annotations

import orjson
import pytest
from anthropic import AsyncAnthropic
from openai import AsyncOpenAI
from pydantic import BaseModel, Field

from tests.fakes.anthropic_upstream import API_KEY
from tests.fakes.bedrock_upstream import FakeBedrock
from tests.fakes.gemini_upstream import FakeGemini

CLAUDE_ON_BEDROCK = "anthropic.claude-haiku-4-5-20251001-v1:0"


class Weather(BaseModel):
    city: str
    degrees: int = Field(ge=-90, le=60)  # bounds Claude's subset cannot hold: said in the description
    sky: str | None = None


PROMPT = [{"role": "user", "content": "weather in Paris?"}]


@pytest.fixture
async def bedrock_upstream():
    fake = await FakeBedrock(models=(CLAUDE_ON_BEDROCK,)).start()
    yield fake
    await fake.close()


@pytest.fixture
async def gemini_upstream():
    fake = await FakeGemini().start()
    yield fake
    await fake.close()


async def wire(gateway, route, openai_upstream, anthropic_upstream, gemini_upstream, bedrock_upstream):
    """(key, model, upstream) of a channel of `route`; the fakes answer JSON of the schema they are given."""
    if route == "chat":
        return (await gateway.wire(openai_upstream.base_url, ["gpt-test"])).key, "gpt-test", openai_upstream
    if route == "anthropic":
        wired = await gateway.wire(anthropic_upstream.base_url, ["claude-haiku-4-5"], kind="anthropic",
                                   upstream_keys=(API_KEY,), name="claude")
        return wired.key, "claude-haiku-4-5", anthropic_upstream
    upstream, kind, model = ((bedrock_upstream, "aws-bedrock", CLAUDE_ON_BEDROCK) if route == "bedrock"
                             else (gemini_upstream, "gemini", "gemini-2.5-flash"))
    wired = await gateway.wire(upstream.base_url, [model], kind=kind, upstream_keys=(upstream.api_key,), name=kind)
    return wired.key, model, upstream


@pytest.mark.parametrize("route", ["chat", "anthropic", "bedrock", "gemini"])
async def test_the_sdks_parse_helpers_get_their_type_on_every_route(gateway, openai_upstream, anthropic_upstream,
                                                                   gemini_upstream, bedrock_upstream, route):
    key, model, upstream = await wire(gateway, route, openai_upstream, anthropic_upstream, gemini_upstream,
                                      bedrock_upstream)
    async with AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=key, max_retries=0) as openai, \
            AsyncAnthropic(base_url=f"{gateway.url}/alt", api_key=key, max_retries=0) as anthropic:
        parsed = await parse_with_every_helper(openai, anthropic, model)
    assert all(isinstance(value, Weather) for value in parsed), parsed
    if route == "anthropic":
        schema = upstream.requests[0].json()["output_config"]["format"]["schema"]
        assert schema["additionalProperties"] is False and "maximum: 60" in schema["properties"]["degrees"]["description"]
    if route == "bedrock":
        text_format = upstream.bodies[0]["outputConfig"]["textFormat"]
        assert orjson.loads(text_format["structure"]["jsonSchema"]["schema"])["additionalProperties"] is False


async def parse_with_every_helper(openai: AsyncOpenAI, anthropic: AsyncAnthropic, model: str) -> list:
    parsed = [(await openai.chat.completions.parse(model=model, messages=PROMPT, response_format=Weather))
              .choices[0].message.parsed]
    async with openai.chat.completions.stream(model=model, messages=PROMPT, response_format=Weather) as stream:
        parsed.append((await stream.get_final_completion()).choices[0].message.parsed)
    parsed.append((await openai.responses.parse(model=model, input="weather in Paris?", text_format=Weather))
                  .output_parsed)
    parsed.append((await anthropic.messages.parse(model=model, max_tokens=200, messages=PROMPT,
                                                  output_format=Weather)).parsed_output)
    async with anthropic.messages.stream(model=model, max_tokens=200, messages=PROMPT, output_format=Weather) as stream:
        parsed.append((await stream.get_final_message()).parsed_output)
    return parsed
