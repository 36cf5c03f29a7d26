"""Scheduled work (the model probe, retention) runs once per deployment, not once per worker.

Time is cut into slots of the job's period; the first process to wake in a
slot takes that slot's lease in Redis (SET NX with an expiry) and runs the
job, every other process skips it. A process that dies mid-run needs no
clean-up: the next slot is free anyway. Without Redis every process runs its
own schedule (the start-up warning about several workers says so); while a
configured Redis is unreachable the pass is skipped rather than run by every
process at once.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from typing import Callable

from modelgate.shared.redis_link import RedisLink, RedisUnavailable

log = logging.getLogger("modelgate.schedule")


class Schedule:
    def __init__(self, link: RedisLink | None, wall_clock: Callable[[], float] = time.time) -> None:
        self.link = link
        self.wall_clock = wall_clock
        self.owner = f"{socket.gethostname()}:{os.getpid()}"

    async def runs_here(self, job: str, period_seconds: float) -> bool:
        """Whether this process runs `job` in the current slot of `period_seconds`."""
        if self.link is None:
            return True
        slot = int(self.wall_clock() // period_seconds)
        key = self.link.key("lease", job, slot)
        ttl_ms = max(1, int(period_seconds * 2000))
        try:
            taken = await self.link.run(lambda r: r.set(key, self.owner, nx=True, px=ttl_ms))
        except RedisUnavailable:
            log.info("%s skipped in this period: Redis cannot say which process runs it", job)
            return False
        return bool(taken)
