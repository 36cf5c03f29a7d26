"""The built-in provider kinds and the wire adapter each one speaks.

Many providers speak the chat-completions wire format at their own base URL;
they share the `openai_chat` adapter and differ only in defaults here.
"""

from __future__ import annotations

from dataclasses import dataclass

from modelgate.providers.base import WireAdapter
from modelgate.providers.openai_chat import OpenAIChatAdapter


@dataclass(frozen=True, slots=True)
class ProviderKind:
    name: str  # the `kind` stored on a provider record
    label: str  # human name for the console
    adapter: WireAdapter
    default_base_url: str | None  # None: the admin must give one
    docs_url: str
    key_required: bool = True


_openai_chat = OpenAIChatAdapter()

KINDS: dict[str, ProviderKind] = {
    kind.name: kind
    for kind in (
        ProviderKind("openai", "OpenAI", _openai_chat, "https://api.openai.com/v1",
                     "https://platform.openai.com/docs/api-reference/chat"),
        ProviderKind("openai-compatible", "OpenAI-compatible (any base URL)", _openai_chat, None,
                     "https://platform.openai.com/docs/api-reference/chat", key_required=False),
    )
}


def get_kind(name: str) -> ProviderKind:
    try:
        return KINDS[name]
    except KeyError:
        raise KeyError(f"unknown provider kind {name!r}; known: {', '.join(sorted(KINDS))}") from None
