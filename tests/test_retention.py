"""Retention of the call log and resilience events, and pages that do not count whole tables (issue 12 item 4)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from sqlalchemy import func, insert, select

from modelgate.services import views
from modelgate.storage.models import CallLog, ResilienceEvent
from modelgate.storage.retention import RetentionJob

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def _call(age_days: float) -> dict:
    return {"trace_id": str(uuid.uuid4()), "created_at": NOW - timedelta(days=age_days), "protocol": "chat",
            "model": f"age-{age_days}", "status": 200, "stream": False, "latency_ms": 1.0, "attempts": 1,
            "prompt_tokens": 1, "completion_tokens": 1}


async def _count(db, record) -> int:
    async with db.session() as s:
        return await s.scalar(select(func.count()).select_from(record))


async def test_rows_older_than_the_retention_are_deleted_in_batches(database, settings):
    settings.usage.retention_days = 90
    settings.usage.retention_batch_rows = 3
    async with database.session() as s, s.begin():
        await s.execute(insert(CallLog), [_call(91 + i) for i in range(10)] + [_call(89), _call(1), _call(0)])
        await s.execute(insert(ResilienceEvent), [
            {"event_type": "FAILOVER", "created_at": NOW - timedelta(days=d), "detail": ""} for d in (200, 95, 10)])
    job = RetentionJob(database, settings, clock=lambda: NOW)
    assert await job.run_once() == {"call_log": 10, "resilience_events": 2}
    async with database.session() as s:
        kept = sorted((await s.scalars(select(CallLog.model))).all())
    assert kept == ["age-0", "age-1", "age-89"]
    assert await _count(database, ResilienceEvent) == 1
    assert await job.run_once() == {"call_log": 0, "resilience_events": 0}


async def test_retention_zero_keeps_everything(database, settings):
    settings.usage.retention_days = 0
    async with database.session() as s, s.begin():
        await s.execute(insert(CallLog), [_call(4000)])
    assert await RetentionJob(database, settings, clock=lambda: NOW).run_once() == {}
    assert await _count(database, CallLog) == 1


async def test_pages_stop_counting_at_the_cap_and_say_whether_more_follow(services, database, monkeypatch):
    monkeypatch.setattr(views, "COUNT_CAP", 10)
    async with database.session() as s, s.begin():
        await s.execute(insert(CallLog), [_call(i / 1000) for i in range(25)])
    first = await services.call_log.query(limit=10)
    assert (first.total, first.total_exact, first.has_more, len(first.items)) == (10, False, True, 10)
    last = await services.call_log.query(limit=10, offset=20)
    assert (last.has_more, len(last.items)) == (False, 5)
    few = await services.call_log.query(limit=10, model="age-0.0")
    assert (few.total, few.total_exact, few.has_more) == (1, True, False)
