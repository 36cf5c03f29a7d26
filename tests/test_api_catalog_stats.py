"""Plan catalog, statistics (matching call_log rows) and resilience events."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from modelgate.catalog import CatalogError, load_catalog
from modelgate.providers.registry import KINDS
from modelgate.routing.events import ResilienceEventData
from modelgate.storage.usage_writer import CallRecord, UsageWriter
from tests import test_api_base as base
from tests.test_api_base import Env, as_admin, as_user, assert_envelope_error

api = base.api  # the shared fixture

ALL_KINDS = {
    "openai", "openai-compatible", "azure-openai", "anthropic", "gemini", "aws-bedrock", "cohere", "mistral",
    "deepseek", "groq", "together", "fireworks", "openrouter", "xai", "perplexity", "moonshot", "zhipu",
    "dashscope", "siliconflow", "ollama", "vllm", "mock", "vertex-ai", "minimax",
}


# --- catalog ----------------------------------------------------------------------------------

def test_builtin_catalog_covers_every_kind() -> None:
    catalog = load_catalog()
    assert set(catalog.providers) == ALL_KINDS
    assert set(KINDS) <= ALL_KINDS
    for kind in ("ollama", "vllm", "openai-compatible"):
        plan = catalog.default_plan(kind)
        assert plan.type == "SELF_HOSTED"
        assert catalog.price_for("anything-local", kind).cost(1000, 1000) == 0
    batch = catalog.plans["openai-batch"][1]
    payg = {m.id: m for m in catalog.plans["openai-payg"][1].models}
    assert {m.id for m in batch.models} == set(payg)
    assert all(m.input == pytest.approx(payg[m.id].input / 2) for m in batch.models)


def test_admin_file_overrides_and_extends(tmp_path) -> None:
    extra = tmp_path / "extra.yaml"
    extra.write_text(
        "pricesCheckedAt: '2030-01-01'\n"
        "providers:\n"
        "  - kind: openai\n"
        "    plans:\n"
        "      - planCode: openai-payg\n"
        "        models:\n"
        "          - {id: gpt-4o, input: 1.0, output: 2.0, capabilities: [streaming]}\n"
        "          - {id: house-model, input: 3.0, output: 4.0}\n"
        "      - planCode: openai-contract\n"
        "        name: Our contract\n"
        "        type: ENTERPRISE\n"
        "        currency: EUR\n"
        "        models: [{id: gpt-4o, input: 0.5, output: 1.5}]\n"
    )
    catalog = load_catalog(extra)
    assert catalog.prices_checked_at == "2030-01-01"
    assert catalog.price_for("gpt-4o", "openai").input == 1.0
    assert catalog.price_for("house-model").output == 4.0
    assert catalog.price_for("gpt-4o-mini", "openai").input == 0.15  # untouched built-ins stay
    assert catalog.plans["openai-contract"][1].currency == "EUR"
    # The batch plan derives from the overridden pay-as-you-go prices.
    batch = {m.id: m for m in catalog.plans["openai-batch"][1].models}
    assert batch["gpt-4o"].input == 0.5


def test_invalid_admin_file_is_rejected(tmp_path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"providers": [{"kind": "openai", "plans": [{"planCode": "x", "name": "x", '
                   '"type": "NOPE"}]}]}')
    with pytest.raises(CatalogError):
        load_catalog(bad)
    with pytest.raises(CatalogError):
        load_catalog(tmp_path / "missing.yaml")


def test_catalog_file_from_environment(tmp_path, monkeypatch) -> None:
    extra = tmp_path / "env.yaml"
    extra.write_text("providers: [{kind: my-llm, name: Mine, plans: [{planCode: mine, name: Mine, "
                     "type: SELF_HOSTED, models: [{id: m1, input: 0, output: 0}]}]}]\n")
    monkeypatch.setenv("MODELGATE_CATALOG_FILE", str(extra))
    assert "my-llm" in load_catalog().providers


async def test_catalog_providers_and_plans(api: Env) -> None:
    c = await as_user(api)
    r = await c.get("/api/v1/plan-catalogs/providers")
    providers = {p["kind"]: p for p in r.json()["data"]}
    assert set(providers) == ALL_KINDS
    assert providers["openai"]["supported"] is True
    assert providers["openai"]["defaultPlanCode"] == "openai-payg"
    plans = (await c.get("/api/v1/plan-catalogs")).json()["data"]
    codes = {p["planCode"] for p in plans}
    assert {"openai-payg", "anthropic-batch", "gemini-free", "vllm-self-hosted"} <= codes
    only = (await c.get("/api/v1/plan-catalogs?providerKind=anthropic")).json()["data"]
    assert {p["providerKind"] for p in only} == {"anthropic"}


async def test_plan_detail_and_pricing(api: Env) -> None:
    c = await as_user(api)
    r = await c.get("/api/v1/plan-catalogs/openai-payg")
    plan = r.json()["data"]
    assert plan["type"] == "PAY_AS_YOU_GO" and plan["currency"] == "USD"
    gpt4o = next(m for m in plan["models"] if m["id"] == "gpt-4o")
    assert gpt4o["inputPrice"] == 2.5 and gpt4o["outputPrice"] == 10.0
    assert set(gpt4o["capabilities"]) == {"streaming", "functionCalling", "vision"}
    r = await c.get("/api/v1/plan-catalogs/openai-payg/pricing")
    pricing = r.json()["data"]
    assert pricing["unit"] == "per 1M tokens" and pricing["pricesCheckedAt"]
    assert {"model": "gpt-4o", "inputPrice": 2.5, "outputPrice": 10.0} in pricing["prices"]
    assert_envelope_error(await c.get("/api/v1/plan-catalogs/no-such-plan"), 404, "NOT_FOUND")
    assert_envelope_error(await c.get("/api/v1/plan-catalogs/no-such-plan/pricing"), 404, "NOT_FOUND")


async def test_catalog_models_filters(api: Env) -> None:
    c = await as_user(api)
    everything = (await c.get("/api/v1/plan-catalogs/models")).json()["data"]
    vision = (await c.get("/api/v1/plan-catalogs/models?capability=vision")).json()["data"]
    assert vision and all("vision" in m["capabilities"] for m in vision)
    assert len(vision) < len(everything)
    claude = (await c.get("/api/v1/plan-catalogs/models?keyword=CLAUDE")).json()["data"]
    assert claude and all("claude" in (m["id"] + m["providerName"]).lower() for m in claude)
    both = (await c.get("/api/v1/plan-catalogs/models?keyword=gpt-4o&capability=functionCalling")).json()["data"]
    assert any(m["id"] == "gpt-4o" and m["providerKind"] == "openai" for m in both)
    gpt4o = next(m for m in both if m["id"] == "gpt-4o" and m["providerKind"] == "openai")
    assert gpt4o["planCode"] == "openai-payg" and "openai-batch" in gpt4o["plans"]


@pytest.mark.parametrize("capability", ["audio", "Vision", "function_calling", ""])
async def test_bad_capability_is_400(api: Env, capability: str) -> None:
    c = await as_user(api)
    r = await c.get("/api/v1/plan-catalogs/models", params={"capability": capability})
    assert_envelope_error(r, 400, "VALIDATION_ERROR")


# --- stats ------------------------------------------------------------------------------------

async def _write(env: Env, records: list[CallRecord]) -> None:
    writer = UsageWriter(env.state.db, env.state.settings)
    for rec in records:
        writer.record(rec)
    await writer.flush()


def _call(env: Env, model: str, prompt: int, completion: int, status: int = 200, days_ago: int = 0,
          kind: str | None = "openai", app_id: int | None = None, **kw) -> CallRecord:
    return CallRecord(trace_id=kw.pop("trace_id", None) or str(uuid.uuid4()), protocol="chat", model=model, status=status,
                      created_at=env.clock() - timedelta(days=days_ago, minutes=1), provider_kind=kind,
                      prompt_tokens=prompt, completion_tokens=completion, application_id=app_id, **kw)


async def test_stats_today_match_call_log(api: Env) -> None:
    await _write(api, [
        _call(api, "gpt-4o", 1000, 500),
        _call(api, "gpt-4o", 2000, 0, status=502, error_code="UPSTREAM_ERROR"),
        _call(api, "gpt-4o-mini-2024-07-18", 1_000_000, 1_000_000),
        _call(api, "mystery-model", 10, 10, kind="openai-compatible"),
        _call(api, "unknown-anywhere", 7, 3, kind=None),
        _call(api, "gpt-4o", 99999, 99999, days_ago=1),  # yesterday: not in today's totals
    ])
    c = await as_admin(api)
    data = (await c.get("/api/v1/stats")).json()["data"]
    assert data["date"] == api.clock().date().isoformat()
    assert data["requestCount"] == 5
    assert data["errorCount"] == 1 and data["successCount"] == 4
    assert data["promptTokens"] == 1000 + 2000 + 1_000_000 + 10 + 7
    assert data["completionTokens"] == 500 + 1_000_000 + 10 + 3
    assert data["totalTokens"] == data["promptTokens"] + data["completionTokens"]
    # gpt-4o: 3000 in x 2.5 + 500 out x 10 per 1M; gpt-4o-mini (date suffix stripped): 0.15 + 0.60;
    # the self-hosted kind prices any model at 0.
    expected = (3000 * 2.5 + 500 * 10) / 1e6 + 0.15 + 0.60
    assert data["cost"]["USD"] == pytest.approx(expected)
    assert data["unpricedModels"] == ["unknown-anywhere"]


async def test_stats_trend_zero_filled(api: Env) -> None:
    await _write(api, [
        _call(api, "gpt-4o", 100, 50, days_ago=0),
        _call(api, "gpt-4o", 10, 5, days_ago=2),
        _call(api, "gpt-4o", 10, 5, days_ago=2),
        _call(api, "gpt-4o", 1, 1, days_ago=9),  # outside a 7-day window
    ])
    c = await as_admin(api)
    trend = (await c.get("/api/v1/stats/trend?days=7")).json()["data"]
    assert len(trend) == 7
    today = api.clock().date()
    assert [p["date"] for p in trend] == [(today - timedelta(days=6 - i)).isoformat() for i in range(7)]
    by_date = {p["date"]: p for p in trend}
    assert by_date[today.isoformat()]["requestCount"] == 1
    assert by_date[(today - timedelta(days=2)).isoformat()]["totalTokens"] == 30
    empty = by_date[(today - timedelta(days=1)).isoformat()]
    assert (empty["requestCount"], empty["totalTokens"], empty["cost"]) == (0, 0, {})
    assert sum(p["requestCount"] for p in trend) == 3
    assert_envelope_error(await c.get("/api/v1/stats/trend?days=0"), 400, "VALIDATION_ERROR")
    assert_envelope_error(await c.get("/api/v1/stats/trend?days=abc"), 400, "VALIDATION_ERROR")


async def test_model_usage_top_n(api: Env) -> None:
    await _write(api, [
        _call(api, "gpt-4o", 100, 100),
        _call(api, "gpt-4o", 100, 100),
        _call(api, "claude-sonnet-4-5", 1000, 1000, kind="anthropic"),
        _call(api, "gpt-4o-mini", 1, 1),
    ])
    c = await as_admin(api)
    top = (await c.get("/api/v1/stats/model-usage?limit=2")).json()["data"]
    assert [m["model"] for m in top] == ["claude-sonnet-4-5", "gpt-4o"]
    assert top[0]["totalTokens"] == 2000 and top[1]["requestCount"] == 2
    assert top[0]["cost"]["USD"] == pytest.approx((1000 * 3 + 1000 * 15) / 1e6)
    assert top[0]["priced"] is True
    assert top[0]["tokenShare"] == pytest.approx(2000 / 2402)
    assert_envelope_error(await c.get("/api/v1/stats/model-usage?limit=0"), 400, "VALIDATION_ERROR")


async def test_cost_uses_upstream_model_of_the_channel(api: Env) -> None:
    provider = await api.services.providers.create("oa", "openai", keys=["sk-upstream-secret-1234"])
    channel = await api.services.channels.create("main", provider.id, [{"model_id": "house-alias",
                                                                         "upstream_model": "gpt-4o"}])
    await _write(api, [_call(api, "house-alias", 1_000_000, 0, channel_id=channel.id)])
    c = await as_admin(api)
    data = (await c.get("/api/v1/stats")).json()["data"]
    assert data["cost"]["USD"] == pytest.approx(2.5)
    assert data["unpricedModels"] == []


async def test_user_stats_cover_only_own_applications(api: Env) -> None:
    mine = await api.services.applications.create("mine", owner_id=api.user_id)
    theirs = await api.services.applications.create("theirs", owner_id=api.admin_id)
    await _write(api, [
        _call(api, "gpt-4o", 10, 10, app_id=mine.id, trace_id="mine-1"),
        _call(api, "gpt-4o", 1000, 1000, app_id=theirs.id, trace_id="theirs-1"),
    ])
    c = await as_user(api)
    assert (await c.get("/api/v1/stats")).json()["data"]["totalTokens"] == 20
    logs = (await c.get("/api/v1/call-logs")).json()["data"]
    assert [r["traceId"] for r in logs["items"]] == ["mine-1"]
    assert (await c.get(f"/api/v1/call-logs?applicationId={theirs.id}")).json()["data"]["total"] == 0


# --- resilience events ------------------------------------------------------------------------

async def test_resilience_events_newest_first_filtered_paged(api: Env) -> None:
    writer = UsageWriter(api.state.db, api.state.settings)
    base = api.clock()
    for i in range(5):
        writer.record_event(ResilienceEventData(event_type="FAILOVER", created_at=base - timedelta(minutes=10 - i),
                                        channel_id=1 + i % 2, endpoint="p1:k1", detail=f"e{i}"))
    writer.record_event(ResilienceEventData(event_type="BREAKER_OPENED", created_at=base, channel_id=1,
                                    error_type="UPSTREAM_ERROR"))
    await writer.flush()
    c = await as_admin(api)
    page = (await c.get("/api/v1/resilience/events")).json()["data"]
    assert page["total"] == 6
    assert page["items"][0]["type"] == "BREAKER_OPENED"
    times = [e["createdAt"] for e in page["items"]]
    assert times == sorted(times, reverse=True)
    failovers = (await c.get("/api/v1/resilience/events?type=FAILOVER&limit=2")).json()["data"]
    assert failovers["total"] == 5 and [e["detail"] for e in failovers["items"]] == ["e4", "e3"]
    nxt = (await c.get("/api/v1/resilience/events?type=FAILOVER&limit=2&offset=2")).json()["data"]
    assert [e["detail"] for e in nxt["items"]] == ["e2", "e1"]
    ch2 = (await c.get("/api/v1/resilience/events?channelId=2")).json()["data"]
    assert {e["channelId"] for e in ch2["items"]} == {2} and ch2["total"] == 2
    assert_envelope_error(await c.get("/api/v1/resilience/events?type=BOGUS"), 400, "VALIDATION_ERROR")


async def test_model_usage_never_lists_a_blank_model(api: Env) -> None:
    # a call refused before its body named a model is logged with model ""
    await _write(api, [_call(api, "", 0, 0), _call(api, "", 0, 0), _call(api, "gpt-4o", 1, 1)])
    c = await as_admin(api)
    top = (await c.get("/api/v1/stats/model-usage")).json()["data"]
    assert [m["model"] for m in top] == ["gpt-4o"]
