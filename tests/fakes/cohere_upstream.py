"""A fake Cohere API: POST /v2/chat (JSON or typed SSE events) and GET /v1/models.

Auth is `Authorization: Bearer <key>`; a wrong key gets 401
{"id": ..., "message": "invalid api token"} as Cohere answers. The "model"
echoes the last user text, or (tools given, last turn not a tool result)
writes a tool plan and calls the first tool with `tool_args`.
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from tests.fakes.upstream_base import FakeUpstream, json_response


def cohere_error(message: str) -> dict[str, Any]:
    return {"id": "2c4a8e52-11b4-4d8e-a5b3-5a6f0d0c1a77", "message": message}


class FakeCohere(FakeUpstream):
    def __init__(self, api_key: str = "co-test-key", models: tuple[str, ...] = ("command-a-03-2025",)) -> None:
        super().__init__()
        self.api_key = api_key
        self.models = list(models)
        self.tool_args: dict[str, Any] = {"city": "Paris"}

    @property
    def base_url(self) -> str:
        return self.origin

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v2/chat", self._chat)
        app.router.add_get("/v1/models", self._models)

    def _auth(self, request: web.Request) -> web.Response | None:
        auth = request.headers.get("authorization", "")
        if not auth.startswith("Bearer ") or auth[7:] != self.api_key:
            return json_response(cohere_error("invalid api token"), 401)
        return None

    async def _models(self, request: web.Request) -> web.Response:
        if (denied := self._auth(request)) is not None:
            return denied
        models = [{"name": m, "endpoints": ["chat"], "finetuned": False, "context_length": 256000}
                  for m in self.models]
        if request.query.get("endpoint") != "chat":
            models.append({"name": "embed-v4.0", "endpoints": ["embed"], "finetuned": False})
        return json_response({"models": models})

    def _answer(self, body: dict[str, Any]) -> dict[str, Any]:
        last = body["messages"][-1]
        if body.get("tools") and last["role"] != "tool" and body.get("tool_choice") != "NONE":
            name = body["tools"][0]["function"]["name"]
            return {"tool_plan": f"I will call {name}.", "tool_calls": [
                {"id": f"{name}_9rj5gzxzx0yv", "type": "function",
                 "function": {"name": name, "arguments": orjson.dumps(self.tool_args).decode()}}]}
        if last["role"] == "tool":
            return {"content": [{"type": "text", "text": f"The tool said {last['content']}"}]}
        content = last["content"]
        text = content if isinstance(content, str) else " ".join(c.get("text", "") for c in content)
        return {"content": [{"type": "text", "text": f"Echo: {text}"}]}

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        if (denied := self._auth(request)) is not None:
            return denied
        try:
            body = orjson.loads(await request.read())
            assert isinstance(body["messages"], list) and body["messages"]
        except (orjson.JSONDecodeError, KeyError, AssertionError):
            return json_response(cohere_error("invalid request: messages must not be empty"), 400)
        model = body.get("model")
        if model not in self.models:
            return json_response(cohere_error(
                f"model '{model}' not found, make sure the correct model ID was used and that you have access to the model."), 404)
        answer = self._answer(body)
        finish = "TOOL_CALL" if "tool_calls" in answer else "COMPLETE"
        in_tokens = len(orjson.dumps(body["messages"])) // 4
        out_tokens = max(1, len(orjson.dumps(answer)) // 4)
        usage = {"billed_units": {"input_tokens": in_tokens, "output_tokens": out_tokens},
                 "tokens": {"input_tokens": in_tokens + 200, "output_tokens": out_tokens + 2}}
        msg_id = "c14c80c3-18eb-4519-9460-6c92edd8cfb4"
        if not body.get("stream"):
            return json_response({"id": msg_id, "finish_reason": finish,
                                  "message": {"role": "assistant", **answer}, "usage": usage})

        def ev(kind: str, data: dict[str, Any]) -> bytes:
            return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps({"type": kind, **data}) + b"\n\n"

        frames = [ev("message-start", {"id": msg_id, "delta": {"message": {
            "role": "assistant", "content": [], "tool_plan": "", "tool_calls": [], "citations": []}}})]
        if "tool_calls" in answer:
            for word in answer["tool_plan"].split(" "):
                frames.append(ev("tool-plan-delta", {"delta": {"message": {"tool_plan": word + " "}}}))
            call = answer["tool_calls"][0]
            frames.append(ev("tool-call-start", {"index": 0, "delta": {"message": {"tool_calls": {
                "id": call["id"], "type": "function", "function": {"name": call["function"]["name"], "arguments": ""}}}}}))
            args = call["function"]["arguments"]
            for i in range(0, len(args), 4):
                frames.append(ev("tool-call-delta", {"index": 0, "delta": {"message": {"tool_calls": {
                    "function": {"arguments": args[i : i + 4]}}}}}))
            frames.append(ev("tool-call-end", {"index": 0}))
        else:
            frames.append(ev("content-start", {"index": 0, "delta": {"message": {"content": {"type": "text", "text": ""}}}}))
            words = answer["content"][0]["text"].split(" ")
            for i, word in enumerate(words):
                piece = word + (" " if i < len(words) - 1 else "")
                frames.append(ev("content-delta", {"index": 0, "delta": {"message": {"content": {"text": piece}}}}))
            frames.append(ev("content-end", {"index": 0}))
        frames.append(ev("message-end", {"delta": {"finish_reason": finish, "usage": usage}}))
        return await self.write_stream(request, frames, "text/event-stream")
