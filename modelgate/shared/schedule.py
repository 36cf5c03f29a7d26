"""Scheduled work (the model probe, retention) runs once per deployment, not once per worker.

With Redis, time is cut into slots of the job's period; the first process to
wake in a slot takes that slot's lease (SET NX with an expiry) and runs the
job, every other process skips it. A process that dies mid-run needs no
clean-up: the next slot is free anyway. While a configured Redis is
unreachable the pass is skipped rather than run by every process at once.

Without Redis, on PostgreSQL, one process leads: it holds a session advisory
lock (`pg_try_advisory_lock`) on a connection of its own and runs every job;
the others try to take the lock at each of their passes, so when the leader
exits (its connection closes and the lock goes with it) the next process to
wake takes over. On SQLite a single instance is assumed: every process runs
its own schedule (several workers on one SQLite file are warned about at start).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import socket
import time
from typing import Any, Callable

from sqlalchemy import func, select

from modelgate.shared.redis_link import RedisLink, RedisUnavailable
from modelgate.storage.db import Database

log = logging.getLogger("modelgate.schedule")

# One advisory lock per database: a deployment is one database.
LOCK_KEY = int.from_bytes(hashlib.sha256(b"modelgate scheduled work").digest()[:8], "big", signed=True)


class Schedule:
    def __init__(self, link: RedisLink | None, db: Database | None = None,
                 wall_clock: Callable[[], float] = time.time, check_seconds: float = 5.0) -> None:
        self.link = link
        self.db = db if db is not None and not db.is_sqlite else None
        self.wall_clock = wall_clock
        self.check_seconds = check_seconds  # the leader's connection must answer within this
        self.owner = f"{socket.gethostname()}:{os.getpid()}"
        self._leader: Any = None  # the connection holding the advisory lock, while this process leads
        self._lock = asyncio.Lock()

    @property
    def leading(self) -> bool:
        return self._leader is not None

    async def runs_here(self, job: str, period_seconds: float) -> bool:
        """Whether this process runs `job` in the current slot of `period_seconds`."""
        if self.link is None:
            return await self._lead() if self.db is not None else True
        slot = int(self.wall_clock() // period_seconds)
        key = self.link.key("lease", job, slot)
        ttl_ms = max(1, int(period_seconds * 2000))
        try:
            taken = await self.link.run(lambda r: r.set(key, self.owner, nx=True, px=ttl_ms))
        except RedisUnavailable:
            log.info("%s skipped in this period: Redis cannot say which process runs it", job)
            return False
        return bool(taken)

    async def _lead(self) -> bool:
        assert self.db is not None
        async with self._lock:  # the probe and retention may ask at once
            if self._leader is not None:
                try:  # still holding it: the lock lives as long as this connection answers
                    async with asyncio.timeout(self.check_seconds):
                        await self._leader.execute(select(1))
                        await self._leader.commit()  # never left idle in a transaction
                    return True
                except Exception as exc:
                    log.warning("lost the scheduled-work lock (%s); another process may take it",
                                type(exc).__name__)
                    await self._drop()
            conn = None
            try:
                async with asyncio.timeout(self.check_seconds):
                    conn = await self.db.engine.connect()
                    taken = (await conn.execute(select(func.pg_try_advisory_lock(LOCK_KEY)))).scalar()
                    await conn.commit()
            except Exception as exc:
                log.info("scheduled work skipped: the database cannot say which process runs it (%s)",
                         type(exc).__name__)
                if conn is not None:
                    await self._close(conn)
                return False
            if not taken:
                await conn.close()  # holds no lock: back to the pool
                return False
            self._leader = conn
            log.info("this process (%s) runs the scheduled work of the deployment", self.owner)
            return True

    async def _drop(self) -> None:
        conn, self._leader = self._leader, None
        if conn is not None:
            await self._close(conn)

    @staticmethod
    async def _close(conn: Any) -> None:
        try:
            async with asyncio.timeout(2.0):
                await conn.invalidate()  # never back to the pool: the session may still hold the lock
                await conn.close()
        except Exception:
            pass

    async def close(self) -> None:
        """Give the lock up (closing its connection releases it)."""
        async with self._lock:
            await self._drop()
