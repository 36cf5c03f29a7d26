"""The Responses item memory shared by every process: each converted answer's kept items are written
to Redis too, and a request that refers to an item this process does not hold reads it from there.

A client's next step need not reach the worker that answered the one before: its connection may have
been closed while the agent ran a tool (uvicorn closes idle connections after 5 s), and several
workers or instances share its new one. Writes go off the request path (the client reads the answer
first, then runs its tool, so they land before its next step); reads happen only for a converted
request whose references this process lacks. With Redis away, each process keeps its own, as without it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import orjson

from modelgate.protocols.responses.items import ItemMemory
from modelgate.shared.redis_link import RedisLink, RedisUnavailable

log = logging.getLogger("modelgate.redis")

MAX_WRITES_IN_FLIGHT = 256  # beyond, an answer's items stay in this process (Redis is too slow to keep up)
# The most references one request reads from Redis (a long AI SDK loop refers to each earlier step's text and
# reasoning: hundreds); the rest are refused as references to items nobody holds. One body must not become
# an unbounded pipeline.
MAX_READ = 1000


class SharedItems:
    def __init__(self, memory: ItemMemory, link: RedisLink) -> None:
        self.memory = memory
        self.link = link
        self._writes: set[asyncio.Task[Any]] = set()
        memory.on_kept = self._kept
        memory.fetch = self.load

    def _kept(self, items: list[tuple[str, bytes]]) -> None:
        if not self.link.up or len(self._writes) >= MAX_WRITES_IN_FLIGHT:
            return
        task = asyncio.get_running_loop().create_task(self._write(items))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def _write(self, items: list[tuple[str, bytes]]) -> None:
        lifetime_ms = int(self.memory.max_age * 1000)

        async def write(client: Any) -> Any:
            pipe = client.pipeline(transaction=False)
            for item_id, data in items:
                pipe.set(self.link.key("item", item_id), data, px=lifetime_ms)
            return await pipe.execute()

        try:
            await self.link.run(write)
        except RedisUnavailable:
            pass  # kept in this process only meanwhile

    async def load(self, ids: list[str]) -> None:
        """Read the items of `ids` that another process kept into this one's memory."""
        ids = list(dict.fromkeys(ids))[:MAX_READ]

        async def read(client: Any) -> Any:
            pipe = client.pipeline(transaction=False)
            for item_id in ids:
                key = self.link.key("item", item_id)
                pipe.get(key)
                pipe.pttl(key)
            return await pipe.execute()

        try:
            found = await self.link.run(read)
        except RedisUnavailable:
            return  # the reference is refused as one to an item nobody holds
        for item_id, data, left_ms in zip(ids, found[::2], found[1::2]):
            if data is None or not _an_item(item_id, data):
                continue
            self.memory.keep(item_id, data, age=self.memory.max_age - max(left_ms, 0) / 1000)

    async def close(self) -> None:
        if self._writes:  # an answer's items just given: written before the process ends
            await asyncio.wait(set(self._writes), timeout=self.link.settings.redis_timeout_seconds)


def _an_item(item_id: str, data: bytes) -> bool:
    """Whether Redis gave back what a process wrote: an item object with its type."""
    try:
        item = orjson.loads(data)
    except orjson.JSONDecodeError:
        item = None
    if isinstance(item, dict) and isinstance(item.get("type"), str):
        return True
    log.warning("Redis holds an unreadable Responses item %r: ignored", item_id[:100])
    return False
