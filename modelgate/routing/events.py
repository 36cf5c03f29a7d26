"""What the resilience code needs from the outside: a clock and an event sink.

Both are injected so tests drive time by hand and never sleep, and so the
storage layer can persist events without the routing code importing it.

The clock of a call's deadlines is the event loop's: the limits that end an upstream
attempt are the loop's timers (asyncio.timeout, call_later), so the times they are
compared with are read from the same clock, and a test that fakes the loop's time
(tests/faults) moves every deadline of the gateway together.
"""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Protocol


class Clock(Protocol):
    def monotonic(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The running event loop's clock (time.monotonic() on asyncio's and uvloop's loops)."""

    def monotonic(self) -> float:
        return asyncio.get_running_loop().time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class LoopClock(SystemClock):
    """The clock of one event loop, the one a runtime serves its calls on: read without looking the
    loop up, which on Python 3.11 makes a getpid system call (asyncio.get_running_loop), and a call
    reads its clock five times, a relayed stream once a chunk."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.monotonic = loop.time  # type: ignore[method-assign]


class EventType(str, enum.Enum):
    RETRY_EXHAUSTED = "RETRY_EXHAUSTED"
    FAILOVER = "FAILOVER"
    BREAKER_OPENED = "BREAKER_OPENED"
    BREAKER_HALF_OPEN = "BREAKER_HALF_OPEN"
    BREAKER_CLOSED = "BREAKER_CLOSED"
    BREAKER_FORCED = "BREAKER_FORCED"
    MODEL_DEPRECATED = "MODEL_DEPRECATED"


@dataclass(slots=True, frozen=True)
class ResilienceEventData:
    """One resilience event; the fields mirror the `resilience_events` columns."""

    event_type: str
    trace_id: str | None = None
    channel_id: int | None = None
    endpoint: str | None = None  # Endpoint.id, never a key
    model: str | None = None
    error_type: str | None = None
    detail: str = ""
    created_at: datetime = field(default_factory=lambda: datetime.now(timezone.utc))


class EventSink(Protocol):
    def record_event(self, event: ResilienceEventData) -> None:
        """Must not block: the hot path calls it."""
        ...


class NullSink:
    def record_event(self, event: ResilienceEventData) -> None:
        return None
