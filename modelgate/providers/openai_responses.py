"""The Responses API wire format, spoken natively by the `openai` and `azure-openai` kinds.

Used for pass-through only: a Responses client calling a model of such a channel has its
body forwarded as is (`model` set to the channel's upstream model, `previous_response_id`
and every vendor field included; what an OpenAI model known by name refuses is fitted: `fitted`),
and the answer relayed byte for byte; its input-token counts
(`POST /responses/input_tokens`) and compactions (`POST /responses/compact`) likewise. Other
clients reach these kinds over chat completions (openai_chat, azure_openai). Error bodies are the chat
format's, so errors are classified by the kind's chat adapter.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import orjson

from modelgate.errors import UpstreamError
from modelgate.protocols.body import OMIT, forward
from modelgate.protocols.responses import NATIVE_WIRE
from modelgate.providers.base import Endpoint, UpstreamRequest
from modelgate.providers.openai_chat import OpenAIChatAdapter
from modelgate.providers.openai_models import does_not_reason, output_cap, reasoning_model
from modelgate.providers.output_caps import lowest


class ResponsesPassThrough:
    """The `openai-responses` wire (a `PassThroughAdapter`) of a kind whose chat adapter gives
    the auth headers and the error classification."""

    # A response object, and a compaction's (`response.compaction`), always has its `output` list.
    answer_fields: tuple[str, ...] = ("output",)

    def __init__(self, chat: OpenAIChatAdapter, url: Callable[[Endpoint], str], wire: str = NATIVE_WIRE,
                 path: str = "") -> None:
        self.chat = chat
        self.url = url
        self.wire = wire  # NATIVE_WIRE, or the compaction wire for `path` "/compact"
        self.path = path

    def build_native_request(self, body: dict[str, Any], upstream_model: str, endpoint: Endpoint,
                             stream: bool, client_headers: Mapping[str, str] | None = None,
                             output_cap: int | None = None, marked_reasoning: bool | None = None) -> UpstreamRequest:
        changes = fitted(body, upstream_model, output_cap, marked_reasoning)
        return UpstreamRequest("POST", self.url(endpoint) + self.path, self.chat.headers(endpoint),
                               forward(body, {"model": upstream_model, **changes}))

    def native_count_request(self, body: dict[str, Any], upstream_model: str, endpoint: Endpoint,
                             client_headers: Mapping[str, str] | None = None) -> UpstreamRequest:
        """The vendor's own count (`POST /responses/input_tokens`) of the client's body, as the model takes it."""
        return UpstreamRequest("POST", self.url(endpoint) + "/input_tokens", self.chat.headers(endpoint),
                               forward(body, {"model": upstream_model, **fitted(body, upstream_model)}))

    def parse_count(self, body: bytes) -> int:
        return orjson.loads(body)["input_tokens"]

    def classify_error(self, status: int, body: bytes, headers: Mapping[str, str]) -> UpstreamError:
        return self.chat.classify_error(status, body, headers)


_SAMPLING = ("temperature", "top_p")
_ENCRYPTED = "reasoning.encrypted_content"


def fitted(body: Mapping[str, Any], upstream_model: str, learnt_cap: int | None = None,
           marked_reasoning: bool | None = None) -> dict[str, Any]:
    """The changes (OMIT: left out) that make a Responses client's own body what the OpenAI model
    `upstream_model` takes (the chat rules' counterpart, openai_chat.fitted): empty where it takes the
    body as sent or its name is unknown. A client cannot tell what serves a model id: Codex asks every
    model for an effort, which gpt-4o and gpt-4.1 refuse ("Unsupported parameter: 'reasoning.effort' is not
    supported with this model."), and for its reasoning encrypted, which they refuse too ("Encrypted content
    is not supported with this model.", pydantic/pydantic-ai#2865, NousResearch/hermes-agent#24234);
    reasoning models refuse sampling settings ("Unsupported parameter: 'temperature' is not supported with
    this model.", OpenHands/software-agent-sdk#1837) and effort levels of other generations. `learnt_cap`:
    the output cap learnt from the model's refusal; `marked_reasoning`: the model instance is marked a
    reasoning model (an Azure deployment's free name tells nothing)."""
    changes: dict[str, Any] = {}
    cap = lowest(output_cap(upstream_model), learnt_cap)
    asked = body.get("max_output_tokens")
    if cap is not None and type(asked) is int and asked > cap:
        changes["max_output_tokens"] = cap
    model = reasoning_model(upstream_model)
    if model is not None or marked_reasoning:
        changes.update((name, OMIT) for name in _SAMPLING if name in body)
    include: Any = body.get("include")
    if (isinstance(include, list) and _ENCRYPTED in include
            and (not model.encrypted_reasoning if model is not None else does_not_reason(upstream_model))):
        kept = [item for item in include if item != _ENCRYPTED]
        changes["include"] = kept if kept else OMIT
    reasoning: Any = body.get("reasoning")
    asked_effort = reasoning.get("effort") if isinstance(reasoning, dict) else None
    if asked_effort is None:
        return changes
    if model is not None:
        effort = model.effort(asked_effort)
    else:
        effort = None if does_not_reason(upstream_model) else asked_effort
    if effort != asked_effort:
        rest = {name: value for name, value in reasoning.items() if name != "effort"}
        changes["reasoning"] = {**rest, "effort": effort} if effort else rest or OMIT
    return changes


def openai_url(endpoint: Endpoint) -> str:
    return endpoint.base_url.rstrip("/") + "/responses"


def azure_url(endpoint: Endpoint) -> str:
    # Azure serves the Responses API on its v1 data plane (no api-version); `model` is the deployment.
    return endpoint.base_url.rstrip("/") + "/openai/v1/responses"
