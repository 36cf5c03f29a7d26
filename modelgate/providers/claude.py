"""What a Claude model takes, whichever cloud serves it (the Messages API, Vertex, Bedrock).

The vendor's request rules changed with each generation (platform.claude.com: build-with-claude/thinking,
adaptive-thinking, effort, and each model's "what's new" page, read 2026-11):
- before 3.7: no thinking;
- 3.7 to 4.5: manual thinking (`enabled` + `budget_tokens`, at least 1,024 and under `max_tokens`). While it
  is on: temperature only at 1, no top_k, top_p only from 0.95, no forced tool use, and the last assistant
  turn of a tool loop must open with the model's own signed thinking;
- from 4.6: adaptive thinking, its depth set by `output_config.effort` (`enabled` is deprecated on 4.6 and
  refused from 4.7: "\"thinking.type.enabled\" is not supported for this model"); 4.6 keeps the sampling
  rules above while thinking is on; no forced tool use beside adaptive thinking either; no assistant
  prefill ("This model does not support assistant message prefill. The conversation must end with a user
  message.");
- from 4.7 (Opus 4.7 and 4.8, every 5.x model, Fable, Mythos): a temperature other than 1, any top_p or
  top_k is refused on every request ("`temperature` is deprecated for this model."), and thinking text is
  omitted unless `display: "summarized"` asks for it;
- from 5: thinking is on by default; Opus 5.5, Fable and Mythos cannot turn it off;
- Opus and Sonnet from 5.5, Fable and Mythos from 5.1 refuse forced tool use ("tool_choice: type \"tool\" and
  \"any\" are not supported for this model.").

`shaped` applies them to an IR request, so that a chat or Responses client's request (temperature, top_p,
`reasoning_effort`, `tool_choice: required`) reaches every generation in a form it takes. A model id that
names no generation (an ARN, an alias of the operator's) is sent as the client asked.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from dataclasses import dataclass
from typing import Any, Mapping

import orjson

from modelgate.protocols.body import OMIT
from modelgate.protocols.ir import (
    ChatRequest,
    Message,
    TextPart,
    ThinkingPart,
    ToolCall,
    ToolChoice,
    vendor_signature,
)
from modelgate.protocols.messages import reasoning_effort, thinking_field
from modelgate.providers.base import EFFORT_BUDGET, OPENING_USER_TEXT
from modelgate.providers.output_caps import lowest

# `claude-opus-4-8`, `claude-sonnet-4-20250514` (a date, not a minor version), `claude-fable-5-1`, and the
# same inside Bedrock (`us.anthropic.claude-opus-4-1-20250805-v1:0`) and Vertex (`claude-opus-4-5@20251101`) ids.
_FAMILY_FIRST = re.compile(r"claude-([a-z]+)-(\d+)(?:-(\d)(?!\d))?")
# The 3.x naming: `claude-3-7-sonnet-20250219`, `claude-3-opus-20240229`.
_VERSION_FIRST = re.compile(r"claude-(\d+)(?:-(\d)(?!\d))?-([a-z]+)")
_PREVIEWS = {"claude-mythos-preview": ("mythos", (5, 0))}

MIN_THINKING_BUDGET = 1024  # "Must be ≥1024 and less than `max_tokens`" (the SDKs' ThinkingConfigEnabled)
# Effort levels: OpenAI's `minimal` is below Claude's lowest; `xhigh` exists from 4.7 (not on Haiku), `max` from 4.6.
_EFFORT_LEVEL = {"minimal": "low", "low": "low", "medium": "medium", "high": "high", "xhigh": "xhigh", "max": "max"}
_FORCED = ("required", "tool")
_THINKING = ("enabled", "adaptive")


def _forced(req: ChatRequest) -> bool:
    return req.tool_choice is not None and req.tool_choice.mode in _FORCED


@dataclass(frozen=True, slots=True)
class Generation:
    family: str  # opus, sonnet, haiku, fable, mythos...
    version: tuple[int, int]

    @property
    def thinks(self) -> bool:
        return self.version >= (3, 7)

    @property
    def adaptive(self) -> bool:
        return self.version >= (4, 6)

    @property
    def max_output(self) -> int:
        """The most output tokens it takes ("max_tokens: 128000 > 64000, which is the maximum allowed number of
        output tokens for claude-3-7-sonnet-20250219"; the vendor's models overview)."""
        if self.version < (3, 5):
            return 4096
        if self.version < (3, 7):
            return 8192
        if self.version < (4, 6):
            return 32000 if self.family == "opus" and self.version < (4, 5) else 64000
        return 128000

    @property
    def refuses_prefill(self) -> bool:
        return self.version >= (4, 6)

    @property
    def fixed_sampling(self) -> bool:
        return self.version >= (4, 7)

    @property
    def thinks_by_default(self) -> bool:
        return self.version >= (5, 0)

    @property
    def refuses_forced_tools(self) -> bool:
        return self.version >= ((5, 1) if self.family in ("fable", "mythos") else (5, 5)) and self.family != "haiku"

    @property
    def always_thinks(self) -> bool:
        """Thinking cannot be turned off (`disabled` refused): Opus from 5.5, Fable and Mythos."""
        return self.family in ("fable", "mythos") or (self.family == "opus" and self.version >= (5, 5))

    @property
    def takes_effort(self) -> bool:
        """`output_config.effort` (the effort page: Opus 4.5, then every model from 4.6; Sonnet and Haiku
        4.5 answer "This model does not support the effort parameter")."""
        return self.version >= (4, 6) or (self.family == "opus" and self.version >= (4, 5))

    @property
    def one_sampling_knob(self) -> bool:
        """Temperature or top_p, not both (from Opus 4.1, Sonnet and Haiku 4.5)."""
        return self.version >= (4, 5) or (self.family == "opus" and self.version >= (4, 1))

    def effort(self, level: str) -> str:
        if level == "xhigh" and (self.version < (4, 7) or self.family == "haiku"):
            return "high"
        if level == "max" and self.version < (4, 6):
            return "high"
        return level


@functools.lru_cache(maxsize=1024)  # a gateway serves a few model ids, read on every converted request
def generation(model: str) -> Generation | None:
    """The Claude generation a model id names, else None."""
    for preview, (family, version) in _PREVIEWS.items():
        if preview in model:
            return Generation(family, version)
    if m := _VERSION_FIRST.search(model):
        return Generation(m[3], (int(m[1]), int(m[2] or 0)))
    if m := _FAMILY_FIRST.search(model):
        return Generation(m[1], (int(m[2]), int(m[3] or 0)))
    return None


# Structured outputs (`output_config.format`; Converse's `outputConfig.textFormat`): generally available from
# the 4.5 models on the vendor's API and on Bedrock (platform.claude.com, build-with-claude/structured-outputs;
# the Bedrock user guide, structured-output). Their schemas are a subset of JSON Schema: every object closed
# ("output_format.schema: For 'object' type, 'additionalProperties' must be explicitly set to false",
# ax-llm/ax#458; "'additionalProperties: true' is not supported", BerriAI/litellm#35808), no numeric, length
# or count bounds (minItems only 0 or 1), a few string formats. What the subset cannot say is written into the
# node's description, as the vendor's SDKs do to a caller's schema (anthropic 2.13, `transform_schema`).
_STRING_FORMATS = frozenset({"date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6",
                             "uuid"})
_SCHEMA_TYPES = frozenset({"object", "array", "string", "integer", "number", "boolean", "null"})


class _Unsayable(Exception):
    """A schema node the structured-output subset has no form for (no type, an unknown one)."""


def output_schema(req: ChatRequest, model: str) -> dict[str, Any] | None:
    """A chat client's `response_format` JSON schema as Claude's structured outputs take it, where the model has
    them and the schema can be said in their subset; None: the answer's JSON is asked for in words instead. Never
    beside a prefilled answer: the vendor refuses the two together (structured outputs' incompatibilities)."""
    response_format = req.response_format
    if (not response_format or response_format.get("type") != "json_schema"
            or not req.messages or req.messages[-1].role == "assistant"):
        return None
    gen = generation(model)
    spec = response_format.get("json_schema")
    schema = spec.get("schema") if isinstance(spec, dict) else None
    if gen is None or gen.version < (4, 5) or not isinstance(schema, dict):
        return None
    try:
        return _structured(schema)
    except _Unsayable:
        return None


def _is_literal(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def _structured(node: Any) -> dict[str, Any]:
    if not isinstance(node, dict):
        raise _Unsayable
    rest = {k: v for k, v in node.items() if k not in ("$schema", "$id")}
    out: dict[str, Any] = {}
    for defs in ("$defs", "definitions"):
        if isinstance(rest.get(defs), dict):
            out[defs] = {name: _structured(sub) for name, sub in rest.pop(defs).items()}
    if isinstance(ref := rest.pop("$ref", None), str):
        return {**out, "$ref": ref}
    for key in ("description", "title"):
        if isinstance(rest.get(key), str):
            out[key] = rest.pop(key)
    kind = rest.pop("type", None)
    if isinstance(rest.get("enum"), list) and rest["enum"] and all(map(_is_literal, rest["enum"])):
        out["enum"] = rest.pop("enum")
        kind = None
    if "const" in rest and _is_literal(rest["const"]):
        out["const"] = rest.pop("const")
        kind = None
    for combinator, named in (("anyOf", "anyOf"), ("oneOf", "anyOf"), ("allOf", "allOf")):
        if isinstance(rest.get(combinator), list) and rest[combinator]:
            out[named] = [_structured(branch) for branch in rest.pop(combinator)]
            break
    if isinstance(kind, list) and kind and "anyOf" not in out:  # ["string", "null"]: one branch per type
        out["anyOf"] = [_structured({**rest, "type": t} if t != "null" else {"type": "null"}) for t in kind]
        return out
    if kind is None:
        if not {"enum", "const", "anyOf", "allOf"} & out.keys():
            raise _Unsayable
    elif isinstance(kind, str) and kind in _SCHEMA_TYPES:
        out["type"] = kind
    else:  # an unknown type, or a type list beside a union
        raise _Unsayable
    if kind == "object":
        properties = rest.pop("properties", {})
        if not isinstance(properties, dict):
            raise _Unsayable
        out["properties"] = {name: _structured(sub) for name, sub in properties.items()}
        rest.pop("additionalProperties", None)
        out["additionalProperties"] = False
        if isinstance(rest.get("required"), list):
            out["required"] = rest.pop("required")
    elif kind == "string" and isinstance(rest.get("format"), str) and rest["format"] in _STRING_FORMATS:
        out["format"] = rest.pop("format")
    elif kind == "array":
        if isinstance(rest.get("items"), dict):
            out["items"] = _structured(rest.pop("items"))
        if rest.get("minItems") in (0, 1):
            out["minItems"] = rest.pop("minItems")
    if rest:  # the rest, in words the model may follow
        said = ", ".join(f"{key}: {orjson.dumps(value).decode()}" for key, value in rest.items())
        out["description"] = (out["description"] + "\n\n" if "description" in out else "") + "{" + said + "}"
    return out


def stop_sequences(stop: list[str]) -> list[str]:
    """The stop sequences Claude takes: it refuses an empty or whitespace-only one ("stop_sequences: each
    stop sequence must contain non-whitespace", BerriAI/litellm#3286), which chat clients send (`\\n`)."""
    return [s for s in stop if s and not s.isspace()]


def shaped(req: ChatRequest, model: str, default_max_tokens: int) -> tuple[ChatRequest, dict[str, Any]]:
    """`req` as the Claude model `model` takes it, and the request fields for thinking (`thinking`,
    `output_config`) to send beside it. `default_max_tokens`: what the wire format sends when the client
    gave no max_tokens; thinking's room is added to it where the model will think."""
    if req.temperature is not None and not 0 <= req.temperature <= 1:
        req = dataclasses.replace(req, temperature=min(1.0, max(0.0, req.temperature)))  # the vendor's range
    gen = generation(model)
    if gen is None:
        fields = {"thinking": thinking} if (thinking := thinking_field(req.thinking_budget)) is not None else {}
        return _one_sampling_knob(req), fields
    if req.max_tokens is not None and req.max_tokens > gen.max_output:
        # a client that asks more of this model than it gives (Claude Code's 128,000 behind an alias of another
        # generation, a chat client's own limit)
        req = dataclasses.replace(req, max_tokens=gen.max_output)
    if gen.refuses_forced_tools and req.tool_choice is not None and req.tool_choice.mode in _FORCED:
        req = dataclasses.replace(req, tool_choice=ToolChoice("auto", parallel=req.tool_choice.parallel))
    if gen.adaptive:
        req, fields = _adaptive_thinking(req, gen, default_max_tokens)
        if _forced(req) and fields.get("thinking", {}).get("type") in _THINKING:
            # no thinking beside a forced tool call (as `_manual_thinking`): the call's structure wins
            fields = {name: value for name, value in fields.items() if name != "thinking"}
    elif gen.thinks:
        req, fields = _manual_thinking(req, default_max_tokens)
    else:
        fields = {}
    changes: dict[str, Any] = {}
    if gen.fixed_sampling and (req.temperature, req.top_p, req.top_k) != (None, None, None):
        changes.update(temperature=None, top_p=None, top_k=None)
    if gen.thinks_by_default and req.max_tokens is None:
        changes["max_tokens"] = default_max_tokens + EFFORT_BUDGET["high"]
    if gen.refuses_prefill and _ends_with_an_answer(req):
        # A chat client's history may end with the assistant (OpenAI answers it as a new turn; OpenCode and
        # continue-buttons send one): a user turn closes it, in the words put first where a turn is missing.
        changes["messages"] = [*req.messages, Message("user", [TextPart(OPENING_USER_TEXT)])]
    return _one_sampling_knob(dataclasses.replace(req, **changes) if changes else req), fields


def fitted(body: Mapping[str, Any], model: str, learnt_cap: int | None = None) -> dict[str, Any]:
    """The changes (OMIT: left out) that make a messages client's own body what the Claude model `model`
    takes, for pass-through: empty where it takes the body as sent or its id names no generation.

    The client may not know which model serves it (a channel's alias, Claude Code's or pi's request for a
    name they do not know), so it sizes its request for another generation; the vendor refuses that with a
    400 the client cannot fix. Only what the generation refuses is changed, in the form it takes (the
    conversion's rules: `shaped`): a deprecated thinking form becomes the current one, an effort level the
    model lacks the nearest it has, sampling it refuses is left out, forced tool use becomes `auto` where
    refused, max_tokens is cut to the model's output cap. `learnt_cap`: the cap learnt from the model's
    refusal (any vendor's model behind an Anthropic-compatible API), which a thinking budget stays under."""
    gen = generation(model)
    if gen is None and learnt_cap is None:
        return {}  # the usual case for another vendor's model: nothing to read
    cap = lowest(gen.max_output if gen else None, learnt_cap)
    assert cap is not None
    changes: dict[str, Any] = {}
    max_tokens = body.get("max_tokens")
    if type(max_tokens) is int and max_tokens > cap:
        max_tokens = changes["max_tokens"] = cap
    thinking: Any = body.get("thinking")
    if gen is None:
        if "max_tokens" in changes and isinstance(thinking, dict) and thinking.get("type") == "enabled":
            changes["thinking"] = _budget_within(thinking, max_tokens)
        return changes
    config = body.get("output_config")
    effort = config.get("effort") if isinstance(config, dict) else None
    new_effort = effort
    kind = thinking.get("type") if isinstance(thinking, dict) else None
    new_thinking = thinking
    if kind in ("enabled", "adaptive"):
        display = {"display": thinking["display"]} if "display" in thinking else {}
        budget = thinking.get("budget_tokens")
        if not gen.thinks:
            new_thinking = OMIT
        elif kind == "enabled" and gen.fixed_sampling:  # refused from 4.7: the form that replaced it
            new_thinking = {"type": "adaptive", **display}
            if effort is None:
                new_effort = reasoning_effort({"thinking": thinking})  # the effort the messages codec reads from it
        elif kind == "adaptive" and not gen.adaptive:  # before 4.6: its effort's budget, within max_tokens
            new_thinking = _budget_within({"type": "enabled", "budget_tokens": EFFORT_BUDGET.get(
                effort or "medium", EFFORT_BUDGET["high"]), **display}, max_tokens)
        elif kind == "enabled" and "max_tokens" in changes:
            new_thinking = _budget_within(thinking, max_tokens)
    elif kind == "disabled" and gen.always_thinks:
        new_thinking = OMIT
        new_effort = effort or "low"  # the least thinking where it cannot be turned off
    if new_effort is not None:
        new_effort = gen.effort(new_effort) if gen.takes_effort else None
    choice: Any = body.get("tool_choice")
    forced = isinstance(choice, dict) and choice.get("type") in ("any", "tool")
    thinking_type = new_thinking.get("type") if isinstance(new_thinking, dict) else None
    if forced and gen.refuses_forced_tools:
        changes["tool_choice"] = {**choice, "type": "auto"}
        changes["tool_choice"].pop("name", None)
    elif forced and thinking_type in _THINKING:
        # "Thinking may not be enabled when tool_choice forces tool use", adaptive thinking too (the vendor's
        # extended-thinking page: thinking takes tool_choice auto or none only): the call's structure wins
        new_thinking = OMIT
    thinking_type = new_thinking.get("type") if isinstance(new_thinking, dict) else None
    if new_thinking is not thinking:
        changes["thinking"] = new_thinking
    if new_effort != effort:
        rest = {name: value for name, value in config.items() if name != "effort"} if isinstance(config, dict) else {}
        changes["output_config"] = {**rest, "effort": new_effort} if new_effort else rest or OMIT
    thinks = thinking_type in ("enabled", "adaptive") or (thinking_type is None and gen.thinks_by_default)
    if gen.fixed_sampling or thinks:
        # refused on every request from 4.7 and beside thinking before it (where temperature 1, the default,
        # and top_p from 0.95 are taken: their values are not decoded on pass-through, so they go too)
        changes.update((name, OMIT) for name in ("temperature", "top_p", "top_k") if name in body)
    elif gen.one_sampling_knob and "temperature" in body and "top_p" in body:
        changes["top_p"] = OMIT  # the temperature is kept, as on conversion
    return changes


def _budget_within(thinking: dict[str, Any], max_tokens: Any) -> Any:
    """Manual thinking whose budget fits under max_tokens (which counts it), else OMIT where not even the
    smallest budget does."""
    budget = thinking.get("budget_tokens")
    if type(budget) is not int or type(max_tokens) is not int or budget < max_tokens:
        return thinking
    return {**thinking, "budget_tokens": max_tokens - 1} if max_tokens - 1 >= MIN_THINKING_BUDGET else OMIT


def _one_sampling_knob(req: ChatRequest) -> ChatRequest:
    # Claude from Sonnet 4.5, Haiku 4.5 and Opus 4.1 on refuses both ("`temperature` and `top_p` cannot both
    # be specified for this model"); chat clients (Open WebUI, LobeChat) send both. The temperature is kept.
    if req.top_p is not None and req.temperature is not None:
        return dataclasses.replace(req, top_p=None)
    return req


def _sampling_beside_thinking(req: ChatRequest) -> ChatRequest:
    """The sampling settings Claude takes while thinking: temperature 1 only, no top_k, top_p from 0.95
    ("`temperature` may only be set to 1 when thinking is enabled")."""
    return dataclasses.replace(
        req, temperature=None if req.temperature != 1 else req.temperature, top_k=None,
        top_p=req.top_p if req.top_p is not None and req.top_p >= 0.95 else None)


def _manual_thinking(req: ChatRequest, default_max_tokens: int) -> tuple[ChatRequest, dict[str, Any]]:
    if req.thinking_budget is not None or req.reasoning_effort is None:
        # a messages client's own thinking request, as it asked; or none at all
        budget = req.thinking_budget
        if budget == -1:  # adaptive, which this generation lacks: its effort's budget, within max_tokens
            budget = min(EFFORT_BUDGET[req.thinking_effort or "medium"], (req.max_tokens or default_max_tokens) - 1)
            if budget < MIN_THINKING_BUDGET:
                return req, {}
        thinking = thinking_field(budget)
        return req, ({"thinking": thinking} if thinking is not None else {})
    budget = EFFORT_BUDGET.get(req.reasoning_effort)
    if not budget or _forced(req) or not _tool_turn_opens_with_signed_thinking(req):
        # `none` (the model's default: no thinking); "Thinking may not be enabled when tool_choice forces tool
        # use."; a tool loop's last turn without the signed thinking it must open with (a chat client cannot
        # send it back): without thinking
        return req, {}
    if req.max_tokens is None:
        req = dataclasses.replace(req, max_tokens=default_max_tokens + budget)
    elif req.max_tokens > MIN_THINKING_BUDGET:
        budget = min(budget, req.max_tokens - 1)  # the client's max_tokens counts thinking, as OpenAI's does
    else:
        return req, {}  # no room for the smallest budget
    return _sampling_beside_thinking(req), {"thinking": {"type": "enabled", "budget_tokens": budget}}


def _adaptive_thinking(req: ChatRequest, gen: Generation, default_max_tokens: int
                       ) -> tuple[ChatRequest, dict[str, Any]]:
    if req.reasoning_effort is not None and req.thinking_budget is None:
        if req.reasoning_effort == "none":  # the least thinking where it cannot be turned off
            return req, ({"output_config": {"effort": "low"}} if gen.thinks_by_default else {})
        level = _EFFORT_LEVEL.get(req.reasoning_effort)
        if level is None:
            return req, {}  # an effort no table knows: the model's default
        if req.max_tokens is None:
            req = dataclasses.replace(req, max_tokens=default_max_tokens + EFFORT_BUDGET[req.reasoning_effort])
        summarized = {"display": "summarized"} if gen.fixed_sampling else {}  # omitted by default from 4.7 on
        return (_sampling_beside_thinking(req),
                {"thinking": {"type": "adaptive", **summarized}, "output_config": {"effort": gen.effort(level)}})
    # a messages client's own thinking request (reaching Bedrock or Vertex) in the form this generation takes
    budget = req.thinking_budget
    if budget is None:
        return req, {}
    if budget == 0:
        return req, ({"output_config": {"effort": "low"}} if gen.thinks_by_default else {"thinking": {"type": "disabled"}})
    if budget > 0 and not gen.fixed_sampling:
        return req, {"thinking": {"type": "enabled", "budget_tokens": budget}}  # deprecated on 4.6, still taken
    effort = {"output_config": {"effort": gen.effort(req.thinking_effort)}} if req.thinking_effort else {}
    return req, {"thinking": {"type": "adaptive"}, **effort}


def _ends_with_an_answer(req: ChatRequest) -> bool:
    """Whether the conversation ends with an assistant turn that is sent (text, not a pending tool call)."""
    if not req.messages or req.messages[-1].role != "assistant":
        return False
    parts = req.messages[-1].parts
    return not any(isinstance(p, ToolCall) for p in parts) and any(
        isinstance(p, TextPart) and p.text.strip() for p in parts)


def _tool_turn_opens_with_signed_thinking(req: ChatRequest) -> bool:
    """Whether the last assistant turn, where it holds tool calls, opens with thinking the vendor signed
    (manual thinking demands it: "a final `assistant` message must start with a thinking block")."""
    last = next((m for m in reversed(req.messages) if m.role == "assistant"), None)
    if last is None or not any(isinstance(p, ToolCall) for p in last.parts):
        return True
    for part in last.parts:
        if isinstance(part, ThinkingPart):
            if part.redacted is not None or vendor_signature(part) is not None:
                return True
        elif not (isinstance(part, TextPart) and not part.text.strip()):
            return False  # the first block sent is text or a tool call
    return False
