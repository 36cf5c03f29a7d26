"""A circuit breaker per upstream endpoint (one base URL + one upstream key).

CLOSED -> OPEN after `consecutive_failures` failures in a row, or a failure
rate >= `failure_rate` over at least `min_calls` calls within `window_seconds`.
OPEN -> HALF_OPEN once `recovery_seconds` have passed (seen on the next call
or state query). HALF_OPEN admits `half_open_calls` trial calls: all succeed
-> CLOSED, any fails -> OPEN again. A trial that has not reported within
`half_open_trial_timeout_seconds` gives its slot back, so a lost report can
never hold the endpoint at 503.

Every upstream attempt counts, retries included (spec-notes: five failed
attempts open a dead endpoint's breaker, whatever number of callers made
them). Only upstream faults are failures; an INVALID_REQUEST or
MODEL_NOT_FOUND answer proves the endpoint is up and counts as a success.
Waiting for a local resource is never reported here. Every transition is
logged with the endpoint id (never its key) and recorded as an event.
"""

from __future__ import annotations

import enum
import logging
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Protocol

from modelgate.config import BreakerSettings
from modelgate.errors import ErrorType, UpstreamError
from modelgate.routing.events import (
    Clock,
    EventSink,
    EventType,
    NullSink,
    ResilienceEventData,
)

log = logging.getLogger("modelgate.breaker")

NOT_FAULTS = frozenset({ErrorType.INVALID_REQUEST, ErrorType.MODEL_NOT_FOUND})


def is_fault(err: UpstreamError | None) -> bool:
    return err is not None and err.error_type not in NOT_FAULTS


class BreakerState(str, enum.Enum):
    CLOSED = "CLOSED"
    OPEN = "OPEN"
    HALF_OPEN = "HALF_OPEN"


@dataclass(slots=True)
class _Window:
    """Calls and failures of the last `window_seconds`, counted in one-second buckets.

    Memory and time per call stay constant whatever the call rate (a list of
    every call would hold rate x window entries: 240,000 at 4,000 calls/s).
    """

    buckets: deque[list[int]] = field(default_factory=deque)  # [second, calls, failures]
    calls: int = 0
    failures: int = 0

    def add(self, now: float, failed: bool, span: float) -> None:
        second = int(now)
        if self.buckets and self.buckets[-1][0] == second:
            bucket = self.buckets[-1]
        else:
            bucket = [second, 0, 0]
            self.buckets.append(bucket)
        bucket[1] += 1
        bucket[2] += failed
        self.calls += 1
        self.failures += failed
        while self.buckets and self.buckets[0][0] <= now - span:
            _, calls, failures = self.buckets.popleft()
            self.calls -= calls
            self.failures -= failures

    def clear(self) -> None:
        self.buckets.clear()
        self.calls = self.failures = 0


@dataclass(slots=True)
class _Breaker:
    state: BreakerState = BreakerState.CLOSED
    consecutive: int = 0
    window: _Window = field(default_factory=_Window)
    opened_mono: float = 0.0
    opened_wall: float | None = None  # Unix seconds, for the console
    trials: deque[float] = field(default_factory=deque)  # admission times of the trials under way
    trials_succeeded: int = 0


@dataclass(slots=True, frozen=True)
class BreakerStatus:
    endpoint_id: str
    state: BreakerState
    failures: int  # consecutive failures (CLOSED) or failures in the window
    opened_at: float | None  # Unix seconds of the last opening
    retry_after: float | None  # seconds until calls are admitted again; None when admitting


@dataclass(slots=True, frozen=True)
class EventContext:
    """Who saw a transition; copied into the recorded event."""

    trace_id: str | None = None
    channel_id: int | None = None
    model: str | None = None


def trip_reason(settings: BreakerSettings, consecutive: int, calls: int, failures: int) -> str | None:
    """Why a CLOSED breaker with these counts opens, or None. The one rule, whichever store holds the counts."""
    if consecutive >= settings.consecutive_failures:
        return f"{consecutive} consecutive failures"
    if calls >= settings.min_calls and failures / calls >= settings.failure_rate:
        return f"failure rate {failures}/{calls} within {settings.window_seconds:g}s"
    return None


class Breakers(Protocol):
    """What the executor and the console use of the breakers: this process's (BreakerRegistry) or,
    with Redis, the deployment's (shared.breakers.SharedBreakers)."""

    async def admit(self, endpoint_id: str, ctx: EventContext | None = None) -> bool: ...

    def release(self, endpoint_id: str) -> None: ...

    def allows_retry(self, endpoint_id: str) -> bool: ...

    def record(self, endpoint_id: str, err: UpstreamError | None, ctx: EventContext | None = None) -> None: ...

    def retry_after(self, endpoint_id: str) -> float: ...

    def states(self) -> dict[str, BreakerStatus]: ...

    async def view(self, endpoint_ids: list[str]) -> dict[str, BreakerStatus]: ...

    def force_recover(self, endpoint_id: str, detail: str = "forced by an administrator",
                      emit: bool = True) -> BreakerState: ...


class BreakerRegistry:
    def __init__(self, settings: BreakerSettings, clock: Clock, sink: EventSink | None = None) -> None:
        self.settings = settings
        self.clock = clock
        self.sink = sink or NullSink()
        self._breakers: dict[str, _Breaker] = {}

    def _get(self, endpoint_id: str) -> _Breaker:
        breaker = self._breakers.get(endpoint_id)
        if breaker is None:
            breaker = self._breakers[endpoint_id] = _Breaker()
        return breaker

    def _emit(
        self, event: EventType, endpoint_id: str, ctx: EventContext | None, error_type: str | None = None,
        detail: str = "",
    ) -> None:
        ctx = ctx or EventContext()
        log.warning("breaker %s endpoint=%s channel=%s trace_id=%s error_type=%s: %s", event.value, endpoint_id,
                    ctx.channel_id, ctx.trace_id, error_type, detail)
        self.sink.record_event(ResilienceEventData(
            event_type=event.value, trace_id=ctx.trace_id, channel_id=ctx.channel_id, endpoint=endpoint_id,
            model=ctx.model, error_type=error_type, detail=detail,
        ))

    def _refresh(self, endpoint_id: str, breaker: _Breaker, ctx: EventContext | None) -> None:
        """Apply the time-driven transitions: OPEN -> HALF_OPEN, and expiry of unreported trials."""
        now = self.clock.monotonic()
        if breaker.state is BreakerState.OPEN and now - breaker.opened_mono >= self.settings.recovery_seconds:
            breaker.state = BreakerState.HALF_OPEN
            breaker.trials.clear()
            breaker.trials_succeeded = 0
            self._emit(EventType.BREAKER_HALF_OPEN, endpoint_id, ctx,
                       detail=f"recovery time of {self.settings.recovery_seconds:g}s passed")
        elif breaker.state is BreakerState.HALF_OPEN:
            expired = 0
            while breaker.trials and now - breaker.trials[0] >= self.settings.half_open_trial_timeout_seconds:
                breaker.trials.popleft()
                expired += 1
            if expired:
                log.warning("breaker endpoint=%s: %s trial call(s) did not report within %gs; slot(s) given back",
                            endpoint_id, expired, self.settings.half_open_trial_timeout_seconds)

    def state(self, endpoint_id: str) -> BreakerState:
        breaker = self._breakers.get(endpoint_id)
        if breaker is None:
            return BreakerState.CLOSED
        self._refresh(endpoint_id, breaker, None)
        return breaker.state

    def acquire(self, endpoint_id: str, ctx: EventContext | None = None) -> bool:
        """Whether a call may go to this endpoint now. In HALF_OPEN this takes a trial slot,
        which the caller must give back with `record` or `release`."""
        breaker = self._get(endpoint_id)
        self._refresh(endpoint_id, breaker, ctx)
        if breaker.state is BreakerState.CLOSED:
            return True
        if breaker.state is BreakerState.HALF_OPEN and len(breaker.trials) < self.settings.half_open_calls:
            breaker.trials.append(self.clock.monotonic())
            return True
        return False

    async def admit(self, endpoint_id: str, ctx: EventContext | None = None) -> bool:
        """`acquire` behind the interface the executor awaits (a shared registry may ask Redis)."""
        return self.acquire(endpoint_id, ctx)

    def transition_seen(self, event: EventType, endpoint_id: str, ctx: EventContext | None,
                        error_type: str | None = None, detail: str = "") -> None:
        """Record a transition that a shared store made (another process may have counted the failures)."""
        self._emit(event, endpoint_id, ctx, error_type, detail)

    def release(self, endpoint_id: str) -> None:
        """Give back a trial slot of a call that ended without an outcome (cancelled)."""
        breaker = self._breakers.get(endpoint_id)
        if breaker is not None and breaker.state is BreakerState.HALF_OPEN and breaker.trials:
            breaker.trials.pop()

    def allows_retry(self, endpoint_id: str) -> bool:
        """A call keeps retrying this endpoint only while its breaker is not OPEN."""
        return self.state(endpoint_id) is not BreakerState.OPEN

    def record(self, endpoint_id: str, err: UpstreamError | None, ctx: EventContext | None = None) -> None:
        """The outcome of one attempt on this endpoint (None = success)."""
        breaker = self._get(endpoint_id)
        failed = is_fault(err)
        error_type = err.error_type.value if failed and err else None
        if breaker.state is BreakerState.HALF_OPEN:
            if failed:
                self._open(endpoint_id, breaker, ctx, error_type, "a trial call failed")
            else:
                breaker.trials_succeeded += 1
                if breaker.trials_succeeded >= self.settings.half_open_calls:
                    self._close(breaker)
                    self._emit(EventType.BREAKER_CLOSED, endpoint_id, ctx,
                               detail=f"{self.settings.half_open_calls} trial calls succeeded")
            return
        if breaker.state is BreakerState.OPEN:
            # An outcome of a call admitted before the breaker opened: it changes nothing.
            return
        window = breaker.window
        window.add(self.clock.monotonic(), failed, self.settings.window_seconds)
        breaker.consecutive = breaker.consecutive + 1 if failed else 0
        if not failed:
            return
        why = trip_reason(self.settings, breaker.consecutive, window.calls, window.failures)
        if why is not None:
            self._open(endpoint_id, breaker, ctx, error_type, why)

    def _open(
        self, endpoint_id: str, breaker: _Breaker, ctx: EventContext | None, error_type: str | None, why: str
    ) -> None:
        breaker.state = BreakerState.OPEN
        breaker.opened_mono = self.clock.monotonic()
        breaker.opened_wall = time.time()
        breaker.trials.clear()
        breaker.trials_succeeded = 0
        self._emit(EventType.BREAKER_OPENED, endpoint_id, ctx, error_type, why)

    @staticmethod
    def _close(breaker: _Breaker) -> None:
        breaker.state = BreakerState.CLOSED
        breaker.consecutive = 0
        breaker.window.clear()
        breaker.trials.clear()
        breaker.trials_succeeded = 0

    def force_recover(self, endpoint_id: str, detail: str = "forced by an administrator",
                      emit: bool = True) -> BreakerState:
        """Admin action: close the breaker now. Returns the state it had before.

        `emit=False` when the request is already recorded (services.breakers writes it).
        """
        breaker = self._get(endpoint_id)
        self._refresh(endpoint_id, breaker, None)
        previous = breaker.state
        self._close(breaker)
        if emit:
            self._emit(EventType.BREAKER_FORCED, endpoint_id, None, detail=f"{detail}; was {previous.value}")
        return previous

    def retry_after(self, endpoint_id: str) -> float:
        """Seconds until this endpoint admits calls again (0 when it does now)."""
        breaker = self._breakers.get(endpoint_id)
        if breaker is None:
            return 0.0
        self._refresh(endpoint_id, breaker, None)
        if breaker.state is BreakerState.OPEN:
            return max(0.0, breaker.opened_mono + self.settings.recovery_seconds - self.clock.monotonic())
        if breaker.state is BreakerState.HALF_OPEN and len(breaker.trials) >= self.settings.half_open_calls:
            # Trials are under way; their outcome is known within one call, so ask again soon.
            return 1.0
        return 0.0

    def states(self) -> dict[str, BreakerStatus]:
        """Every endpoint seen so far, for the console. Endpoints not listed are CLOSED."""
        out: dict[str, BreakerStatus] = {}
        for endpoint_id, breaker in self._breakers.items():
            self._refresh(endpoint_id, breaker, None)
            if breaker.state is BreakerState.CLOSED:
                failures = breaker.consecutive
            else:
                failures = breaker.window.failures
            wait = self.retry_after(endpoint_id)
            out[endpoint_id] = BreakerStatus(
                endpoint_id, breaker.state, failures, breaker.opened_wall, wait if wait > 0 else None
            )
        return out

    async def view(self, endpoint_ids: list[str]) -> dict[str, BreakerStatus]:
        """The states the console and /metrics show: this process's (the shared registry asks Redis)."""
        return self.states()
