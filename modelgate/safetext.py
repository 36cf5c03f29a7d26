"""Client-supplied text made safe to log, record or reflect: control characters escaped, length bounded."""

from __future__ import annotations

ELLIPSIS = "…"


def escape_controls(text: str) -> str:
    """Non-printable characters (newlines, NUL, other controls, lone surrogates) as Python escapes.

    Printable non-ASCII text is kept as is. `isprintable()` is the fast path: most text is clean.
    """
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape", "backslashreplace").decode("ascii")
                   for c in text)


def shown(text: str, limit: int = 128) -> str:
    """`text` escaped and cut to at most `limit` characters (an ellipsis marks a cut)."""
    if len(text) <= limit and text.isprintable():
        return text
    safe = escape_controls(text[: limit * 4] if len(text) > limit * 4 else text)
    return safe if len(safe) <= limit else safe[: limit - 1] + ELLIPSIS
