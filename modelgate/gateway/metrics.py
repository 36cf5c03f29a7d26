"""Prometheus metrics served at /metrics (docs/observability.md lists every series).

Labels are bounded by configuration, never by what callers send: `model` is the
gateway model id only for calls that were routed (else "-"), `channel` is a channel
id, `provider_kind` one of the registry's kinds, `error_type` a spec error code.

With several workers each process writes its samples to PROMETHEUS_MULTIPROC_DIR
(set by the server before it forks) and a scrape aggregates them all; the gauges
read from the process (the call-log queue) are those of the worker that answers
the scrape; breaker states are the deployment's when Redis holds them.
"""

from __future__ import annotations

import os
import weakref
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from modelgate.routing.events import ResilienceEventData
from modelgate.storage.call_record import CallRecord

_CALL_LABELS = ["protocol", "model", "provider_kind", "channel", "status", "error_type"]
CALLS = Counter("modelgate_calls_total", "Inference calls answered", _CALL_LABELS)
TOKENS = Counter("modelgate_tokens_total", "Tokens used by inference calls",
                 ["direction", "model", "provider_kind"])
LATENCY = Histogram(
    "modelgate_call_seconds", "Time to answer an inference call (to the last byte)",
    ["protocol", "provider_kind", "stream"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)
TTFB = Histogram(
    "modelgate_time_to_first_byte_seconds", "Streamed calls: time until the first bytes were sent",
    ["protocol", "provider_kind"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60),
)
ATTEMPTS = Counter("modelgate_upstream_attempts_total", "Upstream attempts, retries and failovers included",
                   ["provider_kind"])
RETRIES = Counter("modelgate_retries_total", "Upstream attempts after the first of a call (retries and failovers)",
                  ["provider_kind"])
EVENTS = Counter("modelgate_resilience_events_total",
                 "Resilience events: FAILOVER, RETRY_EXHAUSTED, BREAKER_OPENED, ...", ["type"])

# How many distinct label sets observe() keeps resolved; past it, new models report as "other".
MAX_SERIES = 5000
_children: dict[tuple[Any, ...], tuple[Any, ...]] = {}


def _series(record: CallRecord) -> tuple[Any, ...]:
    # Label lookups take a lock and build a key; each distinct label set is resolved once.
    routed = record.channel_id is not None
    key = (record.protocol, record.model if routed else "-", record.provider_kind, record.channel_id,
           record.status, record.error_code, record.stream)
    series = _children.get(key)
    if series is None:
        protocol, model, kind, channel = record.protocol, key[1], record.provider_kind or "-", key[3]
        if len(_children) >= MAX_SERIES:
            model = "other"
        channel_label = "-" if channel is None else str(channel)
        series = _children[key] = (
            CALLS.labels(protocol, model, kind, channel_label, str(record.status), record.error_code or ""),
            LATENCY.labels(protocol, kind, "true" if record.stream else "false"),
            TTFB.labels(protocol, kind),
            TOKENS.labels("input", model, kind),
            TOKENS.labels("output", model, kind),
            ATTEMPTS.labels(kind),
            RETRIES.labels(kind),
        )
    return series


def observe(record: CallRecord) -> None:
    calls, latency, ttfb, tokens_in, tokens_out, attempts, retries = _series(record)
    calls.inc()
    latency.observe(record.latency_ms / 1000.0)
    if record.stream and record.first_byte_ms is not None:
        ttfb.observe(record.first_byte_ms / 1000.0)
    if record.channel_id is not None:
        attempts.inc(record.attempts)
        if record.attempts > 1:
            retries.inc(record.attempts - 1)
    if record.prompt_tokens:
        tokens_in.inc(record.prompt_tokens)
    if record.completion_tokens:
        tokens_out.inc(record.completion_tokens)


class CountingSink:
    """Counts resilience events by type on their way to the real sink (the usage writer)."""

    def __init__(self, sink: Any) -> None:
        self.sink = sink
        self._counters: dict[str, Any] = {}

    def record_event(self, event: ResilienceEventData) -> None:
        counter = self._counters.get(event.event_type)
        if counter is None:
            counter = self._counters[event.event_type] = EVENTS.labels(event.event_type)
        counter.inc()
        self.sink.record_event(event)


_BREAKER_CODES = {"CLOSED": 0, "HALF_OPEN": 1, "OPEN": 2}


class _RuntimeCollector:
    """Gauges read from the serving runtime at scrape time: breakers and the call-log queue."""

    def __init__(self) -> None:
        self.runtime: Any = None  # a weak reference to the bound runtime
        self.breakers: dict[str, Any] | None = None  # states read for this scrape (render's argument)

    def collect(self) -> Any:
        runtime = self.runtime() if self.runtime is not None else None
        if runtime is None or not hasattr(runtime, "writer"):
            return
        breakers = GaugeMetricFamily("modelgate_breaker_state",
                                     "Circuit breaker per upstream endpoint: 0 closed, 1 half-open, 2 open",
                                     labels=["endpoint"])
        states = self.breakers if self.breakers is not None else runtime.executor.breakers.states()
        for endpoint_id, status in sorted(states.items()):
            breakers.add_metric([endpoint_id], _BREAKER_CODES.get(status.state.value, 0))
        yield breakers
        yield GaugeMetricFamily("modelgate_call_log_queue_depth", "Call-log rows waiting to be written",
                                value=runtime.writer.pending)
        yield CounterMetricFamily("modelgate_call_log_dropped", "Call-log rows dropped (queue full)",
                                  value=runtime.writer.dropped)


_collector = _RuntimeCollector()
REGISTRY.register(_collector)


def bind(runtime: Any) -> None:
    """The runtime whose breakers and queue /metrics reports (the last one started in this process)."""
    _collector.runtime = weakref.ref(runtime)


def render(breakers: dict[str, Any] | None = None) -> tuple[bytes, str]:
    """The exposition; `breakers`: the breaker states to report (default: this process's)."""
    _collector.breakers = breakers
    try:
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            from prometheus_client import multiprocess

            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)
            registry.register(_collector)
            return generate_latest(registry), CONTENT_TYPE_LATEST
        return generate_latest(), CONTENT_TYPE_LATEST
    finally:
        _collector.breakers = None
