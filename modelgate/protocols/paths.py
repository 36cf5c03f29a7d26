"""Where in a request body a refusal points, e.g. `input[3].content[0]` or `messages.3.content.0`.

Validation and decoding visit every item, block and part of an agent's request (hundreds of
them), and only a refused one needs its path as text: formatting it for each element visited
took a third of the Responses validation. So a path is built as a `(parent, key)` pair, which
costs one small tuple, and written out only for the error message.
"""

from __future__ import annotations

from typing import Union

# A root field name, or (the parent path, an object key or an array index).
Path = Union[str, tuple["Path", Union[str, int]]]


def _keys(path: Path) -> list[str | int]:
    keys: list[str | int] = []
    while isinstance(path, tuple):
        path, key = path
        keys.append(key)
    keys.append(path)
    keys.reverse()
    return keys


def dotted(path: Path) -> str:
    """The messages protocol's form: indexes as keys (`messages.3.content.0`)."""
    return ".".join(str(key) for key in _keys(path))


def indexed(path: Path) -> str:
    """The OpenAI protocols' form: indexes in brackets (`input[3].content[0]`)."""
    root, *rest = _keys(path)
    return str(root) + "".join(f"[{key}]" if isinstance(key, int) else f".{key}" for key in rest)
