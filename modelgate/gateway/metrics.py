"""Prometheus metrics served at /metrics.

With several workers each process writes its samples to PROMETHEUS_MULTIPROC_DIR
(set by the server before it forks) and a scrape aggregates them all.
"""

from __future__ import annotations

import os
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)

from modelgate.storage.usage_writer import CallRecord

CALLS = Counter("modelgate_calls_total", "Inference calls answered", ["protocol", "status"])
TOKENS = Counter("modelgate_tokens_total", "Tokens used by inference calls", ["direction"])
INPUT_TOKENS, OUTPUT_TOKENS = TOKENS.labels("input"), TOKENS.labels("output")
LATENCY = Histogram(
    "modelgate_call_seconds", "Time to answer an inference call (to the last byte)", ["protocol", "stream"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)
ATTEMPTS = Counter("modelgate_upstream_attempts_total", "Upstream attempts, retries and failovers included")


_children: dict[tuple[str, int, bool], tuple[Any, Any]] = {}


def _series(protocol: str, status: int, stream: bool) -> tuple[Any, Any]:
    # Label lookups take a lock and build a key; the few distinct series are resolved once.
    key = (protocol, status, stream)
    series = _children.get(key)
    if series is None:
        series = _children[key] = (CALLS.labels(protocol, str(status)),
                                   LATENCY.labels(protocol, "true" if stream else "false"))
    return series


def observe(record: CallRecord) -> None:
    calls, latency = _series(record.protocol, record.status, record.stream)
    calls.inc()
    latency.observe(record.latency_ms / 1000.0)
    if record.channel_id is not None:
        ATTEMPTS.inc(record.attempts)
    if record.prompt_tokens:
        INPUT_TOKENS.inc(record.prompt_tokens)
    if record.completion_tokens:
        OUTPUT_TOKENS.inc(record.completion_tokens)


def render() -> tuple[bytes, str]:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(), CONTENT_TYPE_LATEST
