"""Output-token caps learnt from the vendors' refusals (providers/output_caps.py).

Claude Code asks for 32,000 output tokens and more, opencode for 32,000 from every chat model; DeepSeek,
Groq, DashScope, Zhipu and MiniMax refuse a request above the model's cap, naming the cap
(tests/fakes/compat_rules.CAP_REFUSALS, their words). Caps change per model and release, so the gateway
learns them from the refusal: the call is sent once more at the cap, and later calls to that model at it
from the start, whether the call is converted or passed through in the client's own protocol.
"""

from __future__ import annotations

import anthropic
import orjson
import pytest
from anthropic import AsyncAnthropic
from openai import AsyncOpenAI

from modelgate.providers.output_caps import LearnedCaps, stated_cap
from modelgate.providers.registry import KINDS
from modelgate.providers.base import Endpoint
from tests.fakes.anthropic_upstream import API_KEY as ANTHROPIC_KEY
from tests.fakes.anthropic_upstream import FakeAnthropic
from tests.fakes.compat_rules import CAP_REFUSALS
from tests.fakes.openai_upstream import FakeOpenAI

MODEL = "vendor-model"


@pytest.fixture
async def vendor():
    fake = await FakeOpenAI(models=(MODEL,)).start()
    yield fake
    await fake.close()


def _asked(recorded) -> int:
    body = recorded.json()
    return body.get("max_tokens") or body.get("max_completion_tokens")


@pytest.mark.parametrize("kind", sorted(CAP_REFUSALS))
async def test_claude_code_s_output_limit_is_cut_to_the_cap_the_vendor_names(gateway, vendor, kind):
    vendor.vendor_caps[MODEL] = (8192, CAP_REFUSALS[kind])
    wired = await gateway.wire(f"{vendor.origin}/v1", [MODEL], kind=kind, upstream_keys=("up-key-1",), name=kind)
    api = AsyncAnthropic(base_url=f"{gateway.url}/alt", api_key=wired.key, max_retries=0, timeout=60)
    answer = await api.messages.create(model=MODEL, max_tokens=32000, messages=[{"role": "user", "content": "hi"}])
    assert answer.content[0].text == "Echo: hi"  # type: ignore[union-attr]
    assert [_asked(r) for r in vendor.requests] == [32000, 8192]
    # Learnt: the next calls, streamed or not, go at the cap from the start.
    async with api.messages.stream(model=MODEL, max_tokens=64000, messages=[{"role": "user", "content": "again"}]) as s:
        assert (await s.get_final_message()).content[0].text == "Echo: again"  # type: ignore[union-attr]
    await api.messages.create(model=MODEL, max_tokens=4000, messages=[{"role": "user", "content": "small"}])
    assert [_asked(r) for r in vendor.requests] == [32000, 8192, 8192, 4000]


async def test_a_stream_refused_for_its_limit_is_sent_again_at_the_cap(gateway, vendor):
    vendor.vendor_caps[MODEL] = (8192, CAP_REFUSALS["deepseek"])
    wired = await gateway.wire(f"{vendor.origin}/v1", [MODEL], kind="deepseek", upstream_keys=("up-key-1",))
    api = AsyncAnthropic(base_url=f"{gateway.url}/alt", api_key=wired.key, max_retries=0, timeout=60)
    async with api.messages.stream(model=MODEL, max_tokens=32000, messages=[{"role": "user", "content": "hi"}]) as s:
        assert (await s.get_final_message()).content[0].text == "Echo: hi"  # type: ignore[union-attr]
    assert [_asked(r) for r in vendor.requests] == [32000, 8192]


async def test_a_refusal_that_names_no_lower_cap_is_the_client_s_400(gateway, vendor):
    # A cap above what was asked is not about this request; the refusal reaches the client once.
    vendor.vendor_caps[MODEL] = (100, "Invalid max_tokens value, the valid range of max_tokens is [1, 65536]")
    wired = await gateway.wire(f"{vendor.origin}/v1", [MODEL], kind="deepseek", upstream_keys=("up-key-1",))
    api = AsyncAnthropic(base_url=f"{gateway.url}/alt", api_key=wired.key, max_retries=0, timeout=60)
    with pytest.raises(anthropic.BadRequestError):
        await api.messages.create(model=MODEL, max_tokens=32000, messages=[{"role": "user", "content": "hi"}])
    assert len(vendor.requests) == 1


@pytest.mark.parametrize("kind", sorted(CAP_REFUSALS))
async def test_opencode_s_output_limit_is_cut_to_the_cap_on_pass_through(gateway, vendor, kind):
    # opencode's openai-compatible provider asks every model for 32,000 tokens; DeepSeek's chat model took
    # 8,192 (anomalyco/opencode#1000 for Groq's 32,768). The client's own body goes to a chat upstream.
    vendor.vendor_caps[MODEL] = (8192, CAP_REFUSALS[kind])
    wired = await gateway.wire(f"{vendor.origin}/v1", [MODEL], kind=kind, upstream_keys=("up-key-1",), name=kind)
    api = AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=wired.key, max_retries=0, timeout=60)
    answer = await api.chat.completions.create(model=MODEL, max_tokens=32000,
                                               messages=[{"role": "user", "content": "hi"}])
    assert answer.choices[0].message.content == "Echo: hi"
    assert [_asked(r) for r in vendor.requests] == [32000, 8192]
    stream = await api.chat.completions.create(model=MODEL, max_completion_tokens=64000, stream=True,
                                               messages=[{"role": "user", "content": "again"}])
    assert "".join([c.choices[0].delta.content or "" async for c in stream if c.choices]) == "Echo: again"
    await api.chat.completions.create(model=MODEL, max_tokens=4000, messages=[{"role": "user", "content": "small"}])
    assert [_asked(r) for r in vendor.requests] == [32000, 8192, 8192, 4000]
    assert [r.json()["messages"] for r in vendor.requests][1:] == [
        [{"role": "user", "content": "hi"}], [{"role": "user", "content": "again"}],
        [{"role": "user", "content": "small"}]]


async def test_a_pass_through_stream_refused_for_its_limit_is_sent_again_at_the_cap(gateway, vendor):
    vendor.vendor_caps[MODEL] = (8192, CAP_REFUSALS["deepseek"])
    wired = await gateway.wire(f"{vendor.origin}/v1", [MODEL], kind="deepseek", upstream_keys=("up-key-1",))
    api = AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=wired.key, max_retries=0, timeout=60)
    stream = await api.chat.completions.create(model=MODEL, max_tokens=32000, stream=True,
                                               messages=[{"role": "user", "content": "hi"}])
    assert "".join([c.choices[0].delta.content or "" async for c in stream if c.choices]) == "Echo: hi"
    assert [_asked(r) for r in vendor.requests] == [32000, 8192]


async def test_claude_code_behind_an_anthropic_compatible_api_is_cut_to_the_cap_with_its_thinking_budget(gateway):
    # Another vendor's model behind its Anthropic-compatible API (DeepSeek's, MiniMax's) refuses as its own
    # API does; Claude Code's own body goes there, its thinking budget counted within max_tokens.
    fake = await FakeAnthropic(models=("vendor-chat",)).start()
    try:
        fake.vendor_caps["vendor-chat"] = (8192, CAP_REFUSALS["minimax"])
        wired = await gateway.wire(fake.base_url, ["vendor-chat"], kind="anthropic", upstream_keys=(ANTHROPIC_KEY,),
                                   name="compatible")
        api = AsyncAnthropic(base_url=f"{gateway.url}/alt", api_key=wired.key, max_retries=0, timeout=60)
        answer = await api.messages.create(model="vendor-chat", max_tokens=32000,
                                           thinking={"type": "enabled", "budget_tokens": 31999},
                                           messages=[{"role": "user", "content": "hi"}])
        assert answer.stop_reason == "end_turn"
        sent = [r.json() for r in fake.requests]
        assert [(b["max_tokens"], b["thinking"]["budget_tokens"]) for b in sent] == [(32000, 31999), (8192, 8191)]
        async with api.messages.stream(model="vendor-chat", max_tokens=20000,
                                       messages=[{"role": "user", "content": "again"}]) as s:
            assert (await s.get_final_message()).stop_reason == "end_turn"
        assert fake.requests[-1].json()["max_tokens"] == 8192 and len(fake.requests) == 3
    finally:
        await fake.close()


def test_a_responses_body_goes_within_the_learnt_cap():
    adapter = KINDS["openai"].adapter_for("openai-responses")
    endpoint = Endpoint("p1:k1", 1, 1, "openai", "https://api.openai.com/v1", "sk-up", {})
    body = {"model": "m", "input": "hi", "max_output_tokens": 32000}
    assert orjson.loads(adapter.build_native_request(body, "m", endpoint, False, None, 8192).body)[
        "max_output_tokens"] == 8192
    assert orjson.loads(adapter.build_native_request(body, "m", endpoint, False, None, None).body) == body


@pytest.mark.parametrize("message, cap", [
    ("Invalid max_tokens value, the valid range of max_tokens is [1, 8192]", 8192),  # deepseek-ai/DeepSeek-V3#69
    ("`max_tokens` must be less than or equal to `32768`, the maximum value for `max_tokens` is less than the "
     "`context_window` for this model", 32768),  # anomalyco/opencode#1000
    ("`max_completion_tokens` must be less than or equal to `16384`, the maximum value for "
     "`max_completion_tokens` is less than the `context_window` for this model", 16384),
    ("<400> InternalError.Algo.InvalidParameter: Range of max_tokens should be [1, 8192]", 8192),
    ("Range of max_tokens should be [1, 131072]", 131072),  # anomalyco/opencode#40770
    ("max_tokens参数非法：限制数值范围[1,131072]", 131072),
    ("max_tokens is too large: 32000. This model supports at most 16384 completion tokens, whereas you provided "
     "32000.", 16384),
    ("max_tokens: 128001 > 64000, which is the maximum allowed number of output tokens for claude-opus-4-5-20251101",
     64000),  # anthropics/claude-code#24451
    ("Unable to submit request because it has a maxOutputTokens value of 128000 but the supported range is from 1 "
     "(inclusive) to 65537 (exclusive). Update the value and try again.", 65536),  # the bound is exclusive
    ("invalid params, model[MiniMax-M3] does not support max tokens > 524288 (2013)", 524288),
    ("invalid params, model[MiniMax-M3] does not support max tokens \\u003e 524288 (2013)", 524288),
    ("max_tokens (262144) exceeds model's maximum output tokens (65536) for model deepseek-v4-pro (ref: 1)", 65536),
    ("The parameter `max_tokens` specified in the request are not valid: integer above maximum value, expected a "
     "value <= 32768, but got 65536 instead.", 32768),  # yiliqi78/TOKENICODE#3
    # The context window (prompt and output together) names no cap of the model.
    ("This model's maximum context length is 131072 tokens. However, you requested 131134 tokens (122942 in the "
     "messages, 8192 in the completion).", None),
    ("Requests with max_tokens > 4096 must have stream=true", None),
    ("max_total_tokens (33802) must be less than or equal to max_seq_len (32768)", None),
])
def test_the_cap_is_read_from_each_vendor_s_words(message, cap):
    assert stated_cap(message) == cap


def test_learnt_caps_are_bounded():
    caps = LearnedCaps(most=2)
    for i in range(3):
        caps.learn(1, f"m{i}", 100 + i)
    assert caps.get(1, "m0") is None and caps.get(1, "m2") == 102
