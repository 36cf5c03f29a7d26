"""Model lifecycle: MODEL_NOT_FOUND counting, deprecation hook, scheduled probe."""

from __future__ import annotations

import asyncio
import dataclasses

import orjson
import pytest

from modelgate.config import LifecycleSettings
from modelgate.errors import ErrorType, UpstreamError
from modelgate.providers.base import Endpoint, UpstreamRequest
from modelgate.providers.openai_chat import OpenAIChatAdapter
from modelgate.routing.lifecycle import LifecycleMonitor, ModelProbe, adapter_lister
from modelgate.routing.snapshot import Route
from tests.resilience_fakes import FakeClock, ListSink, endpoint, route

DAY = 86400.0


class Hook:
    def __init__(self, fail_times: int = 0) -> None:
        self.calls: list[tuple[int, str]] = []
        self.fail_times = fail_times

    async def deprecate(self, model_instance_id: int, reason: str) -> None:
        if self.fail_times:
            self.fail_times -= 1
            raise RuntimeError("database is down")
        self.calls.append((model_instance_id, reason))


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def sink() -> ListSink:
    return ListSink()


@pytest.fixture
def hook() -> Hook:
    return Hook()


@pytest.fixture
def monitor(clock: FakeClock, hook: Hook, sink: ListSink) -> LifecycleMonitor:
    return LifecycleMonitor(LifecycleSettings(), clock, hook, sink)


OLD = route(4, model="old-model", upstream_model="old-model-0301", instance_id=41)


async def test_third_not_found_within_a_day_deprecates_once(
    monitor: LifecycleMonitor, hook: Hook, sink: ListSink, clock: FakeClock
) -> None:
    assert not await monitor.observe_not_found(OLD, "t1")
    clock.advance(3600)
    assert not await monitor.observe_not_found(OLD, "t2")
    assert hook.calls == []
    assert await monitor.observe_not_found(OLD, "t3", "The model `old-model-0301` does not exist")
    assert [c[0] for c in hook.calls] == [41]
    assert "old-model-0301" in hook.calls[0][1] and "3 times" in hook.calls[0][1]
    [event] = sink.events
    assert event.event_type == "MODEL_DEPRECATED"
    assert (event.trace_id, event.channel_id, event.model, event.error_type) == (
        "t3", 4, "old-model", "MODEL_NOT_FOUND"
    )
    assert "does not exist" in event.detail
    # later observations (calls still in flight) do not deprecate again
    for _ in range(5):
        assert not await monitor.observe_not_found(OLD)
    assert len(hook.calls) == 1 and len(sink.events) == 1


async def test_observations_older_than_the_window_do_not_count(
    monitor: LifecycleMonitor, hook: Hook, clock: FakeClock
) -> None:
    await monitor.observe_not_found(OLD)
    await monitor.observe_not_found(OLD)
    clock.advance(DAY)
    assert monitor.observations(41) == 0
    assert not await monitor.observe_not_found(OLD)
    assert not await monitor.observe_not_found(OLD)
    assert hook.calls == []
    assert await monitor.observe_not_found(OLD)


async def test_instances_are_counted_separately(monitor: LifecycleMonitor, hook: Hook) -> None:
    other = route(5, model="old-model", instance_id=51)
    for _ in range(2):
        await monitor.observe_not_found(OLD)
        await monitor.observe_not_found(other)
    assert hook.calls == []


async def test_a_failing_hook_is_retried_on_the_next_observation(clock: FakeClock, sink: ListSink) -> None:
    hook = Hook(fail_times=1)
    monitor = LifecycleMonitor(LifecycleSettings(), clock, hook, sink)
    for _ in range(3):
        assert not await monitor.observe_not_found(OLD)
    assert sink.events == []
    assert await monitor.observe_not_found(OLD)
    assert [c[0] for c in hook.calls] == [41]
    assert sink.types() == ["MODEL_DEPRECATED"]


async def test_reactivation_counts_from_zero(monitor: LifecycleMonitor, hook: Hook) -> None:
    for _ in range(3):
        await monitor.observe_not_found(OLD)
    monitor.reactivated(41)
    await monitor.observe_not_found(OLD)
    await monitor.observe_not_found(OLD)
    assert len(hook.calls) == 1
    assert await monitor.observe_not_found(OLD)
    assert len(hook.calls) == 2


async def test_threshold_is_configurable(clock: FakeClock, hook: Hook) -> None:
    monitor = LifecycleMonitor(LifecycleSettings(not_found_threshold=1), clock, hook)
    assert await monitor.observe_not_found(OLD)


class Listing:
    """A fake provider model listing per endpoint id; an exception value is raised."""

    def __init__(self, by_endpoint: dict[str, list[str] | Exception]) -> None:
        self.by_endpoint = by_endpoint
        self.asked: list[str] = []

    async def __call__(self, ep: Endpoint) -> list[str]:
        self.asked.append(ep.id)
        answer = self.by_endpoint[ep.id]
        if isinstance(answer, Exception):
            raise answer
        return answer


def probe_routes():
    keys = (endpoint(1, 1), endpoint(1, 2))
    return [
        route(1, keys, model="gpt-4o", instance_id=11, provider_id=1),
        route(1, keys, model="old", upstream_model="gpt-old", instance_id=12, provider_id=1),
        route(2, (endpoint(2, 1),), model="gpt-4o", instance_id=21, provider_id=2),
    ]


async def test_probe_counts_models_missing_from_the_listing(
    monitor: LifecycleMonitor, hook: Hook, clock: FakeClock
) -> None:
    listing = Listing({"p1:k1": ["gpt-4o", "gpt-4o-mini"], "p2:k1": ["gpt-4o"]})
    probe = ModelProbe(monitor, listing, probe_routes, clock, 3600)
    missing = await probe.probe_once()
    assert [r.model_instance_id for r in missing] == [12]
    assert listing.asked == ["p1:k1", "p2:k1"]  # one listing per provider
    assert monitor.observations(12) == 1 and monitor.observations(11) == 0
    await probe.probe_once()
    assert hook.calls == []
    await probe.probe_once()
    assert [c[0] for c in hook.calls] == [12]


async def test_probe_falls_back_to_the_next_key_and_skips_unlistable_providers(
    monitor: LifecycleMonitor, clock: FakeClock
) -> None:
    listing = Listing({
        "p1:k1": UpstreamError(ErrorType.AUTHENTICATION_ERROR, "bad key", 401),
        "p1:k2": ["gpt-4o"],
        "p2:k1": UpstreamError(ErrorType.SERVICE_UNAVAILABLE, "down", 503),
    })
    missing = await ModelProbe(monitor, listing, probe_routes, clock, 3600).probe_once()
    assert listing.asked == ["p1:k1", "p1:k2", "p2:k1"]
    assert [r.model_instance_id for r in missing] == [12]
    assert monitor.observations(21) == 0


async def test_an_empty_listing_deprecates_nothing(monitor: LifecycleMonitor, clock: FakeClock) -> None:
    listing = Listing({"p1:k1": [], "p2:k1": []})
    assert await ModelProbe(monitor, listing, probe_routes, clock, 3600).probe_once() == []


async def test_probe_runs_on_its_interval(monitor: LifecycleMonitor, hook: Hook) -> None:
    class StoppingClock(FakeClock):
        async def sleep(self, seconds: float) -> None:
            if len(self.sleeps) == 3:
                raise asyncio.CancelledError
            await super().sleep(seconds)

    clock = StoppingClock()
    monitor.clock = clock
    listing = Listing({"p1:k1": ["gpt-4o"], "p2:k1": ["gpt-4o"]})
    with pytest.raises(asyncio.CancelledError):
        await ModelProbe(monitor, listing, probe_routes, clock, 3600).run()
    assert clock.sleeps == [3600, 3600, 3600]
    assert [c[0] for c in hook.calls] == [12]


async def test_probe_interval_zero_disables_it(monitor: LifecycleMonitor, clock: FakeClock) -> None:
    listing = Listing({})
    await ModelProbe(monitor, listing, probe_routes, clock, 0).run()
    assert listing.asked == [] and clock.sleeps == []


async def test_adapter_lister_speaks_the_provider_wire_format() -> None:
    sent: list[UpstreamRequest] = []

    async def http(req: UpstreamRequest):
        sent.append(req)
        body = {"object": "list", "data": [
            {"id": "gpt-4o", "object": "model", "created": 1715367049, "owned_by": "system"},
            {"id": "gpt-4o-mini", "object": "model", "created": 1721172741, "owned_by": "system"},
        ]}
        return 200, {"content-type": "application/json"}, orjson.dumps(body)

    list_models = adapter_lister(lambda kind: OpenAIChatAdapter(), http)
    assert await list_models(endpoint(1, 1)) == ["gpt-4o", "gpt-4o-mini"]
    [req] = sent
    assert (req.method, req.url) == ("GET", "https://upstream1.test/v1/models")
    assert req.headers["authorization"] == "Bearer sk-upstream-secret-1-1"


async def test_adapter_lister_raises_the_classified_upstream_error() -> None:
    async def http(req: UpstreamRequest):
        body = {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error",
                          "param": None, "code": "invalid_api_key"}}
        return 401, {}, orjson.dumps(body)

    with pytest.raises(UpstreamError) as caught:
        await adapter_lister(lambda kind: OpenAIChatAdapter(), http)(endpoint(1, 1))
    assert caught.value.error_type is ErrorType.AUTHENTICATION_ERROR


# --- the list only counts where it is authoritative for the name used ----------------------------


def kind_route(kind: str, upstream_model: str, instance_id: int) -> Route:
    return dataclasses.replace(route(9, (endpoint(9, 1, kind),), model="m", upstream_model=upstream_model,
                                     instance_id=instance_id, provider_id=9), provider_kind=kind)


@pytest.mark.parametrize(("kind", "upstream_model", "listed", "missing"), [
    # Azure lists deployable base models, never deployment names: never counted (never even asked)
    ("azure-openai", "my-gpt4o-deployment", ["gpt-4o"], False),
    # Bedrock inference-profile ids and ARNs are not in the foundation-model list
    ("aws-bedrock", "us.anthropic.claude-sonnet-4-5-20250929-v1:0", ["anthropic.claude-sonnet-4-5-20250929-v1:0"],
     False),
    ("aws-bedrock", "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc", ["x"], False),
    ("aws-bedrock", "anthropic.claude-3-haiku-20240307-v1:0", ["anthropic.claude-3-5-haiku-20241022-v1:0"], True),
    # Ollama reads a name without a tag as `:latest`
    ("ollama", "llama3.2", ["llama3.2:latest"], False),
    ("ollama", "llama3.2:latest", ["llama3.2:latest"], False),
    ("ollama", "llama3.2", ["llama3.2:1b"], True),
    # vendor aliases of a dated id
    ("anthropic", "claude-sonnet-4-5", ["claude-sonnet-4-5-20250929"], False),
    ("anthropic", "claude-3-5-sonnet-latest", ["claude-3-5-sonnet-20241022"], False),
    ("anthropic", "claude-2.1", ["claude-sonnet-4-5-20250929"], True),
    ("openai", "gpt-4o", ["gpt-4o-2024-08-06"], False),
])
async def test_probe_counts_only_where_the_list_is_authoritative(
    monitor: LifecycleMonitor, clock: FakeClock, kind: str, upstream_model: str, listed: list[str], missing: bool
) -> None:
    listing = Listing({"p9:k1": listed})
    from modelgate.providers.registry import get_kind

    probe = ModelProbe(monitor, listing, lambda: [kind_route(kind, upstream_model, 91)], clock, 3600,
                       adapter_for=lambda k: get_kind(k).adapter)
    assert bool(await probe.probe_once()) is missing
    assert monitor.observations(91) == int(missing)
    if kind == "azure-openai":
        assert listing.asked == []


async def test_together_bare_array_model_list_parses() -> None:
    # Together's GET /v1/models answers a bare JSON array (docs.together.ai/reference/models-1)
    from modelgate.providers.base import read_models
    from modelgate.providers.registry import get_kind

    body = orjson.dumps([{"id": "meta-llama/Llama-3.3-70B-Instruct-Turbo", "object": "model", "type": "chat"}])
    assert read_models(get_kind("together").adapter, body) == ["meta-llama/Llama-3.3-70B-Instruct-Turbo"]
