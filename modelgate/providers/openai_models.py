"""What OpenAI's models take on Chat Completions, read from the model name.

Output caps: a converted request's max tokens are cut to the model's (OpenAI's model pages: gpt-4o and
gpt-4o-mini 16,384, gpt-4.1 32,768, gpt-4-turbo and gpt-3.5-turbo 4,096); Claude Code asks for 32,000 to
64,000 ("max_tokens is too large: 32000. This model supports at most 16384 completion tokens").

Reasoning models' rules differ by generation and line (OpenAI's API reference for `reasoning_effort`: "All models
before gpt-5.1 ... do not support none", "xhigh is supported for all models after gpt-5.1-codex-max"; the model
pages as models.dev cites them, anomalyco/models.dev#2296; the Codex CLI's model list, codex-rs/core/models.json;
the refusals in the tests' fake quote the service):
- the o-series: efforts low, medium and high; no `stop`, no `parallel_tool_calls`;
- gpt-5: minimal, low, medium and high (no `none`); no `stop`;
- gpt-5.1: none, low, medium and high ("'minimal' is not supported with the 'gpt-5.1' model");
- gpt-5.2 and 5.3: `xhigh` too ("Supported values are: 'none', 'low', 'medium', 'high', and 'xhigh'",
  earendil-works/pi#1334);
- gpt-5.4 and 5.5: the same, and function tools only with effort `none` ("Function tools with
  reasoning_effort are not supported for gpt-5.4 in /v1/chat/completions");
- gpt-5.6 and later, gpt-6: `max` too (Codex lists it for gpt-5.6-sol and sends it for its `ultra` preset,
  openai/codex#30585; the SDK's `ReasoningEffort` has it from openai 3.5x);
- the codex models reason always (no `none`, no `minimal`): gpt-5-codex and gpt-5.1-codex low, medium and high
  ("'none' is not supported with the 'gpt-5.1-codex' model. Supported values are: 'low', 'medium', and 'high'",
  openai/codex#6647), gpt-5.1-codex-max and the later ones `xhigh` too ("'minimal' is not supported with the
  'gpt-5.2-codex' model. Supported values are: 'low', 'medium', 'high', and 'xhigh'", earendil-works/pi#4622),
  the `-codex-mini` models medium and high;
- the `-pro` models: gpt-5-pro high only ("defaults to (and only supports) high"), the later ones medium, high
  and xhigh;
- the `-chat` models: gpt-5-chat-latest takes no effort ("Unsupported parameter: 'reasoning.effort'",
  Laisky/one-api#120), the later ones medium only (gpt-5.2-chat-latest, BerriAI/litellm#38842).
A request's effort is moved to the nearest level the model takes, and left out for the models known not
to reason; names outside these families (other vendors' models, free Azure deployment names) and levels
outside this list are sent as the client asked.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

# `o3`, `o4-mini`, `gpt-5`, `gpt-5-mini-2025-08-07`, `gpt-5.1-codex-max`, `gpt-6-sol`; a vendor prefix
# (`openai/gpt-5`) is ignored.
_NAME = re.compile(r"(?:o(\d+)|gpt-(\d+)(?:\.(\d+))?)(-.*)?")
LEVELS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")


@dataclass(frozen=True, slots=True)
class ReasoningModel:
    efforts: tuple[str, ...]  # the levels it takes, in LEVELS order
    takes_stop: bool = True
    takes_parallel_tool_calls: bool = True
    tools_without_effort: bool = False  # function tools only with effort `none`
    # its reasoning can be asked back encrypted (`include: ["reasoning.encrypted_content"]`, Responses)
    encrypted_reasoning: bool = True

    def effort(self, requested: str) -> str | None:
        """The level the model takes nearest to `requested` (the higher one on a tie); None where it takes
        none; `requested` itself where it is no level known here (a level newer than this table)."""
        if not self.efforts:
            return None
        if requested in self.efforts or requested not in LEVELS:
            return requested
        at = LEVELS.index(requested)
        return min(self.efforts, key=lambda level: (abs(LEVELS.index(level) - at), -LEVELS.index(level)))


_O_SERIES = ReasoningModel(("low", "medium", "high"), takes_stop=False, takes_parallel_tool_calls=False)
_GPT_5 = ReasoningModel(("minimal", "low", "medium", "high"), takes_stop=False)
_GPT_5_1 = ReasoningModel(("none", "low", "medium", "high"))
_GPT_5_2 = ReasoningModel(("none", "low", "medium", "high", "xhigh"))
_GPT_5_4 = ReasoningModel(("none", "low", "medium", "high", "xhigh"), tools_without_effort=True)
_GPT_5_6 = ReasoningModel(("none", "low", "medium", "high", "xhigh", "max"), tools_without_effort=True)
_CODEX = ReasoningModel(("low", "medium", "high"))
_CODEX_XHIGH = ReasoningModel(("low", "medium", "high", "xhigh"))
_CODEX_MINI = ReasoningModel(("medium", "high"))
_PRO_5 = ReasoningModel(("high",), takes_stop=False)
_PRO = ReasoningModel(("medium", "high", "xhigh"))
_CHAT = ReasoningModel((), encrypted_reasoning=False)  # "Encrypted content is not supported" (pydantic-ai#3326)
_CHAT_5_1 = ReasoningModel(("medium",))


# Checked in order: the first pattern that matches the start of the name gives its cap.
_OUTPUT_CAPS = ((re.compile(r"gpt-4o|chatgpt-4o"), 16384), (re.compile(r"gpt-4\.1"), 32768),
                (re.compile(r"gpt-4-turbo|gpt-4-\d{4}|gpt-3\.5"), 4096))


@functools.lru_cache(maxsize=1024)
def output_cap(name: str) -> int | None:
    """The most completion tokens a non-reasoning OpenAI model takes, None where the name is unknown."""
    base = name.lower().rsplit("/", 1)[-1]
    return next((cap for pattern, cap in _OUTPUT_CAPS if pattern.match(base)), None)


def does_not_reason(name: str) -> bool:
    """An OpenAI model known by name not to reason (gpt-4o, gpt-4.1, gpt-4-turbo, gpt-3.5: those of the cap
    table). It refuses an effort: "Unrecognized request argument supplied: reasoning_effort" on Chat
    Completions (Open-Less/openless#555, scaleapi/vero#54), "Unsupported parameter: 'reasoning.effort' is not
    supported with this model." on Responses (BoundaryML/baml#2708; Codex aliased to gpt-4o,
    BerriAI/litellm#38842); and its reasoning encrypted ("Encrypted content is not supported with this
    model.", pydantic/pydantic-ai#2865)."""
    return output_cap(name) is not None


@functools.lru_cache(maxsize=1024)
def reasoning_model(name: str) -> ReasoningModel | None:
    """The rules of an OpenAI reasoning model by name, else None."""
    m = _NAME.fullmatch(name.lower().rsplit("/", 1)[-1])
    if m is None:
        return None
    if m[1] is not None:
        return _O_SERIES
    major, minor, suffix = int(m[2]), int(m[3] or 0), m[4] or ""
    if major < 5:
        return None
    version = (major, minor)
    if "-chat" in suffix:
        return _CHAT_5_1 if version >= (5, 1) else _CHAT
    if "-codex" in suffix:
        if "-codex-mini" in suffix:
            return _CODEX_MINI
        return _CODEX_XHIGH if version >= (5, 2) or "-codex-max" in suffix else _CODEX
    if "-pro" in suffix:
        return _PRO if version >= (5, 2) else _PRO_5
    if version >= (5, 6):
        return _GPT_5_6
    if version >= (5, 4):
        return _GPT_5_4
    if version >= (5, 2):
        return _GPT_5_2
    return _GPT_5_1 if version >= (5, 1) else _GPT_5
