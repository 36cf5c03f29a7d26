"""Runs one call across its candidate routes and endpoints (spec 7.5).

Interface used by the gateway:
    result = await executor.run(ctx, routes, attempt)
`attempt(route, endpoint)` performs one upstream try and either returns the
result or raises UpstreamError. For streams it returns once the first upstream
event arrived, so everything before the first byte to the client is retried
and failed over here. A stream's breaker outcome is only known at its end:
for `ctx.stream` calls the gateway calls `executor.report(ctx, err_or_none)`
when the stream ends (None for a clean end or a client disconnect; calling it
again is harmless, so a `finally` is the right place).
`run` returns the first success or raises the caller-visible GatewayError.

Per candidate endpoint (in FAIL_OVER order): take the breaker's permission,
try, and on a retryable error wait by the error type's policy and try the same
endpoint again. When its retries are used up the endpoint cools down and the
next candidate is tried. INVALID_REQUEST and MODEL_NOT_FOUND end the call at
once. Nothing waits past the call's deadline.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Awaitable, Callable, TypeVar

from modelgate import errors
from modelgate.config import Settings
from modelgate.errors import ErrorType, GatewayError, UpstreamError
from modelgate.providers.base import Endpoint
from modelgate.routing.breaker import BreakerRegistry, EventContext
from modelgate.routing.events import (
    Clock,
    EventSink,
    EventType,
    NullSink,
    ResilienceEventData,
    SystemClock,
)
from modelgate.routing.failover import Candidate, FailoverPlanner
from modelgate.routing.lifecycle import DeprecateHook, LifecycleMonitor
from modelgate.routing.retry import RetryPolicies, fails_over
from modelgate.routing.snapshot import AppEntry, KeyEntry, Route

T = TypeVar("T")

Attempt = Callable[[Route, Endpoint], Awaitable[T]]


@dataclass(slots=True)
class CallContext:
    trace_id: str
    key: KeyEntry
    app: AppEntry
    model: str
    stream: bool
    deadline: float  # time.monotonic() by which the whole call must be answered
    attempts: int = 0
    route: Route | None = None
    endpoint: Endpoint | None = None
    errors: list[UpstreamError] = field(default_factory=list)
    stream_outcome_pending: bool = False  # a stream was handed over; `Executor.report` settles it

    def remaining(self) -> float:
        return self.deadline - time.monotonic()


class _EndpointFailed(Exception):
    def __init__(self, err: UpstreamError) -> None:
        super().__init__(err.message)
        self.err = err


class Executor:
    def __init__(
        self,
        settings: Settings | None = None,
        clock: Clock | None = None,
        sink: EventSink | None = None,
        deprecate: DeprecateHook | None = None,
        rng: random.Random | None = None,
    ) -> None:
        settings = settings or Settings()
        gateway = settings.gateway
        self.clock = clock or SystemClock()
        self.sink = sink or NullSink()
        rng = rng or random.Random()
        self.retry = RetryPolicies(gateway.retry, rng)
        self.breakers = BreakerRegistry(gateway.breaker, self.clock, self.sink)
        self.failover = FailoverPlanner(gateway.failover, self.clock, rng)
        self.lifecycle = (
            LifecycleMonitor(gateway.lifecycle, self.clock, deprecate, self.sink) if deprecate else None
        )

    def _event(self, event: EventType, ctx: CallContext, cand: Candidate, err: UpstreamError, detail: str) -> None:
        self.sink.record_event(ResilienceEventData(
            event_type=event.value, trace_id=ctx.trace_id, channel_id=cand.route.channel_id,
            endpoint=cand.endpoint.id, model=ctx.model, error_type=err.error_type.value, detail=detail,
        ))

    async def run(self, ctx: CallContext, routes: list[Route], attempt: Attempt[T]) -> T:
        candidates = self.failover.candidates(routes)
        if not candidates:
            raise GatewayError(502, ErrorType.UPSTREAM_ERROR.value, "No upstream endpoint is configured")
        last: UpstreamError | None = None
        failed: Candidate | None = None
        breaker_waits: list[float] = []
        for cand in candidates:
            if last is not None and self.clock.monotonic() >= ctx.deadline:
                break
            events = EventContext(ctx.trace_id, cand.route.channel_id, ctx.model)
            if not await self.breakers.admit(cand.endpoint.id, events):
                breaker_waits.append(self.breakers.retry_after(cand.endpoint.id))
                continue
            if failed is not None and last is not None:
                self._event(
                    EventType.FAILOVER, ctx, failed, last,
                    f"from endpoint {failed.endpoint.id} (channel {failed.route.channel_id}) to endpoint "
                    f"{cand.endpoint.id} (channel {cand.route.channel_id})",
                )
            ctx.route, ctx.endpoint = cand.route, cand.endpoint
            try:
                return await self._on_endpoint(ctx, cand, events, attempt)
            except _EndpointFailed as exc:
                last, failed = exc.err, cand
            if not fails_over(last.error_type):
                raise errors.from_upstream(last) from last
        if last is None:
            raise errors.breaker_open(min(breaker_waits))
        raise errors.from_upstream(last) from last

    async def _on_endpoint(self, ctx: CallContext, cand: Candidate, events: EventContext, attempt: Attempt[T]) -> T:
        """Try one endpoint with retries; raise _EndpointFailed with the last error."""
        endpoint_id = cand.endpoint.id
        retries: dict[ErrorType, int] = {}
        tries = 0
        outcome = False
        try:
            while True:
                tries += 1
                ctx.attempts += 1
                try:
                    result = await attempt(cand.route, cand.endpoint)
                except UpstreamError as err:
                    ctx.errors.append(err)
                    retries[err.error_type] = retries.get(err.error_type, 0) + 1
                    wait = self.retry.delay(err, retries[err.error_type])
                    stop = None
                    if wait is None:
                        stop = "retries used up" if self.retry.max_retries(err.error_type) else None
                    elif self.clock.monotonic() + wait > ctx.deadline:
                        stop = f"next wait of {wait:.2f}s would pass the call deadline"
                    elif not self.breakers.allows_retry(endpoint_id):
                        stop = "the endpoint's breaker opened"
                    if wait is None or stop is not None:
                        outcome = True
                        self.breakers.record(endpoint_id, err, events)
                        await self._failed(ctx, cand, err, tries, stop)
                        raise _EndpointFailed(err) from err
                    await self.clock.sleep(wait)
                    continue
                outcome = True
                if ctx.stream:
                    ctx.stream_outcome_pending = True
                else:
                    self.breakers.record(endpoint_id, None, events)
                    self.failover.recovered(endpoint_id)
                return result
        finally:
            if not outcome:  # cancelled mid-try: give back a half-open trial slot
                self.breakers.release(endpoint_id)

    async def _failed(
        self, ctx: CallContext, cand: Candidate, err: UpstreamError, tries: int, stop: str | None
    ) -> None:
        if stop is not None:
            self._event(EventType.RETRY_EXHAUSTED, ctx, cand, err,
                        f"{tries} attempt(s) on endpoint {cand.endpoint.id}: {stop}; last: {err.message}")
        if fails_over(err.error_type):
            self.failover.cool_down(cand.endpoint.id)
        elif err.error_type is ErrorType.MODEL_NOT_FOUND and self.lifecycle is not None:
            await self.lifecycle.observe_not_found(cand.route, ctx.trace_id, err.message)

    def report(self, ctx: CallContext, err: UpstreamError | None) -> None:
        """The end of a stream handed to the client: None = clean end, else the failure
        that broke it after the first byte (too late to retry). Only the first report counts."""
        if not ctx.stream_outcome_pending or ctx.endpoint is None or ctx.route is None:
            return
        ctx.stream_outcome_pending = False
        events = EventContext(ctx.trace_id, ctx.route.channel_id, ctx.model)
        self.breakers.record(ctx.endpoint.id, err, events)
        if err is None:
            self.failover.recovered(ctx.endpoint.id)
            return
        ctx.errors.append(err)
        if fails_over(err.error_type):
            self.failover.cool_down(ctx.endpoint.id)
