"""Trace ids: random UUIDs (version 4) that tie a call's response, call-log row and log lines together.

A trace id identifies, it does not authorise, so a fast non-cryptographic
generator is enough: uuid.uuid4() reads the OS random source on every call,
which showed up in the hot path's profile.
"""

from __future__ import annotations

import random

_VERSION_4 = (0x4 << 76) | (0x2 << 62)  # version nibble and RFC 4122 variant bits
_CLEAR = ~((0xF << 76) | (0x3 << 62))


def new_trace_id(getrandbits=random.Random().getrandbits) -> str:  # noqa: B008 - one generator per process
    value = "%032x" % ((getrandbits(128) & _CLEAR) | _VERSION_4)
    return f"{value[:8]}-{value[8:12]}-{value[12:16]}-{value[16:20]}-{value[20:]}"
