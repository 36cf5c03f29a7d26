"""The messages protocol's shared vocabulary: its names, stop reasons and headers, SSE frames,
usage objects and cache marks, as the codec's parts and the upstream adapter use them.

Usage convention: IR `Usage.input_tokens` counts every prompt token, cached or not (like chat
`prompt_tokens`); the vendor's `input_tokens` excludes the cache read/write counts. Conversions
add or subtract the cache counts accordingly.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import orjson

from modelgate.errors import GatewayError, invalid_request
from modelgate.protocols import sse
from modelgate.protocols.ir import Usage, token_count

NATIVE_WIRE = "anthropic-messages"
ALT_VERSION = b"2023-06-01"

# The vendor's refusal of a `thread` it cannot hold (its `error.details.error_code`): the SDKs' tool runners,
# which run over a message thread on the vendor's own client, send that turn and every later one again with
# the whole conversation and no `thread` (anthropic 2.13 `lib/threads/_thread_state.py`, @anthropic-ai/sdk 1.13
# `ThreadState.recoversFrom`). Sent on, a thread's later turns would carry their new messages alone.
THREAD_UNSUPPORTED = {"error_code": "thread_unsupported_request"}


def thread_refusal(why: str) -> GatewayError:
    return invalid_request(f"'thread': {why}; send the whole conversation without 'thread'", dict(THREAD_UNSUPPORTED))

# IR stop reason -> vendor stop_reason. `content_filter` becomes `refusal`, the
# vendor's own "the model declined" reason; an IR `error` never reaches a
# successful body, so it reads as a normal end.
STOP_TO_VENDOR: dict[str | None, str] = {
    None: "end_turn",
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "stop_sequence": "stop_sequence",
    "content_filter": "refusal",
    "error": "end_turn",
}

# vendor stop_reason -> IR. `pause_turn` (a server tool paused a long turn) is a
# normal end for a client of another protocol; a full context window is a length stop.
STOP_FROM_VENDOR: dict[str, str] = {
    "end_turn": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "stop_sequence": "stop_sequence",
    "refusal": "content_filter",
    "pause_turn": "stop",
    "model_context_window_exceeded": "length",
}



# The beta under which `role: "system"` entries may appear inside `messages`; Claude Code sends
# this dated name and, when a 400 names it together with the `anthropic-beta` header, retries
# without it. Later betas sharing the prefix (`...-clear-at-<date>`) are other features.
MID_CONVERSATION_SYSTEM_BETA = "mid-conversation-system-2026-04-07"
_MID_CONVERSATION_SYSTEM = re.compile(r"mid-conversation-system-\d{4}-\d{2}-\d{2}")


def betas(headers: Mapping[bytes, bytes]) -> list[str]:
    """The betas a request names in `anthropic-beta` (comma-separated, possibly repeated)."""
    raw = headers.get(b"anthropic-beta")
    if not raw:
        return []
    return [b.strip() for b in raw.decode("latin-1").split(",") if b.strip()]


def allows_mid_conversation_system(names: list[str]) -> bool:
    return any(_MID_CONVERSATION_SYSTEM.fullmatch(name) for name in names)


def vendor_headers(headers: Mapping[bytes, bytes]) -> dict[str, str]:
    """The client's vendor headers an upstream of the same protocol must see unchanged:
    `anthropic-version` (`alt-version` is its alias here) and `anthropic-beta`."""
    out: dict[str, str] = {}
    version = headers.get(b"anthropic-version") or headers.get(b"alt-version")
    if version:
        out["anthropic-version"] = version.decode("latin-1")
    beta = headers.get(b"anthropic-beta")
    if beta:
        out["anthropic-beta"] = beta.decode("latin-1")
    return out


def sse_frame(event: str, data: dict[str, Any]) -> bytes:
    """One vendor SSE frame: `event: <type>` + `data: <json>` + blank line."""
    return sse.encode(orjson.dumps(data), event)


def usage_from_vendor(u: dict[str, Any] | None) -> Usage:
    """Vendor usage object -> IR usage (input made inclusive of cache counts)."""
    if not isinstance(u, dict):
        return Usage()
    read = token_count(u.get("cache_read_input_tokens"))
    write = token_count(u.get("cache_creation_input_tokens"))
    return Usage(
        input_tokens=token_count(u.get("input_tokens")) + read + write,
        output_tokens=token_count(u.get("output_tokens")),
        cache_read_tokens=read,
        cache_write_tokens=write,
    )


def usage_to_vendor(u: Usage) -> dict[str, int]:
    out = {
        "input_tokens": max(0, u.input_tokens - u.cache_read_tokens - u.cache_write_tokens),
        "output_tokens": u.output_tokens,
    }
    if u.cache_write_tokens:
        out["cache_creation_input_tokens"] = u.cache_write_tokens
    if u.cache_read_tokens:
        out["cache_read_input_tokens"] = u.cache_read_tokens
    return out


def cache_mark(block: dict[str, Any]) -> str | None:
    """The IR cache mark of a block's `cache_control` (`{type: ephemeral, ttl?}`), else None."""
    control = block.get("cache_control")
    if control is None or not isinstance(control, dict) or control.get("type") != "ephemeral":
        return None
    ttl = control.get("ttl")
    return ttl if isinstance(ttl, str) and ttl else "5m"


def cache_control(mark: str) -> dict[str, str]:
    """The vendor's `cache_control` for an IR cache mark (the default lifetime is not spelled out)."""
    return {"type": "ephemeral"} if mark == "5m" else {"type": "ephemeral", "ttl": mark}
