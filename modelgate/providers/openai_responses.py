"""The Responses API wire format, spoken natively by the `openai` and `azure-openai` kinds.

Used for pass-through only: a Responses client calling a model of such a channel has its
body forwarded as is (`model` set to the channel's upstream model, `previous_response_id`
and every vendor field included), and the answer relayed byte for byte; its input-token counts
(`POST /responses/input_tokens`) and compactions (`POST /responses/compact`) likewise. Other
clients reach these kinds over chat completions (openai_chat, azure_openai). Error bodies are the chat
format's, so errors are classified by the kind's chat adapter.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import orjson

from modelgate.errors import UpstreamError
from modelgate.protocols.body import forward
from modelgate.protocols.responses import NATIVE_WIRE
from modelgate.providers.base import Endpoint, UpstreamRequest
from modelgate.providers.openai_chat import OpenAIChatAdapter

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
                             output_cap: int | None = None) -> UpstreamRequest:
        changes: dict[str, Any] = {"model": upstream_model}
        asked = body.get("max_output_tokens")
        if output_cap is not None and type(asked) is int and asked > output_cap:
            changes["max_output_tokens"] = output_cap
        return UpstreamRequest("POST", self.url(endpoint) + self.path, self.chat.headers(endpoint),
                               forward(body, changes))

    def native_count_request(self, body: dict[str, Any], upstream_model: str, endpoint: Endpoint,
                             client_headers: Mapping[str, str] | None = None) -> UpstreamRequest:
        """The vendor's own count (`POST /responses/input_tokens`), the client's body as is."""
        return UpstreamRequest("POST", self.url(endpoint) + "/input_tokens", self.chat.headers(endpoint),
                               forward(body, {"model": upstream_model}))

    def parse_count(self, body: bytes) -> int:
        return orjson.loads(body)["input_tokens"]

    def classify_error(self, status: int, body: bytes, headers: Mapping[str, str]) -> UpstreamError:
        return self.chat.classify_error(status, body, headers)


def openai_url(endpoint: Endpoint) -> str:
    return endpoint.base_url.rstrip("/") + "/responses"


def azure_url(endpoint: Endpoint) -> str:
    # Azure serves the Responses API on its v1 data plane (no api-version); `model` is the deployment.
    return endpoint.base_url.rstrip("/") + "/openai/v1/responses"
