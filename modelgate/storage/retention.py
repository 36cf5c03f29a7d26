"""Retention: call-log and resilience-event rows older than `usage.retention_days` are deleted in
batches by a background job.

`RetentionJob.run_once` is one complete pass and is safe to run from several processes at once
(each batch deletes whatever old rows it finds); a once-per-deployment lease can wrap it.
Batches keep each transaction short, so the usage writer and the management API never wait long
for a lock, and the created_at indexes find the old rows without a scan.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from sqlalchemy import delete, select

from modelgate.config import Settings
from modelgate.storage.db import Database
from modelgate.storage.models import CallLog, ResilienceEvent

log = logging.getLogger(__name__)

TABLES = (CallLog, ResilienceEvent)


def _now() -> datetime:
    return datetime.now(UTC)


class RetentionJob:
    def __init__(self, db: Database, settings: Settings, clock: Callable[[], datetime] = _now) -> None:
        self.db = db
        self.days = settings.usage.retention_days
        self.batch = max(1, settings.usage.retention_batch_rows)
        self.interval = settings.usage.retention_interval_seconds
        self.clock = clock

    def cutoff(self) -> datetime:
        cutoff = self.clock().astimezone(UTC) - timedelta(days=self.days)
        # SQLite keeps the UTC time without its offset: compare like with like.
        return cutoff.replace(tzinfo=None) if self.db.is_sqlite else cutoff

    async def run_once(self) -> dict[str, int]:
        """Delete every expired row, batch by batch; returns the rows deleted per table."""
        if self.days <= 0:
            return {}
        cutoff = self.cutoff()
        deleted: dict[str, int] = {}
        for record in TABLES:
            total = 0
            while True:
                oldest = select(record.id).where(record.created_at < cutoff).limit(self.batch)
                async with self.db.engine.begin() as conn:
                    result = await conn.execute(delete(record).where(record.id.in_(oldest.scalar_subquery())))
                total += result.rowcount
                if result.rowcount < self.batch:
                    break
                await asyncio.sleep(0)  # let other work in between batches
            deleted[record.__tablename__] = total
        if any(deleted.values()):
            log.info("retention: deleted %s (older than %d days)",
                     ", ".join(f"{n} {t} rows" for t, n in deleted.items()), self.days)
        return deleted

    async def run_forever(self, run: Callable[[], object] | None = None) -> None:
        """Every `usage.retention_interval_seconds`; `run` (default `run_once`) may wrap it in a lease."""
        step = run or self.run_once
        while True:
            try:
                await step()  # type: ignore[misc]
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("retention: a pass failed; the next one retries")
            await asyncio.sleep(self.interval)
