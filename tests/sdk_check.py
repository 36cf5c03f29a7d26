"""Checks a request body against an official SDK's request types, independently of our adapters.

pydantic models (google-genai, mistralai, ollama, cohere) are validated by pydantic; unknown
fields, which some SDK models ignore or keep silently, are found by `unknown_fields`. The
TypedDict params of the openai and anthropic SDKs are walked by `typed_dict_problems`: every key
must be one the SDK declares, required keys present, literals among the allowed values.
"""

from __future__ import annotations

import collections.abc
import types
import typing
from typing import Any

import pydantic
import typing_extensions

_WRAPPERS = {typing_extensions.Required, typing_extensions.NotRequired, typing_extensions.Annotated,
             typing.Required, typing.NotRequired, typing.Annotated}
_SEQUENCES = {list, collections.abc.Iterable, collections.abc.Sequence, typing.Iterable, typing.List,
              typing.Sequence}


def _unwrap(tp: Any) -> Any:
    while typing_extensions.get_origin(tp) in _WRAPPERS:
        tp = typing_extensions.get_args(tp)[0]
    return tp


def typed_dict_problems(value: Any, tp: Any, path: str = "body") -> list[str]:
    """Where `value` does not fit the SDK type `tp` (empty: it fits)."""
    tp = _unwrap(tp)
    origin = typing_extensions.get_origin(tp)
    if tp is Any or tp is object:
        return []
    if origin in (typing.Union, types.UnionType):
        best: list[str] | None = None
        for option in typing_extensions.get_args(tp):
            problems = typed_dict_problems(value, option, path)
            if not problems:
                return []
            if best is None or len(problems) < len(best):
                best = problems
        return best or [f"{path}: fits no branch of {tp}"]
    if origin in (typing.Literal, typing_extensions.Literal):
        allowed = typing_extensions.get_args(tp)
        return [] if value in allowed else [f"{path}: {value!r} not in {allowed}"]
    if typing_extensions.is_typeddict(tp):
        if not isinstance(value, dict):
            return [f"{path}: expected an object for {tp.__name__}"]
        hints = typing_extensions.get_type_hints(tp, include_extras=True)
        problems = [f"{path}.{key}: not a field of {tp.__name__}" for key in value if key not in hints]
        problems += [f"{path}.{key}: required by {tp.__name__}" for key in tp.__required_keys__ if key not in value]
        for key, item in value.items():
            if key in hints:
                problems += typed_dict_problems(item, hints[key], f"{path}.{key}")
        return problems
    if origin in _SEQUENCES or tp in (list,):
        if not isinstance(value, list):
            return [f"{path}: expected a list"]
        (item_type,) = typing_extensions.get_args(tp) or (Any,)
        return [p for i, item in enumerate(value) for p in typed_dict_problems(item, item_type, f"{path}[{i}]")]
    if tp is type(None):
        return [] if value is None else [f"{path}: expected null"]
    if tp is str:
        return [] if isinstance(value, str) else [f"{path}: expected a string"]
    if tp is bool:
        return [] if isinstance(value, bool) else [f"{path}: expected a boolean"]
    if tp is int:
        return [] if isinstance(value, int) and not isinstance(value, bool) else [f"{path}: expected an integer"]
    if tp is float:
        return [] if isinstance(value, (int, float)) and not isinstance(value, bool) else [f"{path}: expected a number"]
    if origin in (dict, collections.abc.Mapping) or tp is dict:
        return [] if isinstance(value, dict) else [f"{path}: expected an object"]
    if typing_extensions.get_origin(tp) is not None and "SequenceNotStr" in repr(tp):
        return [] if isinstance(value, list) else [f"{path}: expected a list"]
    return []  # other SDK helper types (file-like, bytes): not used in JSON bodies


def unknown_fields(model: pydantic.BaseModel, path: str = "body") -> list[str]:
    """Fields of the input that the validated SDK model kept as extras."""
    problems = [f"{path}.{key}: not a field of {type(model).__name__}" for key in (model.model_extra or {})]
    for name in type(model).model_fields:
        problems += _walk(getattr(model, name), f"{path}.{name}")
    return problems


def _walk(value: Any, path: str) -> list[str]:
    if isinstance(value, pydantic.BaseModel):
        return unknown_fields(value, path)
    if isinstance(value, (list, tuple)):
        return [p for i, item in enumerate(value) for p in _walk(item, f"{path}[{i}]")]
    if isinstance(value, dict):
        return [p for key, item in value.items() for p in _walk(item, f"{path}.{key}")]
    return []


def dropped_fields(original: Any, dumped: Any, path: str = "body") -> list[str]:
    """Keys of the input missing from the SDK model's own serialisation (fields it ignored)."""
    if isinstance(original, dict) and isinstance(dumped, dict):
        problems = [f"{path}.{key}: ignored by the SDK model" for key in original if key not in dumped]
        for key, item in original.items():
            if key in dumped:
                problems += dropped_fields(item, dumped[key], f"{path}.{key}")
        return problems
    if isinstance(original, list) and isinstance(dumped, list):
        return [p for i, (a, b) in enumerate(zip(original, dumped)) for p in dropped_fields(a, b, f"{path}[{i}]")]
    return []
