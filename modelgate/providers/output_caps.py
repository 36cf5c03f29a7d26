"""Output-token caps learned from the vendors' own refusals.

Coding agents ask for 32,000 to 128,000 output tokens (Claude Code's `max_tokens`), and most vendors
refuse a request above the model's cap instead of lowering it, naming the cap in the refusal. The caps
differ per model and change with each release (DeepSeek's chat model took 8,192 until V4 and 393,216
since), so tables go stale; the refusal itself is the current truth. A converted call refused so is sent
once more at the cap it names, and later calls to that model are sent at it from the start.

The vendors' words (cited per pattern; the number is the cap):
- DeepSeek "Invalid max_tokens value, the valid range of max_tokens is [1, 8192]" (deepseek-ai/DeepSeek-V3#69),
  DashScope "Range of max_tokens should be [1, 8192]" (musistudio/claude-code-router#184), Zhipu
  "max_tokens参数非法：限制数值范围[1,131072]" (mnfst/modelparams.dev#327);
- Groq "`max_tokens` must be less than or equal to `32768`, the maximum value for `max_tokens` is less
  than the `context_window` for this model" (anomalyco/opencode#1000);
- OpenAI "max_tokens is too large: 32000. This model supports at most 16384 completion tokens, whereas you
  provided 32000." (Gitlawb/openclaude#58);
- Claude "max_tokens: 128001 > 64000, which is the maximum allowed number of output tokens for …"
  (anthropics/claude-code#24451);
- Gemini "…has a maxOutputTokens value of 128000 but the supported range is from 1 (inclusive) to 65537
  (exclusive)." (stackblitz-labs/bolt.diy#955);
- MiniMax "invalid params, model[MiniMax-M3] does not support max tokens > 524288 (2013)" (shixin-guo/picot#55);
- Ollama Cloud "max_tokens (262144) exceeds model's maximum output tokens (65536) for model …"
  (Gitlawb/openclaude#917);
- Volcengine Ark "The parameter `max_tokens` specified in the request are not valid: integer above maximum
  value, expected a value <= 32768, but got 65536 instead." (yiliqi78/TOKENICODE#3).
A refusal about the context window (prompt and output together) names no cap of the model: not learned.
"""

from __future__ import annotations

import re
from collections import OrderedDict

_CAPS = re.compile(
    r"max_?tokens\S*\s+(?:value, the valid range of max_tokens is|should be)\s+\[\s*1\s*,\s*(?P<range>\d+)\s*\]"
    r"|限制数值范围\s*\[\s*1\s*,\s*(?P<zhipu>\d+)\s*\]"
    r"|max_(?:completion_)?tokens`? must be less than or equal to `?(?P<groq>\d+)"
    r"|supports at most (?P<openai>\d+) completion tokens"
    r"|max_tokens: \d+ > (?P<claude>\d+), which is the maximum allowed"
    r"|maxOutputTokens value of \d+ but the supported range is from 1 \(inclusive\) to (?P<gemini>\d+) \(exclusive\)"
    r"|does not support max tokens (?:>|\\u003e|&gt;) ?(?P<minimax>\d+)"
    r"|exceeds model's maximum output tokens \((?P<ollama>\d+)\)"
    r"|max_tokens` specified in the request are not valid: integer above maximum value, expected a value "
    r"(?:<=|\\u003c=) ?(?P<ark>\d+)",
    re.IGNORECASE,
)


def stated_cap(message: str) -> int | None:
    """The output-token cap a vendor's refusal names, None where it names none."""
    found = _CAPS.search(message)
    if found is None:
        return None
    kind = found.lastgroup
    cap = int(found[kind]) if kind else 0
    return cap - 1 if kind == "gemini" else cap  # Gemini's bound is exclusive


def lowest(*caps: int | None) -> int | None:
    """The tightest of the caps known (the model name's, the learnt one), None where none is."""
    return min((cap for cap in caps if cap is not None), default=None)


class LearnedCaps:
    """Caps by (provider id, upstream model), the most recently learned kept (bounded: a model
    name comes from the client)."""

    def __init__(self, most: int = 4096) -> None:
        self._caps: OrderedDict[tuple[int, str], int] = OrderedDict()
        self._most = most

    def get(self, provider_id: int, model: str) -> int | None:
        return self._caps.get((provider_id, model))

    def learn(self, provider_id: int, model: str, cap: int) -> None:
        self._caps[(provider_id, model)] = cap
        self._caps.move_to_end((provider_id, model))
        if len(self._caps) > self._most:
            self._caps.popitem(last=False)
