"""Runs one call across its candidate routes and endpoints (spec 7.5).

Interface used by the gateway:
    result = await executor.run(ctx, routes, attempt)
`attempt(route, endpoint)` performs one upstream try and either returns the
result or raises UpstreamError. For streams it returns once the first upstream
event arrived, so everything before the first byte to the client is retried
and failed over here. A stream's breaker outcome is only known at its end:
for `ctx.stream` calls the gateway calls `executor.report(ctx, err_or_none)`
when the stream ends (None for a clean end or a client disconnect), or
`executor.abandon(ctx)` when it ends without an outcome; calling either again
is harmless, so a `finally` is the right place.
`run` returns the first success or raises the caller-visible GatewayError.

Candidates are tried in FAIL_OVER order. Every attempt takes the endpoint's
breaker permission and reports its outcome to the breaker (retries count).
After a retryable error the endpoint waits its per-type backoff at the back of
the queue, so another candidate is tried first when one exists; its retries
stop when they are used up, when the next wait would pass the call's
deadline, or as soon as its breaker opened. INVALID_REQUEST and
MODEL_NOT_FOUND end the call at once. Nothing waits past the call's deadline.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field
from typing import Awaitable, Callable, TypeVar

from modelgate import errors
from modelgate.config import Settings
from modelgate.errors import ErrorType, GatewayError, UpstreamError
from modelgate.providers.base import Endpoint
from modelgate.routing.breaker import BreakerRegistry, Breakers, EventContext
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
    deadline: float  # the executor's clock time by which the whole call must be answered (Executor.deadline)
    attempts: int = 0
    route: Route | None = None
    endpoint: Endpoint | None = None
    errors: list[UpstreamError] = field(default_factory=list)
    stream_outcome_pending: bool = False  # a stream was handed over; `Executor.report` settles it
    # A token count: it respects an open breaker but its outcomes move neither the breakers nor the
    # cooldowns. A provider's count route can fail while its inference works, and an estimate answers
    # in its place; the calls the endpoint serves must not be refused for it.
    advisory: bool = False


@dataclass(slots=True)
class _Tries:
    """One candidate's attempts within one call."""

    cand: Candidate
    tries: int = 0
    retries: dict[ErrorType, int] = field(default_factory=dict)
    due: float = 0.0  # monotonic time before which it is not tried again


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
        self.breakers: Breakers = BreakerRegistry(gateway.breaker, self.clock, self.sink)
        self.failover = FailoverPlanner(gateway.failover, self.clock, rng)
        self.lifecycle = (
            LifecycleMonitor(gateway.lifecycle, self.clock, deprecate, self.sink) if deprecate else None
        )

    def deadline(self, seconds: float) -> float:
        """A call's deadline `seconds` from now, on the clock every wait and limit of the call uses."""
        return self.clock.monotonic() + seconds

    def remaining(self, ctx: CallContext) -> float:
        return ctx.deadline - self.clock.monotonic()

    def _event(self, event: EventType, ctx: CallContext, cand: Candidate, err: UpstreamError, detail: str) -> None:
        self.sink.record_event(ResilienceEventData(
            event_type=event.value, trace_id=ctx.trace_id, channel_id=cand.route.channel_id,
            endpoint=cand.endpoint.id, model=ctx.model, error_type=err.error_type.value, detail=detail,
        ))

    async def run(self, ctx: CallContext, routes: list[Route], attempt: Attempt[T]) -> T:
        candidates = self.failover.candidates(routes)
        if not candidates:
            raise GatewayError(502, ErrorType.UPSTREAM_ERROR.value, "No upstream endpoint is configured")
        queue = deque(_Tries(cand) for cand in candidates)
        last: UpstreamError | None = None
        failed: Candidate | None = None
        breaker_waits: list[float] = []
        while queue:
            entry = queue.popleft()
            cand = entry.cand
            now = self.clock.monotonic()
            if last is not None and now >= ctx.deadline:
                break
            if entry.due > now:
                await self.clock.sleep(entry.due - now)
            events = EventContext(ctx.trace_id, cand.route.channel_id, ctx.model)
            if not await self.breakers.admit(cand.endpoint.id, events):
                if entry.tries == 0:
                    breaker_waits.append(self.breakers.retry_after(cand.endpoint.id))
                continue
            if failed is not None and last is not None and failed is not cand:
                self._event(
                    EventType.FAILOVER, ctx, failed, last,
                    f"from endpoint {failed.endpoint.id} (channel {failed.route.channel_id}) to endpoint "
                    f"{cand.endpoint.id} (channel {cand.route.channel_id})",
                )
            ctx.route, ctx.endpoint = cand.route, cand.endpoint
            try:
                return await self._try(ctx, entry, events, attempt)
            except UpstreamError as err:
                last, failed = err, cand
            if not fails_over(last.error_type):
                await self._final(ctx, cand, last)
                raise errors.from_upstream(last) from last
            wait = self._retry_wait(ctx, entry, last)
            if wait is None:
                continue
            if queue:  # the other candidates are tried first; this one waits out its backoff meanwhile
                entry.due = self.clock.monotonic() + wait
            else:
                await self.clock.sleep(wait)
            queue.append(entry)
        if last is None:
            raise errors.breaker_open(min(breaker_waits))
        raise errors.from_upstream(last) from last

    async def _try(self, ctx: CallContext, entry: _Tries, events: EventContext, attempt: Attempt[T]) -> T:
        """One attempt on one endpoint; its outcome goes to the breaker (a stream's at its end; an
        advisory call's nowhere)."""
        endpoint_id = entry.cand.endpoint.id
        entry.tries += 1
        ctx.attempts += 1
        outcome = False
        try:
            try:
                result = await attempt(entry.cand.route, entry.cand.endpoint)
            except UpstreamError as err:
                ctx.errors.append(err)
                if not ctx.advisory:
                    outcome = True
                    self.breakers.record(endpoint_id, err, events)
                raise
            if ctx.advisory:
                return result
            outcome = True
            if ctx.stream:
                ctx.stream_outcome_pending = True
            else:
                self.breakers.record(endpoint_id, None, events)
                self.failover.recovered(endpoint_id)
            return result
        finally:
            if not outcome:  # cancelled mid-try, or advisory: give back a half-open trial slot
                self.breakers.release(endpoint_id)

    def _retry_wait(self, ctx: CallContext, entry: _Tries, err: UpstreamError) -> float | None:
        """Seconds until the endpoint's next try in this call, or None when it gets no more."""
        cand = entry.cand
        kind = err.error_type
        entry.retries[kind] = entry.retries.get(kind, 0) + 1
        wait = self.retry.delay(err, entry.retries[kind])
        stop = None
        if wait is None:
            stop = "retries used up" if self.retry.max_retries(kind) else None
        elif not self.breakers.allows_retry(cand.endpoint.id):
            stop = "the endpoint's breaker opened"
        elif self.clock.monotonic() + wait > ctx.deadline:
            stop = f"next wait of {wait:.2f}s would pass the call deadline"
        # Later calls try the other candidates first while this endpoint cools down.
        if not ctx.advisory:
            self.failover.cool_down(cand.endpoint.id)
        if stop is not None:
            self._event(EventType.RETRY_EXHAUSTED, ctx, cand, err,
                        f"{entry.tries} attempt(s) on endpoint {cand.endpoint.id}: {stop}; last: {err.message}")
            return None
        return wait

    async def _final(self, ctx: CallContext, cand: Candidate, err: UpstreamError) -> None:
        if err.error_type is ErrorType.MODEL_NOT_FOUND and self.lifecycle is not None:
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

    def abandon(self, ctx: CallContext) -> None:
        """A stream that ended without an outcome (an error of the gateway's own): its
        HALF_OPEN trial slot goes back, nothing is counted."""
        if ctx.stream_outcome_pending and ctx.endpoint is not None:
            ctx.stream_outcome_pending = False
            self.breakers.release(ctx.endpoint.id)
