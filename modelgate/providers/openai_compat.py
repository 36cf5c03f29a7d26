"""Chat-completions providers that differ from OpenAI in small, known ways.

`CompatChatAdapter` is OpenAIChatAdapter with per-provider knobs, set in the
registry: request fields a provider names differently or rejects, whether to
ask for stream usage, and the provider's own error codes.
"""

from __future__ import annotations

from typing import Any, Mapping

import orjson

from modelgate.errors import ErrorType, UpstreamError
from modelgate.protocols.ir import ChatRequest
from modelgate.providers.base import Endpoint, UpstreamRequest
from modelgate.providers.openai_chat import (
    OpenAIChatAdapter,
    error_fields,
    request_body,
)


class CompatChatAdapter(OpenAIChatAdapter):
    def __init__(
        self,
        *,
        renames: Mapping[str, str] | None = None,
        drop: tuple[str, ...] = (),
        stream_usage_option: bool = True,
        error_codes: Mapping[str, ErrorType] | None = None,
        quota_hints: tuple[str, ...] = (),
        not_found_hints: tuple[str, ...] = (),
    ) -> None:
        self.renames = dict(renames or {})  # IR chat field -> the provider's name for it
        self.drop = drop  # fields the provider rejects
        # False: the provider rejects `stream_options` (and reports usage on its last chunk anyway)
        self.stream_usage_option = stream_usage_option
        self.error_codes = dict(error_codes or {})  # provider error `code` or `type` -> error type
        self.quota_hints = quota_hints  # lower-case message fragments that mean an exhausted balance
        self.not_found_hints = not_found_hints  # lower-case message fragments that mean an unknown model

    def _adjust(self, body: dict[str, Any]) -> dict[str, Any]:
        for old, new in self.renames.items():
            if old in body:
                body[new] = body.pop(old)
        for name in self.drop:
            body.pop(name, None)
        if not self.stream_usage_option:
            body.pop("stream_options", None)
        return body

    def build_request(self, req: ChatRequest, upstream_model: str, endpoint: Endpoint) -> UpstreamRequest:
        body = self._adjust(request_body(req, upstream_model))
        return UpstreamRequest("POST", self.url(endpoint, upstream_model), self.headers(endpoint), orjson.dumps(body))

    def build_native_request(
        self, body: dict[str, Any], upstream_model: str, endpoint: Endpoint, stream: bool
    ) -> UpstreamRequest:
        up = super().build_native_request(body, upstream_model, endpoint, stream)
        if not (self.renames or self.drop or not self.stream_usage_option):
            return up
        up.body = orjson.dumps(self._adjust(orjson.loads(up.body or b"{}")))
        return up

    def classify_error(self, status: int, body: bytes, headers: Mapping[str, str]) -> UpstreamError:
        error = super().classify_error(status, body, headers)
        message, error_type, code = error_fields(body)
        if not (error_type or code):
            error_type, code = _top_level_fields(body)
        mapped = self.error_codes.get(code) or self.error_codes.get(error_type)
        if mapped is not None:
            error.error_type = mapped
        elif any(hint in message.lower() for hint in self.quota_hints):
            error.error_type = ErrorType.QUOTA_EXCEEDED
        elif any(hint in message.lower() for hint in self.not_found_hints):
            error.error_type = ErrorType.MODEL_NOT_FOUND
        return error


def _top_level_fields(body: bytes) -> tuple[str, str]:
    """(type, code) of error bodies written without the `error` wrapper (Mistral, vLLM, SiliconFlow)."""
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return "", ""
    if not isinstance(parsed, dict):
        return "", ""
    return str(parsed.get("type") or ""), str(parsed.get("code") or "")
