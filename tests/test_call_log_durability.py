"""The call log under hostile values and database faults (issue 12 items 1-3).

PostgreSQL cases run against the local server (127.0.0.1:5432, a throw-away database) through a
TCP proxy the test controls (tests/fakes/tcp_proxy.py); they skip when PostgreSQL is absent.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid

import orjson
import pytest
from sqlalchemy import func, select

from modelgate.config import Settings
from modelgate.storage import journal as journals
from modelgate.storage.call_record import CallRecord
from modelgate.storage.db import Database
from modelgate.storage.models import CallLog
from modelgate.storage.usage_writer import ROWS_DROPPED, UsageWriter
from tests.fakes.tcp_proxy import TcpProxy

def _call(i: int = 0, **kw) -> CallRecord:
    base = {"trace_id": str(uuid.uuid4()), "protocol": "chat", "model": f"m{i}", "status": 200,
            "prompt_tokens": i}
    base.update(kw)
    return CallRecord(**base)


async def _rows(db: Database) -> list[CallLog]:
    async with db.session() as s:
        return list((await s.scalars(select(CallLog).order_by(CallLog.prompt_tokens))).all())


async def _count(db: Database) -> int:
    async with db.session() as s:
        return await s.scalar(select(func.count()).select_from(CallLog))


@pytest.fixture
async def pg_proxy():
    proxy = await TcpProxy("127.0.0.1", 5432).start()
    yield proxy
    await proxy.close()


def _settings(tmp_path, **usage) -> Settings:
    settings = Settings(data_dir=str(tmp_path / "data"))
    for name, value in usage.items():
        setattr(settings.usage, name, value)
    return settings


# --- item 1: no row blocks the others -------------------------------------------------------


HOSTILE = [
    {"model": "m" * 5000},  # over the 128-character column
    {"model": "bad\x00model"},  # PostgreSQL text cannot hold NUL
    {"model": "line\nforged INFO modelgate.gateway call"},
    {"model": "\ud800lone surrogate"},
    {"client_ip": "1.2.3.4, " + "9" * 500},
    {"client_ip": "\x00"},
    {"prompt_tokens": 2**70},  # past any integer column
    {"completion_tokens": -(2**40)},
    {"cache_read_tokens": 2**70},  # upstream usage too: cached prompt tokens
    {"cache_write_tokens": -(2**40)},
    {"cache_read_tokens": "12"},
]


async def _hostile_rows_are_written(db: Database, settings: Settings) -> None:
    writer = UsageWriter(db, settings)
    for i, bad in enumerate(HOSTILE):
        writer.record(_call(100 + i, **bad))
    for i in range(20):
        writer.record(_call(i))
    assert await writer.flush() == 20 + len(HOSTILE)
    rows = await _rows(db)
    assert len(rows) == 20 + len(HOSTILE)
    for row in rows:
        assert len(row.model) <= 128 and row.model.isprintable()
        assert row.client_ip is None or (len(row.client_ip) <= 64 and row.client_ip.isprintable())
        assert 0 <= row.prompt_tokens < 2**31 and 0 <= row.completion_tokens < 2**31
        assert 0 <= row.cache_read_tokens < 2**31 and 0 <= row.cache_write_tokens < 2**31
    models = {r.model for r in rows}
    assert "bad\\x00model" in models and "line\\nforged INFO modelgate.gateway call" in models
    await writer.stop()


async def test_hostile_values_are_bounded_and_written_sqlite(database, settings):
    await _hostile_rows_are_written(database, settings)


async def test_hostile_values_are_bounded_and_written_postgresql(pg_url, tmp_path):
    db = Database(pg_url)
    try:
        await _hostile_rows_are_written(db, _settings(tmp_path))
    finally:
        await db.dispose()


async def test_a_refused_row_is_isolated_and_kept_in_a_safe_form(pg_url, tmp_path, caplog):
    """A value that slips past sanitising (here put in the queue directly) costs only its own row."""
    db = Database(pg_url)
    writer = UsageWriter(db, _settings(tmp_path))
    try:
        for i in range(10):
            writer.record(_call(i))
        poisoned = _call(50, model="nul\x00inside")
        writer._calls.append(poisoned)  # as if sanitise had missed it
        unencodable = _call(51, client_ip="\udc80")  # refused by the driver, not the server
        writer._calls.append(unencodable)
        for i in range(10, 20):
            writer.record(_call(i))
        before = ROWS_DROPPED.labels("call_log")._value.get()
        with caplog.at_level(logging.ERROR):
            assert await writer.flush() == 22
        rows = await _rows(db)
        assert [r.prompt_tokens for r in rows] == [*range(20), 50, 51]
        assert rows[-2].model == "nul\\x00inside" and rows[-2].trace_id == poisoned.trace_id
        assert rows[-1].client_ip == "\\udc80"
        refusals = [r.getMessage() for r in caplog.records if "refused the row" in r.getMessage()]
        assert len(refusals) == 2 and poisoned.trace_id in refusals[0] and unencodable.trace_id in refusals[1]
        assert ROWS_DROPPED.labels("call_log")._value.get() == before
        # The writer is not stuck: later rows go through.
        writer.record(_call(21))
        assert await writer.flush() == 1
    finally:
        await writer.stop()
        await db.dispose()


# --- item 2: a silent database ----------------------------------------------------------------


async def test_partitioned_postgresql_times_out_keeps_rows_and_recovers(pg_url, pg_proxy, tmp_path, caplog):
    url = pg_url.replace(":5432/", f":{pg_proxy.port}/")
    settings = _settings(tmp_path, db_timeout_seconds=1.0, flush_interval_seconds=0.05)
    db = Database.from_settings(Settings(database_url=url), timeout=1.0)
    writer = UsageWriter(db, settings)
    caplog.set_level(logging.WARNING, "modelgate.storage.usage_writer")
    try:
        writer.record(_call(0))
        assert await writer.flush() == 1  # the pool now holds a live connection
        pg_proxy.blackhole()
        for i in range(1, 50):
            writer.record(_call(i))
        # Bounded by the deadlines; the guard only turns a hang into a failure.
        assert await asyncio.wait_for(writer.flush(), 30) == 0
        assert await asyncio.wait_for(writer.flush(), 30) == 0
        assert writer.pending == 49 and not writer.database_up
        pg_proxy.restore()
        writer.start()
        for _ in range(300):
            if writer.database_up and writer.pending == 0:
                break
            await asyncio.sleep(0.05)
        assert writer.pending == 0
    finally:
        await asyncio.wait_for(writer.stop(), 30)
        await db.dispose()
    check = Database(pg_url)
    assert await _count(check) == 50
    await check.dispose()
    messages = [r.getMessage() for r in caplog.records]
    assert sum("database is unavailable" in m for m in messages) == 1, messages
    assert sum("available again" in m for m in messages) == 1, messages


async def test_stop_with_a_silent_database_returns_and_keeps_rows_for_the_next_start(pg_url, pg_proxy, tmp_path):
    url = pg_url.replace(":5432/", f":{pg_proxy.port}/")
    settings = _settings(tmp_path, db_timeout_seconds=5.0, shutdown_flush_seconds=1.0)
    db = Database.from_settings(Settings(database_url=url), timeout=5.0)
    writer = UsageWriter(db, settings)
    writer.start()
    writer.record(_call(0))
    await writer.flush()
    pg_proxy.blackhole()
    for i in range(1, 30):
        writer.record(_call(i))
    started = time.monotonic()
    await asyncio.wait_for(writer.stop(), 30)
    # Bounded by usage.shutdown_flush_seconds (1 s here) and the driver's 2 s close of the cut
    # connection, not by the writer's 5 s deadlines.
    assert time.monotonic() - started < 4.0
    await asyncio.wait_for(db.dispose(), 30)
    pg_proxy.restore()
    # The next process on the same data directory writes what the first one could not.
    db2 = Database(pg_url)
    successor = UsageWriter(db2, settings)
    successor.start()
    await asyncio.wait_for(successor.stop(), 30)
    assert await _count(db2) == 30
    await db2.dispose()


# --- item 3: the journal ------------------------------------------------------------------------


def _die(writer: UsageWriter) -> None:
    """What the kernel does for a killed process: its journal lock goes, nothing else happens."""
    os.close(writer.journal._lock_fd)
    writer.journal._lock_fd = None


async def test_rows_of_a_killed_writer_are_replayed_once(database, settings):
    first = UsageWriter(database, settings)
    for i in range(30):
        first.record(_call(i))
    # Ten rows reach the database but the process dies before it deletes their journal segment.
    flushed = first._calls.take()[:10]
    await first._write(flushed, [])
    _die(first)
    second = UsageWriter(database, settings)
    second.start()
    await second.stop()
    rows = await _rows(database)
    assert [r.prompt_tokens for r in rows] == list(range(30))
    assert not list(second.journal_root.glob("w-*"))


async def test_a_journal_left_by_the_previous_version_is_replayed(database, settings):
    """Rows were journaled as JSON objects, by write(2), before they were arrays in mapped segments: an
    upgrade after a crash keeps them."""
    writer = UsageWriter(database, settings)
    left = writer.journal_root / "w-1-0badf00d"  # as the earlier version left it: lock and one segment
    left.mkdir()
    (left / journals.LOCK).touch()
    (left / "000000000000.jsonl").write_bytes(orjson.dumps(
        {"trace_id": "from-old-version", "protocol": "chat", "model": "m", "status": 200,
         "created_at": "2026-11-20T10:00:00+00:00", "prompt_tokens": 7}, option=orjson.OPT_APPEND_NEWLINE))
    writer.record(_call(1))
    writer.start()
    await writer.stop()
    tokens = {r.trace_id: r.prompt_tokens for r in await _rows(database)}
    assert len(tokens) == 2 and tokens["from-old-version"] == 7
    assert not left.exists()


async def test_a_live_writers_journal_is_not_taken(database, settings):
    first = UsageWriter(database, settings)
    first.record(_call(1))
    second = UsageWriter(database, settings)
    assert [o.path for o in journals.orphans(second.journal_root, second.journal.dir)] == []
    second.start()
    await second.stop()
    assert await _count(database) == 0
    await first.stop()
    assert await _count(database) == 1


async def test_a_torn_last_line_is_skipped(database, settings, caplog):
    first = UsageWriter(database, settings)
    for i in range(3):
        first.record(_call(i))
    segment = first.journal.segments_through(0)[0]
    written = len(segment.read_bytes().rstrip(b"\0"))
    with open(segment, "r+b") as fh:  # what a kill in the middle of copying the fourth row leaves
        fh.seek(written)
        fh.write(b'["cut-he')
    _die(first)
    second = UsageWriter(database, settings)
    second.start()
    await second.stop()
    assert await _count(database) == 3
    assert "partly written row" in caplog.text


async def test_rows_past_a_full_segment_go_on_in_the_next(database, settings, monkeypatch):
    monkeypatch.setattr(journals, "SEGMENT_BYTES", 1024)  # about six rows a segment
    first = UsageWriter(database, settings)
    for i in range(40):
        first.record(_call(i))
    assert len(first.journal.segments_through(first.journal.seal(force=True))) > 5
    _die(first)
    second = UsageWriter(database, settings)
    second.start()
    await second.stop()
    assert [r.prompt_tokens for r in await _rows(database)] == list(range(40))


async def test_a_closed_segment_keeps_only_its_rows_on_disk(database, settings):
    """Segments are allocated whole up front; what a flush closes is cut back to the rows it holds."""
    writer = UsageWriter(database, settings)
    for i in range(3):
        writer.record(_call(i))
    segment = writer.journal.segments_through(0)[0]
    assert segment.stat().st_size == journals.SEGMENT_BYTES
    writer.journal.seal(force=True)
    lines, torn = journals.read_lines(segment)
    assert segment.stat().st_size == writer.journal.bytes == sum(len(line) + 1 for line in lines)
    assert (len(lines), torn) == (3, 0)
    writer.start()
    await writer.stop()
    assert await _count(database) == 3


async def test_a_disk_that_cannot_hold_a_segment_keeps_rows_in_memory(database, settings, monkeypatch, caplog):
    def no_space(fd, offset, length):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(journals.os, "posix_fallocate", no_space)
    writer = UsageWriter(database, settings)
    for i in range(5):
        writer.record(_call(i))
    assert writer.journal.failed and writer.journal.bytes == 0
    assert caplog.text.count("rows are kept in memory only") == 1
    assert list(writer.journal.dir.glob(f"*{journals.SUFFIX}")) == []  # no half-made segment left
    writer.start()
    await writer.stop()
    assert await _count(database) == 5


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_flushes_keep_writing_one_segment_until_it_is_a_minute_old(database, settings):
    """A file created and deleted at every flush costs more than the rows' copies: the open segment
    stays across flushes and goes once it is old and its rows are written."""
    writer = UsageWriter(database, settings)
    clock = writer.journal._clock = _Clock()
    for i in range(3):
        writer.record(_call(i))
        await writer.flush()
    segment = writer.journal.dir / "000000000000.jsonl"
    lines, torn = journals.read_lines(segment)
    assert (len(lines), torn) == (3, 0), "one segment holds the rows of all three flushes"
    clock.now += journals.SEGMENT_SECONDS
    await writer.flush()  # nothing pending: the old segment is closed and, its rows written, deleted
    assert not segment.exists() and writer.journal.bytes == 0
    writer.record(_call(3))
    await writer.flush()
    assert [p.name for p in writer.journal.dir.glob("*.jsonl")] == ["000000000001.jsonl"]
    assert [r.prompt_tokens for r in await _rows(database)] == [0, 1, 2, 3]
    await writer.stop()


async def test_without_posix_fallocate_segments_are_allocated_by_writing(database, settings, monkeypatch):
    """macOS has no posix_fallocate: the segment is filled with zeros instead, and rows still replay."""
    monkeypatch.delattr(journals.os, "posix_fallocate")
    first = UsageWriter(database, settings)
    for i in range(3):
        first.record(_call(i))
    assert first.journal.segments_through(0)[0].stat().st_blocks * 512 >= journals.SEGMENT_BYTES
    _die(first)
    second = UsageWriter(database, settings)
    second.start()
    await second.stop()
    assert [r.prompt_tokens for r in await _rows(database)] == [0, 1, 2]


def _resident_kib(path) -> int | None:
    """This process's resident memory of the mapping of `path` (Linux), else None."""
    try:
        smaps = open("/proc/self/smaps").read()
    except OSError:
        return None
    resident, inside = 0, False
    for line in smaps.splitlines():
        if "-" in line.split(" ", 1)[0] and ":" not in line.split(" ", 1)[0]:
            inside = line.endswith(str(path))
        elif inside and line.startswith("Rss:"):
            resident += int(line.split()[1])
    return resident


async def test_a_segment_s_written_pages_leave_the_process_memory_at_each_flush(database, settings):
    """The open segment is mapped: without this its written pages (up to 1 MiB) stay resident in every
    worker. They stay in the file: a killed writer's rows replay."""
    if _resident_kib("/nonexistent") is None:
        pytest.skip("needs /proc/self/smaps (Linux)")
    first = UsageWriter(database, settings)
    first.journal._clock = _Clock()  # the segment never gets a minute old here
    for i in range(200):  # about 60 KB of rows
        first.record(_call(i, model="m" * 200))
    segment = first.journal.dir / "000000000000.jsonl"
    assert _resident_kib(segment) >= 48
    first.journal.seal()  # what every flush does
    assert _resident_kib(segment) <= 4, "only the page still being written stays"
    first.record(_call(200))
    _die(first)
    second = UsageWriter(database, settings)
    second.start()
    await second.stop()
    assert [r.prompt_tokens for r in await _rows(database)] == list(range(201))
