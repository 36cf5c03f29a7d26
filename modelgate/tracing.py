"""Trace ids: UUIDs that tie a call's response, call-log row and log lines together.

They are version 7 UUIDs (RFC 9562): a millisecond timestamp, then random
bits. Being time-ordered, a new id lands at the end of the call log's
trace-id index instead of at a random page; with random (version 4) ids that
index insert was the largest part of writing a call-log row. A trace id
identifies and does not authorise, so a fast non-cryptographic generator is
enough (uuid.uuid4 reads the OS random source on every call).
"""

from __future__ import annotations

import random
import time
from contextvars import ContextVar

# The trace id of the request the current task serves; JSON log lines carry it.
current_trace_id: ContextVar[str | None] = ContextVar("current_trace_id", default=None)

_VERSION_7 = (0x7 << 76) | (0x2 << 62)  # version nibble and RFC 9562 variant bits
_getrandbits = random.Random().getrandbits


def new_trace_id() -> str:
    value = "%032x" % (
        ((time.time_ns() // 1_000_000) << 80) | _VERSION_7 | (_getrandbits(12) << 64) | _getrandbits(62)
    )
    return f"{value[:8]}-{value[8:12]}-{value[12:16]}-{value[16:20]}-{value[20:]}"
