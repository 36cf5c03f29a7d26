"""Output items of converted answers, kept a while so that a client's `item_reference` to one reads back.

The AI SDK's `openai(model)` stores by default (`store` not false) and, on the next step of a tool loop,
sends the assistant's text and reasoning of the step before as `{type: "item_reference", id}`
(@ai-sdk/openai 3.0, convertToOpenAIResponsesInput). A gateway that kept nothing refused every such step
on conversion. The items it produced for a request that did not say `store: false` are kept here, per
process, bounded in bytes and age. With Redis, every process's items are written there as well
(shared/items.py), so a reference reads back whichever worker or instance the next step reaches; a
reference to anything else (an older item, one from before a restart) is still the 400 that says the
gateway keeps no responses.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any, Awaitable, Callable, Iterable, Mapping

import orjson

MAX_BYTES = 16 * 1024 * 1024
MAX_AGE_SECONDS = 3600.0
ENTRY_BYTES = 300  # what keeping one item costs beside its JSON (its id, the map's entry, the objects)


class ItemMemory:
    def __init__(self, max_bytes: int = MAX_BYTES, max_age_seconds: float = MAX_AGE_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_bytes = max_bytes
        self.max_age = max_age_seconds
        self.clock = clock
        self.size = 0
        self._items: OrderedDict[str, tuple[float, bytes]] = OrderedDict()  # oldest first
        # Told of each answer's kept items as (id, JSON): shared/items.SharedItems writes them to Redis.
        self.on_kept: Callable[[list[tuple[str, bytes]]], None] | None = None
        # Reads items other processes kept into this one (SharedItems.load).
        self.fetch: Callable[[list[str]], Awaitable[None]] | None = None

    def remember(self, items: Iterable[Mapping[str, Any]]) -> None:
        now = self.clock()
        kept: list[tuple[str, bytes]] = []
        for item in items:
            item_id = item.get("id")
            if not isinstance(item_id, str):
                continue
            # A copy of orjson's output: its bytes object keeps the 4 KB buffer it was written in.
            data = memoryview(orjson.dumps(item)).tobytes()
            if self._keep(item_id, data, now):
                kept.append((item_id, data))
        self._trim(now)
        if kept and self.on_kept is not None:
            self.on_kept(kept)

    def keep(self, item_id: str, data: bytes, age: float = 0.0) -> None:
        """An item another process gave, `age` seconds ago (shared/items.py)."""
        now = self.clock()
        # Among the newest, though older: recall and holds check each item's own age.
        if age < self.max_age and self._keep(item_id, data, now - age):
            self._trim(now)

    def holds(self, item_id: str) -> bool:
        kept = self._items.get(item_id)
        return kept is not None and self.clock() - kept[0] <= self.max_age

    def recall(self, item_id: str) -> dict[str, Any] | None:
        kept = self._items.get(item_id)
        if kept is None or self.clock() - kept[0] > self.max_age:
            return None
        return orjson.loads(kept[1])

    def _keep(self, item_id: str, data: bytes, at: float) -> bool:
        if len(data) > self.max_bytes // 8:  # one huge answer must not push out every other
            return False
        self._forget(item_id)
        self._items[item_id] = (at, data)
        self.size += len(data) + ENTRY_BYTES
        return True

    def _trim(self, now: float) -> None:
        while self._items and (self.size > self.max_bytes or now - next(iter(self._items.values()))[0] > self.max_age):
            self._forget(next(iter(self._items)))

    def _forget(self, item_id: str) -> None:
        kept = self._items.pop(item_id, None)
        if kept is not None:
            self.size -= len(kept[1]) + ENTRY_BYTES
