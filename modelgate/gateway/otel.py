"""Optional OpenTelemetry traces: one span per inference call, one child span per upstream attempt.

Off by default. Only when `telemetry.otlp_endpoint` is set does the gateway import the
OpenTelemetry SDK and the OTLP/HTTP exporter (the `otel` extra); the hot path then pays for
one timing wrapper per attempt, and spans are built after the answer, with their real start
and end times, so nothing waits on the tracer. Attributes follow the GenAI semantic
conventions (gen_ai.*); docs/observability.md lists them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlparse

from modelgate.config import Settings
from modelgate.errors import GatewayError, UpstreamError

log = logging.getLogger("modelgate.otel")

Attempt = tuple[int, int, Any, Any, str | None]  # start ns, end ns, route, endpoint, error type


class CallTracer:
    def __init__(self, tracer_provider: Any) -> None:
        from opentelemetry import trace
        from opentelemetry.trace import SpanKind, Status, StatusCode

        self._trace, self._kind, self._status, self._code = trace, SpanKind, Status, StatusCode
        self.provider = tracer_provider
        self.tracer = tracer_provider.get_tracer("modelgate")

    def wrap(self, fn: Callable[[Any, Any], Awaitable[Any]], attempts: list[Attempt]
             ) -> Callable[[Any, Any], Awaitable[Any]]:
        """The attempt function, timed: each call appends one Attempt."""
        async def attempt(route: Any, endpoint: Any) -> Any:
            start = time.time_ns()
            try:
                result = await fn(route, endpoint)
            except UpstreamError as err:
                attempts.append((start, time.time_ns(), route, endpoint, err.error_type.value))
                raise
            except GatewayError as err:
                attempts.append((start, time.time_ns(), route, endpoint, err.code))
                raise
            except BaseException as exc:
                attempts.append((start, time.time_ns(), route, endpoint, type(exc).__name__))
                raise
            attempts.append((start, time.time_ns(), route, endpoint, None))
            return result

        return attempt

    def finish(self, record: Any, start_ns: int, attempts: list[Attempt]) -> None:
        """Emit the call's span and its attempts' child spans; never raises."""
        try:
            self._emit(record, start_ns, attempts)
        except Exception:
            log.exception("could not record the trace of call %s", record.trace_id)

    def _emit(self, record: Any, start_ns: int, attempts: list[Attempt]) -> None:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": record.model or "",
            "gen_ai.usage.input_tokens": record.prompt_tokens,
            "gen_ai.usage.output_tokens": record.completion_tokens,
            "http.response.status_code": record.status,
            "modelgate.trace_id": record.trace_id,
            "modelgate.protocol": record.protocol,
            "modelgate.stream": record.stream,
            "modelgate.attempts": record.attempts,
        }
        if record.provider_kind:
            attributes["gen_ai.provider.name"] = record.provider_kind
            attributes["gen_ai.system"] = record.provider_kind  # the attribute's earlier name
        if record.channel_id is not None:
            attributes["modelgate.channel_id"] = record.channel_id
        if record.first_byte_ms is not None:
            attributes["modelgate.time_to_first_byte_ms"] = record.first_byte_ms
        if record.api_key_id is not None:
            attributes["modelgate.api_key_id"] = record.api_key_id
        span = self.tracer.start_span(f"chat {record.model}".strip(), kind=self._kind.SERVER, start_time=start_ns,
                                      attributes=attributes)
        if record.status >= 400:
            span.set_attribute("error.type", record.error_code or str(record.status))
            span.set_status(self._status(self._code.ERROR, record.error_code or ""))
        parent = self._trace.set_span_in_context(span)
        for number, (begin, end, route, endpoint, error) in enumerate(attempts, 1):
            child_attributes: dict[str, Any] = {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": route.upstream_model,
                "gen_ai.provider.name": route.provider_kind,
                "gen_ai.system": route.provider_kind,
                "modelgate.channel_id": route.channel_id,
                "modelgate.endpoint": endpoint.id,
                "modelgate.attempt": number,
            }
            host = urlparse(endpoint.base_url).hostname
            if host:
                child_attributes["server.address"] = host
            child = self.tracer.start_span(f"chat {route.upstream_model}", context=parent, kind=self._kind.CLIENT,
                                           start_time=begin, attributes=child_attributes)
            if error is not None:
                child.set_attribute("error.type", error)
                child.set_status(self._status(self._code.ERROR, error))
            child.end(end_time=end)
        span.end(end_time=start_ns + int(record.latency_ms * 1_000_000))

    def shutdown(self) -> None:
        try:
            self.provider.shutdown()  # flushes what the batch processor holds
        except Exception:
            log.exception("OpenTelemetry shutdown failed")


def from_settings(settings: Settings) -> CallTracer | None:
    """A tracer exporting to the configured OTLP endpoint, or None when tracing is off."""
    telemetry = settings.telemetry
    if not telemetry.otlp_endpoint:
        return None
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.trace.sampling import TraceIdRatioBased
    except ImportError:
        raise RuntimeError("telemetry.otlp_endpoint is set but OpenTelemetry is not installed; "
                           "pip install 'modelgate[otel]'") from None
    endpoint = telemetry.otlp_endpoint.rstrip("/")
    if urlparse(endpoint).path in ("", "/"):
        endpoint += "/v1/traces"  # the OTLP/HTTP traces path under a collector's base URL
    provider = TracerProvider(resource=Resource.create({"service.name": telemetry.service_name}),
                              sampler=TraceIdRatioBased(telemetry.sample_ratio))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    log.info("OpenTelemetry traces go to %s", endpoint)
    return CallTracer(provider)
