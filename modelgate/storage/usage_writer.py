"""Batched, off-request-path writing of the call log and resilience events.

The hot path calls `record()` / `record_event()`, which only append to a
deque. A background task writes what has gathered every
`usage.flush_interval_seconds`, or sooner once `usage.batch_size` rows wait,
with one multi-row INSERT per table (chunked to stay under driver parameter
limits). A failed write keeps the rows for the next try, up to `max_pending`
per table; beyond that the oldest rows are dropped and counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import operator
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Table, insert, update

from modelgate.config import Settings
from modelgate.routing.events import ResilienceEventData
from modelgate.storage.db import Database
from modelgate.storage.models import ApiKey, CallLog, ResilienceEvent

log = logging.getLogger(__name__)

def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(slots=True)
class CallRecord:
    """One inference call: the CallLog columns except id."""

    trace_id: str
    protocol: str  # chat | messages | responses
    model: str
    status: int  # HTTP status answered to the caller
    created_at: datetime = field(default_factory=_now)
    api_key_id: int | None = None
    application_id: int | None = None
    channel_id: int | None = None
    provider_kind: str | None = None
    stream: bool = False
    error_code: str | None = None
    latency_ms: float = 0.0
    first_byte_ms: float | None = None
    attempts: int = 1
    prompt_tokens: int = 0  # every prompt token, cached or not
    completion_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    client_ip: str | None = None


class _Queue:
    """Pending rows of one table, bounded; counts what it had to drop."""

    def __init__(self, table: Table, limit: int) -> None:
        self.table = table
        self.limit = limit
        self.rows: deque[Any] = deque()
        self.dropped = 0
        self.reported_dropped = 0

    def append(self, row: Any) -> None:
        if len(self.rows) >= self.limit:
            self.rows.popleft()
            self.dropped += 1
        self.rows.append(row)

    def take(self) -> list[Any]:
        rows = list(self.rows)
        self.rows.clear()
        return rows

    def put_back(self, rows: list[Any]) -> None:
        """Return unwritten rows in front of any that arrived meanwhile, keeping the newest."""
        merged = rows + list(self.rows)
        excess = max(0, len(merged) - self.limit)
        self.dropped += excess
        self.rows = deque(merged[excess:])


class UsageWriter:
    def __init__(self, db: Database, settings: Settings, max_pending: int | None = None) -> None:
        self.db = db
        self.batch_size = max(1, settings.usage.batch_size)
        self.interval = settings.usage.flush_interval_seconds
        limit = max_pending if max_pending is not None else self.batch_size * 200
        self._calls = _Queue(CallLog.__table__, limit)
        self._events = _Queue(ResilienceEvent.__table__, limit)
        self._wake = asyncio.Event()
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    # --- hot path: never awaits -------------------------------------------

    def record(self, call: CallRecord) -> None:
        self._calls.append(call)
        if len(self._calls.rows) >= self.batch_size:
            self._wake.set()

    def record_event(self, event: ResilienceEventData) -> None:
        self._events.append(event)
        if len(self._events.rows) >= self.batch_size:
            self._wake.set()

    # --- background ---------------------------------------------------------

    @property
    def pending(self) -> int:
        return len(self._calls.rows) + len(self._events.rows)

    @property
    def dropped(self) -> int:
        return self._calls.dropped + self._events.dropped

    def start(self) -> None:
        if self._task is None:
            self._stopping = False
            self._task = asyncio.get_running_loop().create_task(self._run(), name="modelgate-usage-writer")

    async def stop(self) -> None:
        """Stop the loop and write everything still pending."""
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            await self._task
            self._task = None
        await self.flush()
        if self.pending:
            log.error("usage writer stopped with %d unwritten rows (database unavailable)", self.pending)

    async def _run(self) -> None:
        while not self._stopping:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.interval)
            self._wake.clear()
            await self.flush()

    async def flush(self) -> int:
        """Write everything pending now; returns the rows written (0 when the write failed)."""
        async with self._lock:
            calls, events = self._calls.take(), self._events.take()
            if not calls and not events:
                return 0
            try:
                async with self.db.engine.begin() as conn:
                    for queue, rows in ((self._calls, calls), (self._events, events)):
                        await self._insert(conn, queue.table, rows)
                    key_ids = {c.api_key_id for c in calls if c.api_key_id is not None}
                    if key_ids:
                        await conn.execute(
                            update(ApiKey.__table__).where(ApiKey.__table__.c.id.in_(key_ids))
                            .values(last_used_at=max(c.created_at for c in calls if c.api_key_id is not None))
                        )
            except Exception:
                log.exception("usage writer: writing %d call rows and %d events failed; will retry",
                              len(calls), len(events))
                self._calls.put_back(calls)
                self._events.put_back(events)
                return 0
            finally:
                self._report_drops()
            return len(calls) + len(events)

    @staticmethod
    async def _insert(conn: Any, table: Table, rows: list[Any]) -> None:
        if not rows:
            return
        names = tuple(f.name for f in dataclasses.fields(rows[0]))
        values = operator.attrgetter(*names)
        # executemany form: one cached compiled statement, batched by the driver layer
        # (a multi-VALUES statement would be compiled anew for every batch size).
        await conn.execute(insert(table), [dict(zip(names, values(r))) for r in rows])

    def _report_drops(self) -> None:
        for queue in (self._calls, self._events):
            new = queue.dropped - queue.reported_dropped
            if new:
                log.error("usage writer: dropped %d %s rows (backlog over %d); total dropped %d",
                          new, queue.table.name, queue.limit, queue.dropped)
                queue.reported_dropped = queue.dropped
