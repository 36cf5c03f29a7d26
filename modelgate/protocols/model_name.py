"""The response `model` of a pass-through answer, set to the id the client asked for.

Upstreams answer with their own names (a dated snapshot, a deployment); a gateway
model id must answer with itself on every route (docs/decisions.md). Pass-through
bodies are spliced, never re-serialised: an unescaped `"model":` can only be an
object key in JSON text (inside strings a quote is escaped), so a bytes search
finds it; the vendors write the top-level key before any content, so the first
match of a body is the top-level one.
"""

from __future__ import annotations

import re

import orjson

_MODEL_KEY = re.compile(rb'"model"\s*:\s*"(?:[^"\\]|\\.)*"')


def model_field(model: str) -> bytes:
    """`"model":"<id>"`, ready to splice."""
    return b'"model":' + orjson.dumps(model)


def set_model(data: bytes, field: bytes, count: int = 0) -> bytes:
    """`data` with its first `count` (0: all) string `model` keys set to `field`."""
    first = data.find(b'"model"')
    if first < 0:
        return data
    # The usual answer or stream chunk: one compact key with a plain string value, spliced without
    # the regex (1 µs a chunk, more than the rest of a pass-through tap's work on it). `"model":"`
    # is a key: a string value is never followed by a colon.
    if data.startswith(b'"model":"', first):
        end = data.find(b'"', first + 9)
        if end > 0 and data.find(b"\\", first + 9, end) < 0 and (count == 1 or data.find(b'"model"', end) < 0):
            if data.startswith(field, first) and first + len(field) == end + 1:
                return data
            return data[:first] + field + data[end + 1:]
    return _MODEL_KEY.sub(lambda _: field, data, count)
