"""Failover cooldowns shared by every process: each start or early end is announced through Redis.

A cooldown only reorders candidates (a cooling endpoint is still tried last), so
announcing it is enough: no process needs to wait for Redis to plan a call.
Messages travel on the breakers' channel as `cool <endpoint> <ms>` and `warm <endpoint>`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from modelgate.routing.failover import FailoverPlanner
from modelgate.shared.redis_link import RedisLink, RedisUnavailable


class SharedCooldowns:
    def __init__(self, planner: FailoverPlanner, link: RedisLink, channel: str) -> None:
        self.planner = planner
        self.link = link
        self.channel = channel
        self._tasks: set[asyncio.Task[Any]] = set()
        planner.on_change = self._changed

    def _changed(self, endpoint_id: str, seconds: float) -> None:
        message = f"cool {endpoint_id} {int(seconds * 1000)}" if seconds > 0 else f"warm {endpoint_id}"
        task = asyncio.get_running_loop().create_task(self._publish(message))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _publish(self, message: str) -> None:
        try:
            await self.link.run(lambda r: r.publish(self.channel, message))
        except RedisUnavailable:
            pass  # cooldowns stay per instance meanwhile

    def notice(self, message: str) -> bool:
        """Apply another process's announcement; False if the message is not a cooldown."""
        parts = message.split()
        if len(parts) == 3 and parts[0] == "cool":
            self.planner.cool_down(parts[1], int(parts[2]) / 1000, announce=False)
            return True
        if len(parts) == 2 and parts[0] == "warm":
            self.planner.recovered(parts[1], announce=False)
            return True
        return False
