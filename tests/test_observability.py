"""/metrics labels and histograms, and OpenTelemetry traces (in-memory exporter), through the real gateway."""

from __future__ import annotations

import subprocess
import sys

import httpx
import openai
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from prometheus_client.parser import text_string_to_metric_families

from modelgate.config import Settings
from modelgate.gateway import otel
from modelgate.providers.mock import MOCK_UPSTREAM
from tests.gateway_harness import GatewayHarness, harness_settings


@pytest.fixture
async def gateway(tmp_path):
    settings = harness_settings(tmp_path)
    policy = settings.gateway.retry.upstream_error
    policy.max_retries, policy.initial_delay = 1, 0.0  # one immediate retry
    settings.gateway.retry.jitter = False
    harness = await GatewayHarness(settings).start()
    svc = harness.services
    provider = await svc.providers.create("mock", "mock")
    channel = await svc.channels.create("mock-main", provider.id, models=["demo", "broken-error-500"])
    app = await svc.applications.create("team")
    await svc.applications.authorize_channel(app.id, channel.id)
    harness.key = (await svc.api_keys.create(app.id)).plaintext
    harness.channel_id = channel.id
    await harness.runtime.refresh()
    yield harness
    await harness.stop()
    await MOCK_UPSTREAM.stop()


def _samples(text: str, name: str, **labels: str) -> list:
    return [s for family in text_string_to_metric_families(text) for s in family.samples
            if s.name == name and labels.items() <= s.labels.items()]


def _value(text: str, name: str, **labels: str) -> float:
    return sum(s.value for s in _samples(text, name, **labels))


async def _calls(gateway) -> None:
    chat = openai.AsyncOpenAI(base_url=gateway.url + "/v1", api_key=gateway.key, max_retries=0)
    await chat.chat.completions.create(model="demo", messages=[{"role": "user", "content": "one two"}])
    stream = await chat.chat.completions.create(model="demo", stream=True,
                                                messages=[{"role": "user", "content": "three"}])
    async for _ in stream:
        pass
    with pytest.raises(openai.APIStatusError):
        await chat.chat.completions.create(model="broken-error-500", messages=[{"role": "user", "content": "x"}])
    with pytest.raises(openai.NotFoundError):
        await chat.chat.completions.create(model="made-up-by-a-caller", messages=[{"role": "user", "content": "x"}])


async def test_metrics_carry_bounded_labels_histograms_and_runtime_gauges(gateway):
    async with httpx.AsyncClient() as http:
        before = (await http.get(f"{gateway.url}/metrics")).text
        await _calls(gateway)
        after = (await http.get(f"{gateway.url}/metrics")).text

    def grew(name: str, **labels: str) -> float:
        return _value(after, name, **labels) - _value(before, name, **labels)

    channel = str(gateway.channel_id)
    ok = dict(protocol="chat", model="demo", provider_kind="mock", channel=channel, status="200", error_type="")
    assert grew("modelgate_calls_total", **ok) == 2
    assert grew("modelgate_calls_total", protocol="chat", model="broken-error-500", provider_kind="mock",
                channel=channel, status="502", error_type="UPSTREAM_ERROR") == 1
    # a model no channel serves is not a label value: callers cannot grow the series
    assert grew("modelgate_calls_total", model="-", status="404", error_type="NOT_FOUND") == 1
    assert not _samples(after, "modelgate_calls_total", model="made-up-by-a-caller")
    assert grew("modelgate_tokens_total", direction="input", model="demo", provider_kind="mock") == 3
    assert grew("modelgate_tokens_total", direction="output", model="demo", provider_kind="mock") == 11  # 6 + 5 words
    assert grew("modelgate_call_seconds_count", protocol="chat", provider_kind="mock", stream="true") == 1
    assert grew("modelgate_call_seconds_count", protocol="chat", provider_kind="mock", stream="false") == 2
    assert grew("modelgate_time_to_first_byte_seconds_count", protocol="chat", provider_kind="mock") == 1
    assert grew("modelgate_upstream_attempts_total", provider_kind="mock") == 4  # 1 + 1 + 2 (a retry)
    assert grew("modelgate_retries_total", provider_kind="mock") == 1
    assert grew("modelgate_resilience_events_total", type="RETRY_EXHAUSTED") == 1
    (breaker,) = _samples(after, "modelgate_breaker_state")
    assert breaker.labels["endpoint"].startswith("p") and breaker.value == 0
    assert _samples(after, "modelgate_call_log_queue_depth") and _samples(after, "modelgate_call_log_dropped_total")


async def test_traces_one_span_per_call_with_attempt_children(gateway):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    gateway.runtime.tracer = otel.CallTracer(provider)
    await _calls(gateway)
    spans = exporter.get_finished_spans()
    calls = [s for s in spans if s.kind is SpanKind.SERVER]
    assert [s.name for s in calls] == ["chat demo", "chat demo", "chat broken-error-500", "chat made-up-by-a-caller"]
    first = calls[0]
    assert first.attributes["gen_ai.operation.name"] == "chat"
    assert first.attributes["gen_ai.request.model"] == "demo"
    assert first.attributes["gen_ai.provider.name"] == "mock"
    assert (first.attributes["gen_ai.usage.input_tokens"], first.attributes["gen_ai.usage.output_tokens"]) == (2, 6)
    assert first.attributes["http.response.status_code"] == 200 and first.status.status_code is StatusCode.UNSET
    assert calls[1].attributes["modelgate.stream"] is True and "modelgate.time_to_first_byte_ms" in calls[1].attributes
    failed = calls[2]
    assert failed.status.status_code is StatusCode.ERROR and failed.attributes["error.type"] == "UPSTREAM_ERROR"
    children = [s for s in spans if s.parent is not None and s.parent.span_id == failed.context.span_id]
    assert len(children) == 2 and all(c.kind is SpanKind.CLIENT for c in children)
    assert [c.attributes["modelgate.attempt"] for c in children] == [1, 2]
    assert all(c.attributes["error.type"] == "UPSTREAM_ERROR" and c.attributes["server.address"] == "mock.modelgate.invalid"
               for c in children)
    assert all(c.context.trace_id == failed.context.trace_id for c in children)
    assert failed.start_time <= children[0].start_time <= children[1].end_time <= failed.end_time
    ok_children = [s for s in spans if s.parent is not None and s.parent.span_id == first.context.span_id]
    assert len(ok_children) == 1 and "error.type" not in ok_children[0].attributes
    assert calls[3].attributes["error.type"] == "NOT_FOUND"  # refused before any attempt: no children
    assert not [s for s in spans if s.parent is not None and s.parent.span_id == calls[3].context.span_id]


def test_tracing_is_off_by_default_and_never_imported():
    assert otel.from_settings(Settings()) is None
    code = ("import sys\nfrom modelgate.gateway.app import GatewayApp\nfrom modelgate.config import Settings\n"
            "app = GatewayApp(Settings())\nassert app.runtime.tracer is None\n"
            "assert not [m for m in sys.modules if m.startswith('opentelemetry')], 'imported'\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_tracing_exports_over_otlp_when_an_endpoint_is_set():
    settings = Settings()
    settings.telemetry.otlp_endpoint = "http://127.0.0.1:4318"
    tracer = otel.from_settings(settings)
    assert isinstance(tracer, otel.CallTracer)
    (processor,) = tracer.provider._active_span_processor._span_processors
    assert processor.span_exporter._endpoint == "http://127.0.0.1:4318/v1/traces"
    tracer.shutdown()
