"""A fake Ollama server speaking the native API: POST /api/chat (NDJSON streams,
streaming by default as the real server does) and GET /api/tags.

No auth by default, like a local Ollama; with `api_key` set it requires
`Authorization: Bearer` as ollama.com does. The "model" echoes the last user
text, or calls the first tool with `tool_args` when tools are given and the
last message is not a tool result.
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from tests.fakes.upstream_base import FakeUpstream, json_response

CREATED_AT = "2025-01-01T12:00:00.123456789Z"


class FakeOllama(FakeUpstream):
    def __init__(self, models: tuple[str, ...] = ("llama3.2:latest",), api_key: str | None = None) -> None:
        super().__init__()
        self.models = list(models)
        self.api_key = api_key
        self.tool_args: dict[str, Any] = {"city": "Paris"}

    @property
    def base_url(self) -> str:
        return self.origin

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/api/chat", self._chat)
        app.router.add_get("/api/tags", self._tags)

    def _auth(self, request: web.Request) -> web.Response | None:
        if self.api_key and request.headers.get("authorization") != f"Bearer {self.api_key}":
            return json_response({"error": "unauthorized"}, 401)
        return None

    def _known(self, name: str) -> bool:
        return name in self.models or f"{name}:latest" in self.models

    async def _tags(self, request: web.Request) -> web.Response:
        if (denied := self._auth(request)) is not None:
            return denied
        return json_response({"models": [
            {"name": m, "model": m, "modified_at": CREATED_AT, "size": 2019393189, "digest": "a80c4f17acd5",
             "details": {"format": "gguf", "family": "llama", "parameter_size": "3.2B", "quantization_level": "Q4_K_M"}}
            for m in self.models
        ]})

    def _answer(self, body: dict[str, Any]) -> dict[str, Any]:
        last = body["messages"][-1]
        if body.get("tools") and last["role"] != "tool":
            return {"role": "assistant", "content": "",
                    "tool_calls": [{"function": {"name": body["tools"][0]["function"]["name"], "arguments": self.tool_args}}]}
        if last["role"] == "tool":
            return {"role": "assistant", "content": f"{last.get('tool_name', '?')} said {last['content']}"}
        extra = f" [{len(last['images'])} image(s)]" if last.get("images") else ""
        return {"role": "assistant", "content": f"Echo: {last['content']}{extra}"}

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        if (denied := self._auth(request)) is not None:
            return denied
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            return json_response({"error": "invalid character 'x' looking for beginning of value"}, 400)
        model = body.get("model")
        if not model:
            return json_response({"error": "model is required"}, 400)
        if not self._known(model):
            return json_response({"error": f'model "{model}" not found, try pulling it first'}, 404)
        message = self._answer(body)
        prompt = len(orjson.dumps(body["messages"])) // 4
        evals = max(1, len(orjson.dumps(message)) // 4)
        num_predict = (body.get("options") or {}).get("num_predict")
        done_reason = "stop"
        if num_predict is not None and evals > num_predict:
            done_reason = "length"
        final = {"model": model, "created_at": CREATED_AT, "done": True, "done_reason": done_reason,
                 "total_duration": 4883583458, "load_duration": 1334875, "prompt_eval_count": prompt,
                 "prompt_eval_duration": 342546000, "eval_count": evals, "eval_duration": 4535599000}
        if not body.get("stream", True):
            return json_response({**final, "message": message})
        lines: list[bytes] = []
        if message.get("tool_calls"):
            lines.append(orjson.dumps({"model": model, "created_at": CREATED_AT, "message": message, "done": False}) + b"\n")
        else:
            words = message["content"].split(" ")
            for i, word in enumerate(words):
                piece = word + (" " if i < len(words) - 1 else "")
                lines.append(orjson.dumps({"model": model, "created_at": CREATED_AT,
                                           "message": {"role": "assistant", "content": piece}, "done": False}) + b"\n")
        lines.append(orjson.dumps({**final, "message": {"role": "assistant", "content": ""}}) + b"\n")
        return await self.write_stream(request, lines, "application/x-ndjson")
