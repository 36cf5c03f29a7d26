"""What chat-completions vendors refuse beyond OpenAI's own rules, in their words (late 2026, for their
current models; each rule cites where the refusal is quoted). The provider tests check the bodies the
gateway builds against these, as the vendors would."""

from __future__ import annotations

from typing import Any

_FORCED = ("required",)


def _forced(body: dict[str, Any]) -> bool:
    choice = body.get("tool_choice")
    return choice in _FORCED or isinstance(choice, dict)


def vendor_refusal(kind: str, body: dict[str, Any]) -> str | None:
    messages = body.get("messages") or []
    roles = [m.get("role") for m in messages if isinstance(m, dict)]
    if kind == "fireworks" and not body.get("stream") and (body.get("max_tokens") or 0) > 4096:
        return "Requests with max_tokens > 4096 must have stream=true"  # nullclaw/nullclaw#231
    if kind == "mistral" and any(a == "tool" and b == "user" for a, b in zip(roles, roles[1:])):
        return "Unexpected role 'user' after role 'tool'"  # code 3230, NousResearch/hermes-agent#20154
    if kind == "minimax":
        if roles.count("system") > 1 and roles[:2] == ["system", "system"]:
            return "invalid params, invalid chat setting (2013)"  # openclaw/openclaw#19386
        if "system" in roles[1:]:
            return "chat content has invalid message role: system (2013)"  # BigPizzaV3/CodexPlusPlus#267
    if kind == "perplexity":
        first = next((i for i, role in enumerate(roles) if role != "system"), len(roles))
        rest = roles[first:]
        if "system" in rest or any(a == b == "user" for a, b in zip(rest, rest[1:])):
            # serac-labs/serac#53
            return ("After the (optional) system message(s), user or tool message(s) should alternate with assistant "
                    "message(s).")
    if kind == "xai":
        # docs.x.ai (reasoning): "presencePenalty, frequencyPenalty, and stop cannot be used with reasoning
        # models"; reasoning_effort "is not supported by grok-3, grok-4 and grok-4-fast-reasoning"
        for field, name in (("stop", "stop"), ("presence_penalty", "presencePenalty"),
                            ("frequency_penalty", "frequencyPenalty"), ("reasoning_effort", "reasoningEffort")):
            if field in body:
                return f"Model {body['model']} does not support parameter {name}."
    if kind == "moonshot":
        if "temperature" in body and body["temperature"] != 1:
            return "invalid temperature: only 1 is allowed for this model"  # Mai-with-u/MaiBot#1538 (K2.6, K3)
        if _forced(body):
            return "tool_choice 'specified' is incompatible with thinking enabled"  # platform.kimi.ai, Tool Choice
    if kind == "deepseek" and _forced(body):
        return "Thinking mode does not support this tool_choice"  # deepseek-ai/DeepSeek-V3#1376 (V4)
    if kind == "zhipu" and body.get("tool_choice", "auto") != "auto":
        return "Tool choice must be auto"  # vectorize-io/hindsight#4246
    if kind == "dashscope":
        if _forced(body):
            return ("<400> InternalError.Algo.InvalidParameter: The tool_choice parameter does not support being "
                    "set to required or object in thinking mode")  # cloudwego/eino#994
        if body.get("enable_thinking") and not body.get("stream"):
            return "parameter.enable_thinking must be set to false for non-streaming calls"  # its error codes
    return None


# The chat-completions vendors' refusals of more output tokens than the model's cap, in their words
# (`{cap}` the cap, `{model}` the model); sources in modelgate/providers/output_caps.py.
CAP_REFUSALS = {
    "deepseek": "Invalid max_tokens value, the valid range of max_tokens is [1, {cap}]",
    "groq": "`max_tokens` must be less than or equal to `{cap}`, the maximum value for `max_tokens` is less than the "
            "`context_window` for this model",
    "dashscope": "<400> InternalError.Algo.InvalidParameter: Range of max_tokens should be [1, {cap}]",
    "zhipu": "max_tokens参数非法：限制数值范围[1,{cap}]",
    "minimax": "invalid params, model[{model}] does not support max tokens > {cap} (2013)",
}
