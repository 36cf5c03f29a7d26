"""A client's JSON body that remembers its own bytes, so pass-through can forward them.

Re-serialising an agent's 100 KB conversation to change one field costs more than the
rest of a pass-through call. `ClientBody` is the parsed top-level object (a dict, so the
codecs read it as before) plus the bytes it came from and its top-level values as
received. `forward` gives the body to send upstream: the client's own bytes when the
gateway changed nothing, those bytes with new top-level fields spliced in before the
closing brace when it only added fields, and otherwise (a field rewritten, e.g. the model
id of a channel serving another upstream name) the top-level object rebuilt from the
client's bytes of each field it kept and the new values of the others.

The rule that keeps this exact: the gateway changes a body only by assigning top-level
fields (never by editing nested values in place), so comparing the top-level values
with those received tells what changed.

A body read through a codec's typed view (protocols/typed_view.py) is partial: its large
fields (the conversation, the tools) hold `NOT_DECODED`, since pass-through only forwards
them. `whole` decodes the rest on the first need (conversion). A partial body is never
edited (only a rewritten body is, which the typed views leave to the codec's own path).

A converted call lets a whole body's tree go once it has built its upstream request (`shed`): while
the upstream works it holds the bytes and what the codec's answer reads (`answer_context`), and `whole`
decodes the bytes again for a retry or a failover. Freed at once, the tree is still in the CPU's
caches; freed after the upstream's answer, a 150 KB agent conversation's tree and IR took 0.24 ms
instead of 0.035, about a quarter of the conversion's CPU (docs/decisions.md, "Pass-through body").

A forwarded body is assembled by one join of its pieces (views of the client's bytes where they are
kept): concatenating them step by step copied a 150 KB body three or four times, which cost more than
the decode that finds the pieces (a renamed model: 138 → 55 µs in process).
"""

from __future__ import annotations

from typing import Any, Mapping

import msgspec
import orjson

_MISSING = object()


class _NotDecoded:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NOT_DECODED"


NOT_DECODED: Any = _NotDecoded()  # a field of a partial body that was validated but not decoded


class _Omit:
    __slots__ = ()

    def __repr__(self) -> str:
        return "OMIT"


OMIT: Any = _Omit()  # a change to `forward` that leaves the field out


class ClientBody(dict):
    __slots__ = ("raw", "received", "partial", "_whole")

    def __init__(self, parsed: dict[str, Any], raw: bytes | None, partial: bool = False) -> None:
        super().__init__(parsed)
        self.raw = raw
        self.received = parsed  # the parse result itself: nothing else holds or changes it
        self.partial = partial
        # A partial body's fields decoded (never the body itself: a cycle would leave the tree
        # to the cyclic garbage collector instead of freeing it when the call ends).
        self._whole: ClientBody | None = None


def whole(body: Mapping[str, Any]) -> Any:
    """`body` with every field decoded (a partial body's are decoded from its bytes once)."""
    if not isinstance(body, ClientBody) or not body.partial:
        return body
    if body._whole is None:
        raw = body.raw
        assert raw is not None, "a partial body keeps its bytes"
        body._whole = ClientBody(orjson.loads(raw), raw)
    return body._whole


def shed(body: Mapping[str, Any]) -> Mapping[str, Any]:
    """A partial body of a whole one: its bytes, its top-level arrays NOT_DECODED (the conversation, the
    tools, the system blocks: the bulk of every protocol's body), the other values as they are (model,
    stream, and objects such as stream_options, which the stream tap and a retry's request read).
    `body` itself when it is partial or has no bytes, or when validate rewrote one of its fields: its
    bytes no longer say what it holds."""
    if not isinstance(body, ClientBody) or body.partial or body.raw is None:
        return body
    received = body.received
    if len(body) != len(received) or len(_kept(body, body)) != len(received):
        return body
    fields = {name: NOT_DECODED if type(value) is list else value for name, value in received.items()}
    return ClientBody(fields, body.raw, partial=True)


def forward(body: Mapping[str, Any], changes: Mapping[str, Any]) -> bytes:
    """The JSON bytes of `body` with the top-level `changes` applied (a field changed to OMIT is left out)."""
    forwarded = {**body, **changes}
    if any(value is OMIT for value in changes.values()):
        forwarded = {name: value for name, value in forwarded.items() if value is not OMIT}
    if not isinstance(body, ClientBody) or body.raw is None:
        return orjson.dumps(forwarded)
    kept = _kept(body, forwarded)
    if len(kept) == len(body.received):
        spliced = _splice(body.raw, {name: value for name, value in forwarded.items() if name not in kept})
        if spliced is not None:
            return spliced
    return _rebuilt(body.raw, forwarded, kept)


def _kept(body: ClientBody, values: Mapping[str, Any]) -> set[str]:
    """The top-level fields received whose value in `values` is still the one received."""
    return {name for name, old in body.received.items()
            if (value := values.get(name, _MISSING)) is old or (type(value) is type(old) and value == old)}


# A JSON object's top-level values as sent, checked but not built as objects (msgspec.DecodeError otherwise).
top_level = msgspec.json.Decoder(dict[str, msgspec.Raw]).decode


def _rebuilt(raw: bytes, forwarded: dict[str, Any], kept: set[str]) -> bytes:
    """The top-level object again: the fields the gateway kept as the client's own bytes (a body
    read through a typed view has no other form of them), the others serialised."""
    sent = top_level(raw)  # keys in orjson's order: first appearance, the last value of a repeated one
    parts: list[Any] = []
    for name, piece in sent.items():
        if name in forwarded:
            parts += (b",", orjson.dumps(name), b":", piece if name in kept else orjson.dumps(forwarded[name]))
    for name, value in forwarded.items():
        if name not in sent:
            parts += (b",", orjson.dumps(name), b":", orjson.dumps(value))
    if not parts:
        return b"{}"
    parts[0] = b"{"  # in place of the first field's comma
    parts.append(b"}")
    return b"".join(parts)


_WHITESPACE = b" \t\r\n"


def _end_of_text(raw: bytes, end: int) -> int:
    """Where the JSON whitespace that ends at `end` begins."""
    while end and raw[end - 1] in _WHITESPACE:
        end -= 1
    return end


def _splice(raw: bytes, added: dict[str, Any]) -> bytes | None:
    if not added:
        return raw
    end = _end_of_text(raw, len(raw))
    if not end or raw[end - 1] != ord("}"):
        return None
    end = _end_of_text(raw, end - 1)
    comma = b"" if end and raw[end - 1] == ord("{") else b","
    return b"".join((memoryview(raw)[:end], comma, orjson.dumps(added)[1:-1], b"}"))
