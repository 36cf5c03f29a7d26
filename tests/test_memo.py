"""Values remembered by the bytes they were made of (protocols/memo.py): tool sets an agent sends again."""

from __future__ import annotations

from modelgate.protocols.memo import ByBytes


class Counting:
    def __init__(self) -> None:
        self.made: list[bytes] = []

    def __call__(self, data: bytes) -> int:
        self.made.append(data)
        return len(self.made)


def test_the_same_bytes_give_what_was_made_of_them_once() -> None:
    memo: ByBytes[int] = ByBytes(4, 1024)
    make = Counting()
    assert memo.get(b"tools-a", make) == 1
    assert memo.get(bytes(bytearray(b"tools-a")), make) == 1  # equal bytes, another object
    assert memo.get(b"tools-b", make) == 2
    assert make.made == [b"tools-a", b"tools-b"]


def test_bytes_alike_in_length_and_sample_are_never_taken_for_one_another() -> None:
    memo: ByBytes[int] = ByBytes(4, 1 << 20)
    make = Counting()
    first = b"a" * 4096
    other = first[:1] + b"b" + first[2:]  # the same length, and the byte that differs is not sampled
    last = first[:-1] + b"!"
    assert memo.get(first, make) == 1
    assert memo.get(other, make) == 2
    assert memo.get(last, make) == 3
    assert memo.get(last, make) == 3
    assert make.made == [first, other, last]


def test_the_least_recently_used_go_first_and_long_ones_are_not_kept() -> None:
    memo: ByBytes[int] = ByBytes(2, 8)
    make = Counting()
    memo.get(b"one", make)
    memo.get(b"two", make)
    memo.get(b"one", make)  # used again: "two" is now the oldest
    memo.get(b"three", make)
    assert len(memo) == 2
    memo.get(b"one", make)
    memo.get(b"two", make)
    assert make.made == [b"one", b"two", b"three", b"two"]
    memo.get(b"longer than eight", make)
    memo.get(b"longer than eight", make)
    assert make.made[-2:] == [b"longer than eight"] * 2
