"""The Responses API (`POST /v1/responses`), the protocol of the Codex CLI and the AI SDK's `openai(model)`.

Pure functions only, one concern per module: `validate`, `view` (the typed fast path of validation),
`decode` (into the IR), `encode` (the response object), `stream` (IR stream events as the typed event
stream) and `tap` (a native stream relayed); `items` is the one piece of state, the converted answers'
items kept for a client's references to them. Keys, headers and the 7.2 error body are the chat
protocol's. See docs/conversion.md for the mapping.
"""

from __future__ import annotations

from typing import Any, Awaitable, Mapping

import orjson

from modelgate.errors import ClientProtocol, invalid_request
from modelgate.protocols import chat
from modelgate.protocols.base import Headers, bearer_token
from modelgate.protocols.ir import ChatRequest, ChatResponse, Usage
from modelgate.protocols.responses import decode, view
from modelgate.protocols.responses.encode import CALL_FORMS, REMEMBER, echoed, encode_response, usage_from_vendor
from modelgate.protocols.responses.items import ItemMemory
from modelgate.protocols.responses.stream import KEEPALIVE, ResponsesStreamEncoder
from modelgate.protocols.responses.tap import ResponsesStreamTap
from modelgate.protocols.responses.validate import validate
from modelgate.safetext import shown

NATIVE_WIRE = "openai-responses"
COMPACT_WIRE = "openai-responses-compact"


class ResponsesCodec:
    protocol = ClientProtocol.RESPONSES
    native_wire = NATIVE_WIRE

    def __init__(self, items: ItemMemory | None = None) -> None:
        self.items = items  # converted answers' items, for the `item_reference`s of later requests

    def api_key(self, headers: Headers) -> bytes | None:
        return bearer_token(headers)

    def check_headers(self, headers: Headers) -> None:
        return None

    def validation_body(self, message: str, details: dict[str, Any] | None = None) -> bytes:
        return chat.validation_body(message)  # the protocol's error has no details

    def validate(self, body: Any, headers: Headers | None = None) -> tuple[str, bool]:
        return validate(body)

    def validate_count(self, body: Any, headers: Headers) -> str:
        return validate(body)[0]  # the create body's fields, as the SDK's `input_tokens.count` sends them

    def count_answer(self, input_tokens: int) -> bytes:
        return orjson.dumps({"object": "response.input_tokens", "input_tokens": input_tokens})

    def read_typed(self, raw: bytes, headers: Headers) -> tuple[Any, str, bool] | None:
        return view.read(raw)

    def upstream_headers(self, headers: Headers) -> dict[str, str]:
        return {}  # nothing of a Responses client's headers is the upstream's business

    def prefetch(self, body: Any) -> Awaitable[None] | None:
        items = self.items
        if items is None or items.fetch is None:
            return None
        missing = [item_id for item_id in decode.references(body) if not items.holds(item_id)]
        return items.fetch(missing) if missing else None

    def to_ir(self, body: dict[str, Any]) -> ChatRequest:
        return decode.to_ir(body, self.items.recall if self.items is not None else None)

    def output_limit(self, body: Mapping[str, Any]) -> int | None:
        return decode.output_limit(body)

    def answer_context(self, body: Mapping[str, Any]) -> dict[str, Any]:
        context = echoed(body)
        if forms := decode.call_forms(body.get("tools")):
            context[CALL_FORMS] = forms
        if self.items is not None and body.get("store") is not False:  # the vendor's default is to store
            context[REMEMBER] = self.items.remember
        return context

    def encode_response(self, resp: ChatResponse, model: str, body: dict[str, Any]) -> bytes:
        return orjson.dumps(encode_response(resp, model, body))

    def stream_encoder(self, model: str, body: dict[str, Any]) -> ResponsesStreamEncoder:
        return ResponsesStreamEncoder(model, body)

    def native_usage(self, body: dict[str, Any]) -> Usage:
        return usage_from_vendor(body.get("usage"))

    def keepalive(self) -> bytes:
        return KEEPALIVE

    def native_stream_tap(self, body: Mapping[str, Any]) -> ResponsesStreamTap:
        return ResponsesStreamTap(body["model"])


class ResponsesCompactCodec(ResponsesCodec):
    """`POST /v1/responses/compact` (the SDK's `responses.compact`; the Codex CLI compacts a long
    conversation through it): a Responses body answered at once by a `response.compaction` object,
    whose compaction item is the vendor's encrypted state. So it is passed through to the upstreams
    that speak it (openai, azure-openai), and a model served over another wire format refuses it."""

    native_wire = COMPACT_WIRE

    def validate(self, body: Any, headers: Headers | None = None) -> tuple[str, bool]:
        model, stream = validate(body)
        if stream:
            raise invalid_request("'stream': a compaction is answered whole; leave 'stream' out")
        return model, False

    def read_typed(self, raw: bytes, headers: Headers) -> tuple[Any, str, bool] | None:
        return None  # an occasional call: the codec's own path

    def to_ir(self, body: dict[str, Any]) -> ChatRequest:
        raise invalid_request(
            f"'{shown(str(body.get('model')))}' cannot compact: POST /v1/responses/compact needs a channel that "
            "speaks the Responses API (openai, azure-openai), whose compaction item only that vendor reads; "
            "compact the conversation on the client instead")
