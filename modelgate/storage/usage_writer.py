"""Batched, off-request-path writing of the call log and resilience events.

The hot path calls `record()` / `record_event()`, which never await: a call row is sanitised
(storage.call_record), appended to the local journal (storage.journal) and queued. A background
task writes what has gathered every `usage.flush_interval_seconds`, or sooner once
`usage.batch_size` rows wait, in transactions of at most `usage.batch_size` rows.

What can go wrong, and what the writer does:
- A row the database refuses (a value `sanitise` did not foresee): the batch is split until the
  refused rows are found; the others are written, each refused row is written in its last-resort
  form (ASCII text, integers in range) or, if even that is refused, dropped, counted and logged.
- The database is slow or gone: every operation has a deadline (`usage.db_timeout_seconds`, for
  connecting, each statement and the pool wait, on the writer's own engine). Rows stay queued;
  retries back off up to 5 s; the outage is logged once when it starts and once when it ends.
- More than `usage.max_pending_rows` rows wait in memory: the oldest leave memory but stay in the
  journal, and are written from it once the database is back. Rows that were in neither (journal
  off, full or failing) are lost and counted in `modelgate_call_log_rows_dropped_total`.
- The process stops while the database is slow or gone: the last flush gives up after
  `usage.shutdown_flush_seconds`; the rows stay in the journal and are written at the next start.
- The process is killed: its journal is replayed by the next writer that starts on the same data
  directory. Call rows are written with ON CONFLICT (trace_id) DO NOTHING, so a replayed row that
  was already committed is not written twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import time
from collections import deque
from dataclasses import replace
from datetime import datetime
from itertools import chain
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, cast

import orjson
from prometheus_client import Counter, Gauge
from sqlalchemy import Connection, Dialect, Table, bindparam, insert, update
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import DBAPIError, DataError, IntegrityError, StatementError

from modelgate.config import Settings
from modelgate.routing.events import ResilienceEventData
from modelgate.safetext import shown
from modelgate.storage import journal as journals
from modelgate.storage.call_record import FIELD_NAMES, CallRecord, last_resort, sanitise
from modelgate.storage.db import Database
from modelgate.storage.models import ApiKey, CallLog, ResilienceEvent

if TYPE_CHECKING:
    from sqlalchemy.dialects import postgresql, sqlite

__all__ = ["CallRecord", "UsageWriter"]

log = logging.getLogger(__name__)

ROWS_DROPPED = Counter(
    "modelgate_call_log_rows_dropped_total",
    "Rows of the call log or resilience events that were never written (see docs/decisions.md)",
    ["table"],
)
ROWS_PENDING = Gauge(
    "modelgate_call_log_rows_pending", "Rows waiting in memory for the database", ["table"],
    multiprocess_mode="livesum",
)
ROWS_REPLAYED = Counter("modelgate_call_log_rows_replayed_total",
                        "Call rows replayed from the journal (the insert skips those the database already has)")

MAX_BACKOFF_SECONDS = 5.0
EVENT_TEXT_LIMITS = {"trace_id": 36, "endpoint": 64, "model": 128, "error_type": 32, "event_type": 32}
EVENT_DETAIL_LIMIT = 4000


# Declarative types `__table__` as any FromClause; these models map plain tables.
CALL_LOG_TABLE = cast(Table, CallLog.__table__)
RESILIENCE_EVENTS_TABLE = cast(Table, ResilienceEvent.__table__)
API_KEYS_TABLE = cast(Table, ApiKey.__table__)


class DatabaseUnavailable(Exception):
    """The database could not be reached in time; nothing says the rows are wrong."""


def _row_error(exc: BaseException) -> bool:
    """True when the database (or the driver binding parameters) refused the values themselves.

    Anything else (timeouts, lost connections, a missing table) says nothing about the rows: they
    are kept and retried, never split up and dropped.
    """
    # ValueError, TypeError and OverflowError: the driver could not bind a value.
    if isinstance(exc, (DataError, IntegrityError, ValueError, TypeError, OverflowError)):
        return True
    if isinstance(exc, DBAPIError):
        # SQLSTATE class 22 is "data exception", 23 "integrity constraint violation".
        orig = exc.orig
        cause = getattr(orig, "__cause__", None)
        if isinstance(cause, (ValueError, TypeError, OverflowError)):  # the driver could not encode a value
            return True
        sqlstate = getattr(orig, "sqlstate", None) or getattr(cause, "sqlstate", None)
        return isinstance(sqlstate, str) and sqlstate[:2] in ("22", "23")
    # A StatementError that is not a DBAPIError wraps an exception raised while binding a value.
    return isinstance(exc, StatementError) and not isinstance(exc, DBAPIError)


def _sanitise_event(event: ResilienceEventData) -> ResilienceEventData:
    changes: dict[str, Any] = {}
    for name, limit in EVENT_TEXT_LIMITS.items():
        value = getattr(event, name)
        if value is not None and (len(value) > limit or not value.isprintable()):
            changes[name] = shown(value, limit)
    if len(event.detail) > EVENT_DETAIL_LIMIT or "\x00" in event.detail:
        changes["detail"] = event.detail.replace("\x00", "\\x00")[:EVENT_DETAIL_LIMIT]
    # The event is frozen: a sanitised one is a copy.
    return replace(event, **changes) if changes else event


class _Queue:
    """Pending rows of one table, bounded in memory."""

    def __init__(self, table: Table, limit: int) -> None:
        self.table = table
        self.limit = limit
        self.rows: deque[Any] = deque()
        self.dropped = 0  # rows that left memory because of the bound
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
        usage = settings.usage
        self.db = db
        self.batch_size = max(1, usage.batch_size)
        self.interval = usage.flush_interval_seconds
        self.timeout = usage.db_timeout_seconds
        self.shutdown_seconds = usage.shutdown_flush_seconds
        limit = max(1, max_pending if max_pending is not None else usage.max_pending_rows)
        self._calls = _Queue(CALL_LOG_TABLE, limit)
        self._events = _Queue(RESILIENCE_EVENTS_TABLE, limit)
        self.journal_root = Path(settings.data_dir) / "call-journal"
        self.journal = journals.CallJournal(self.journal_root, usage.journal_max_bytes) if usage.journal else None
        self._journal_behind = False  # rows left memory but are in our own closed journal segments
        dialect_insert: Callable[[Table], sqlite.Insert | postgresql.Insert]
        if db.is_sqlite:
            dialect_insert = sqlite_insert
        else:  # imported only here: the PostgreSQL dialect costs a SQLite worker 2.4 MB
            from sqlalchemy.dialects.postgresql import insert as dialect_insert
        dialect = db.transaction_engine.dialect
        self._insert_calls = _PreparedInsert(
            dialect_insert(CALL_LOG_TABLE).on_conflict_do_nothing(index_elements=["trace_id"]), FIELD_NAMES, dialect)
        self._insert_events = _PreparedInsert(insert(RESILIENCE_EVENTS_TABLE), EVENT_FIELD_NAMES, dialect)
        self._wake = asyncio.Event()
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._outage_since: float | None = None
        self._failures = 0
        self.lost = 0  # rows never written, of both tables

    # --- hot path: never awaits -------------------------------------------

    def record(self, call: CallRecord) -> None:
        sanitise(call)
        journal = self.journal
        if journal is not None:
            journal.append(orjson.dumps(_journal_values(call), option=orjson.OPT_APPEND_NEWLINE))
        self._calls.append(call)
        if len(self._calls.rows) >= self.batch_size:
            self._wake.set()

    def record_event(self, event: ResilienceEventData) -> None:
        self._events.append(_sanitise_event(event))
        if len(self._events.rows) >= self.batch_size:
            self._wake.set()

    # --- background ---------------------------------------------------------

    @property
    def pending(self) -> int:
        return len(self._calls.rows) + len(self._events.rows)

    @property
    def dropped(self) -> int:
        """Rows that left the in-memory queue because of its bound (journaled call rows included)."""
        return self._calls.dropped + self._events.dropped

    @property
    def database_up(self) -> bool:
        return self._outage_since is None

    def start(self) -> None:
        if self._task is None:
            self._stopping = False
            self._task = asyncio.get_running_loop().create_task(self._run(), name="modelgate-usage-writer")

    async def stop(self) -> None:
        """Stop the loop and try, for `usage.shutdown_flush_seconds` in all, to write everything still
        pending. A write cut by that limit puts its rows back: they stay in the journal."""
        self._stopping = True
        self._wake.set()
        try:
            async with asyncio.timeout(self.shutdown_seconds):
                if self._task is not None:
                    await self._task  # its write in progress; cancelled with it at the limit
                await self.flush()
        except (TimeoutError, asyncio.CancelledError) as exc:
            if isinstance(exc, asyncio.CancelledError) and asyncio.current_task().cancelling():  # type: ignore[union-attr]
                raise
            log.error("usage writer: the database did not take the pending rows within %gs of shutdown",
                      self.shutdown_seconds)
        self._task = None
        unwritten = self.pending or self._journal_behind
        if self.journal is not None:
            self.journal.close(keep=bool(unwritten))
            self.journal = None
            if unwritten:
                log.error("usage writer stopped with %d unwritten rows; the call rows are kept in the journal "
                          "and written at the next start", self.pending)
        elif unwritten:
            log.error("usage writer stopped with %d unwritten rows (database unavailable); they are lost",
                      self.pending)

    async def _run(self) -> None:
        await self._replay_orphans()
        while not self._stopping:
            wait = self.interval
            if self._failures:
                wait = min(MAX_BACKOFF_SECONDS, max(self.interval, 0.25) * 2 ** min(self._failures, 8))
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait)
            self._wake.clear()
            await self.flush()

    async def flush(self) -> int:
        """Write everything pending now; returns the rows written (0 when the database was unavailable)."""
        async with self._lock:
            journal = self.journal
            if not self._calls.rows and not self._events.rows and not self._journal_behind:
                if journal is not None:  # every journaled row is written: an old open segment can go
                    journal.discard_through(journal.seal())
                return 0
            closed = journal.seal(force=self._journal_behind) if journal is not None else None
            calls, events = self._calls.take(), self._events.take()
            written = len(calls) + len(events)
            try:
                await self._write_batches(calls, events)
                if self._journal_behind and closed is not None:
                    for segment in self.journal.segments_through(closed):  # type: ignore[union-attr]
                        await self._replay_segment(segment)
                    self._journal_behind = False
            except DatabaseUnavailable as exc:
                self._calls.put_back(calls)
                self._events.put_back(events)
                self._note_outage(exc)
                return 0
            except BaseException:  # cancelled mid-write: the rows stay queued
                self._calls.put_back(calls)
                self._events.put_back(events)
                raise
            finally:
                self._account_drops()
            if closed is not None:
                self.journal.discard_through(closed)  # type: ignore[union-attr]
            self._note_recovery()
            return written

    # --- writing ------------------------------------------------------------

    async def _transaction(self, calls: list[CallRecord], events: list[ResilienceEventData]) -> None:
        try:
            # The driver's own deadlines bound every step; this one catches anything they miss.
            async with asyncio.timeout(self.timeout * 4):
                await self.db.run_transaction(lambda conn: self._write_rows(conn, calls, events))
        except Exception as exc:
            if _row_error(exc):
                raise
            raise DatabaseUnavailable(exc) from exc

    def _write_rows(self, conn: Connection, calls: list[CallRecord], events: list[ResilienceEventData]) -> None:
        if calls:
            self._insert_calls.execute(conn, calls)
        if events:
            self._insert_events.execute(conn, events)
        last_used: dict[int, datetime] = {}
        for call in calls:
            key_id = call.api_key_id
            if key_id is not None and (key_id not in last_used or call.created_at > last_used[key_id]):
                last_used[key_id] = call.created_at
        if last_used:
            conn.execute(_MARK_KEYS_USED, [{"key_id": k, "used": t} for k, t in last_used.items()])

    async def _write_batches(self, calls: list[CallRecord], events: list[ResilienceEventData]) -> None:
        """Write in transactions of at most `batch_size` rows of each table, removing each written batch
        from the lists: a backlog (after a slow or failed write) is worked off in bounded steps instead of
        one transaction that grows with it and outlasts its deadline, and on failure the lists hold
        exactly the rows still to write."""
        size = self.batch_size
        while calls or events:
            await self._write(calls[:size], events[:size])
            del calls[:size], events[:size]

    async def _write(self, calls: list[CallRecord], events: list[ResilienceEventData]) -> None:
        if not calls and not events:
            return
        try:
            await self._transaction(calls, events)
        except DatabaseUnavailable:
            raise
        except Exception:
            # Some row is refused: find it, and write the others around it.
            await self._isolate(calls, is_call=True)
            await self._isolate(events, is_call=False)

    async def _isolate(self, rows: list[Any], *, is_call: bool) -> None:
        """Write `rows`, splitting in halves around the ones the database refuses."""
        if not rows:
            return
        try:
            await self._transaction(rows if is_call else [], [] if is_call else rows)
            return
        except DatabaseUnavailable:
            raise
        except Exception as exc:
            if len(rows) > 1:
                middle = len(rows) // 2
                await self._isolate(rows[:middle], is_call=is_call)
                await self._isolate(rows[middle:], is_call=is_call)
                return
            refused = exc
        row = rows[0]
        table = "call_log" if is_call else "resilience_events"
        reason = shown(str(getattr(refused, "orig", refused)), 300)
        if is_call:
            try:
                await self._transaction([last_resort(row)], [])
                log.error("call log: the database refused the row of trace_id=%s (%s); written in its "
                          "last-resort form", shown(row.trace_id, 36), reason)
                return
            except DatabaseUnavailable:
                raise
            except Exception:
                pass
        self.lost += 1
        ROWS_DROPPED.labels(table).inc()
        log.error("%s: the database refused a row (trace_id=%s): %s; it is dropped", table,
                  shown(row.trace_id or "", 36), reason)

    # --- the journal ------------------------------------------------------------

    async def _replay_segment(self, path: Path) -> int:
        lines, torn = journals.read_lines(path)
        if torn:
            log.warning("call-log journal %s ends with a partly written row (the process was killed while "
                        "writing it); that row was not yet answered and is skipped", path)
        written = 0
        for start in range(0, len(lines), self.batch_size):
            calls = []
            for line in lines[start:start + self.batch_size]:
                try:
                    calls.append(_call_from_json(line))
                except (ValueError, TypeError):
                    self.lost += 1
                    ROWS_DROPPED.labels("call_log").inc()
                    log.error("call-log journal %s: an unreadable row is skipped", path)
            await self._write(calls, [])
            written += len(calls)
        ROWS_REPLAYED.inc(written)
        return written

    async def _replay_orphans(self) -> None:
        """Write the journals that writers which are gone (killed, or stopped during an outage) left."""
        own = self.journal.dir if self.journal is not None else None
        while True:  # at least one attempt, even when stopped at once
            try:
                for orphan in journals.orphans(self.journal_root, own):
                    try:
                        written = sum([await self._replay_segment(s) for s in orphan.segments()])
                    except BaseException:
                        orphan.release()
                        raise
                    orphan.done()
                    if written:
                        log.warning("call-log journal: replayed %d rows left by an earlier process (%s); rows the "
                                    "database already had are skipped",
                                    written, orphan.path.name)
                self._note_recovery()
                return
            except DatabaseUnavailable as exc:
                self._note_outage(exc)
                if self._stopping:
                    return
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wake.wait(),
                                           min(MAX_BACKOFF_SECONDS, 0.25 * 2 ** min(self._failures, 8)))

    # --- reporting ------------------------------------------------------------

    def _note_outage(self, exc: DatabaseUnavailable) -> None:
        self._failures += 1
        if self._outage_since is None:
            self._outage_since = time.monotonic()
            cause = exc.__cause__ or exc
            log.error("call log: the database is unavailable (%s); rows are kept%s until it is back",
                      shown(f"{type(cause).__name__}: {cause}", 300),
                      " in the journal" if self.journal is not None else " in memory")

    def _note_recovery(self) -> None:
        self._failures = 0
        if self._outage_since is not None:
            log.warning("call log: the database is available again after %.1f s",
                        time.monotonic() - self._outage_since)
            self._outage_since = None

    def _account_drops(self) -> None:
        for queue in (self._calls, self._events):
            ROWS_PENDING.labels(queue.table.name).set(len(queue.rows))
            new = queue.dropped - queue.reported_dropped
            if not new:
                continue
            queue.reported_dropped = queue.dropped
            journal = self.journal
            if queue is self._calls and journal is not None and not journal.full and not journal.failed:
                self._journal_behind = True
                log.warning("usage writer: %d call rows over the in-memory bound of %d; they are written "
                            "from the journal once the database is back", new, queue.limit)
                continue
            self.lost += new
            ROWS_DROPPED.labels(queue.table.name).inc(new)
            log.error("usage writer: dropped %d %s rows (backlog over %d); total dropped %d",
                      new, queue.table.name, queue.limit, queue.dropped)


# Bound parameters a SQLite statement may hold (SQLITE_MAX_VARIABLE_NUMBER's default).
SQLITE_VARIABLES = 32_766 if sqlite3.sqlite_version_info >= (3, 32) else 999
EVENT_FIELD_NAMES = ("event_type", "trace_id", "channel_id", "endpoint", "model", "error_type", "detail",
                     "created_at")


class _PreparedInsert:
    """An INSERT compiled once whose rows are bound as tuples, each value through its column type's
    bind processor: SQLAlchemy's own per-row handling of an executemany cost ~50 µs per call-log row,
    more than the database's work, on a thread that shares the GIL with the event loop.

    On SQLite the rows go in statements of many VALUES rows, not an executemany: the driver lets go of
    the GIL around each statement it steps, and taking it back from a saturated event loop's thread
    took a switch interval per row (the writer thread spent 90 % of its time there, about 1,200 rows/s).
    Statements hold a power of two of rows: the driver keeps each distinct statement it prepared (up to
    128), and one per batch length held about 0.5 MB each (RSS +70 MB after 150 batches of any length).
    """

    def __init__(self, statement: Any, names: tuple[str, ...], dialect: Dialect) -> None:
        compiled = statement.compile(dialect=dialect, column_keys=list(names))
        self.sql = str(compiled)
        table = statement.table
        self.plan = [(name, table.c[name].type.dialect_impl(dialect).bind_processor(dialect))
                     for name in compiled.positiontup]
        self.rows_per_statement = 0
        if dialect.paramstyle == "qmark":
            row = "(" + ", ".join("?" * len(self.plan)) + ")"
            head, found, tail = self.sql.partition(" VALUES " + row)
            assert found, self.sql  # SQLAlchemy renders one row of placeholders
            self._head, self._row, self._tail = head + " VALUES ", row, tail
            # The largest power of two whose rows fit in one statement's bound parameters.
            self.rows_per_statement = 1 << ((SQLITE_VARIABLES // len(self.plan)).bit_length() - 1)

    def execute(self, conn: Connection, rows: list[Any]) -> None:
        plan = self.plan
        values = [tuple(getattr(row, name) if process is None else process(getattr(row, name))
                        for name, process in plan) for row in rows]
        size = self.rows_per_statement
        if not size:
            conn.exec_driver_sql(self.sql, values)
            return
        start = 0
        while start < len(values):
            while size > len(values) - start:
                size >>= 1
            part = values[start:start + size]
            conn.exec_driver_sql(self._head + ", ".join([self._row] * size) + self._tail,
                                 tuple(chain.from_iterable(part)))
            start += size


# Built once: a statement built per batch (`in_()` over the batch's key ids) left SQLAlchemy's clones of
# it in memory, about 2 KB per batch in the writer thread (10 MB after a few minutes of soak).
_MARK_KEYS_USED = (update(API_KEYS_TABLE).where(API_KEYS_TABLE.c.id == bindparam("key_id"))
                   .values(last_used_at=bindparam("used")))

# A journal line is the row's values as a JSON array in FIELD_NAMES order: a third of the bytes of
# an object and a microsecond less to encode, on every call.
_journal_values = attrgetter(*FIELD_NAMES)


def _call_from_json(line: bytes) -> CallRecord:
    values = orjson.loads(line)
    if isinstance(values, list):
        values = dict(zip(FIELD_NAMES, values, strict=True))
    # else an object: a line journaled by an earlier version of the gateway
    values["created_at"] = datetime.fromisoformat(values["created_at"])
    return sanitise(CallRecord(**values))
