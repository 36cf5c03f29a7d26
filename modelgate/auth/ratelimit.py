"""Per-key token buckets (spec 8): in memory per process, or shared through Redis."""

from __future__ import annotations

import time
from typing import Callable

from modelgate.config import RateLimitSettings


class TokenBucketLimiter:
    """One bucket per key id; lazily refilled on each take, so idle keys cost nothing."""

    __slots__ = ("_defaults", "_buckets", "_clock")

    def __init__(self, defaults: RateLimitSettings, clock: Callable[[], float] = time.monotonic) -> None:
        self._defaults = defaults
        self._buckets: dict[int, list[float]] = {}  # key id -> [tokens, last refill time]
        self._clock = clock

    def take(self, key_id: int, capacity: float | None, refill_per_second: float | None) -> float:
        """Takes one token. Returns 0 when allowed, else the seconds until a token is available."""
        capacity = capacity if capacity is not None else self._defaults.capacity
        rate = refill_per_second if refill_per_second is not None else self._defaults.refill_per_second
        now = self._clock()
        bucket = self._buckets.get(key_id)
        if bucket is None:
            self._buckets[key_id] = [capacity - 1.0, now]
            return 0.0
        tokens = min(capacity, bucket[0] + (now - bucket[1]) * rate)
        bucket[1] = now
        if tokens >= 1.0:
            bucket[0] = tokens - 1.0
            return 0.0
        bucket[0] = tokens
        return (1.0 - tokens) / rate if rate > 0 else 60.0
