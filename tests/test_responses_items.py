"""The converted answers' items kept for `item_reference`s (protocols/responses/items.py): bounded in bytes
and in age, so that memory stays flat however many answers a process gives."""

from __future__ import annotations

import orjson

from modelgate.protocols.responses.items import ENTRY_BYTES, ItemMemory


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def message(item_id: str, text: str) -> dict:
    return {"type": "message", "id": item_id, "role": "assistant", "content": [{"type": "output_text", "text": text}]}


def test_an_item_reads_back_until_it_is_too_old():
    clock = Clock()
    memory = ItemMemory(max_bytes=10_000, max_age_seconds=60, clock=clock)
    memory.remember([message("msg_1", "hello"), {"type": "reasoning", "summary": []}])  # no id: nothing to keep
    assert memory.recall("msg_1") == message("msg_1", "hello")
    clock.now += 61
    assert memory.recall("msg_1") is None
    memory.remember([message("msg_2", "later")])  # the old one leaves memory
    assert memory.size == len(orjson.dumps(message("msg_2", "later"))) + ENTRY_BYTES


def test_the_oldest_items_leave_once_the_bytes_are_spent():
    memory = ItemMemory(max_bytes=8_000, max_age_seconds=3600, clock=Clock())
    for i in range(100):
        memory.remember([message(f"msg_{i}", "x" * 100)])
    assert memory.size <= 8_000  # each item counted with what keeping it costs beside its bytes
    assert memory.recall("msg_99") is not None and memory.recall("msg_0") is None
    memory.remember([message("huge", "x" * 1_200)])  # over an eighth of the bound: not kept
    assert memory.recall("huge") is None and memory.recall("msg_99") is not None


def test_an_item_another_process_kept_reads_back_for_what_is_left_of_its_hour():
    clock = Clock()
    memory = ItemMemory(max_bytes=10_000, max_age_seconds=60, clock=clock)
    written: list[list[tuple[str, bytes]]] = []
    memory.on_kept = written.append
    memory.remember([message("msg_1", "hello")])
    assert written == [[("msg_1", orjson.dumps(message("msg_1", "hello")))]]  # what shared/items.py writes
    memory.keep("msg_2", orjson.dumps(message("msg_2", "there")), age=50)
    memory.keep("msg_3", orjson.dumps(message("msg_3", "gone")), age=61)  # older than the hour: not kept
    assert memory.holds("msg_2") and memory.recall("msg_2") == message("msg_2", "there")
    assert not memory.holds("msg_3") and written == written[:1], "an item read back is not written again"
    clock.now += 11
    assert not memory.holds("msg_2") and memory.holds("msg_1")


async def test_one_request_reads_at_most_a_bounded_number_of_items_from_redis():
    from modelgate.config import Settings
    from modelgate.shared.items import MAX_READ, SharedItems
    from modelgate.shared.redis_link import RedisLink

    commands: list[tuple[str, str]] = []

    class Pipeline:
        def get(self, key: str) -> None:
            commands.append(("get", key))

        def pttl(self, key: str) -> None:
            commands.append(("pttl", key))

        async def execute(self) -> list:
            return [None] * len(commands)

    class Client:
        def pipeline(self, transaction: bool = True) -> Pipeline:
            return Pipeline()

    memory = ItemMemory()
    SharedItems(memory, RedisLink(Settings(redis_url="redis://unused", redis_prefix="p:"), client=Client()))
    assert memory.fetch is not None
    await memory.fetch([f"msg_{i}" for i in range(MAX_READ + 500)] + ["msg_0"] * 10)
    assert len(commands) == 2 * MAX_READ and commands[0] == ("get", "p:item:msg_0")
