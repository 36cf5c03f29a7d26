import asyncio
import sqlite3
import uuid
from datetime import UTC, datetime, timedelta

from sqlalchemy import event, func, select
from sqlalchemy.exc import OperationalError

from modelgate.routing.events import ResilienceEventData
from modelgate.storage.models import ApiKey, CallLog, ResilienceEvent
from modelgate.storage.usage_writer import CallRecord, UsageWriter


def _call(i: int = 0, **kw) -> CallRecord:
    base = {"trace_id": str(uuid.uuid4()), "protocol": "chat", "model": f"m{i % 3}", "status": 200,
            "prompt_tokens": i, "completion_tokens": 2 * i}
    base.update(kw)
    return CallRecord(**base)


async def _count(db, model) -> int:
    async with db.session() as s:
        return await s.scalar(select(func.count()).select_from(model))


async def test_record_is_sync_and_flush_writes_all_columns(database, settings):
    writer = UsageWriter(database, settings)
    call = _call(5, api_key_id=None, stream=True, error_code="UPSTREAM_ERROR", first_byte_ms=12.5,
                 client_ip="10.0.0.1", attempts=3, channel_id=4, provider_kind="openai")
    assert writer.record(call) is None
    writer.record_event(ResilienceEventData("FAILOVER", trace_id=call.trace_id, channel_id=4, endpoint="p1:k2",
                                    model="m2", error_type="UPSTREAM_ERROR", detail="to channel 5"))
    assert writer.pending == 2
    assert await writer.flush() == 2
    assert writer.pending == 0
    async with database.session() as s:
        row = (await s.execute(select(CallLog))).scalar_one()
        ev = (await s.execute(select(ResilienceEvent))).scalar_one()
    assert (row.trace_id, row.stream, row.error_code, row.first_byte_ms, row.attempts, row.completion_tokens,
            row.client_ip, row.provider_kind) == (call.trace_id, True, "UPSTREAM_ERROR", 12.5, 3, 10, "10.0.0.1",
                                                   "openai")
    assert (ev.event_type, ev.endpoint, ev.detail) == ("FAILOVER", "p1:k2", "to channel 5")


async def test_an_event_with_unsafe_text_is_recorded_cleaned(database, settings):
    # Event text can come from upstreams (error messages) and clients (model names): a NUL byte, a line
    # break or an over-long value is stored escaped and cut to its column, and recording never raises.
    writer = UsageWriter(database, settings)
    event_in = ResilienceEventData("FAILOVER", endpoint="p1:k2", model="m\nforged line",
                                   detail="upstream said \x00" + "x" * 5000)
    writer.record_event(event_in)
    assert await writer.flush() == 1
    async with database.session() as s:
        ev = (await s.execute(select(ResilienceEvent))).scalar_one()
    assert ev.model.isprintable() and "\n" not in ev.model and ev.model.startswith("m")
    assert "\x00" not in ev.detail and len(ev.detail) == 4000 and ev.detail.startswith("upstream said ")
    assert event_in.detail.startswith("upstream said \x00")  # the caller's event is left as it was


async def test_stop_drains_everything(database, settings):
    settings.usage.flush_interval_seconds = 3600  # only the stop can write
    settings.usage.batch_size = 10_000
    writer = UsageWriter(database, settings)
    writer.start()
    for i in range(1234):
        writer.record(_call(i))
    writer.record_event(ResilienceEventData("BREAKER_OPENED", endpoint="p1:k1"))
    await writer.stop()
    assert await _count(database, CallLog) == 1234
    assert await _count(database, ResilienceEvent) == 1
    assert writer.pending == 0


async def test_batch_size_wakes_the_flusher(database, settings):
    settings.usage.flush_interval_seconds = 3600
    settings.usage.batch_size = 3
    writer = UsageWriter(database, settings)
    writer.start()
    try:
        for i in range(3):
            writer.record(_call(i))
        for _ in range(200):  # the flusher is woken by the third row, not by the (hour-long) timer
            if await _count(database, CallLog) == 3:
                break
            await asyncio.sleep(0.01)
        assert await _count(database, CallLog) == 3
    finally:
        await writer.stop()


class _DatabaseDown:
    """While active, every transaction fails as an unreachable database does."""

    def __init__(self, database) -> None:
        self.database = database

    def __enter__(self):
        async def down(work):
            raise OperationalError("BEGIN", {}, sqlite3.OperationalError("unable to open database file"))
        self.database.run_transaction = down
        return self

    def __exit__(self, *exc):
        del self.database.run_transaction


async def test_failed_flush_keeps_rows_bounded_without_journal(database, settings, caplog):
    settings.usage.journal = False
    writer = UsageWriter(database, settings, max_pending=5)
    for i in range(3):
        writer.record(_call(i))
    with _DatabaseDown(database):
        assert await writer.flush() == 0
        assert writer.pending == 3 and writer.dropped == 0
        for i in range(3, 7):
            writer.record(_call(i))
        assert await writer.flush() == 0
    assert writer.pending == 5 and writer.dropped == 2 and writer.lost == 2
    assert "dropped 2 call_log rows" in caplog.text
    assert await writer.flush() == 5
    async with database.session() as s:
        tokens = sorted((await s.scalars(select(CallLog.prompt_tokens))).all())
    assert tokens == [2, 3, 4, 5, 6]  # the oldest rows were the ones dropped


async def test_rows_over_the_memory_bound_are_written_from_the_journal(database, settings, caplog):
    writer = UsageWriter(database, settings, max_pending=5)
    with _DatabaseDown(database):
        for i in range(7):
            writer.record(_call(i))
        assert await writer.flush() == 0
    assert writer.pending == 5 and writer.dropped == 2 and writer.lost == 0
    await writer.flush()
    async with database.session() as s:
        tokens = sorted((await s.scalars(select(CallLog.prompt_tokens))).all())
    assert tokens == list(range(7))
    await writer.stop()
    assert not list(writer.journal_root.glob("w-*")), "a writer that wrote everything leaves no journal"


async def test_flush_marks_keys_used(services, database, settings):
    await services.applications.create("app")
    key = (await services.api_keys.create("app")).key
    assert key.last_used_at is None
    writer = UsageWriter(database, settings)
    writer.record(_call(1, api_key_id=key.id))
    await writer.flush()
    assert (await services.api_keys.get(key.id)).last_used_at is not None
    async with database.session() as s:
        assert (await s.get(ApiKey, key.id)).last_used_at is not None


class _TakesAtMost:
    """A database that cannot take an INSERT of more than `limit` rows within its deadline (it times
    out, as a slow disk or a busy SQLite file does), and optionally fails its `fail_at`-th one."""

    def __init__(self, database, limit: int, fail_at: int | None = None) -> None:
        self.engine = database.transaction_engine
        self.limit, self.fail_at, self.inserts = limit, fail_at, 0

    def __enter__(self):
        event.listen(self.engine, "before_cursor_execute", self.check)
        return self

    def __exit__(self, *exc):
        event.remove(self.engine, "before_cursor_execute", self.check)

    def check(self, conn, cursor, statement, parameters, context, executemany):
        if not statement.lstrip().upper().startswith("INSERT INTO CALL_LOG"):
            return
        self.inserts += 1
        rows = len(parameters) if executemany else 1
        if rows > self.limit or self.inserts == self.fail_at:
            raise sqlite3.OperationalError("database is locked")


async def test_a_backlog_is_written_in_transactions_the_database_can_take(database, settings):
    # After an outage the backlog is many batches long; one transaction of all of it would outlast
    # the deadline again and again while the backlog (and memory) grows.
    settings.usage.batch_size = 10
    writer = UsageWriter(database, settings)
    with _DatabaseDown(database):
        for i in range(35):
            writer.record(_call(i))
        assert await writer.flush() == 0
    with _TakesAtMost(database, limit=10):
        assert await writer.flush() == 35
    assert writer.pending == 0 and await _count(database, CallLog) == 35


async def test_a_write_failing_midway_keeps_exactly_the_rows_not_yet_written(database, settings):
    settings.usage.batch_size = 8  # one INSERT statement per batch (they hold a power of two of rows)
    writer = UsageWriter(database, settings)
    for i in range(35):
        writer.record(_call(i))
    with _TakesAtMost(database, limit=8, fail_at=3):
        assert await writer.flush() == 0
    assert writer.pending == 19 and await _count(database, CallLog) == 16
    assert await writer.flush() == 19
    async with database.session() as s:
        tokens = sorted((await s.scalars(select(CallLog.prompt_tokens))).all())
    assert tokens == list(range(35))  # every row once


async def test_batches_of_any_length_use_a_bounded_set_of_statements(database, settings):
    # The SQLite driver keeps every distinct statement it prepared (up to 128); a multi-row INSERT per
    # batch length held about 0.5 MB each, so the writer's memory grew with each new length.
    writer = UsageWriter(database, settings)
    statements: set[str] = set()

    def note(conn, cursor, statement, parameters, context, executemany):
        if statement.lstrip().upper().startswith("INSERT INTO CALL_LOG"):
            statements.add(statement)

    engine = database.transaction_engine
    event.listen(engine, "before_cursor_execute", note)
    try:
        written = 0
        for length in range(1, 301):
            for i in range(length):
                writer.record(_call(i))
            written += await writer.flush()
    finally:
        event.remove(engine, "before_cursor_execute", note)
    assert written == sum(range(1, 301)) == await _count(database, CallLog)
    assert len(statements) <= 10  # one per power of two up to the batch size


async def test_each_key_is_marked_with_its_own_last_call(services, database, settings):
    await services.applications.create("app")
    early = (await services.api_keys.create("app")).key
    late = (await services.api_keys.create("app")).key
    start = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
    writer = UsageWriter(database, settings)
    writer.record(_call(1, api_key_id=early.id, created_at=start))
    writer.record(_call(2, api_key_id=early.id, created_at=start + timedelta(seconds=5)))
    writer.record(_call(3, api_key_id=late.id, created_at=start + timedelta(seconds=9)))
    await writer.flush()
    assert (await services.api_keys.get(early.id)).last_used_at == start + timedelta(seconds=5)
    assert (await services.api_keys.get(late.id)).last_used_at == start + timedelta(seconds=9)
