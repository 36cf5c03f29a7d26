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
    return _MODEL_KEY.sub(lambda _: field, data, count)
