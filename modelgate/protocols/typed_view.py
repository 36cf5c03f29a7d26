"""Typed views of client bodies: validation of the usual request without a dict tree.

Decoding an agent's 150 KB request into Python objects, checking it field by field and
freeing the tree was about half of a pass-through call's CPU. A codec's view declares,
as msgspec Structs, every field of the requests clients usually send, typed as tightly
as the codec's `validate` checks them, with free-form JSON the gateway never reads (tool
schemas, metadata) kept as `msgspec.Raw`. msgspec checks those types in C while it
decodes; the view then checks the few rules a type cannot say (e.g. a tool message has a
`tool_call_id`). Structs are not tracked by the cyclic GC (`gc=False`).

The view is a fast path only: it accepts a body only when the codec's `validate` would
accept it with the same result. Anything it does not know (an unknown field, another
type, invalid JSON, a rule it cannot confirm) returns None, and the caller takes the
codec's own path, which gives today's errors word for word. What keeps this exact:

- unknown fields are refused (`forbid_unknown_fields`), so every byte of the body was
  either checked against a type or is a `Raw` piece checked by `sound` (or
  `sound_definitions`, which remembers tool schemas it checked), or a tools array read by
  orjson and checked by the codec's own rules (`checked_definitions`);
- msgspec reads JSON as orjson does (syntax, escapes, duplicate keys: the last wins),
  except inside `Raw` pieces, where it checks neither UTF-8 nor number range, and for
  integers beyond 64 bits, which orjson reads as floats: `sound` and `Int` cover those;
- the depth limit (inference.MAX_JSON_DEPTH) can only be reached inside a `Raw` piece.

One difference is left: of a key repeated within one object, orjson and msgspec keep the
last value, and msgspec skips an earlier `Raw` value unread, so an earlier value with
invalid UTF-8 or a number orjson refuses as infinite is forwarded instead of refused.
"""

from __future__ import annotations

from typing import Annotated, Any, Callable, TypeVar, Union, get_args

import msgspec
import orjson

from modelgate.protocols.body import NOT_DECODED, ClientBody
from modelgate.protocols.memo import ByBytes

T = TypeVar("T")
# A top-level field: absent (UNSET, so that the partial body holds exactly the fields sent), null, or a T.
Opt = Union[T, None, msgspec.UnsetType]

# Integers that orjson reads as int (beyond int64 it may read a float, which validate refuses).
Int = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
PositiveInt = Annotated[int, msgspec.Meta(ge=1, le=2**63 - 1)]

# Structs nest at most this deep around a Raw piece: a piece with fewer opening brackets than
# the depth limit less this cannot make the body too deep (a bracket inside a string counts too).
_STRUCT_LEVELS = 10
_MAX_PIECE_BRACKETS = 254 - _STRUCT_LEVELS  # inference.MAX_JSON_DEPTH, not imported: gateway → protocols
_LONG_DIGITS = b"0" * 200
# Digits become "0", "E" becomes "e" and "[" becomes "{", "+" goes: a number orjson refuses as
# infinite then shows as "0e" and a 3-digit exponent, or as 200 digits in a row (a shorter one
# with a 2-digit exponent cannot exceed 1.8e308), and one count finds the opening brackets.
_SHAPES = bytes.maketrans(b"123456789E[", b"000000000e{")


class View(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A JSON object of a client request, every field declared."""


def sound(pieces: list[msgspec.Raw]) -> bool:
    """Whether orjson reads these Raw pieces (msgspec has checked their syntax) and the body
    stays within the depth limit with them. May say no to sound pieces, never yes to a bad one."""
    return not pieces or _sound(b"\x00".join(pieces))  # a byte no JSON text holds: no match across pieces


# Whether tool definitions passed a check, by the check and their bytes (protocols/memo.py): agents send
# the same ones on every turn. Bounded: 16 sets of 128 KB for each check.
_CHECKED_DEFINITIONS: dict[object, ByBytes[bool]] = {}
_DEFINITIONS_KEPT, _DEFINITIONS_BYTES = 16, 128 * 1024


def _remembered(check: object, data: bytes, accept: Callable[[bytes], bool]) -> bool:
    memo = _CHECKED_DEFINITIONS.get(check)
    if memo is None:
        memo = _CHECKED_DEFINITIONS[check] = ByBytes(_DEFINITIONS_KEPT, _DEFINITIONS_BYTES)
    return memo.get(data, accept)


def sound_definitions(pieces: list[msgspec.Raw]) -> bool:
    """`sound` for the pieces of tool definitions (schemas), remembered while they come again."""
    return not pieces or _remembered(sound, b"\x00".join(pieces), _sound)


def checked_definitions(piece: msgspec.Raw, check: Callable[[Any], object]) -> bool:
    """Whether a top-level `Raw` array of tool definitions is read by orjson as the codec's own path
    reads it (within the depth limit) and passes that path's `check` (raising GatewayError);
    remembered while the same bytes come again. Tools of every type validate accepts (the vendors'
    own, with fields of their own) take the typed view so, with no rule restated in types. null is
    no tools, as validate reads it."""

    def accept(data: bytes) -> bool:
        try:
            tools = orjson.loads(data)
            orjson.dumps({"tools": tools})  # the depth check of inference.parse_json, at the same depth
            if tools is not None:
                check(tools)
        except Exception:  # GatewayError, orjson's errors; anything else too: the codec's own path decides
            return False
        return True

    return _remembered(check, bytes(piece), accept)


def _sound(data: bytes) -> bool:
    if not data.isascii():
        try:
            data.decode()
        except UnicodeDecodeError:
            return False
    shapes = data.translate(_SHAPES, b"+")
    # A number orjson would refuse as infinite, or letters and digits in a string that only look like
    # one (hex ids and hashes such as "72e61340", common in tool inputs and metadata): orjson decides.
    if (b"0e000" in shapes or _LONG_DIGITS in shapes) and not _read_by_orjson(data):
        return False
    return shapes.count(b"{") <= _MAX_PIECE_BRACKETS or all(
        piece.count(b"{") <= _MAX_PIECE_BRACKETS for piece in shapes.split(b"\x00"))


def _read_by_orjson(data: bytes) -> bool:
    try:
        for piece in data.split(b"\x00"):
            orjson.loads(piece)
    except orjson.JSONDecodeError:
        return False
    return True


def raw_fields(view: type[View], but: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The top-level fields a view keeps as JSON (`Raw`), those in `but` aside: derived from the
    declarations, so no field declared `Raw` can miss its `sound` check."""
    return tuple(field.name for field in msgspec.structs.fields(view)
                 if msgspec.Raw in get_args(field.type) and field.name not in but)


def present(view: View, names: tuple[str, ...]) -> list[Any]:
    """The values of the named fields the body has (its `Raw` pieces, for `sound`)."""
    return [value for value in (getattr(view, name) for name in names) if value is not msgspec.UNSET]


def object_or_null(piece: msgspec.Raw) -> bool:
    """Whether a Raw piece holds a JSON object or null (msgspec strips the whitespace around it)."""
    return memoryview(piece)[:1] in (b"{", b"n")


def is_object(piece: msgspec.Raw) -> bool:
    """Whether a Raw piece holds a JSON object."""
    return memoryview(piece)[:1] == b"{"


def value(piece: msgspec.Raw) -> Any:
    """The Python value of a Raw piece, exactly as orjson reads it."""
    return orjson.loads(bytes(piece))


def decoder(view: type[View]) -> Callable[[bytes], Any]:
    """The view's decode function: the view, or None where msgspec refuses the body."""
    decode = msgspec.json.Decoder(view).decode

    def read(raw: bytes) -> Any:
        try:
            return decode(raw)
        # DecodeError: also a ValidationError; RecursionError: nested deeper than the stack allows
        # (orjson's own limit, 1024 levels, is deeper still: the codec's path refuses it too).
        except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
            return None

    return read


_EXACT = (str, bool, int, type(None))  # what msgspec decodes as orjson does (ints within Int)


def partial_body(view: View, raw: bytes, read: dict[str, Any] | None = None) -> ClientBody:
    """The ClientBody of a body the view accepted: its fields, with the values of `read` (read
    exactly as orjson reads them) and those msgspec decodes exactly as orjson; the others
    (the conversation, the tools: pass-through only forwards them) are NOT_DECODED.

    A partial body is never edited: a body validate would rewrite is not accepted by the view."""
    fields = {}
    for name in view.__struct_fields__:
        got = getattr(view, name)
        if got is msgspec.UNSET:
            continue
        if read and name in read:
            got = read[name]
        elif type(got) not in _EXACT:
            got = NOT_DECODED
        fields[name] = got
    return ClientBody(fields, raw, partial=True)
